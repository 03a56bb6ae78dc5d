/* kernels/cuda/resize.h — 2-D interpolation on CUDA: kernels/cpu/resize.h's entry points with the prefix cuda_
 * and the device context in place of `nthreads`. Same geometry, same layouts, device pointers.
 *
 * Bit-identical to the CPU: the source coordinates are computed with the CPU's formulas in its precision (no
 * fused multiply-add where the CPU rounds in between), values combined in double in the same order; the
 * backward gathers, for each input element, the outputs that read it, in the CPU scatter's order, rounding
 * after each addition. Deterministic, no atomics. */
#ifndef GM_KERNELS_CUDA_RESIZE_H
#define GM_KERNELS_CUDA_RESIZE_H

#include "../resize_geom.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_resize2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const resize2d_geom *g,
                          gm_cuda_ctx *ctx);
int cuda_resize2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt, const resize2d_geom *g,
                           gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
