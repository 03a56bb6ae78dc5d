/* kernels/cpu/ctc.h — connectionist temporal classification (F.ctc_loss) on the CPU: the forward (alpha) and
 * backward (beta) recursions of Graves et al. in log space, one sample per thread.
 *
 * Layouts: log_probs (T, N, C) contiguous, log-softmax outputs; targets (N, L) int64, sample n's labels in the
 * first tg_lens[n] entries of its row; in_lens, tg_lens (N) int64. The extended sequence of sample n has
 * S = 2 * tg_lens[n] + 1 states (a blank before, between and after the labels); log_alpha (N, T, 2L + 1) holds
 * log alpha_t(s) for t < in_lens[n], s < S (the rest is not written). Arithmetic in double; log_alpha, nll and
 * the gradient are stored in dt (float32 or float64, as the input: PyTorch keeps its log_alpha in the input's
 * dtype too). An impossible alignment (a target longer than its input allows) has nll = inf. */
#ifndef GM_KERNELS_CPU_CTC_H
#define GM_KERNELS_CPU_CTC_H

#include "../common.h"

/* nll (N) = -log p(target | log_probs) per sample, and log_alpha for the backward. GM_ERR_ARG on a length or
 * label out of range. */
int ctc_loss_forward(void *nll, void *log_alpha, const void *log_probs, const int64_t *targets,
                     const int64_t *in_lens, const int64_t *tg_lens, int64_t T, int64_t N, int64_t C, int64_t L,
                     int64_t blank, gm_dtype dt, int nthreads);

/* grad (T, N, C) = gout[n] * (exp(log_probs) - posterior) for t < in_lens[n], 0 after: PyTorch's closed form,
 * the gradient with respect to the scores before a log_softmax written as one with respect to its output. A
 * sample with nll = inf gets NaN there (0 with zero_infinity). scratch: N * (2 * (2L + 1) + C) doubles. */
int ctc_loss_backward(void *grad, const void *gout, const void *log_probs, const int64_t *targets,
                      const int64_t *in_lens, const int64_t *tg_lens, const void *log_alpha, const void *nll,
                      int64_t T, int64_t N, int64_t C, int64_t L, int64_t blank, int zero_infinity, double *scratch,
                      gm_dtype dt, int nthreads);

#endif
