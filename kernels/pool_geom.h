/* kernels/pool_geom.h — the geometry of 2-D pooling, shared by both backends (kernels/README.md). The kernels
 * are declared in kernels/cpu/pool.h and kernels/cuda/pool.h; which input elements a window reads is
 * kernels/pool_window.h. */
#ifndef GM_KERNELS_POOL_GEOM_H
#define GM_KERNELS_POOL_GEOM_H

#include "common.h"

typedef struct {
    int64_t N, C, H, W; /* input */
    int64_t OH, OW;     /* output */
    int64_t kh, kw;     /* kernel */
    int64_t sh, sw;     /* stride */
    int64_t ph, pw;     /* padding (implicit: -inf for max, 0 for average) */
    int64_t dh, dw;     /* dilation (max only; 1 for average) */
} pool2d_geom;

#endif
