/* kernels/cuda/norm.h — CUDA entry points of kernels/cpu/norm.h (same arguments and results, `int nthreads`
 * replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). */
#ifndef GM_KERNELS_CUDA_NORM_H
#define GM_KERNELS_CUDA_NORM_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_batchnorm_forward(void *out, void *mean, void *invstd, void *running_mean, void *running_var,
                           const void *inp, const void *weight, const void *bias, int64_t N, int64_t C, int64_t HW,
                           gm_dtype dt, gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum,
                           double eps, gm_cuda_ctx *ctx);

int cuda_batchnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                            const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C,
                            int64_t HW, gm_dtype dt, gm_dtype wdt, gm_dtype sdt, int training, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
