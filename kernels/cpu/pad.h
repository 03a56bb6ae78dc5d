/* kernels/cpu/pad.h — F.pad on the CPU (constant, reflect, replicate, circular), forward and backward, on
 * contiguous (planes, D, H, W) arrays described by a pad_geom (kernels/pad_geom.h). */
#ifndef GM_KERNELS_CPU_PAD_H
#define GM_KERNELS_CPU_PAD_H

#include "../common.h"
#include "../pad_geom.h"

/* out (planes, OD, OH, OW) = inp (planes, D, H, W) padded; any dtype (elements are copied as bytes). fill: one
 * element of dtype dt, written where PAD_CONSTANT reads outside the input (may be NULL for the other modes). */
int pad_forward(void *out, const void *inp, const void *fill, const pad_geom *g, gm_dtype dt, int nthreads);

/* dinp (planes, D, H, W) = the adjoint of pad_forward applied to dout (planes, OD, OH, OW); float dtypes, each
 * input element's sum taken in double in pad_readers' order. */
int pad_backward(void *dinp, const void *dout, const pad_geom *g, gm_dtype dt, int nthreads);

#endif
