/* kernels/cuda/roi_align.h — CUDA entry points of kernels/cpu/roi_align.h (same arguments and results, with
 * `int nthreads` replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). The
 * boxes live on the device, where the host cannot check them: a box with a coordinate that is not finite or a
 * batch index outside [0, N) gives zeros (and no gradient) instead of a read out of bounds. The backward adds
 * with atomics, so its float sums' order may vary from run to run. */
#ifndef GM_KERNELS_CUDA_ROI_ALIGN_H
#define GM_KERNELS_CUDA_ROI_ALIGN_H

#include "../roi_align.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_roi_align_forward(void *out, const void *input, const void *rois, const roi_align_geom *g, gm_dtype dt,
                           gm_cuda_ctx *ctx);
int cuda_roi_align_backward(void *grad_input, const void *grad, const void *rois, const roi_align_geom *g,
                            gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
