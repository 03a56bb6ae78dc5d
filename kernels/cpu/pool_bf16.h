/* kernels/cpu/pool_bf16.h — bfloat16 max pooling with a 2x2 window and stride 2 (no padding, no dilation, windows
 * inside the input: UNet's MaxPool2d(2), VGG's and most encoders'), on AVX-512, reading and writing bfloat16
 * directly. Results are pool.c's bit for bit: the values-only forward (a nan anywhere in a window gives nan) and
 * the backward that finds each window's argmax again in the input (window_argmax's rule: strictly greater keeps
 * the first maximum, a nan always wins, a window of -inf only sends nothing back).
 *
 * Both return GM_ERR_UNSUPPORTED for any other case (another geometry, a strided last dim, no AVX-512, or
 * GPUMEMNET_NN_BF16=portable), and pool.c then runs its generic loops. Pure functions, nothing allocated. */
#ifndef GM_KERNELS_CPU_POOL_BF16_H
#define GM_KERNELS_CPU_POOL_BF16_H

#include "../pool_geom.h"

/* out (N, C, OH, OW) contiguous; inp read through its element strides in[4] (in[3] must be 1). */
int maxpool2d_forward_bf16(uint16_t *out, const uint16_t *inp, const int64_t in[4], const pool2d_geom *g,
                           int nthreads);

/* dinp (N, C, H, W) contiguous, every element written; dout read through ds[4], inp through in[4] (ds[3] and
 * in[3] must be 1). */
int maxpool2d_backward_input_bf16(uint16_t *dinp, const uint16_t *dout, const int64_t ds[4], const uint16_t *inp,
                                  const int64_t in[4], const pool2d_geom *g, int nthreads);

#endif
