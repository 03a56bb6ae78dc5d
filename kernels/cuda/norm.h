/* kernels/cuda/norm.h — CUDA entry points of kernels/cpu/norm.h (same arguments and results, `int nthreads`
 * replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). */
#ifndef GM_KERNELS_CUDA_NORM_H
#define GM_KERNELS_CUDA_NORM_H

#include "../common.h"
#include "cuda_ctx.h"
#include "scratch_sizes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The workspace of a forward or backward (per-channel partial sums, a few KiB) is
 * cuda_batchnorm_workspace_bytes(N, C, HW, reduce, ctx->sm_count) of scratch_sizes.h. One difference from the
 * CPU kernels' arguments: the CPU walks a channel in one thread, a GPU needs many blocks per channel to reach
 * its bandwidth. */
int cuda_batchnorm_forward(void *out, void *mean, void *invstd, void *running_mean, void *running_var,
                           const void *inp, const void *weight, const void *bias, int64_t N, int64_t C, int64_t HW,
                           gm_dtype dt, gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum,
                           double eps, void *workspace, gm_cuda_ctx *ctx);

int cuda_batchnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                            const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C,
                            int64_t HW, gm_dtype dt, gm_dtype wdt, gm_dtype sdt, int training, void *workspace,
                            gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
