/* kernels/cpu/softmax.c — softmax / log_softmax (see softmax.h).
 *
 * Work is split into (outer index, tile of up to TILE positions along inner). A tile's running maxima and sums
 * live on the stack, and each of the D rows of a tile is read as a contiguous run of `tile` elements: for the
 * usual last-dim softmax (inner = 1) a tile is one position and the rows are the D contiguous values; for a
 * softmax over channels of (N, C, H, W) (inner = H*W) the walk stays sequential in memory instead of striding
 * by H*W per element. */
#include "softmax.h"
#include "nn_dtype.h"
#include "vec_math.h"

/* 256 positions: two double accumulators each, 4 KiB of stack, and a 1 KiB contiguous run per float32 row. */
#define TILE 256

/* The usual case, inner = 1 (the last dim: attention scores, logits): rows of D contiguous values, each pass a
 * vectorised loop. The exps go 64 at a time through one `omp simd` loop over a block on the stack, padded past the
 * row's end, so that they run on the vector exp (vec_math.h) and every element takes the same one wherever it sits;
 * each block's exps are summed by one simd reduction, so the sum's order depends on D alone, not on the thread
 * count. The padding is 0, not -inf: glibc's vector exp hands lanes out of its range (-inf among them) to the scalar
 * function, which cost a row of 50 scores a fifth of its time. */
#define SROW 64
/* e[k] = exp(inp[base + d0 + k] - mx) for the block's n = min(SROW, D - d0) elements, 1 past the row's end (DT,
 * inp, base, D, mx: the caller's). In single precision an exponent below EXP_FLOOR gives 0: its exp is at most a
 * denormal (below 1.7e-38), and the vector exp would hand the lane (a masked score's -inf among them) to the scalar
 * function, which doubled a causally masked (32, 4, 50, 50) softmax's time. */
#define EXP_FLOOR (-87.0)
#define ROW_EXPS(e, d0, n)                                                                                   \
    do {                                                                                                     \
        double x_[SROW], low_[SROW];                                                                         \
        const double floor_ = (int)DT == GM_F64 ? -INFINITY : EXP_FLOOR;                                     \
        _Pragma("omp simd") for (int64_t k = 0; k < (n); k++) {                                              \
            const double v_ = nn_ld(inp, base + (d0) + k, DT) - mx;                                          \
            low_[k] = v_ < floor_;                                                                           \
            x_[k] = v_ < floor_ ? floor_ : v_;                                                               \
        }                                                                                                    \
        for (int64_t k = (n); k < SROW; k++) x_[k] = low_[k] = 0.0;                                          \
        /* the exps alone in their loop: GCC vectorises it on the vector exp (with the selects, it did not) */ \
        _Pragma("omp simd") for (int64_t k = 0; k < SROW; k++) e[k] = nn_exp(x_[k], DT);                     \
        _Pragma("omp simd") for (int64_t k = 0; k < SROW; k++) e[k] = low_[k] != 0.0 ? 0.0 : e[k];           \
    } while (0)

GM_VEC_CLONES static void softmax_rows(void *out, const void *inp, int64_t rows, int64_t D, gm_dtype dt, int log,
                                       int nthreads) {
    const int nt = nn_threads(rows * D, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t o = 0; o < rows; o++) {
        const int64_t base = o * D;
        double mx = -INFINITY, sum = 0.0, e[SROW];
        int nan = 0;
        _Pragma("omp simd reduction(max : mx) reduction(| : nan)")
        for (int64_t d = 0; d < D; d++) {
            const double v = nn_ld(inp, base + d, DT);
            nan |= v != v;
            mx = v > mx ? v : mx;
        }
        /* NaN wins, so that a row with a NaN gives NaN; a row of all -inf is shifted by 0 (general loop's notes) */
        mx = nan ? (double)NAN : mx == -INFINITY ? 0.0 : mx;
        const int keep_exp = !log && ((int)DT == GM_F32 || (int)DT == GM_F64); /* as in the general loop */
        for (int64_t d0 = 0; d0 < D; d0 += SROW) {
            const int64_t n = D - d0 < SROW ? D - d0 : SROW;
            ROW_EXPS(e, d0, n);
            double block = 0.0;
            _Pragma("omp simd reduction(+ : block)") for (int64_t k = 0; k < n; k++) block += e[k];
            sum += block;
            if (keep_exp) _Pragma("omp simd") for (int64_t k = 0; k < n; k++) nn_st(out, base + d0 + k, DT, e[k]);
        }
        if (log) {
            const double lse = mx + nn_log(sum, DT);
            for (int64_t d = 0; d < D; d++) nn_st(out, base + d, DT, nn_ld(inp, base + d, DT) - lse);
            continue;
        }
        const double inv = 1.0 / sum;
        if (keep_exp) {
            for (int64_t d = 0; d < D; d++) nn_st(out, base + d, DT, nn_ld(out, base + d, DT) * inv);
            continue;
        }
        for (int64_t d0 = 0; d0 < D; d0 += SROW) {
            const int64_t n = D - d0 < SROW ? D - d0 : SROW;
            ROW_EXPS(e, d0, n);
            _Pragma("omp simd") for (int64_t k = 0; k < n; k++) nn_st(out, base + d0 + k, DT, e[k] * inv);
        }
    })
}

int softmax_forward(void *out, const void *inp, int64_t outer, int64_t D, int64_t inner, gm_dtype dt, int log,
                    int nthreads) {
    if (!gm_dtype_is_float(dt) || outer < 0 || D < 0 || inner < 0) return GM_ERR_ARG;
    if (D == 0 || inner == 0) return GM_OK;
    if (inner == 1) {
        softmax_rows(out, inp, outer, D, dt, log, nthreads);
        return GM_OK;
    }
    const int64_t ntiles = (inner + TILE - 1) / TILE, units = outer * ntiles;
    const int nt = nn_threads(outer * D * inner, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t u = 0; u < units; u++) {
        const int64_t o = u / ntiles, j0 = (u % ntiles) * TILE;
        const int64_t tile = inner - j0 < TILE ? inner - j0 : TILE;
        const int64_t base = o * D * inner + j0;
        double mx[TILE], sum[TILE];
        for (int64_t j = 0; j < tile; j++) { mx[j] = -INFINITY; sum[j] = 0.0; }
        for (int64_t d = 0; d < D; d++)
            for (int64_t j = 0; j < tile; j++) {
                const double v = nn_ld(inp, base + d * inner + j, DT);
                /* NaN must win so that a NaN row gives NaN, not a finite softmax of the rest */
                if (v > mx[j] || v != v) mx[j] = v;
            }
        /* a row of all -inf has max -inf: shift by 0 instead, giving exp(-inf) = 0 sums and NaN results as
         * PyTorch does, without computing -inf - -inf */
        for (int64_t j = 0; j < tile; j++)
            if (mx[j] == -INFINITY) mx[j] = 0.0;
        /* softmax in float32/float64 keeps each exp in out and rescales it below: one exp per element instead of
         * two (out may be inp: each element is read before it is overwritten). Half types recompute instead, so
         * that their single rounding is of the final value. */
        const int keep_exp = !log && ((int)DT == GM_F32 || (int)DT == GM_F64);
        for (int64_t d = 0; d < D; d++)
            for (int64_t j = 0; j < tile; j++) {
                const int64_t i = base + d * inner + j;
                const double e = nn_exp(nn_ld(inp, i, DT) - mx[j], DT);
                sum[j] += e;
                if (keep_exp) nn_st(out, i, DT, e);
            }
        if (log) {
            for (int64_t j = 0; j < tile; j++) sum[j] = mx[j] + nn_log(sum[j], DT); /* log-sum-exp */
            for (int64_t d = 0; d < D; d++)
                for (int64_t j = 0; j < tile; j++) {
                    const int64_t i = base + d * inner + j;
                    nn_st(out, i, DT, nn_ld(inp, i, DT) - sum[j]);
                }
        } else {
            for (int64_t j = 0; j < tile; j++) sum[j] = 1.0 / sum[j];
            for (int64_t d = 0; d < D; d++)
                for (int64_t j = 0; j < tile; j++) {
                    const int64_t i = base + d * inner + j;
                    const double e = keep_exp ? nn_ld(out, i, DT) : nn_exp(nn_ld(inp, i, DT) - mx[j], DT);
                    nn_st(out, i, DT, e * sum[j]);
                }
        }
    })
    return GM_OK;
}

/* The gradient over rows of D contiguous values (inner = 1), as softmax_rows: each row's sum one simd reduction,
 * its elements one simd loop; log_softmax's exp(out) through ROW_EXPS's blocks (every element the same vector
 * exp). The tiled loop below took 1 ms for attention's (32, 4, 50, 50) scores: one element at a time. */
GM_VEC_CLONES static void softmax_rows_backward(void *dinp, const void *dout, const void *out, int64_t rows,
                                                int64_t D, gm_dtype dt, int log, int nthreads) {
    const int nt = nn_threads(rows * D, nthreads);
    (void)nt;
    const void *const inp = out; /* what ROW_EXPS reads, shifted by mx: log_softmax's gradient takes exp(out) */
    const double mx = 0.0;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t o = 0; o < rows; o++) {
        const int64_t base = o * D;
        double acc = 0.0, e[SROW];
        if (log) /* two loops: GCC left one with `log ? g : g * y` scalar in its log copy */
            _Pragma("omp simd reduction(+ : acc)") for (int64_t d = 0; d < D; d++) acc += nn_ld(dout, base + d, DT);
        else
            _Pragma("omp simd reduction(+ : acc)") for (int64_t d = 0; d < D; d++)
                acc += nn_ld(dout, base + d, DT) * nn_ld(out, base + d, DT);
        if (!log) { /* dinp may be dout: each element is read before it is written */
            _Pragma("omp simd") for (int64_t d = 0; d < D; d++) {
                const double y = nn_ld(out, base + d, DT);
                nn_st(dinp, base + d, DT, y * (nn_ld(dout, base + d, DT) - acc));
            }
            continue;
        }
        for (int64_t d0 = 0; d0 < D; d0 += SROW) {
            const int64_t n = D - d0 < SROW ? D - d0 : SROW;
            ROW_EXPS(e, d0, n);
            _Pragma("omp simd") for (int64_t k = 0; k < n; k++)
                nn_st(dinp, base + d0 + k, DT, nn_ld(dout, base + d0 + k, DT) - e[k] * acc);
        }
    })
}

int softmax_backward(void *dinp, const void *dout, const void *out, int64_t outer, int64_t D, int64_t inner,
                     gm_dtype dt, int log, int nthreads) {
    if (!gm_dtype_is_float(dt) || outer < 0 || D < 0 || inner < 0) return GM_ERR_ARG;
    if (D == 0 || inner == 0) return GM_OK;
    if (inner == 1) {
        softmax_rows_backward(dinp, dout, out, outer, D, dt, log, nthreads);
        return GM_OK;
    }
    const int64_t ntiles = (inner + TILE - 1) / TILE, units = outer * ntiles;
    const int nt = nn_threads(outer * D * inner, nthreads);
    (void)nt;
    NN_DISPATCH(dt, _Pragma("omp parallel for schedule(static) num_threads(nt)")
    for (int64_t u = 0; u < units; u++) {
        const int64_t o = u / ntiles, j0 = (u % ntiles) * TILE;
        const int64_t tile = inner - j0 < TILE ? inner - j0 : TILE;
        const int64_t base = o * D * inner + j0;
        double acc[TILE];
        for (int64_t j = 0; j < tile; j++) acc[j] = 0.0;
        for (int64_t d = 0; d < D; d++)
            for (int64_t j = 0; j < tile; j++) {
                const int64_t i = base + d * inner + j;
                const double g = nn_ld(dout, i, DT);
                acc[j] += log ? g : g * nn_ld(out, i, DT);
            }
        for (int64_t d = 0; d < D; d++)
            for (int64_t j = 0; j < tile; j++) {
                const int64_t i = base + d * inner + j;
                const double g = nn_ld(dout, i, DT), y = nn_ld(out, i, DT);
                nn_st(dinp, i, DT, log ? g - nn_exp(y, DT) * acc[j] : y * (g - acc[j]));
            }
    })
    return GM_OK;
}
