/* kernels/cuda/softmax.h — CUDA entry points of kernels/cpu/softmax.h (same arguments and results, `int
 * nthreads` replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). */
#ifndef GM_KERNELS_CUDA_SOFTMAX_H
#define GM_KERNELS_CUDA_SOFTMAX_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_softmax_forward(void *out, const void *inp, int64_t outer, int64_t D, int64_t inner, gm_dtype dt, int log,
                         gm_cuda_ctx *ctx);
int cuda_softmax_backward(void *dinp, const void *dout, const void *out, int64_t outer, int64_t D, int64_t inner,
                          gm_dtype dt, int log, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
