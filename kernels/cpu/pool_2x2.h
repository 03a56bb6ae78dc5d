/* kernels/cpu/pool_2x2.h — max pooling with a 2x2 window and stride 2 (no padding, no dilation, windows inside the
 * input: UNet's MaxPool2d(2), VGG's and most encoders') on AVX-512, for bfloat16 and float32, reading and writing
 * the tensors' own dtype. Results are pool.c's bit for bit: the values-only forward (a nan anywhere in a window
 * gives NAN) and the backward that finds each window's argmax again in the input (window_argmax's rule: strictly
 * greater keeps the first maximum, a nan always wins, a window of -inf only sends nothing back), whose gradient
 * is stored as pool.c's 0 + g (so -0 becomes +0, a signalling nan quiet).
 *
 * Both return GM_ERR_UNSUPPORTED for any other case (another dtype or geometry, a strided last dim, no AVX-512,
 * or GPUMEMNET_NN_BF16=portable), and pool.c then runs its generic loops. Pure functions, nothing allocated. */
#ifndef GM_KERNELS_CPU_POOL_2X2_H
#define GM_KERNELS_CPU_POOL_2X2_H

#include "../pool_geom.h"

/* out (N, C, OH, OW) contiguous; inp read through its element strides in[4] (in[3] must be 1). */
int maxpool2x2_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const pool2d_geom *g,
                       int nthreads);

/* dinp (N, C, H, W) contiguous, every element written; dout read through ds[4], inp through in[4] (ds[3] and
 * in[3] must be 1). */
int maxpool2x2_backward_input(void *dinp, const void *dout, const int64_t ds[4], const void *inp, const int64_t in[4],
                              gm_dtype dt, const pool2d_geom *g, int nthreads);

/* maxpool2d_forward_taps and maxpool2d_backward_taps (pool.h) of these windows: the same values, taps and
 * gradients; GM_ERR_UNSUPPORTED where the geometry or the CPU does not fit, GM_ERR_ARG for a tap outside [-1, 4). */
int maxpool2x2_forward_taps(void *out, int8_t *taps, const void *inp, const int64_t in[4], gm_dtype dt,
                            const pool2d_geom *g, int nthreads);
int maxpool2x2_backward_taps(void *dinp, const void *dout, const int64_t ds[4], const int8_t *taps, gm_dtype dt,
                             const pool2d_geom *g, int nthreads);

#endif
