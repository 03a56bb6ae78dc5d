/* kernels/cuda/pool.h — 2-D pooling on CUDA: the entry points of kernels/cpu/pool.h with the prefix cuda_ and
 * `int nthreads` replaced by the device context (kernels/cuda/README.md). Same geometry structs, same layouts:
 * inputs read through element strides, outputs and input gradients contiguous. Pointers are device pointers.
 *
 * Results are bit-identical to the CPU kernels: the same taps in the same order, sums in double, and the
 * backward passes are gathers (one thread per input element) that add the contributions in the CPU's scatter
 * order, rounding to the dtype after each addition as the CPU's in-place scatter does. No atomics: the result
 * is deterministic. One difference: the max-pool backward takes an index into account only for the output
 * windows that contain it (the CPU scatters wherever an index points and rejects out-of-range ones); indices
 * from max_pool2d always lie in their window, and checking others would cost a device->host synchronisation.
 *
 * cuda_maxpool2d_backward needs the window (g->kh, kw, sh, sw, ph, pw, dh, dw as in the forward) for its gather.
 * With g->kh == g->kw == 0 the window is unknown (only the indices): it then runs the CPU's scatter with one
 * thread per (n, c) plane, over a gradient zeroed first; also bit-identical, but parallel over planes only (good
 * for global max pooling, one output per plane; slow for large sliding-window outputs). */
#ifndef GM_KERNELS_CUDA_POOL_H
#define GM_KERNELS_CUDA_POOL_H

#include "../pool_geom.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4], gm_dtype dt,
                           const pool2d_geom *g, gm_cuda_ctx *ctx);
int cuda_maxpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], const int64_t *indices, gm_dtype dt,
                            const pool2d_geom *g, gm_cuda_ctx *ctx);
/* kernels/cpu/pool.h maxpool2d_backward_input: the gather above, each window's argmax found again in inp. */
int cuda_maxpool2d_backward_input(void *dinp, const void *dout, const int64_t ds[4], const void *inp,
                                  const int64_t in[4], gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx);
/* kernels/cpu/pool.h maxpool2d_forward_taps / maxpool2d_backward_taps (the backward a gather, as above). */
int cuda_maxpool2d_forward_taps(void *out, int8_t *taps, const void *inp, const int64_t in[4], gm_dtype dt,
                                const pool2d_geom *g, gm_cuda_ctx *ctx);
int cuda_maxpool2d_backward_taps(void *dinp, const void *dout, const int64_t ds[4], const int8_t *taps, gm_dtype dt,
                                 const pool2d_geom *g, gm_cuda_ctx *ctx);
int cuda_avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const pool2d_geom *g,
                           int count_include_pad, int64_t divisor_override, gm_cuda_ctx *ctx);
int cuda_avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt, const pool2d_geom *g,
                            int count_include_pad, int64_t divisor_override, gm_cuda_ctx *ctx);
int cuda_adaptive_avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt,
                                    const pool2d_geom *g, gm_cuda_ctx *ctx);
int cuda_adaptive_avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt,
                                     const pool2d_geom *g, gm_cuda_ctx *ctx);
/* Its backward is cuda_maxpool2d_backward with the indices and no window (g->kh = g->kw = 0). */
int cuda_adaptive_maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4],
                                    gm_dtype dt, const pool2d_geom *g, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
