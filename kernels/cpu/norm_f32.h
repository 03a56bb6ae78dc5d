/* kernels/cpu/norm_f32.h — float32 batch norm on AVX-512 in double lanes: batchnorm_forward / batchnorm_backward
 * (norm.h) with dt = float32, computing what norm.c's generic loop computes (double arithmetic, each result
 * rounded once to float32, the same operations in the same order per element: no fused multiply-add), eight
 * elements per instruction instead of one or two. Only the order of the per-channel sums differs (eight partial
 * sums per run), which moves the statistics by a few units in the last place of a double.
 *
 * Measured on one (16, 16, 64, 64) batch norm, 2 threads: forward 5.0 -> ~0.5 ms, backward 9.4 -> ~0.6 ms (the
 * generic loop widens and converts one element at a time at the build's SSE2 baseline). Returns
 * GM_ERR_UNSUPPORTED without AVX-512 or with GPUMEMNET_NN_BF16=portable (nn_bf16.h), and norm.c then runs its
 * generic loop. Pure functions, nothing allocated. */
#ifndef GM_KERNELS_CPU_NORM_F32_H
#define GM_KERNELS_CPU_NORM_F32_H

#include "../common.h"

int batchnorm_forward_f32(float *out, void *mean, void *invstd, void *running_mean, void *running_var,
                          const float *inp, const void *weight, const void *bias, int64_t N, int64_t C, int64_t HW,
                          gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum, double eps,
                          int nthreads);
int batchnorm_backward_f32(float *dinp, void *dweight, void *dbias, const float *dout, const float *inp,
                           const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C, int64_t HW,
                           gm_dtype wdt, gm_dtype sdt, int training, int nthreads);

#endif
