/* kernels/cpu/optim.c — fused in-place SGD, Adam/AdamW, RMSprop, Adagrad and Adadelta steps over a list of tensors
 * (see optim.h).
 *
 * One OpenMP team serves the whole group: each tensor's elements are split among the threads by an orphaned
 * `omp for` (with its barrier), so a group of many small tensors does not pay a fork per tensor. Groups too small
 * to amortise a fork run on the calling thread.
 *
 * Half types store rounded state and then use the stored (rounded) value, as PyTorch's in-place ops on a
 * float16 state tensor do; temporaries (the denominator, the update) stay in float. */
#include "optim.h"
#include "bf16_convert.h"

#include <math.h>

#define OPTIM_PARALLEL_MIN 32768 /* elements in a group below which one thread is faster than a fork */

#define LD_SAME(x) (x)
#define ST_SAME(x) (x)
#define LD_F16(x) gm_half_to_float(x)
#define ST_F16(x) gm_float_to_half(x)
#define LD_BF16(x) gm_bf16_to_float(x)
#define ST_BF16(x) gm_float_to_bf16(x)

/* The step's options are folded into loop-invariant constants (maximize: a sign; weight decay off: a coefficient
 * 0 or a factor 1, exact for every finite parameter), so that each loop body has no branch and vectorizes; only
 * what changes memory traffic (the momentum buffer, AMSGrad's max) selects a specialised copy of the loop, through
 * an always-inlined body with a constant flag.
 * Adam's loop vectorizes only where the compiler may treat sqrt as an instruction (-fno-math-errno, which a
 * `#pragma GCC optimize` cannot turn on): float32 Adam on one core, 25.2M parameters, 130 -> 38 ms a step. */
#define INLINE static inline __attribute__((always_inline))

/* ---- SGD ------------------------------------------------------------------------------------------------ */
enum { SGD_NO_BUF = 0, SGD_FRESH_BUF = 1, SGD_BUF = 2 };

/* p, g, buf are (n,); buf is unused with SGD_NO_BUF. */
#define DEFINE_SGD(NAME, T, ACC, LD, ST)                                                                          \
    INLINE void NAME##_loop(T *restrict p, const T *restrict g, T *restrict buf, int64_t n,                     \
                            const sgd_hparams *h, const int mode) {                                             \
        const ACC lr = (ACC)h->lr, mom = (ACC)h->momentum, damp1 = (ACC)(1.0 - h->dampening),                   \
                  wd = (ACC)h->weight_decay, sign = h->maximize ? (ACC)-1 : (ACC)1;                             \
        const int nesterov = h->nesterov;                                                                       \
        _Pragma("omp for schedule(static)")                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                                       \
            ACC w = LD(p[i]);                                                                                   \
            ACC d = sign * LD(g[i]) + wd * w;                                                                   \
            if (mode != SGD_NO_BUF) {                                                                           \
                T bs = ST(mode == SGD_FRESH_BUF ? d : LD(buf[i]) * mom + damp1 * d);                            \
                buf[i] = bs;                                                                                    \
                ACC b = LD(bs);                                                                                 \
                d = nesterov ? d + mom * b : b;                                                                 \
            }                                                                                                   \
            p[i] = ST(w + (-lr) * d);                                                                           \
        }                                                                                                       \
    }                                                                                                           \
    static void NAME(T *p, const T *g, T *buf, int fresh, int64_t n, const sgd_hparams *h) {                    \
        if (!buf) NAME##_loop(p, g, buf, n, h, SGD_NO_BUF);                                                     \
        else if (fresh) NAME##_loop(p, g, buf, n, h, SGD_FRESH_BUF);                                            \
        else NAME##_loop(p, g, buf, n, h, SGD_BUF);                                                             \
    }

DEFINE_SGD(sgd_f32, float, float, LD_SAME, ST_SAME)
DEFINE_SGD(sgd_f64, double, double, LD_SAME, ST_SAME)
DEFINE_SGD(sgd_f16, uint16_t, float, LD_F16, ST_F16)
DEFINE_SGD(sgd_bf16, uint16_t, float, LD_BF16, ST_BF16)

/* ---- Adam / AdamW ---------------------------------------------------------------------------------------- */
/* Per-tensor constants: the bias corrections depend on the tensor's own step count. */
typedef struct {
    double sign, w1, beta2, eps, l2, decay, step_size, bc2_sqrt;
} adam_consts;

/* p, g, m, v, vmax are (n,); vmax is unused without amsgrad. The first moment is lerp(m, g, 1 - beta1) in
 * PyTorch's two-sided form (exact at both ends of the weight). */
#define DEFINE_ADAM(NAME, T, ACC, SQRT, LD, ST)                                                                   \
    INLINE void NAME##_loop(T *restrict p, const T *restrict g, T *restrict m, T *restrict v,                   \
                            T *restrict vmax, int64_t n, const adam_consts *c, const int amsgrad) {             \
        const ACC sign = (ACC)c->sign, w1 = (ACC)c->w1, w1c = (ACC)1 - w1, b2 = (ACC)c->beta2,                  \
                  one_b2 = (ACC)(1.0 - c->beta2), eps = (ACC)c->eps, l2 = (ACC)c->l2, decay = (ACC)c->decay,    \
                  neg_step = (ACC)(-c->step_size), bc2_sqrt = (ACC)c->bc2_sqrt;                                 \
        const int low = w1 < (ACC)0.5;                                                                          \
        _Pragma("omp for schedule(static)")                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                                       \
            ACC w = LD(p[i]);                                                                                   \
            ACC d = sign * LD(g[i]) + l2 * w; /* Adam's L2 term (l2 = 0 for AdamW) */                           \
            w = w * decay;                    /* AdamW's decoupled decay (decay = 1 for Adam) */                \
            ACC m0 = LD(m[i]);                                                                                  \
            T ms = ST(low ? m0 + w1 * (d - m0) : d - (d - m0) * w1c);                                           \
            T vs = ST(LD(v[i]) * b2 + one_b2 * d * d);                                                          \
            m[i] = ms;                                                                                          \
            v[i] = vs;                                                                                          \
            ACC mm = LD(ms), vv = LD(vs);                                                                       \
            if (amsgrad) {                                                                                      \
                ACC vm = LD(vmax[i]);                                                                           \
                vm = (vv > vm || vv != vv) ? vv : vm; /* torch.maximum propagates nan */                        \
                T vms = ST(vm);                                                                                 \
                vmax[i] = vms;                                                                                  \
                vv = LD(vms);                                                                                   \
            }                                                                                                   \
            ACC denom = SQRT(vv) / bc2_sqrt + eps;                                                              \
            p[i] = ST(w + neg_step * (mm / denom));                                                             \
        }                                                                                                       \
    }                                                                                                           \
    static void NAME(T *p, const T *g, T *m, T *v, T *vmax, int64_t n, const adam_consts *c) {                  \
        if (vmax) NAME##_loop(p, g, m, v, vmax, n, c, 1);                                                       \
        else NAME##_loop(p, g, m, v, vmax, n, c, 0);                                                            \
    }

DEFINE_ADAM(adam_f32, float, float, sqrtf, LD_SAME, ST_SAME)
DEFINE_ADAM(adam_f64, double, double, sqrt, LD_SAME, ST_SAME)
DEFINE_ADAM(adam_f16, uint16_t, float, sqrtf, LD_F16, ST_F16)
DEFINE_ADAM(adam_bf16, uint16_t, float, sqrtf, LD_BF16, ST_BF16)

/* The same update on an fp32 master p, reading the gradient from gp (type TG) and writing the rounded parameter
 * back over it: DEFINE_ADAM's arithmetic with T = float, so the master and state are bit-identical. It goes by
 * tiles of MIXED_TILE elements that stay in L1: widen the tile's gradient into a stack buffer, update it there,
 * round it back. Still one pass through memory, and each of the three loops is simple enough to vectorise (one
 * loop with both conversions and the update did not, for float16: 2x slower than three separate passes). */
#define MIXED_TILE 1024

INLINE void adam_mixed_tile(float *restrict t, float *restrict p, float *restrict m, float *restrict v,
                            float *restrict vmax, int64_t n, const adam_consts *c, const int amsgrad) {
    const float sign = (float)c->sign, w1 = (float)c->w1, w1c = 1.0f - w1, b2 = (float)c->beta2,
                one_b2 = (float)(1.0 - c->beta2), eps = (float)c->eps, l2 = (float)c->l2, decay = (float)c->decay,
                neg_step = (float)(-c->step_size), bc2_sqrt = (float)c->bc2_sqrt;
    const int low = w1 < 0.5f;
    for (int64_t i = 0; i < n; i++) {
        float w = p[i];
        float d = sign * t[i] + l2 * w;
        w = w * decay;
        float m0 = m[i];
        float mm = low ? m0 + w1 * (d - m0) : d - (d - m0) * w1c;
        float vv = v[i] * b2 + one_b2 * d * d;
        m[i] = mm;
        v[i] = vv;
        if (amsgrad) {
            float vm = vmax[i];
            vm = (vv > vm || vv != vv) ? vv : vm;
            vmax[i] = vm;
            vv = vm;
        }
        float nw = w + neg_step * (mm / (sqrtf(vv) / bc2_sqrt + eps));
        p[i] = nw;
        t[i] = nw;
    }
}

/* The tile's widen and round loops. float16 in software costs ~15 integer ops a value each way (gm_half_to_float,
 * gm_float_to_half): the float16 step ran at 44 % of memcpy on one core where bfloat16's ran at 68 %. Where the CPU
 * converts in hardware (AVX-512F vcvtph2ps/vcvtps2ph, 16 lanes; F16C, 8 lanes) the tile uses it: the same values,
 * rounded to nearest even, subnormals exact; only a nan's payload differs (hardware keeps its top bits, software
 * writes the canonical quiet nan), as PyTorch's .half() keeps it. */
static void f16_widen_sw(float *restrict t, const uint16_t *restrict g, int64_t n) {
    for (int64_t i = 0; i < n; i++) t[i] = gm_half_to_float(g[i]);
}
static void f16_round_sw(uint16_t *restrict g, const float *restrict t, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = gm_float_to_half(t[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define F16_HW_ROUND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

__attribute__((target("avx512f"))) static void f16_widen_avx512(float *restrict t, const uint16_t *restrict g,
                                                                int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(t + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + i))));
    for (; i < n; i++) t[i] = gm_half_to_float(g[i]);
}
__attribute__((target("avx512f"))) static void f16_round_avx512(uint16_t *restrict g, const float *restrict t,
                                                                int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(g + i), _mm512_cvtps_ph(_mm512_loadu_ps(t + i), F16_HW_ROUND));
    for (; i < n; i++) g[i] = gm_float_to_half(t[i]);
}
__attribute__((target("avx,f16c"))) static void f16_widen_f16c(float *restrict t, const uint16_t *restrict g,
                                                               int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(t + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + i))));
    for (; i < n; i++) t[i] = gm_half_to_float(g[i]);
}
__attribute__((target("avx,f16c"))) static void f16_round_f16c(uint16_t *restrict g, const float *restrict t,
                                                               int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(g + i), _mm256_cvtps_ph(_mm256_loadu_ps(t + i), F16_HW_ROUND));
    for (; i < n; i++) g[i] = gm_float_to_half(t[i]);
}
#endif

typedef void (*f16_widen_fn)(float *restrict, const uint16_t *restrict, int64_t);
typedef void (*f16_round_fn)(uint16_t *restrict, const float *restrict, int64_t);
typedef struct {
    f16_widen_fn widen;
    f16_round_fn round;
} f16_cvt;

/* The widest conversion this CPU has (tests check the result against NumPy's float16 rounding). */
static f16_cvt f16_converters(void) {
    f16_cvt c = {f16_widen_sw, f16_round_sw};
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        c.widen = f16_widen_avx512;
        c.round = f16_round_avx512;
    } else if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) {
        c.widen = f16_widen_f16c;
        c.round = f16_round_f16c;
    }
#endif
    return c;
}

INLINE void adam_mixed_f16_loop(uint16_t *restrict gp, float *restrict p, float *restrict m, float *restrict v,
                                float *restrict vmax, int64_t n, const adam_consts *c, const int amsgrad,
                                const f16_cvt *cv) {
    const int64_t ntiles = (n + MIXED_TILE - 1) / MIXED_TILE;
    float t[MIXED_TILE];
#pragma omp for schedule(static)
    for (int64_t k = 0; k < ntiles; k++) {
        const int64_t o = k * MIXED_TILE, len = n - o < MIXED_TILE ? n - o : MIXED_TILE;
        cv->widen(t, gp + o, len);
        adam_mixed_tile(t, p + o, m + o, v + o, vmax ? vmax + o : NULL, len, c, amsgrad);
        cv->round(gp + o, t, len);
    }
}

#define DEFINE_ADAM_MIXED(NAME, TG, LDG, STG)                                                                     \
    INLINE void NAME##_loop(TG *restrict gp, float *restrict p, float *restrict m, float *restrict v,          \
                            float *restrict vmax, int64_t n, const adam_consts *c, const int amsgrad) {         \
        const int64_t ntiles = (n + MIXED_TILE - 1) / MIXED_TILE;                                               \
        float t[MIXED_TILE];                                                                                    \
        _Pragma("omp for schedule(static)")                                                                     \
        for (int64_t k = 0; k < ntiles; k++) {                                                                  \
            const int64_t o = k * MIXED_TILE, len = n - o < MIXED_TILE ? n - o : MIXED_TILE;                     \
            TG *restrict g = gp + o;                                                                            \
            for (int64_t i = 0; i < len; i++) t[i] = LDG(g[i]);                                                 \
            adam_mixed_tile(t, p + o, m + o, v + o, vmax ? vmax + o : NULL, len, c, amsgrad);                   \
            for (int64_t i = 0; i < len; i++) g[i] = STG(t[i]);                                                 \
        }                                                                                                       \
    }

/* bfloat16: the tile's conversions by bf16_convert.c (AVX-512 where the CPU has it, else the same scalar loops):
 * the SSE2 baseline's vectorised narrowing spends ~30 instructions on 8 values. */
INLINE void adam_mixed_bf16_loop(uint16_t *restrict gp, float *restrict p, float *restrict m, float *restrict v,
                                 float *restrict vmax, int64_t n, const adam_consts *c, const int amsgrad) {
    const int64_t ntiles = (n + MIXED_TILE - 1) / MIXED_TILE;
    float t[MIXED_TILE];
#pragma omp for schedule(static)
    for (int64_t k = 0; k < ntiles; k++) {
        const int64_t o = k * MIXED_TILE, len = n - o < MIXED_TILE ? n - o : MIXED_TILE;
        gm_cvt_bf16_to_f32(t, gp + o, len);
        adam_mixed_tile(t, p + o, m + o, v + o, vmax ? vmax + o : NULL, len, c, amsgrad);
        gm_cvt_f32_to_bf16(gp + o, t, len);
    }
}
DEFINE_ADAM_MIXED(adam_mixed_f32, float, LD_SAME, ST_SAME)

/* ---- RMSprop, Adagrad, Adadelta ------------------------------------------------------------------------------ */
/* Operation for operation PyTorch's single-tensor steps (torch/optim/rmsprop.py, adagrad.py, adadelta.py): each
 * in-place op there is one rounded operation here, in the same order. PyTorch's vectorised CPU kernels may round
 * a last bit differently (tests compare float32 to its rounding, float64 to 1e-12). */
#define DEFINE_RMSPROP(NAME, T, ACC, SQRT, LD, ST)                                                                \
    INLINE void NAME##_loop(T *restrict p, const T *restrict g, T *restrict sq, T *restrict buf,                \
                            T *restrict ga, int64_t n, const rmsprop_hparams *h, const int has_buf,             \
                            const int centered) {                                                               \
        const ACC neg_lr = (ACC)(-h->lr), alpha = (ACC)h->alpha, one_a = (ACC)(1.0 - h->alpha),                 \
                  eps = (ACC)h->eps, wd = (ACC)h->weight_decay, mom = (ACC)h->momentum,                         \
                  sign = h->maximize ? (ACC)-1 : (ACC)1, w1 = one_a, w1c = (ACC)1 - one_a;                      \
        const int low = w1 < (ACC)0.5;                                                                          \
        _Pragma("omp for schedule(static)")                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                                       \
            ACC w = LD(p[i]);                                                                                   \
            ACC d = sign * LD(g[i]) + wd * w;                                                                   \
            T ss = ST(LD(sq[i]) * alpha + one_a * d * d);                                                       \
            sq[i] = ss;                                                                                         \
            ACC avg = LD(ss);                                                                                   \
            if (centered) {                                                                                     \
                ACC a0 = LD(ga[i]);                                                                             \
                T gs = ST(low ? a0 + w1 * (d - a0) : d - (d - a0) * w1c); /* lerp(grad_avg, g, 1 - alpha) */   \
                ga[i] = gs;                                                                                     \
                ACC gg = LD(gs);                                                                                \
                avg = avg - gg * gg;                                                                            \
            }                                                                                                   \
            avg = SQRT(avg) + eps;                                                                              \
            if (has_buf) {                                                                                      \
                T bs = ST(LD(buf[i]) * mom + d / avg);                                                          \
                buf[i] = bs;                                                                                    \
                p[i] = ST(w + neg_lr * LD(bs));                                                                 \
            } else {                                                                                            \
                p[i] = ST(w + neg_lr * (d / avg));                                                              \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
    static void NAME(T *p, const T *g, T *sq, T *buf, T *ga, int64_t n, const rmsprop_hparams *h) {             \
        if (buf && ga) NAME##_loop(p, g, sq, buf, ga, n, h, 1, 1);                                              \
        else if (buf) NAME##_loop(p, g, sq, buf, ga, n, h, 1, 0);                                               \
        else if (ga) NAME##_loop(p, g, sq, buf, ga, n, h, 0, 1);                                                \
        else NAME##_loop(p, g, sq, buf, ga, n, h, 0, 0);                                                        \
    }

DEFINE_RMSPROP(rmsprop_f32, float, float, sqrtf, LD_SAME, ST_SAME)
DEFINE_RMSPROP(rmsprop_f64, double, double, sqrt, LD_SAME, ST_SAME)
DEFINE_RMSPROP(rmsprop_f16, uint16_t, float, sqrtf, LD_F16, ST_F16)
DEFINE_RMSPROP(rmsprop_bf16, uint16_t, float, sqrtf, LD_BF16, ST_BF16)

/* clr: the step's lr after lr_decay (per tensor: it depends on the tensor's step count). */
#define DEFINE_ADAGRAD(NAME, T, ACC, SQRT, LD, ST)                                                                \
    static void NAME(T *restrict p, const T *restrict g, T *restrict sum, int64_t n, double clr,                \
                     const adagrad_hparams *h) {                                                                \
        const ACC neg_clr = (ACC)(-clr), eps = (ACC)h->eps, wd = (ACC)h->weight_decay,                          \
                  sign = h->maximize ? (ACC)-1 : (ACC)1;                                                        \
        _Pragma("omp for schedule(static)")                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                                       \
            ACC w = LD(p[i]);                                                                                   \
            ACC d = sign * LD(g[i]) + wd * w;                                                                   \
            T ss = ST(LD(sum[i]) + d * d);                                                                      \
            sum[i] = ss;                                                                                        \
            ACC std = SQRT(LD(ss)) + eps;                                                                       \
            p[i] = ST(w + neg_clr * (d / std));                                                                 \
        }                                                                                                       \
    }

DEFINE_ADAGRAD(adagrad_f32, float, float, sqrtf, LD_SAME, ST_SAME)
DEFINE_ADAGRAD(adagrad_f64, double, double, sqrt, LD_SAME, ST_SAME)
DEFINE_ADAGRAD(adagrad_f16, uint16_t, float, sqrtf, LD_F16, ST_F16)
DEFINE_ADAGRAD(adagrad_bf16, uint16_t, float, sqrtf, LD_BF16, ST_BF16)

#define DEFINE_ADADELTA(NAME, T, ACC, SQRT, LD, ST)                                                               \
    static void NAME(T *restrict p, const T *restrict g, T *restrict sq, T *restrict acc, int64_t n,            \
                     const adadelta_hparams *h) {                                                               \
        const ACC neg_lr = (ACC)(-h->lr), rho = (ACC)h->rho, one_rho = (ACC)(1.0 - h->rho), eps = (ACC)h->eps,  \
                  wd = (ACC)h->weight_decay, sign = h->maximize ? (ACC)-1 : (ACC)1;                             \
        _Pragma("omp for schedule(static)")                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                                       \
            ACC w = LD(p[i]);                                                                                   \
            ACC d = sign * LD(g[i]) + wd * w;                                                                   \
            T ss = ST(LD(sq[i]) * rho + one_rho * d * d);                                                       \
            sq[i] = ss;                                                                                         \
            ACC std = SQRT(LD(ss) + eps);                                                                       \
            ACC a0 = LD(acc[i]);                                                                                \
            ACC delta = SQRT(a0 + eps) / std * d;                                                               \
            acc[i] = ST(a0 * rho + one_rho * delta * delta);                                                    \
            p[i] = ST(w + neg_lr * delta);                                                                      \
        }                                                                                                       \
    }

DEFINE_ADADELTA(adadelta_f32, float, float, sqrtf, LD_SAME, ST_SAME)
DEFINE_ADADELTA(adadelta_f64, double, double, sqrt, LD_SAME, ST_SAME)
DEFINE_ADADELTA(adadelta_f16, uint16_t, float, sqrtf, LD_F16, ST_F16)
DEFINE_ADADELTA(adadelta_bf16, uint16_t, float, sqrtf, LD_BF16, ST_BF16)

/* ---- entry points ------------------------------------------------------------------------------------------ */
static int check_group(void *const *param, const void *const *grad, const int64_t *numel, const gm_dtype *dt,
                       int ntensors, int64_t *total) {
    if (ntensors < 0 || (ntensors > 0 && (!param || !grad || !numel || !dt))) return GM_ERR_ARG;
    *total = 0;
    for (int t = 0; t < ntensors; t++) {
        if (numel[t] < 0 || (numel[t] > 0 && (!param[t] || !grad[t]))) return GM_ERR_ARG;
        if (!gm_dtype_is_float(dt[t])) return GM_ERR_UNSUPPORTED;
        *total += numel[t];
    }
    return GM_OK;
}

int sgd_step(void *const *param, const void *const *grad, void *const *momentum_buf, const uint8_t *buf_fresh,
             const int64_t *numel, const gm_dtype *dt, int ntensors, const sgd_hparams *h, int nthreads) {
    int64_t total;
    int st = check_group(param, grad, numel, dt, ntensors, &total);
    if (st != GM_OK) return st;
    int use_buf = h->momentum != 0.0;
    if (use_buf) {
        if (!momentum_buf && ntensors > 0) return GM_ERR_ARG;
        for (int t = 0; t < ntensors; t++)
            if (numel[t] > 0 && !momentum_buf[t]) return GM_ERR_ARG;
    }
    int nt = nthreads > 0 ? nthreads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && total >= OPTIM_PARALLEL_MIN)
    for (int t = 0; t < ntensors; t++) {
        void *buf = use_buf ? momentum_buf[t] : NULL;
        int fresh = buf_fresh ? buf_fresh[t] != 0 : 0;
        switch (dt[t]) {
        case GM_F32: sgd_f32(param[t], grad[t], buf, fresh, numel[t], h); break;
        case GM_F64: sgd_f64(param[t], grad[t], buf, fresh, numel[t], h); break;
        case GM_F16: sgd_f16(param[t], grad[t], buf, fresh, numel[t], h); break;
        default: sgd_bf16(param[t], grad[t], buf, fresh, numel[t], h); break;
        }
    }
    return GM_OK;
}

/* The per-tensor constants of one Adam/AdamW step (bias corrections of step `step`), shared by the fused step and
 * the mixed-dtype step so both update identically. */
static adam_consts adam_make_consts(const adam_hparams *h, int64_t step) {
    adam_consts c;
    c.sign = h->maximize ? -1.0 : 1.0;
    c.w1 = 1.0 - h->beta1;
    c.beta2 = h->beta2;
    c.eps = h->eps;
    c.l2 = h->decoupled ? 0.0 : h->weight_decay;
    c.decay = h->decoupled ? 1.0 - h->lr * h->weight_decay : 1.0;
    c.step_size = h->lr / (1.0 - pow(h->beta1, (double)step));
    c.bc2_sqrt = sqrt(1.0 - pow(h->beta2, (double)step));
    return c;
}

int adam_step(void *const *param, const void *const *grad, void *const *exp_avg, void *const *exp_avg_sq,
              void *const *max_exp_avg_sq, const int64_t *step, const int64_t *numel, const gm_dtype *dt,
              int ntensors, const adam_hparams *h, int nthreads) {
    int64_t total;
    int st = check_group(param, grad, numel, dt, ntensors, &total);
    if (st != GM_OK) return st;
    if (ntensors > 0 && (!exp_avg || !exp_avg_sq || !step || (h->amsgrad && !max_exp_avg_sq))) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++) {
        if (step[t] < 1) return GM_ERR_ARG; /* step 0 would divide by a zero bias correction */
        if (numel[t] > 0 && (!exp_avg[t] || !exp_avg_sq[t] || (h->amsgrad && !max_exp_avg_sq[t])))
            return GM_ERR_ARG;
    }
    int nt = nthreads > 0 ? nthreads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && total >= OPTIM_PARALLEL_MIN)
    for (int t = 0; t < ntensors; t++) {
        const adam_consts c = adam_make_consts(h, step[t]);
        void *vmax = h->amsgrad ? max_exp_avg_sq[t] : NULL;
        switch (dt[t]) {
        case GM_F32: adam_f32(param[t], grad[t], exp_avg[t], exp_avg_sq[t], vmax, numel[t], &c); break;
        case GM_F64: adam_f64(param[t], grad[t], exp_avg[t], exp_avg_sq[t], vmax, numel[t], &c); break;
        case GM_F16: adam_f16(param[t], grad[t], exp_avg[t], exp_avg_sq[t], vmax, numel[t], &c); break;
        default: adam_bf16(param[t], grad[t], exp_avg[t], exp_avg_sq[t], vmax, numel[t], &c); break;
        }
    }
    return GM_OK;
}

int adam_step_mixed(void *gp, float *master, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq, int64_t step,
                    int64_t numel, gm_dtype dt, const adam_hparams *h, int nthreads) {
    if (numel < 0 || step < 1) return GM_ERR_ARG;
    if (dt != GM_F16 && dt != GM_BF16 && dt != GM_F32) return GM_ERR_UNSUPPORTED;
    if (numel == 0) return GM_OK;
    if (!gp || !master || !exp_avg || !exp_avg_sq || (h->amsgrad && !max_exp_avg_sq)) return GM_ERR_ARG;
    const adam_consts c = adam_make_consts(h, step);
    const int ams = h->amsgrad != 0;
    const f16_cvt cv = f16_converters();
    int nt = nthreads > 0 ? nthreads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && numel >= OPTIM_PARALLEL_MIN)
    {
        if (dt == GM_F16) {
            if (ams) adam_mixed_f16_loop(gp, master, exp_avg, exp_avg_sq, max_exp_avg_sq, numel, &c, 1, &cv);
            else adam_mixed_f16_loop(gp, master, exp_avg, exp_avg_sq, NULL, numel, &c, 0, &cv);
        } else if (dt == GM_BF16) {
            if (ams) adam_mixed_bf16_loop(gp, master, exp_avg, exp_avg_sq, max_exp_avg_sq, numel, &c, 1);
            else adam_mixed_bf16_loop(gp, master, exp_avg, exp_avg_sq, NULL, numel, &c, 0);
        } else {
            if (ams) adam_mixed_f32_loop(gp, master, exp_avg, exp_avg_sq, max_exp_avg_sq, numel, &c, 1);
            else adam_mixed_f32_loop(gp, master, exp_avg, exp_avg_sq, NULL, numel, &c, 0);
        }
    }
    return GM_OK;
}

/* Every tensor of a state list is present where its parameter has elements. */
static int check_state(void *const *state, const int64_t *numel, int ntensors) {
    if (ntensors > 0 && !state) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++)
        if (numel[t] > 0 && !state[t]) return GM_ERR_ARG;
    return GM_OK;
}

int rmsprop_step(void *const *param, const void *const *grad, void *const *square_avg, void *const *momentum_buf,
                 void *const *grad_avg, const int64_t *numel, const gm_dtype *dt, int ntensors,
                 const rmsprop_hparams *h, int nthreads) {
    int64_t total;
    int st = check_group(param, grad, numel, dt, ntensors, &total);
    const int has_buf = h->momentum > 0.0, centered = h->centered != 0;
    if (st == GM_OK) st = check_state(square_avg, numel, ntensors);
    if (st == GM_OK && has_buf) st = check_state(momentum_buf, numel, ntensors);
    if (st == GM_OK && centered) st = check_state(grad_avg, numel, ntensors);
    if (st != GM_OK) return st;
    int nt = nthreads > 0 ? nthreads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && total >= OPTIM_PARALLEL_MIN)
    for (int t = 0; t < ntensors; t++) {
        void *buf = has_buf ? momentum_buf[t] : NULL, *ga = centered ? grad_avg[t] : NULL;
        switch (dt[t]) {
        case GM_F32: rmsprop_f32(param[t], grad[t], square_avg[t], buf, ga, numel[t], h); break;
        case GM_F64: rmsprop_f64(param[t], grad[t], square_avg[t], buf, ga, numel[t], h); break;
        case GM_F16: rmsprop_f16(param[t], grad[t], square_avg[t], buf, ga, numel[t], h); break;
        default: rmsprop_bf16(param[t], grad[t], square_avg[t], buf, ga, numel[t], h); break;
        }
    }
    return GM_OK;
}

int adagrad_step(void *const *param, const void *const *grad, void *const *sum, const int64_t *step,
                 const int64_t *numel, const gm_dtype *dt, int ntensors, const adagrad_hparams *h, int nthreads) {
    int64_t total;
    int st = check_group(param, grad, numel, dt, ntensors, &total);
    if (st == GM_OK) st = check_state(sum, numel, ntensors);
    if (st != GM_OK) return st;
    if (ntensors > 0 && !step) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++)
        if (step[t] < 1) return GM_ERR_ARG;
    int nt = nthreads > 0 ? nthreads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && total >= OPTIM_PARALLEL_MIN)
    for (int t = 0; t < ntensors; t++) {
        double clr = h->lr / (1.0 + (double)(step[t] - 1) * h->lr_decay);
        switch (dt[t]) {
        case GM_F32: adagrad_f32(param[t], grad[t], sum[t], numel[t], clr, h); break;
        case GM_F64: adagrad_f64(param[t], grad[t], sum[t], numel[t], clr, h); break;
        case GM_F16: adagrad_f16(param[t], grad[t], sum[t], numel[t], clr, h); break;
        default: adagrad_bf16(param[t], grad[t], sum[t], numel[t], clr, h); break;
        }
    }
    return GM_OK;
}

int adadelta_step(void *const *param, const void *const *grad, void *const *square_avg, void *const *acc_delta,
                  const int64_t *numel, const gm_dtype *dt, int ntensors, const adadelta_hparams *h, int nthreads) {
    int64_t total;
    int st = check_group(param, grad, numel, dt, ntensors, &total);
    if (st == GM_OK) st = check_state(square_avg, numel, ntensors);
    if (st == GM_OK) st = check_state(acc_delta, numel, ntensors);
    if (st != GM_OK) return st;
    int nt = nthreads > 0 ? nthreads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1 && total >= OPTIM_PARALLEL_MIN)
    for (int t = 0; t < ntensors; t++) {
        switch (dt[t]) {
        case GM_F32: adadelta_f32(param[t], grad[t], square_avg[t], acc_delta[t], numel[t], h); break;
        case GM_F64: adadelta_f64(param[t], grad[t], square_avg[t], acc_delta[t], numel[t], h); break;
        case GM_F16: adadelta_f16(param[t], grad[t], square_avg[t], acc_delta[t], numel[t], h); break;
        default: adadelta_bf16(param[t], grad[t], square_avg[t], acc_delta[t], numel[t], h); break;
        }
    }
    return GM_OK;
}
