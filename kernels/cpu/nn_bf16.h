/* kernels/cpu/nn_bf16.h — bfloat16 fast paths of the nn kernels (activation.c, norm.c) on AVX-512: they read
 * and write bfloat16 directly, widen to float32 in registers and narrow once on store, so an autocast step costs
 * no float32 copies between ops and no scalar conversions.
 *
 * Why a separate file: the build targets x86-64's baseline (SSE2), where the generic bfloat16 loops of
 * nn_dtype.h (widen to double, narrow one element at a time) ran 2-3.5x slower than the same ops in float32
 * (measured in the UNet's autocast step: relu forward + backward 31 ms against 9 ms in float32, batch norm 59 ms
 * against 34 ms). These functions are compiled for AVX-512 with a target attribute and chosen at run time.
 *
 * Each entry point returns GM_ERR_UNSUPPORTED when it has no fast path (no AVX-512 on this CPU, or an op it does
 * not cover); the caller then runs its generic loop, so results never depend on whether a fast path exists
 * beyond the rounding noted at each function. Pure functions: nothing allocated, no Python. */
#ifndef GM_KERNELS_CPU_NN_BF16_H
#define GM_KERNELS_CPU_NN_BF16_H

#include "../common.h"

/* 1 where the CPU runs the AVX-512 paths (avx512f, bw, vl) and GPUMEMNET_NN_BF16 is not "portable" (which keeps
 * the generic loops, for comparing the two in tests). */
int nn_bf16_fast(void);

/* activation_forward / activation_backward (activation.h) on bfloat16 arrays. relu and hardtanh (relu6) work
 * on the bfloat16 values themselves and give the generic loop's results bit for bit; every other op runs the
 * float32 kernel on L1-sized tiles widened from and narrowed back to bfloat16, which rounds exactly as the
 * generic bfloat16 loop does (float32 result, then round to nearest even). */
int activation_forward_bf16(uint16_t *out, const uint16_t *inp, int64_t n, int op, double alpha, double beta,
                            int nthreads);
int activation_backward_bf16(uint16_t *dinp, const uint16_t *dout, const uint16_t *saved, int64_t n, int op,
                             double alpha, double beta, int nthreads);

/* batchnorm_forward / batchnorm_backward (norm.h) with dt = bfloat16: statistics are summed in float32 lanes
 * per run of HW elements and in double across runs (PyTorch's CPU kernel sums bfloat16 in float32 throughout);
 * the normalisation is a float32 multiply-add rounded once to bfloat16. */
int batchnorm_forward_bf16(uint16_t *out, void *mean, void *invstd, void *running_mean, void *running_var,
                           const uint16_t *inp, const void *weight, const void *bias, int64_t N, int64_t C,
                           int64_t HW, gm_dtype wdt, gm_dtype rdt, gm_dtype sdt, int training, double momentum,
                           double eps, int nthreads);
int batchnorm_backward_bf16(uint16_t *dinp, void *dweight, void *dbias, const uint16_t *dout, const uint16_t *inp,
                            const void *weight, const void *mean, const void *invstd, int64_t N, int64_t C,
                            int64_t HW, gm_dtype wdt, gm_dtype sdt, int training, int nthreads);

#endif
