/* kernels/ctc.h — the CTC loss's recursions (kernels/cpu/ctc.h and kernels/cuda/ctc.h declare the kernels;
 * python/gpumemnet/nn/_functional_ctc.py runs them): the extended label sequence and the log-space sum, shared
 * by both backends so that they compute alike.
 *
 * Sample n's extended sequence has S = 2 * tg_lens[n] + 1 states: a blank before, between and after its labels.
 * A path moves from state s to s, s + 1, or s + 2 when that skips a blank between two different labels. */
#ifndef GM_KERNELS_CTC_H
#define GM_KERNELS_CTC_H

#include <math.h>

#include "common.h"

/* The sums below run in float for float32 and narrower inputs (`single`), as PyTorch's do, at half the cost of
 * double's transcendentals; in double for float64. */

/* log(exp(a) + exp(b)), -inf when both are. */
GM_HD static inline double ctc_log_add(double a, double b, int single) {
    const double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == -INFINITY) return hi;
    return hi + (single ? (double)log1pf(expf((float)(lo - hi))) : log1p(exp(lo - hi)));
}

/* log(exp(a) + exp(b) + exp(c)), -inf when all are: one step of either recursion. */
GM_HD static inline double ctc_log_add3(double a, double b, double c, int single) {
    double m = a > b ? a : b;
    m = m > c ? m : c;
    if (m == -INFINITY) return m;
    if (single) return m + (double)logf(expf((float)(a - m)) + expf((float)(b - m)) + expf((float)(c - m)));
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

/* Label of state s: the blank on even states, the target's labels tg[0..] on odd ones. */
GM_HD static inline int64_t ctc_label(const int64_t *tg, int64_t s, int64_t blank) {
    return s & 1 ? tg[s >> 1] : blank;
}

/* Whether state s may be reached from s - 2 (skipping the blank between two different labels). */
GM_HD static inline int ctc_can_skip(const int64_t *tg, int64_t s) {
    return s >= 2 && (s & 1) && tg[s >> 1] != tg[(s >> 1) - 1];
}

#endif
