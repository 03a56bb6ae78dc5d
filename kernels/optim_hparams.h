/* kernels/optim_hparams.h — the hyper-parameters of the fused optimizer steps (SGD, Adam / AdamW, RMSprop, Adagrad,
 * Adadelta), shared by both backends (kernels/README.md). The steps are declared in kernels/cpu/optim.h and
 * kernels/cuda/optim.h; their formulas are PyTorch's (torch/optim/sgd.py, adam.py, rmsprop.py, adagrad.py,
 * adadelta.py: the single-tensor reference). */
#ifndef GM_KERNELS_OPTIM_HPARAMS_H
#define GM_KERNELS_OPTIM_HPARAMS_H

#include "common.h"

typedef struct {
    double lr, momentum, dampening, weight_decay;
    int nesterov, maximize;
} sgd_hparams;

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    int decoupled; /* AdamW: param *= 1 - lr*weight_decay instead of grad += weight_decay*param */
    int amsgrad, maximize;
} adam_hparams;

typedef struct {
    double lr, alpha, eps, weight_decay, momentum;
    int centered, maximize;
} rmsprop_hparams;

typedef struct {
    double lr, lr_decay, weight_decay, eps;
    int maximize;
} adagrad_hparams;

typedef struct {
    double lr, rho, eps, weight_decay;
    int maximize;
} adadelta_hparams;

#endif
