/* kernels/cpu/conv_direct.c — the direct float32 convolution for stride-1 layers whose output has the input's
 * size ("same" padding: 3x3 with padding 1, 5x5 with 2, ...), on CPUs with AVX-512: the forward, the
 * input-gradient and the 3x3 weight-gradient, with no im2col and no gemm; and the stride-2 forward and
 * input-gradient over the four phases of the input or its gradient (split_phases, join_phases below).
 *
 * Why: im2col + sgemm copies every input element R*S times into the columns and OpenBLAS packs the columns once
 * more, and then uses each copied element only K/G times. With the 16..128 channels of a UNet or a small CNN
 * that is as much memory traffic as arithmetic: a 32->32 3x3 layer at 32x32 ran at 66 GFLOP/s on one thread
 * against PyTorch's (oneDNN's direct kernel) 146 (the UNet's layers one by one, CPU time, PyTorch 2.15).
 * Here every input element is loaded once per tap straight from the input and used for 8 output channels.
 *
 * The map: with stride 1 and P == H, Q == W, output position j = p*W + q (flattened over the plane) reads input
 * position j + dr*W + ds for the tap (dr, ds) = (r*dh - ph, s*dw - pw): the same shift for every position, so
 * a vector of 16 consecutive positions is one unaligned load, masked where the tap falls into the padding (a
 * row above or below the image, or a column across the left or right edge). The input-gradient is the same
 * sum with input and output exchanged: dx at position j reads grad_output at j - (r*dh - ph)*W - (s*dw - pw).
 *
 * Work: a unit is (item, group, block of 8 output channels); its thread runs over the plane in blocks of 48
 * positions (3 vectors), keeping the 8 x 48 sums in 24 registers across every input channel and tap, so each
 * output is written once. The weights are first repacked into the workspace (conv_direct_ws_nbytes: 8 channels'
 * weights of one tap and input channel side by side, zero rows beyond the last channel), so the inner loop
 * broadcasts 8 consecutive floats; a deep layer's, a block of 8 output channels at a time per thread
 * (direct_blocked, conv_direct_ws_nbytes_threads). The whole file is compiled for AVX-512; conv_plan.c calls in
 * only after checking the CPU (conv_direct_use). */
#include "conv_internal.h"

#pragma GCC target("avx512f")
#include <immintrin.h>

#define DMR 8   /* output channels per unit */
#define DNV 3   /* vectors of 16 positions per block */
#define DMAXTAP 64

/* 8 output channels x NV vectors of positions [j0, j0 + 16 NV) of one plane. x: the input planes' position j0
 * (cin planes ldx apart); o: the output's (rows PQ apart, mr of them stored); wp: the packed weights of the
 * block, [tap][cin][8]; off[t]: the input shift of tap t; mk[t * NV + v]: its lanes inside the image. */
#define DIRECT_TILE(NV)                                                                                          \
    static inline void tile_##NV(float *o, int64_t ldo, int mr, const float *x, int64_t ldx, int64_t cin,       \
                                 const float *wp, const int64_t *off, int ntap, const __mmask16 *mk,            \
                                 const __mmask16 *sm, const float *bias) {                                     \
        __m512 acc[DMR][NV];                                                                                     \
        _Pragma("GCC unroll 8") for (int m = 0; m < DMR; m++) {                                                 \
            const __m512 b = _mm512_set1_ps(bias && m < mr ? bias[m] : 0.0f);                                   \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) acc[m][v] = b;                                 \
        }                                                                                                        \
        /* the sum in chunks of CONV_KCHUNK terms, each added onto the output, as conv_gemm_f32 sums: one       \
         * running total over 7x7 x 64 terms lands ~1.5x further from the exact sum than PyTorch's */           \
        int left = CONV_KCHUNK, first = 1;                                                                       \
        for (int t = 0; t < ntap; t++) {                                                                         \
            const float *xp = x + off[t], *w = wp + (int64_t)t * cin * DMR;                                      \
            __mmask16 k[NV];                                                                                     \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) k[v] = mk[t * NV + v];                         \
            for (int64_t c = 0; c < cin; c++, xp += ldx, w += DMR) {                                            \
                __m512 xv[NV];                                                                                   \
                _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                            \
                    xv[v] = _mm512_maskz_loadu_ps(k[v], xp + 16 * v);                                            \
                _Pragma("GCC unroll 8") for (int m = 0; m < DMR; m++) {                                         \
                    const __m512 wv = _mm512_set1_ps(w[m]);                                                      \
                    _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)                                        \
                        acc[m][v] = _mm512_fmadd_ps(wv, xv[v], acc[m][v]);                                      \
                }                                                                                                \
                if (--left == 0) {                                                                               \
                    flush_##NV(o, ldo, mr, sm, acc, first);                                                      \
                    left = CONV_KCHUNK;                                                                          \
                    first = 0;                                                                                   \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        if (first || left != CONV_KCHUNK) flush_##NV(o, ldo, mr, sm, acc, first);                               \
    }

/* A chunk's sums onto the output (stored as they are for the first), then zeroed for the next chunk. */
#define DIRECT_FLUSH(NV)                                                                                         \
    static inline void flush_##NV(float *o, int64_t ldo, int mr, const __mmask16 *sm, __m512 acc[DMR][NV],      \
                                  int first) {                                                                   \
        _Pragma("GCC unroll 8") for (int m = 0; m < DMR; m++) {                                                 \
            if (m < mr)                                                                                          \
                _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) {                                          \
                    float *p = o + m * ldo + 16 * v;                                                             \
                    const __m512 s = first ? acc[m][v] : _mm512_add_ps(acc[m][v], _mm512_maskz_loadu_ps(sm[v], p)); \
                    _mm512_mask_storeu_ps(p, sm[v], s);                                                          \
                }                                                                                                \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) acc[m][v] = _mm512_setzero_ps();               \
        }                                                                                                        \
    }
DIRECT_FLUSH(1)
DIRECT_FLUSH(2)
DIRECT_FLUSH(3)
DIRECT_TILE(1)
DIRECT_TILE(2)
DIRECT_TILE(3)

/* The lanes of output positions [j0, j0 + 16 nv) of a (P, Q) plane whose input under tap t, shifted by (dr[t],
 * ds[t]), lies inside rows [0, hl[t]) and columns [0, wl[t]): mk[t * nv + v]; sm[v]: the lanes below P*Q (the
 * stores). p = j / Q in float: exact for P*Q < 2^21 (conv_direct_use). */
static void block_masks(int64_t j0, int nv, int64_t P, int64_t Q, const int *dr, const int *ds, const int *hl,
                        const int *wl, int ntap, __mmask16 *mk, __mmask16 *sm) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i vQ = _mm512_set1_epi32((int)Q);
    const __m512 invQ = _mm512_set1_ps(1.0f / (float)Q);
    for (int v = 0; v < nv; v++) {
        const __m512i j = _mm512_add_epi32(_mm512_set1_epi32((int)(j0 + 16 * v)), iota);
        __m512i p = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(j), _mm512_set1_ps(0.5f)),
                                                      invQ));
        __m512i q = _mm512_sub_epi32(j, _mm512_mullo_epi32(p, vQ));
        /* one correction either way keeps p exact whatever the rounding of 1/Q did */
        __mmask16 lo = _mm512_cmplt_epi32_mask(q, _mm512_setzero_si512());
        p = _mm512_mask_sub_epi32(p, lo, p, _mm512_set1_epi32(1));
        q = _mm512_mask_add_epi32(q, lo, q, vQ);
        __mmask16 hi = _mm512_cmpge_epi32_mask(q, vQ);
        p = _mm512_mask_add_epi32(p, hi, p, _mm512_set1_epi32(1));
        q = _mm512_mask_sub_epi32(q, hi, q, vQ);
        const __mmask16 in = _mm512_cmplt_epi32_mask(j, _mm512_set1_epi32((int)(P * Q)));
        sm[v] = in;
        for (int t = 0; t < ntap; t++) {
            const __mmask16 rows = _mm512_cmplt_epu32_mask(_mm512_add_epi32(p, _mm512_set1_epi32(dr[t])),
                                                           _mm512_set1_epi32(hl[t]));
            const __mmask16 cols = _mm512_cmplt_epu32_mask(_mm512_add_epi32(q, _mm512_set1_epi32(ds[t])),
                                                           _mm512_set1_epi32(wl[t]));
            mk[t * nv + v] = in & rows & cols;
        }
    }
}

/* One plane (P, Q) of mr (<= 8) output channels of an item and group: o (rows P*Q apart) = the sum over cin input
 * planes x (ldx apart) and the taps of the packed weights wp, plus bias (mr values, or NULL). */
static void direct_plane(float *o, int mr, const float *x, int64_t ldx, int64_t cin, const float *wp, int64_t P,
                         int64_t Q, const int *dr, const int *ds, const int *hl, const int *wl, const int64_t *off,
                         int ntap, const float *bias) {
    const int64_t PQ = P * Q;
    __mmask16 mk[DMAXTAP * DNV], sm[DNV];
    for (int64_t j0 = 0; j0 < PQ; j0 += 16 * DNV) {
        const int nv = (int)min64(DNV, ceil_div64(PQ - j0, 16));
        block_masks(j0, nv, P, Q, dr, ds, hl, wl, ntap, mk, sm);
        if (nv == 3)
            tile_3(o + j0, PQ, mr, x + j0, ldx, cin, wp, off, ntap, mk, sm, bias);
        else if (nv == 2)
            tile_2(o + j0, PQ, mr, x + j0, ldx, cin, wp, off, ntap, mk, sm, bias);
        else
            tile_1(o + j0, PQ, mr, x + j0, ldx, cin, wp, off, ntap, mk, sm, bias);
    }
}

/* Stride 2: the input of one item is first split into its four phases (even/odd rows x even/odd
 * columns), each stored as a (P, Q) plane, after which every tap is again one shift of the output plane: tap
 * (r, s) reads phase ((r*dh - ph) mod 2, (s*dw - pw) mod 2) at (p + floor((r*dh - ph) / 2), q + ...). The phase
 * buffer (4 C planes of P*Q) follows the packed weight in the workspace. The input-gradient computes the four
 * phases of dx in it instead, each over its own taps (taps() orders them by phase), and weaves them into dx. */
static int strided(const conv_geom *g) {
    return g->sh == 2;
}

size_t conv_direct_ws_nbytes(const conv_geom *g, conv_pass pass) {
    const int64_t Cg = g->C / g->G, Kg = g->K / g->G, RS = g->R * g->S;
    const int64_t outc = pass == CONV_FORWARD ? Kg : Cg, inc = pass == CONV_FORWARD ? Cg : Kg;
    const int64_t phases = strided(g) ? 4 * g->C * g->P * g->Q : 0;
    return (size_t)(g->G * ceil_div64(outc, DMR) * DMR * inc * RS + phases) * sizeof(float);
}

/* The threads a pass runs on. */
static int direct_threads(const conv_geom *g, int nthreads) {
    const double macs = (double)g->N * (double)g->K * (double)(g->P * g->Q) * (double)(g->C / g->G * g->R * g->S);
    return nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1;
}

/* Whether a stride-1 pass packs its weight a block of 8 output channels at a time into a buffer per thread,
 * instead of all of it up front: where the whole packed weight passes DIRECT_WS_CAP. A deep layer's packed
 * weight was the peak of an eval step (VGG-11's 512->512 at 8x8: 9 MiB of workspace beside a 0.5 MiB output);
 * a block is 9 * 512 * 8 floats (144 KiB). The blocks then run outermost (block, item), each thread over a
 * contiguous range of them (schedule static), so each block is packed once per thread that runs it, and stays
 * in L2 across the items. Below the cap (up to 128->128 at 3x3) the whole weight is packed, items outermost,
 * as before: a large plane of few channels keeps its item in L2 across the blocks. Not at stride 2, whose
 * phases are per item. */
#define DIRECT_WS_CAP ((int64_t)1 << 20)
static int direct_blocked(const conv_geom *g, conv_pass pass, int nt) {
    const int64_t Cg = g->C / g->G, Kg = g->K / g->G, RS = g->R * g->S;
    const int64_t outc = pass == CONV_FORWARD ? Kg : Cg, inc = pass == CONV_FORWARD ? Cg : Kg;
    const int64_t units = g->G * ceil_div64(outc, DMR);
    return !strided(g) && units > nt && units * DMR * inc * RS * (int64_t)sizeof(float) > DIRECT_WS_CAP;
}

size_t conv_direct_ws_nbytes_threads(const conv_geom *g, conv_pass pass, int nthreads) {
    const int nt = direct_threads(g, nthreads);
    if (!direct_blocked(g, pass, nt)) return conv_direct_ws_nbytes(g, pass);
    const int64_t inc = pass == CONV_FORWARD ? g->C / g->G : g->K / g->G;
    return (size_t)((int64_t)nt * DMR * inc * g->R * g->S) * sizeof(float);
}

static int64_t fdiv2(int64_t a) { return a >= 0 ? a / 2 : -((1 - a) / 2); }

/* The pass's taps: input shift (dr, ds) within the input plane, or the phase plane, of limits (hl, wl), its
 * offset off from the output position (ldp: the elements of one phase's block of input planes), and the weight's
 * (r, s) index; forward or input-gradient. */
static int taps(const conv_geom *g, conv_pass pass, int64_t ldp, int *dr, int *ds, int *hl, int *wl, int64_t *off,
                int64_t *widx) {
    int n = 0;
    if (strided(g) && pass == CONV_BACKWARD_DATA) {
        /* the input-gradient's phase (a, b) of dx gathers the taps of that phase: dx[2hh + a, 2ww + b] reads
         * grad_output at (hh - floor((r*dh - ph) / 2), ww - ...). Taps in phase order (phase_taps). */
        for (int ph = 0; ph < 4; ph++)
            for (int64_t r = 0; r < g->R; r++)
                for (int64_t s = 0; s < g->S; s++) {
                    const int64_t a = r * g->dh - g->ph, b = s * g->dw - g->pw;
                    if (2 * (a - 2 * fdiv2(a)) + (b - 2 * fdiv2(b)) != ph) continue;
                    widx[n] = r * g->S + s;
                    dr[n] = (int)-fdiv2(a), ds[n] = (int)-fdiv2(b);
                    hl[n] = (int)g->P, wl[n] = (int)g->Q;
                    off[n] = (int64_t)dr[n] * g->Q + ds[n];
                    n++;
                }
        return n;
    }
    for (int64_t r = 0; r < g->R; r++)
        for (int64_t s = 0; s < g->S; s++, n++) {
            const int64_t a = r * g->dh - g->ph, b = s * g->dw - g->pw;
            widx[n] = r * g->S + s;
            if (strided(g)) {
                const int64_t pa = a - 2 * fdiv2(a), pb = b - 2 * fdiv2(b);
                dr[n] = (int)fdiv2(a), ds[n] = (int)fdiv2(b);
                hl[n] = (int)((g->H - pa + 1) / 2), wl[n] = (int)((g->W - pb + 1) / 2);
                off[n] = (2 * pa + pb) * ldp + (int64_t)dr[n] * g->Q + ds[n];
                continue;
            }
            dr[n] = (int)(pass == CONV_FORWARD ? a : -a);
            ds[n] = (int)(pass == CONV_FORWARD ? b : -b);
            hl[n] = (int)g->H, wl[n] = (int)g->W;
            off[n] = (int64_t)dr[n] * g->W + ds[n];
        }
    return n;
}

/* The four phases of item n's input, group after group: ph[((grp * 4 + 2a + b) * Cg + c) * P*Q + i * Q + j] =
 * x[n, grp*Cg + c, 2i + a, 2j + b] for the i, j inside the image (the rest is never read: masked). */
static void split_phases(float *ph, const float *x, const conv_geom *g, int64_t n, int64_t c0, int64_t c1) {
    const int64_t Cg = g->C / g->G, PQ = g->P * g->Q;
    for (int64_t cc = c0; cc < c1; cc++) {
        const int64_t grp = cc / Cg, c = cc % Cg;
        const float *xc = x + n * g->xs[0] + cc * g->xs[1];
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                float *d = ph + ((grp * 4 + 2 * a + b) * Cg + c) * PQ;
                const int64_t hn = (g->H - a + 1) / 2, wn = (g->W - b + 1) / 2;
                for (int64_t i = 0; i < hn; i++) {
                    const float *sr = xc + (2 * i + a) * g->xs[2] + b * g->xs[3];
                    float *dr = d + i * g->Q;
                    if (g->xs[3] == 1) {
                        for (int64_t j = 0; j < wn; j++) dr[j] = sr[2 * j];
                    } else {
                        for (int64_t j = 0; j < wn; j++) dr[j] = sr[2 * j * g->xs[3]];
                    }
                }
            }
    }
}

/* The first tap of each phase (and the count at [4]) in the input-gradient's phase order of taps(). */
static void phase_taps(const conv_geom *g, int first[5]) {
    for (int ph = 0; ph <= 4; ph++) first[ph] = 0;
    for (int64_t r = 0; r < g->R; r++)
        for (int64_t s = 0; s < g->S; s++) {
            const int64_t a = r * g->dh - g->ph, b = s * g->dw - g->pw;
            for (int ph = 2 * (int)(a - 2 * fdiv2(a)) + (int)(b - 2 * fdiv2(b)) + 1; ph <= 4; ph++) first[ph]++;
        }
}

/* dx of item n, channels [c0, c1): its four phase planes (grid P x Q, rows Q apart) woven back together. */
static void join_phases(float *dx, const float *ph, const conv_geom *g, int64_t n, int64_t c0, int64_t c1) {
    const int64_t Cg = g->C / g->G, PQ = g->P * g->Q, H = g->H, W = g->W;
    for (int64_t cc = c0; cc < c1; cc++) {
        const int64_t grp = cc / Cg, c = cc % Cg;
        float *dc = dx + (n * g->C + cc) * H * W;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                const float *sp = ph + ((grp * 4 + 2 * a + b) * Cg + c) * PQ;
                const int64_t hn = (H - a + 1) / 2, wn = (W - b + 1) / 2;
                for (int64_t i = 0; i < hn; i++) {
                    float *d = dc + (2 * i + a) * W + b;
                    const float *sr = sp + i * g->Q;
                    for (int64_t j = 0; j < wn; j++) d[2 * j] = sr[j];
                }
            }
    }
}

/* The packed weights of one block from mr (<= 8) rows of src, ld apart, columns [0, ncols): column j is the weight
 * of tap tinv[j % RS] and input channel i0 + j / RS, stored as the 8 floats d[(tap * inc + channel) * 8 + m] (0
 * for m >= mr). 8 x 8 blocks: masked loads (nothing read past a row's ncols), a transpose, one store per column. */
static void pack_cols(float *d, const float *src, int64_t ld, int64_t ncols, int mr, int64_t RS, int64_t inc,
                      const int *tinv, int64_t i0) {
    for (int64_t j = 0; j < ncols; j += 8) {
        const int nc = (int)min64(8, ncols - j);
        const __mmask16 k = (__mmask16)((1u << nc) - 1);
        __m256 r[8];
        for (int m = 0; m < 8; m++)
            r[m] = m < mr ? _mm512_castps512_ps256(_mm512_maskz_loadu_ps(k, src + m * ld + j)) : _mm256_setzero_ps();
        /* the 8 x 8 transpose: t[c] holds column c's 8 rows */
        const __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
        const __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
        const __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
        const __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
        const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
        const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
        const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
        const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
        __m256 t[8];
        t[0] = _mm256_permute2f128_ps(b0, b4, 0x20), t[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
        t[2] = _mm256_permute2f128_ps(b2, b6, 0x20), t[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
        t[4] = _mm256_permute2f128_ps(b0, b4, 0x31), t[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
        t[6] = _mm256_permute2f128_ps(b2, b6, 0x31), t[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
        for (int c = 0; c < nc; c++) {
            const int64_t col = j + c, i = i0 + col / RS, tap = tinv[col % RS];
            _mm256_storeu_ps(d + (tap * inc + i) * DMR, t[c]);
        }
    }
}

/* The packed weights of output channels [o0, o0 + 8) of group grp into d ([tap][in channel][8]): weight (o, i,
 * tap) is w[o, i, tap] forward, w[i, o, tap] backward. The forward's pack_cols transposes 8 x 8 blocks: the
 * scalar repack (a tap across 8 rows of C*R*S floats) took ~19 % of a batch-1 forward at 3x3 256->256 14x14
 * (perf, one thread), ~12 % after. tinv: the tap of weight index r. */
static void pack_unit(float *d, const float *w, const conv_geom *g, int fwd, int64_t grp, int64_t o0, int64_t outc,
                      int64_t inc, int ntap, const int *tinv, const int64_t *widx) {
    const int64_t Cg = g->C / g->G, Kg = g->K / g->G, RS = g->R * g->S, mr = min64(DMR, outc - o0);
    if (fwd) { /* rows o0.. of (Kg, Cg*RS): column i*RS + r */
        pack_cols(d, w + (grp * Kg + o0) * Cg * RS, Cg * RS, Cg * RS, (int)mr, RS, inc, tinv, 0);
        return;
    }
    /* the input-gradient's 8 weights of a tap and channel i lie within 8*RS floats: a plain gather (8 x 8
     * blocks of RS = 9 columns lost 5-15 % of a batch-1 3x3 256->256 14x14 input-gradient to it) */
    for (int t = 0; t < ntap; t++)
        for (int64_t i = 0; i < inc; i++)
            for (int64_t m = 0; m < DMR; m++, d++)
                *d = m < mr ? w[((grp * Kg + i) * Cg + o0 + m) * RS + widx[t]] : 0.0f;
}

/* out (N, outc*G planes of P*Q) from in (N, inc*G planes): the forward (in = x with its strides, outc = K/G) or the
 * input-gradient (in = grad_output, outc = C/G). wpk: the workspace, conv_direct_ws_nbytes_threads(g, pass, nthreads)
 * bytes. */
static void direct_pass(float *out, const float *in, const int64_t is[2], const float *w, const float *bias,
                        const conv_geom *g, conv_pass pass, float *wpk, int nthreads) {
    const int64_t G = g->G, Cg = g->C / G, Kg = g->K / G, PQ = g->P * g->Q;
    const int fwd = pass == CONV_FORWARD, str = strided(g);
    const int64_t outc = fwd ? Kg : Cg, inc = fwd ? Cg : Kg, nb = ceil_div64(outc, DMR);
    int dr[DMAXTAP], ds[DMAXTAP], hl[DMAXTAP], wl[DMAXTAP];
    int64_t off[DMAXTAP], widx[DMAXTAP];
    const int ntap = taps(g, pass, Cg * PQ, dr, ds, hl, wl, off, widx);
    const int nt = direct_threads(g, nthreads), blocked = direct_blocked(g, pass, nt);
    /* wpk[grp][block][tap][in channel][8] (pack_unit), or a block per thread (blocked); tinv: the tap of weight
     * index r */
    const int64_t blk = (int64_t)ntap * inc * DMR, units = G * nb;
    float *phases = wpk + units * blk;
    int tinv[DMAXTAP];
    for (int t = 0; t < ntap; t++) tinv[widx[t]] = t;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        if (blocked) { /* direct_blocked: a block of the weight at a time in this thread's buffer */
            float *mine = wpk + (int64_t)omp_get_thread_num() * blk;
            int64_t have = -1;
#pragma omp for schedule(static)
            for (int64_t u = 0; u < g->N * units; u++) {
                const int64_t gb = u / g->N, n = u % g->N, grp = gb / nb, o0 = gb % nb * DMR;
                if (gb != have) pack_unit(mine, w, g, fwd, grp, o0, outc, inc, ntap, tinv, widx), have = gb;
                float *o = out + (n * G * outc + grp * outc + o0) * PQ;
                const float *x = in + n * is[0] + grp * inc * is[1];
                direct_plane(o, (int)min64(DMR, outc - o0), x, is[1], inc, mine, g->P, g->Q, dr, ds, hl, wl, off,
                             ntap, bias ? bias + grp * outc + o0 : NULL);
            }
        } else {
#pragma omp for schedule(static)
            for (int64_t u = 0; u < units; u++)
                pack_unit(wpk + u * blk, w, g, fwd, u / nb, u % nb * DMR, outc, inc, ntap, tinv, widx);
        }
        if (str && !fwd) { /* item by item: the units' phase planes of dx, then dx woven from them */
            int first[5];
            phase_taps(g, first);
            for (int64_t n = 0; n < g->N; n++) {
#pragma omp for schedule(dynamic)
                for (int64_t u = 0; u < units * 4; u++) {
                    const int64_t gb = u / 4, grp = gb / nb, o0 = gb % nb * DMR, ph = u % 4, t0 = first[ph];
                    float *o = phases + ((grp * 4 + ph) * Cg + o0) * PQ;
                    direct_plane(o, (int)min64(DMR, outc - o0), in + n * is[0] + grp * inc * is[1], is[1], inc,
                                 wpk + gb * blk + t0 * inc * DMR, g->P, g->Q, dr + t0, ds + t0, hl + t0, wl + t0,
                                 off + t0, first[ph + 1] - t0, bias ? bias + grp * outc + o0 : NULL);
                }
#pragma omp for schedule(static)
                for (int64_t c = 0; c < g->C; c++) join_phases(out, phases, g, n, c, c + 1);
            }
        } else if (str) { /* item by item: its phases, then its units */
            for (int64_t n = 0; n < g->N; n++) {
#pragma omp for schedule(static)
                for (int64_t c = 0; c < g->C; c++) split_phases(phases, in, g, n, c, c + 1);
#pragma omp for schedule(dynamic)
                for (int64_t gb = 0; gb < units; gb++) {
                    const int64_t grp = gb / nb, o0 = gb % nb * DMR;
                    float *o = out + (n * G * outc + grp * outc + o0) * PQ;
                    direct_plane(o, (int)min64(DMR, outc - o0), phases + grp * 4 * Cg * PQ, PQ, inc, wpk + gb * blk,
                                 g->P, g->Q, dr, ds, hl, wl, off, ntap, bias ? bias + grp * outc + o0 : NULL);
                }
            }
        } else if (!blocked) {
#pragma omp for schedule(dynamic)
            for (int64_t u = 0; u < g->N * units; u++) {
                const int64_t n = u / units, gb = u % units, grp = gb / nb, o0 = gb % nb * DMR;
                float *o = out + (n * G * outc + grp * outc + o0) * PQ;
                const float *x = in + n * is[0] + grp * inc * is[1];
                direct_plane(o, (int)min64(DMR, outc - o0), x, is[1], inc, wpk + gb * blk, g->P, g->Q, dr, ds, hl,
                             wl, off, ntap, bias ? bias + grp * outc + o0 : NULL);
            }
        }
    }
}

void conv_direct_forward(float *out, const float *x, const float *w, const float *bias, const conv_geom *g,
                         float *ws, int nthreads) {
    const int64_t is[2] = {g->xs[0], g->xs[1]};
    direct_pass(out, x, is, w, bias, g, CONV_FORWARD, ws, nthreads);
}

void conv_direct_backward_data(float *dx, const float *dout, const float *w, const float *bias, const conv_geom *g,
                               float *ws, int nthreads) {
    const int64_t is[2] = {g->K * g->P * g->Q, g->P * g->Q};
    direct_pass(dx, dout, is, w, bias, g, CONV_BACKWARD_DATA, ws, nthreads);
}

/* ---- the weight-gradient of a 3x3 (nine-tap) geometry -------------------------------------------------------
 * dw[k, c, tap] = the sum over items and positions j of grad_output[n, k, j] * x[n, c, j + off[tap]] (inside the
 * image). A unit is (group, block of MK <= 8 output channels, block of up to WCB input channels). Per input
 * channel and tap row r its MK x 3 sums are 24 vectors of 16 lanes, kept in registers over a chunk of positions
 * of every item (8 grad_output loads and 3 input loads feed 24 FMAs) and parked in a per-thread stack buffer
 * between chunks (the chunk's masks serve all the block's channels); the lanes are added up once at the end. No
 * workspace, no atomics: each unit owns its dw entries. */
#define WCB 4          /* input channels per unit */
#define WCHUNK 16      /* vectors of 16 positions per chunk */
#define WDY_VECS 32    /* vectors of grad_output per row of a call (items x chunk) */

#define WEIGHT_TILE(MK)                                                                                          \
    static inline void wtile_##MK(__m512 *accbuf, const float *dy, int64_t ldk, int64_t dyn, const float *x,     \
                                  int64_t xn, int64_t N, const int64_t *off, const __mmask16 *mk,               \
                                  const __mmask16 *sm, int nv) {                                                 \
        __m512 acc[MK][3];                                                                                       \
        _Pragma("GCC unroll 8") for (int m = 0; m < MK; m++)                                                    \
            _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++) acc[m][t] = accbuf[m * 9 + t];                  \
        for (int64_t n = 0; n < N; n++, dy += dyn, x += xn)                                                     \
            for (int v = 0; v < nv; v++) {                                                                       \
                __m512 xv[3];                                                                                    \
                _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++)                                             \
                    xv[t] = _mm512_maskz_loadu_ps(mk[v * 9 + t], x + off[t] + 16 * v);                           \
                _Pragma("GCC unroll 8") for (int m = 0; m < MK; m++) {                                          \
                    const __m512 d = _mm512_maskz_loadu_ps(sm[v], dy + m * ldk + 16 * v);                        \
                    _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++)                                         \
                        acc[m][t] = _mm512_fmadd_ps(d, xv[t], acc[m][t]);                                        \
                }                                                                                                \
            }                                                                                                    \
        _Pragma("GCC unroll 8") for (int m = 0; m < MK; m++)                                                    \
            _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++) accbuf[m * 9 + t] = acc[m][t];                  \
    }
WEIGHT_TILE(1)
WEIGHT_TILE(2)
WEIGHT_TILE(4)
WEIGHT_TILE(8)

/* out[i] = the sum of the 16 lanes of v[i], i < 16: a transpose-and-add tree (45 instructions, against ~8 per
 * vector for one reduction at a time, on the port the FMAs need too). */
static void reduce16(const __m512 *v, float *out) {
    __m512 t[8], u[4];
    for (int i = 0; i < 8; i++) /* per 128-bit chunk: [a0+a2, b0+b2, a1+a3, b1+b3] */
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int j = 0; j < 4; j++) { /* per chunk: the chunk's sums of v[4j .. 4j + 3] */
        const __m512d a = _mm512_castps_pd(t[2 * j]), b = _mm512_castps_pd(t[2 * j + 1]);
        u[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
    const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD)));
}

/* Kg channels in blocks of 8, the rest in blocks of 4, 2, 1: block b starts at *k0 with *mk channels. */
static int64_t kblocks(int64_t Kg) {
    return Kg / 8 + ((Kg & 4) != 0) + ((Kg & 2) != 0) + (Kg & 1);
}

static void kblock(int64_t Kg, int64_t b, int64_t *k0, int *mk) {
    int64_t k = 8 * min64(b, Kg / 8);
    b -= Kg / 8;
    *mk = 8;
    for (int size = 4; b >= 0 && size >= 1; size /= 2) {
        if (!(Kg & size)) continue;
        *mk = size;
        if (b-- == 0) break;
        k += size;
    }
    *k0 = k;
}

void conv_direct_backward_weight(float *dw, const float *dout, const float *x, const conv_geom *g, int nthreads) {
    const int64_t N = g->N, G = g->G, Cg = g->C / G, Kg = g->K / G, HW = g->H * g->W;
    int dr[DMAXTAP], ds[DMAXTAP], hl[DMAXTAP], wl[DMAXTAP];
    int64_t off[DMAXTAP], widx[DMAXTAP];
    taps(g, CONV_FORWARD, 0, dr, ds, hl, wl, off, widx);
    const int64_t nkb = kblocks(Kg), ncb = ceil_div64(Cg, WCB), units = G * nkb * ncb;
    const double macs = (double)N * (double)g->K * (double)HW * (double)(Cg * 9);
    const int nt = nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t grp = u / (nkb * ncb), kb = u / ncb % nkb, c0 = u % ncb * WCB, c1 = min64(Cg, c0 + WCB);
        int64_t k0;
        int mk;
        kblock(Kg, kb, &k0, &mk);
        __m512 accbuf[WCB * 8 * 9];
        __mmask16 masks[WCHUNK * 9], sm[WCHUNK];
        for (int i = 0; i < WCB * 8 * 9; i++) accbuf[i] = _mm512_setzero_ps();
        for (int64_t j0 = 0; j0 < HW; j0 += 16 * WCHUNK) {
            const int nv = (int)min64(WCHUNK, ceil_div64(HW - j0, 16));
            for (int v = 0; v < nv; v++) /* block_masks keeps taps within a vector: [v * 9 + t] */
                block_masks(j0 + 16 * v, 1, g->H, g->W, dr, ds, hl, wl, 9, masks + v * 9, sm + v);
            /* a few items at a time, so that their chunk of grad_output (8 rows of nb * nv vectors, 16 KiB)
             * stays in L1 while every input channel of the block and every tap row reads it; and several items
             * per call on a small map, where parking the 24 sums would cost as much as the FMAs */
            const int64_t nb = max64(1, WDY_VECS / nv), dyn = g->K * HW, xn = g->xs[0];
            for (int64_t n0 = 0; n0 < N; n0 += nb) {
                const int64_t cnt = min64(nb, N - n0);
                const float *dy = dout + (n0 * g->K + grp * Kg + k0) * HW + j0;
                for (int64_t c = c0; c < c1; c++) {
                    const float *xc = x + n0 * xn + (grp * Cg + c) * g->xs[1] + j0;
                    for (int r = 0; r < 3; r++) { /* the taps of row r: 3r, 3r + 1, 3r + 2 */
                        __m512 *acc = accbuf + (c - c0) * 72 + 3 * r;
                        const __mmask16 *m3 = masks + 3 * r;
                        if (mk == 8)
                            wtile_8(acc, dy, HW, dyn, xc, xn, cnt, off + 3 * r, m3, sm, nv);
                        else if (mk == 4)
                            wtile_4(acc, dy, HW, dyn, xc, xn, cnt, off + 3 * r, m3, sm, nv);
                        else if (mk == 2)
                            wtile_2(acc, dy, HW, dyn, xc, xn, cnt, off + 3 * r, m3, sm, nv);
                        else
                            wtile_1(acc, dy, HW, dyn, xc, xn, cnt, off + 3 * r, m3, sm, nv);
                    }
                }
            }
        }
        float sums[WCB * 72];
        for (int i = 0; i < (int)(c1 - c0) * 72; i += 16) reduce16(accbuf + i, sums + i); /* WCB * 72 % 16 == 0 */
        for (int64_t c = c0; c < c1; c++)
            for (int m = 0; m < mk; m++)
                for (int t = 0; t < 9; t++)
                    dw[((grp * Kg + k0 + m) * Cg + c) * 9 + widx[t]] = sums[(c - c0) * 72 + m * 9 + t];
    }
}
