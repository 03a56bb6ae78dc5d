/* kernels/cuda/ctc.h — CUDA entry points of kernels/cpu/ctc.h (same arguments and results, with `int nthreads`
 * replaced by the device context; pointers are device pointers; see kernels/cuda/README.md). The lengths and
 * labels live on the device, where the host cannot check them: a sample whose lengths or labels are out of range
 * gets a NaN loss (and gradient) instead of a read out of bounds (the caller has checked them in Python). */
#ifndef GM_KERNELS_CUDA_CTC_H
#define GM_KERNELS_CUDA_CTC_H

#include "../common.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_ctc_loss_forward(void *nll, void *log_alpha, const void *log_probs, const int64_t *targets,
                          const int64_t *in_lens, const int64_t *tg_lens, int64_t T, int64_t N, int64_t C, int64_t L,
                          int64_t blank, gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_ctc_loss_backward(void *grad, const void *gout, const void *log_probs, const int64_t *targets,
                           const int64_t *in_lens, const int64_t *tg_lens, const void *log_alpha, const void *nll,
                           int64_t T, int64_t N, int64_t C, int64_t L, int64_t blank, int zero_infinity,
                           double *scratch, gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
