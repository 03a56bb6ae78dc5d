/* kernels/cuda/pad.h — CUDA entry points of kernels/cpu/pad.h (same arguments and results, `int nthreads`
 * replaced by the device context; out, inp, dinp, dout are device pointers, g and fill host pointers). The
 * results are bit-identical to the CPU's: the forward copies bytes, the backward adds the same gradients in the
 * same order (kernels/pad_geom.h). Asynchronous. */
#ifndef GM_KERNELS_CUDA_PAD_H
#define GM_KERNELS_CUDA_PAD_H

#include "../common.h"
#include "../pad_geom.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_pad_forward(void *out, const void *inp, const void *fill, const pad_geom *g, gm_dtype dt,
                     gm_cuda_ctx *ctx);
int cuda_pad_backward(void *dinp, const void *dout, const pad_geom *g, gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
