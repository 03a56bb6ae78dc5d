/* kernels/cpu/norm.h — batch normalization on the CPU, forward (training and eval) and backward.
 *
 * Layout: inp/out/dout/dinp are contiguous (N, C, HW) of float dtype dt, with HW = H*W (1 for 2-D (N, C)
 * input); statistics are per channel over the N*HW elements. Per-channel arrays are tiny, so each is read
 * through its own dtype: weight/bias in wdt (may be NULL: 1 and 0), running_mean/running_var in rdt (may be
 * NULL), the saved mean/invstd in sdt (float64 for float64 input, float32 otherwise, as PyTorch keeps them).
 * Sums are taken in double, the variance in two passes (no cancellation for data far from 0).
 *
 * Backward reads the input, the weight and the saved per-channel mean and 1/sqrt(var + eps): never a
 * normalized copy of the input, which would be one more activation-sized tensor kept alive. */
#ifndef GM_KERNELS_CPU_NORM_H
#define GM_KERNELS_CPU_NORM_H

#include "../common.h"

/* out (N, C, HW) = (inp - mean_c) * invstd_c * weight_c + bias_c, writing mean (C) and invstd (C).
 * training: mean/var are the batch's (biased var), and running_mean/var (if given) become
 *   (1 - momentum) * running + momentum * batch, with the unbiased var for running_var (needs N*HW > 1).
 * eval: mean = running_mean, invstd = 1/sqrt(running_var + eps) (both must be given). */
int batchnorm_forward(void *out, void *mean, void *invstd, void *running_mean, void *running_var, const void *inp,
                      const void *weight, const void *bias, int64_t N, int64_t C, int64_t HW, gm_dtype dt,
                      gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum, double eps,
                      int nthreads);

/* dinp (N, C, HW), dweight (C), dbias (C) from dout (N, C, HW); each output may be NULL (not needed).
 * training: the batch statistics depend on inp, so dinp gets the two extra terms; eval: dinp = dout*w*invstd.
 * dweight/dbias are stored in wdt. inp is read only for dweight or in training: in eval without dweight it may
 * be NULL, so that an eval-mode batch norm need not keep its input for backward. */
int batchnorm_backward(void *dinp, void *dweight, void *dbias, const void *dout, const void *inp,
                       const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C, int64_t HW,
                       gm_dtype dt, gm_dtype wdt, gm_dtype sdt, int training, int nthreads);

#endif
