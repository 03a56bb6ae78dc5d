/* kernels/cpu/activation.c — pointwise activations (see activation.h). One loop per op, each over the helpers of
 * nn_dtype.h; the op switch sits outside the loops. */
#include "activation.h"
#include "nn_dtype.h"

/* sqrt(2/pi) and 1/sqrt(2*pi), 1/sqrt(2): the constants of the two GELU forms (PyTorch's kBeta, kAlpha). */
#define GELU_BETA 0.7978845608028654
#define GELU_KAPPA 0.044715
#define INV_SQRT_2PI 0.3989422804014327
#define INV_SQRT_2 0.7071067811865476

/* Each body reads v = input element i and writes `r` (DT: the dtype, a constant per dispatched copy). */
#define ACT_LOOP(...)                                                                                        \
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")                            \
                for (int64_t i = 0; i < n; i++) {                                                            \
                    const double v = nn_ld(inp, i, DT);                                                      \
                    double r;                                                                                \
                    __VA_ARGS__;                                                                             \
                    nn_st(out, i, DT, r);                                                                    \
                })

int activation_forward(void *out, const void *inp, int64_t n, gm_dtype dt, int op, double alpha, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    switch (op) {
    /* NaN passes through, as in PyTorch: hence the test v <= 0 rather than v > 0 */
    case ACT_RELU: ACT_LOOP(r = v <= 0.0 ? 0.0 : v) break;
    case ACT_LEAKY_RELU: ACT_LOOP(r = v > 0.0 ? v : v * alpha) break;
    /* 1/(1+e^-v) overflows harmlessly to 0 for very negative v; no cancellation either way */
    case ACT_SIGMOID: ACT_LOOP(r = 1.0 / (1.0 + nn_exp(-v, DT))) break;
    case ACT_TANH: ACT_LOOP(r = nn_tanh(v, DT)) break;
    case ACT_GELU: ACT_LOOP(r = 0.5 * v * (1.0 + nn_erf(v * INV_SQRT_2, DT))) break;
    case ACT_GELU_TANH: ACT_LOOP(r = 0.5 * v * (1.0 + nn_tanh(GELU_BETA * (v + GELU_KAPPA * v * v * v), DT))) break;
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

int activation_backward(void *dinp, const void *dout, const void *saved, int64_t n, gm_dtype dt, int op,
                        double alpha, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    switch (op) {
    case ACT_RELU: ACT_GRAD_LOOP(r = s <= 0.0 ? 0.0 : g) break; /* PyTorch's threshold_backward */
    case ACT_LEAKY_RELU: ACT_GRAD_LOOP(r = s > 0.0 ? g : g * alpha) break;
    case ACT_SIGMOID: ACT_GRAD_LOOP(r = g * s * (1.0 - s)) break;
    case ACT_TANH: ACT_GRAD_LOOP(r = g * (1.0 - s * s)) break;
    case ACT_GELU: /* Phi(x) + x phi(x) */
        ACT_GRAD_LOOP(r = g * (0.5 * (1.0 + nn_erf(s * INV_SQRT_2, DT)) + s * INV_SQRT_2PI * nn_exp(-0.5 * s * s, DT)))
        break;
    case ACT_GELU_TANH: /* PyTorch's GeluBackward with approximate="tanh", same factoring */
        ACT_GRAD_LOOP(
            const double t = nn_tanh(GELU_BETA * (s + GELU_KAPPA * s * s * s), DT);
            r = g * (0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * GELU_BETA * (1.0 + 3.0 * GELU_KAPPA * s * s)))
        break;
    default: return GM_ERR_ARG;
    }
    return GM_OK;
}
