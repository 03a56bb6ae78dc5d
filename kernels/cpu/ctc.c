/* kernels/cpu/ctc.c — CTC loss forward and backward (see ctc.h).
 *
 * One sample per loop iteration (the recursion runs along time within a sample, so samples are the parallel
 * unit); each writes only its own rows, so the result does not depend on the thread count. */
#include "ctc.h"
#include "../ctc.h"
#include "nn_dtype.h"

/* Inside NN_DISPATCH: whether the sums run in float (ctc.h); DT and GM_F64 are constants of different enums. */
#define SINGLE ((int)DT != (int)GM_F64)

static int check_args(const int64_t *targets, const int64_t *in_lens, const int64_t *tg_lens, int64_t T, int64_t N,
                      int64_t C, int64_t L, int64_t blank, gm_dtype dt) {
    if (!gm_dtype_is_float(dt) || T < 0 || N < 0 || C < 1 || L < 0 || blank < 0 || blank >= C) return GM_ERR_ARG;
    for (int64_t n = 0; n < N; n++) {
        if (in_lens[n] < 0 || in_lens[n] > T || tg_lens[n] < 0 || tg_lens[n] > L) return GM_ERR_ARG;
        for (int64_t i = 0; i < tg_lens[n]; i++)
            if (targets[n * L + i] < 0 || targets[n * L + i] >= C) return GM_ERR_ARG;
    }
    return GM_OK;
}

int ctc_loss_forward(void *nll, void *log_alpha, const void *log_probs, const int64_t *targets,
                     const int64_t *in_lens, const int64_t *tg_lens, int64_t T, int64_t N, int64_t C, int64_t L,
                     int64_t blank, gm_dtype dt, int nthreads) {
    const int st = check_args(targets, in_lens, tg_lens, T, N, C, L, blank, dt);
    if (st != GM_OK) return st;
    const int64_t W = 2 * L + 1; /* log_alpha's row width */
    const int nt = nn_threads(T * N * W, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nt)")
    for (int64_t n = 0; n < N; n++) {
        const int64_t Tn = in_lens[n], S = 2 * tg_lens[n] + 1;
        const int64_t *tg = targets + n * L;
        const int64_t a0 = n * T * W; /* log_alpha[n, 0, 0] */
        if (Tn == 0) { /* no step: only the empty target has probability 1 */
            nn_st(nll, n, DT, tg_lens[n] == 0 ? 0.0 : INFINITY);
            continue;
        }
        for (int64_t s = 0; s < S; s++)
            nn_st(log_alpha, a0 + s, DT, s < 2 ? nn_ld(log_probs, n * C + ctc_label(tg, s, blank), DT) : -INFINITY);
        for (int64_t t = 1; t < Tn; t++) {
            const int64_t prev = a0 + (t - 1) * W, cur = prev + W, row = (t * N + n) * C;
            for (int64_t s = 0; s < S; s++) {
                const double stay = nn_ld(log_alpha, prev + s, DT);
                const double step = s > 0 ? nn_ld(log_alpha, prev + s - 1, DT) : -INFINITY;
                const double skip = ctc_can_skip(tg, s) ? nn_ld(log_alpha, prev + s - 2, DT) : -INFINITY;
                const double a = ctc_log_add3(stay, step, skip, SINGLE);
                const double emit = nn_ld(log_probs, row + ctc_label(tg, s, blank), DT);
                nn_st(log_alpha, cur + s, DT, a == -INFINITY ? a : a + emit);
            }
        }
        const int64_t last = a0 + (Tn - 1) * W;
        const double end = S > 1 ? ctc_log_add(nn_ld(log_alpha, last + S - 1, DT), nn_ld(log_alpha, last + S - 2, DT),
                                               SINGLE)
                                 : nn_ld(log_alpha, last, DT);
        nn_st(nll, n, DT, -end);
    })
    return GM_OK;
}

int ctc_loss_backward(void *grad, const void *gout, const void *log_probs, const int64_t *targets,
                      const int64_t *in_lens, const int64_t *tg_lens, const void *log_alpha, const void *nll,
                      int64_t T, int64_t N, int64_t C, int64_t L, int64_t blank, int zero_infinity, double *scratch,
                      gm_dtype dt, int nthreads) {
    const int st = check_args(targets, in_lens, tg_lens, T, N, C, L, blank, dt);
    if (st != GM_OK) return st;
    const int64_t W = 2 * L + 1;
    const int nt = nn_threads(T * N * (W + C), nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nt)")
    for (int64_t n = 0; n < N; n++) {
        const int64_t Tn = in_lens[n], S = 2 * tg_lens[n] + 1;
        const int64_t *tg = targets + n * L;
        const double g = nn_ld(gout, n, DT), nl = nn_ld(nll, n, DT);
        for (int64_t t = Tn; t < T; t++) /* steps past the input's length take no part */
            for (int64_t c = 0; c < C; c++) nn_st(grad, (t * N + n) * C + c, DT, 0.0);
        if (nl == INFINITY) { /* impossible alignment: PyTorch's NaN, or zero_infinity's 0 */
            for (int64_t i = 0; i < Tn * C; i++)
                nn_st(grad, ((i / C) * N + n) * C + i % C, DT, zero_infinity ? 0.0 : NAN);
            continue;
        }
        double *beta = scratch + n * (2 * W + C), *next = beta + W, *lcab = next + W;
        for (int64_t t = Tn - 1; t >= 0; t--) {
            const int64_t row = (t * N + n) * C, a = (n * T + t) * W;
            for (int64_t s = 0; s < S; s++) {
                double b;
                if (t == Tn - 1) {
                    b = s >= S - 2 ? 0.0 : -INFINITY;
                } else {
                    b = ctc_log_add3(next[s], s + 1 < S ? next[s + 1] : -INFINITY,
                                     s + 2 < S && ctc_can_skip(tg, s + 2) ? next[s + 2] : -INFINITY, SINGLE);
                }
                beta[s] = b == -INFINITY ? b : b + nn_ld(log_probs, row + ctc_label(tg, s, blank), DT);
            }
            for (int64_t c = 0; c < C; c++) lcab[c] = -INFINITY;
            for (int64_t s = 0; s < S; s++) {
                const int64_t c = ctc_label(tg, s, blank);
                lcab[c] = ctc_log_add(lcab[c], nn_ld(log_alpha, a + s, DT) + beta[s], SINGLE);
            }
            for (int64_t c = 0; c < C; c++) {
                const double lp = nn_ld(log_probs, row + c, DT);
                nn_st(grad, row + c, DT, g * (nn_exp(lp, DT) - nn_exp(lcab[c] + nl - lp, DT)));
            }
            double *swap = beta;
            beta = next;
            next = swap;
        }
    })
    return GM_OK;
}
