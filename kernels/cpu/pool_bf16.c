/* kernels/cpu/pool_bf16.c — 2x2 stride-2 bfloat16 max pooling on AVX-512 (pool_bf16.h).
 *
 * Sixteen outputs at a time: 32 bfloat16 of an input row, read as 16 32-bit lanes, hold each window's left
 * column in the low half and its right column in the high half, so the two columns widen to float32 with one
 * shift and one mask, and the backward writes both columns of a row back with one 32-lane store. The generic
 * loop (pool.c) widens each element to double and costs ~10 instructions per tap. */
#include "pool_bf16.h"
#include "nn_bf16.h"
#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POOL_BF16_X86 1
#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

/* Planes below this many input elements in all: one thread (a parallel region costs ~10 us). */
#define POOL_BF16_PARALLEL_MIN 32768

static int fast_geometry(const pool2d_geom *g, const int64_t in[4]) {
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 && g->dh == 1 &&
           g->dw == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W && in[3] == 1 && g->N >= 0 && g->C >= 0;
}

#ifdef POOL_BF16_X86
static inline __mmask16 lanes(int64_t k) { return k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << k) - 1u); }
static inline __mmask32 lanes2(int64_t k) { return k >= 16 ? (__mmask32)0xffffffffu : (__mmask32)((1ull << (2 * k)) - 1ull); }

/* The four taps of 16 windows, as float32: (h0, w0), (h0, w1), (h1, w0), (h1, w1), in window_argmax's order. */
AVX512_FN static inline void taps(const uint16_t *r0, const uint16_t *r1, int64_t k, __m512 t[4]) {
    const __mmask32 m = lanes2(k);
    const __m512i a = _mm512_maskz_loadu_epi16(m, r0), b = _mm512_maskz_loadu_epi16(m, r1);
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    t[0] = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
    t[1] = _mm512_castsi512_ps(_mm512_and_si512(a, hi));
    t[2] = _mm512_castsi512_ps(_mm512_slli_epi32(b, 16));
    t[3] = _mm512_castsi512_ps(_mm512_and_si512(b, hi));
}

AVX512_FN static void fwd_plane(uint16_t *out, const uint16_t *inp, int64_t rs, const pool2d_geom *g) {
    for (int64_t oh = 0; oh < g->OH; oh++) {
        const uint16_t *r0 = inp + 2 * oh * rs, *r1 = r0 + rs;
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow;
            __m512 t[4];
            taps(r0 + 2 * ow, r1 + 2 * ow, k, t);
            /* best = v > best ? v : best from -inf; any nan makes the output nan (pool.c's values-only loop) */
            __m512 best = _mm512_set1_ps(-INFINITY);
            __mmask16 nan = 0;
            for (int j = 0; j < 4; j++) {
                best = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t[j], best, _CMP_GT_OQ), best, t[j]);
                nan |= _mm512_cmp_ps_mask(t[j], t[j], _CMP_UNORD_Q);
            }
            /* every lane holds a bfloat16 exactly: its upper half is the result; a nan is written as NAN */
            __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(best), 16);
            bits = _mm512_mask_blend_epi32(nan, bits, _mm512_set1_epi32(0x7fc0));
            _mm256_mask_storeu_epi16(out + oh * g->OW + ow, lanes(k), _mm512_cvtepi32_epi16(bits));
        }
    }
}

AVX512_FN static void bwd_plane(uint16_t *dinp, const uint16_t *dout, int64_t drs, const uint16_t *inp, int64_t rs,
                                const pool2d_geom *g) {
    const int64_t H = g->H, W = g->W;
    for (int64_t oh = 0; oh < g->OH; oh++) {
        const uint16_t *r0 = inp + 2 * oh * rs, *r1 = r0 + rs;
        uint16_t *d0 = dinp + 2 * oh * W, *d1 = d0 + W;
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow;
            __m512 t[4];
            taps(r0 + 2 * ow, r1 + 2 * ow, k, t);
            /* window_argmax: take a tap when it is strictly greater than the best so far or a nan */
            __m512 best = _mm512_set1_ps(-INFINITY);
            __m512i arg = _mm512_set1_epi32(-1);
            for (int j = 0; j < 4; j++) {
                const __mmask16 take = _mm512_cmp_ps_mask(t[j], best, _CMP_GT_OQ) |
                                       _mm512_cmp_ps_mask(t[j], t[j], _CMP_UNORD_Q);
                best = _mm512_mask_blend_ps(take, best, t[j]);
                arg = _mm512_mask_blend_epi32(take, arg, _mm512_set1_epi32(j));
            }
            const __m512i gv = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes(k), dout + oh * drs + ow));
            const __m512i ghi = _mm512_slli_epi32(gv, 16);
            /* a row's 32 bfloat16: the left column's gradient in the low half of each lane, the right's in the
             * high half; the input gradient of a max pool is the output's, moved, so no rounding happens */
            const __m512i row0 = _mm512_or_si512(_mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(arg, _mm512_set1_epi32(0)), gv),
                                                 _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(arg, _mm512_set1_epi32(1)), ghi));
            const __m512i row1 = _mm512_or_si512(_mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(arg, _mm512_set1_epi32(2)), gv),
                                                 _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(arg, _mm512_set1_epi32(3)), ghi));
            _mm512_mask_storeu_epi16(d0 + 2 * ow, lanes2(k), row0);
            _mm512_mask_storeu_epi16(d1 + 2 * ow, lanes2(k), row1);
        }
        /* an odd W's last column is in no window */
        for (int64_t w = 2 * g->OW; w < W; w++) d0[w] = d1[w] = 0;
    }
    /* rows below the last window (an odd H) are in none */
    for (int64_t h = 2 * g->OH; h < H; h++)
        for (int64_t w = 0; w < W; w++) dinp[h * W + w] = 0;
}
#endif

int maxpool2d_forward_bf16(uint16_t *out, const uint16_t *inp, const int64_t in[4], const pool2d_geom *g,
                           int nthreads) {
#ifdef POOL_BF16_X86
    if (!nn_bf16_fast() || !fast_geometry(g, in)) return GM_ERR_UNSUPPORTED;
    const int64_t planes = g->N * g->C;
    const int nt = planes * g->H * g->W >= POOL_BF16_PARALLEL_MIN && nthreads > 1 ? nthreads : 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t p = 0; p < planes; p++)
        fwd_plane(out + p * g->OH * g->OW, inp + (p / g->C) * in[0] + (p % g->C) * in[1], in[2], g);
    return GM_OK;
#else
    (void)out, (void)inp, (void)in, (void)g, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int maxpool2d_backward_input_bf16(uint16_t *dinp, const uint16_t *dout, const int64_t ds[4], const uint16_t *inp,
                                  const int64_t in[4], const pool2d_geom *g, int nthreads) {
#ifdef POOL_BF16_X86
    if (!nn_bf16_fast() || !fast_geometry(g, in) || ds[3] != 1) return GM_ERR_UNSUPPORTED;
    const int64_t planes = g->N * g->C;
    const int nt = planes * g->H * g->W >= POOL_BF16_PARALLEL_MIN && nthreads > 1 ? nthreads : 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t p = 0; p < planes; p++) {
        const int64_t n = p / g->C, c = p % g->C;
        bwd_plane(dinp + p * g->H * g->W, dout + n * ds[0] + c * ds[1], ds[2], inp + n * in[0] + c * in[1], in[2], g);
    }
    return GM_OK;
#else
    (void)dinp, (void)dout, (void)ds, (void)inp, (void)in, (void)g, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}
