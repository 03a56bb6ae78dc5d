/* kernels/cpu/pool_2x2.c — 2x2 stride-2 max pooling on AVX-512, bfloat16 and float32 (pool_2x2.h).
 *
 * Sixteen outputs at a time. The 32 input elements of a row under 16 windows are split into the windows' left and
 * right columns: for bfloat16 they are the low and high halves of 16 32-bit lanes (one shift, one mask widen
 * them to float32), for float32 an even/odd permute of two vectors. The backward puts the two columns back
 * together the same way and writes both rows of every window in full, zeros included, so dinp needs no memset.
 * The generic loop (pool.c) widens each element to double and spends ~10 instructions per tap. */
#include "pool_2x2.h"
#include <math.h>
#include "nn_bf16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POOL_2X2_X86 1
#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

/* Planes below this many input elements in all: one thread (a parallel region costs ~10 us). */
#define POOL_2X2_PARALLEL_MIN 32768

static int fast_geometry(const pool2d_geom *g, const int64_t in[4]) {
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 && g->dh == 1 &&
           g->dw == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W && in[3] == 1 && g->N >= 0 && g->C >= 0;
}

#ifdef POOL_2X2_X86
/* masks of the first k of 16 lanes, and of the first 2k elements of 32 split over two 16-lane halves */
static inline __mmask16 first16(int64_t k) { return k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << k) - 1u); }
static inline __mmask32 first32(int64_t k) { return k >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1ull << k) - 1ull); }

/* ---- the four taps of 16 windows as float32: (h0, w0), (h0, w1), (h1, w0), (h1, w1), window_argmax's order -- */
AVX512_FN static inline void row_bf16(const uint16_t *r, int64_t k, __m512 *left, __m512 *right) {
    const __m512i a = _mm512_maskz_loadu_epi16(first32(2 * k), r);
    *left = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
    *right = _mm512_castsi512_ps(_mm512_and_si512(a, _mm512_set1_epi32((int)0xffff0000u)));
}

AVX512_FN static inline void row_f32(const float *r, int64_t k, __m512 *left, __m512 *right) {
    const __mmask32 m = first32(2 * k);
    const __m512 a = _mm512_maskz_loadu_ps((__mmask16)m, r), b = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), r + 16);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    *left = _mm512_permutex2var_ps(a, even, b);
    *right = _mm512_permutex2var_ps(a, _mm512_add_epi32(even, _mm512_set1_epi32(1)), b);
}

/* pool.c's values-only max: best = v > best ? v : best from -inf, NAN where any tap is a nan */
AVX512_FN static inline __m512 max4(const __m512 t[4]) {
    __m512 best = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    for (int j = 0; j < 4; j++) {
        best = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t[j], best, _CMP_GT_OQ), best, t[j]);
        nan |= _mm512_cmp_ps_mask(t[j], t[j], _CMP_UNORD_Q);
    }
    return _mm512_mask_blend_ps(nan, best, _mm512_set1_ps(NAN));
}

/* window_argmax: the tap taken last where each is taken when strictly greater than the best so far or a nan;
 * sel[j]: the lanes whose argmax is tap j (none for a window of -inf only) */
AVX512_FN static inline void argmax4(const __m512 t[4], __mmask16 sel[4]) {
    __m512 best = _mm512_set1_ps(-INFINITY);
    __m512i arg = _mm512_set1_epi32(-1);
    for (int j = 0; j < 4; j++) {
        const __mmask16 take = _mm512_cmp_ps_mask(t[j], best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(t[j], t[j], _CMP_UNORD_Q);
        best = _mm512_mask_blend_ps(take, best, t[j]);
        arg = _mm512_mask_blend_epi32(take, arg, _mm512_set1_epi32(j));
    }
    for (int j = 0; j < 4; j++) sel[j] = _mm512_cmpeq_epi32_mask(arg, _mm512_set1_epi32(j));
}

/* ---- bfloat16 ------------------------------------------------------------------------------------------------ */
/* a float32 lane that holds a bfloat16 exactly (or a nan) back to bfloat16 bits: gm_float_to_bf16 */
AVX512_FN static inline __m512i bf16_bits(__m512 f) {
    const __m512i x = _mm512_castps_si512(f);
    const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(_mm512_srli_epi32(x, 16), nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
}

AVX512_FN static void fwd_plane_bf16(uint16_t *out, const uint16_t *inp, int64_t rs, const pool2d_geom *g) {
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow;
            __m512 t[4];
            row_bf16(inp + 2 * oh * rs + 2 * ow, k, &t[0], &t[1]);
            row_bf16(inp + (2 * oh + 1) * rs + 2 * ow, k, &t[2], &t[3]);
            _mm256_mask_storeu_epi16(out + oh * g->OW + ow, first16(k), _mm512_cvtepi32_epi16(bf16_bits(max4(t))));
        }
}

AVX512_FN static void bwd_plane_bf16(uint16_t *dinp, const uint16_t *dout, int64_t drs, const uint16_t *inp,
                                     int64_t rs, const pool2d_geom *g) {
    const int64_t H = g->H, W = g->W;
    for (int64_t oh = 0; oh < g->OH; oh++) {
        uint16_t *d0 = dinp + 2 * oh * W, *d1 = d0 + W;
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow;
            __m512 t[4];
            __mmask16 sel[4];
            row_bf16(inp + 2 * oh * rs + 2 * ow, k, &t[0], &t[1]);
            row_bf16(inp + (2 * oh + 1) * rs + 2 * ow, k, &t[2], &t[3]);
            argmax4(t, sel);
            /* pool.c stores 0 + g: the same here (-0 becomes +0, a nan is quieted) */
            const __m512i gv16 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(first16(k), dout + oh * drs + ow));
            const __m512i gv = bf16_bits(_mm512_add_ps(_mm512_castsi512_ps(_mm512_slli_epi32(gv16, 16)),
                                                       _mm512_setzero_ps()));
            const __m512i ghi = _mm512_slli_epi32(gv, 16);
            /* the left column's gradient in the low half of each lane, the right column's in the high half */
            const __m512i row0 = _mm512_or_si512(_mm512_maskz_mov_epi32(sel[0], gv), _mm512_maskz_mov_epi32(sel[1], ghi));
            const __m512i row1 = _mm512_or_si512(_mm512_maskz_mov_epi32(sel[2], gv), _mm512_maskz_mov_epi32(sel[3], ghi));
            _mm512_mask_storeu_epi16(d0 + 2 * ow, first32(2 * k), row0);
            _mm512_mask_storeu_epi16(d1 + 2 * ow, first32(2 * k), row1);
        }
        for (int64_t w = 2 * g->OW; w < W; w++) d0[w] = d1[w] = 0; /* an odd W's last column is in no window */
    }
    for (int64_t h = 2 * g->OH; h < H; h++) /* nor is an odd H's last row */
        for (int64_t w = 0; w < W; w++) dinp[h * W + w] = 0;
}

/* ---- float32 ------------------------------------------------------------------------------------------------- */
AVX512_FN static void fwd_plane_f32(float *out, const float *inp, int64_t rs, const pool2d_geom *g) {
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow;
            __m512 t[4];
            row_f32(inp + 2 * oh * rs + 2 * ow, k, &t[0], &t[1]);
            row_f32(inp + (2 * oh + 1) * rs + 2 * ow, k, &t[2], &t[3]);
            _mm512_mask_storeu_ps(out + oh * g->OW + ow, first16(k), max4(t));
        }
}

AVX512_FN static inline void store_pair_f32(float *d, int64_t k, __m512 left, __m512 right) {
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __mmask32 m = first32(2 * k);
    _mm512_mask_storeu_ps(d, (__mmask16)m, _mm512_permutex2var_ps(left, lo, right));
    _mm512_mask_storeu_ps(d + 16, (__mmask16)(m >> 16),
                          _mm512_permutex2var_ps(left, _mm512_add_epi32(lo, _mm512_set1_epi32(8)), right));
}

AVX512_FN static void bwd_plane_f32(float *dinp, const float *dout, int64_t drs, const float *inp, int64_t rs,
                                    const pool2d_geom *g) {
    const int64_t H = g->H, W = g->W;
    for (int64_t oh = 0; oh < g->OH; oh++) {
        float *d0 = dinp + 2 * oh * W, *d1 = d0 + W;
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow;
            __m512 t[4];
            __mmask16 sel[4];
            row_f32(inp + 2 * oh * rs + 2 * ow, k, &t[0], &t[1]);
            row_f32(inp + (2 * oh + 1) * rs + 2 * ow, k, &t[2], &t[3]);
            argmax4(t, sel);
            const __m512 gv = _mm512_add_ps(_mm512_maskz_loadu_ps(first16(k), dout + oh * drs + ow), _mm512_setzero_ps());
            store_pair_f32(d0 + 2 * ow, k, _mm512_maskz_mov_ps(sel[0], gv), _mm512_maskz_mov_ps(sel[1], gv));
            store_pair_f32(d1 + 2 * ow, k, _mm512_maskz_mov_ps(sel[2], gv), _mm512_maskz_mov_ps(sel[3], gv));
        }
        for (int64_t w = 2 * g->OW; w < W; w++) d0[w] = d1[w] = 0.0f;
    }
    for (int64_t h = 2 * g->OH; h < H; h++)
        for (int64_t w = 0; w < W; w++) dinp[h * W + w] = 0.0f;
}

/* ---- the argmax kept as its tap in the window (pool.c's maxpool2d_forward_taps / _backward_taps) ----------- */
/* t: the four taps of 16 windows; out: the value window_max_at returns (the argmax's, -inf for none), taps: the
 * argmax's tap (0..3, -1 for none), as int8 */
AVX512_FN static inline __m512 argmax4_taps(const __m512 t[4], __m512i *arg) {
    __m512 best = _mm512_set1_ps(-INFINITY);
    *arg = _mm512_set1_epi32(-1);
    for (int j = 0; j < 4; j++) {
        const __mmask16 take = _mm512_cmp_ps_mask(t[j], best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(t[j], t[j], _CMP_UNORD_Q);
        best = _mm512_mask_blend_ps(take, best, t[j]);
        *arg = _mm512_mask_blend_epi32(take, *arg, _mm512_set1_epi32(j));
    }
    return best;
}

AVX512_FN static void fwd_taps_plane(void *out, int8_t *taps, const void *inp, int64_t rs, gm_dtype dt,
                                     const pool2d_geom *g) {
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow, o = oh * g->OW + ow;
            __m512 t[4];
            __m512i arg;
            if (dt == GM_BF16) {
                row_bf16((const uint16_t *)inp + 2 * oh * rs + 2 * ow, k, &t[0], &t[1]);
                row_bf16((const uint16_t *)inp + (2 * oh + 1) * rs + 2 * ow, k, &t[2], &t[3]);
            } else {
                row_f32((const float *)inp + 2 * oh * rs + 2 * ow, k, &t[0], &t[1]);
                row_f32((const float *)inp + (2 * oh + 1) * rs + 2 * ow, k, &t[2], &t[3]);
            }
            const __m512 best = argmax4_taps(t, &arg);
            if (dt == GM_BF16)
                _mm256_mask_storeu_epi16((uint16_t *)out + o, first16(k), _mm512_cvtepi32_epi16(bf16_bits(best)));
            else /* pool.c widens to double and back: a nan is quieted there too (-0 stays -0) */
                _mm512_mask_storeu_ps((float *)out + o, first16(k),
                                      _mm512_castsi512_ps(_mm512_mask_or_epi32(
                                          _mm512_castps_si512(best), _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q),
                                          _mm512_castps_si512(best), _mm512_set1_epi32(0x400000))));
            _mm_mask_storeu_epi8(taps + o, first16(k), _mm512_cvtepi32_epi8(arg));
        }
}

/* 0 where a tap is outside [-1, 4) (the generic loop's GM_ERR_ARG), else 1. */
AVX512_FN static int bwd_taps_plane(void *dinp, const void *dout, int64_t drs, const int8_t *taps, gm_dtype dt,
                                    const pool2d_geom *g) {
    const int64_t H = g->H, W = g->W;
    for (int64_t oh = 0; oh < g->OH; oh++) {
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t k = g->OW - ow;
            const __m512i arg = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(first16(k), taps + oh * g->OW + ow));
            if (_mm512_cmplt_epi32_mask(arg, _mm512_set1_epi32(-1)) |
                _mm512_cmpgt_epi32_mask(arg, _mm512_set1_epi32(3)))
                return 0;
            __mmask16 sel[4];
            for (int j = 0; j < 4; j++) sel[j] = _mm512_cmpeq_epi32_mask(arg, _mm512_set1_epi32(j));
            if (dt == GM_BF16) { /* as bwd_plane_bf16 */
                const uint16_t *dp = (const uint16_t *)dout + oh * drs + ow;
                uint16_t *d0 = (uint16_t *)dinp + 2 * oh * W, *d1 = d0 + W;
                const __m512i gv16 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(first16(k), dp));
                const __m512i gv = bf16_bits(_mm512_add_ps(_mm512_castsi512_ps(_mm512_slli_epi32(gv16, 16)),
                                                           _mm512_setzero_ps()));
                const __m512i ghi = _mm512_slli_epi32(gv, 16);
                const __m512i row0 =
                    _mm512_or_si512(_mm512_maskz_mov_epi32(sel[0], gv), _mm512_maskz_mov_epi32(sel[1], ghi));
                const __m512i row1 =
                    _mm512_or_si512(_mm512_maskz_mov_epi32(sel[2], gv), _mm512_maskz_mov_epi32(sel[3], ghi));
                _mm512_mask_storeu_epi16(d0 + 2 * ow, first32(2 * k), row0);
                _mm512_mask_storeu_epi16(d1 + 2 * ow, first32(2 * k), row1);
            } else {
                float *d0 = (float *)dinp + 2 * oh * W, *d1 = d0 + W;
                const __m512 gv = _mm512_add_ps(_mm512_maskz_loadu_ps(first16(k), (const float *)dout + oh * drs + ow),
                                                _mm512_setzero_ps());
                store_pair_f32(d0 + 2 * ow, k, _mm512_maskz_mov_ps(sel[0], gv), _mm512_maskz_mov_ps(sel[1], gv));
                store_pair_f32(d1 + 2 * ow, k, _mm512_maskz_mov_ps(sel[2], gv), _mm512_maskz_mov_ps(sel[3], gv));
            }
        }
        const size_t es = dt == GM_BF16 ? 2 : 4; /* an odd W's last column is in no window */
        for (int64_t w = 2 * g->OW; w < W; w++) {
            memset((char *)dinp + ((2 * oh) * W + w) * es, 0, es);
            memset((char *)dinp + ((2 * oh + 1) * W + w) * es, 0, es);
        }
    }
    const size_t es = dt == GM_BF16 ? 2 : 4; /* nor is an odd H's last row */
    if (2 * g->OH < H) memset((char *)dinp + 2 * g->OH * W * es, 0, (size_t)((H - 2 * g->OH) * W) * es);
    return 1;
}
#endif

static int team(const pool2d_geom *g, int nthreads) {
    return g->N * g->C * g->H * g->W >= POOL_2X2_PARALLEL_MIN && nthreads > 1 ? nthreads : 1;
}

int maxpool2x2_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const pool2d_geom *g,
                       int nthreads) {
#ifdef POOL_2X2_X86
    if ((dt != GM_BF16 && dt != GM_F32) || !nn_bf16_fast() || !fast_geometry(g, in)) return GM_ERR_UNSUPPORTED;
    const int64_t planes = g->N * g->C, ohw = g->OH * g->OW;
    const int nt = team(g, nthreads);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t p = 0; p < planes; p++) {
        const int64_t off = (p / g->C) * in[0] + (p % g->C) * in[1];
        if (dt == GM_BF16) fwd_plane_bf16((uint16_t *)out + p * ohw, (const uint16_t *)inp + off, in[2], g);
        else fwd_plane_f32((float *)out + p * ohw, (const float *)inp + off, in[2], g);
    }
    return GM_OK;
#else
    (void)out, (void)inp, (void)in, (void)dt, (void)g, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int maxpool2x2_backward_input(void *dinp, const void *dout, const int64_t ds[4], const void *inp, const int64_t in[4],
                              gm_dtype dt, const pool2d_geom *g, int nthreads) {
#ifdef POOL_2X2_X86
    if ((dt != GM_BF16 && dt != GM_F32) || !nn_bf16_fast() || !fast_geometry(g, in) || ds[3] != 1)
        return GM_ERR_UNSUPPORTED;
    const int64_t planes = g->N * g->C, hw = g->H * g->W;
    const int nt = team(g, nthreads);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t p = 0; p < planes; p++) {
        const int64_t n = p / g->C, c = p % g->C, io = n * in[0] + c * in[1], oo = n * ds[0] + c * ds[1];
        if (dt == GM_BF16)
            bwd_plane_bf16((uint16_t *)dinp + p * hw, (const uint16_t *)dout + oo, ds[2], (const uint16_t *)inp + io,
                           in[2], g);
        else
            bwd_plane_f32((float *)dinp + p * hw, (const float *)dout + oo, ds[2], (const float *)inp + io, in[2], g);
    }
    return GM_OK;
#else
    (void)dinp, (void)dout, (void)ds, (void)inp, (void)in, (void)dt, (void)g, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int maxpool2x2_forward_taps(void *out, int8_t *taps, const void *inp, const int64_t in[4], gm_dtype dt,
                            const pool2d_geom *g, int nthreads) {
#ifdef POOL_2X2_X86
    if ((dt != GM_BF16 && dt != GM_F32) || !nn_bf16_fast() || !fast_geometry(g, in)) return GM_ERR_UNSUPPORTED;
    const int64_t planes = g->N * g->C, ohw = g->OH * g->OW, es = dt == GM_BF16 ? 2 : 4;
    const int nt = team(g, nthreads);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t p = 0; p < planes; p++)
        fwd_taps_plane((char *)out + p * ohw * es, taps + p * ohw,
                       (const char *)inp + ((p / g->C) * in[0] + (p % g->C) * in[1]) * es, in[2], dt, g);
    return GM_OK;
#else
    (void)out, (void)taps, (void)inp, (void)in, (void)dt, (void)g, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int maxpool2x2_backward_taps(void *dinp, const void *dout, const int64_t ds[4], const int8_t *taps, gm_dtype dt,
                             const pool2d_geom *g, int nthreads) {
#ifdef POOL_2X2_X86
    const int64_t in[4] = {g->C * g->H * g->W, g->H * g->W, g->W, 1}; /* dinp's: fast_geometry reads in[3] only */
    if ((dt != GM_BF16 && dt != GM_F32) || !nn_bf16_fast() || !fast_geometry(g, in) || ds[3] != 1)
        return GM_ERR_UNSUPPORTED;
    const int64_t planes = g->N * g->C, hw = g->H * g->W, ohw = g->OH * g->OW, es = dt == GM_BF16 ? 2 : 4;
    const int nt = team(g, nthreads);
    int ok = 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1) reduction(& : ok)
    for (int64_t p = 0; p < planes; p++)
        ok &= bwd_taps_plane((char *)dinp + p * hw * es,
                             (const char *)dout + ((p / g->C) * ds[0] + (p % g->C) * ds[1]) * es, ds[2],
                             taps + p * ohw, dt, g);
    return ok ? GM_OK : GM_ERR_ARG;
#else
    (void)dinp, (void)dout, (void)ds, (void)taps, (void)dt, (void)g, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}
