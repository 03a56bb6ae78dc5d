/* kernels/cpu/elementwise.c — CPU elementwise kernels (see elementwise.h for the contract).
 *
 * Structure: one strided N-d driver (ew_run) walks any number of operands over a shape, after dropping size-1
 * dims and coalescing dims that are contiguous in every operand, and calls a 1-d inner loop on each run of the
 * innermost dim. Inner loops are generated per (op, dtype) by macros; each has a unit-stride fast path (which
 * the compiler vectorises) and a generic strided path. Large problems are split into equal ranges of linear
 * indices, one per OpenMP thread, so that parallelism does not depend on which dim happens to be outermost. */
#include "elementwise.h"
#include "bf16_convert.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many elements a parallel region costs more than it saves (~10 us of fork/join vs ~1 ns/element). */
#define EW_PARALLEL_MIN 32768
#define EW_MAXOPS 4

#define EW_CAT_(a, b) a##b
#define EW_CAT(a, b) EW_CAT_(a, b)
#define EW_CAT3_(a, b, c) a##b##c
#define EW_CAT3(a, b, c) EW_CAT3_(a, b, c)

/* ---- the strided driver --------------------------------------------------------------------------------- */

/* p[k]: operand k at the start of the run (NULL: scalar operand, left NULL), s[k]: its byte stride in the run. */
typedef void (*ew_loop)(int64_t n, char *const *p, const int64_t *s, const void *ctx);

typedef struct {
    int nops, ndim;
    int64_t shape[GM_MAX_DIMS];
    int64_t st[EW_MAXOPS][GM_MAX_DIMS];
    char *base[EW_MAXOPS];
} ew_iter;

/* Run fn over linear indices [begin, end) of the (coalesced) iteration space. */
static void ew_range(const ew_iter *it, int64_t begin, int64_t end, ew_loop fn, const void *ctx) {
    const int last = it->ndim - 1, nops = it->nops;
    int64_t idx[GM_MAX_DIMS], inner[EW_MAXOPS];
    char *p[EW_MAXOPS];
    int64_t rem = begin;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    for (int k = 0; k < nops; k++) {
        inner[k] = it->st[k][last];
        p[k] = it->base[k];
        if (!p[k]) continue;
        for (int d = 0; d <= last; d++) p[k] += idx[d] * it->st[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = it->shape[last] - idx[last];
        if (n > end - pos) n = end - pos;
        fn(n, p, inner, ctx);
        pos += n;
        if (pos >= end) break;
        idx[last] += n;
        for (int k = 0; k < nops; k++)
            if (p[k]) p[k] += n * inner[k];
        for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) { /* carry into the next outer dim */
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < nops; k++)
                if (p[k]) p[k] += it->st[k][d - 1] - it->shape[d] * it->st[k][d];
        }
    }
}

/* strides[k] may be NULL for a scalar operand (base[k] == NULL). */
static int ew_run(int nops, char *const *base, const int64_t *const *strides, int ndim, const int64_t *shape,
                  ew_loop fn, const void *ctx, int nthreads) {
    if (ndim < 0 || ndim > GM_MAX_DIMS || nops > EW_MAXOPS || !fn) return GM_ERR_ARG;
    ew_iter it;
    it.nops = nops;
    int nd = 0;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return GM_ERR_ARG;
        if (shape[d] == 0) return GM_OK;
        numel *= shape[d];
        if (shape[d] == 1) continue;
        int merge = nd > 0;
        for (int k = 0; merge && k < nops; k++)
            if (base[k] && it.st[k][nd - 1] != strides[k][d] * shape[d]) merge = 0;
        if (merge) { /* dim d continues dim nd-1 in every operand: one longer dim */
            it.shape[nd - 1] *= shape[d];
            for (int k = 0; k < nops; k++) it.st[k][nd - 1] = base[k] ? strides[k][d] : 0;
        } else {
            it.shape[nd] = shape[d];
            for (int k = 0; k < nops; k++) it.st[k][nd] = base[k] ? strides[k][d] : 0;
            nd++;
        }
    }
    if (nd == 0) { /* a single element */
        it.shape[0] = 1;
        for (int k = 0; k < nops; k++) it.st[k][0] = 0;
        nd = 1;
    }
    it.ndim = nd;
    for (int k = 0; k < nops; k++) it.base[k] = base[k];

    int nt = nthreads < 1 ? 1 : nthreads;
    if (numel < EW_PARALLEL_MIN) nt = 1;
    else if (nt > numel / (EW_PARALLEL_MIN / 4)) nt = (int)(numel / (EW_PARALLEL_MIN / 4));
    if (nt <= 1) {
        ew_range(&it, 0, numel, fn, ctx);
        return GM_OK;
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int t = 0; t < nt; t++) ew_range(&it, numel * t / nt, numel * (t + 1) / nt, fn, ctx);
    return GM_OK;
}

/* ---- dtypes: storage type, compute type, load/store, compute kind (f float, d double, i int64) ----------- */
#define T_f32 float
#define CT_f32 float
#define LD_f32(x) (x)
#define ST_f32(v) (v)
#define K_f32 f

#define T_f64 double
#define CT_f64 double
#define LD_f64(x) (x)
#define ST_f64(v) (v)
#define K_f64 d

#define T_f16 uint16_t
#define CT_f16 float
#define LD_f16(x) gm_half_to_float(x)
#define ST_f16(v) gm_float_to_half(v)
#define K_f16 f

#define T_bf16 uint16_t
#define CT_bf16 float
#define LD_bf16(x) gm_bf16_to_float(x)
#define ST_bf16(v) gm_float_to_bf16(v)
#define K_bf16 f

#define T_i64 int64_t
#define CT_i64 int64_t
#define LD_i64(x) (x)
#define ST_i64(v) (v)
#define K_i64 i

#define T_b8 uint8_t
#define CT_b8 int64_t
#define LD_b8(x) ((int64_t)((x) != 0))
#define ST_b8(v) ((uint8_t)((v) != 0))
#define K_b8 i

#define ST_cmp(v) ((uint8_t)(v))

/* a scalar operand in each compute kind */
#define SC_f(s) ((float)(s)->f)
#define SC_d(s) ((s)->f)
#define SC_i(s) ((s)->i)

/* ---- scalar op definitions per compute kind ---------------------------------------------------------------- */
#define EW_FLOAT_OPS(K, CT, POW, EXP, LOG, SQRT, FABS, FMOD, ATAN2, FLOORDIV)                                 \
    static inline CT ew_floordiv_##K(CT x, CT y) { return FLOORDIV(x, y, FMOD(x, y)); }                     \
    static inline CT ew_fmod_##K(CT x, CT y) { return FMOD(x, y); }                                         \
    /* Python's %: fmod moved to the sign of y (PyTorch's remainder) */                                     \
    static inline CT ew_rem_##K(CT x, CT y) {                                                               \
        CT r = FMOD(x, y);                                                                                  \
        return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;                                                \
    }                                                                                                        \
    static inline CT ew_atan2_##K(CT x, CT y) { return ATAN2(x, y); }                                       \
    static inline CT ew_add_##K(CT x, CT y) { return x + y; }                                               \
    static inline CT ew_sub_##K(CT x, CT y) { return x - y; }                                               \
    static inline CT ew_mul_##K(CT x, CT y) { return x * y; }                                               \
    static inline CT ew_div_##K(CT x, CT y) { return x / y; }                                               \
    /* small integer exponents as PyTorch computes them (x * x, not powf: the library pow is off by an ulp  \
     * on some inputs, which training then amplifies); 0.5 as sqrt, correctly rounded */                    \
    static inline CT ew_pow_##K(CT x, CT y) {                                                               \
        if (y == 2) return x * x;                                                                           \
        if (y == 3) return x * x * x;                                                                       \
        if (y == (CT)0.5) return SQRT(x);                                                                   \
        if (y == -1) return 1 / x;                                                                          \
        if (y == -2) return 1 / (x * x);                                                                    \
        return POW(x, y);                                                                                   \
    }                                                                                                        \
    static inline CT ew_max_##K(CT x, CT y) { return (x != x || y != y) ? x + y : (x > y ? x : y); }       \
    static inline CT ew_min_##K(CT x, CT y) { return (x != x || y != y) ? x + y : (x < y ? x : y); }       \
    static inline int ew_eq_##K(CT x, CT y) { return x == y; }                                              \
    static inline int ew_ne_##K(CT x, CT y) { return x != y; }                                              \
    static inline int ew_lt_##K(CT x, CT y) { return x < y; }                                               \
    static inline int ew_le_##K(CT x, CT y) { return x <= y; }                                              \
    static inline int ew_gt_##K(CT x, CT y) { return x > y; }                                               \
    static inline int ew_ge_##K(CT x, CT y) { return x >= y; }                                              \
    static inline CT ew_neg_##K(CT x) { return -x; }                                                        \
    static inline CT ew_exp_##K(CT x) { return EXP(x); }                                                    \
    static inline CT ew_log_##K(CT x) { return LOG(x); }                                                    \
    static inline CT ew_sqrt_##K(CT x) { return SQRT(x); }                                                  \
    static inline CT ew_abs_##K(CT x) { return FABS(x); }                                                   \
    /* NaN gives 0, as PyTorch's sign does (NumPy's gives NaN); a signed zero passes through */             \
    static inline CT ew_sign_##K(CT x) { return x > 0 ? (CT)1 : (x < 0 ? (CT)-1 : (x == x ? x : (CT)0)); }  \
    static inline int ew_lnot_##K(CT x) { return x == 0; }                                                  \
    /* NaN anywhere propagates (numpy.clip); a missing bound is +-inf */                                    \
    static inline CT ew_clamp_##K(CT x, CT lo, CT hi) {                                                     \
        if (x != x || lo != lo || hi != hi) return x + lo + hi;                                             \
        x = x < lo ? lo : x;                                                                                \
        return x > hi ? hi : x;                                                                             \
    }
EW_FLOAT_OPS(f, float, powf, expf, logf, sqrtf, fabsf, fmodf, atan2f, gm_floordiv_f32)
EW_FLOAT_OPS(d, double, pow, exp, log, sqrt, fabs, fmod, atan2, gm_floordiv_f64)
/* rint rounds half to even under the default rounding mode, as torch.round and numpy.rint do */
static inline float ew_round_f(float x) { return rintf(x); }
static inline double ew_round_d(double x) { return rint(x); }
static inline float ew_floor_f(float x) { return floorf(x); }
static inline double ew_floor_d(double x) { return floor(x); }
static inline float ew_ceil_f(float x) { return ceilf(x); }
static inline double ew_ceil_d(double x) { return ceil(x); }
/* the math library's functions: sinf for float (and the half types, computed in float), sin for double */
#define EW_LIBM(OP)                                                                                            \
    static inline float ew_##OP##_f(float x) { return OP##f(x); }                                             \
    static inline double ew_##OP##_d(double x) { return OP(x); }
EW_LIBM(sin) EW_LIBM(cos) EW_LIBM(tan) EW_LIBM(asin) EW_LIBM(acos) EW_LIBM(atan) EW_LIBM(sinh) EW_LIBM(cosh)
EW_LIBM(erf) EW_LIBM(erfc) EW_LIBM(log1p) EW_LIBM(expm1) EW_LIBM(log2) EW_LIBM(log10) EW_LIBM(exp2)
#undef EW_LIBM

/* int64 arithmetic goes through uint64 so that overflow wraps (as in PyTorch) instead of being UB. */
static inline int64_t ew_add_i(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
static inline int64_t ew_sub_i(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
static inline int64_t ew_mul_i(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }
/* x/0 and INT64_MIN/-1 would trap (SIGFPE) and kill the interpreter; give 0 / wrap instead. */
static inline int64_t ew_div_i(int64_t x, int64_t y) {
    if (y == 0) return 0;
    if (y == -1) return ew_sub_i(0, x);
    return x / y;
}
static inline int64_t ew_pow_i(int64_t x, int64_t y) {
    if (y < 0) { /* PyTorch's integer pow: only |base| == 1 survives a negative exponent */
        if (x == 1) return 1;
        if (x == -1) return (y & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)x;
    while (y) {
        if (y & 1) r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}
/* x % 0 and INT64_MIN % -1 would trap: 0 instead (both are 0 for every other -1 too) */
static inline int64_t ew_fmod_i(int64_t x, int64_t y) { return (y == 0 || y == -1) ? 0 : x % y; }
static inline int64_t ew_rem_i(int64_t x, int64_t y) {
    int64_t r = ew_fmod_i(x, y);
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
/* floor(x / y) exactly (x // 0 is 0, INT64_MIN // -1 wraps, as ew_div_i) */
static inline int64_t ew_floordiv_i(int64_t x, int64_t y) {
    int64_t q = ew_div_i(x, y);
    return (y != 0 && y != -1 && x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
static inline int64_t ew_max_i(int64_t x, int64_t y) { return x > y ? x : y; }
static inline int64_t ew_min_i(int64_t x, int64_t y) { return x < y ? x : y; }
static inline int ew_eq_i(int64_t x, int64_t y) { return x == y; }
static inline int ew_ne_i(int64_t x, int64_t y) { return x != y; }
static inline int ew_lt_i(int64_t x, int64_t y) { return x < y; }
static inline int ew_le_i(int64_t x, int64_t y) { return x <= y; }
static inline int ew_gt_i(int64_t x, int64_t y) { return x > y; }
static inline int ew_ge_i(int64_t x, int64_t y) { return x >= y; }
static inline int64_t ew_neg_i(int64_t x) { return ew_sub_i(0, x); }
static inline int64_t ew_abs_i(int64_t x) { return x < 0 ? ew_sub_i(0, x) : x; }
static inline int64_t ew_sign_i(int64_t x) { return (x > 0) - (x < 0); }
static inline int ew_lnot_i(int64_t x) { return x == 0; }
static inline int64_t ew_clamp_i(int64_t x, int64_t lo, int64_t hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

/* ---- binary loops ------------------------------------------------------------------------------------------ */
typedef struct {
    const gm_scalar *a, *b;
} ew_bin_ctx;

/* An operand is "constant" in a run when it is a scalar or has stride 0 there (a broadcast inner dim): it is
 * loaded once, which also gives the vectorisable tensor-scalar fast paths. */
#define EW_BIN_LOOP(NAME, T, CT, OT, LD, ST, FN, SC)                                                           \
    static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                          \
        const ew_bin_ctx *c = (const ew_bin_ctx *)ctx;                                                          \
        char *o = p[0];                                                                                        \
        const char *pa = p[1], *pb = p[2];                                                                     \
        const int64_t so = s[0], sa = s[1], sb = s[2];                                                         \
        const int ac = !pa || sa == 0, bc = !pb || sb == 0;                                                    \
        const CT xs = ac ? (pa ? LD(*(const T *)pa) : SC(c->a)) : (CT)0;                                       \
        const CT ys = bc ? (pb ? LD(*(const T *)pb) : SC(c->b)) : (CT)0;                                       \
        if (so == (int64_t)sizeof(OT)) {                                                                       \
            OT *ov = (OT *)o;                                                                                  \
            const T *av = (const T *)pa, *bv = (const T *)pb;                                                  \
            if (!ac && !bc && sa == (int64_t)sizeof(T) && sb == (int64_t)sizeof(T)) {                          \
                for (int64_t i = 0; i < n; i++) ov[i] = ST(FN(LD(av[i]), LD(bv[i])));                          \
                return;                                                                                        \
            }                                                                                                  \
            if (!ac && bc && sa == (int64_t)sizeof(T)) {                                                       \
                for (int64_t i = 0; i < n; i++) ov[i] = ST(FN(LD(av[i]), ys));                                 \
                return;                                                                                        \
            }                                                                                                  \
            if (ac && !bc && sb == (int64_t)sizeof(T)) {                                                       \
                for (int64_t i = 0; i < n; i++) ov[i] = ST(FN(xs, LD(bv[i])));                                 \
                return;                                                                                        \
            }                                                                                                  \
        }                                                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                                      \
            const CT x = ac ? xs : LD(*(const T *)(pa + i * sa));                                              \
            const CT y = bc ? ys : LD(*(const T *)(pb + i * sb));                                              \
            *(OT *)(o + i * so) = ST(FN(x, y));                                                                \
        }                                                                                                      \
    }

#define EW_BIN_ARITH(OP, D) \
    EW_BIN_LOOP(bin_##OP##_##D, T_##D, CT_##D, T_##D, LD_##D, ST_##D, EW_CAT(ew_##OP##_, K_##D), EW_CAT(SC_, K_##D))
#define EW_BIN_CMP(OP, D) \
    EW_BIN_LOOP(bin_##OP##_##D, T_##D, CT_##D, uint8_t, LD_##D, ST_cmp, EW_CAT(ew_##OP##_, K_##D), EW_CAT(SC_, K_##D))

#define EW_FOR_DTYPES(X, A) X(A, f32) X(A, f64) X(A, f16) X(A, bf16) X(A, i64) X(A, b8)
#define EW_ARITH_ALL(OP, D) EW_BIN_ARITH(OP, D)
#define EW_CMP_ALL(OP, D) EW_BIN_CMP(OP, D)
EW_FOR_DTYPES(EW_ARITH_ALL, add)
EW_FOR_DTYPES(EW_ARITH_ALL, sub)
EW_FOR_DTYPES(EW_ARITH_ALL, mul)
EW_FOR_DTYPES(EW_ARITH_ALL, div)
EW_FOR_DTYPES(EW_ARITH_ALL, pow)
EW_FOR_DTYPES(EW_ARITH_ALL, max)
EW_FOR_DTYPES(EW_ARITH_ALL, min)
EW_FOR_DTYPES(EW_CMP_ALL, eq)
EW_FOR_DTYPES(EW_CMP_ALL, ne)
EW_FOR_DTYPES(EW_CMP_ALL, lt)
EW_FOR_DTYPES(EW_CMP_ALL, le)
EW_FOR_DTYPES(EW_CMP_ALL, gt)
EW_FOR_DTYPES(EW_CMP_ALL, ge)
EW_FOR_DTYPES(EW_ARITH_ALL, fmod) /* bool: refused by the dispatcher below (the loop keeps the table regular) */
EW_FOR_DTYPES(EW_ARITH_ALL, rem)
EW_FOR_DTYPES(EW_ARITH_ALL, floordiv)
EW_BIN_ARITH(atan2, f32) EW_BIN_ARITH(atan2, f64) EW_BIN_ARITH(atan2, f16) EW_BIN_ARITH(atan2, bf16)

/* Table rows in gm_dtype order: F32, F64, F16, BF16, I64, BOOL. */
#define EW_ROW(OP) {bin_##OP##_f32, bin_##OP##_f64, bin_##OP##_f16, bin_##OP##_bf16, bin_##OP##_i64, bin_##OP##_b8}
static const ew_loop bin_loops[GM_EW_NBINARY][GM_NDTYPES] = {
    EW_ROW(add), EW_ROW(sub), EW_ROW(mul), EW_ROW(div), EW_ROW(pow), EW_ROW(max), EW_ROW(min),
    EW_ROW(eq), EW_ROW(ne), EW_ROW(lt), EW_ROW(le), EW_ROW(gt), EW_ROW(ge), EW_ROW(fmod), EW_ROW(rem),
    {bin_atan2_f32, bin_atan2_f64, bin_atan2_f16, bin_atan2_bf16, NULL, NULL}, /* integers: computed in float32 */
    EW_ROW(floordiv),
};

int elementwise_binary_forward(char *out, const int64_t *so,
                               const char *a, const int64_t *sa, const gm_scalar *as,
                               const char *b, const int64_t *sb, const gm_scalar *bs,
                               int op, gm_dtype dt, int ndim, const int64_t *shape, int nthreads) {
    if (op < 0 || op >= GM_EW_NBINARY || (int)dt < 0 || dt >= GM_NDTYPES || !out) return GM_ERR_ARG;
    if ((!a && !as) || (!b && !bs)) return GM_ERR_ARG;
    if (!bin_loops[op][dt] || (dt == GM_BOOL && (op == GM_EW_SUB || op >= GM_EW_FMOD)))
        return GM_ERR_UNSUPPORTED;
    char *base[3] = {out, (char *)a, (char *)b};
    const int64_t *st[3] = {so, sa, sb};
    ew_bin_ctx c = {as, bs};
    return ew_run(3, base, st, ndim, shape, bin_loops[op][dt], &c, nthreads);
}

/* ---- unary loops ------------------------------------------------------------------------------------------- */
#define EW_UN_LOOP(NAME, T, CT, OT, LD, ST, FN)                                                                \
    static void NAME(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                          \
        (void)ctx;                                                                                             \
        char *o = p[0];                                                                                        \
        const char *pa = p[1];                                                                                 \
        const int64_t so = s[0], sa = s[1];                                                                    \
        if (so == (int64_t)sizeof(OT) && sa == (int64_t)sizeof(T)) {                                           \
            OT *ov = (OT *)o;                                                                                  \
            const T *av = (const T *)pa;                                                                       \
            for (int64_t i = 0; i < n; i++) ov[i] = ST(FN(LD(av[i])));                                         \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t i = 0; i < n; i++) *(OT *)(o + i * so) = ST(FN(LD(*(const T *)(pa + i * sa))));          \
    }
#define EW_UN(OP, D) EW_UN_LOOP(un_##OP##_##D, T_##D, CT_##D, T_##D, LD_##D, ST_##D, EW_CAT(ew_##OP##_, K_##D))
#define EW_UN_BOOL(OP, D) EW_UN_LOOP(un_##OP##_##D, T_##D, CT_##D, uint8_t, LD_##D, ST_cmp, EW_CAT(ew_##OP##_, K_##D))
#define EW_FOR_FLOATS(X, A) X(A, f32) X(A, f64) X(A, f16) X(A, bf16)
#define EW_UN_ALL(OP, D) EW_UN(OP, D)
#define EW_UN_BOOL_ALL(OP, D) EW_UN_BOOL(OP, D)
EW_FOR_DTYPES(EW_UN_ALL, neg)
EW_FOR_FLOATS(EW_UN_ALL, exp)
EW_FOR_FLOATS(EW_UN_ALL, log)
EW_FOR_FLOATS(EW_UN_ALL, sqrt)
EW_FOR_FLOATS(EW_UN_ALL, round)
EW_FOR_FLOATS(EW_UN_ALL, floor)
EW_FOR_FLOATS(EW_UN_ALL, ceil)
EW_FOR_DTYPES(EW_UN_ALL, abs)
EW_FOR_DTYPES(EW_UN_ALL, sign)
EW_FOR_DTYPES(EW_UN_BOOL_ALL, lnot)
EW_FOR_FLOATS(EW_UN_ALL, sin) EW_FOR_FLOATS(EW_UN_ALL, cos) EW_FOR_FLOATS(EW_UN_ALL, tan)
EW_FOR_FLOATS(EW_UN_ALL, asin) EW_FOR_FLOATS(EW_UN_ALL, acos) EW_FOR_FLOATS(EW_UN_ALL, atan)
EW_FOR_FLOATS(EW_UN_ALL, sinh) EW_FOR_FLOATS(EW_UN_ALL, cosh) EW_FOR_FLOATS(EW_UN_ALL, erf)
EW_FOR_FLOATS(EW_UN_ALL, erfc) EW_FOR_FLOATS(EW_UN_ALL, log1p) EW_FOR_FLOATS(EW_UN_ALL, expm1)
EW_FOR_FLOATS(EW_UN_ALL, log2) EW_FOR_FLOATS(EW_UN_ALL, log10) EW_FOR_FLOATS(EW_UN_ALL, exp2)

#define EW_UROW(OP) {un_##OP##_f32, un_##OP##_f64, un_##OP##_f16, un_##OP##_bf16, un_##OP##_i64, un_##OP##_b8}
#define EW_UROW_F(OP) {un_##OP##_f32, un_##OP##_f64, un_##OP##_f16, un_##OP##_bf16, NULL, NULL}
static const ew_loop un_loops[GM_EW_NUNARY][GM_NDTYPES] = {
    /* neg of bool is refused below (PyTorch refuses it too); the loop exists only to keep the table regular */
    EW_UROW(neg), EW_UROW_F(exp), EW_UROW_F(log), EW_UROW_F(sqrt), EW_UROW(abs), EW_UROW(sign), EW_UROW(lnot),
    EW_UROW_F(round), EW_UROW_F(floor), EW_UROW_F(ceil), EW_UROW_F(sin), EW_UROW_F(cos), EW_UROW_F(tan),
    EW_UROW_F(asin), EW_UROW_F(acos), EW_UROW_F(atan), EW_UROW_F(sinh), EW_UROW_F(cosh), EW_UROW_F(erf),
    EW_UROW_F(erfc), EW_UROW_F(log1p), EW_UROW_F(expm1), EW_UROW_F(log2), EW_UROW_F(log10), EW_UROW_F(exp2),
};

int elementwise_unary_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                              int op, gm_dtype dt, int ndim, const int64_t *shape, int nthreads) {
    if (op < 0 || op >= GM_EW_NUNARY || (int)dt < 0 || dt >= GM_NDTYPES || !out || !a) return GM_ERR_ARG;
    if (!un_loops[op][dt] || (op == GM_EW_NEG && dt == GM_BOOL)) return GM_ERR_UNSUPPORTED;
    char *base[2] = {out, (char *)a};
    const int64_t *st[2] = {so, sa};
    return ew_run(2, base, st, ndim, shape, un_loops[op][dt], NULL, nthreads);
}

/* ---- clamp ------------------------------------------------------------------------------------------------- */
typedef struct {
    const gm_scalar *lo, *hi;
} ew_clamp_ctx;

#define EW_CLAMP_LOOP(D)                                                                                       \
    static void clamp_##D(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                     \
        const ew_clamp_ctx *c = (const ew_clamp_ctx *)ctx;                                                      \
        char *o = p[0];                                                                                        \
        const char *pa = p[1], *pl = p[2], *ph = p[3];                                                         \
        const int lc = !pl || s[2] == 0, hc = !ph || s[3] == 0;                                                \
        const CT_##D los = lc ? (pl ? LD_##D(*(const T_##D *)pl) : EW_CAT(SC_, K_##D)(c->lo)) : 0;              \
        const CT_##D his = hc ? (ph ? LD_##D(*(const T_##D *)ph) : EW_CAT(SC_, K_##D)(c->hi)) : 0;              \
        if (lc && hc && s[0] == (int64_t)sizeof(T_##D) && s[1] == (int64_t)sizeof(T_##D)) {                    \
            T_##D *ov = (T_##D *)o;                                                                            \
            const T_##D *av = (const T_##D *)pa;                                                               \
            for (int64_t i = 0; i < n; i++) ov[i] = ST_##D(EW_CAT(ew_clamp_, K_##D)(LD_##D(av[i]), los, his));  \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                                      \
            const CT_##D x = LD_##D(*(const T_##D *)(pa + i * s[1]));                                          \
            const CT_##D lo = lc ? los : LD_##D(*(const T_##D *)(pl + i * s[2]));                              \
            const CT_##D hi = hc ? his : LD_##D(*(const T_##D *)(ph + i * s[3]));                              \
            *(T_##D *)(o + i * s[0]) = ST_##D(EW_CAT(ew_clamp_, K_##D)(x, lo, hi));                            \
        }                                                                                                      \
    }
EW_CLAMP_LOOP(f32)
EW_CLAMP_LOOP(f64)
EW_CLAMP_LOOP(f16)
EW_CLAMP_LOOP(bf16)
EW_CLAMP_LOOP(i64)
EW_CLAMP_LOOP(b8)
static const ew_loop clamp_loops[GM_NDTYPES] = {clamp_f32, clamp_f64, clamp_f16, clamp_bf16, clamp_i64, clamp_b8};

int elementwise_clamp_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                              const char *lo, const int64_t *slo, const gm_scalar *los,
                              const char *hi, const int64_t *shi, const gm_scalar *his,
                              gm_dtype dt, int ndim, const int64_t *shape, int nthreads) {
    /* A missing bound becomes the identity bound, so the loop has no "has bound" branches. */
    static const gm_scalar no_lo = {-INFINITY, INT64_MIN}, no_hi = {INFINITY, INT64_MAX};
    if ((int)dt < 0 || dt >= GM_NDTYPES || !out || !a) return GM_ERR_ARG;
    char *base[4] = {out, (char *)a, (char *)lo, (char *)hi};
    const int64_t *st[4] = {so, sa, slo, shi};
    ew_clamp_ctx c = {lo || los ? los : &no_lo, hi || his ? his : &no_hi};
    return ew_run(4, base, st, ndim, shape, clamp_loops[dt], &c, nthreads);
}

/* ---- where, fill, same-dtype copy: only element size matters ------------------------------------------------ */
/* The scalar of `where` and `fill` is rounded to dt once and then moved as bytes. */
static void ew_scalar_bytes(const gm_scalar *v, gm_dtype dt, void *dst) {
    switch (dt) {
    case GM_F32: { float x = (float)v->f; memcpy(dst, &x, 4); break; }
    case GM_F64: memcpy(dst, &v->f, 8); break;
    case GM_F16: { uint16_t x = gm_float_to_half((float)v->f); memcpy(dst, &x, 2); break; }
    case GM_BF16: { uint16_t x = gm_float_to_bf16((float)v->f); memcpy(dst, &x, 2); break; }
    case GM_I64: memcpy(dst, &v->i, 8); break;
    case GM_BOOL: *(uint8_t *)dst = (uint8_t)(v->f != 0 || v->i != 0); break;
    case GM_U8: case GM_I8: *(uint8_t *)dst = (uint8_t)(uint64_t)v->i; break; /* the low bits, as a cast */
    case GM_I16: { uint16_t x = (uint16_t)(uint64_t)v->i; memcpy(dst, &x, 2); break; }
    case GM_I32: { uint32_t x = (uint32_t)(uint64_t)v->i; memcpy(dst, &x, 4); break; }
    default: break;
    }
}

#define EW_WHERE_LOOP(U)                                                                                       \
    static void where_##U(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                     \
        (void)ctx;                                                                                             \
        char *o = p[0];                                                                                        \
        const char *pc = p[1], *pa = p[2], *pb = p[3];                                                         \
        if (s[0] == (int64_t)sizeof(U) && s[1] == 1 && s[2] == (int64_t)sizeof(U) && s[3] == (int64_t)sizeof(U)) { \
            U *ov = (U *)o;                                                                                    \
            const U *av = (const U *)pa, *bv = (const U *)pb;                                                  \
            for (int64_t i = 0; i < n; i++) ov[i] = pc[i] ? av[i] : bv[i];                                     \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t i = 0; i < n; i++)                                                                        \
            *(U *)(o + i * s[0]) = pc[i * s[1]] ? *(const U *)(pa + i * s[2]) : *(const U *)(pb + i * s[3]);  \
    }
EW_WHERE_LOOP(uint8_t)
EW_WHERE_LOOP(uint16_t)
EW_WHERE_LOOP(uint32_t)
EW_WHERE_LOOP(uint64_t)

static ew_loop ew_by_size(size_t size, ew_loop l1, ew_loop l2, ew_loop l4, ew_loop l8) {
    return size == 1 ? l1 : size == 2 ? l2 : size == 4 ? l4 : size == 8 ? l8 : NULL;
}

int elementwise_where_forward(char *out, const int64_t *so, const char *cond, const int64_t *sc,
                              const char *a, const int64_t *sa, const gm_scalar *as,
                              const char *b, const int64_t *sb, const gm_scalar *bs,
                              gm_dtype dt, int ndim, const int64_t *shape, int nthreads) {
    if ((int)dt < 0 || dt >= GM_NDTYPES || !out || !cond || (!a && !as) || (!b && !bs)) return GM_ERR_ARG;
    /* A scalar becomes a one-element operand on the stack with all-zero strides. */
    static const int64_t zeros[GM_MAX_DIMS] = {0};
    uint64_t abuf = 0, bbuf = 0;
    if (!a) { ew_scalar_bytes(as, dt, &abuf); a = (const char *)&abuf; sa = zeros; }
    if (!b) { ew_scalar_bytes(bs, dt, &bbuf); b = (const char *)&bbuf; sb = zeros; }
    char *base[4] = {out, (char *)cond, (char *)a, (char *)b};
    const int64_t *st[4] = {so, sc, sa, sb};
    ew_loop fn = ew_by_size(gm_dtype_size(dt), where_uint8_t, where_uint16_t, where_uint32_t, where_uint64_t);
    return ew_run(4, base, st, ndim, shape, fn, NULL, nthreads);
}

#define EW_FILL_LOOP(U)                                                                                        \
    static void fill_##U(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                      \
        const U v = *(const U *)ctx;                                                                           \
        if (s[0] == (int64_t)sizeof(U)) {                                                                      \
            U *ov = (U *)p[0];                                                                                 \
            for (int64_t i = 0; i < n; i++) ov[i] = v;                                                         \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t i = 0; i < n; i++) *(U *)(p[0] + i * s[0]) = v;                                           \
    }
EW_FILL_LOOP(uint8_t)
EW_FILL_LOOP(uint16_t)
EW_FILL_LOOP(uint32_t)
EW_FILL_LOOP(uint64_t)

int elementwise_fill_forward(char *out, const int64_t *so, gm_dtype dt, const gm_scalar *value,
                             int ndim, const int64_t *shape, int nthreads) {
    if ((int)dt < 0 || dt >= GM_NDTYPES_ALL || !out || !value) return GM_ERR_ARG;
    uint64_t v = 0;
    ew_scalar_bytes(value, dt, &v);
    char *base[1] = {out};
    const int64_t *st[1] = {so};
    return ew_run(1, base, st, ndim, shape,
                  ew_by_size(gm_dtype_size(dt), fill_uint8_t, fill_uint16_t, fill_uint32_t, fill_uint64_t), &v,
                  nthreads);
}

#define EW_COPY_LOOP(U)                                                                                        \
    static void copy_##U(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                      \
        (void)ctx;                                                                                             \
        if (s[0] == (int64_t)sizeof(U) && s[1] == (int64_t)sizeof(U)) {                                        \
            memmove(p[0], p[1], (size_t)n * sizeof(U)); /* memmove: dst may be src itself */                   \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t i = 0; i < n; i++) *(U *)(p[0] + i * s[0]) = *(const U *)(p[1] + i * s[1]);               \
    }
EW_COPY_LOOP(uint8_t)
EW_COPY_LOOP(uint16_t)
EW_COPY_LOOP(uint32_t)
EW_COPY_LOOP(uint64_t)

/* ---- casts --------------------------------------------------------------------------------------------------- */
/* Source values widen to double (floats) or int64 (ints), then narrow to the destination. Every float widening is
 * exact, so this equals a direct conversion except float64 -> float16/bfloat16 and int64 -> float16/bfloat16,
 * which round twice (through float32); the difference is at most one half-ulp tie in rare cases. */
#define WL_f32(x) ((double)(x))
#define WL_f64(x) (x)
#define WL_f16(x) ((double)gm_half_to_float(x))
#define WL_bf16(x) ((double)gm_bf16_to_float(x))
#define WL_i64(x) (x)
#define WL_b8(x) ((int64_t)((x) != 0))
#define WK_f32 F
#define WK_f64 F
#define WK_f16 F
#define WK_bf16 F
#define WK_i64 I
#define WK_b8 I
#define CV_F_f32(v) ((float)(v))
#define CV_F_f64(v) (v)
#define CV_F_f16(v) gm_float_to_half((float)(v))
#define CV_F_bf16(v) gm_float_to_bf16((float)(v))
#define CV_F_i64(v) gm_f64_to_i64_sat(v)
#define CV_F_b8(v) ((uint8_t)((v) != 0))
#define CV_I_f32(v) ((float)(v))
#define CV_I_f64(v) ((double)(v))
#define CV_I_f16(v) gm_float_to_half((float)(v))
#define CV_I_bf16(v) gm_float_to_bf16((float)(v))
#define CV_I_i64(v) (v)
#define CV_I_b8(v) ((uint8_t)((v) != 0))

#define EW_CAST_LOOP(S, D)                                                                                     \
    static void cast_##S##_##D(int64_t n, char *const *p, const int64_t *s, const void *ctx) {                \
        (void)ctx;                                                                                             \
        if (s[0] == (int64_t)sizeof(T_##D) && s[1] == (int64_t)sizeof(T_##S)) {                                \
            T_##D *ov = (T_##D *)p[0];                                                                         \
            const T_##S *av = (const T_##S *)p[1];                                                             \
            for (int64_t i = 0; i < n; i++) ov[i] = EW_CAT3(CV_, WK_##S, _##D)(WL_##S(av[i]));                  \
            return;                                                                                            \
        }                                                                                                      \
        for (int64_t i = 0; i < n; i++)                                                                        \
            *(T_##D *)(p[0] + i * s[0]) = EW_CAT3(CV_, WK_##S, _##D)(WL_##S(*(const T_##S *)(p[1] + i * s[1]))); \
    }
#define EW_CAST_FROM(S, D) EW_CAST_LOOP(S, D)
#define EW_CAST_ROW(S) EW_FOR_DTYPES(EW_CAST_FROM, S)
EW_CAST_ROW(f32)
EW_CAST_ROW(f64)
EW_CAST_ROW(f16)
EW_CAST_ROW(bf16)
EW_CAST_ROW(i64)
EW_CAST_ROW(b8)
#define EW_CROW(S) {cast_##S##_f32, cast_##S##_f64, cast_##S##_f16, cast_##S##_bf16, cast_##S##_i64, cast_##S##_b8}
static const ew_loop cast_loops[GM_NDTYPES][GM_NDTYPES] = {
    EW_CROW(f32), EW_CROW(f64), EW_CROW(f16), EW_CROW(bf16), EW_CROW(i64), EW_CROW(b8),
};

/* float32 <-> bfloat16 over contiguous runs at memory speed (bf16_convert.c; autocast casts every weight each
 * region and every weight-gradient back); strided runs take the generated loops. */
static void cast_f32_bf16_fast(int64_t n, char *const *p, const int64_t *s, const void *ctx) {
    if (s[0] == 2 && s[1] == 4) gm_cvt_f32_to_bf16((uint16_t *)p[0], (const float *)p[1], n);
    else cast_f32_bf16(n, p, s, ctx);
}

static void cast_bf16_f32_fast(int64_t n, char *const *p, const int64_t *s, const void *ctx) {
    if (s[0] == 4 && s[1] == 2) gm_cvt_bf16_to_f32((float *)p[0], (const uint16_t *)p[1], n);
    else cast_bf16_f32(n, p, s, ctx);
}

/* A cast involving a storage-only integer dtype: one element at a time through gm_cast_any. */
static void cast_any(int64_t n, char *const *p, const int64_t *s, const void *ctx) {
    const int *dts = (const int *)ctx; /* {source, destination} */
    for (int64_t i = 0; i < n; i++) gm_cast_any(p[0] + i * s[0], dts[1], p[1] + i * s[1], dts[0]);
}

int elementwise_cast_forward(char *out, const int64_t *so, gm_dtype out_dt,
                             const char *a, const int64_t *sa, gm_dtype a_dt,
                             int ndim, const int64_t *shape, int nthreads) {
    if ((int)out_dt < 0 || out_dt >= GM_NDTYPES_ALL || (int)a_dt < 0 || a_dt >= GM_NDTYPES_ALL || !out || !a)
        return GM_ERR_ARG;
    char *base[2] = {out, (char *)a};
    const int64_t *st[2] = {so, sa};
    const int dts[2] = {(int)a_dt, (int)out_dt};
    if (out_dt != a_dt && (gm_dtype_is_narrow(out_dt) || gm_dtype_is_narrow(a_dt)))
        return ew_run(2, base, st, ndim, shape, cast_any, dts, nthreads);
    ew_loop fn = out_dt == a_dt ? NULL : cast_loops[a_dt][out_dt];
    if (a_dt == GM_F32 && out_dt == GM_BF16) fn = cast_f32_bf16_fast;
    if (a_dt == GM_BF16 && out_dt == GM_F32) fn = cast_bf16_f32_fast;
    /* Same dtype (bool included: any nonzero byte stays as is, like a memcpy in PyTorch) moves bytes. */
    if (out_dt == a_dt)
        fn = ew_by_size(gm_dtype_size(a_dt), copy_uint8_t, copy_uint16_t, copy_uint32_t, copy_uint64_t);
    return ew_run(2, base, st, ndim, shape, fn, NULL, nthreads);
}

/* out = a + (float)b, a and out float32, b bfloat16: autocast's bfloat16 weight gradient added into a float32
 * .grad in one pass, instead of a float32 copy of b and then the sum (bit for bit the same: widening is exact). */
static void add_widen_bf16(int64_t n, char *const *p, const int64_t *s, const void *ctx) {
    (void)ctx;
    if (s[0] == 4 && s[1] == 4 && s[2] == 2) {
        gm_add_bf16_to_f32((float *)p[0], (const float *)p[1], (const uint16_t *)p[2], n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t v;
        memcpy(&v, p[2] + i * s[2], 2);
        *(float *)(p[0] + i * s[0]) = *(const float *)(p[1] + i * s[1]) + gm_bf16_to_float(v);
    }
}

int elementwise_add_widen_forward(char *out, const int64_t *so, const char *a, const int64_t *sa, const char *b,
                                  const int64_t *sb, gm_dtype b_dt, int ndim, const int64_t *shape, int nthreads) {
    if (!out || !a || !b || !so || !sa || !sb) return GM_ERR_ARG;
    if (b_dt != GM_BF16) return GM_ERR_UNSUPPORTED;
    char *base[3] = {out, (char *)a, (char *)b};
    const int64_t *st[3] = {so, sa, sb};
    return ew_run(3, base, st, ndim, shape, add_widen_bf16, NULL, nthreads);
}
