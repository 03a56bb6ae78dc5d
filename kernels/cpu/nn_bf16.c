/* kernels/cpu/nn_bf16.c — bfloat16 activation and batch norm on AVX-512 (see nn_bf16.h).
 *
 * Layout of the code: the OpenMP drivers are plain functions; the work of one chunk (a run of elements, one
 * channel) is a function compiled with AVX512_FN. The split is deliberate: GCC refuses to inline a function with
 * a wider target into a narrower one, and OpenMP's outlined regions do not reliably inherit a target attribute. */
#include "nn_bf16.h"
#include <stdlib.h>
#include <string.h>
#include "activation.h"
#include "bf16_convert.h"
#include "nn_dtype.h"
#include "norm_channel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "bf16_lanes.h"
#define NN_BF16_X86 1
#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

/* Elements per chunk of the elementwise drivers: a thread's share is cut into chunks of this size so the tile
 * buffers of the widened path stay in L1 (2 KiB float32 each). */
#define BF16_TILE 512

int nn_bf16_fast(void) {
#ifdef NN_BF16_X86
    static int s = -1;
    int v = __atomic_load_n(&s, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("GPUMEMNET_NN_BF16");
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            !(e && strcmp(e, "portable") == 0);
        __atomic_store_n(&s, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}

#ifdef NN_BF16_X86
/* ---- 16 lanes of bfloat16 <-> float32 ------------------------------------------------------------------------- */
AVX512_FN static inline __m512 wide(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
AVX512_FN static inline __m512 ld(const uint16_t *p) { return wide(_mm256_loadu_si256((const __m256i *)p)); }
AVX512_FN static inline __m512 ldm(const uint16_t *p, __mmask16 m) { return wide(_mm256_maskz_loadu_epi16(m, p)); }

/* gm_float_to_bf16 on 16 lanes (bf16_lanes.h) */
AVX512_FN static inline __m256i narrow(__m512 f) { return gm_bf16_narrow16(_mm512_castps_si512(f)); }
AVX512_FN static inline void st(uint16_t *p, __m512 f) { _mm256_storeu_si256((__m256i *)p, narrow(f)); }
AVX512_FN static inline void stm(uint16_t *p, __mmask16 m, __m512 f) { _mm256_mask_storeu_epi16(p, m, narrow(f)); }

static inline __mmask16 tail16(int64_t k) { return (__mmask16)((1u << k) - 1u); }
static inline __mmask32 tail32(int64_t k) { return (__mmask32)((1ull << k) - 1ull); }

/* ---- relu on the bit patterns, 32 lanes ----------------------------------------------------------------------- */
/* Lanes that hold a number <= 0 (sign set and not a nan, or +0): relu's zeros, and its gradient's. */
AVX512_FN static inline __mmask32 nonpos(__m512i x) {
    const __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(x, _mm512_set1_epi16(0x7fff)),
                                                  _mm512_set1_epi16(0x7f80));
    const __mmask32 neg = _mm512_cmplt_epi16_mask(x, _mm512_setzero_si512());
    return (neg & ~nan) | _mm512_cmpeq_epi16_mask(x, _mm512_setzero_si512());
}

AVX512_FN static void relu_fwd_run(uint16_t *out, const uint16_t *inp, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512i x = _mm512_loadu_si512(inp + i);
        _mm512_storeu_si512(out + i, _mm512_maskz_mov_epi16(~nonpos(x), x));
    }
    if (i < n) {
        const __mmask32 m = tail32(n - i);
        const __m512i x = _mm512_maskz_loadu_epi16(m, inp + i);
        _mm512_mask_storeu_epi16(out + i, m, _mm512_maskz_mov_epi16(~nonpos(x), x));
    }
}

AVX512_FN static void relu_bwd_run(uint16_t *dinp, const uint16_t *dout, const uint16_t *saved, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512i s = _mm512_loadu_si512(saved + i), g = _mm512_loadu_si512(dout + i);
        _mm512_storeu_si512(dinp + i, _mm512_maskz_mov_epi16(~nonpos(s), g));
    }
    if (i < n) {
        const __mmask32 m = tail32(n - i);
        const __m512i s = _mm512_maskz_loadu_epi16(m, saved + i), g = _mm512_maskz_loadu_epi16(m, dout + i);
        _mm512_mask_storeu_epi16(dinp + i, m, _mm512_maskz_mov_epi16(~nonpos(s), g));
    }
}

/* ---- hardtanh (relu6) in float32 lanes ------------------------------------------------------------------------ */
/* clamp with the generic loop's comparisons (a nan fails both and passes through). An unclamped value is a
 * bfloat16 already, so narrowing it is exact; the bounds round as (float)alpha -> bfloat16, as nn_st does. */
AVX512_FN static inline __m512 clamp(__m512 v, __m512 lo, __m512 hi) {
    const __m512 t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), v, lo);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, hi, _CMP_GT_OQ), t, hi);
}

AVX512_FN static void hardtanh_fwd_run(uint16_t *out, const uint16_t *inp, int64_t n, float a, float b) {
    const __m512 lo = _mm512_set1_ps(a), hi = _mm512_set1_ps(b);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) st(out + i, clamp(ld(inp + i), lo, hi));
    if (i < n) stm(out + i, tail16(n - i), clamp(ldm(inp + i, tail16(n - i)), lo, hi));
}

/* r = s <= alpha || s >= beta ? 0 : g, g passed through bit for bit */
AVX512_FN static inline __m256i hardtanh_grad(__m256i g, __m512 s, __m512 lo, __m512 hi) {
    const __mmask16 kill = _mm512_cmp_ps_mask(s, lo, _CMP_LE_OQ) | _mm512_cmp_ps_mask(s, hi, _CMP_GE_OQ);
    return _mm256_maskz_mov_epi16(~kill, g);
}

AVX512_FN static void hardtanh_bwd_run(uint16_t *dinp, const uint16_t *dout, const uint16_t *saved, int64_t n,
                                       float a, float b) {
    const __m512 lo = _mm512_set1_ps(a), hi = _mm512_set1_ps(b);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dinp + i),
                            hardtanh_grad(_mm256_loadu_si256((const __m256i *)(dout + i)), ld(saved + i), lo, hi));
    if (i < n) {
        const __mmask16 m = tail16(n - i);
        _mm256_mask_storeu_epi16(dinp + i, m, hardtanh_grad(_mm256_maskz_loadu_epi16(m, dout + i),
                                                            ldm(saved + i, m), lo, hi));
    }
}

/* ---- the elementwise drivers ---------------------------------------------------------------------------------- */
/* One chunk [i0, i0 + m) of an activation: the native loops, or the float32 kernel on a widened tile. The
 * float32 kernel rounds its double result to float32 and the narrowing rounds that to bfloat16: the same two
 * roundings nn_st makes for bfloat16, so the result is the generic loop's. */
static int act_chunk(uint16_t *out, const uint16_t *a, const uint16_t *b, int64_t m, int op, double alpha,
                     double beta, int backward) {
    if (op == ACT_RELU) {
        if (backward) relu_bwd_run(out, a, b, m);
        else relu_fwd_run(out, a, m);
        return GM_OK;
    }
    if (op == ACT_HARDTANH) {
        if (backward) hardtanh_bwd_run(out, a, b, m, (float)alpha, (float)beta);
        else hardtanh_fwd_run(out, a, m, (float)alpha, (float)beta);
        return GM_OK;
    }
    float ta[BF16_TILE], tb[BF16_TILE];
    gm_cvt_bf16_to_f32(ta, a, m);
    int s;
    if (backward) {
        gm_cvt_bf16_to_f32(tb, b, m);
        s = activation_backward(ta, ta, tb, m, GM_F32, op, alpha, beta, 1);
    } else {
        s = activation_forward(ta, ta, m, GM_F32, op, alpha, beta, 1);
    }
    if (s == GM_OK) gm_cvt_f32_to_bf16(out, ta, m);
    return s;
}

static int act_run(uint16_t *out, const uint16_t *a, const uint16_t *b, int64_t n, int op, double alpha,
                   double beta, int backward, int nthreads) {
    if (n < 0) return GM_ERR_ARG;
    const int nt = nn_threads(n, nthreads);
    const int64_t chunks = (n + BF16_TILE - 1) / BF16_TILE;
    int status = GM_OK;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1) reduction(| : status)
    for (int64_t k = 0; k < chunks; k++) {
        const int64_t i = k * BF16_TILE, m = n - i < BF16_TILE ? n - i : BF16_TILE;
        status |= act_chunk(out + i, a + i, b ? b + i : NULL, m, op, alpha, beta, backward);
    }
    return status ? GM_ERR_ARG : GM_OK;
}

/* ---- batch norm ----------------------------------------------------------------------------------------------- */
AVX512_FN static double row_sum(const uint16_t *x, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, ld(x + i));
    if (i < n) acc = _mm512_add_ps(acc, ldm(x + i, tail16(n - i)));
    return (double)_mm512_reduce_add_ps(acc);
}

AVX512_FN static double row_sqdev(const uint16_t *x, int64_t n, float mu) {
    const __m512 m = _mm512_set1_ps(mu);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 d = _mm512_sub_ps(ld(x + i), m);
        acc = _mm512_fmadd_ps(d, d, acc);
    }
    if (i < n) { /* the masked-off lanes load 0: keep them out of the sum */
        const __mmask16 k = tail16(n - i);
        const __m512 d = _mm512_maskz_sub_ps(k, ldm(x + i, k), m);
        acc = _mm512_fmadd_ps(d, d, acc);
    }
    return (double)_mm512_reduce_add_ps(acc);
}

/* out = x * a + b */
AVX512_FN static void row_affine(uint16_t *out, const uint16_t *x, int64_t n, float a, float b) {
    const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) st(out + i, _mm512_fmadd_ps(ld(x + i), va, vb));
    if (i < n) stm(out + i, tail16(n - i), _mm512_fmadd_ps(ldm(x + i, tail16(n - i)), va, vb));
}

/* sums of g and of g * (x - mu) over a run (x NULL: only the first) */
AVX512_FN static void row_grad_sums(const uint16_t *g, const uint16_t *x, int64_t n, float mu, double *sg,
                                    double *sgx) {
    const __m512 m = _mm512_set1_ps(mu);
    __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 gv = ld(g + i);
        a = _mm512_add_ps(a, gv);
        if (x) b = _mm512_fmadd_ps(gv, _mm512_sub_ps(ld(x + i), m), b);
    }
    if (i < n) {
        const __mmask16 k = tail16(n - i);
        const __m512 gv = ldm(g + i, k); /* 0 in the masked-off lanes, so their products are 0 too */
        a = _mm512_add_ps(a, gv);
        if (x) b = _mm512_fmadd_ps(gv, _mm512_sub_ps(ldm(x + i, k), m), b);
    }
    *sg += (double)_mm512_reduce_add_ps(a);
    if (x) *sgx += (double)_mm512_reduce_add_ps(b);
}

/* dx = (g - mg) * k - (x - mu) * kp  (training), or g * k (x NULL: eval) */
AVX512_FN static void row_dx(uint16_t *dx, const uint16_t *g, const uint16_t *x, int64_t n, float mu, float mg,
                             float k, float kp) {
    const __m512 vm = _mm512_set1_ps(mu), vg = _mm512_set1_ps(mg), vk = _mm512_set1_ps(k), vp = _mm512_set1_ps(kp);
    int64_t i = 0;
    for (; i < n; i += 16) {
        const __mmask16 t = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        const __m512 gv = ldm(g + i, t);
        __m512 r;
        if (x) r = _mm512_fnmadd_ps(_mm512_sub_ps(ldm(x + i, t), vm), vp, _mm512_mul_ps(_mm512_sub_ps(gv, vg), vk));
        else r = _mm512_mul_ps(gv, vk);
        stm(dx + i, t, r);
    }
}
#endif /* NN_BF16_X86 */

int activation_forward_bf16(uint16_t *out, const uint16_t *inp, int64_t n, int op, double alpha, double beta,
                            int nthreads) {
#ifdef NN_BF16_X86
    if (!nn_bf16_fast()) return GM_ERR_UNSUPPORTED;
    return act_run(out, inp, NULL, n, op, alpha, beta, 0, nthreads);
#else
    (void)out, (void)inp, (void)n, (void)op, (void)alpha, (void)beta, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int activation_backward_bf16(uint16_t *dinp, const uint16_t *dout, const uint16_t *saved, int64_t n, int op,
                             double alpha, double beta, int nthreads) {
#ifdef NN_BF16_X86
    if (!nn_bf16_fast()) return GM_ERR_UNSUPPORTED;
    return act_run(dinp, dout, saved, n, op, alpha, beta, 1, nthreads);
#else
    (void)dinp, (void)dout, (void)saved, (void)n, (void)op, (void)alpha, (void)beta, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int batchnorm_forward_bf16(uint16_t *out, void *mean, void *invstd, void *running_mean, void *running_var,
                           const uint16_t *inp, const void *weight, const void *bias, int64_t N, int64_t C,
                           int64_t HW, gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum,
                           double eps, int nthreads) {
#ifdef NN_BF16_X86
    if (!nn_bf16_fast()) return GM_ERR_UNSUPPORTED;
    if (N < 0 || C < 0 || HW < 0) return GM_ERR_ARG;
    const int64_t cnt = N * HW;
    if (training ? cnt < 1 : (!running_mean || !running_var)) return GM_ERR_ARG;
    const int nt = nn_threads(cnt * C, nthreads);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t c = 0; c < C; c++) {
        double mu = 0.0, ss = 0.0;
        if (training) {
            double s = 0.0;
            for (int64_t n = 0; n < N; n++) s += row_sum(inp + (n * C + c) * HW, HW);
            mu = s / (double)cnt;
            for (int64_t n = 0; n < N; n++) ss += row_sqdev(inp + (n * C + c) * HW, HW, (float)mu);
        }
        double a, b;
        bn_channel_affine(c, training, mu, ss, cnt, mean, invstd, running_mean, running_var, weight, bias, wdt, rdt,
                          sdt, momentum, eps, &a, &b);
        for (int64_t n = 0; n < N; n++) row_affine(out + (n * C + c) * HW, inp + (n * C + c) * HW, HW, (float)a, (float)b);
    }
    return GM_OK;
#else
    (void)out, (void)mean, (void)invstd, (void)running_mean, (void)running_var, (void)inp, (void)weight;
    (void)bias, (void)N, (void)C, (void)HW, (void)wdt, (void)rdt, (void)sdt, (void)training, (void)momentum;
    (void)eps, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int batchnorm_backward_bf16(uint16_t *dinp, void *dweight, void *dbias, const uint16_t *dout, const uint16_t *inp,
                            const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C,
                            int64_t HW, gm_dtype wdt, gm_dtype sdt, int training, int nthreads) {
#ifdef NN_BF16_X86
    if (!nn_bf16_fast()) return GM_ERR_UNSUPPORTED;
    if (N < 0 || C < 0 || HW < 0 || (!inp && (dweight || training))) return GM_ERR_ARG;
    const int64_t cnt = N * HW;
    const int nt = nn_threads(cnt * C, nthreads);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t c = 0; c < C; c++) {
        const double mu = nn_ld(mean, c, sdt), is = nn_ld(invstd, c, sdt);
        const double w = weight ? nn_ld(weight, c, wdt) : 1.0;
        double sg = 0.0, sgx = 0.0; /* sum(g), sum(g * (x - mean)) */
        if (dweight || training || dbias) {
            const uint16_t *x = (dweight || training) ? inp : NULL; /* eval without dweight: inp may be NULL */
            for (int64_t n = 0; n < N; n++)
                row_grad_sums(dout + (n * C + c) * HW, x ? x + (n * C + c) * HW : NULL, HW, (float)mu, &sg, &sgx);
        }
        if (dbias) nn_st(dbias, c, wdt, sg);
        if (dweight) nn_st(dweight, c, wdt, sgx * is);
        if (dinp) {
            const double k = w * is;
            const double mg = training ? sg / (double)cnt : 0.0, proj = training ? sgx * is * is / (double)cnt : 0.0;
            for (int64_t n = 0; n < N; n++)
                row_dx(dinp + (n * C + c) * HW, dout + (n * C + c) * HW, training ? inp + (n * C + c) * HW : NULL,
                       HW, (float)mu, (float)mg, (float)k, (float)(k * proj));
        }
    }
    return GM_OK;
#else
    (void)dinp, (void)dweight, (void)dbias, (void)dout, (void)inp, (void)weight, (void)mean, (void)invstd;
    (void)N, (void)C, (void)HW, (void)wdt, (void)sdt, (void)training, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}
