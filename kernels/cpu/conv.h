/* kernels/cpu/conv.h — 2-D convolution (NCHW) and the linear layer on the CPU. Pure compute over raw pointers:
 * nothing is allocated; scratch space arrives from the caller (csrc/ops_conv.c allocates it tagged workspace).
 *
 * One geometry describes a convolution and both of its gradients; conv_transpose2d is the input-gradient of
 * the convolution whose input is its output, so it needs no kernel of its own (csrc maps it onto these).
 *
 * Six algorithms, chosen here from the geometry (and, for the direct one, the dtype and the CPU):
 *   depthwise  groups > 1 with one input channel per group (C == G): a direct loop, no workspace (float32,
 *              float64); float16/bfloat16 widen a plane at a time into per-thread float32 buffers (the
 *              workspace: a few KiB per thread, conv_depthwise.c), sum in float32 and round each result once.
 *   pointwise  1x1, stride 1, no padding, over an input whose (H, W) planes are contiguous: the input already
 *              is the column matrix, so each pass is one gemm per (item, group), no workspace.
 *   direct     float32 on a CPU with AVX-512, stride 1 with the output the input's size (3x3 padding 1, ...),
 *              at least 8 channels per group each way (conv_direct.c; conv_plan.c's conv_direct_use says
 *              where it wins): the forward and input-gradient read the input straight from its planes, the
 *              workspace holds only the repacked weight; the 3x3 weight-gradient up to 64x64 channels (where
 *              wgrad below does not run) needs none. Also the stride-2 forward and input-gradient (7x7/2, 3x3/2,
 *              conv_transpose2d 2x2/2, ...):
 *              the workspace adds one item's input (forward) or input-gradient in four phases (4 C planes of
 *              the output's size).
 *   wgrad      the float32 weight-gradient on a CPU with AVX-512, one group, K a multiple of 16, C >= 16, any
 *              kernel, stride, padding, dilation and input strides, at least 256 positions per group of items
 *              (conv_wgrad.c): the workspace holds grad_output transposed, about 1 MiB of it at a time.
 *   winograd   float32 on a CPU with AVX-512, 3x3, stride 1, dilation 1, one group, 64 or more channels each
 *              way, forward and input-gradient, where conv_plan.c's conv_winograd_use says it wins (enough 2x2
 *              output tiles to pay for transforming the weight; GPUMEMNET_CONV_WINOGRAD=0/1 forces it off/on):
 *              conv_winograd.c. The workspace holds the transformed weight (16/9 of the weight) and per thread
 *              blocks of transformed tiles (about 512 KiB), whatever the batch.
 *   im2col     everything else: the column matrix (C/G*R*S rows) is built one tile of output positions at a
 *              time in the workspace, so the workspace is bounded by the caller's limit, not by the image.
 *
 * Layouts: inp may have any element strides (inp_strides, used where it is read: the forward and the weight
 * gradient); every other tensor is contiguous: out/dout (N, K, P, Q), dinp (N, C, H, W), weight/dweight
 * (K, C/G, R, S), bias (K) for the forward and (C) for backward_data. dtypes: float32 and float64; every pass
 * also float16 and bfloat16 (all operands in that dtype), computed in float32 and rounded once:
 * inputs are widened tile by tile as they are read and results rounded a tile (forward) or a block of planes
 * (input-gradient: at most 256 KiB of float32 per thread) at a time, or once (the weight-gradient, summed in a
 * float32 copy of it), so the workspace holds the widened weight (or the float32 weight-gradient) and per-thread
 * float32 tiles, never a float32 copy of an activation. The functions return GM_ERR_UNSUPPORTED for any other
 * dtype (or pass).
 *
 * Tiles: an im2col tile is whole output rows of about 256 KiB of columns per thread (at least 256 columns), or
 * less when the caller's limit says so; so the workspace follows the image size, not the batch size. A deep layer
 * (K/G >= 32, C/G*R*S >= 512) whose image has at most half a tile's positions runs its forward and input-gradient
 * over tiles of several whole items instead (one gemm for them all; the buffer then also holds the K/G rows of
 * the gemm's output or of the gathered grad_output per column): the same column bound, which the small image
 * used to stay under. conv2d_workspace_nbytes counts it, on meta as on the CPU. */
#ifndef GM_KERNELS_CPU_CONV_H
#define GM_KERNELS_CPU_CONV_H

#include "../conv_geom.h"

/* The algorithm a pass runs (backward_data writes a contiguous dinp, so inp's strides do not matter there). */
conv_algo conv2d_algo(const conv_geom *g, conv_pass pass);

/* Bytes of workspace one column of the im2col matrix takes: the least workspace an im2col pass can run in. */
size_t conv2d_column_nbytes(const conv_geom *g, gm_dtype dt);

/* Workspace bytes the pass will use, given at most `limit` bytes and nthreads threads: 0 when its algorithm
 * needs none (or the dtype is unsupported for the pass), else (for half precision, after the widened weight
 * and bias) whole columns (one buffer per thread for the forward and the input-gradient, one shared
 * buffer for the weight-gradient; never more columns than positions per item). When even one column does not
 * fit it returns conv2d_column_nbytes(), which is more than limit: the caller decides (csrc raises). The
 * kernels plan their tiles from the workspace they are given, so pass them exactly this many bytes (or more). */
size_t conv2d_workspace_nbytes(const conv_geom *g, gm_dtype dt, conv_pass pass, size_t limit, int nthreads);

/* out = conv(inp, weight) + bias (bias may be NULL). */
int conv2d_forward(void *out, const void *inp, const void *weight, const void *bias, const conv_geom *g,
                   gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);

/* dinp = conv's input-gradient of dout, plus bias[c] on every (n, c) plane when bias is not NULL (that is
 * conv_transpose2d's forward with its bias). */
int conv2d_backward_data(void *dinp, const void *dout, const void *weight, const void *bias, const conv_geom *g,
                         gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads);

/* Whether this CPU's bfloat16 passes of one-group convolutions read a float32 weight and bias as they are
 * (conv_geom.wf32; conv_half.c): autocast then passes its parameters uncast. */
int conv_half_reads_f32_weight(void);

/* dweight = conv's weight-gradient: sum over items and positions of dout x columns of inp. Overwrites
 * dweight. */
int conv2d_backward_weight(void *dweight, const void *dout, const void *inp, const conv_geom *g, gm_dtype dt,
                           void *ws, size_t ws_nbytes, int nthreads);

/* dbias (K) = the sum of t (N, K, L) over N and L; t has element strides ts (N, K, L). Accumulates in double. */
int conv_bias_backward(void *dbias, const void *t, int64_t N, int64_t K, int64_t L, const int64_t ts[3],
                       gm_dtype dt, int nthreads);

/* The linear layer, out (M, Fo) = x (M, Fi) @ w (Fo, Fi)^T + bias. Each matrix operand arrives as a conv_mat
 * (kernels/conv_geom.h: pointer, transpose flag, leading dimension, as BLAS reads it). Outputs are contiguous. */

/* out (M, Fo) contiguous. bias (Fo) or NULL: it is written into out first and the gemm adds onto it (beta = 1),
 * so no output-sized temporary exists. */
int linear_forward(void *out, conv_mat x, conv_mat w, const void *bias, int64_t M, int64_t Fi, int64_t Fo, gm_dtype dt,
                   int nthreads);

/* Any of dx (M, Fi), dw (Fo, Fi), db (Fo) may be NULL (not wanted). g is (M, Fo). */
int linear_backward(void *dx, void *dw, void *db, conv_mat g, conv_mat x, conv_mat w, int64_t M, int64_t Fi, int64_t Fo,
                    gm_dtype dt, int nthreads);

#endif
