/* kernels/loss_ops.h — the reductions and pointwise-loss codes of the losses, and the pointwise losses' math,
 * shared by both backends (kernels/README.md). The kernels are declared in kernels/cpu/loss.h (which states the
 * math) and kernels/cuda/loss.h.
 *
 * Reductions (codes as PyTorch's enum): LOSS_NONE writes one loss per element/position; LOSS_SUM and LOSS_MEAN
 * write one value. */
#ifndef GM_KERNELS_LOSS_OPS_H
#define GM_KERNELS_LOSS_OPS_H

#include <math.h>

#include "common.h"

enum { LOSS_NONE = 0, LOSS_MEAN = 1, LOSS_SUM = 2 };

/* Pointwise losses of x (input) and t (target), elementwise; `param` is smooth_l1's beta, huber's delta,
 * kl_div's log_target (0 or 1), unused otherwise. */
enum { LOSS_MSE = 0, LOSS_L1 = 1, LOSS_SMOOTH_L1 = 2, LOSS_HUBER = 3, LOSS_BCE = 4, LOSS_KL_DIV = 5 };
#define LOSS_POINTWISE_OPS 6

/* The CPU pointwise-loss kernel's status for a binary_cross_entropy input outside [0, 1] (csrc raises PyTorch's
 * RuntimeError); beside common.h's GM_OK / GM_ERR_*. */
#define LOSS_ERR_RANGE 16

/* PyTorch clamps binary_cross_entropy's logs at -100 so that x = 0 or 1 gives a finite loss, and its gradient's
 * denominator x (1 - x) at 1e-12 (aten/src/ATen/native/Loss.cpp), a float constant there: hence 1e-12f, which
 * its float64 gradients at x = 0 or 1 show. */
#define LOSS_BCE_LOG_MIN (-100.0)
#define LOSS_BCE_EPS ((double)1e-12f)

/* The math is written once, in double for every dtype, so both backends compute the same values. */
GM_HD static inline double loss_sign(double d) { return d > 0.0 ? 1.0 : d < 0.0 ? -1.0 : d == 0.0 ? 0.0 : d; }

GM_HD static inline double pointwise_loss_value(int op, double x, double t, double param) {
    const double d = x - t, a = fabs(d);
    switch (op) {
    case LOSS_MSE: return d * d;
    case LOSS_L1: return a;
    case LOSS_SMOOTH_L1: return a < param ? 0.5 * d * d / param : a - 0.5 * param; /* beta = 0: l1 */
    case LOSS_HUBER: return a < param ? 0.5 * d * d : param * (a - 0.5 * param);
    case LOSS_BCE: {
        const double lx = fmax(log(x), LOSS_BCE_LOG_MIN), l1x = fmax(log1p(-x), LOSS_BCE_LOG_MIN);
        return (t - 1.0) * l1x - t * lx;
    }
    default: /* LOSS_KL_DIV: xlogy(t, t) - t x, or with log_target exp(t) (t - x) */
        if (param != 0.0) return exp(t) * (t - x);
        return t > 0.0 ? t * (log(t) - x) : t == 0.0 ? 0.0 * x : NAN;
    }
}

/* d loss / d x and d loss / d t at (x, t), to be scaled by the incoming gradient. */
GM_HD static inline void pointwise_loss_grads(int op, double x, double t, double param, double *gx, double *gt) {
    const double d = x - t, a = fabs(d);
    switch (op) {
    case LOSS_MSE: *gx = 2.0 * d; *gt = -*gx; return;
    case LOSS_L1: *gx = d == d ? loss_sign(d) : 0.0; *gt = -*gx; return; /* sign(0), sign(NaN): 0, as PyTorch */
    case LOSS_SMOOTH_L1: *gx = a < param ? d / param : loss_sign(d); *gt = -*gx; return;
    case LOSS_HUBER: *gx = a < param ? d : param * loss_sign(d); *gt = -*gx; return;
    case LOSS_BCE:
        *gx = (x - t) / fmax((1.0 - x) * x, LOSS_BCE_EPS);
        *gt = fmax(log1p(-x), LOSS_BCE_LOG_MIN) - fmax(log(x), LOSS_BCE_LOG_MIN);
        return;
    default: /* LOSS_KL_DIV. Where t = 0 the target's gradient is 0: PyTorch's (through xlogy) is NaN there,
              * which would poison a whole teacher's gradient for one zero probability */
        if (param != 0.0) {
            *gx = -exp(t);
            *gt = exp(t) * (t - x + 1.0);
        } else {
            *gx = -t;
            *gt = t > 0.0 ? log(t) + 1.0 - x : 0.0;
        }
        return;
    }
}

#endif
