/* kernels/cuda/conv.h — 2-D convolution (NCHW) on CUDA: the passes of the CPU backend (the same conv_geom,
 * kernels/conv_geom.h; conv_transpose2d maps onto them in csrc exactly as on the CPU), cuDNN underneath.
 *
 * Four files implement these declarations:
 *   conv.cu          cuDNN: the algorithm candidates and the three passes, through conv_plan.cu's execution
 *                    plans where the graph API offers them and cuDNN's legacy API otherwise;
 *   conv_plan.cu     cuDNN's graph API: an execution plan per geometry, built once (the legacy calls build one per
 *                    call, which costs more host time than a small convolution takes on the GPU). conv.cu and
 *                    conv_plan.cu are the only files with cuDNN calls, and neither is compiled in the emulator
 *                    build.
 *   emu/conv_emu.cpp the emulator build's stand-in for conv.cu: one candidate (direct, no workspace), the passes
 *                    run by the direct kernels.
 *   conv_direct.cu   own kernels, compiled in both builds: the direct convolution (any geometry, any float dtype,
 *                    no workspace: a fallback for what cuDNN cannot express, and the emulator's convolution), the
 *                    bias fill, the bias gradient and column sums.
 *
 * How csrc runs a pass (csrc/ops_conv.c): cuda_conv2d_algos lists the candidates in the order to try (cuDNN's
 * heuristics: expected fastest first) with the workspace each needs; csrc allocates the workspace (category
 * workspace) of the first that the allocator can give under the limit, falling back to the next on
 * OutOfMemoryError, and caches the choice; then it calls the pass with that candidate and workspace.
 *
 * Layouts as on the CPU: inp is read through g->xs (element strides) in the forward and the weight gradient;
 * every other tensor is contiguous. dtypes: float32, float64, float16, bfloat16 for every pass (16-bit: float32
 * arithmetic; cuDNN's tensor-op math). Pointers are device pointers; the geometry is a host struct. */
#ifndef GM_KERNELS_CUDA_CONV_H
#define GM_KERNELS_CUDA_CONV_H

#include "../conv_geom.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A way to run one pass: a cuDNN algorithm (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t) with the math type
 * (cudnnMathType_t) it was proposed with, or CUDA_CONV_DIRECT (own kernels); and the workspace bytes it needs. */
typedef struct {
    int algo;
    int math;
    size_t ws;
} cuda_conv_algo;

#define CUDA_CONV_DIRECT (-1)
#define CUDA_CONV_MAX_ALGOS 16

/* The candidates for `pass` over geometry g, deterministic ones first, each group best first (conv.cu says
 * why), at most max (>= 1) of them; *count >= 1 on GM_OK.
 * When cuDNN cannot express the geometry (padding that is not symmetric, e.g. padding='same' with an even
 * kernel span, or a transposed convolution's output_padding >= stride; empty tensors; sizes beyond int; zero
 * input strides) the only candidate is CUDA_CONV_DIRECT. float32 excludes TF32 unless ctx->cudnn_allow_tf32. */
int cuda_conv2d_algos(const conv_geom *g, gm_dtype dt, conv_pass pass, cuda_conv_algo *algos, int max, int *count,
                      gm_cuda_ctx *ctx);

/* The passes of kernels/cpu/conv.h, run with `algo` and its workspace (ws_nbytes >= algo->ws). */
int cuda_conv2d_forward(void *out, const void *inp, const void *weight, const void *bias, const conv_geom *g,
                        gm_dtype dt, const cuda_conv_algo *algo, void *ws, size_t ws_nbytes, gm_cuda_ctx *ctx);
int cuda_conv2d_backward_data(void *dinp, const void *dout, const void *weight, const void *bias,
                              const conv_geom *g, gm_dtype dt, const cuda_conv_algo *algo, void *ws,
                              size_t ws_nbytes, gm_cuda_ctx *ctx);
int cuda_conv2d_backward_weight(void *dweight, const void *dout, const void *inp, const conv_geom *g, gm_dtype dt,
                                const cuda_conv_algo *algo, void *ws, size_t ws_nbytes, gm_cuda_ctx *ctx);

/* ---- conv_direct.cu ------------------------------------------------------------------------------------ */
/* The passes by direct summation: one thread per output (forward) or input-gradient element (backward_data), one
 * block per weight-gradient element (a block reduction over items and positions). Deterministic. */
int cuda_conv2d_direct_forward(void *out, const void *inp, const void *weight, const void *bias,
                               const conv_geom *g, gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_conv2d_direct_backward_data(void *dinp, const void *dout, const void *weight, const void *bias,
                                     const conv_geom *g, gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_conv2d_direct_backward_weight(void *dweight, const void *dout, const void *inp, const conv_geom *g,
                                       gm_dtype dt, gm_cuda_ctx *ctx);

/* out (N, K, L) contiguous = bias[k] on every (n, k) row, or 0 where bias is NULL. */
int cuda_conv_fill_bias(void *out, const void *bias, int64_t N, int64_t K, int64_t L, gm_dtype dt,
                        gm_cuda_ctx *ctx);

/* out (N, K, L) contiguous += bias[k] on every (n, k) row, rounded once to the dtype. */
int cuda_conv_add_bias(void *out, const void *bias, int64_t N, int64_t K, int64_t L, gm_dtype dt, gm_cuda_ctx *ctx);

/* dbias (K) = the sum of t (N, K, L) over N and L, t with element strides ts; summed in double (as the CPU),
 * one block per channel. */
int cuda_conv_bias_backward(void *dbias, const void *t, int64_t N, int64_t K, int64_t L, const int64_t ts[3],
                            gm_dtype dt, gm_cuda_ctx *ctx);

/* out (F) = column sums of the (M, F) matrix t with row stride rs and column stride cs (elements), in double:
 * the linear layer's bias gradient. */
int cuda_conv_column_sums(void *out, const void *t, int64_t M, int64_t F, int64_t rs, int64_t cs, gm_dtype dt,
                          gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
