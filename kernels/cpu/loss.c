/* kernels/cpu/loss.c — losses (see loss.h).
 *
 * cross_entropy walks its (N, C, inner) logits like softmax.c: in units of (n, tile of up to TILE positions),
 * with the tile's maxima and sums on the stack and each class row read as a contiguous run. Reductions are
 * summed in double; OpenMP's static schedule keeps the summation order fixed for a given thread count. */
#include "loss.h"
#include "nn_dtype.h"

#define TILE 256

int64_t loss_first_bad_target(const int64_t *target, int64_t n, int64_t C, int64_t ignore_index) {
    for (int64_t i = 0; i < n; i++)
        if ((target[i] < 0 || target[i] >= C) && target[i] != ignore_index) return i;
    return -1;
}

/* Reduction's gradient scale for position i. */
NN_INLINE double grad_scale(const void *dout, int64_t i, int reduction, double denom, int dt) {
    if (reduction == LOSS_NONE) return nn_ld(dout, i, dt);
    const double g = nn_ld(dout, 0, dt);
    return reduction == LOSS_MEAN ? g / denom : g;
}

static double weight_total(const double *weight, int64_t C) {
    if (!weight) return (double)C;
    double s = 0.0;
    for (int64_t c = 0; c < C; c++) s += weight[c];
    return s;
}

/* Store a reduced total (sum, or mean over denom). */
static void store_total(void *loss, int reduction, double total, double denom, gm_dtype dt) {
    nn_st(loss, 0, dt, reduction == LOSS_MEAN ? total / denom : total);
}

int cross_entropy_forward(void *loss, void *lse, double *wsum, const void *inp, const int64_t *target,
                          const double *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore_index,
                          int reduction, double smoothing, gm_dtype dt, gm_dtype sdt, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 1 || inner < 0 || reduction < LOSS_NONE || reduction > LOSS_SUM)
        return GM_ERR_ARG;
    if (loss_first_bad_target(target, N * inner, C, ignore_index) >= 0) return GM_ERR_ARG;
    const double eps_c = smoothing / (double)C, wall = weight_total(weight, C);
    const int64_t ntiles = (inner + TILE - 1) / TILE, units = N * ntiles;
    const int nt = nn_threads(N * C * inner, nthreads);
    (void)nt;
    double total = 0.0, ws = 0.0;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt) reduction(+ : total, ws)")
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / ntiles, j0 = (u % ntiles) * TILE;
        const int64_t tile = inner - j0 < TILE ? inner - j0 : TILE;
        const int64_t base = n * C * inner + j0, pos = n * inner + j0;
        double mx[TILE], sum[TILE], wx[TILE]; /* wx: sum_c w_c x_c, for label smoothing */
        for (int64_t j = 0; j < tile; j++) { mx[j] = -INFINITY; sum[j] = 0.0; wx[j] = 0.0; }
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < tile; j++) {
                const double v = nn_ld(inp, base + c * inner + j, DT);
                if (v > mx[j] || v != v) mx[j] = v;
            }
        for (int64_t j = 0; j < tile; j++)
            if (mx[j] == -INFINITY) mx[j] = 0.0;
        for (int64_t c = 0; c < C; c++) {
            const double wc = weight ? weight[c] : 1.0;
            for (int64_t j = 0; j < tile; j++) {
                const double v = nn_ld(inp, base + c * inner + j, DT);
                sum[j] += nn_exp(v - mx[j], DT);
                if (smoothing != 0.0) wx[j] += wc * v;
            }
        }
        for (int64_t j = 0; j < tile; j++) {
            const double l = mx[j] + nn_log(sum[j], DT);
            nn_st(lse, pos + j, sdt, l);
            const int64_t t = target[pos + j];
            double li = 0.0;
            if (t != ignore_index) {
                const double wt = weight ? weight[t] : 1.0;
                li = (1.0 - smoothing) * wt * (l - nn_ld(inp, base + t * inner + j, DT));
                if (smoothing != 0.0) li += eps_c * (wall * l - wx[j]);
                ws += wt;
            }
            if (reduction == LOSS_NONE) nn_st(loss, pos + j, DT, li);
            else total += li;
        }
    })
    *wsum = ws;
    if (reduction != LOSS_NONE) store_total(loss, reduction, total, ws, dt);
    return GM_OK;
}

int cross_entropy_backward(void *dinp, const void *dout, const void *inp, const int64_t *target,
                           const double *weight, const void *lse, int64_t N, int64_t C, int64_t inner,
                           int64_t ignore_index, int reduction, double smoothing, double wsum, gm_dtype dt,
                           gm_dtype sdt, int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 1 || inner < 0 || reduction < LOSS_NONE || reduction > LOSS_SUM)
        return GM_ERR_ARG;
    if (loss_first_bad_target(target, N * inner, C, ignore_index) >= 0) return GM_ERR_ARG;
    const double eps_c = smoothing / (double)C, wall = weight_total(weight, C);
    const int64_t ntiles = (inner + TILE - 1) / TILE, units = N * ntiles;
    const int nt = nn_threads(N * C * inner, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / ntiles, j0 = (u % ntiles) * TILE;
        const int64_t tile = inner - j0 < TILE ? inner - j0 : TILE;
        const int64_t base = n * C * inner + j0, pos = n * inner + j0;
        /* per position: a = s * ((1-eps) w_t + eps/C * sum w), b = s * (1-eps) w_t, e = s * eps/C; 0 if ignored */
        double a[TILE], b[TILE], e[TILE], l[TILE];
        int64_t t[TILE];
        for (int64_t j = 0; j < tile; j++) {
            t[j] = target[pos + j];
            l[j] = nn_ld(lse, pos + j, sdt);
            if (t[j] == ignore_index) {
                a[j] = b[j] = e[j] = 0.0;
                continue;
            }
            const double s = grad_scale(dout, pos + j, reduction, wsum, DT);
            const double wt = weight ? weight[t[j]] : 1.0;
            b[j] = s * (1.0 - smoothing) * wt;
            e[j] = s * eps_c;
            a[j] = b[j] + e[j] * wall;
        }
        for (int64_t c = 0; c < C; c++) {
            const double wc = weight ? weight[c] : 1.0;
            for (int64_t j = 0; j < tile; j++) {
                const int64_t i = base + c * inner + j;
                double g = 0.0;
                if (t[j] != ignore_index) /* ignored positions: exactly 0, even for inf logits */
                    g = a[j] * nn_exp(nn_ld(inp, i, DT) - l[j], DT) - e[j] * wc - (c == t[j] ? b[j] : 0.0);
                nn_st(dinp, i, DT, g);
            }
        }
    })
    return GM_OK;
}

int nll_loss_forward(void *loss, double *wsum, const void *inp, const int64_t *target, const double *weight,
                     int64_t N, int64_t C, int64_t inner, int64_t ignore_index, int reduction, gm_dtype dt,
                     int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 1 || inner < 0 || reduction < LOSS_NONE || reduction > LOSS_SUM)
        return GM_ERR_ARG;
    if (loss_first_bad_target(target, N * inner, C, ignore_index) >= 0) return GM_ERR_ARG;
    const int64_t npos = N * inner;
    const int nt = nn_threads(npos, nthreads);
    (void)nt;
    double total = 0.0, ws = 0.0;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt) reduction(+ : total, ws)")
    for (int64_t p = 0; p < npos; p++) {
        const int64_t t = target[p], n = p / inner, j = p % inner;
        double li = 0.0;
        if (t != ignore_index) {
            const double wt = weight ? weight[t] : 1.0;
            li = -wt * nn_ld(inp, (n * C + t) * inner + j, DT);
            ws += wt;
        }
        if (reduction == LOSS_NONE) nn_st(loss, p, DT, li);
        else total += li;
    })
    *wsum = ws;
    if (reduction != LOSS_NONE) store_total(loss, reduction, total, ws, dt);
    return GM_OK;
}

int nll_loss_backward(void *dinp, const void *dout, const int64_t *target, const double *weight, int64_t N,
                      int64_t C, int64_t inner, int64_t ignore_index, int reduction, double wsum, gm_dtype dt,
                      int nthreads) {
    if (!gm_dtype_is_float(dt) || N < 0 || C < 1 || inner < 0 || reduction < LOSS_NONE || reduction > LOSS_SUM)
        return GM_ERR_ARG;
    if (loss_first_bad_target(target, N * inner, C, ignore_index) >= 0) return GM_ERR_ARG;
    const int64_t npos = N * inner;
    memset(dinp, 0, (size_t)(npos * C) * gm_dtype_size(dt)); /* all-zero bits are +0 in every float dtype */
    const int nt = nn_threads(npos, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t p = 0; p < npos; p++) {
        const int64_t t = target[p], n = p / inner, j = p % inner;
        if (t == ignore_index) continue;
        const double wt = weight ? weight[t] : 1.0;
        nn_st(dinp, (n * C + t) * inner + j, DT, -wt * grad_scale(dout, p, reduction, wsum, DT));
    })
    return GM_OK;
}

int pointwise_loss_forward(void *loss, const void *x, const void *t, int64_t n, int op, double param, int reduction,
                           gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= LOSS_POINTWISE_OPS || reduction < LOSS_NONE ||
        reduction > LOSS_SUM)
        return GM_ERR_ARG;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    double total = 0.0;
    int64_t out_of_range = 0; /* binary_cross_entropy's inputs must be probabilities */
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt) reduction(+ : total, out_of_range)")
    for (int64_t i = 0; i < n; i++) {
        const double xi = nn_ld(x, i, DT);
        if (op == LOSS_BCE && !(xi >= 0.0 && xi <= 1.0)) out_of_range++;
        const double li = pointwise_loss_value(op, xi, nn_ld(t, i, DT), param);
        if (reduction == LOSS_NONE) nn_st(loss, i, DT, li);
        else total += li;
    })
    if (out_of_range) return LOSS_ERR_RANGE;
    if (reduction != LOSS_NONE) store_total(loss, reduction, total, (double)n, dt);
    return GM_OK;
}

int pointwise_loss_backward(void *dx, void *dt_, const void *dout, const void *x, const void *t, int64_t n,
                            int op, double param, int reduction, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= LOSS_POINTWISE_OPS || reduction < LOSS_NONE ||
        reduction > LOSS_SUM)
        return GM_ERR_ARG;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t i = 0; i < n; i++) {
        const double s = grad_scale(dout, i, reduction, (double)n, DT);
        double gx, gt;
        pointwise_loss_grads(op, nn_ld(x, i, DT), nn_ld(t, i, DT), param, &gx, &gt);
        if (dx) nn_st(dx, i, DT, gx * s);
        if (dt_) nn_st(dt_, i, DT, gt * s);
    })
    return GM_OK;
}

/* softplus(x) = log(1 + exp(x)) and softplus(-x), without overflow for either sign of x. */
NN_INLINE void softplus_pair(double x, int dt, double *sp_pos, double *sp_neg) {
    const double l = nn_log1p(nn_exp(-fabs(x), dt), dt);
    *sp_pos = l + (x > 0.0 ? x : 0.0);
    *sp_neg = l + (x < 0.0 ? -x : 0.0);
}

int bce_logits_forward(void *loss, const void *x, const void *t, const void *w, int64_t w_period, const void *pw,
                       int64_t pw_period, int64_t n, int reduction, gm_dtype dt, int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0 || reduction < LOSS_NONE || reduction > LOSS_SUM ||
        (w && w_period < 1) || (pw && pw_period < 1))
        return GM_ERR_ARG;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    double total = 0.0;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt) reduction(+ : total)")
    for (int64_t i = 0; i < n; i++) {
        const double xi = nn_ld(x, i, DT), ti = nn_ld(t, i, DT);
        const double pwi = pw ? nn_ld(pw, i % pw_period, DT) : 1.0;
        double spp, spn;
        softplus_pair(xi, DT, &spp, &spn);
        /* pw t softplus(-x) + (1-t) softplus(x): equal to PyTorch's (1-t) x + (1+(pw-1)t) softplus(-x), but a
         * sum of non-negative terms, so a tiny loss (confident and right) keeps its digits instead of cancelling */
        double li = pwi * ti * spn + (1.0 - ti) * spp;
        if (w) li *= nn_ld(w, i % w_period, DT);
        if (reduction == LOSS_NONE) nn_st(loss, i, DT, li);
        else total += li;
    })
    if (reduction != LOSS_NONE) store_total(loss, reduction, total, (double)n, dt);
    return GM_OK;
}

int bce_logits_backward(void *dx, void *dtarget, const void *dout, const void *x, const void *t, const void *w,
                        int64_t w_period, const void *pw, int64_t pw_period, int64_t n, int reduction, gm_dtype dt,
                        int nthreads) {
    if (!gm_dtype_is_float(dt) || n < 0 || reduction < LOSS_NONE || reduction > LOSS_SUM ||
        (w && w_period < 1) || (pw && pw_period < 1))
        return GM_ERR_ARG;
    const int nt = nn_threads(n, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t i = 0; i < n; i++) {
        const double xi = nn_ld(x, i, DT), ti = nn_ld(t, i, DT);
        const double pwi = pw ? nn_ld(pw, i % pw_period, DT) : 1.0;
        double s = grad_scale(dout, i, reduction, (double)n, DT);
        if (w) s *= nn_ld(w, i % w_period, DT);
        if (dx) {
            const double sig_neg = 1.0 / (1.0 + nn_exp(xi, DT)); /* sigmoid(-x); exp overflow gives 0, right */
            nn_st(dx, i, DT, s * ((1.0 - ti) - (1.0 + (pwi - 1.0) * ti) * sig_neg));
        }
        if (dtarget) {
            double spp, spn;
            softplus_pair(xi, DT, &spp, &spn);
            nn_st(dtarget, i, DT, s * (pwi * spn - spp));
        }
    })
    return GM_OK;
}
