/* kernels/cpu/norm_f32.c — float32 batch norm in AVX-512 double lanes (norm_f32.h). The drivers are plain
 * functions and each run's work an AVX512_FN function, for the reasons nn_bf16.c gives. */
#include "norm_f32.h"
#include "nn_bf16.h"
#include "nn_dtype.h"
#include "norm_channel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NORM_F32_X86 1
#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

static inline __mmask8 tail8(int64_t k) { return k >= 8 ? (__mmask8)0xff : (__mmask8)((1u << k) - 1u); }

/* eight floats of a run, widened (masked-off lanes 0) */
AVX512_FN static inline __m512d ldd(const float *p, __mmask8 m) { return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, p)); }

AVX512_FN static double run_sum(const float *x, int64_t n) {
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) acc = _mm512_add_pd(acc, ldd(x + i, tail8(n - i)));
    return _mm512_reduce_add_pd(acc);
}

AVX512_FN static double run_sqdev(const float *x, int64_t n, double mu) {
    const __m512d m = _mm512_set1_pd(mu);
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) {
        const __mmask8 k = tail8(n - i);
        const __m512d d = _mm512_maskz_sub_pd(k, ldd(x + i, k), m);
        acc = _mm512_add_pd(acc, _mm512_mul_pd(d, d));
    }
    return _mm512_reduce_add_pd(acc);
}

/* out = (float)(x * a + b), a multiply then an add as norm.c's loop */
AVX512_FN static void run_affine(float *out, const float *x, int64_t n, double a, double b) {
    const __m512d va = _mm512_set1_pd(a), vb = _mm512_set1_pd(b);
    for (int64_t i = 0; i < n; i += 8) {
        const __mmask8 k = tail8(n - i);
        _mm256_mask_storeu_ps(out + i, k, _mm512_cvtpd_ps(_mm512_add_pd(_mm512_mul_pd(ldd(x + i, k), va), vb)));
    }
}

AVX512_FN static void run_grad_sums(const float *g, const float *x, int64_t n, double mu, double *sg, double *sgx) {
    const __m512d m = _mm512_set1_pd(mu);
    __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) {
        const __mmask8 k = tail8(n - i);
        const __m512d gv = ldd(g + i, k); /* 0 in masked-off lanes, so their products are 0 */
        a = _mm512_add_pd(a, gv);
        if (x) b = _mm512_add_pd(b, _mm512_mul_pd(gv, _mm512_sub_pd(ldd(x + i, k), m)));
    }
    *sg += _mm512_reduce_add_pd(a);
    if (x) *sgx += _mm512_reduce_add_pd(b);
}

/* training: dx = k * (g - mg - (x - mu) * proj); eval (x NULL): dx = k * g — norm.c's expressions, in its order */
AVX512_FN static void run_dx(float *dx, const float *g, const float *x, int64_t n, double mu, double mg, double k,
                             double proj) {
    const __m512d vm = _mm512_set1_pd(mu), vg = _mm512_set1_pd(mg), vk = _mm512_set1_pd(k), vp = _mm512_set1_pd(proj);
    for (int64_t i = 0; i < n; i += 8) {
        const __mmask8 t = tail8(n - i);
        const __m512d gv = ldd(g + i, t);
        __m512d r;
        if (x) r = _mm512_mul_pd(vk, _mm512_sub_pd(_mm512_sub_pd(gv, vg), _mm512_mul_pd(_mm512_sub_pd(ldd(x + i, t), vm), vp)));
        else r = _mm512_mul_pd(vk, gv);
        _mm256_mask_storeu_ps(dx + i, t, _mm512_cvtpd_ps(r));
    }
}
#endif

int batchnorm_forward_f32(float *out, void *mean, void *invstd, void *running_mean, void *running_var,
                          const float *inp, const void *weight, const void *bias, int64_t N, int64_t C, int64_t HW,
                          gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum, double eps,
                          int nthreads) {
#ifdef NORM_F32_X86
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
            for (int64_t n = 0; n < N; n++) s += run_sum(inp + (n * C + c) * HW, HW);
            mu = s / (double)cnt;
            for (int64_t n = 0; n < N; n++) ss += run_sqdev(inp + (n * C + c) * HW, HW, mu);
        }
        double a, b;
        bn_channel_affine(c, training, mu, ss, cnt, mean, invstd, running_mean, running_var, weight, bias, wdt, rdt,
                          sdt, momentum, eps, &a, &b);
        for (int64_t n = 0; n < N; n++) run_affine(out + (n * C + c) * HW, inp + (n * C + c) * HW, HW, a, b);
    }
    return GM_OK;
#else
    (void)out, (void)mean, (void)invstd, (void)running_mean, (void)running_var, (void)inp, (void)weight;
    (void)bias, (void)N, (void)C, (void)HW, (void)wdt, (void)rdt, (void)sdt, (void)training, (void)momentum;
    (void)eps, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}

int batchnorm_backward_f32(float *dinp, void *dweight, void *dbias, const float *dout, const float *inp,
                           const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C, int64_t HW,
                           gm_dtype wdt, gm_dtype sdt, int training, int nthreads) {
#ifdef NORM_F32_X86
    if (!nn_bf16_fast()) return GM_ERR_UNSUPPORTED;
    if (N < 0 || C < 0 || HW < 0 || (!inp && (dweight || training))) return GM_ERR_ARG;
    const int64_t cnt = N * HW;
    const int nt = nn_threads(cnt * C, nthreads);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t c = 0; c < C; c++) {
        const double mu = nn_ld(mean, c, sdt), is = nn_ld(invstd, c, sdt);
        const double w = weight ? nn_ld(weight, c, wdt) : 1.0;
        double sg = 0.0, sgx = 0.0;
        if (dweight || training || dbias) {
            const float *x = (dweight || training) ? inp : NULL; /* eval without dweight: inp may be NULL */
            for (int64_t n = 0; n < N; n++)
                run_grad_sums(dout + (n * C + c) * HW, x ? x + (n * C + c) * HW : NULL, HW, mu, &sg, &sgx);
        }
        if (dbias) nn_st(dbias, c, wdt, sg);
        if (dweight) nn_st(dweight, c, wdt, sgx * is);
        if (dinp) {
            const double k = w * is;
            const double mg = training ? sg / (double)cnt : 0.0, proj = training ? sgx * is * is / (double)cnt : 0.0;
            for (int64_t n = 0; n < N; n++)
                run_dx(dinp + (n * C + c) * HW, dout + (n * C + c) * HW, training ? inp + (n * C + c) * HW : NULL,
                       HW, mu, mg, k, proj);
        }
    }
    return GM_OK;
#else
    (void)dinp, (void)dweight, (void)dbias, (void)dout, (void)inp, (void)weight, (void)mean, (void)invstd;
    (void)N, (void)C, (void)HW, (void)wdt, (void)sdt, (void)training, (void)nthreads;
    return GM_ERR_UNSUPPORTED;
#endif
}
