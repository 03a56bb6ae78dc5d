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

/* expm1 for elu, single precision for the narrow dtypes as nn_exp & co. */
template <int DT> NN_DEV double act_expm1(double x) { return DT == GM_F64 ? expm1(x) : (double)expm1f((float)x); }

/* alpha, beta: the op's parameters (see kernels/cpu/activation.h) */
template <int DT, int OP> NN_DEV double act_fwd(double v, double alpha, double beta) {
    switch (OP) {
    case ACT_RELU: return v <= 0.0 ? 0.0 : v; /* NaN passes through */
    case ACT_LEAKY_RELU: return v > 0.0 ? v : v * alpha;
    case ACT_SIGMOID: return 1.0 / (1.0 + nn_exp<DT>(-v));
    case ACT_TANH: return nn_tanh<DT>(v);
    case ACT_GELU: return 0.5 * v * (1.0 + nn_erf<DT>(v * INV_SQRT_2));
    case ACT_GELU_TANH: return 0.5 * v * (1.0 + nn_tanh<DT>(GELU_BETA * (v + GELU_KAPPA * v * v * v)));
    case ACT_SILU: return v / (1.0 + nn_exp<DT>(-v));
    case ACT_HARDSWISH: { /* comparisons that let NaN through, as the CPU */
        double t = v + 3.0;
        t = t < 0.0 ? 0.0 : t;
        t = t > 6.0 ? 6.0 : t;
        return v * t / 6.0;
    }
    case ACT_HARDSIGMOID: /* strictly inside (0, 1) for inputs inside (-3, 3): see the CPU kernel */
        return v <= -3.0 ? 0.0 : v >= 3.0 ? 1.0 : v >= 0.0 ? 1.0 - (3.0 - v) / 6.0 : (v + 3.0) / 6.0;
    case ACT_MISH: return v * nn_tanh<DT>(nn_log1p<DT>(nn_exp<DT>(v)));
    case ACT_HARDTANH: {
        const double t = v < alpha ? alpha : v;
        return t > beta ? beta : t;
    }
    case ACT_ELU: return v > 0.0 ? v : alpha * act_expm1<DT>(v);
    default: return v * alpha > beta ? v : nn_log1p<DT>(nn_exp<DT>(v * alpha)) / alpha; /* ACT_SOFTPLUS */
    }
}

/* g: the output's gradient, s: the saved tensor (output or input, see activation.h). */
template <int DT, int OP> NN_DEV double act_bwd(double g, double s, double alpha, double beta) {
    switch (OP) {
    case ACT_RELU: return s <= 0.0 ? 0.0 : g;
    case ACT_LEAKY_RELU: return s > 0.0 ? g : g * alpha;
    case ACT_SIGMOID: return g * s * (1.0 - s);
    case ACT_TANH: return g * (1.0 - s * s);
    case ACT_GELU: return g * (0.5 * (1.0 + nn_erf<DT>(s * INV_SQRT_2)) + s * INV_SQRT_2PI * nn_exp<DT>(-0.5 * s * s));
    case ACT_GELU_TANH: {
        const double t = nn_tanh<DT>(GELU_BETA * (s + GELU_KAPPA * s * s * s));
        return g * (0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * GELU_BETA * (1.0 + 3.0 * GELU_KAPPA * s * s));
    }
    case ACT_SILU: {
        const double sg = 1.0 / (1.0 + nn_exp<DT>(-s));
        return g * sg * (1.0 + s * (1.0 - sg));
    }
    case ACT_HARDSWISH: return s <= -3.0 ? 0.0 : s < 3.0 ? g * (s / 3.0 + 0.5) : g;
    case ACT_HARDSIGMOID: return s > 0.0 && s < 1.0 ? g * ACT_ONE_SIXTH : 0.0; /* s: the output */
    case ACT_MISH: {
        const double sg = 1.0 / (1.0 + nn_exp<DT>(-s));
        const double t = nn_tanh<DT>(nn_log1p<DT>(nn_exp<DT>(s)));
        return g * (t + s * sg * (1.0 - t * t));
    }
    case ACT_HARDTANH: return s <= alpha || s >= beta ? 0.0 : g; /* s: the output */
    case ACT_ELU: /* s: the output when alpha >= 0, else the input */
        return s <= 0.0 ? (alpha >= 0.0 ? g * (s + alpha) : g * alpha * nn_exp<DT>(s)) : g;
    default: return s * alpha > beta ? g : g / (1.0 + nn_exp<DT>(-s * alpha)); /* ACT_SOFTPLUS */
    }
}

template <int DT, int OP>
__global__ void act_fwd_kernel(void *out, const void *inp, int64_t n, double alpha, double beta) {
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
            if (i < n) nn_st<DT>(out, i, act_fwd<DT, OP>(v[k], alpha, beta));
        }
    }
}

template <int DT, int OP>
__global__ void act_bwd_kernel(void *dinp, const void *dout, const void *saved, int64_t n, double alpha,
                               double beta) {
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
            if (i < n) nn_st<DT>(dinp, i, act_bwd<DT, OP>(g[k], s[k], alpha, beta));
        }
    }
}

template <int DT>
static int launch_fwd(void *out, const void *inp, int64_t n, int op, double alpha, double beta, gm_cuda_ctx *ctx) {
    const unsigned grid = nn_ilp_blocks(n, ctx);
#define ACT_FWD_CASE(OP)                                                                                     \
    case OP: {                                                                                               \
        auto *k = &act_fwd_kernel<DT, OP>;                                                                   \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, out, inp, n, alpha, beta);                                    \
        break;                                                                                               \
    }
    switch (op) {
        ACT_FWD_CASE(ACT_RELU)
        ACT_FWD_CASE(ACT_LEAKY_RELU)
        ACT_FWD_CASE(ACT_SIGMOID)
        ACT_FWD_CASE(ACT_TANH)
        ACT_FWD_CASE(ACT_GELU)
        ACT_FWD_CASE(ACT_GELU_TANH)
        ACT_FWD_CASE(ACT_SILU)
        ACT_FWD_CASE(ACT_HARDSWISH)
        ACT_FWD_CASE(ACT_HARDSIGMOID)
        ACT_FWD_CASE(ACT_MISH)
        ACT_FWD_CASE(ACT_HARDTANH)
        ACT_FWD_CASE(ACT_ELU)
        ACT_FWD_CASE(ACT_SOFTPLUS)
    default: return GM_ERR_ARG;
    }
#undef ACT_FWD_CASE
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

template <int DT>
static int launch_bwd(void *dinp, const void *dout, const void *saved, int64_t n, int op, double alpha, double beta,
                      gm_cuda_ctx *ctx) {
    const unsigned grid = nn_ilp_blocks(n, ctx);
#define ACT_BWD_CASE(OP)                                                                                     \
    case OP: {                                                                                               \
        auto *k = &act_bwd_kernel<DT, OP>;                                                                   \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, dinp, dout, saved, n, alpha, beta);                           \
        break;                                                                                               \
    }
    switch (op) {
        ACT_BWD_CASE(ACT_RELU)
        ACT_BWD_CASE(ACT_LEAKY_RELU)
        ACT_BWD_CASE(ACT_SIGMOID)
        ACT_BWD_CASE(ACT_TANH)
        ACT_BWD_CASE(ACT_GELU)
        ACT_BWD_CASE(ACT_GELU_TANH)
        ACT_BWD_CASE(ACT_SILU)
        ACT_BWD_CASE(ACT_HARDSWISH)
        ACT_BWD_CASE(ACT_HARDSIGMOID)
        ACT_BWD_CASE(ACT_MISH)
        ACT_BWD_CASE(ACT_HARDTANH)
        ACT_BWD_CASE(ACT_ELU)
        ACT_BWD_CASE(ACT_SOFTPLUS)
    default: return GM_ERR_ARG;
    }
#undef ACT_BWD_CASE
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_activation_forward(void *out, const void *inp, int64_t n, gm_dtype dt, int op, double alpha,
                                       double beta, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= ACT_N) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
#define CALL(DT) return launch_fwd<DT>(out, inp, n, op, alpha, beta, ctx)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return GM_OK;
}

extern "C" int cuda_activation_backward(void *dinp, const void *dout, const void *saved, int64_t n, gm_dtype dt,
                                        int op, double alpha, double beta, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= ACT_N) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
#define CALL(DT) return launch_bwd<DT>(dinp, dout, saved, n, op, alpha, beta, ctx)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return GM_OK;
}

/* ---- relu's bit mask (kernels/cpu/activation.h relu_mask_pack): one thread per byte, one per element back ---- */
template <int DT> __global__ void relu_mask_pack_kernel(uint8_t *mask, const void *out, int64_t n) {
    GM_CU_GRID_STRIDE(b, (n + 7) / 8) {
        const int64_t end = b * 8 + 8 < n ? b * 8 + 8 : n;
        unsigned bits = 0;
        for (int64_t i = b * 8; i < end; i++) bits |= (unsigned)!(nn_ld<DT>(out, i) <= 0.0) << (i - b * 8);
        mask[b] = (uint8_t)bits;
    }
}

/* dout's bits or +0.0, as the CPU: the element ANDed with all ones or all zeros (T: an unsigned of its width) */
template <typename T> __global__ void relu_mask_bwd_kernel(void *dinp, const void *dout, const uint8_t *mask, int64_t n) {
    GM_CU_GRID_STRIDE(i, n) {
        ((T *)dinp)[i] = ((const T *)dout)[i] & (T)(0 - (T)((mask[i >> 3] >> (i & 7)) & 1u));
    }
}

extern "C" int cuda_relu_mask_pack(uint8_t *mask, const void *out, int64_t n, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
#define CALL(DT)                                                                                             \
    GM_LAUNCH(&relu_mask_pack_kernel<DT>, gm_cu_blocks((n + 7) / 8, ctx), GM_CU_THREADS, ctx, mask, out, n)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_relu_mask_backward(void *dinp, const void *dout, const uint8_t *mask, int64_t n, gm_dtype dt,
                                       gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
    const unsigned grid = gm_cu_blocks(n, ctx);
    switch (gm_dtype_size(dt)) {
    case 2: GM_LAUNCH(&relu_mask_bwd_kernel<uint16_t>, grid, GM_CU_THREADS, ctx, dinp, dout, mask, n); break;
    case 4: GM_LAUNCH(&relu_mask_bwd_kernel<uint32_t>, grid, GM_CU_THREADS, ctx, dinp, dout, mask, n); break;
    default: GM_LAUNCH(&relu_mask_bwd_kernel<uint64_t>, grid, GM_CU_THREADS, ctx, dinp, dout, mask, n); break;
    }
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- prelu (kernels/cpu/activation.h: the (outer, C, inner) layout, wn = 1 or C weights) --------------------- */
struct prelu_geom {
    int64_t n, C, inner, wn;
    int64_t outer, per, segs; /* per: rows of an outer chunk; segs: outer chunks * C */
};

/* the weight of flat element i */
template <int DT> NN_DEV double prelu_w(const void *w, int64_t i, const prelu_geom &g) {
    return nn_ld<DT>(w, g.wn == 1 ? 0 : (i / g.inner) % g.C);
}

template <int DT> __global__ void prelu_fwd_kernel(void *out, const void *inp, const void *w, prelu_geom g) {
    GM_CU_GRID_STRIDE(i, g.n) {
        const double v = nn_ld<DT>(inp, i);
        nn_st<DT>(out, i, v > 0.0 ? v : prelu_w<DT>(w, i, g) * v);
    }
}

/* Step 1 of the weight's gradient (kernels/activation_ops.h): one block per segment q = j * C + c, the rows (o, c)
 * of outer chunk j, each thread summing x * g where x <= 0 over its elements, then the block's total. */
template <int DT>
__global__ void prelu_partial_kernel(double *partial, const void *dout, const void *inp, prelu_geom g) {
    for (int64_t q = blockIdx.x; q < g.segs; q += gridDim.x) {
        const int64_t j = q / g.C, c = q - j * g.C;
        const int64_t o0 = j * g.per, o1 = gm_cu_min<int64_t>(o0 + g.per, g.outer);
        const int64_t cnt = (o1 - o0) * g.inner;
        double s = 0.0;
        for (int64_t m = threadIdx.x; m < cnt; m += GM_CU_THREADS) {
            const int64_t o = o0 + m / g.inner, i = (o * g.C + c) * g.inner + m % g.inner;
            const double v = nn_ld<DT>(inp, i);
            s += v > 0.0 ? 0.0 : v * nn_ld<DT>(dout, i);
        }
        s = gm_cu_block_reduce(s, gm_cu_sum());
        if (threadIdx.x == 0) partial[q] = s;
    }
}

/* Step 2: one block per weight k, its partials (every segment when wn = 1, else channel k's) in a fixed order. */
template <int DT> __global__ void prelu_dw_kernel(void *dw, const double *partial, prelu_geom g) {
    for (int64_t k = blockIdx.x; k < g.wn; k += gridDim.x) {
        const int64_t step = g.wn == 1 ? 1 : g.C, cnt = g.wn == 1 ? g.segs : g.segs / g.C;
        double s = 0.0;
        for (int64_t t = threadIdx.x; t < cnt; t += GM_CU_THREADS) s += partial[k + t * step];
        s = gm_cu_block_reduce(s, gm_cu_sum());
        if (threadIdx.x == 0) nn_st<DT>(dw, k, s);
    }
}

template <int DT>
__global__ void prelu_dx_kernel(void *dinp, const void *dout, const void *inp, const void *w, prelu_geom g) {
    GM_CU_GRID_STRIDE(i, g.n) {
        const double gv = nn_ld<DT>(dout, i);
        nn_st<DT>(dinp, i, nn_ld<DT>(inp, i) > 0.0 ? gv : prelu_w<DT>(w, i, g) * gv);
    }
}

static int prelu_args(prelu_geom *g, int64_t outer, int64_t C, int64_t inner, int64_t wn, gm_dtype dt) {
    if (!gm_dtype_is_float(dt) || outer < 0 || C < 0 || inner < 0 || (wn != 1 && wn != C)) return GM_ERR_ARG;
    g->n = outer * C * inner;
    g->C = C;
    g->inner = inner;
    g->wn = wn;
    const int64_t J = prelu_outer_chunks(outer, C);
    g->outer = outer;
    g->per = J ? (outer + J - 1) / J : 0;
    g->segs = J * C;
    return GM_OK;
}

template <int DT>
static int launch_prelu_fwd(void *out, const void *inp, const void *w, prelu_geom g, gm_cuda_ctx *ctx) {
    auto *k = &prelu_fwd_kernel<DT>;
    GM_LAUNCH(k, gm_cu_blocks(g.n, ctx), GM_CU_THREADS, ctx, out, inp, w, g);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

template <int DT>
static int launch_prelu_bwd(void *dinp, void *dw, double *partial, const void *dout, const void *inp, const void *w,
                            prelu_geom g, gm_cuda_ctx *ctx) {
    if (dw && g.wn > 0) { /* first: dinp may be dout (the stream orders the kernels) */
        if (g.segs > 0) {
            auto *k = &prelu_partial_kernel<DT>;
            GM_LAUNCH(k, (unsigned)gm_cu_min<int64_t>(g.segs, GM_CU_MAX_BLOCKS), GM_CU_THREADS, ctx, partial, dout, inp,
                      g);
            GM_CU_LAUNCHED(ctx);
        }
        auto *k2 = &prelu_dw_kernel<DT>;
        GM_LAUNCH(k2, (unsigned)gm_cu_min<int64_t>(g.wn, GM_CU_MAX_BLOCKS), GM_CU_THREADS, ctx, dw, partial, g);
        GM_CU_LAUNCHED(ctx);
    }
    if (dinp && g.n) {
        auto *k = &prelu_dx_kernel<DT>;
        GM_LAUNCH(k, gm_cu_blocks(g.n, ctx), GM_CU_THREADS, ctx, dinp, dout, inp, w, g);
        GM_CU_LAUNCHED(ctx);
    }
    return GM_OK;
}

extern "C" int cuda_prelu_forward(void *out, const void *inp, const void *w, int64_t outer, int64_t C, int64_t inner,
                                  int64_t wn, gm_dtype dt, gm_cuda_ctx *ctx) {
    prelu_geom g;
    if (prelu_args(&g, outer, C, inner, wn, dt) != GM_OK) return GM_ERR_ARG;
    if (g.n == 0) return GM_OK;
#define CALL(DT) return launch_prelu_fwd<DT>(out, inp, w, g, ctx)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return GM_OK;
}

extern "C" int cuda_prelu_backward(void *dinp, void *dw, double *partial, const void *dout, const void *inp,
                                   const void *w, int64_t outer, int64_t C, int64_t inner, int64_t wn, gm_dtype dt,
                                   gm_cuda_ctx *ctx) {
    prelu_geom g;
    if (prelu_args(&g, outer, C, inner, wn, dt) != GM_OK) return GM_ERR_ARG;
#define CALL(DT) return launch_prelu_bwd<DT>(dinp, dw, partial, dout, inp, w, g, ctx)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return GM_OK;
}
