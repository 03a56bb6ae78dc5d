/* kernels/cpu/optim.h — fused, in-place, multi-tensor optimizer steps on the CPU: SGD (momentum, dampening,
 * Nesterov, weight decay, maximize) and Adam / AdamW (bias corrections, L2 or decoupled weight decay, AMSGrad,
 * maximize), with PyTorch's update formulas (torch/optim/sgd.py, adam.py: the single-tensor reference).
 *
 * One call updates a whole parameter group: parallel arrays of pointers, one entry per tensor, each tensor
 * contiguous with numel[i] elements of dtype dt[i]; every state tensor has its parameter's dtype and numel.
 * Everything is updated in place and nothing is allocated: this is what keeps Adam's step at zero extra bytes,
 * where PyTorch's unfused step allocates a weight-decay copy of the gradient and `exp_avg_sq.sqrt()`
 * temporaries the size of the largest parameter (seed 000's 2.18 GiB).
 *
 * float32, float16 and bfloat16 compute in float (PyTorch's opmath type), float64 in double. Returns GM_OK,
 * GM_ERR_ARG (a NULL pointer, a negative count) or GM_ERR_UNSUPPORTED (a non-floating dtype). */
#ifndef GM_KERNELS_CPU_OPTIM_H
#define GM_KERNELS_CPU_OPTIM_H

#include "../optim_hparams.h" /* sgd_hparams, adam_hparams */

/* param[i] -= lr * d_p with d_p PyTorch's SGD direction. momentum_buf is NULL when h->momentum == 0;
 * buf_fresh[i] != 0 starts buffer i as the (decayed) gradient, as PyTorch does on a parameter's first step
 * (buf_fresh may be NULL: no buffer is fresh). */
int sgd_step(void *const *param, const void *const *grad, void *const *momentum_buf, const uint8_t *buf_fresh,
             const int64_t *numel, const gm_dtype *dt, int ntensors, const sgd_hparams *h, int nthreads);

/* One Adam step; step[i] >= 1 is tensor i's step count after this update (it sets the bias corrections).
 * max_exp_avg_sq is used (and must be non-NULL) only when h->amsgrad. */
int adam_step(void *const *param, const void *const *grad, void *const *exp_avg, void *const *exp_avg_sq,
              void *const *max_exp_avg_sq, const int64_t *step, const int64_t *numel, const gm_dtype *dt,
              int ntensors, const adam_hparams *h, int nthreads);

/* One Adam step of an fp32 master whose model copy has another dtype (optimizer offload: float16/bfloat16 on the
 * device, fp32 master and state on the host). gp is (numel,) of dtype dt (float16, bfloat16 or float32): on entry
 * the gradient, on return the updated parameter rounded to dt, written over it element by element; master,
 * exp_avg, exp_avg_sq (and max_exp_avg_sq with h->amsgrad) are fp32 (numel,). One pass reads the low-precision
 * gradient and writes the low-precision parameter, with no widened copy of either; the master and state are
 * bit for bit those of adam_step on the widened gradient. step >= 1 is the step count after this update. */
int adam_step_mixed(void *gp, float *master, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq, int64_t step,
                    int64_t numel, gm_dtype dt, const adam_hparams *h, int nthreads);

/* RMSprop: square_avg = alpha*square_avg + (1-alpha)*g^2; centered: grad_avg = lerp(grad_avg, g, 1-alpha) and
 * avg = sqrt(square_avg - grad_avg^2) + eps, else sqrt(square_avg) + eps; momentum > 0:
 * buf = momentum*buf + g/avg, param -= lr*buf; else param -= lr*g/avg. momentum_buf is used (non-NULL) only when
 * h->momentum > 0, grad_avg only when h->centered. */
int rmsprop_step(void *const *param, const void *const *grad, void *const *square_avg, void *const *momentum_buf,
                 void *const *grad_avg, const int64_t *numel, const gm_dtype *dt, int ntensors,
                 const rmsprop_hparams *h, int nthreads);

/* Adagrad: sum += g^2, param -= clr * g / (sqrt(sum) + eps) with clr = lr / (1 + (step[i]-1)*lr_decay);
 * step[i] >= 1 is tensor i's step count after this update. */
int adagrad_step(void *const *param, const void *const *grad, void *const *sum, const int64_t *step,
                 const int64_t *numel, const gm_dtype *dt, int ntensors, const adagrad_hparams *h, int nthreads);

/* Adadelta: square_avg = rho*square_avg + (1-rho)*g^2; delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g;
 * acc_delta = rho*acc_delta + (1-rho)*delta^2; param -= lr*delta. */
int adadelta_step(void *const *param, const void *const *grad, void *const *square_avg, void *const *acc_delta,
                  const int64_t *numel, const gm_dtype *dt, int ntensors, const adadelta_hparams *h, int nthreads);

#endif
