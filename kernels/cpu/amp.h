/* kernels/cpu/amp.h — mixed-precision helpers: the fused unscale + non-finite check of GradScaler. */
#ifndef GM_CPU_AMP_H
#define GM_CPU_AMP_H
#include "../common.h"

/* g[t] *= inv_scale in place over numel[t] contiguous elements of dtype dt[t] (float dtypes), for the ntensors
 * tensors of the list, in one parallel pass that splits their elements evenly among the threads. As PyTorch's
 * _amp_foreach_non_finite_check_and_unscale_: inv_scale is first rounded to float32 (PyTorch keeps it in a float32
 * tensor), float32/float16/bfloat16 values are multiplied in float32 and float64 ones in float64. Sets *found_inf
 * to 1 when any result as stored is inf or nan (an inf or nan input stays one; PyTorch looks at the inputs only,
 * so a float16 result that overflows, possible only when inv_scale > 1, is flagged here and not there), leaving it
 * untouched otherwise. */
int cpu_amp_unscale_forward(void *const *g, const gm_dtype *dt, const int64_t *numel, int ntensors,
                            double inv_scale, int *found_inf, int nthreads);

#endif
