/* kernels/cuda/loss.h — CUDA entry points of kernels/cpu/loss.h (see kernels/cuda/README.md for the contract:
 * device pointers, `int nthreads` replaced by the device context).
 *
 * Where the CPU kernel returns a number to the host (the class losses' *wsum) or csrc reads the targets on the
 * host (loss_first_bad_target), the CUDA entry points need device scratch for cross-block partial sums and a
 * device -> host copy. Hence two differences from the CPU signatures:
 *  - `scratch`: CUDA_LOSS_SCRATCH_BYTES of device memory from the caller (csrc allocates it as workspace and
 *    frees it after the call); the reductions write one partial per block there and a last one-block kernel
 *    sums the partials in a fixed order, so every result is deterministic run to run;
 *  - `bad` (host, 2 values): the first target outside [0, C) other than ignore_index, as the position (-1 when
 *    all are valid) and the value, so that csrc raises the CPU's IndexError. The class-loss forwards and
 *    cuda_loss_first_bad_target wait for the stream (one synchronisation per call, which *wsum needs anyway),
 *    except where csrc knows the targets from the host's view of them as they went up (targets_known in
 *    ops_loss.c): then the forwards take neither and return once queued, and the backward checks nothing.
 * A bad target never makes a kernel read out of bounds: it counts as ignored (and the caller raises). */
#ifndef GM_KERNELS_CUDA_LOSS_H
#define GM_KERNELS_CUDA_LOSS_H

#include "../common.h"
#include "../loss_ops.h"
#include "cuda_ctx.h"

/* CUDA_LOSS_PARTS (cross-block partials per reduction) and CUDA_LOSS_SCRATCH_BYTES: scratch_sizes.h. */
#include "scratch_sizes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Synchronous: bad[0] = position of the first bad target or -1, bad[1] = its value. */
int cuda_loss_first_bad_target(int64_t bad[2], const int64_t *target, int64_t n, int64_t C, int64_t ignore_index,
                               void *scratch, gm_cuda_ctx *ctx);

/* Synchronous: *wsum and bad[2] are host values, read back after the stream drained. With wsum and bad both NULL
 * (the caller knows the targets valid and their weight sum: csrc's targets_known) it reads nothing back and
 * returns once queued. */
int cuda_cross_entropy_forward(void *loss, void *lse, double *wsum, const void *inp, const int64_t *target,
                               const double *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore_index,
                               int reduction, double smoothing, gm_dtype dt, gm_dtype sdt, void *scratch,
                               int64_t bad[2], gm_cuda_ctx *ctx);
int cuda_cross_entropy_backward(void *dinp, const void *dout, const void *inp, const int64_t *target,
                                const double *weight, const void *lse, int64_t N, int64_t C, int64_t inner,
                                int64_t ignore_index, int reduction, double smoothing, double wsum, gm_dtype dt,
                                gm_dtype sdt, gm_cuda_ctx *ctx);

/* Synchronous, as cuda_cross_entropy_forward (asynchronous too without wsum and bad). */
int cuda_nll_loss_forward(void *loss, double *wsum, const void *inp, const int64_t *target, const double *weight,
                          int64_t N, int64_t C, int64_t inner, int64_t ignore_index, int reduction, gm_dtype dt,
                          void *scratch, int64_t bad[2], gm_cuda_ctx *ctx);
int cuda_nll_loss_backward(void *dinp, const void *dout, const int64_t *target, const double *weight, int64_t N,
                           int64_t C, int64_t inner, int64_t ignore_index, int reduction, double wsum, gm_dtype dt,
                           gm_cuda_ctx *ctx);

/* Asynchronous; scratch is needed for LOSS_MEAN / LOSS_SUM only (may be NULL for LOSS_NONE). */
/* binary_cross_entropy does not check that x is in [0, 1] here (the CPU kernel does): out-of-range inputs give
 * NaN, where PyTorch's CUDA kernel raises a device-side assert. */
int cuda_pointwise_loss_forward(void *loss, const void *x, const void *t, int64_t n, int op, double param,
                                int reduction, gm_dtype dt, void *scratch, gm_cuda_ctx *ctx);
int cuda_pointwise_loss_backward(void *dx, void *dt_, const void *dout, const void *x, const void *t, int64_t n,
                                 int op, double param, int reduction, gm_dtype dt, gm_cuda_ctx *ctx);

/* Asynchronous; scratch as for cuda_pointwise_loss_forward. */
int cuda_bce_logits_forward(void *loss, const void *x, const void *t, const void *w, int64_t w_period,
                            const void *pw, int64_t pw_period, int64_t n, int reduction, gm_dtype dt, void *scratch,
                            gm_cuda_ctx *ctx);
int cuda_bce_logits_backward(void *dx, void *dtarget, const void *dout, const void *x, const void *t, const void *w,
                             int64_t w_period, const void *pw, int64_t pw_period, int64_t n, int reduction,
                             gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
