/* kernels/cpu/amp.h — mixed-precision helpers: the fused unscale + non-finite check of GradScaler. */
#ifndef GM_CPU_AMP_H
#define GM_CPU_AMP_H
#include "../common.h"

/* g *= inv_scale in place over n contiguous elements of dtype dt (a float dtype); returns 1 in *found_inf when
 * any element is inf or nan (before or after scaling), leaving *found_inf untouched otherwise. */
int cpu_amp_unscale_forward(void *g, gm_dtype dt, int64_t n, double inv_scale, int *found_inf, int nthreads);

#endif
