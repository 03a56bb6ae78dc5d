/* kernels/cpu/conv_wgrad.c — the float32 weight-gradient as one outer-product kernel over grad_output's
 * channels (AVX-512), for layers of 16, 32, 64, ... output channels (one group) and 16 or more input channels:
 * any kernel size, stride, padding, dilation and input strides; no im2col and no gemm.
 *
 * Why: the gemm route (conv.c) builds the im2col columns of every item and OpenBLAS packs them again for each
 * chunk of CONV_KCHUNK positions; with K = 64 each packed element then serves only 64 multiply-adds. On the
 * 7x7/2 64->64 layer (56x56) packing and im2col took as long as half the arithmetic (perf: sgemm_incopy 18 %,
 * im2col 14 %, kernel 35 %; 95 GFLOP/s on one thread). The direct kernel (conv_direct.c) keeps its sums in
 * lanes of positions and reduces them at the end, and re-reads grad_output per tap row (103 on the 3x3 64->64
 * 56x56 layer).
 *
 * The map: grad_output is first transposed to dT (block of 16 KV output channels, position, 16 KV; KV = 4
 * where K allows, else 2 or 1): a position's block is KV consecutive vectors. dW[k, c, r, s] = sum over
 * positions of dT[pos, k] * x[c, p*sh - ph + r*dh, q*sw - pw + s*dw], so for one tap and a block of CB input
 * channels the kernel loads KV vectors of dT per position, broadcasts CB input values (any address: stride,
 * dilation and strided input cost nothing) and runs KV CB multiply-adds, the KV x CB = 24 sums in registers
 * (CB = 6, 12, 24; a tail of channels in smaller blocks). Taps that fall into the padding are skipped by
 * clipping each output row's range of q (valid_cols), not masked. One thread, CPU time: 3x3 64->64 56x56
 * 103 -> 160-190 GFLOP/s, 7x7/2 64->64 95 -> 170-197, 1x1 128->128 28x28 134 -> 150-166, 3x3 32->32 32x32
 * 97-112 -> 152, 3x3 16->16 64x64 88-98 -> 101 (sgemm ~150-160 on the same core).
 *
 * Accuracy: a tap's sums are added onto the unit's block every WG_PCHUNK (<= CONV_KCHUNK) output positions, as
 * conv_gemm_f32 adds a chunk's product: the same chunked sum as the gemm route (tests/test_conv_routes_wgrad.py:
 * 0.05 units of 2^-24 from float64 on 9216 terms, against the direct kernel's 0.12 and PyTorch's 0.47).
 *
 * Work: items go through dT in groups (wg_plan: nb whole items, or a slice of one item's positions; about
 * WG_DT_TARGET bytes, the only workspace): the threads transpose the group, then share its units. A unit is
 * (m blocks of CB input channels, block of 16 KV output channels, every row of taps that fits its stack block);
 * it runs over the group's positions in chunks of WG_PCHUNK (dT's chunk, up to 16 KiB, stays in L1 across the m
 * blocks and R S taps), its sums in a block on its stack, stored into (first group) or added onto dW once at the
 * end, in contiguous runs of dW's rows: units own disjoint weights, so no atomics, no partial copies of dW and
 * (whole rows of taps) no cache line written by two cores at once. Where the blocks of output channels split
 * evenly over the threads, each thread transposes and runs its own blocks, and no thread waits for another.
 * The whole file is compiled for AVX-512; conv.c calls in only after conv_wgrad_use. */
#include "conv_internal.h"

#pragma GCC target("avx512f")
#include <immintrin.h>

#define WG_PCHUNK 64                      /* positions per chunk of a sum (at most CONV_KCHUNK) */
#define WG_DT_TARGET ((size_t)1 << 20)    /* bytes of dT a group of items aims at */
#define WG_MAXS 16                        /* the most taps per row of the kernel */
#define WG_MIN_POS 256                    /* the fewest positions per group of items (wg_plan) */
#define WG_BLK_FLOATS (24 * 1024)         /* a unit's block of sums on its thread's stack: 96 KiB */

int conv_wgrad_use(const conv_geom *g) {
    static int avx512 = -1;
    if (avx512 < 0) avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
    if (!avx512 || g->G != 1) return 0;
    /* blocks of 16, 32 or 64 output channels without padding lanes; a unit's block of sums (at most
     * max(4, S) x 24 x 16 floats) lives on the stack */
    /* A 1x1 layer's items need 256 positions or more: on smaller maps the pointwise gemm (no copies) stays
     * ahead, each unit's sums being added onto dW per item group and its chunks cut at every item (batch 8,
     * one thread: 512->512 at 7x7 63 % of sgemm against 88 %, 256->512 1x1/2 at 28x28 47 % against 67 %;
     * 128->128 at 28x28 93 % against 79 %). */
    if (g->R * g->S == 1 && g->P * g->Q < WG_MIN_POS) return 0;
    return g->K % 16 == 0 && g->C >= 16 && g->S <= WG_MAXS;
}

/* How the positions go through dT: groups of nb whole items (plen = P*Q) when an item's grad_output fits the
 * target, else slices of plen positions of one item (a multiple of 16); both within `budget`. 0 (the other
 * routes run): fewer than WG_MIN_POS positions per group. */
static int64_t wg_plan(const conv_geom *g, size_t budget, int64_t *plen) {
    const int64_t PQ = g->P * g->Q;
    const size_t pos = (size_t)g->K * sizeof(float), item = (size_t)PQ * pos;
    const size_t target = budget < WG_DT_TARGET ? budget : WG_DT_TARGET;
    if (g->N == 0 || item == 0 || g->C * g->R * g->S == 0) return 0;
    if (item <= target) {
        /* a unit adds its sums onto dW once per group: with fewer than WG_MIN_POS positions per group that
         * cost a quarter of the arithmetic or more (512->512 at 7x7, batch 2: 106 GFLOP/s against the gemm
         * route's 128; 256->1024 1x1 at 14x14, where one item fills the target: 106 against 164) */
        const int64_t nb = min64(g->N, (int64_t)(target / item));
        *plen = PQ;
        return nb * PQ >= WG_MIN_POS ? nb : 0;
    }
    *plen = (int64_t)(target / pos) / 16 * 16;
    return *plen >= WG_MIN_POS ? 1 : 0;
}

int conv_wgrad_fits(const conv_geom *g, size_t budget) {
    int64_t plen;
    return wg_plan(g, budget, &plen) > 0;
}

size_t conv_wgrad_ws_nbytes(const conv_geom *g, size_t limit) {
    int64_t plen = 0, nb = wg_plan(g, limit, &plen);
    return (size_t)(nb * plen * g->K) * sizeof(float);
}

/* Sums of one tap for CB input channels x 16 KV output channels over output positions [s0, s1) of one item:
 * dT at position s0 (rows Kp = 16 KV apart), x at the item's channel c0 plane (planes xs1 apart); added onto
 * dwt (channel rows ldc apart). h0 = -ph + r*dh, off = -pw + s*dw. KV CB = 24 sums in registers. */
#define WG_TAP(KV, CB)                                                                                           \
    static void wg_tap_##KV##_##CB(float *dwt, int64_t ldc, const float *dt, int64_t Kp, const float *x,       \
                                   int64_t xs1, const conv_geom *g, int64_t h0, int64_t off, int64_t s0,        \
                                   int64_t s1) {                                                                \
        const int64_t Q = g->Q, xs2 = g->xs[2], step = g->sw * g->xs[3];                                         \
        int64_t qa, qb;                                                                                          \
        valid_cols(off, g->sw, g->W, Q, &qa, &qb);                                                               \
        __m512 acc[CB][KV];                                                                                      \
        _Pragma("GCC unroll 24") for (int i = 0; i < CB; i++)                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < KV; v++) acc[i][v] = _mm512_setzero_ps();              \
        const int64_t pa = s0 / Q, pe = (s1 - 1) / Q;                                                           \
        /* whole rows, all inside the image, each row's input right after the previous one's (a 1x1 layer, the \
         * middle column of a 3x3): the chunk is one run of positions, no per-row start-up (14- and 28-long rows) */ \
        const int one = qa == 0 && qb == Q && xs2 * g->sh == Q * step && pa * g->sh + h0 >= 0 &&                 \
                        pe * g->sh + h0 < g->H;                                                                  \
        for (int64_t p = pa; p <= pe; p++) {                                                                     \
            const int64_t h = p * g->sh + h0;                                                                    \
            if (h < 0 || h >= g->H) continue;                                                                    \
            const int64_t lo = max64(qa, s0 - p * Q), hi = one ? s1 - p * Q : min64(qb, s1 - p * Q);            \
            const float *a = dt + (p * Q + lo - s0) * Kp;                                                        \
            const float *xp = x + h * xs2 + (lo * g->sw + off) * g->xs[3];                                       \
            if (one) p = pe;                                                                                     \
            for (int64_t q = lo; q < hi; q++, a += Kp, xp += step) {                                             \
                __m512 av[KV];                                                                                   \
                _Pragma("GCC unroll 4") for (int v = 0; v < KV; v++) av[v] = _mm512_loadu_ps(a + 16 * v);       \
                _Pragma("GCC unroll 24") for (int i = 0; i < CB; i++) {                                         \
                    const __m512 b = _mm512_set1_ps(xp[i * xs1]);                                                \
                    _Pragma("GCC unroll 4") for (int v = 0; v < KV; v++)                                        \
                        acc[i][v] = _mm512_fmadd_ps(av[v], b, acc[i][v]);                                        \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        _Pragma("GCC unroll 24") for (int i = 0; i < CB; i++)                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < KV; v++) {                                              \
                float *d = dwt + i * ldc + 16 * v;                                                               \
                _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), acc[i][v]));                               \
            }                                                                                                    \
    }
WG_TAP(4, 6)
WG_TAP(4, 5)
WG_TAP(4, 4)
WG_TAP(4, 3)
WG_TAP(4, 2)
WG_TAP(4, 1)
WG_TAP(2, 12)
WG_TAP(2, 6)
WG_TAP(2, 3)
WG_TAP(2, 2)
WG_TAP(2, 1)
WG_TAP(1, 24)
WG_TAP(1, 16)
WG_TAP(1, 12)
WG_TAP(1, 8)
WG_TAP(1, 6)
WG_TAP(1, 3)
WG_TAP(1, 2)
WG_TAP(1, 1)

typedef void (*wg_tap_fn)(float *, int64_t, const float *, int64_t, const float *, int64_t, const conv_geom *,
                          int64_t, int64_t, int64_t, int64_t);
/* per KV (1, 2, 4): the blocks of input channels a kernel takes, largest first (a tail is split greedily) */
typedef struct {
    int cb;
    wg_tap_fn fn;
} wg_kernel;
static const wg_kernel wg_k4[] = {{6, wg_tap_4_6}, {5, wg_tap_4_5}, {4, wg_tap_4_4}, {3, wg_tap_4_3},
                                  {2, wg_tap_4_2}, {1, wg_tap_4_1}};
static const wg_kernel wg_k2[] = {{12, wg_tap_2_12}, {6, wg_tap_2_6}, {3, wg_tap_2_3}, {2, wg_tap_2_2},
                                  {1, wg_tap_2_1}};
static const wg_kernel wg_k1[] = {{24, wg_tap_1_24}, {16, wg_tap_1_16}, {12, wg_tap_1_12}, {8, wg_tap_1_8},
                                  {6, wg_tap_1_6}, {3, wg_tap_1_3}, {2, wg_tap_1_2}, {1, wg_tap_1_1}};

/* vectors of output channels per block: 4 where K allows, else 2 or 1 (K a multiple of 16) */
static int wg_kv(const conv_geom *g) { return g->K % 64 == 0 ? 4 : g->K % 32 == 0 ? 2 : 1; }

/* dst (nc rows ldd apart, nr columns) = the transpose of src (nr <= 16 rows lds apart, nc <= 16 columns): unpack
 * pairs of rows, then pairs of pairs, then the 128-bit lanes of four rows (a scalar copy cost a quarter of the
 * kernel's time on the 1x1 128->128 layer, whose sums are only 128 terms per position). */
static inline void transpose16(float *dst, int64_t ldd, const float *src, int64_t lds, int nr, int nc) {
    const __mmask16 mc = (__mmask16)((1u << nc) - 1), mr = (__mmask16)((1u << nr) - 1);
    __m512 r[16], t[16], u[16];
    for (int i = 0; i < 16; i++) r[i] = i < nr ? _mm512_maskz_loadu_ps(mc, src + i * lds) : _mm512_setzero_ps();
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int gq = 0; gq < 4; gq++) { /* u[4 gq + c], lane L: column 4L + c of rows 4 gq .. 4 gq + 3 */
        const __m512d a = _mm512_castps_pd(t[4 * gq]), b = _mm512_castps_pd(t[4 * gq + 2]);
        const __m512d c = _mm512_castps_pd(t[4 * gq + 1]), d = _mm512_castps_pd(t[4 * gq + 3]);
        u[4 * gq] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * gq + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * gq + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        u[4 * gq + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int c = 0; c < 4; c++) {
        const __m512 vlo = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), vhi = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        const __m512 wlo = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
        const __m512 whi = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_f32x4(vlo, wlo, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(vlo, wlo, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(vhi, whi, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(vhi, whi, 0xDD);
    }
    for (int j = 0; j < nc; j++) _mm512_mask_storeu_ps(dst + j * ldd, mr, r[j]);
}

/* dT[i, kb, j, kk] = dout[n0 + i, kb*64 + kk, p0 + j] for cnt items and len positions, in blocks of 64 output
 * channels: a block's positions are 256 bytes apart (rows of all K channels, 1-4 KiB apart at K = 256-1024,
 * fell into two to eight sets of L1 and ran at 24-96 GFLOP/s). One piece: item i, block kb, positions j0..
 * A block (i, kb) has room for plen positions (the plan's, not this group's len): it lies at the same place in
 * every group, so a thread that owns its blocks never writes where another thread, a group behind, still reads
 * (with len the last, shorter slice's blocks overlapped a lagging thread's blocks of the slice before). */
static void transpose_piece(float *dT, const float *dout, const conv_geom *g, int64_t n0, int64_t p0, int64_t len,
                            int64_t plen, int64_t i, int64_t kb, int64_t j0) {
    const int64_t K = g->K, PQ = g->P * g->Q, kbw = 16 * wg_kv(g), nkb = K / kbw, n = min64(16, len - j0);
    const float *src = dout + ((n0 + i) * K + kb * kbw) * PQ + p0 + j0;
    float *dst = dT + (i * nkb + kb) * plen * kbw + j0 * kbw;
    for (int k = 0; k < kbw; k += 16) transpose16(dst + k, kbw, src + k * PQ, PQ, 16, (int)n);
}

/* The whole group, shared by the team (ends on the loop's barrier). */
static void transpose_dout(float *dT, const float *dout, const conv_geom *g, int64_t n0, int64_t cnt, int64_t p0,
                           int64_t len, int64_t plen) {
    const int64_t nblk = ceil_div64(len, 16), nkb = g->K / (16 * wg_kv(g));
#pragma omp for schedule(static)
    for (int64_t u = 0; u < cnt * nkb * nblk; u++)
        transpose_piece(dT, dout, g, n0, p0, len, plen, u / (nkb * nblk), u / nblk % nkb, u % nblk * 16);
}

/* d[kk * ldd + j] (+)= blk[j * kbw + kk] for kk < kbw (a multiple of 16), j < nrows: a block of sums, one row per
 * (channel, tap), added onto (or, first, stored into) the weight-gradient's rows of kbw output channels, where its
 * nrows columns are contiguous; in transposed 16x16 tiles (one scalar add per element, with its index arithmetic,
 * took 15 % of the 256->256 3x3 14x14 layer's time). */
static void flush_rows(float *d, int64_t ldd, const float *blk, int64_t kbw, int64_t nrows, int first) {
    float tmp[16 * 16] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < nrows; j0 += 16) {
        const int nr = (int)min64(16, nrows - j0);
        const __mmask16 mk = (__mmask16)((1u << nr) - 1);
        for (int64_t k0 = 0; k0 < kbw; k0 += 16) {
            transpose16(tmp, 16, blk + j0 * kbw + k0, kbw, nr, 16);
            for (int kk = 0; kk < 16; kk++) {
                float *p = d + (k0 + kk) * ldd + j0;
                __m512 v = _mm512_maskz_load_ps(mk, tmp + kk * 16);
                if (!first) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, p));
                _mm512_mask_storeu_ps(p, mk, v);
            }
        }
    }
}

/* What every unit of a pass shares. */
typedef struct {
    const conv_geom *g;
    const wg_kernel *kern;
    int64_t kbw, cu, rr, ncb, nkb, plen; /* plen: positions per block of dT (transpose_piece) */
} wg_pass;

/* Unit (row block rb, channel block cb, output block kb) over the group of cnt items from n0, positions [p0, p1)
 * (dT of the group at ws): its sums on the stack, then stored into dW (first group) or added. */
static void run_unit(float *dw, const float *x, const float *ws, const wg_pass *w, int64_t rb, int64_t cblk,
                     int64_t kb, int64_t n0, int64_t cnt, int64_t p0, int64_t p1, int first) {
    const conv_geom *g = w->g;
    const int64_t C = g->C, R = g->R, S = g->S, RS = R * S, CRS = C * RS, kbw = w->kbw;
    const int64_t r0 = rb * w->rr, c0 = cblk * w->cu, r1 = min64(R, r0 + w->rr), c1 = min64(C, c0 + w->cu);
    const int64_t nr = r1 - r0, ldc = nr * S * kbw;
    /* the unit's sums over this group, row (channel c, tap row r, tap s) of kbw output channels */
    float blk[WG_BLK_FLOATS] __attribute__((aligned(64)));
    memset(blk, 0, (size_t)((c1 - c0) * ldc) * sizeof(float));
    for (int64_t i = 0; i < cnt; i++) {
        const float *dti = ws + (i * w->nkb + kb) * w->plen * kbw;
        for (int64_t s0 = p0; s0 < p1; s0 += WG_PCHUNK) {
            const int64_t s1 = min64(p1, s0 + WG_PCHUNK);
            for (int64_t c = c0, cb; c < c1; c += cb) {
                const wg_kernel *k = w->kern;
                while (k->cb > c1 - c) k++;
                cb = k->cb;
                const float *xc = x + (n0 + i) * g->xs[0] + c * g->xs[1];
                for (int64_t r = r0; r < r1; r++)
                    for (int64_t s = 0; s < S; s++)
                        k->fn(blk + (c - c0) * ldc + ((r - r0) * S + s) * kbw, ldc, dti + (s0 - p0) * kbw, kbw, xc,
                              g->xs[1], g, r * g->dh - g->ph, s * g->dw - g->pw, s0, s1);
            }
        }
    }
    /* every element of dW belongs to one unit: the first group stores, no memset beforehand */
    float *d = dw + kb * kbw * CRS + c0 * RS + r0 * S;
    if (nr == R)
        flush_rows(d, CRS, blk, kbw, (c1 - c0) * RS, first);
    else
        for (int64_t c = 0; c < c1 - c0; c++) flush_rows(d + c * RS, CRS, blk + c * ldc, kbw, nr * S, first);
}

void conv_wgrad_backward_weight(float *dw, const float *dout, const float *x, const conv_geom *g, float *ws,
                                size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, C = g->C, K = g->K, R = g->R, S = g->S, PQ = g->P * g->Q;
    const int kv = wg_kv(g);
    int64_t plen = 0;
    wg_pass w;
    w.g = g;
    w.kern = kv == 4 ? wg_k4 : kv == 2 ? wg_k2 : wg_k1;
    /* a unit takes m blocks of input channels, so that dT's chunk serves at least 4 (block, tap) pairs while it
     * is in L1: a 1x1 layer's chunk otherwise came from L2 for each block's single tap */
    const int64_t m = max64(1, 4 / S);
    w.kbw = 16 * kv, w.cu = m * w.kern[0].cb;
    /* and rr rows of taps, all R where its block of sums fits WG_BLK_FLOATS (cu S kbw <= max(4, S) 384 <=
     * 6144 floats a row): a unit then owns whole contiguous runs of dW's rows. Units of one row each (as before)
     * wrote interleaved floats of the same cache lines, which bounced between the cores: the 256->256 3x3 layer at
     * 14x14, batch 2, ran at 1.17x its one-thread speed on two (2.49 ms), 1.70x (1.69 ms) with whole rows. */
    const int64_t nrb = ceil_div64(R, WG_BLK_FLOATS / (w.cu * S * w.kbw));
    w.rr = ceil_div64(R, nrb);
    const int64_t nb = wg_plan(g, ws_nbytes, &plen);
    w.ncb = ceil_div64(C, w.cu), w.nkb = K / w.kbw, w.plen = plen;
    const int64_t units = nrb * w.ncb * w.nkb, nslice = ceil_div64(PQ, plen), ngrp = ceil_div64(N, nb) * nslice;
    const double macs = (double)N * (double)K * (double)PQ * (double)(C * R * S);
    const int nt = nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1;
    /* Where the blocks of output channels split evenly, each thread owns its blocks: it transposes their part of
     * grad_output and runs their units, and the threads never wait for each other. The shared transposition ends
     * on a barrier, and a thread asleep there (OMP_WAIT_POLICY=PASSIVE) could wake after the other had run every
     * unit: the 1x1 128->128 28x28 layer, batch 2 (12 units of ~25 us), ran all 12 on one thread, 0.31 ms on two
     * threads against 0.30 on one. */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* the team OpenMP gave (fewer than nt inside another parallel region or under a thread limit) */
        const int64_t t = omp_get_thread_num(), tn = omp_get_num_threads();
        const int own = tn > 1 && w.nkb % tn == 0;
        for (int64_t grp = 0; grp < ngrp; grp++) {
            const int64_t n0 = grp / nslice * nb, cnt = min64(nb, N - n0), p0 = grp % nslice * plen;
            const int64_t p1 = min64(PQ, p0 + plen), len = p1 - p0, nblk = ceil_div64(len, 16);
            if (own) {
                for (int64_t kb = t; kb < w.nkb; kb += tn)
                    for (int64_t i = 0; i < cnt; i++)
                        for (int64_t j = 0; j < nblk; j++) transpose_piece(ws, dout, g, n0, p0, len, plen, i, kb, j * 16);
                for (int64_t kb = t; kb < w.nkb; kb += tn)
                    for (int64_t u = 0; u < nrb * w.ncb; u++)
                        run_unit(dw, x, ws, &w, u / w.ncb, u % w.ncb, kb, n0, cnt, p0, p1, grp == 0);
                continue;
            }
            transpose_dout(ws, dout, g, n0, cnt, p0, len, plen); /* ends on the loop's barrier */
            /* units: blocks of rows outermost, so that a (channel block, output block)'s row blocks, which share
             * cache lines of dW at their edges, do not run at the same time */
#pragma omp for schedule(dynamic)
            for (int64_t u = 0; u < units; u++)
                run_unit(dw, x, ws, &w, u / (w.ncb * w.nkb), u / w.nkb % w.ncb, u % w.nkb, n0, cnt, p0, p1, grp == 0);
        }
    }
}
