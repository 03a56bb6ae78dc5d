/* kernels/loss_ops.h — the reductions and pointwise-loss codes of the losses, shared by both backends
 * (kernels/README.md). The kernels are declared in kernels/cpu/loss.h (which states the math) and
 * kernels/cuda/loss.h.
 *
 * Reductions (codes as PyTorch's enum): LOSS_NONE writes one loss per element/position; LOSS_SUM and LOSS_MEAN
 * write one value. */
#ifndef GM_KERNELS_LOSS_OPS_H
#define GM_KERNELS_LOSS_OPS_H

enum { LOSS_NONE = 0, LOSS_MEAN = 1, LOSS_SUM = 2 };
enum { LOSS_MSE = 0, LOSS_L1 = 1 };

#endif
