/* kernels/cpu/resize.h — 2-D interpolation on the CPU (F.interpolate's "nearest", "nearest-exact" and
 * "bilinear" modes), forward and backward. The 1-D case (N, C, L) is the 2-D one with H = OH = 1.
 *
 * Same conventions as pool.h: (N, C, H, W) tensors, inputs read through element strides, outputs and input
 * gradients contiguous, float32/float64/float16/bfloat16. Source coordinates are computed as PyTorch's CPU
 * kernels do (aten/src/ATen/native/UpSample.h), formulas and precision, so the chosen source pixels match
 * PyTorch's; values are then combined in double. */
#ifndef GM_KERNELS_CPU_RESIZE_H
#define GM_KERNELS_CPU_RESIZE_H

#include "../resize_geom.h"
#include "pool.h" /* pool_ld, pool_st, POOL_DISPATCH: resize.c's loops */

/* out (N, C, OH, OW) = inp (N, C, H, W) resized. */
int resize2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const resize2d_geom *g,
                     int nthreads);

/* dinp (N, C, H, W) = the adjoint of the forward applied to dout (N, C, OH, OW), read through ds[4]. */
int resize2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt, const resize2d_geom *g,
                      int nthreads);

#endif
