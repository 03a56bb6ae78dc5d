/* kernels/cuda/conv.cu — convolution through cuDNN (conv.h). With conv_plan.cu the only files that call cuDNN
 * (DESIGN.md). Not compiled in the emulator build (emu/conv_emu.cpp stands in).
 *
 * The candidates are conv_plan.cu's execution plans (cuDNN's graph API, a plan per geometry built once) when the
 * graph API offers any; otherwise, and for operands the plans cannot take, cuDNN 9's legacy convolution API:
 * descriptors, the _v7 heuristics for the candidates, cudnnConvolution{Forward,BackwardData,BackwardFilter}, which
 * finalize a plan of their own on every call (tens of microseconds of host time on an H200).
 * GPUMEMNET_CUDNN_API=legacy takes the legacy API for everything.
 *
 * Math: float64 in double; float16/bfloat16 with float32 accumulation (the convolution descriptor's compute type)
 * and tensor-op math; float32 with CUDNN_FMA_MATH (plain float32, which rules TF32 out: CUDNN_DEFAULT_MATH lets
 * cuDNN use TF32 tensor cores on Ampere and later) unless ctx->cudnn_allow_tf32 (gm.backends.cudnn.allow_tf32,
 * True by default as in PyTorch; the matmuls' switch is separate and off), then CUDNN_DEFAULT_MATH. Each
 * candidate keeps the math type the heuristics proposed it with (cuDNN picks kernels by algorithm and math type
 * together), except float32 without TF32, which always runs with FMA math (used_math).
 *
 * Layouts: NCHW tensors with explicit strides (cudnnSetTensorNdDescriptor), so the input of the forward and of
 * the weight gradient is read through its strides as on the CPU, with no copy. On the legacy route the bias is
 * written into the output first and cuDNN adds onto it (beta = 1), as the CPU's gemm does: one rounding in half
 * precision. The plans run with beta = 0 and cuda_conv_add_bias adds the bias after (run_plan).
 *
 * What cuDNN cannot express runs on the direct kernels (conv_direct.cu): padding that differs between the two
 * sides (cuDNN pads symmetrically: padding='same' with an even kernel span; a transposed convolution whose
 * output_padding >= stride), empty tensors (cuDNN rejects zero sizes), sizes beyond int, zero strides. */
#include <cudnn.h>
#include <stdlib.h>

#include "conv.h"
#include "conv_plan.h"
#include "cuda_common.cuh"

#define DNN_CHECK(ctx, call)                                                                                 \
    do {                                                                                                     \
        cudnnStatus_t s_ = (call);                                                                           \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                                    \
            snprintf((ctx)->err, sizeof (ctx)->err, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,      \
                     cudnnGetErrorString(s_));                                                               \
            rc = GM_ERR_BACKEND;                                                                             \
            goto done;                                                                                       \
        }                                                                                                    \
    } while (0)

/* The descriptors of one pass. */
typedef struct {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} descs;

static void destroy(descs *d) {
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->y) cudnnDestroyTensorDescriptor(d->y);
    if (d->w) cudnnDestroyFilterDescriptor(d->w);
    if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
    memset(d, 0, sizeof *d);
}

static int data_type(gm_dtype dt, cudnnDataType_t *t) {
    switch (dt) {
    case GM_F32: *t = CUDNN_DATA_FLOAT; return 1;
    case GM_F64: *t = CUDNN_DATA_DOUBLE; return 1;
    case GM_F16: *t = CUDNN_DATA_HALF; return 1;
    case GM_BF16: *t = CUDNN_DATA_BFLOAT16; return 1;
    default: return 0;
    }
}

/* The math type the heuristics are asked with (see the top of the file). */
static cudnnMathType_t base_math(gm_dtype dt, const gm_cuda_ctx *ctx) {
    if (dt == GM_F16 || dt == GM_BF16) return CUDNN_TENSOR_OP_MATH;
    if (dt == GM_F32) return ctx->cudnn_allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    return CUDNN_DEFAULT_MATH;
}

static int fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

/* Whether cuDNN can run this pass: non-empty, int-sized, symmetric padding that yields exactly P x Q outputs,
 * and (where the input is read through its strides) positive strides on every dim longer than 1. */
static int cudnn_can(const conv_geom *g, conv_pass pass) {
    const int64_t dims[] = {g->N, g->C, g->H, g->W, g->K, g->P, g->Q, g->R, g->S};
    for (int i = 0; i < 9; i++)
        if (dims[i] < 1 || !fits_int(dims[i])) return 0;
    if (!fits_int(g->N * g->C * g->H * g->W) || !fits_int(g->N * g->K * g->P * g->Q) ||
        !fits_int(g->K * (g->C / g->G) * g->R * g->S))
        return 0;
    if ((g->H + 2 * g->ph - g->dh * (g->R - 1) - 1) / g->sh + 1 != g->P) return 0;
    if ((g->W + 2 * g->pw - g->dw * (g->S - 1) - 1) / g->sw + 1 != g->Q) return 0;
    if (pass != CONV_BACKWARD_DATA) {
        const int64_t sizes[4] = {g->N, g->C, g->H, g->W};
        for (int i = 0; i < 4; i++)
            if (sizes[i] > 1 && (g->xs[i] < 1 || !fits_int(g->xs[i]))) return 0;
    }
    return 1;
}

/* Descriptors for `pass`: x (N, C, H, W) read through g->xs where the pass reads the input (forward, weight
 * gradient), contiguous where it writes it (input gradient); y (N, K, P, Q) and w contiguous. */
static int make_descs(descs *d, const conv_geom *g, gm_dtype dt, conv_pass pass, cudnnMathType_t math,
                      gm_cuda_ctx *ctx) {
    int rc = GM_OK;
    cudnnDataType_t t;
    if (!data_type(dt, &t)) return GM_ERR_ARG;
    memset(d, 0, sizeof *d);
    int xdim[4] = {(int)g->N, (int)g->C, (int)g->H, (int)g->W}, xst[4];
    int ydim[4] = {(int)g->N, (int)g->K, (int)g->P, (int)g->Q};
    int yst[4] = {(int)(g->K * g->P * g->Q), (int)(g->P * g->Q), (int)g->Q, 1};
    if (pass == CONV_BACKWARD_DATA) {
        xst[3] = 1, xst[2] = (int)g->W, xst[1] = (int)(g->H * g->W), xst[0] = (int)(g->C * g->H * g->W);
    } else {
        /* a dim of size 1 is never stepped over: give it the packed stride (cuDNN checks strides for overlap) */
        int64_t packed = 1;
        for (int i = 3; i >= 0; i--) {
            xst[i] = (int)(xdim[i] > 1 ? g->xs[i] : packed);
            packed = (xdim[i] > 1 ? g->xs[i] : packed) * xdim[i];
        }
    }
    DNN_CHECK(ctx, cudnnCreateTensorDescriptor(&d->x));
    DNN_CHECK(ctx, cudnnCreateTensorDescriptor(&d->y));
    DNN_CHECK(ctx, cudnnCreateFilterDescriptor(&d->w));
    DNN_CHECK(ctx, cudnnCreateConvolutionDescriptor(&d->conv));
    DNN_CHECK(ctx, cudnnSetTensorNdDescriptor(d->x, t, 4, xdim, xst));
    DNN_CHECK(ctx, cudnnSetTensorNdDescriptor(d->y, t, 4, ydim, yst));
    DNN_CHECK(ctx, cudnnSetFilter4dDescriptor(d->w, t, CUDNN_TENSOR_NCHW, (int)g->K, (int)(g->C / g->G), (int)g->R,
                                              (int)g->S));
    DNN_CHECK(ctx, cudnnSetConvolution2dDescriptor(d->conv, (int)g->ph, (int)g->pw, (int)g->sh, (int)g->sw,
                                                   (int)g->dh, (int)g->dw, CUDNN_CROSS_CORRELATION,
                                                   dt == GM_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    DNN_CHECK(ctx, cudnnSetConvolutionGroupCount(d->conv, (int)g->G));
    DNN_CHECK(ctx, cudnnSetConvolutionMathType(d->conv, math));
done:
    if (rc != GM_OK) destroy(d);
    return rc;
}

/* The math type a proposed candidate runs with. The heuristics may report a float32 candidate with
 * CUDNN_DEFAULT_MATH even when asked with CUDNN_FMA_MATH; without TF32 it is run with FMA math all the same
 * (PyTorch and ONNX Runtime override it the same way), so no candidate is lost and none uses TF32. A candidate
 * that cannot run with that math fails its workspace query below and is skipped. */
static cudnnMathType_t used_math(cudnnMathType_t proposed, gm_dtype dt, const gm_cuda_ctx *ctx) {
    return dt == GM_F32 && !ctx->cudnn_allow_tf32 ? CUDNN_FMA_MATH : proposed;
}

/* Deterministic candidates first, each group in the heuristics' order: an algorithm that accumulates with
 * atomics (some backward-data and backward-filter ones) gives gradients that differ in the last bits from run to
 * run, which would break the promise that a checkpointed step's gradients equal the plain step's bit for bit.
 * A non-deterministic one is used only when no deterministic candidate's workspace fits. */
static void deterministic_first(cuda_conv_algo *algos, const int *nondet, int n) {
    cuda_conv_algo sorted[CUDA_CONV_MAX_ALGOS];
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (nondet[i] == pass) sorted[k++] = algos[i];
    memcpy(algos, sorted, (size_t)n * sizeof *algos);
}

/* Append cuDNN's usable proposals perf[0..got) to algos[*n..max), each with the math it will run with (set on conv
 * first: the workspace a proposal needs depends on it) and the workspace ws_size(algo, &bytes) reports; a proposal
 * cuDNN failed on, or whose workspace it cannot size, is skipped. One loop for the three passes' Perf types. */
template <typename Perf, typename WsSize>
static int add_candidates(const Perf *perf, int got, cudnnConvolutionDescriptor_t conv, gm_dtype dt,
                          gm_cuda_ctx *ctx, cuda_conv_algo *algos, int *nondet, int max, int *n, WsSize ws_size) {
    int rc = GM_OK;
    for (int i = 0; i < got && *n < max; i++) {
        size_t ws = 0;
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        const cudnnMathType_t math = used_math(perf[i].mathType, dt, ctx);
        DNN_CHECK(ctx, cudnnSetConvolutionMathType(conv, math));
        if (ws_size(perf[i].algo, &ws) != CUDNN_STATUS_SUCCESS) continue;
        nondet[*n] = perf[i].determinism == CUDNN_NON_DETERMINISTIC;
        algos[(*n)++] = (cuda_conv_algo){(int)perf[i].algo, (int)math, ws};
    }
done:
    return rc;
}

/* The legacy API's candidates (cudnnGetConvolution*Algorithm_v7), deterministic first; max >= 1, cudnn_can(g). */
static int legacy_algos(const conv_geom *g, gm_dtype dt, conv_pass pass, cuda_conv_algo *algos, int max, int *count,
                        gm_cuda_ctx *ctx) {
    int rc = GM_OK, n = 0, got = 0;
    int nondet[CUDA_CONV_MAX_ALGOS] = {0};
    descs d = {0};
    *count = 0;
    cudnnHandle_t h = (cudnnHandle_t)ctx->cudnn;
    if ((rc = make_descs(&d, g, dt, pass, base_math(dt, ctx), ctx)) != GM_OK) return rc;
    if (pass == CONV_FORWARD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        DNN_CHECK(ctx, cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
        rc = add_candidates(perf, got, d.conv, dt, ctx, algos, nondet, max, &n,
                            [&](cudnnConvolutionFwdAlgo_t a, size_t *ws) {
                                return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, a, ws);
                            });
    } else if (pass == CONV_BACKWARD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        DNN_CHECK(ctx, cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                                                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
        rc = add_candidates(perf, got, d.conv, dt, ctx, algos, nondet, max, &n,
                            [&](cudnnConvolutionBwdDataAlgo_t a, size_t *ws) {
                                return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, a, ws);
                            });
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        DNN_CHECK(ctx, cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                                                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                                     perf));
        rc = add_candidates(perf, got, d.conv, dt, ctx, algos, nondet, max, &n,
                            [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *ws) {
                                return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, a, ws);
                            });
    }
    if (rc != GM_OK) goto done;
    /* No cuDNN candidate for this geometry and dtype (or none with the allowed math): the direct kernels. */
    if (n == 0) algos[n++] = (cuda_conv_algo){CUDA_CONV_DIRECT, 0, 0};
    deterministic_first(algos, nondet, n);
    *count = n;
done:
    destroy(&d);
    return rc;
}

/* GPUMEMNET_CUDNN_API=legacy: every pass through the legacy API (its plan per call), as before the graph API. */
static int legacy_only(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("GPUMEMNET_CUDNN_API");
        v = e && !strcmp(e, "legacy");
    }
    return v;
}

/* The graph API's plans (conv_plan.cu) when it offers any, else the legacy API's algorithms. */
extern "C" int cuda_conv2d_algos(const conv_geom *g, gm_dtype dt, conv_pass pass, cuda_conv_algo *algos, int max,
                                 int *count, gm_cuda_ctx *ctx) {
    cudnnDataType_t t;
    if (!g || !algos || !count || max < 1) return GM_ERR_ARG;
    if (max > CUDA_CONV_MAX_ALGOS) max = CUDA_CONV_MAX_ALGOS;
    *count = 0;
    if (!data_type(dt, &t)) return GM_ERR_ARG;
    if (!cudnn_can(g, pass)) {
        algos[0] = (cuda_conv_algo){CUDA_CONV_DIRECT, 0, 0};
        *count = 1;
        return GM_OK;
    }
    if (!ctx->cudnn) {
        snprintf(ctx->err, sizeof ctx->err, "no cuDNN handle for device %d", ctx->device);
        return GM_ERR_BACKEND;
    }
    if (!legacy_only()) {
        int rc = conv_plan_candidates(g, dt, pass, algos, max, count, ctx);
        if (rc != GM_OK || *count > 0) return rc;
    }
    return legacy_algos(g, dt, pass, algos, max, count, ctx);
}

/* Run one pass with algo. x/y/w are the pass's operands in cuDNN's roles (x the convolution's input, y its
 * output, w the filter); `out` says which one is written; bias (K for the forward, C for the input gradient) is
 * filled into it first. */
static int run(const conv_geom *g, gm_dtype dt, conv_pass pass, const cuda_conv_algo *algo, void *x, void *y,
               void *w, const void *bias, void *ws, size_t ws_nbytes, gm_cuda_ctx *ctx) {
    int rc = GM_OK;
    descs d = {0};
    if (ws_nbytes < algo->ws || (algo->ws && !ws)) return GM_ERR_ARG;
    if (!ctx->cudnn) {
        snprintf(ctx->err, sizeof ctx->err, "no cuDNN handle for device %d", ctx->device);
        return GM_ERR_BACKEND;
    }
    cudnnHandle_t h = (cudnnHandle_t)ctx->cudnn;
    /* alpha and beta are double for double data, float otherwise (cuDNN's scaling-parameter rule) */
    const double a64 = 1.0, b64 = bias ? 1.0 : 0.0;
    const float a32 = 1.0f, b32 = bias ? 1.0f : 0.0f;
    const void *alpha = dt == GM_F64 ? (const void *)&a64 : (const void *)&a32;
    const void *beta = dt == GM_F64 ? (const void *)&b64 : (const void *)&b32;
    if (bias) {
        int st = pass == CONV_FORWARD ? cuda_conv_fill_bias(y, bias, g->N, g->K, g->P * g->Q, dt, ctx)
                                      : cuda_conv_fill_bias(x, bias, g->N, g->C, g->H * g->W, dt, ctx);
        if (st != GM_OK) return st;
    }
    if ((rc = make_descs(&d, g, dt, pass, (cudnnMathType_t)algo->math, ctx)) != GM_OK) return rc;
    if (pass == CONV_FORWARD)
        DNN_CHECK(ctx, cudnnConvolutionForward(h, alpha, d.x, x, d.w, w, d.conv, (cudnnConvolutionFwdAlgo_t)algo->algo,
                                               ws, ws_nbytes, beta, d.y, y));
    else if (pass == CONV_BACKWARD_DATA)
        DNN_CHECK(ctx, cudnnConvolutionBackwardData(h, alpha, d.w, w, d.y, y, d.conv,
                                                    (cudnnConvolutionBwdDataAlgo_t)algo->algo, ws, ws_nbytes, beta,
                                                    d.x, x));
    else
        DNN_CHECK(ctx, cudnnConvolutionBackwardFilter(h, alpha, d.x, x, d.y, y, d.conv,
                                                      (cudnnConvolutionBwdFilterAlgo_t)algo->algo, ws, ws_nbytes,
                                                      beta, d.w, w));
done:
    destroy(&d);
    return rc;
}

/* The direct kernel of `pass` (bias included): x/y/w in cuDNN's roles as in run(). */
static int run_direct(const conv_geom *g, gm_dtype dt, conv_pass pass, void *x, void *y, void *w, const void *bias,
                      gm_cuda_ctx *ctx) {
    if (pass == CONV_FORWARD) return cuda_conv2d_direct_forward(y, x, w, bias, g, dt, ctx);
    if (pass == CONV_BACKWARD_DATA) return cuda_conv2d_direct_backward_data(x, y, w, bias, g, dt, ctx);
    return cuda_conv2d_direct_backward_weight(w, y, x, g, dt, ctx);
}

/* Run a graph-API plan (beta = 0, then the bias added). Operands the plans cannot take (not 16-byte aligned: a
 * view into the middle of a tensor) run the legacy API's first algorithm whose workspace fits in what was
 * allocated for the plan, or the direct kernel. */
static int run_plan(const conv_geom *g, gm_dtype dt, conv_pass pass, const cuda_conv_algo *algo, void *x, void *y,
                    void *w, const void *bias, void *ws, size_t ws_nbytes, gm_cuda_ctx *ctx) {
    if (ws_nbytes < algo->ws || (algo->ws && !ws)) return GM_ERR_ARG;
    int st = conv_plan_run(g, dt, pass, algo, x, y, w, ws, ctx);
    if (st == 1) {
        cuda_conv_algo cand[CUDA_CONV_MAX_ALGOS];
        int n = 0;
        if ((st = legacy_algos(g, dt, pass, cand, CUDA_CONV_MAX_ALGOS, &n, ctx)) != GM_OK) return st;
        for (int i = 0; i < n; i++)
            if (cand[i].algo != CUDA_CONV_DIRECT && cand[i].ws <= ws_nbytes)
                return run(g, dt, pass, &cand[i], x, y, w, bias, ws, ws_nbytes, ctx);
        return run_direct(g, dt, pass, x, y, w, bias, ctx);
    }
    if (st != GM_OK || !bias) return st;
    /* the forward writes y (bias over K), the input gradient x (a transposed convolution's bias, over C) */
    return pass == CONV_FORWARD ? cuda_conv_add_bias(y, bias, g->N, g->K, g->P * g->Q, dt, ctx)
                                : cuda_conv_add_bias(x, bias, g->N, g->C, g->H * g->W, dt, ctx);
}

extern "C" int cuda_conv2d_forward(void *out, const void *inp, const void *weight, const void *bias,
                                   const conv_geom *g, gm_dtype dt, const cuda_conv_algo *algo, void *ws,
                                   size_t ws_nbytes, gm_cuda_ctx *ctx) {
    if (!g || !algo) return GM_ERR_ARG;
    if (algo->algo == CUDA_CONV_DIRECT) return cuda_conv2d_direct_forward(out, inp, weight, bias, g, dt, ctx);
    if (algo->algo >= CONV_PLAN_BASE)
        return run_plan(g, dt, CONV_FORWARD, algo, (void *)inp, out, (void *)weight, bias, ws, ws_nbytes, ctx);
    return run(g, dt, CONV_FORWARD, algo, (void *)inp, out, (void *)weight, bias, ws, ws_nbytes, ctx);
}

extern "C" int cuda_conv2d_backward_data(void *dinp, const void *dout, const void *weight, const void *bias,
                                         const conv_geom *g, gm_dtype dt, const cuda_conv_algo *algo, void *ws,
                                         size_t ws_nbytes, gm_cuda_ctx *ctx) {
    if (!g || !algo) return GM_ERR_ARG;
    if (algo->algo == CUDA_CONV_DIRECT) return cuda_conv2d_direct_backward_data(dinp, dout, weight, bias, g, dt, ctx);
    if (algo->algo >= CONV_PLAN_BASE)
        return run_plan(g, dt, CONV_BACKWARD_DATA, algo, dinp, (void *)dout, (void *)weight, bias, ws, ws_nbytes, ctx);
    return run(g, dt, CONV_BACKWARD_DATA, algo, dinp, (void *)dout, (void *)weight, bias, ws, ws_nbytes, ctx);
}

extern "C" int cuda_conv2d_backward_weight(void *dweight, const void *dout, const void *inp, const conv_geom *g,
                                           gm_dtype dt, const cuda_conv_algo *algo, void *ws, size_t ws_nbytes,
                                           gm_cuda_ctx *ctx) {
    if (!g || !algo) return GM_ERR_ARG;
    if (algo->algo == CUDA_CONV_DIRECT) return cuda_conv2d_direct_backward_weight(dweight, dout, inp, g, dt, ctx);
    if (algo->algo >= CONV_PLAN_BASE)
        return run_plan(g, dt, CONV_BACKWARD_WEIGHT, algo, (void *)inp, (void *)dout, dweight, NULL, ws, ws_nbytes,
                        ctx);
    return run(g, dt, CONV_BACKWARD_WEIGHT, algo, (void *)inp, (void *)dout, dweight, NULL, ws, ws_nbytes, ctx);
}
