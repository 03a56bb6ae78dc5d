/* kernels/cuda/dropout.h — CUDA entry points of kernels/cpu/dropout.h (same arguments and results, `int
 * nthreads` replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). The mask
 * is bit-identical to the CPU's for the same (seed, offset): both read kernels/philox.h. */
#ifndef GM_KERNELS_CUDA_DROPOUT_H
#define GM_KERNELS_CUDA_DROPOUT_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_dropout_mask_forward(uint8_t *mask, int64_t n, double p, uint64_t seed, uint64_t offset, gm_cuda_ctx *ctx);
int cuda_dropout_apply_forward(void *out, const void *inp, const uint8_t *mask, int64_t outer, int64_t inner,
                               double scale, gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
