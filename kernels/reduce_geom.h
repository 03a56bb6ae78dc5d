/* kernels/reduce_geom.h — what describes a strided reduction (sum, mean, prod, amax, amin, max/min with index,
 * argmax/argmin, var), shared by both backends (kernels/README.md). The kernels are declared in
 * kernels/cpu/reduce.h and kernels/cuda/reduce.h; the checks, simplification and stores both run are
 * kernels/reduce_common.h.
 *
 * A reduction is described by two sets of input dims: the kept dims (they index the output, which is contiguous
 * and laid out row-major over the kept dims in their order) and the reduced dims. Each set lists shapes and the
 * input's byte strides; either may be empty. Indices returned by the arg reductions are row-major linear
 * positions within the reduced dims, in the order given (for one dim: the index along it). */
#ifndef GM_KERNELS_REDUCE_GEOM_H
#define GM_KERNELS_REDUCE_GEOM_H

#include "common.h"

typedef enum { REDUCE_SUM = 0, REDUCE_MEAN = 1, REDUCE_AMAX = 2, REDUCE_AMIN = 3, REDUCE_PROD = 4 } reduce_op;

typedef struct {
    int nkept;
    int64_t kept_shape[GM_MAX_DIMS];
    int64_t kept_strides[GM_MAX_DIMS]; /* bytes */
    int nred;
    int64_t red_shape[GM_MAX_DIMS];
    int64_t red_strides[GM_MAX_DIMS]; /* bytes */
} reduce_geom;

#endif
