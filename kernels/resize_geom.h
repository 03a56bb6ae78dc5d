/* kernels/resize_geom.h — the geometry of 2-D interpolation (F.interpolate's "nearest", "nearest-exact" and
 * "bilinear"), shared by both backends (kernels/README.md). The kernels are declared in kernels/cpu/resize.h and
 * kernels/cuda/resize.h; which source pixels an output reads is kernels/resize_taps.h. */
#ifndef GM_KERNELS_RESIZE_GEOM_H
#define GM_KERNELS_RESIZE_GEOM_H

#include "common.h"

typedef enum { RESIZE_NEAREST = 0, RESIZE_NEAREST_EXACT = 1, RESIZE_BILINEAR = 2 } resize_mode;

typedef struct {
    int64_t N, C, H, W; /* input */
    int64_t OH, OW;     /* output, >= 1 */
    int mode;           /* resize_mode */
    int align_corners;  /* bilinear only: corners of input and output grids coincide */
    int is_1d;          /* the input was (N, C, L) (H = OH = 1): PyTorch's 1-D nearest kernel picks source indices
                         * by another formula than its 2-D one (resize_taps.h) */
    double scale_h;     /* the caller's scale factor (output / input), used for the source coordinate as PyTorch
                         * does when it is given; <= 0: none, the ratio of sizes is used */
    double scale_w;
} resize2d_geom;

#endif
