/* kernels/cuda/activation.cu — pointwise activations on CUDA (see kernels/cpu/activation.h for the contract and
 * kernels/cpu/activation.c for the reference). One grid-stride kernel per (dtype, op): the op switch is resolved
 * at compile time, so each kernel is loads, a few flops in double (as the CPU) and stores (NN_ILP elements per
 * thread and step, see nn_common.cuh). */
#include "activation.h"
#include "nn_common.cuh"

/* The constants of the two GELU forms, as kernels/cpu/activation.c. */
#define GELU_BETA 0.7978845608028654
#define GELU_KAPPA 0.044715
#define INV_SQRT_2PI 0.3989422804014327
#define INV_SQRT_2 0.7071067811865476

template <int DT, int OP> NN_DEV double act_fwd(double v, double alpha) {
    switch (OP) {
    case ACT_RELU: return v <= 0.0 ? 0.0 : v; /* NaN passes through */
    case ACT_LEAKY_RELU: return v > 0.0 ? v : v * alpha;
    case ACT_SIGMOID: return 1.0 / (1.0 + nn_exp<DT>(-v));
    case ACT_TANH: return nn_tanh<DT>(v);
    case ACT_GELU: return 0.5 * v * (1.0 + nn_erf<DT>(v * INV_SQRT_2));
    default: return 0.5 * v * (1.0 + nn_tanh<DT>(GELU_BETA * (v + GELU_KAPPA * v * v * v)));
    }
}

/* g: the output's gradient, s: the saved tensor (output or input, see activation.h). */
template <int DT, int OP> NN_DEV double act_bwd(double g, double s, double alpha) {
    switch (OP) {
    case ACT_RELU: return s <= 0.0 ? 0.0 : g;
    case ACT_LEAKY_RELU: return s > 0.0 ? g : g * alpha;
    case ACT_SIGMOID: return g * s * (1.0 - s);
    case ACT_TANH: return g * (1.0 - s * s);
    case ACT_GELU: return g * (0.5 * (1.0 + nn_erf<DT>(s * INV_SQRT_2)) + s * INV_SQRT_2PI * nn_exp<DT>(-0.5 * s * s));
    default: {
        const double t = nn_tanh<DT>(GELU_BETA * (s + GELU_KAPPA * s * s * s));
        return g * (0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * GELU_BETA * (1.0 + 3.0 * GELU_KAPPA * s * s));
    }
    }
}

template <int DT, int OP> __global__ void act_fwd_kernel(void *out, const void *inp, int64_t n, double alpha) {
    NN_ILP_STEPS(i0, n) {
        double v[NN_ILP];
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            v[k] = i < n ? nn_ld<DT>(inp, i) : 0.0;
        }
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            if (i < n) nn_st<DT>(out, i, act_fwd<DT, OP>(v[k], alpha));
        }
    }
}

template <int DT, int OP>
__global__ void act_bwd_kernel(void *dinp, const void *dout, const void *saved, int64_t n, double alpha) {
    NN_ILP_STEPS(i0, n) {
        double g[NN_ILP], s[NN_ILP];
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            g[k] = i < n ? nn_ld<DT>(dout, i) : 0.0;
            s[k] = i < n ? nn_ld<DT>(saved, i) : 0.0;
        }
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            if (i < n) nn_st<DT>(dinp, i, act_bwd<DT, OP>(g[k], s[k], alpha));
        }
    }
}

template <int DT> static int launch_fwd(void *out, const void *inp, int64_t n, int op, double alpha, gm_cuda_ctx *ctx) {
    const unsigned grid = nn_ilp_blocks(n, ctx);
#define ACT_FWD_CASE(OP)                                                                                     \
    case OP: {                                                                                               \
        auto *k = &act_fwd_kernel<DT, OP>;                                                                   \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, out, inp, n, alpha);                                          \
        break;                                                                                               \
    }
    switch (op) {
        ACT_FWD_CASE(ACT_RELU)
        ACT_FWD_CASE(ACT_LEAKY_RELU)
        ACT_FWD_CASE(ACT_SIGMOID)
        ACT_FWD_CASE(ACT_TANH)
        ACT_FWD_CASE(ACT_GELU)
        ACT_FWD_CASE(ACT_GELU_TANH)
    default: return GM_ERR_ARG;
    }
#undef ACT_FWD_CASE
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

template <int DT>
static int launch_bwd(void *dinp, const void *dout, const void *saved, int64_t n, int op, double alpha,
                      gm_cuda_ctx *ctx) {
    const unsigned grid = nn_ilp_blocks(n, ctx);
#define ACT_BWD_CASE(OP)                                                                                     \
    case OP: {                                                                                               \
        auto *k = &act_bwd_kernel<DT, OP>;                                                                   \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, dinp, dout, saved, n, alpha);                                 \
        break;                                                                                               \
    }
    switch (op) {
        ACT_BWD_CASE(ACT_RELU)
        ACT_BWD_CASE(ACT_LEAKY_RELU)
        ACT_BWD_CASE(ACT_SIGMOID)
        ACT_BWD_CASE(ACT_TANH)
        ACT_BWD_CASE(ACT_GELU)
        ACT_BWD_CASE(ACT_GELU_TANH)
    default: return GM_ERR_ARG;
    }
#undef ACT_BWD_CASE
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_activation_forward(void *out, const void *inp, int64_t n, gm_dtype dt, int op, double alpha,
                                       gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= ACT_N) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
#define CALL(DT) return launch_fwd<DT>(out, inp, n, op, alpha, ctx)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return GM_OK;
}

extern "C" int cuda_activation_backward(void *dinp, const void *dout, const void *saved, int64_t n, gm_dtype dt,
                                        int op, double alpha, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= ACT_N) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
#define CALL(DT) return launch_bwd<DT>(dinp, dout, saved, n, op, alpha, ctx)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return GM_OK;
}
