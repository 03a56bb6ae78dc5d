/* kernels/cpu/norm_channel.h — the per-channel bookkeeping that every batch-norm forward shares (norm.c's
 * generic loop, norm_f32.c, nn_bf16.c): they differ only in how they read a channel's values. */
#ifndef GM_KERNELS_CPU_NORM_CHANNEL_H
#define GM_KERNELS_CPU_NORM_CHANNEL_H

#include <math.h>

#include "nn_dtype.h"

/* Channel c's affine out = x * (*a) + (*b). Training: mu and ss are the channel's mean and sum of squared
 * deviations over cnt values, and the running statistics move by momentum (the variance unbiased, as PyTorch).
 * Eval: the running statistics are the statistics (mu and ss unused). Either way the mean and inverse standard
 * deviation saved for backward are stored. */
static inline void bn_channel_affine(int64_t c, int training, double mu, double ss, int64_t cnt, void *mean,
                                     void *invstd, void *running_mean, void *running_var, const void *weight,
                                     const void *bias, gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, double momentum,
                                     double eps, double *a, double *b) {
    double is;
    if (training) {
        is = 1.0 / sqrt(ss / (double)cnt + eps);
        if (running_mean)
            nn_st(running_mean, c, rdt, (1.0 - momentum) * nn_ld(running_mean, c, rdt) + momentum * mu);
        if (running_var && cnt > 1) {
            const double unbiased = ss / (double)(cnt - 1);
            nn_st(running_var, c, rdt, (1.0 - momentum) * nn_ld(running_var, c, rdt) + momentum * unbiased);
        }
    } else {
        mu = nn_ld(running_mean, c, rdt);
        is = 1.0 / sqrt(nn_ld(running_var, c, rdt) + eps);
    }
    nn_st(mean, c, sdt, mu);
    nn_st(invstd, c, sdt, is);
    *a = (weight ? nn_ld(weight, c, wdt) : 1.0) * is;
    *b = (bias ? nn_ld(bias, c, wdt) : 0.0) - mu * *a;
}

#endif
