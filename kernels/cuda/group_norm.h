/* kernels/cuda/group_norm.h — CUDA entry points of kernels/cpu/group_norm.h (same arguments and results,
 * `int nthreads` replaced by the device context; pointers are device pointers; see kernels/cuda/README.md).
 * No workspace: a block reduces a whole group (forward, input gradient) or a whole channel (weight/bias
 * gradients), so a CUDA run allocates exactly what the CPU run does. */
#ifndef GM_KERNELS_CUDA_GROUP_NORM_H
#define GM_KERNELS_CUDA_GROUP_NORM_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_groupnorm_forward(void *out, void *mean, void *rstd, const void *inp, const void *weight, const void *bias,
                           int64_t N, int64_t C, int64_t HW, int64_t G, gm_dtype dt, gm_dtype wdt, gm_dtype sdt,
                           double eps, gm_cuda_ctx *ctx);

int cuda_groupnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                            const void *weight, const void *mean, const void *rstd, int64_t N, int64_t C, int64_t HW,
                            int64_t G, gm_dtype dt, gm_dtype wdt, gm_dtype sdt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
