/* kernels/cpu/reduce.h — strided reductions on the CPU: sum, mean, prod, amax, amin, max/min with index,
 * argmax/argmin, var. Pure compute over raw pointers with byte strides; nothing is allocated or copied.
 *
 * A reduction is described by two sets of input dims: the kept dims (they index the output, which is
 * contiguous and laid out row-major over the kept dims in their order) and the reduced dims. Each set lists
 * shapes and the input's byte strides; either may be empty. Indices returned by the arg reductions are
 * row-major linear positions within the reduced dims, in the order given (for one dim: the index along it). */
#ifndef GM_KERNELS_CPU_REDUCE_H
#define GM_KERNELS_CPU_REDUCE_H

#include "../reduce_geom.h"

/* out (kept...) of out_dt = op over the reduced dims of inp.
 * SUM/MEAN/PROD accumulate in double when inp or out is floating point, else in int64 (wrapping);
 * MEAN of an empty extent is NaN, SUM 0, PROD 1. AMAX/AMIN need out_dt == inp_dt and a non-empty
 * extent; NaN propagates. */
int cpu_reduce_forward(void *out, gm_dtype out_dt, const void *inp, gm_dtype inp_dt, const reduce_geom *g,
                       int op, int nthreads);

/* values (kept...) of dt (may be NULL) and indices (kept...) = the extreme over the reduced dims and the
 * first linear index where it occurs; NaN counts as the extreme (the first NaN wins), as in PyTorch.
 * The reduced extent must not be empty (GM_ERR_ARG). */
int cpu_reduce_arg_forward(void *values, int64_t *indices, const void *inp, gm_dtype dt, const reduce_geom *g,
                           int is_max, int nthreads);

/* out (kept...) of dt = sum((x - mean)^2) / max(0, n - correction), two passes in double. dt is floating. */
int cpu_reduce_var_forward(void *out, const void *inp, gm_dtype dt, const reduce_geom *g, double correction,
                           int nthreads);

#endif
