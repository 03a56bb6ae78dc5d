/* kernels/cpu/conv_winograd.c — Winograd F(2x2, 3x3) for float32 3x3 convolutions of stride 1, dilation 1 and
 * one group (forward and input-gradient) on CPUs with AVX-512.
 *
 * Why: a 2x2 block of outputs of one channel pair takes 16 multiplies in the transformed domain instead of 36,
 * so the arithmetic of a 3x3 layer shrinks 2.25x (less where the image's odd edge leaves part of a 4x4 tile
 * unused). The input-gradient of a 3x3 stride-1 conv is a 3x3 stride-1 correlation of grad_output with the
 * weight flipped in both taps and transposed (padding 2 - ph), so the same code serves both passes.
 *
 * How, per block of T tiles (a tile: 2x2 outputs of one item; tiles are numbered over (item, tile row, tile
 * column), so a block may span items, which keeps a deep layer's small image in long rows):
 *   U[e] (Co x Ci)  = G g G^T of every (out, in) channel pair, e = 0..15, once per call (transform_weight),
 *                     packed [e][8 output channels][Ci][8] for the inner loop's broadcasts;
 *   V[e] (Ci x T)   = B^T d B of each tile's 4x4 input patch (input_run);
 *   M[e] (Co x T)   = U[e] V[e], 16 products of (Co x Ci) by (Ci x T) (gemm_block: an 8 x 48 register tile
 *                     as conv_direct.c's, U already packed, so nothing is repacked per block as sgemm would);
 *   out             = A^T M A (+ bias), the 2x2 outputs of each tile (output_run).
 * The block's V and M stay in the thread's part of the workspace (per thread: about WINO_TILE_TARGET bytes,
 * at least 48 tiles), so they are read back from L2, and the workspace is U plus that, whatever the batch.
 * Two bounds keep it small beside the layer's output (it set eval peaks): U beyond WINO_U_CAP (up to twice it) is
 * made and used in two blocks of output channels (V made again for each), and where V holds every input channel
 * (at most 64) M holds only
 * the 8 rows of the register tile being computed.
 * U is 16/9 of the weight's bytes and is written afresh every call: with few tiles per weight (a deep layer at
 * a small image and batch) that transform costs more than the 2.25x saves; conv_plan.c's conv_winograd_use
 * says where it runs.
 *
 * Accuracy: the transforms add and subtract up to 9 terms (inputs, transformed products) and G has halves, so
 * each product carries a few more roundings than a direct one, and the transformed terms are larger than the
 * outputs they cancel into. Summed over the input channels in chunks of CONV_KCHUNK (128), as the gemm path
 * sums its C*9 terms, the rms error against float64 (He-initialised weights, ReLU or normal inputs, 64..512
 * channels, 3 seeds; tests/test_conv_winograd.py keeps four of the shapes) was 1.34-2.04x the direct/im2col
 * path's in the forward and 1.30-1.72x in the input-gradient; in chunks of 32, 1.00-1.32x and 1.01-1.30x, and
 * the drop-in comparison (tests/dropin, issue 12's 3x rule) then found 2 arrays of resnet18 and 3 of googlenet
 * beyond the rule (passing on conditioning) against 0 and 2 without Winograd. In chunks of WINO_KCHUNK = 16:
 * forward 0.86-1.33x, input-gradient 0.86-1.13x the direct/im2col path's, 0.80-1.38x PyTorch's (the largest at
 * 512 output channels), and resnet18 0, googlenet 1 arrays beyond the rule. Each chunk's flush of its sums onto
 * M costs time: chunks of 16 ran ~10-15 % slower than chunks of 128 (the speeds below are with 16).
 *
 * Speed (benchmarks/conv_gflops.py --only 3x3 --threads 1 --clock cpu --rounds 5, batch 8, with
 * GPUMEMNET_CONV_WINOGRAD=0 and unset, one after the other on the shared 2-core SkylakeX development machine
 * (load 12); effective GFLOP/s = the direct FLOPs over the time; share of that run's sgemm of the same FLOPs):
 *   forward          64->64 56x56 127 -> 194 (161 -> 241 %); 128->128 28x28 136 -> 227 (144 -> 243 %);
 *                    256->256 14x14 125 -> 215 (88 -> 149 %); 512->512 7x7 107 -> 135 (77 -> 96 %)
 *   input-gradient   131 -> 194 (166 -> 241 %); 139 -> 226 (148 -> 242 %); 129 -> 207 (91 -> 144 %);
 *                    107 -> 116 (77 -> 82 %)
 * In paired rounds (the two settings alternating in one process, one thread, CPU time) Winograd / direct-im2col
 * was 1.3-1.6x at 64..256 channels and 64 tiles or more (batch 2 at 56x56, 28x28, 14x14: 1.41 / 1.46x,
 * 1.55 / 1.62x, 1.35 / 1.34x forward / input-gradient; 64->64 at 8x8, batch 4, 64 tiles: 1.07 / 1.08x),
 * 1.33 / 1.05x at 512->512 7x7 batch 8 (128 tiles), and below 1 with few tiles per weight: 512->512 at 7x7
 * batch 2 1.10 / 0.61x, at 2x2 batch 4 0.4 / 0.3x (the weight's transform: U is 16 MiB there, written and read
 * from DRAM). conv_winograd_use takes it only where it won.
 */
#include "conv_internal.h"

#pragma GCC target("avx512f")
#include <immintrin.h>

#define WMR 8  /* output channels per register tile */
#define WNV 3  /* vectors of 16 tiles per register tile */
#define WVC 64 /* input channels of V at a time (a multiple of WINO_KCHUNK) */
#define WQB 16 /* pairs of input channels per block of the input-gradient's weight transform */
#define WINO_KCHUNK 16 /* terms of a running float32 sum over the input channels (see Accuracy above) */

/* The correlation the pass computes: out (N, Co, Ho, Wo, contiguous) from in (N, Ci, Hi, Wi; strides is[4],
 * unit column stride) with top/left padding pt, pl; the weight's element (o, i, r, s) at w[o*wso + i*wsi + tap]
 * with tap = r*3 + s, or 8 - that (flip). */
typedef struct {
    int64_t N, Ci, Co, Hi, Wi, Ho, Wo, pt, pl, is[4];
    int64_t wso, wsi;
    int flip;
    int64_t TH, TW, tiles;     /* tile rows and columns per item, tiles in all */
    int64_t T, ldv, nblocks, co8; /* tiles per block, a row of V or M (T rounded up to 16), blocks, Co to 8 */
    int64_t cb;                /* output channels (of co8) per block of U, a multiple of 8 */
    int64_t mrows;             /* rows of M: cb, or 8 where V holds every input channel (vc == Ci) */
    int64_t vc;                /* input channels V holds at a time */
    int nt;
    size_t u_floats, v_floats, m_floats; /* U; a thread's V and M */
} wino_plan;

/* A thread's V and M aim at this many bytes (in L2 between the transforms and the products), with at least
 * WINO_MIN_TILES tiles (one register tile of 48 columns). */
#define WINO_TILE_TARGET ((size_t)512 << 10)
#define WINO_MIN_TILES 48
/* U beyond this many bytes, up to twice it, is transformed and used in two blocks of output channels (a multiple
 * of 8 channels each, within the cap): the whole of a 256->256 layer's U (4 MiB) set the workspace at the peak
 * of VGG-11's eval step, beside 1 MiB of output. Each block makes the input's transform V again: two cost 0-5 %
 * at 256->256 14x14 batch 8 (within the spread), but eight blocks of a 512->512 layer's 16 MiB cost 15-25 %
 * (7x7 batch 8: 94-100 -> 77-82 % of sgemm forward, one thread, CPU time), so a U beyond twice the cap stays
 * whole. */
#define WINO_U_CAP ((size_t)2 << 20)

static int64_t round_up(int64_t a, int64_t b) { return ceil_div64(a, b) * b; }

static size_t floats_bytes(size_t n) { return ((n * sizeof(float)) + 63) & ~(size_t)63; }

static wino_plan make_plan(const conv_geom *g, conv_pass pass, int nthreads) {
    wino_plan p;
    memset(&p, 0, sizeof p);
    p.N = g->N;
    if (pass == CONV_FORWARD) {
        p.Ci = g->C, p.Co = g->K, p.Hi = g->H, p.Wi = g->W, p.Ho = g->P, p.Wo = g->Q, p.pt = g->ph, p.pl = g->pw;
        memcpy(p.is, g->xs, sizeof p.is);
        p.wso = g->C * 9, p.wsi = 9, p.flip = 0;
    } else { /* dx = correlation of dout (contiguous) with w[k][c] flipped, as (c, k) */
        p.Ci = g->K, p.Co = g->C, p.Hi = g->P, p.Wi = g->Q, p.Ho = g->H, p.Wo = g->W;
        p.pt = 2 - g->ph, p.pl = 2 - g->pw;
        p.is[3] = 1, p.is[2] = g->Q, p.is[1] = g->P * g->Q, p.is[0] = g->K * g->P * g->Q;
        p.wso = 9, p.wsi = g->C * 9, p.flip = 1;
    }
    p.TH = (p.Ho + 1) / 2, p.TW = (p.Wo + 1) / 2, p.tiles = p.N * p.TH * p.TW;
    p.co8 = round_up(p.Co, WMR);
    const size_t u_all = (size_t)(16 * p.co8 * p.Ci) * sizeof(float);
    p.cb = p.co8;
    if (u_all > WINO_U_CAP && u_all <= 2 * WINO_U_CAP) {
        p.cb = round_up(ceil_div64(p.co8, 2), WMR);
        while (p.cb > WMR && (size_t)(16 * p.cb * p.Ci) * sizeof(float) > WINO_U_CAP) p.cb -= WMR;
    }
    /* V holds WVC input channels at a time, M adding up their products, where M (16 x Co x T) stays in L2
     * between them; beyond 256 output channels it does not (512->512 at 7x7, batch 8: 1.38x -> 1.08x against the
     * direct path), so there V holds every channel and M each register tile's sums while it runs. */
    p.vc = p.cb <= 256 ? min64(p.Ci, WVC) : p.Ci;
    const size_t per_tile = (size_t)(16 * (p.vc + p.cb)) * sizeof(float);
    const int64_t cap = max64(WINO_MIN_TILES, (int64_t)(WINO_TILE_TARGET / per_tile) / 16 * 16);
    const double macs = 16.0 * (double)p.tiles * (double)p.Ci * (double)p.Co;
    p.nt = nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1;
    /* blocks of at most `cap` tiles, as many as a multiple of the threads where there are enough tiles */
    int64_t nb = max64(1, ceil_div64(p.tiles, cap));
    if (p.nt > 1) nb = min64(round_up(nb, p.nt), max64(1, ceil_div64(p.tiles, 16)));
    /* blocks of equal tiles (98 tiles at 2 threads: 25 + 25 | 25 + 23, not 32 + 32 | 32 + 2) in rows of whole
     * cache lines */
    p.T = max64(1, ceil_div64(p.tiles, nb));
    p.ldv = round_up(p.T, 16);
    p.nblocks = p.tiles ? ceil_div64(p.tiles, p.T) : 0;
    if (p.nt > p.nblocks) p.nt = (int)max64(1, p.nblocks);
    p.u_floats = (size_t)(16 * p.cb * p.Ci);
    p.v_floats = (size_t)(16 * p.vc * p.ldv);
    /* where V holds every input channel, up to WVC, a register tile's 8 rows of M are whole after one product and
     * go straight to the output transform: M holds those 8 (in L1), not cb rows (a 64->128 layer at 32x32, batch
     * 4: 384 KiB a thread, which put the workspace over the small pool's 1 MiB). Not the 512->512 layers whose V
     * holds all 512 channels: 7x7 batch 8 measured 0-6 % slower so. */
    p.mrows = p.vc == p.Ci && p.Ci <= WVC ? WMR : p.cb;
    p.m_floats = (size_t)(16 * p.mrows * p.ldv);
    return p;
}

size_t conv_winograd_ws_nbytes(const conv_geom *g, conv_pass pass, int nthreads) {
    const wino_plan p = make_plan(g, pass, nthreads);
    return floats_bytes(p.u_floats) + (size_t)p.nt * (floats_bytes(p.v_floats) + floats_bytes(p.m_floats));
}

/* ---- U = G g G^T, 16 (out, in) channel pairs at a time: lanes (8 output channels) x (2 input channels) ------
 * Row block rb (output channels 8 rb..) into U's block of output channels that starts at row block rb0. */
static void transform_weight(float *U, const float *w, const wino_plan *p, int64_t rb, int64_t rb0, int64_t q0) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i o = _mm512_add_epi32(_mm512_set1_epi32((int)(rb * WMR)), _mm512_and_si512(lane, _mm512_set1_epi32(7)));
    const __m512i i = _mm512_add_epi32(_mm512_set1_epi32((int)q0), _mm512_srli_epi32(lane, 3));
    /* st: the lanes of a real input channel (an odd Ci's last pair stores one: the next block follows) */
    const __mmask16 st = _mm512_cmplt_epi32_mask(i, _mm512_set1_epi32((int)p->Ci));
    const __mmask16 ok = _mm512_cmplt_epi32_mask(o, _mm512_set1_epi32((int)p->Co)) & st;
    const __m512i base = _mm512_add_epi32(_mm512_mullo_epi32(o, _mm512_set1_epi32((int)p->wso)),
                                          _mm512_mullo_epi32(i, _mm512_set1_epi32((int)p->wsi)));
    __m512 gv[9];
    for (int t = 0; t < 9; t++) {
        const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(p->flip ? 8 - t : t));
        gv[t] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), ok, idx, w, 4);
    }
    const __m512 half = _mm512_set1_ps(0.5f);
    __m512 a[4][3]; /* G g */
    for (int s = 0; s < 3; s++) {
        const __m512 g0 = gv[s], g1 = gv[3 + s], g2 = gv[6 + s], g02 = _mm512_add_ps(g0, g2);
        a[0][s] = g0;
        a[1][s] = _mm512_mul_ps(half, _mm512_add_ps(g02, g1));
        a[2][s] = _mm512_mul_ps(half, _mm512_sub_ps(g02, g1));
        a[3][s] = g2;
    }
    const size_t es = (size_t)(p->cb * p->Ci);
    float *dst = U + (rb - rb0) * WMR * p->Ci + q0 * WMR;
    for (int r = 0; r < 4; r++) {
        const __m512 a02 = _mm512_add_ps(a[r][0], a[r][2]);
        _mm512_mask_storeu_ps(dst + (r * 4 + 0) * es, st, a[r][0]);
        _mm512_mask_storeu_ps(dst + (r * 4 + 1) * es, st, _mm512_mul_ps(half, _mm512_add_ps(a02, a[r][1])));
        _mm512_mask_storeu_ps(dst + (r * 4 + 2) * es, st, _mm512_mul_ps(half, _mm512_sub_ps(a02, a[r][1])));
        _mm512_mask_storeu_ps(dst + (r * 4 + 3) * es, st, a[r][2]);
    }
}

/* Lanes l of a load at column s of a row of width W that fall inside [0, W). */
static inline __mmask16 col_mask(int64_t s, int64_t W) {
    const int64_t lo = max64(0, -s), hi = min64(16, W - s);
    if (hi <= lo) return 0;
    return (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
}

static inline __mmask16 lanes(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* Tiles [t0, t0 + cnt) of the pass, visited as runs along one tile row: fn(n, ty, tx, len, j) with j the run's
 * first column in the block. */
#define FOR_RUNS(p, t0, cnt, BODY)                                                                               \
    for (int64_t t_ = (t0), end_ = (t0) + (cnt); t_ < end_;) {                                                   \
        const int64_t n = t_ / ((p)->TH * (p)->TW), ty = t_ / (p)->TW % (p)->TH, tx = t_ % (p)->TW;             \
        const int64_t len = min64((p)->TW - tx, end_ - t_), j = t_ - (t0);                                      \
        BODY;                                                                                                    \
        t_ += len;                                                                                               \
    }

/* V[e][c][j + u] = (B^T d B)[e] of the 4x4 patch of tile (n, ty, tx + u), u < len, every input channel. */
static void input_run(float *V, int64_t ldv, const float *in, const wino_plan *p, int64_t c0, int64_t c1, int64_t n,
                      int64_t ty, int64_t tx, int64_t len, int64_t j) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const size_t es = (size_t)(p->vc * ldv);
    for (int64_t u0 = 0; u0 < len; u0 += 16) {
        const int64_t s0 = 2 * (tx + u0) - p->pl;
        const __mmask16 m0 = col_mask(s0, p->Wi), m1 = col_mask(s0 + 16, p->Wi), m2 = col_mask(s0 + 2, p->Wi),
                        m3 = col_mask(s0 + 18, p->Wi), sm = lanes(len - u0);
        int64_t rows[4];
        for (int r = 0; r < 4; r++) rows[r] = 2 * ty - p->pt + r;
        for (int64_t c = c0; c < c1; c++) {
            const float *src = in + n * p->is[0] + c * p->is[1];
            __m512 d[4][4];
            for (int r = 0; r < 4; r++) {
                if (rows[r] < 0 || rows[r] >= p->Hi) {
                    d[r][0] = d[r][1] = d[r][2] = d[r][3] = _mm512_setzero_ps();
                    continue;
                }
                const float *row = src + rows[r] * p->is[2] + s0;
                const __m512 a = _mm512_maskz_loadu_ps(m0, row), b = _mm512_maskz_loadu_ps(m1, row + 16);
                const __m512 a2 = _mm512_maskz_loadu_ps(m2, row + 2), b2 = _mm512_maskz_loadu_ps(m3, row + 18);
                d[r][0] = _mm512_permutex2var_ps(a, even, b);
                d[r][1] = _mm512_permutex2var_ps(a, odd, b);
                d[r][2] = _mm512_permutex2var_ps(a2, even, b2);
                d[r][3] = _mm512_permutex2var_ps(a2, odd, b2);
            }
            __m512 x[4][4]; /* B^T d */
            for (int s = 0; s < 4; s++) {
                x[0][s] = _mm512_sub_ps(d[0][s], d[2][s]);
                x[1][s] = _mm512_add_ps(d[1][s], d[2][s]);
                x[2][s] = _mm512_sub_ps(d[2][s], d[1][s]);
                x[3][s] = _mm512_sub_ps(d[1][s], d[3][s]);
            }
            float *dst = V + (c - c0) * ldv + j + u0;
            for (int r = 0; r < 4; r++) {
                _mm512_mask_storeu_ps(dst + (r * 4 + 0) * es, sm, _mm512_sub_ps(x[r][0], x[r][2]));
                _mm512_mask_storeu_ps(dst + (r * 4 + 1) * es, sm, _mm512_add_ps(x[r][1], x[r][2]));
                _mm512_mask_storeu_ps(dst + (r * 4 + 2) * es, sm, _mm512_sub_ps(x[r][2], x[r][1]));
                _mm512_mask_storeu_ps(dst + (r * 4 + 3) * es, sm, _mm512_sub_ps(x[r][1], x[r][3]));
            }
        }
    }
}

/* out[n][o] 2x2 blocks of tiles (n, ty, tx + u) = (A^T M A)[e] + bias, output channels [o0, o1) (M's rows from
 * o0). */
static void output_run(float *out, const float *M, int64_t ldm, const float *bias, const wino_plan *p, int64_t o0,
                       int64_t o1, int64_t n, int64_t ty, int64_t tx, int64_t len, int64_t j) {
    const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const size_t es = (size_t)(p->mrows * ldm);
    const int64_t HW = p->Ho * p->Wo, oh = 2 * ty;
    const int two = oh + 1 < p->Ho;
    for (int64_t u0 = 0; u0 < len; u0 += 16) {
        const int64_t ow = 2 * (tx + u0), w_end = min64(p->Wo, 2 * (tx + len));
        const __mmask16 sm = lanes(len - u0), k0 = lanes(w_end - ow), k1 = lanes(max64(0, w_end - ow - 16));
        for (int64_t o = o0; o < o1; o++) {
            const float *src = M + (o - o0) * ldm + j + u0;
            __m512 m[16];
            for (int e = 0; e < 16; e++) m[e] = _mm512_maskz_loadu_ps(sm, src + e * es);
            __m512 r[2][4]; /* A^T M */
            for (int s = 0; s < 4; s++) {
                r[0][s] = _mm512_add_ps(_mm512_add_ps(m[s], m[4 + s]), m[8 + s]);
                r[1][s] = _mm512_sub_ps(_mm512_sub_ps(m[4 + s], m[8 + s]), m[12 + s]);
            }
            const __m512 b = _mm512_set1_ps(bias ? bias[o] : 0.0f);
            float *dst = out + (n * p->Co + o) * HW + oh * p->Wo + ow;
            for (int i = 0; i < 1 + two; i++) {
                const __m512 y0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[i][0], r[i][1]), r[i][2]), b);
                const __m512 y1 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(r[i][1], r[i][2]), r[i][3]), b);
                _mm512_mask_storeu_ps(dst + i * p->Wo, k0, _mm512_permutex2var_ps(y0, lo_idx, y1));
                _mm512_mask_storeu_ps(dst + i * p->Wo + 16, k1, _mm512_permutex2var_ps(y0, hi_idx, y1));
            }
        }
    }
}

/* M rows [8 rb, 8 rb + 8) of element e, columns [t, t + 16 NV) (lanes of the last vector: last): the sum over
 * the input channels of U's packed block up (ci x 8) times V's rows (ldv apart), in chunks of WINO_KCHUNK,
 * each chunk's sums stored (the first, unless add) or added onto M. */
#define WINO_TILE(NV)                                                                                            \
    static inline void mm_##NV(float *mo, int64_t ldm, const float *up, const float *v, int64_t ldv, int64_t ci, \
                               __mmask16 last, int add) {                                                                 \
        __m512 acc[WMR][NV];                                                                                     \
        __mmask16 k[NV];                                                                                         \
        _Pragma("GCC unroll 3") for (int q = 0; q < NV; q++) k[q] = q == NV - 1 ? last : (__mmask16)0xFFFF;    \
        for (int64_t c0 = 0; c0 < ci; c0 += WINO_KCHUNK) {                                                       \
            const int64_t c1 = min64(ci, c0 + WINO_KCHUNK);                                                      \
            _Pragma("GCC unroll 8") for (int m = 0; m < WMR; m++)                                               \
                _Pragma("GCC unroll 3") for (int q = 0; q < NV; q++) acc[m][q] = _mm512_setzero_ps();           \
            for (int64_t c = c0; c < c1; c++) {                                                                  \
                __m512 xv[NV];                                                                                   \
                _Pragma("GCC unroll 3") for (int q = 0; q < NV; q++)                                            \
                    xv[q] = _mm512_maskz_loadu_ps(k[q], v + c * ldv + 16 * q);                                   \
                const float *w = up + c * WMR;                                                                   \
                _Pragma("GCC unroll 8") for (int m = 0; m < WMR; m++) {                                         \
                    const __m512 wv = _mm512_set1_ps(w[m]);                                                      \
                    _Pragma("GCC unroll 3") for (int q = 0; q < NV; q++)                                        \
                        acc[m][q] = _mm512_fmadd_ps(wv, xv[q], acc[m][q]);                                      \
                }                                                                                                \
            }                                                                                                    \
            _Pragma("GCC unroll 8") for (int m = 0; m < WMR; m++)                                               \
                _Pragma("GCC unroll 3") for (int q = 0; q < NV; q++) {                                          \
                    float *d = mo + m * ldm + 16 * q;                                                            \
                    _mm512_mask_storeu_ps(d, k[q], c0 || add ? _mm512_add_ps(acc[m][q], _mm512_maskz_loadu_ps(k[q], d)) \
                                                       : acc[m][q]);                                             \
                }                                                                                                \
        }                                                                                                        \
    }
WINO_TILE(1)
WINO_TILE(2)
WINO_TILE(3)

/* M (+)= U V over input channels [c0, c1), V holding just those (adding onto M after the first): U's row blocks
 * [rb0, rb1) of the block of output channels, into M's rows from 0. */
static void gemm_block(float *M, const float *V, const float *U, const wino_plan *p, int64_t rb0, int64_t rb1,
                       int64_t cnt, int64_t c0, int64_t c1) {
    const int64_t ldv = p->ldv, ci = c1 - c0, add = c0 > 0;
    for (int e = 0; e < 16; e++) {
        const float *ve = V + (size_t)e * (size_t)(p->vc * ldv), *ue = U + (size_t)e * (size_t)(p->cb * p->Ci);
        float *me = M + (size_t)e * (size_t)(p->mrows * ldv);
        for (int64_t rb = rb0; rb < rb1; rb++) {
            const float *up = ue + rb * WMR * p->Ci + c0 * WMR;
            float *mo = me + (rb - rb0) * WMR * ldv;
            for (int64_t t = 0; t < cnt; t += 16 * WNV) {
                const int64_t left = cnt - t;
                const int nv = (int)min64(WNV, ceil_div64(left, 16));
                const __mmask16 last = lanes(left - 16 * (nv - 1));
                if (nv == 3)
                    mm_3(mo + t, ldv, up, ve + t, ldv, ci, last, add);
                else if (nv == 2)
                    mm_2(mo + t, ldv, up, ve + t, ldv, ci, last, add);
                else
                    mm_1(mo + t, ldv, up, ve + t, ldv, ci, last, add);
            }
        }
    }
}

static void winograd_run(float *out, const float *in, const float *w, const float *bias, const wino_plan *p,
                         float *ws) {
    float *U = ws;
    const size_t ub = floats_bytes(p->u_floats) / sizeof(float);
    const size_t vb = floats_bytes(p->v_floats) / sizeof(float), mb = floats_bytes(p->m_floats) / sizeof(float);
    const int64_t qs = ceil_div64(p->Ci, 2);
#pragma omp parallel num_threads(p->nt) if (p->nt > 1)
    {
        float *V = ws + ub + (size_t)omp_get_thread_num() * (vb + mb), *M = V + vb;
        /* a block of output channels at a time (one block unless U passes WINO_U_CAP); the end of each omp for
         * waits for every thread, so U is whole before it is read and read before the next block overwrites it */
        for (int64_t o0 = 0; o0 < p->co8; o0 += p->cb) {
            const int64_t rows = min64(p->cb, p->co8 - o0), rbs = rows / WMR, rb0 = o0 / WMR;
            /* Along the weight's memory: the forward's blocks are 8 rows of it (8 k) and its pairs of c run along
             * them. The input-gradient's blocks are 8 c of each k and its pairs run over k: one block after
             * another along WQB pairs (2 WQB rows read side by side) writes WQB lines in a row per e, where one
             * pair at a time wrote a line per 16 KiB page (a 512x512 weight: 2x slower than the forward's). */
            const int64_t nqb = ceil_div64(qs, WQB), nu = p->flip ? nqb * rbs * WQB : rbs * qs;
#pragma omp for schedule(static)
            for (int64_t u = 0; u < nu; u++) {
                if (!p->flip) {
                    transform_weight(U, w, p, rb0 + u / qs, rb0, u % qs * 2);
                    continue;
                }
                const int64_t rem = u % (rbs * WQB), q = u / (rbs * WQB) * WQB + rem % WQB;
                if (q < qs) transform_weight(U, w, p, rb0 + rem / WQB, rb0, q * 2);
            }
            const int64_t o1 = min64(p->Co, o0 + rows);
#pragma omp for schedule(dynamic)
            for (int64_t b = 0; b < p->nblocks; b++) {
                const int64_t t0 = b * p->T, cnt = min64(p->T, p->tiles - t0);
                if (p->mrows == WMR) { /* V: every channel; then 8 output channels at a time through M */
                    FOR_RUNS(p, t0, cnt, input_run(V, p->ldv, in, p, 0, p->Ci, n, ty, tx, len, j));
                    for (int64_t rb = 0; rb < rbs; rb++) {
                        const int64_t r0 = o0 + rb * WMR, r1 = min64(o1, r0 + WMR);
                        gemm_block(M, V, U, p, rb, rb + 1, cnt, 0, p->Ci);
                        FOR_RUNS(p, t0, cnt, output_run(out, M, p->ldv, bias, p, r0, r1, n, ty, tx, len, j));
                    }
                    continue;
                }
                for (int64_t c0 = 0; c0 < p->Ci; c0 += p->vc) { /* V: WVC channels at a time, M their sum */
                    const int64_t c1 = min64(p->Ci, c0 + p->vc);
                    FOR_RUNS(p, t0, cnt, input_run(V, p->ldv, in, p, c0, c1, n, ty, tx, len, j));
                    gemm_block(M, V, U, p, 0, rbs, cnt, c0, c1);
                }
                FOR_RUNS(p, t0, cnt, output_run(out, M, p->ldv, bias, p, o0, o1, n, ty, tx, len, j));
            }
        }
    }
}

void conv_winograd_forward(float *out, const float *x, const float *w, const float *bias, const conv_geom *g,
                           float *ws, int nthreads) {
    const wino_plan p = make_plan(g, CONV_FORWARD, nthreads);
    winograd_run(out, x, w, bias, &p, ws);
}

void conv_winograd_backward_data(float *dx, const float *dout, const float *w, const float *bias,
                                 const conv_geom *g, float *ws, int nthreads) {
    const wino_plan p = make_plan(g, CONV_BACKWARD_DATA, nthreads);
    winograd_run(dx, dout, w, bias, &p, ws);
}
