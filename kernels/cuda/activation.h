/* kernels/cuda/activation.h — CUDA entry points of kernels/cpu/activation.h (same arguments and results, with
 * `int nthreads` replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). */
#ifndef GM_KERNELS_CUDA_ACTIVATION_H
#define GM_KERNELS_CUDA_ACTIVATION_H

#include "../activation_ops.h"
#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_activation_forward(void *out, const void *inp, int64_t n, gm_dtype dt, int op, double alpha, double beta,
                            gm_cuda_ctx *ctx);
int cuda_activation_backward(void *dinp, const void *dout, const void *saved, int64_t n, gm_dtype dt, int op,
                             double alpha, double beta, gm_cuda_ctx *ctx);
int cuda_relu_mask_pack(uint8_t *mask, const void *out, int64_t n, gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_relu_mask_backward(void *dinp, const void *dout, const uint8_t *mask, int64_t n, gm_dtype dt,
                            gm_cuda_ctx *ctx);
int cuda_prelu_forward(void *out, const void *inp, const void *w, int64_t outer, int64_t C, int64_t inner, int64_t wn,
                       gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_prelu_backward(void *dinp, void *dw, double *partial, const void *dout, const void *inp, const void *w,
                        int64_t outer, int64_t C, int64_t inner, int64_t wn, gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
