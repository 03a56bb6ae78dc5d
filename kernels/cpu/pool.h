/* kernels/cpu/pool.h — 2-D pooling on the CPU: max (with optional argmax indices), average, adaptive average;
 * forward and backward. Interpolation (nearest, bilinear) lives in resize.h.
 *
 * Conventions: tensors are (N, C, H, W). Inputs are read through element strides (in[4]: N, C, H, W), so views
 * and broadcast (stride-0) gradients need no copy; outputs and input gradients are written contiguous. Values
 * are float32, float64, float16 or bfloat16 (half types are loaded as float, computed in double, stored
 * rounded). Indices are int64, one per output element, the flat position h*W + w in its (H, W) plane, as in
 * PyTorch. The window arithmetic is PyTorch's (see pool.c); csrc/ops_pool.c validates the geometry and
 * computes the output size before calling. Nothing here allocates. */
#ifndef GM_KERNELS_CPU_POOL_H
#define GM_KERNELS_CPU_POOL_H

#include "../pool_geom.h"

/* out (N, C, OH, OW) = max over each window of inp; indices (N, C, OH, OW), may be NULL (an inference forward
 * keeps no indices). The first maximal element wins; a NaN wins over any number (the last NaN in the window),
 * as in PyTorch. A window that covers no input element (possible with dilation) gives -inf and index -1. */
int maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4], gm_dtype dt,
                      const pool2d_geom *g, int nthreads);

/* dinp (N, C, H, W) = 0, then dinp[n, c, indices[n, c, oh, ow]] += dout[n, c, oh, ow]; index -1 is skipped.
 * GM_ERR_ARG (dinp partly written) if an index lies outside [-1, H*W). dout is read through ds[4]. */
int maxpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], const int64_t *indices, gm_dtype dt,
                       const pool2d_geom *g, int nthreads);

/* maxpool2d_backward without indices: each window's argmax is found again in inp (read through in[4]), exactly
 * as maxpool2d_forward finds it, so the result is the same. What autograd runs when the input is kept anyway
 * (saving it costs nothing, the indices would cost 8 bytes per output). */
int maxpool2d_backward_input(void *dinp, const void *dout, const int64_t ds[4], const void *inp,
                             const int64_t in[4], gm_dtype dt, const pool2d_geom *g, int nthreads);

/* maxpool2d_forward with the argmax kept as its tap in the window (int8, pool_window.h pool_tap_of: i * kw + j,
 * -1 for an empty window) instead of an int64 flat index: 1 byte per output instead of 8, what autograd saves
 * when the input is not kept (nn/_functional_pool.py). Needs kh * kw <= 127 (GM_ERR_ARG otherwise). */
int maxpool2d_forward_taps(void *out, int8_t *taps, const void *inp, const int64_t in[4], gm_dtype dt,
                           const pool2d_geom *g, int nthreads);

/* maxpool2d_backward from those taps (the forward's window in g): the same scatter, the same result. GM_ERR_ARG
 * (dinp partly written) for a tap that lies outside the window or the plane. */
int maxpool2d_backward_taps(void *dinp, const void *dout, const int64_t ds[4], const int8_t *taps, gm_dtype dt,
                            const pool2d_geom *g, int nthreads);

/* out (N, C, OH, OW) = sum of each window / divisor, where divisor is divisor_override when > 0, else the
 * window's size clipped to the padded input (count_include_pad) or to the input (not). A window entirely in
 * the padding gives 0. g->dh and g->dw must be 1. */
int avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt, const pool2d_geom *g,
                      int count_include_pad, int64_t divisor_override, int nthreads);

/* dinp (N, C, H, W) = each dout element spread over its window with the forward's divisor. */
int avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt, const pool2d_geom *g,
                       int count_include_pad, int64_t divisor_override, int nthreads);

/* Adaptive average: output (oh, ow) averages rows [floor(oh*H/OH), ceil((oh+1)*H/OH)) and the same for
 * columns (PyTorch's windows). Only N, C, H, W, OH, OW of g are read. */
int adaptive_avgpool2d_forward(void *out, const void *inp, const int64_t in[4], gm_dtype dt,
                               const pool2d_geom *g, int nthreads);
int adaptive_avgpool2d_backward(void *dinp, const void *dout, const int64_t ds[4], gm_dtype dt,
                                const pool2d_geom *g, int nthreads);

/* Adaptive max: output (oh, ow) is the max of the adaptive window (as adaptive average's) and indices its flat
 * position h*W + w, by maxpool2d_forward's rule (the first maximum; a NaN wins, the last one). indices is
 * required; the backward is maxpool2d_backward with those indices. */
int adaptive_maxpool2d_forward(void *out, int64_t *indices, const void *inp, const int64_t in[4], gm_dtype dt,
                               const pool2d_geom *g, int nthreads);

/* ---- shared by pool.c and resize.c (not part of the interface) ---------------------------------------- */

/* Element i of a float tensor of dtype dt as a double, and the reverse (rounded to nearest even). Called with a
 * constant dt from inside a POOL_DISPATCH case, they inline to a plain load/store: one loop body serves all four
 * dtypes without a per-element switch. */
static inline __attribute__((always_inline)) double pool_ld(gm_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case GM_F32: return ((const float *)p)[i];
    case GM_F64: return ((const double *)p)[i];
    case GM_F16: return gm_half_to_float(((const uint16_t *)p)[i]);
    default: return gm_bf16_to_float(((const uint16_t *)p)[i]);
    }
}

static inline __attribute__((always_inline)) void pool_st(gm_dtype dt, void *p, int64_t i, double v) {
    switch (dt) {
    case GM_F32: ((float *)p)[i] = (float)v; break;
    case GM_F64: ((double *)p)[i] = v; break;
    case GM_F16: ((uint16_t *)p)[i] = gm_float_to_half((float)v); break;
    default: ((uint16_t *)p)[i] = gm_float_to_bf16((float)v); break;
    }
}

/* plane[i] += v, rounded to dt as a stored element is: the backward scatters. */
static inline __attribute__((always_inline)) void pool_add_at(gm_dtype dt, void *plane, int64_t i, double v) {
    pool_st(dt, plane, i, pool_ld(dt, plane, i) + v);
}

/* Below this many elements visited in total, a parallel region costs more than it saves. */
#define POOL_PARALLEL_GRAIN 32768

/* Team size for a loop over `items` that visits `work` elements: one thread unless there is enough work, never
 * more threads than items. */
static inline int pool_team(int nthreads, int64_t items, int64_t work) {
    if (nthreads < 1 || work < POOL_PARALLEL_GRAIN) return 1;
    return items < nthreads ? (int)(items > 0 ? items : 1) : nthreads;
}

/* Run STMT with the constant DT equal to dt (a float dtype); other dtypes leave STMT unrun. */
#define POOL_DISPATCH(dt, STMT)                                                                              \
    switch (dt) {                                                                                            \
    case GM_F32: { const gm_dtype DT = GM_F32; STMT; break; }                                                \
    case GM_F64: { const gm_dtype DT = GM_F64; STMT; break; }                                                \
    case GM_F16: { const gm_dtype DT = GM_F16; STMT; break; }                                                \
    case GM_BF16: { const gm_dtype DT = GM_BF16; STMT; break; }                                              \
    default: break;                                                                                          \
    }

#endif
