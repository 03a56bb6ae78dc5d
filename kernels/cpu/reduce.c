/* kernels/cpu/reduce.c — strided CPU reductions (see reduce.h). The input is never copied: the kept dims are
 * walked outside (one output element at a time, split across OpenMP threads), the reduced dims inside.
 * Both sets of dims are first simplified (reduce_common.h, shared with the CUDA kernels: size-1 dims dropped,
 * dims that are contiguous with each other merged), which keeps the innermost loop long; order-insensitive
 * reductions also put the smallest stride innermost, so a reduction over a transposed view still walks memory
 * in order.
 *
 * When the kept dims move faster through memory than the reduced ones (a column sum of a row-major matrix,
 * the batch dim of (N, C)), one output at a time would stride through memory once per output. There the
 * outputs are taken in tiles of TILE neighbours along the innermost kept dim and accumulated together, so
 * each step reads a contiguous run of the input. */
#include "reduce.h"

#include <math.h>
#include <omp.h>

#include "../reduce_common.h"

/* Below this many input elements in total, threads cost more than they save. */
#define REDUCE_PARALLEL_GRAIN 32768
/* Outputs accumulated together in the tiled walk: 64 doubles of accumulators stay in L1, and 64 neighbouring
 * floats span four cache lines per step. */
#define TILE 64

/* One output o whose reduced elements start at base. */
#define ROW_PARAMS char *out, int64_t o, const char *base, const rd_dims *R, const rd_params *c
/* Outputs o .. o+n-1 (n <= TILE); output o+t's reduced elements start at base + t*ks. */
#define TILE_PARAMS char *out, int64_t o, int64_t n, int64_t ks, const char *base, const rd_dims *R, const rd_params *c
typedef void (*row_fn)(ROW_PARAMS);
typedef void (*tile_fn)(TILE_PARAMS);

/* Visit every innermost run of the reduced dims R from BASE: the body runs once per run of N elements from P,
 * S bytes apart. The innermost dim is the run; the others advance as an odometer. R->total must be > 0.
 * The body is variadic so that commas in it need no parentheses. */
#define RED_SEG(BASE, R, P, N, S, ...)                                                                   \
    do {                                                                                                 \
        int64_t cnt_[GM_MAX_DIMS] = {0};                                                                 \
        const char *row_ = (BASE);                                                                       \
        const int nd_ = (R)->n;                                                                          \
        const int64_t N = (R)->shape[nd_ - 1], S = (R)->stride[nd_ - 1];                                 \
        const int64_t rows_ = (R)->total / N;                                                            \
        for (int64_t r_ = 0; r_ < rows_; r_++) {                                                         \
            const char *P = row_;                                                                        \
            { __VA_ARGS__ }                                                                              \
            for (int d_ = nd_ - 2; d_ >= 0; d_--) {                                                      \
                if (++cnt_[d_] < (R)->shape[d_]) { row_ += (R)->stride[d_]; break; }                     \
                cnt_[d_] = 0;                                                                            \
                row_ -= (R)->stride[d_] * ((R)->shape[d_] - 1);                                          \
            }                                                                                            \
        }                                                                                                \
    } while (0)

/* Like RED_SEG, but the body runs once per element: P points at it, IDX is its row-major linear index. */
#define RED_ITER(BASE, R, P, IDX, ...)                                                                   \
    do {                                                                                                 \
        int64_t IDX = 0;                                                                                 \
        RED_SEG(BASE, R, seg_, n_, s_, {                                                                 \
            const char *P = seg_;                                                                        \
            for (int64_t i_ = 0; i_ < n_; i_++, P += s_, IDX++) { __VA_ARGS__ }                          \
        });                                                                                              \
        (void)IDX;                                                                                       \
    } while (0)

#define LD_F32(p) ((double)*(const float *)(p))
#define LD_F64(p) (*(const double *)(p))
#define LD_F16(p) ((double)gm_half_to_float(*(const uint16_t *)(p)))
#define LD_BF16(p) ((double)gm_bf16_to_float(*(const uint16_t *)(p)))
#define LD_I64(p) (*(const int64_t *)(p))
#define LD_BOOL(p) ((int64_t)(*(const uint8_t *)(p) != 0))

/* The row and tile reducers, generated per input dtype. LOAD(p) reads one element at p; ES is its size, a
 * compile-time constant so that a contiguous run (stride == ES) becomes an `omp simd` loop the compiler
 * vectorizes (the pragma is what licenses reassociating the sum; results differ from a serial sum only in
 * rounding, which double accumulation keeps far below the output's precision). */

#define TILE_LOOP(T, N) for (int64_t T = 0; T < (N); T++)

/* In a tile function (TILE_PARAMS): the body runs for every reduced element (P, its index IDX) and every output
 * t of the tile, whose element is at P + t * TS. Adjacent outputs (ks == ES) get TS = ES, a constant, so that
 * the loop over t is a vector loop; it only vectorizes across outputs, whose accumulators are independent, so
 * the results are those of the scalar loop. */
#define TILE_ITER(ES, P, IDX, TS, ...)                                                                   \
    do {                                                                                                 \
        if (ks == (ES)) {                                                                                \
            const int64_t TS = (ES);                                                                     \
            RED_ITER(base, R, P, IDX, { _Pragma("omp simd") TILE_LOOP(t, n) { __VA_ARGS__ } });          \
        } else {                                                                                         \
            const int64_t TS = ks;                                                                       \
            RED_ITER(base, R, P, IDX, { TILE_LOOP(t, n) { __VA_ARGS__ } });                              \
        }                                                                                                \
    } while (0)

/* A pragma whose text holds macro arguments: a bare _Pragma("...") would not substitute them, and # would not
 * expand them before quoting, hence the two steps. */
#define RD_PRAGMA(TEXT) RD_DO_PRAGMA(TEXT)
#define RD_DO_PRAGMA(TEXT) _Pragma(#TEXT)

/* The double family's extremes, written once for both directions: X = max (INIT -INFINITY, BEYOND >,
 * WITHIN <=) and X = min (INFINITY, <, >=). `v BEYOND a`: v is strictly more extreme than a; `v WITHIN a`:
 * it is not, which is false for a NaN v, so that a NaN is taken. X also names the OpenMP reduction. */
#define DEFINE_DOUBLE_EXTREMES(SUF, LOAD, ES, X, INIT, BEYOND, WITHIN)                                   \
    /* The extreme of a run, and whether it holds a NaN (which then wins: NaN propagates). */            \
    static double seg_##X##_d_##SUF(const char *p, int64_t n, int64_t s, int *nan) {                     \
        double m = INIT;                                                                                 \
        int h = 0;                                                                                       \
        if (s == ES) {                                                                                   \
            RD_PRAGMA(omp simd reduction(X:m) reduction(|:h))                                            \
            for (int64_t i = 0; i < n; i++) {                                                            \
                double v = LOAD(p + i * ES); m = v BEYOND m ? v : m; h |= v != v;                        \
            }                                                                                            \
        } else {                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                            \
                double v = LOAD(p + i * s); m = v BEYOND m ? v : m; h |= v != v;                         \
            }                                                                                            \
        }                                                                                                \
        *nan |= h;                                                                                       \
        return m;                                                                                        \
    }                                                                                                    \
    static void a##X##_d_##SUF(ROW_PARAMS) {                                                             \
        double acc = INIT;                                                                               \
        int nan = 0;                                                                                     \
        RED_SEG(base, R, p, n, s, { double m = seg_##X##_d_##SUF(p, n, s, &nan); acc = m BEYOND acc ? m : acc; }); \
        rd_store_f64(out + o * c->out_size, c->out_dt, nan ? NAN : acc);                                 \
    }                                                                                                    \
    /* Two vectorizable passes beat one branchy one: the extreme (and whether a NaN occurs), then the first \
     * index holding it; NaN counts as the extreme, so the first NaN wins. */                            \
    static void arg##X##_d_##SUF(ROW_PARAMS) {                                                           \
        double m = INIT;                                                                                 \
        int nan = 0;                                                                                     \
        int64_t best = 0;                                                                                \
        RED_SEG(base, R, p, n, s, { double x = seg_##X##_d_##SUF(p, n, s, &nan); m = x BEYOND m ? x : m; }); \
        RED_ITER(base, R, p, k, { double v = LOAD(p); if (nan ? v != v : v == m) { best = k; goto found; } }); \
    found:                                                                                               \
        rd_store_arg_f64(c, o, best, nan ? NAN : m);                                                     \
        (void)out;                                                                                       \
    }                                                                                                    \
    /* take: v is beyond or NaN, and a NaN already taken stays (& rather than && keeps it vectorizable). */ \
    static void a##X##_dt_##SUF(TILE_PARAMS) {                                                           \
        double acc[TILE];                                                                                \
        TILE_LOOP(t, n) acc[t] = INIT;                                                                   \
        TILE_ITER(ES, p, k, ts, {                                                                        \
            double v = LOAD(p + t * ts), a = acc[t]; int take = (a == a) & !(v WITHIN a); acc[t] = take ? v : a; }); \
        TILE_LOOP(t, n) rd_store_f64(out + (o + t) * c->out_size, c->out_dt, acc[t]);                    \
    }                                                                                                    \
    static void arg##X##_dt_##SUF(TILE_PARAMS) {                                                         \
        double acc[TILE];                                                                                \
        int64_t best[TILE];                                                                              \
        TILE_LOOP(t, n) { acc[t] = INIT; best[t] = 0; }                                                  \
        RED_ITER(base, R, p, k, { TILE_LOOP(t, n) {                                                      \
            double v = LOAD(p + t * ks);                                                                 \
            if (acc[t] == acc[t] && (v BEYOND acc[t] || v != v)) { acc[t] = v; best[t] = k; } } });      \
        TILE_LOOP(t, n) rd_store_arg_f64(c, o + t, best[t], acc[t]);                                     \
        (void)out;                                                                                       \
    }

/* Double family: every dtype can be read this way. int64 loses exactness above 2^53, which is why int64 ->
 * int64 sums and int64/bool extremes use the integer family below. */
#define DEFINE_DOUBLE_FAMILY(SUF, LOAD, ES)                                                              \
    static double seg_sum_d_##SUF(const char *p, int64_t n, int64_t s) {                                 \
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;                                                   \
        if (s == ES) {                                                                                   \
            _Pragma("omp simd reduction(+:a0)")                                                          \
            for (int64_t i = 0; i < n; i++) a0 += LOAD(p + i * ES);                                      \
            return a0;                                                                                   \
        }                                                                                                \
        /* four chains: one dependent add chain would leave the adder idle most cycles */                \
        int64_t i = 0;                                                                                   \
        for (; i + 4 <= n; i += 4, p += 4 * s) {                                                         \
            a0 += LOAD(p); a1 += LOAD(p + s); a2 += LOAD(p + 2 * s); a3 += LOAD(p + 3 * s);              \
        }                                                                                                \
        for (; i < n; i++, p += s) a0 += LOAD(p);                                                        \
        return (a0 + a1) + (a2 + a3);                                                                    \
    }                                                                                                    \
    static double seg_ss_d_##SUF(const char *p, int64_t n, int64_t s, double mean) {                     \
        double a = 0.0;                                                                                  \
        if (s == ES) {                                                                                   \
            _Pragma("omp simd reduction(+:a)")                                                           \
            for (int64_t i = 0; i < n; i++) { double d = LOAD(p + i * ES) - mean; a += d * d; }          \
        } else {                                                                                         \
            for (int64_t i = 0; i < n; i++) { double d = LOAD(p + i * s) - mean; a += d * d; }           \
        }                                                                                                \
        return a;                                                                                        \
    }                                                                                                    \
    static void sum_d_##SUF(ROW_PARAMS) {                                                                \
        double acc = 0.0;                                                                                \
        if (R->total > 0) RED_SEG(base, R, p, n, s, { acc += seg_sum_d_##SUF(p, n, s); });               \
        rd_store_f64(out + o * c->out_size, c->out_dt, acc / c->div);                                    \
    }                                                                                                    \
    static void prod_d_##SUF(ROW_PARAMS) {                                                               \
        double acc = 1.0;                                                                                \
        if (R->total > 0) RED_ITER(base, R, p, k, { acc *= LOAD(p); });                                  \
        rd_store_f64(out + o * c->out_size, c->out_dt, acc);                                             \
    }                                                                                                    \
    /* Two passes: the one-pass formula loses everything to cancellation when |mean| >> std. */          \
    static void var_d_##SUF(ROW_PARAMS) {                                                                \
        double cnt = (double)R->total, mean = 0.0, ss = 0.0, denom = cnt - c->correction;                \
        if (R->total > 0) RED_SEG(base, R, p, n, s, { mean += seg_sum_d_##SUF(p, n, s); });              \
        mean /= cnt;                                                                                     \
        if (R->total > 0) RED_SEG(base, R, p, n, s, { ss += seg_ss_d_##SUF(p, n, s, mean); });           \
        rd_store_f64(out + o * c->out_size, c->out_dt, ss / (denom > 0.0 ? denom : 0.0));                \
    }                                                                                                    \
    /* Tiled twins (see the file header): n neighbouring outputs, ks bytes apart, at once. Each output    \
     * still sees its reduced elements in row-major order, so "first index" keeps its meaning. */        \
    static void sum_dt_##SUF(TILE_PARAMS) {                                                              \
        double acc[TILE];                                                                                \
        TILE_LOOP(t, n) acc[t] = 0.0;                                                                    \
        TILE_ITER(ES, p, k, ts, { acc[t] += LOAD(p + t * ts); });                                        \
        TILE_LOOP(t, n) rd_store_f64(out + (o + t) * c->out_size, c->out_dt, acc[t] / c->div);           \
    }                                                                                                    \
    static void prod_dt_##SUF(TILE_PARAMS) {                                                             \
        double acc[TILE];                                                                                \
        TILE_LOOP(t, n) acc[t] = 1.0;                                                                    \
        RED_ITER(base, R, p, k, { TILE_LOOP(t, n) acc[t] *= LOAD(p + t * ks); });                        \
        TILE_LOOP(t, n) rd_store_f64(out + (o + t) * c->out_size, c->out_dt, acc[t]);                    \
    }                                                                                                    \
    static void var_dt_##SUF(TILE_PARAMS) {                                                              \
        double mean[TILE], ss[TILE], cnt = (double)R->total, denom = cnt - c->correction;                \
        TILE_LOOP(t, n) { mean[t] = 0.0; ss[t] = 0.0; }                                                  \
        if (R->total > 0 && ks == ES) {                                                                  \
            RED_ITER(base, R, p, k, { _Pragma("omp simd") TILE_LOOP(t, n) mean[t] += LOAD(p + t * ES); });  \
            TILE_LOOP(t, n) mean[t] /= cnt;                                                              \
            RED_ITER(base, R, p, k, { _Pragma("omp simd") TILE_LOOP(t, n) {                              \
                double d = LOAD(p + t * ES) - mean[t]; ss[t] += d * d; } });                             \
        } else if (R->total > 0) {                                                                       \
            RED_ITER(base, R, p, k, { TILE_LOOP(t, n) mean[t] += LOAD(p + t * ks); });                   \
            TILE_LOOP(t, n) mean[t] /= cnt;                                                              \
            RED_ITER(base, R, p, k, { TILE_LOOP(t, n) {                                                  \
                double d = LOAD(p + t * ks) - mean[t]; ss[t] += d * d; } });                             \
        } else {                                                                                         \
            TILE_LOOP(t, n) mean[t] /= cnt;                                                              \
        }                                                                                                \
        TILE_LOOP(t, n) rd_store_f64(out + (o + t) * c->out_size, c->out_dt, ss[t] / (denom > 0.0 ? denom : 0.0)); \
    }                                                                                                    \
    DEFINE_DOUBLE_EXTREMES(SUF, LOAD, ES, max, -INFINITY, >, <=)                                         \
    DEFINE_DOUBLE_EXTREMES(SUF, LOAD, ES, min, INFINITY, <, >=)

/* The integer family's extremes, for X = max (INIT INT64_MIN, BEYOND >) and X = min (INT64_MAX, <). */
#define DEFINE_INT_EXTREMES(SUF, LOAD, X, INIT, BEYOND)                                                  \
    static void a##X##_i_##SUF(ROW_PARAMS) {                                                             \
        int64_t acc = INIT;                                                                              \
        RED_ITER(base, R, p, k, { int64_t v = LOAD(p); acc = v BEYOND acc ? v : acc; });                 \
        rd_store_i64(out + o * c->out_size, c->out_dt, acc);                                             \
    }                                                                                                    \
    static void arg##X##_i_##SUF(ROW_PARAMS) {                                                           \
        int64_t acc = INIT, best = 0;                                                                    \
        RED_ITER(base, R, p, k, { int64_t v = LOAD(p); if (v BEYOND acc) { acc = v; best = k; } });      \
        rd_store_arg_i64(c, o, best, acc);                                                               \
        (void)out;                                                                                       \
    }                                                                                                    \
    static void a##X##_it_##SUF(TILE_PARAMS) {                                                           \
        int64_t acc[TILE];                                                                               \
        TILE_LOOP(t, n) acc[t] = INIT;                                                                   \
        RED_ITER(base, R, p, k, { TILE_LOOP(t, n) {                                                      \
            int64_t v = LOAD(p + t * ks); acc[t] = v BEYOND acc[t] ? v : acc[t]; } });                   \
        TILE_LOOP(t, n) rd_store_i64(out + (o + t) * c->out_size, c->out_dt, acc[t]);                    \
    }                                                                                                    \
    static void arg##X##_it_##SUF(TILE_PARAMS) {                                                         \
        int64_t acc[TILE], best[TILE];                                                                   \
        TILE_LOOP(t, n) { acc[t] = INIT; best[t] = 0; }                                                  \
        RED_ITER(base, R, p, k, { TILE_LOOP(t, n) {                                                      \
            int64_t v = LOAD(p + t * ks); if (v BEYOND acc[t]) { acc[t] = v; best[t] = k; } } });        \
        TILE_LOOP(t, n) rd_store_arg_i64(c, o + t, best[t], acc[t]);                                     \
        (void)out;                                                                                       \
    }

/* Integer family (int64 and bool inputs): exact, and wrapping like PyTorch's int64 on overflow (unsigned
 * arithmetic, so the wrap is defined behaviour). */
#define DEFINE_INT_FAMILY(SUF, LOAD, ES)                                                                 \
    static void sum_i_##SUF(ROW_PARAMS) {                                                                \
        uint64_t acc = 0;                                                                                \
        if (R->total > 0) RED_SEG(base, R, p, n, s, {                                                    \
            uint64_t a = 0;                                                                              \
            if (s == ES) {                                                                               \
                _Pragma("omp simd reduction(+:a)")                                                       \
                for (int64_t i = 0; i < n; i++) a += (uint64_t)LOAD(p + i * ES);                         \
            } else {                                                                                     \
                for (int64_t i = 0; i < n; i++) a += (uint64_t)LOAD(p + i * s);                          \
            }                                                                                            \
            acc += a;                                                                                    \
        });                                                                                              \
        rd_store_i64(out + o * c->out_size, c->out_dt, (int64_t)acc);                                    \
    }                                                                                                    \
    static void prod_i_##SUF(ROW_PARAMS) {                                                               \
        uint64_t acc = 1;                                                                                \
        if (R->total > 0) RED_ITER(base, R, p, k, { acc *= (uint64_t)LOAD(p); });                        \
        rd_store_i64(out + o * c->out_size, c->out_dt, (int64_t)acc);                                    \
    }                                                                                                    \
    static void sum_it_##SUF(TILE_PARAMS) {                                                              \
        uint64_t acc[TILE];                                                                              \
        TILE_LOOP(t, n) acc[t] = 0;                                                                      \
        if (R->total > 0) RED_ITER(base, R, p, k, { TILE_LOOP(t, n) acc[t] += (uint64_t)LOAD(p + t * ks); }); \
        TILE_LOOP(t, n) rd_store_i64(out + (o + t) * c->out_size, c->out_dt, (int64_t)acc[t]);           \
    }                                                                                                    \
    static void prod_it_##SUF(TILE_PARAMS) {                                                             \
        uint64_t acc[TILE];                                                                              \
        TILE_LOOP(t, n) acc[t] = 1;                                                                      \
        if (R->total > 0) RED_ITER(base, R, p, k, { TILE_LOOP(t, n) acc[t] *= (uint64_t)LOAD(p + t * ks); }); \
        TILE_LOOP(t, n) rd_store_i64(out + (o + t) * c->out_size, c->out_dt, (int64_t)acc[t]);           \
    }                                                                                                    \
    DEFINE_INT_EXTREMES(SUF, LOAD, max, INT64_MIN, >)                                                    \
    DEFINE_INT_EXTREMES(SUF, LOAD, min, INT64_MAX, <)

DEFINE_DOUBLE_FAMILY(f32, LD_F32, 4)
DEFINE_DOUBLE_FAMILY(f64, LD_F64, 8)
DEFINE_DOUBLE_FAMILY(f16, LD_F16, 2)
DEFINE_DOUBLE_FAMILY(bf16, LD_BF16, 2)
DEFINE_DOUBLE_FAMILY(i64, (double)LD_I64, 8)
DEFINE_DOUBLE_FAMILY(b8, (double)LD_BOOL, 1)
DEFINE_INT_FAMILY(i64, LD_I64, 8)
DEFINE_INT_FAMILY(b8, LD_BOOL, 1)

#define PICK_DOUBLE(NAME, dt)                                                                            \
    ((dt) == GM_F32 ? NAME##_d_f32 : (dt) == GM_F64 ? NAME##_d_f64 : (dt) == GM_F16 ? NAME##_d_f16      \
     : (dt) == GM_BF16 ? NAME##_d_bf16 : (dt) == GM_I64 ? NAME##_d_i64 : NAME##_d_b8)
#define PICK_INT(NAME, dt) ((dt) == GM_I64 ? NAME##_i_i64 : NAME##_i_b8)
#define PICK_DOUBLE_T(NAME, dt)                                                                          \
    ((dt) == GM_F32 ? NAME##_dt_f32 : (dt) == GM_F64 ? NAME##_dt_f64 : (dt) == GM_F16 ? NAME##_dt_f16   \
     : (dt) == GM_BF16 ? NAME##_dt_bf16 : (dt) == GM_I64 ? NAME##_dt_i64 : NAME##_dt_b8)
#define PICK_INT_T(NAME, dt) ((dt) == GM_I64 ? NAME##_it_i64 : NAME##_it_b8)

/* A row function and its tiled twin, chosen together. */
typedef struct {
    row_fn row;
    tile_fn tile;
} rfns;
#define FNS_DOUBLE(NAME, dt) ((rfns){PICK_DOUBLE(NAME, dt), PICK_DOUBLE_T(NAME, dt)})
#define FNS_INT(NAME, dt) ((rfns){PICK_INT(NAME, dt), PICK_INT_T(NAME, dt)})

/* Walk the kept dims K (output element o, in row-major order) and call fn on each, splitting the outputs
 * into one contiguous range per thread. */
static void drive_rows(char *out, const char *inp, const rd_dims *K, const rd_dims *R, row_fn fn, const rd_params *c,
                       int nt) {
    const int64_t nout = K->total;
    if (nt > nout) nt = (int)nout;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int tid = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t lo = nout * tid / T, hi = nout * (tid + 1) / T;
        if (lo < hi) {
            int64_t cnt[GM_MAX_DIMS];
            const char *base = inp;
            int64_t rem = lo;
            for (int d = K->n - 1; d >= 0; d--) {
                cnt[d] = rem % K->shape[d];
                rem /= K->shape[d];
                base += cnt[d] * K->stride[d];
            }
            for (int64_t o = lo; o < hi; o++) {
                fn(out, o, base, R, c);
                for (int d = K->n - 1; d >= 0; d--) {
                    if (++cnt[d] < K->shape[d]) { base += K->stride[d]; break; }
                    cnt[d] = 0;
                    base -= K->stride[d] * (K->shape[d] - 1);
                }
            }
        }
    }
}

/* The tiled walk: work items are TILE-wide runs of the innermost kept dim. */
static void drive_tiles(char *out, const char *inp, const rd_dims *K, const rd_dims *R, tile_fn fn, const rd_params *c,
                        int nt) {
    const int64_t inner = K->shape[K->n - 1], ks = K->stride[K->n - 1];
    const int64_t ntile = (inner + TILE - 1) / TILE, items = K->total / inner * ntile;
    if (nt > items) nt = (int)items;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t it = 0; it < items; it++) {
        int64_t oi = it / ntile, t0 = it % ntile * TILE, rem = oi;
        const char *base = inp + t0 * ks;
        for (int d = K->n - 2; d >= 0; d--) {
            base += rem % K->shape[d] * K->stride[d];
            rem /= K->shape[d];
        }
        int64_t n = inner - t0 < TILE ? inner - t0 : TILE;
        fn(out, oi * inner + t0, n, ks, base, R, c);
    }
}

static void drive(char *out, const char *inp, const rd_dims *K, const rd_dims *R, rfns fns, const rd_params *c,
                  int nthreads) {
    const int64_t nout = K->total;
    if (nout <= 0) return;
    int64_t work = nout * (R->total > 0 ? R->total : 1);
    int nt = nthreads > 1 && nout > 1 && work >= REDUCE_PARALLEL_GRAIN ? nthreads : 1;
    /* Tiles pay off when stepping to the next output is a shorter jump than stepping to the next reduced
     * element: then neighbouring outputs share cache lines that one-at-a-time would fetch again and again. */
    int64_t kst = rd_abs64(K->stride[K->n - 1]), rst = rd_abs64(R->stride[R->n - 1]);
    if (K->shape[K->n - 1] > 1 && R->total > 1 && kst < rst)
        drive_tiles(out, inp, K, R, fns.tile, c, nt);
    else
        drive_rows(out, inp, K, R, fns.row, c, nt);
}

int cpu_reduce_forward(void *out, gm_dtype out_dt, const void *inp, gm_dtype inp_dt, const reduce_geom *g,
                       int op, int nthreads) {
    if (!rd_check_geom(g) || !rd_valid_dtype(out_dt) || !rd_valid_dtype(inp_dt)) return GM_ERR_ARG;
    rd_dims K, R;
    rd_simplify_geom(g, &K, &R, 1);
    if (K.total == 0) return GM_OK;
    if (!out || (R.total > 0 && !inp)) return GM_ERR_ARG;
    rd_params c = rd_make_params(out_dt);
    /* Accumulate in double whenever a float is involved (on either side), exactly in int64 otherwise. */
    int in_double = gm_dtype_is_float(inp_dt) || gm_dtype_is_float(out_dt);
    rfns fn;
    switch (op) {
    case REDUCE_SUM:
        fn = in_double ? FNS_DOUBLE(sum, inp_dt) : FNS_INT(sum, inp_dt);
        break;
    case REDUCE_MEAN:
        if (!gm_dtype_is_float(out_dt)) return GM_ERR_UNSUPPORTED;
        c.div = (double)R.total; /* 0 for an empty extent: 0/0 gives the NaN PyTorch returns */
        fn = FNS_DOUBLE(sum, inp_dt);
        break;
    case REDUCE_PROD:
        fn = in_double ? FNS_DOUBLE(prod, inp_dt) : FNS_INT(prod, inp_dt);
        break;
    case REDUCE_AMAX:
    case REDUCE_AMIN:
        if (out_dt != inp_dt) return GM_ERR_ARG;
        if (R.total == 0) return GM_ERR_ARG; /* no identity: the caller reports the shape */
        if (gm_dtype_is_float(inp_dt))
            fn = op == REDUCE_AMAX ? FNS_DOUBLE(amax, inp_dt) : FNS_DOUBLE(amin, inp_dt);
        else
            fn = op == REDUCE_AMAX ? FNS_INT(amax, inp_dt) : FNS_INT(amin, inp_dt);
        break;
    default:
        return GM_ERR_ARG;
    }
    drive((char *)out, (const char *)inp, &K, &R, fn, &c, nthreads);
    return GM_OK;
}

int cpu_reduce_arg_forward(void *values, int64_t *indices, const void *inp, gm_dtype dt, const reduce_geom *g,
                           int is_max, int nthreads) {
    if (!rd_check_geom(g) || !rd_valid_dtype(dt)) return GM_ERR_ARG;
    rd_dims K, R;
    rd_simplify_geom(g, &K, &R, 0); /* no reordering: "first" is row-major order */
    if (K.total == 0) return GM_OK;
    if (R.total == 0 || !indices || !inp) return GM_ERR_ARG;
    rd_params c = rd_make_params(dt);
    c.indices = indices;
    c.values = (char *)values;
    rfns fn;
    if (gm_dtype_is_float(dt))
        fn = is_max ? FNS_DOUBLE(argmax, dt) : FNS_DOUBLE(argmin, dt);
    else
        fn = is_max ? FNS_INT(argmax, dt) : FNS_INT(argmin, dt);
    drive(NULL, (const char *)inp, &K, &R, fn, &c, nthreads);
    return GM_OK;
}

int cpu_reduce_var_forward(void *out, const void *inp, gm_dtype dt, const reduce_geom *g, double correction,
                           int nthreads) {
    if (!rd_check_geom(g) || !rd_valid_dtype(dt)) return GM_ERR_ARG;
    if (!gm_dtype_is_float(dt)) return GM_ERR_UNSUPPORTED;
    rd_dims K, R;
    rd_simplify_geom(g, &K, &R, 1);
    if (K.total == 0) return GM_OK;
    if (!out || (R.total > 0 && !inp)) return GM_ERR_ARG;
    rd_params c = rd_make_params(dt);
    c.correction = correction;
    drive((char *)out, (const char *)inp, &K, &R, FNS_DOUBLE(var, dt), &c, nthreads);
    return GM_OK;
}
