/* kernels/cpu/group_norm.h — group normalization on the CPU, forward and backward: the one kernel behind
 * F.group_norm, F.instance_norm (one group per channel) and F.layer_norm (an (R, M) array: R rows, one group,
 * M "channels" of one element each), so that all three share one tested implementation.
 *
 * Layout: inp/out/dout/dinp are contiguous (N, C, HW) of float dtype dt; the C channels form G groups of
 * D = C/G consecutive channels, so group (n, g) is the contiguous run of D*HW elements at (n*G + g) * D*HW.
 * Statistics are per (n, g): mean and rstd = 1/sqrt(biased var + eps), (N, G) arrays in sdt (float64 for
 * float64 data, float32 otherwise, as PyTorch keeps them). weight and bias are per channel (C), in wdt, and may
 * be NULL (1 and 0). Sums are taken in double, the variance in two passes (no cancellation far from 0).
 *
 * Backward reads the input, the weight and the saved mean/rstd: never a normalized copy of the input, which
 * would be one more activation-sized tensor kept alive. */
#ifndef GM_KERNELS_CPU_GROUP_NORM_H
#define GM_KERNELS_CPU_GROUP_NORM_H

#include "../common.h"

/* out (N, C, HW) = (inp - mean_ng) * rstd_ng * weight_c + bias_c; writes mean and rstd (N, G). */
int groupnorm_forward(void *out, void *mean, void *rstd, const void *inp, const void *weight, const void *bias,
                      int64_t N, int64_t C, int64_t HW, int64_t G, gm_dtype dt, gm_dtype wdt, gm_dtype sdt,
                      double eps, int nthreads);

/* dinp (N, C, HW), dweight (C), dbias (C) from dout (N, C, HW); each output may be NULL (not needed). With
 * xhat = (x - mean) * rstd and wg = weight_c * dout, per group:
 *   dinp = rstd * (wg - mean(wg) - xhat * mean(wg * xhat)),
 * and per channel dweight = sum(dout * xhat), dbias = sum(dout) over n and hw, stored in wdt. dinp may be dout
 * itself (written over the gradient): dweight/dbias are summed first, and each group reads its dout before it
 * writes it. */
int groupnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp, const void *weight,
                       const void *mean, const void *rstd, int64_t N, int64_t C, int64_t HW, int64_t G, gm_dtype dt,
                       gm_dtype wdt, gm_dtype sdt, int nthreads);

#endif
