/* kernels/cpu/loss.h — losses on the CPU: cross_entropy (fused log-softmax + NLL, with class weights,
 * ignore_index and label smoothing), nll_loss, mse_loss, l1_loss, binary_cross_entropy_with_logits; forward
 * and backward. Pure compute on contiguous arrays of float dtype dt; targets of the class losses are int64.
 *
 * Reductions (codes as PyTorch's enum): LOSS_NONE writes one loss per element/position; LOSS_SUM and LOSS_MEAN
 * write one value (loss[0]). The class losses' mean divides by the sum of the weights of the non-ignored
 * targets (the count when there are no weights), returned as *wsum for backward; the pointwise losses' mean
 * divides by the element count. In backward, dout is the forward output's gradient: n values for LOSS_NONE,
 * one otherwise.
 *
 * Class losses take input (N, C, inner): class dim C with stride inner (inner = 1 for (N, C), H*W for
 * segmentation logits (N, C, H, W)); target and per-position outputs are (N, inner). weight (C) is given in
 * double (NULL: all 1), since the caller has it in any dtype and it is tiny. */
#ifndef GM_KERNELS_CPU_LOSS_H
#define GM_KERNELS_CPU_LOSS_H

#include "../common.h"
#include "../loss_ops.h" /* LOSS_NONE / MEAN / SUM, the pointwise ops and their math */

/* Position of the first target outside [0, C) other than ignore_index, or -1 when all are valid. */
int64_t loss_first_bad_target(const int64_t *target, int64_t n, int64_t C, int64_t ignore_index);

/* loss = cross_entropy(inp, target) with, per non-ignored position i of target t (eps = smoothing):
 *   lse_i = log sum_c exp(x_ci),  loss_i = (1 - eps) * w_t * (lse_i - x_ti) + eps/C * sum_c w_c * (lse_i - x_ci)
 * and loss_i = 0 where t == ignore_index. lse (N, inner) in sdt is written for backward: with it, backward
 * recomputes the probabilities from the logits, so no probability-sized tensor is kept beside them. */
int cross_entropy_forward(void *loss, void *lse, double *wsum, const void *inp, const int64_t *target,
                          const double *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore_index,
                          int reduction, double smoothing, gm_dtype dt, gm_dtype sdt, int nthreads);

/* dinp (N, C, inner) = d loss / d inp, from the logits inp and the forward's lse:
 *   s_i * (p_ci * ((1 - eps) w_t + eps/C sum_k w_k) - (1 - eps) w_t [c == t] - eps/C w_c),  p = exp(x - lse)
 * with s_i = dout_i (none), dout (sum) or dout / wsum (mean); 0 on ignored positions. */
int cross_entropy_backward(void *dinp, const void *dout, const void *inp, const int64_t *target,
                           const double *weight, const void *lse, int64_t N, int64_t C, int64_t inner,
                           int64_t ignore_index, int reduction, double smoothing, double wsum, gm_dtype dt,
                           gm_dtype sdt, int nthreads);

/* loss = nll_loss(inp, target): loss_i = -w_t * x_ti (0 where ignored); inp holds log-probabilities. */
int nll_loss_forward(void *loss, double *wsum, const void *inp, const int64_t *target, const double *weight,
                     int64_t N, int64_t C, int64_t inner, int64_t ignore_index, int reduction, gm_dtype dt,
                     int nthreads);

/* dinp (N, C, inner) = -s_i * w_t at (n, t, j), 0 elsewhere. */
int nll_loss_backward(void *dinp, const void *dout, const int64_t *target, const double *weight, int64_t N,
                      int64_t C, int64_t inner, int64_t ignore_index, int reduction, double wsum, gm_dtype dt,
                      int nthreads);

/* loss_i = pointwise_loss_value(op, x_i, t_i, param) (kernels/loss_ops.h: mse, l1, smooth_l1, huber,
 * binary_cross_entropy, kl_div), x and t (n). LOSS_BCE returns LOSS_ERR_RANGE if an x is outside [0, 1]. */
int pointwise_loss_forward(void *loss, const void *x, const void *t, int64_t n, int op, double param, int reduction,
                           gm_dtype dt, int nthreads);

/* dx (n) and dt_ (n), either may be NULL: pointwise_loss_grads(...) times the incoming gradient. */
int pointwise_loss_backward(void *dx, void *dt_, const void *dout, const void *x, const void *t, int64_t n,
                            int op, double param, int reduction, gm_dtype dt, int nthreads);

/* binary_cross_entropy_with_logits, in the stable form (no overflow, no cancellation)
 *   loss_i = w * (pw t softplus(-x) + (1 - t) softplus(x)),  softplus(x) = log1p(exp(-|x|)) + max(x, 0)
 * which is PyTorch's (1 - t) x + (1 + (pw - 1) t) softplus(-x) rearranged.
 * x, t (n). w and pw (dtype dt) may be NULL (1); element i reads w[i % w_period] and pw[i % pw_period]: the
 * caller lays a broadcast weight out over the trailing dims it spans, so (C,) on (N, C) costs C values. */
int bce_logits_forward(void *loss, const void *x, const void *t, const void *w, int64_t w_period, const void *pw,
                       int64_t pw_period, int64_t n, int reduction, gm_dtype dt, int nthreads);

/* dx = s w ((1 - t) - (1 + (pw - 1) t) sigmoid(-x)), dtarget = s w (pw softplus(-x) - softplus(x)); either
 * may be NULL. */
int bce_logits_backward(void *dx, void *dtarget, const void *dout, const void *x, const void *t, const void *w,
                        int64_t w_period, const void *pw, int64_t pw_period, int64_t n, int reduction, gm_dtype dt,
                        int nthreads);

#endif
