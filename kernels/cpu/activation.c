/* kernels/cpu/activation.c — pointwise activations (see activation.h). One loop per op, each over the helpers of
 * nn_dtype.h; the op switch sits outside the loops. */
#include "activation.h"
#include "nn_bf16.h"
#include "nn_dtype.h"
#include "vec_math.h"

/* sqrt(2/pi) and 1/sqrt(2*pi), 1/sqrt(2): the constants of the two GELU forms (PyTorch's kBeta, kAlpha). */
#define GELU_BETA 0.7978845608028654
#define GELU_KAPPA 0.044715
#define INV_SQRT_2PI 0.3989422804014327
#define INV_SQRT_2 0.7071067811865476

/* expm1 for elu (exp(x) - 1 loses every digit of a small negative x), single precision for the narrow dtypes
 * as nn_exp & co. */
static inline __attribute__((always_inline)) double act_expm1(double x, int dt) {
    return dt == GM_F64 ? expm1(x) : (double)expm1f((float)x);
}

/* Each body reads v = input element i and writes `r` (DT: the dtype, a constant per dispatched copy). */
#define ACT_LOOP(...)                                                                                        \
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")                            \
                for (int64_t i = 0; i < n; i++) {                                                            \
                    const double v = nn_ld(inp, i, DT);                                                      \
                    double r;                                                                                \
                    __VA_ARGS__;                                                                             \
                    nn_st(out, i, DT, r);                                                                    \
                })

/* The same for the ops with a transcendental function, in blocks of 64 elements, each one `omp simd` loop: over the
 * data itself or, for the last, partial block, over a copy padded with zeros. The same loop code runs either way, so
 * every element takes the same vector function (vec_math.h) and its result depends neither on its position nor on
 * the thread count: a scalar remainder loop would give a few elements libm's value, an ulp away, and where tanh
 * saturates that ulp is the whole gradient. (64, not 16: GCC unrolls a 16-trip loop completely, and straight-line
 * code calls the scalar functions.) */
#define VBLOCK 64
/* For block b: srcs[] (the block of each source array, or its padded copy), dst (the block of DST, or pad_out) and
 * its element count m; VBLOCK_END copies pad_out's first m elements into DST. esz: the dtype's size. */
#define VBLOCK_BEGIN(DST, ...)                                                                               \
    const int64_t i0 = b * VBLOCK, m = n - i0 < VBLOCK ? n - i0 : VBLOCK;                                  \
    _Alignas(64) unsigned char pad_out[VBLOCK * 8], pad_in[2][VBLOCK * 8];                                   \
    const void *srcs[] = {__VA_ARGS__};                                                                      \
    void *dst = (char *)(DST) + i0 * esz;                                                                    \
    for (size_t q = 0; q < sizeof srcs / sizeof *srcs; q++) {                                                \
        srcs[q] = (const char *)srcs[q] + i0 * esz;                                                          \
        if (m < VBLOCK) {                                                                                    \
            memset(pad_in[q], 0, sizeof pad_in[q]);                                                          \
            srcs[q] = memcpy(pad_in[q], srcs[q], (size_t)m * esz);                                           \
        }                                                                                                    \
    }                                                                                                        \
    if (m < VBLOCK) dst = pad_out;
#define VBLOCK_END(DST)                                                                                      \
    if (m < VBLOCK) memcpy((char *)(DST) + i0 * esz, pad_out, (size_t)m * esz);

#define ACT_VLOOP(...)                                                                                       \
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")                            \
                for (int64_t b = 0; b < (n + VBLOCK - 1) / VBLOCK; b++) {                                   \
                    VBLOCK_BEGIN(out, inp)                                                                   \
                    _Pragma("omp simd") for (int64_t k = 0; k < VBLOCK; k++) {                               \
                        const double v = nn_ld(srcs[0], k, DT);                                              \
                        double r;                                                                            \
                        __VA_ARGS__;                                                                         \
                        nn_st(dst, k, DT, r);                                                                \
                    }                                                                                        \
                    VBLOCK_END(out)                                                                          \
                })

GM_VEC_CLONES int activation_forward(void *out, const void *inp, int64_t n, gm_dtype dt, int op, double alpha,
                                     double beta, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    const size_t esz = gm_dtype_size(dt); /* for the block loops' pads */
    if (dt == GM_BF16) { /* AVX-512 bfloat16 loops where the CPU has them (nn_bf16.h) */
        const int s = activation_forward_bf16(out, inp, n, op, alpha, beta, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    switch (op) {
    /* NaN passes through, as in PyTorch: hence the test v <= 0 rather than v > 0 */
    case ACT_RELU: ACT_LOOP(r = v <= 0.0 ? 0.0 : v) break;
    case ACT_LEAKY_RELU: ACT_LOOP(r = v > 0.0 ? v : v * alpha) break;
    /* 1/(1+e^-v) overflows harmlessly to 0 for very negative v; no cancellation either way */
    case ACT_SIGMOID: ACT_VLOOP(r = 1.0 / (1.0 + nn_exp(-v, DT))) break;
    case ACT_TANH: ACT_VLOOP(r = nn_tanh(v, DT)) break;
    case ACT_GELU: ACT_VLOOP(r = 0.5 * v * (1.0 + nn_erf(v * INV_SQRT_2, DT))) break;
    case ACT_GELU_TANH: ACT_VLOOP(r = 0.5 * v * (1.0 + nn_tanh(GELU_BETA * (v + GELU_KAPPA * v * v * v), DT))) break;
    case ACT_SILU: ACT_VLOOP(r = v / (1.0 + nn_exp(-v, DT))) break;
    /* the clamps are written as comparisons that let NaN through, as PyTorch's std::min/std::max order does */
    case ACT_HARDSWISH: ACT_LOOP(double t = v + 3.0; t = t < 0.0 ? 0.0 : t; t = t > 6.0 ? 6.0 : t; r = v * t / 6.0)
        break;
    /* relu6(v + 3) / 6, written so that an input strictly inside (-3, 3) gives an output strictly inside (0, 1)
     * even in float64 (backward tests the output): v + 3 would round 3 - ulp up to 6 there; 3 - v is exact */
    case ACT_HARDSIGMOID:
        ACT_LOOP(r = v <= -3.0 ? 0.0 : v >= 3.0 ? 1.0 : v >= 0.0 ? 1.0 - (3.0 - v) / 6.0 : (v + 3.0) / 6.0)
        break;
    case ACT_MISH: ACT_VLOOP(r = v * nn_tanh(nn_log1p(nn_exp(v, DT), DT), DT)) break;
    /* clamp(v, alpha, beta) = min(max(v, alpha), beta), also when alpha > beta (then everything is beta) */
    case ACT_HARDTANH: ACT_LOOP(const double t = v < alpha ? alpha : v; r = t > beta ? beta : t) break;
    case ACT_ELU: ACT_VLOOP(r = v > 0.0 ? v : alpha * act_expm1(v, DT)) break;
    /* alpha: beta of softplus, beta: its threshold, above which it is the identity */
    case ACT_SOFTPLUS: ACT_VLOOP(r = v * alpha > beta ? v : nn_log1p(nn_exp(v * alpha, DT), DT) / alpha) break;
    default: return GM_ERR_ARG;
    }
    return GM_OK;
}

/* Each body reads g = dout[i], s = saved[i] and writes `r`. */
#define ACT_GRAD_LOOP(...)                                                                                   \
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")                            \
                for (int64_t i = 0; i < n; i++) {                                                            \
                    const double g = nn_ld(dout, i, DT), s = nn_ld(saved, i, DT);                           \
                    double r;                                                                                \
                    __VA_ARGS__;                                                                             \
                    nn_st(dinp, i, DT, r);                                                                   \
                })

#define ACT_GRAD_VLOOP(...)                                                                                  \
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")                            \
                for (int64_t b = 0; b < (n + VBLOCK - 1) / VBLOCK; b++) {                                   \
                    VBLOCK_BEGIN(dinp, dout, saved)                                                          \
                    _Pragma("omp simd") for (int64_t k = 0; k < VBLOCK; k++) {                               \
                        const double g = nn_ld(srcs[0], k, DT), s = nn_ld(srcs[1], k, DT);                   \
                        double r;                                                                            \
                        __VA_ARGS__;                                                                         \
                        nn_st(dst, k, DT, r);                                                                \
                    }                                                                                        \
                    VBLOCK_END(dinp)                                                                         \
                })

GM_VEC_CLONES int activation_backward(void *dinp, const void *dout, const void *saved, int64_t n, gm_dtype dt,
                                      int op, double alpha, double beta, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    const size_t esz = gm_dtype_size(dt); /* for the block loops' pads */
    if (dt == GM_BF16) {
        const int s = activation_backward_bf16(dinp, dout, saved, n, op, alpha, beta, nthreads);
        if (s != GM_ERR_UNSUPPORTED) return s;
    }
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    switch (op) {
    case ACT_RELU: ACT_GRAD_LOOP(r = s <= 0.0 ? 0.0 : g) break; /* PyTorch's threshold_backward */
    case ACT_LEAKY_RELU: ACT_GRAD_LOOP(r = s > 0.0 ? g : g * alpha) break;
    case ACT_SIGMOID: ACT_GRAD_LOOP(r = g * s * (1.0 - s)) break;
    case ACT_TANH: ACT_GRAD_LOOP(r = g * (1.0 - s * s)) break;
    case ACT_GELU: /* Phi(x) + x phi(x) */
        ACT_GRAD_VLOOP(r = g * (0.5 * (1.0 + nn_erf(s * INV_SQRT_2, DT)) + s * INV_SQRT_2PI * nn_exp(-0.5 * s * s, DT)))
        break;
    case ACT_GELU_TANH: /* PyTorch's GeluBackward with approximate="tanh", same factoring */
        ACT_GRAD_VLOOP(
            const double t = nn_tanh(GELU_BETA * (s + GELU_KAPPA * s * s * s), DT);
            r = g * (0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * GELU_BETA * (1.0 + 3.0 * GELU_KAPPA * s * s)))
        break;
    case ACT_SILU: ACT_GRAD_VLOOP(const double sg = 1.0 / (1.0 + nn_exp(-s, DT)); r = g * sg * (1.0 + s * (1.0 - sg)))
        break;
    /* the subgradients at the kinks are PyTorch's: 0 at -3 and 1 at 3 for hardswish, 0 at both ends for
     * hardsigmoid and hardtanh; NaN takes the last branch, as there */
    case ACT_HARDSWISH: ACT_GRAD_LOOP(r = s <= -3.0 ? 0.0 : s < 3.0 ? g * (s / 3.0 + 0.5) : g) break;
    /* saved: the output, in (0, 1) exactly where the input is in (-3, 3) */
    case ACT_HARDSIGMOID: ACT_GRAD_LOOP(r = s > 0.0 && s < 1.0 ? g * ACT_ONE_SIXTH : 0.0) break;
    case ACT_MISH:
        ACT_GRAD_VLOOP(const double sg = 1.0 / (1.0 + nn_exp(-s, DT));
                      const double t = nn_tanh(nn_log1p(nn_exp(s, DT), DT), DT);
                      r = g * (t + s * sg * (1.0 - t * t)))
        break;
    /* saved: the output, strictly inside (alpha, beta) exactly where the input is */
    case ACT_HARDTANH: ACT_GRAD_LOOP(r = s <= alpha || s >= beta ? 0.0 : g) break;
    /* saved: the output when alpha >= 0 (<= 0 exactly where the input is; d/dx alpha (e^x - 1) = out + alpha),
     * else the input */
    case ACT_ELU: ACT_GRAD_VLOOP(r = s <= 0.0 ? (alpha >= 0.0 ? g * (s + alpha) : g * alpha * nn_exp(s, DT)) : g) break;
    case ACT_SOFTPLUS: ACT_GRAD_VLOOP(r = s * alpha > beta ? g : g / (1.0 + nn_exp(-s * alpha, DT))) break;
    default: return GM_ERR_ARG;
    }
    return GM_OK;
}

/* ---- relu's bit mask ---------------------------------------------------------------------------------- */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RELU_MASK_X86 1
/* Mask bytes [0, 4 blocks) of 2-byte floats (float16/bfloat16: inf is the dtype's infinity), 32 elements a step
 * on the bits as the scalar loop below: not <= 0 is NaN (magnitude above infinity's) or positive non-zero (as
 * int16, > 0). The scalar loop took 3.9 ms of the UNet's bfloat16 autocast step, against 2.2 for float32's. */
__attribute__((target("avx512f,avx512bw"))) static void relu_mask_pack_h16(uint8_t *mask, const uint16_t *y,
                                                                           int64_t blocks, uint16_t inf, int nt) {
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t b = 0; b < blocks; b++) {
        const __m512i u = _mm512_loadu_si512(y + 32 * b);
        const uint32_t m = _mm512_cmpgt_epu16_mask(_mm512_and_si512(u, _mm512_set1_epi16(0x7fff)),
                                                   _mm512_set1_epi16((short)inf)) |
                           _mm512_cmpgt_epi16_mask(u, _mm512_setzero_si512());
        memcpy(mask + 4 * b, &m, 4);
    }
}

/* dst[i] = src[i] where mask bit i is set, else +0, for 32 blocks of 2-byte elements. */
__attribute__((target("avx512f,avx512bw"))) static void relu_mask_select_h16(uint16_t *dst, const uint16_t *src,
                                                                             const uint8_t *mask, int64_t blocks,
                                                                             int nt) {
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t b = 0; b < blocks; b++) {
        uint32_t m;
        memcpy(&m, mask + 4 * b, 4);
        _mm512_storeu_si512(dst + 32 * b, _mm512_maskz_loadu_epi16(m, src + 32 * b));
    }
}
#endif

int relu_mask_pack(uint8_t *mask, const void *out, int64_t n, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    const int64_t nbytes = (n + 7) / 8;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    if (dt == GM_F32) { /* the usual case, compared as float: the same test, no widening */
        const float *y = out;
        const int64_t full = n / 8;
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t b = 0; b < full; b++) { /* written out so that gcc turns the eight tests into one vector compare */
            const float *v = y + b * 8;
            mask[b] = (uint8_t)((unsigned)!(v[0] <= 0.0f) | (unsigned)!(v[1] <= 0.0f) << 1 |
                                (unsigned)!(v[2] <= 0.0f) << 2 | (unsigned)!(v[3] <= 0.0f) << 3 |
                                (unsigned)!(v[4] <= 0.0f) << 4 | (unsigned)!(v[5] <= 0.0f) << 5 |
                                (unsigned)!(v[6] <= 0.0f) << 6 | (unsigned)!(v[7] <= 0.0f) << 7);
        }
        if (full < nbytes) {
            unsigned bits = 0;
            for (int64_t i = full * 8; i < n; i++) bits |= (unsigned)!(y[i] <= 0.0f) << (i - full * 8);
            mask[full] = (uint8_t)bits;
        }
        return GM_OK;
    }
    if (dt == GM_BF16 || dt == GM_F16) {
        /* on the bits: not <= 0 is NaN (magnitude above infinity's) or a positive non-zero (sign clear) */
        const uint16_t *y = out, inf = dt == GM_BF16 ? 0x7f80 : 0x7c00;
        int64_t b0 = 0; /* bytes done by the vector loop */
#ifdef RELU_MASK_X86
        if (nn_bf16_fast() && n >= 32) {
            relu_mask_pack_h16(mask, y, n / 32, inf, nt);
            b0 = n / 32 * 4;
        }
#endif
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t b = b0; b < nbytes; b++) {
            const int64_t i0 = b * 8, k1 = n - i0 < 8 ? n - i0 : 8;
            unsigned bits = 0;
            for (int64_t k = 0; k < k1; k++) {
                const unsigned u = y[i0 + k], mag = u & 0x7fffu;
                bits |= (unsigned)((mag > inf) | (!(u & 0x8000u) & (mag != 0))) << k;
            }
            mask[b] = (uint8_t)bits;
        }
        return GM_OK;
    }
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
                for (int64_t b = 0; b < nbytes; b++) {
                    const int64_t end = b * 8 + 8 < n ? b * 8 + 8 : n;
                    unsigned bits = 0;
                    for (int64_t i = b * 8; i < end; i++) bits |= (unsigned)!(nn_ld(out, i, DT) <= 0.0) << (i - b * 8);
                    mask[b] = (uint8_t)bits;
                })
    return GM_OK;
}

/* Each element's bits ANDed with all ones or all zeros: dout[i] itself or +0.0 (what the saved-output backward
 * writes), in any float dtype of that width, with no conversion; eight elements per mask byte. */
#define RELU_MASK_SELECT(T, B0)                                                                              \
    do {                                                                                                     \
        const T *src = dout;                                                                                 \
        T *dst = dinp;                                                                                       \
        _Pragma("omp parallel for schedule(static) num_threads(nt)")                                        \
        for (int64_t b = B0; b < nbytes; b++) {                                                              \
            const unsigned bits = mask[b];                                                                   \
            const int64_t i0 = b * 8, k1 = n - i0 < 8 ? n - i0 : 8;                                          \
            for (int64_t k = 0; k < k1; k++) dst[i0 + k] = src[i0 + k] & (T)(0 - (T)((bits >> k) & 1u));    \
        }                                                                                                    \
    } while (0)

int relu_mask_backward(void *dinp, const void *dout, const uint8_t *mask, int64_t n, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    const int64_t nbytes = (n + 7) / 8;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    int64_t b0 = 0; /* mask bytes done by the vector loop */
#ifdef RELU_MASK_X86
    if (gm_dtype_size(dt) == 2 && nn_bf16_fast() && n >= 32) {
        relu_mask_select_h16(dinp, dout, mask, n / 32, nt);
        b0 = n / 32 * 4;
    }
#endif
    switch (gm_dtype_size(dt)) {
    case 2: RELU_MASK_SELECT(uint16_t, b0); break;
    case 4: RELU_MASK_SELECT(uint32_t, 0); break;
    default: RELU_MASK_SELECT(uint64_t, 0); break;
    }
    return GM_OK;
}

/* ---- prelu ---------------------------------------------------------------------------------------------------- */
/* Row r of the (outer, C) rows of `inner` elements uses weight w[r % C] (wn == C) or w[0] (wn == 1). */
#define PRELU_W(r) nn_ld(w, wn == 1 ? 0 : (r) % C, DT)

int prelu_forward(void *out, const void *inp, const void *w, int64_t outer, int64_t C, int64_t inner, int64_t wn,
                  gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || outer < 0 || C < 0 || inner < 0 || (wn != 1 && wn != C)) return GM_ERR_ARG;
    const int64_t rows = outer * C;
    const int nt = nn_threads(rows * inner, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
                for (int64_t r = 0; r < rows; r++) {
                    const double a = PRELU_W(r);
                    for (int64_t i = r * inner; i < (r + 1) * inner; i++) {
                        const double v = nn_ld(inp, i, DT);
                        nn_st(out, i, DT, v > 0.0 ? v : a * v); /* NaN: a * NaN = NaN, as PyTorch */
                    }
                })
    return GM_OK;
}

/* Segment q = j * C + c of the sums: the rows (o, c) of channel c with o in outer chunk j (chunks of ceil(outer /
 * J) rows). */
int prelu_backward(void *dinp, void *dw, double *partial, const void *dout, const void *inp, const void *w,
                   int64_t outer, int64_t C, int64_t inner, int64_t wn, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || outer < 0 || C < 0 || inner < 0 || (wn != 1 && wn != C)) return GM_ERR_ARG;
    const int64_t rows = outer * C;
    const int nt = nn_threads(rows * inner, nthreads);
    (void)nt;
    /* the weight's gradient first: dinp may be dout */
    if (dw) {
        const int64_t J = prelu_outer_chunks(outer, C), per = J ? (outer + J - 1) / J : 0, segs = J * C;
        NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
                    for (int64_t q = 0; q < segs; q++) {
                        const int64_t j = q / C, c = q - j * C, o1 = (j + 1) * per < outer ? (j + 1) * per : outer;
                        double s = 0.0; /* x * g where x <= 0 */
                        for (int64_t o = j * per; o < o1; o++)
                            for (int64_t i = (o * C + c) * inner; i < (o * C + c + 1) * inner; i++) {
                                const double v = nn_ld(inp, i, DT);
                                s += v > 0.0 ? 0.0 : v * nn_ld(dout, i, DT);
                            }
                        partial[q] = s;
                    })
        /* weight k's partials in segment order: every segment (wn = 1), or channel k's J of them */
        for (int64_t k = 0; k < wn; k++) {
            double s = 0.0;
            for (int64_t q = wn == 1 ? 0 : k; q < segs; q += wn == 1 ? 1 : C) s += partial[q];
            nn_st(dw, k, dt, s);
        }
    }
    if (dinp) {
        NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
                    for (int64_t r = 0; r < rows; r++) {
                        const double a = PRELU_W(r);
                        for (int64_t i = r * inner; i < (r + 1) * inner; i++) {
                            const double g = nn_ld(dout, i, DT);
                            nn_st(dinp, i, DT, nn_ld(inp, i, DT) > 0.0 ? g : a * g);
                        }
                    })
    }
    return GM_OK;
}
