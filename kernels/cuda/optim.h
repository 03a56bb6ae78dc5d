/* kernels/cuda/optim.h — fused, in-place, multi-tensor SGD, Adam/AdamW, RMSprop, Adagrad and Adadelta steps on
 * CUDA. Same arguments and results as the CPU steps (kernels/optim_hparams.h defines the hyper-parameter structs,
 * kernels/cpu/optim.h states the update formulas), with `int nthreads` replaced by the context: the arrays (param,
 * grad, state pointers, numel, dt, step, buf_fresh) are host arrays, the pointers in them device pointers.
 * Nothing is allocated: the pointer tables travel in the kernels' parameters. */
#ifndef GM_KERNELS_CUDA_OPTIM_H
#define GM_KERNELS_CUDA_OPTIM_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../optim_hparams.h"
#include "cuda_ctx.h"

int cuda_sgd_step(void *const *param, const void *const *grad, void *const *momentum_buf, const uint8_t *buf_fresh,
                  const int64_t *numel, const gm_dtype *dt, int ntensors, const sgd_hparams *h, gm_cuda_ctx *ctx);

int cuda_adam_step(void *const *param, const void *const *grad, void *const *exp_avg, void *const *exp_avg_sq,
                   void *const *max_exp_avg_sq, const int64_t *step, const int64_t *numel, const gm_dtype *dt,
                   int ntensors, const adam_hparams *h, gm_cuda_ctx *ctx);

int cuda_rmsprop_step(void *const *param, const void *const *grad, void *const *square_avg,
                      void *const *momentum_buf, void *const *grad_avg, const int64_t *numel, const gm_dtype *dt,
                      int ntensors, const rmsprop_hparams *h, gm_cuda_ctx *ctx);

int cuda_adagrad_step(void *const *param, const void *const *grad, void *const *sum, const int64_t *step,
                      const int64_t *numel, const gm_dtype *dt, int ntensors, const adagrad_hparams *h,
                      gm_cuda_ctx *ctx);

int cuda_adadelta_step(void *const *param, const void *const *grad, void *const *square_avg, void *const *acc_delta,
                       const int64_t *numel, const gm_dtype *dt, int ntensors, const adadelta_hparams *h,
                       gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
