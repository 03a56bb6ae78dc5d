/* kernels/cuda/amp.h — GradScaler's fused unscale + non-finite check on CUDA (kernels/cpu/amp.h is the
 * reference: g *= inv_scale in place, inv_scale rounded to float32 and the product taken in float32, or float64
 * for float64 gradients, as PyTorch; a flag when any result as stored is inf or nan).
 *
 * Like the CPU kernel it takes the whole list (one launch per dtype and up to AMP_CAP tensors, see amp.cu) and
 * reads the flag back once: g, dt and numel are host arrays (g holds
 * device pointers), found_inf a host int set to 1 when a value is not finite and left untouched otherwise. It
 * waits for the stream (the flag is read back). */
#ifndef GM_KERNELS_CUDA_AMP_H
#define GM_KERNELS_CUDA_AMP_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_amp_unscale_forward(void *const *g, const gm_dtype *dt, const int64_t *numel, int ntensors,
                             double inv_scale, int *found_inf, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
