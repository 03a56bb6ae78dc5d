/* kernels/cuda/elementwise.cu — CUDA elementwise kernels (contract: elementwise.h; reference: cpu/elementwise.c).
 *
 * Structure: every op is a small functor that handles one element given its byte offset in each operand, and one
 * kernel template (ew_kernel) walks the elements with a grid-stride loop. The host collapses the operands'
 * geometry first (gm_cu_geom_make: size-1 dims dropped, dims contiguous in every operand merged), so the common
 * cases — contiguous tensors, a tensor and a scalar, a broadcast row — reach the kernel with one dim and their
 * offsets are i * stride, with no division. Other layouts divide the linear index per dim, in 32 bits when the
 * tensor has fewer than 2^32 elements (64-bit division is several times slower on the GPU).
 *
 * Semantics are the CPU kernels', operation for operation: the same compute types (float for the 16-bit types,
 * converted with common.h's functions), the same NaN rules, int64 arithmetic through uint64 so that it wraps,
 * x/0 = 0 for integers, bool loaded as v != 0 and stored as v != 0. exp/log/pow come from CUDA's math library,
 * which is within 1-2 ulp of glibc's (not always bit-identical); everything else is exact. */
#include <math.h>
#include <string.h>

#include <type_traits>

#include "cuda_common.cuh"
#include "elementwise.h"

/* ---- loads and stores: the CPU kernels' LD_/ST_ (bool is read as v != 0 even if a byte holds 2) ---------- */
template <int DT> __device__ __forceinline__ typename gm_cu_type<DT>::acc ew_ld(const char *p) {
    if (DT == GM_BOOL) return (typename gm_cu_type<DT>::acc)(*(const uint8_t *)p != 0);
    return gm_cu_ld<DT>(p);
}
template <int DT> __device__ __forceinline__ void ew_st(char *p, typename gm_cu_type<DT>::acc v) {
    gm_cu_st<DT>(p, v);
}

/* A gm_scalar in the compute type C (the CPU's SC_f / SC_d / SC_i). */
template <typename C> static inline C ew_scalar_as(const gm_scalar *s) {
    if (!s) return (C)0;
    if (std::is_integral<C>::value) return (C)s->i; /* int64 compute: never through a double */
    return (C)s->f;
}

/* ---- the scalar ops, per compute type (float, double, int64) --------------------------------------------- */
template <typename C> __device__ __forceinline__ C ew_add(C x, C y) { return x + y; }
template <typename C> __device__ __forceinline__ C ew_sub(C x, C y) { return x - y; }
template <typename C> __device__ __forceinline__ C ew_mul(C x, C y) { return x * y; }
template <typename C> __device__ __forceinline__ C ew_div(C x, C y) { return x / y; }
/* NaN on either side propagates (x + y is then NaN), as in the CPU kernel */
template <typename C> __device__ __forceinline__ C ew_max(C x, C y) {
    return (x != x || y != y) ? x + y : (x > y ? x : y);
}
template <typename C> __device__ __forceinline__ C ew_min(C x, C y) {
    return (x != x || y != y) ? x + y : (x < y ? x : y);
}
__device__ __forceinline__ float ew_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double ew_pow(double x, double y) { return pow(x, y); }

/* int64: through uint64 so that overflow wraps instead of being undefined */
template <> __device__ __forceinline__ int64_t ew_add(int64_t x, int64_t y) {
    return (int64_t)((uint64_t)x + (uint64_t)y);
}
template <> __device__ __forceinline__ int64_t ew_sub(int64_t x, int64_t y) {
    return (int64_t)((uint64_t)x - (uint64_t)y);
}
template <> __device__ __forceinline__ int64_t ew_mul(int64_t x, int64_t y) {
    return (int64_t)((uint64_t)x * (uint64_t)y);
}
/* x/0 = 0 and INT64_MIN/-1 wraps: the CPU kernel's choices (a GPU would not trap, but results must agree) */
template <> __device__ __forceinline__ int64_t ew_div(int64_t x, int64_t y) {
    if (y == 0) return 0;
    if (y == -1) return (int64_t)(0 - (uint64_t)x);
    return x / y;
}
__device__ __forceinline__ float ew_fmod(float x, float y) { return fmodf(x, y); }
__device__ __forceinline__ double ew_fmod(double x, double y) { return fmod(x, y); }
/* x % 0 and INT64_MIN % -1: 0, as on the CPU */
__device__ __forceinline__ int64_t ew_fmod(int64_t x, int64_t y) { return (y == 0 || y == -1) ? 0 : x % y; }
/* Python's %: fmod moved to the sign of y */
template <typename C> __device__ __forceinline__ C ew_rem(C x, C y) {
    const C r = ew_fmod(x, y);
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
__device__ __forceinline__ float ew_floordiv(float x, float y) { return gm_floordiv_f32(x, y, fmodf(x, y)); }
__device__ __forceinline__ double ew_floordiv(double x, double y) { return gm_floordiv_f64(x, y, fmod(x, y)); }
__device__ __forceinline__ int64_t ew_floordiv(int64_t x, int64_t y) { /* exact; x // 0 is 0, as on the CPU */
    if (y == 0) return 0;
    if (y == -1) return (int64_t)(0 - (uint64_t)x);
    const int64_t q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
__device__ __forceinline__ float ew_atan2(float x, float y) { return atan2f(x, y); }
__device__ __forceinline__ double ew_atan2(double x, double y) { return atan2(x, y); }
__device__ __forceinline__ int64_t ew_atan2(int64_t, int64_t) { return 0; } /* never launched: ints go as float32 */
template <> __device__ __forceinline__ int64_t ew_max(int64_t x, int64_t y) { return x > y ? x : y; }
template <> __device__ __forceinline__ int64_t ew_min(int64_t x, int64_t y) { return x < y ? x : y; }
__device__ __forceinline__ int64_t ew_pow(int64_t x, int64_t y) {
    if (y < 0) { /* only |base| == 1 survives a negative exponent */
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

template <int OP, typename C> __device__ __forceinline__ C ew_arith(C x, C y) {
    switch (OP) {
    case GM_EW_ADD: return ew_add(x, y);
    case GM_EW_SUB: return ew_sub(x, y);
    case GM_EW_MUL: return ew_mul(x, y);
    case GM_EW_DIV: return ew_div(x, y);
    case GM_EW_POW: return ew_pow(x, y);
    case GM_EW_MAXIMUM: return ew_max(x, y);
    case GM_EW_FMOD: return ew_fmod(x, y);
    case GM_EW_REMAINDER: return ew_rem(x, y);
    case GM_EW_ATAN2: return ew_atan2(x, y);
    case GM_EW_FLOORDIV: return ew_floordiv(x, y);
    default: return ew_min(x, y);
    }
}

template <int OP, typename C> __device__ __forceinline__ int ew_cmp(C x, C y) {
    switch (OP) {
    case GM_EW_EQ: return x == y;
    case GM_EW_NE: return x != y;
    case GM_EW_LT: return x < y;
    case GM_EW_LE: return x <= y;
    case GM_EW_GT: return x > y;
    default: return x >= y;
    }
}

/* unary */
__device__ __forceinline__ float ew_exp(float x) { return expf(x); }
__device__ __forceinline__ double ew_exp(double x) { return exp(x); }
__device__ __forceinline__ float ew_log(float x) { return logf(x); }
__device__ __forceinline__ double ew_log(double x) { return log(x); }
__device__ __forceinline__ float ew_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double ew_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float ew_round(float x) { return rintf(x); } /* half to even, as on the CPU */
__device__ __forceinline__ double ew_round(double x) { return rint(x); }
__device__ __forceinline__ float ew_floor(float x) { return floorf(x); }
__device__ __forceinline__ double ew_floor(double x) { return floor(x); }
__device__ __forceinline__ float ew_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ double ew_ceil(double x) { return ceil(x); }
/* the math library's functions: sinf for float (and the half types, computed in float), sin for double */
#define EW_LIBM(OP)                                                                                             \
    __device__ __forceinline__ float ew_##OP(float x) { return OP##f(x); }                                     \
    __device__ __forceinline__ double ew_##OP(double x) { return OP(x); }
EW_LIBM(sin) EW_LIBM(cos) EW_LIBM(tan) EW_LIBM(asin) EW_LIBM(acos) EW_LIBM(atan) EW_LIBM(sinh) EW_LIBM(cosh)
EW_LIBM(erf) EW_LIBM(erfc) EW_LIBM(log1p) EW_LIBM(expm1) EW_LIBM(log2) EW_LIBM(log10) EW_LIBM(exp2)
#undef EW_LIBM
__device__ __forceinline__ float ew_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double ew_abs(double x) { return fabs(x); }
__device__ __forceinline__ int64_t ew_abs(int64_t x) { return x < 0 ? (int64_t)(0 - (uint64_t)x) : x; }
template <typename C> __device__ __forceinline__ C ew_neg(C x) { return -x; }
template <> __device__ __forceinline__ int64_t ew_neg(int64_t x) { return (int64_t)(0 - (uint64_t)x); }
/* NaN gives 0, as PyTorch's sign does; signed zeros pass through; as on the CPU */
template <typename C> __device__ __forceinline__ C ew_sign(C x) {
    return x > 0 ? (C)1 : (x < 0 ? (C)-1 : (x == x ? x : (C)0));
}

template <int OP, typename C> __device__ __forceinline__ C ew_unary(C x) {
    switch (OP) {
    case GM_EW_NEG: return ew_neg(x);
    case GM_EW_ABS: return ew_abs(x);
    default: return ew_sign(x);
    }
}
template <int OP, typename C> __device__ __forceinline__ C ew_unary_float(C x) {
    switch (OP) {
    case GM_EW_EXP: return ew_exp(x);
    case GM_EW_LOG: return ew_log(x);
    case GM_EW_ROUND: return ew_round(x);
    case GM_EW_FLOOR: return ew_floor(x);
    case GM_EW_CEIL: return ew_ceil(x);
    case GM_EW_SIN: return ew_sin(x);
    case GM_EW_COS: return ew_cos(x);
    case GM_EW_TAN: return ew_tan(x);
    case GM_EW_ASIN: return ew_asin(x);
    case GM_EW_ACOS: return ew_acos(x);
    case GM_EW_ATAN: return ew_atan(x);
    case GM_EW_SINH: return ew_sinh(x);
    case GM_EW_COSH: return ew_cosh(x);
    case GM_EW_ERF: return ew_erf(x);
    case GM_EW_ERFC: return ew_erfc(x);
    case GM_EW_LOG1P: return ew_log1p(x);
    case GM_EW_EXPM1: return ew_expm1(x);
    case GM_EW_LOG2: return ew_log2(x);
    case GM_EW_LOG10: return ew_log10(x);
    case GM_EW_EXP2: return ew_exp2(x);
    default: return ew_sqrt(x);
    }
}

/* NaN anywhere propagates (numpy.clip); lo > hi gives hi */
template <typename C> __device__ __forceinline__ C ew_clamp(C x, C lo, C hi) {
    if (x != x || lo != lo || hi != hi) return x + lo + hi;
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}
template <> __device__ __forceinline__ int64_t ew_clamp(int64_t x, int64_t lo, int64_t hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

/* ---- casts: the CPU's widen (double for floats, int64 for ints) then narrow ------------------------------- */
template <int S, int D> __device__ __forceinline__ void ew_cast_one(char *q, const char *p) {
    if (S == GM_F32 || S == GM_F64 || S == GM_F16 || S == GM_BF16) {
        const double w = (double)gm_cu_ld<S>(p); /* exact for every float dtype */
        switch (D) {
        case GM_F32: *(float *)q = (float)w; break;
        case GM_F64: *(double *)q = w; break;
        case GM_F16: *(uint16_t *)q = gm_float_to_half((float)w); break;
        case GM_BF16: *(uint16_t *)q = gm_float_to_bf16((float)w); break;
        case GM_I64: *(int64_t *)q = gm_f64_to_i64_sat(w); break; /* elementwise_ops.h */
        default: *(uint8_t *)q = (uint8_t)(w != 0); break;
        }
    } else {
        /* int64 goes straight to float (one rounding), as (float)v does in C */
        const int64_t w = S == GM_BOOL ? (int64_t)(*(const uint8_t *)p != 0) : *(const int64_t *)p;
        switch (D) {
        case GM_F32: *(float *)q = (float)w; break;
        case GM_F64: *(double *)q = (double)w; break;
        case GM_F16: *(uint16_t *)q = gm_float_to_half((float)w); break;
        case GM_BF16: *(uint16_t *)q = gm_float_to_bf16((float)w); break;
        case GM_I64: *(int64_t *)q = w; break;
        default: *(uint8_t *)q = (uint8_t)(w != 0); break;
        }
    }
}

/* ---- functors: one element, given the operands' base pointers p (p[0] the output; NULL: a scalar operand) and
 * the element's byte offset in each. The pointers are kernel arguments of their own, not functor members, so
 * that the emulator's launch checks see every one of them (device memory of the right device). */
#define EW_OUT(p, off) ((char *)(p)[0] + (off)[0])

template <int DT, int OP> struct ew_bin_fn {
    typedef typename gm_cu_type<DT>::acc C;
    C as, bs; /* used where p[1] / p[2] is NULL */
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        const C x = p[1] ? ew_ld<DT>(p[1] + off[1]) : as;
        const C y = p[2] ? ew_ld<DT>(p[2] + off[2]) : bs;
        if (gm_ew_is_comparison(OP)) *(uint8_t *)EW_OUT(p, off) = (uint8_t)ew_cmp<OP>(x, y);
        else ew_st<DT>(EW_OUT(p, off), ew_arith<OP>(x, y));
    }
};

template <int DT, int OP> struct ew_un_fn {
    typedef typename gm_cu_type<DT>::acc C;
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        const C x = ew_ld<DT>(p[1] + off[1]);
        if (OP == GM_EW_LOGICAL_NOT) *(uint8_t *)EW_OUT(p, off) = (uint8_t)(x == 0);
        else ew_st<DT>(EW_OUT(p, off), ew_unary<OP>(x));
    }
};

/* exp/log/sqrt/round/floor/ceil and SIN..EXP2: float dtypes only (the dispatcher refuses the others before
 * instantiating this) */
template <int DT, int OP> struct ew_unf_fn {
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        ew_st<DT>(EW_OUT(p, off), ew_unary_float<OP>(ew_ld<DT>(p[1] + off[1])));
    }
};

template <int DT> struct ew_clamp_fn {
    typedef typename gm_cu_type<DT>::acc C;
    C los, his; /* where p[2] / p[3] is NULL: the scalar bound (an absent bound is -inf/+inf, INT64_MIN/MAX) */
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        const C x = ew_ld<DT>(p[1] + off[1]);
        const C l = p[2] ? ew_ld<DT>(p[2] + off[2]) : los;
        const C h = p[3] ? ew_ld<DT>(p[3] + off[3]) : his;
        ew_st<DT>(EW_OUT(p, off), ew_clamp(x, l, h));
    }
};

/* where and fill only move bytes of the element size U */
template <typename U> struct ew_where_fn { /* p: out, cond, a, b */
    U as, bs;
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        const int take = *(const uint8_t *)(p[1] + off[1]) != 0;
        U v;
        if (take) v = p[2] ? *(const U *)(p[2] + off[2]) : as;
        else v = p[3] ? *(const U *)(p[3] + off[3]) : bs;
        *(U *)EW_OUT(p, off) = v;
    }
};

template <typename U> struct ew_fill_fn {
    U v;
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        *(U *)EW_OUT(p, off) = v;
    }
};

template <typename U> struct ew_copy_fn {
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        *(U *)EW_OUT(p, off) = *(const U *)(p[1] + off[1]);
    }
};

template <int S, int D> struct ew_cast_fn {
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        ew_cast_one<S, D>(EW_OUT(p, off), p[1] + off[1]);
    }
};

/* ---- the one kernel: a grid-stride walk calling f on every element -------------------------------------- */
/* Offsets of linear index i in 32-bit arithmetic (numel < 2^32). */
template <int N> __device__ __forceinline__ void ew_offsets32(const gm_cu_geom<N> &g, uint32_t i, int64_t off[N]) {
    for (int j = 0; j < N; j++) off[j] = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        const uint32_t s = (uint32_t)g.shape[d], q = i / s, r = i - q * s;
        for (int j = 0; j < N; j++) off[j] += (int64_t)r * g.st[j][d];
        i = q;
    }
}

template <class F, int N>
__global__ void ew_kernel(F f, gm_cu_geom<N> g, char *out, const char *p1, const char *p2, const char *p3) {
    const char *const p[4] = {out, p1, p2, p3};
    int64_t off[N];
    if (g.ndim == 1) { /* contiguous or one strided dim: a multiply per operand */
        int64_t st[N];
        for (int j = 0; j < N; j++) st[j] = g.st[j][0];
        GM_CU_GRID_STRIDE(i, g.numel) {
            for (int j = 0; j < N; j++) off[j] = i * st[j];
            f(p, off);
        }
    } else if (g.numel <= (int64_t)0xffffffffu) {
        GM_CU_GRID_STRIDE(i, g.numel) {
            ew_offsets32<N>(g, (uint32_t)i, off);
            f(p, off);
        }
    } else {
        GM_CU_GRID_STRIDE(i, g.numel) {
            gm_cu_offsets<N>(g, i, off);
            f(p, off);
        }
    }
}

/* The collapsed geometry of N operands; a NULL strides array (a scalar operand) reads as all zeros. Returns -1
 * for a bad shape. A single element comes back as one dim of size 1, so the kernel's ndim is never 0. */
template <int N>
static int ew_geom(int ndim, const int64_t *shape, const int64_t *const strides[N], gm_cu_geom<N> *g) {
    static const int64_t zeros[GM_MAX_DIMS] = {0};
    if (ndim < 0 || ndim > GM_MAX_DIMS || (ndim > 0 && !shape)) return -1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0) return -1;
    const int64_t *st[N];
    for (int j = 0; j < N; j++) st[j] = strides[j] ? strides[j] : zeros;
    *g = gm_cu_geom_make<N>(ndim, shape, st);
    if (g->ndim == 0) {
        g->ndim = 1;
        g->shape[0] = 1;
        for (int j = 0; j < N; j++) g->st[j][0] = 0;
    }
    return 0;
}

/* Operands beyond N are NULL. */
template <class F, int N>
static int ew_launch(const F &f, const gm_cu_geom<N> &g, gm_cuda_ctx *ctx, char *out, const char *p1 = NULL,
                     const char *p2 = NULL, const char *p3 = NULL) {
    if (g.numel == 0) return GM_OK;
    void (*k)(F, gm_cu_geom<N>, char *, const char *, const char *, const char *) = &ew_kernel<F, N>;
    GM_LAUNCH(k, gm_cu_blocks(g.numel, ctx), GM_CU_THREADS, ctx, f, g, out, p1, p2, p3);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

static int ew_valid_dtype(int dt) { return dt >= 0 && dt < GM_NDTYPES; }

/* ---- binary --------------------------------------------------------------------------------------------------- */
template <int DT, int OP>
static int bin_launch(char *out, const char *a, const gm_scalar *as, const char *b, const gm_scalar *bs,
                      const gm_cu_geom<3> &g, gm_cuda_ctx *ctx) {
    typedef typename gm_cu_type<DT>::acc C;
    ew_bin_fn<DT, OP> f = {a ? (C)0 : ew_scalar_as<C>(as), b ? (C)0 : ew_scalar_as<C>(bs)};
    return ew_launch(f, g, ctx, out, a, b);
}

template <int DT>
static int bin_dt(int op, char *out, const char *a, const gm_scalar *as, const char *b, const gm_scalar *bs,
                  const gm_cu_geom<3> &g, gm_cuda_ctx *ctx) {
#define EW_BIN_CASE(OP) \
    case OP: return bin_launch<DT, OP>(out, a, as, b, bs, g, ctx);
    switch (op) {
        EW_BIN_CASE(GM_EW_ADD) EW_BIN_CASE(GM_EW_SUB) EW_BIN_CASE(GM_EW_MUL) EW_BIN_CASE(GM_EW_DIV)
        EW_BIN_CASE(GM_EW_POW) EW_BIN_CASE(GM_EW_MAXIMUM) EW_BIN_CASE(GM_EW_MINIMUM) EW_BIN_CASE(GM_EW_EQ)
        EW_BIN_CASE(GM_EW_NE) EW_BIN_CASE(GM_EW_LT) EW_BIN_CASE(GM_EW_LE) EW_BIN_CASE(GM_EW_GT)
        EW_BIN_CASE(GM_EW_GE) EW_BIN_CASE(GM_EW_FMOD) EW_BIN_CASE(GM_EW_REMAINDER)
        EW_BIN_CASE(GM_EW_FLOORDIV)
    case GM_EW_ATAN2:
        if constexpr (DT == GM_F32 || DT == GM_F64 || DT == GM_F16 || DT == GM_BF16)
            return bin_launch<DT, GM_EW_ATAN2>(out, a, as, b, bs, g, ctx);
        return GM_ERR_UNSUPPORTED; /* integers: computed in float32 */
    default: return GM_ERR_ARG;
    }
#undef EW_BIN_CASE
}

extern "C" int cuda_elementwise_binary_forward(char *out, const int64_t *so,
                                               const char *a, const int64_t *sa, const gm_scalar *as,
                                               const char *b, const int64_t *sb, const gm_scalar *bs,
                                               int op, gm_dtype dt, int ndim, const int64_t *shape,
                                               gm_cuda_ctx *ctx) {
    if (op < 0 || op >= GM_EW_NBINARY || !ew_valid_dtype(dt) || !out || !ctx) return GM_ERR_ARG;
    if ((!a && !as) || (!b && !bs)) return GM_ERR_ARG;
    if (dt == GM_BOOL && (op == GM_EW_SUB || op >= GM_EW_FMOD)) return GM_ERR_UNSUPPORTED;
    const int64_t *st[3] = {so, a ? sa : NULL, b ? sb : NULL};
    gm_cu_geom<3> g;
    if (ew_geom<3>(ndim, shape, st, &g) < 0) return GM_ERR_ARG;
#define EW_BIN_DT(DT) return bin_dt<DT>(op, out, a, as, b, bs, g, ctx)
    GM_CU_SWITCH_ALL(dt, EW_BIN_DT);
#undef EW_BIN_DT
    return GM_ERR_ARG;
}

/* ---- unary ---------------------------------------------------------------------------------------------------- */
template <int DT>
static int un_dt(int op, char *out, const char *a, const gm_cu_geom<2> &g, gm_cuda_ctx *ctx) {
    switch (op) {
    case GM_EW_NEG: { ew_un_fn<DT, GM_EW_NEG> f; return ew_launch(f, g, ctx, out, a); }
    case GM_EW_ABS: { ew_un_fn<DT, GM_EW_ABS> f; return ew_launch(f, g, ctx, out, a); }
    case GM_EW_SIGN: { ew_un_fn<DT, GM_EW_SIGN> f; return ew_launch(f, g, ctx, out, a); }
    case GM_EW_LOGICAL_NOT: { ew_un_fn<DT, GM_EW_LOGICAL_NOT> f; return ew_launch(f, g, ctx, out, a); }
    default: break;
    }
    if constexpr (DT == GM_F32 || DT == GM_F64 || DT == GM_F16 || DT == GM_BF16) {
#define EW_UNF(OP) case OP: { ew_unf_fn<DT, OP> f; return ew_launch(f, g, ctx, out, a); }
        switch (op) {
        EW_UNF(GM_EW_EXP) EW_UNF(GM_EW_LOG) EW_UNF(GM_EW_SQRT) EW_UNF(GM_EW_ROUND) EW_UNF(GM_EW_FLOOR)
        EW_UNF(GM_EW_CEIL) EW_UNF(GM_EW_SIN) EW_UNF(GM_EW_COS) EW_UNF(GM_EW_TAN) EW_UNF(GM_EW_ASIN)
        EW_UNF(GM_EW_ACOS) EW_UNF(GM_EW_ATAN) EW_UNF(GM_EW_SINH) EW_UNF(GM_EW_COSH) EW_UNF(GM_EW_ERF)
        EW_UNF(GM_EW_ERFC) EW_UNF(GM_EW_LOG1P) EW_UNF(GM_EW_EXPM1) EW_UNF(GM_EW_LOG2) EW_UNF(GM_EW_LOG10)
        EW_UNF(GM_EW_EXP2)
        default: return GM_ERR_ARG;
        }
#undef EW_UNF
    }
    return GM_ERR_UNSUPPORTED; /* exp/log/sqrt/round/floor/ceil/sin... of an integer dtype */
}

extern "C" int cuda_elementwise_unary_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                                              int op, gm_dtype dt, int ndim, const int64_t *shape,
                                              gm_cuda_ctx *ctx) {
    if (op < 0 || op >= GM_EW_NUNARY || !ew_valid_dtype(dt) || !out || !a || !ctx) return GM_ERR_ARG;
    if (op == GM_EW_NEG && dt == GM_BOOL) return GM_ERR_UNSUPPORTED;
    const int64_t *st[2] = {so, sa};
    gm_cu_geom<2> g;
    if (ew_geom<2>(ndim, shape, st, &g) < 0) return GM_ERR_ARG;
#define EW_UN_DT(DT) return un_dt<DT>(op, out, a, g, ctx)
    GM_CU_SWITCH_ALL(dt, EW_UN_DT);
#undef EW_UN_DT
    return GM_ERR_ARG;
}

/* ---- clamp ---------------------------------------------------------------------------------------------------- */
template <int DT>
static int clamp_dt(char *out, const char *a, const char *lo, const gm_scalar *los, const char *hi,
                    const gm_scalar *his, const gm_cu_geom<4> &g, gm_cuda_ctx *ctx) {
    typedef typename gm_cu_type<DT>::acc C;
    ew_clamp_fn<DT> f = {lo ? (C)0 : ew_scalar_as<C>(los), hi ? (C)0 : ew_scalar_as<C>(his)};
    return ew_launch(f, g, ctx, out, a, lo, hi);
}

extern "C" int cuda_elementwise_clamp_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                                              const char *lo, const int64_t *slo, const gm_scalar *los,
                                              const char *hi, const int64_t *shi, const gm_scalar *his,
                                              gm_dtype dt, int ndim, const int64_t *shape, gm_cuda_ctx *ctx) {
    /* A missing bound becomes the identity bound, as on the CPU. */
    static const gm_scalar no_lo = {-INFINITY, INT64_MIN}, no_hi = {INFINITY, INT64_MAX};
    if (!ew_valid_dtype(dt) || !out || !a || !ctx) return GM_ERR_ARG;
    if (!lo && !los) los = &no_lo;
    if (!hi && !his) his = &no_hi;
    const int64_t *st[4] = {so, sa, lo ? slo : NULL, hi ? shi : NULL};
    gm_cu_geom<4> g;
    if (ew_geom<4>(ndim, shape, st, &g) < 0) return GM_ERR_ARG;
#define EW_CLAMP_DT(DT) return clamp_dt<DT>(out, a, lo, los, hi, his, g, ctx)
    GM_CU_SWITCH_ALL(dt, EW_CLAMP_DT);
#undef EW_CLAMP_DT
    return GM_ERR_ARG;
}

/* ---- where, fill: bytes of the element size ------------------------------------------------------------------- */
/* The scalar of `where` and `fill`, rounded to dt once (the CPU's ew_scalar_bytes). */
static uint64_t ew_scalar_bits(const gm_scalar *v, gm_dtype dt) {
    uint64_t bits = 0;
    switch (dt) {
    case GM_F32: { float x = (float)v->f; memcpy(&bits, &x, 4); break; }
    case GM_F64: memcpy(&bits, &v->f, 8); break;
    case GM_F16: { uint16_t x = gm_float_to_half((float)v->f); memcpy(&bits, &x, 2); break; }
    case GM_BF16: { uint16_t x = gm_float_to_bf16((float)v->f); memcpy(&bits, &x, 2); break; }
    case GM_I64: memcpy(&bits, &v->i, 8); break;
    /* storage-only integers: the low bits of the int64 value, as a cast */
    case GM_U8: case GM_I8: bits = (uint8_t)(uint64_t)v->i; break;
    case GM_I16: bits = (uint16_t)(uint64_t)v->i; break;
    case GM_I32: bits = (uint32_t)(uint64_t)v->i; break;
    default: { uint8_t x = (uint8_t)(v->f != 0 || v->i != 0); memcpy(&bits, &x, 1); break; }
    }
    return bits;
}

template <typename U> static U ew_bits_as(uint64_t bits) {
    U u;
    memcpy(&u, &bits, sizeof u); /* little-endian: the low bytes hold the value */
    return u;
}

template <typename U>
static int where_size(char *out, const char *c, const char *a, uint64_t abits, const char *b, uint64_t bbits,
                      const gm_cu_geom<4> &g, gm_cuda_ctx *ctx) {
    ew_where_fn<U> f = {ew_bits_as<U>(abits), ew_bits_as<U>(bbits)};
    return ew_launch(f, g, ctx, out, c, a, b);
}

extern "C" int cuda_elementwise_where_forward(char *out, const int64_t *so, const char *cond, const int64_t *sc,
                                              const char *a, const int64_t *sa, const gm_scalar *as,
                                              const char *b, const int64_t *sb, const gm_scalar *bs,
                                              gm_dtype dt, int ndim, const int64_t *shape, gm_cuda_ctx *ctx) {
    if (!ew_valid_dtype(dt) || !out || !cond || (!a && !as) || (!b && !bs) || !ctx) return GM_ERR_ARG;
    const uint64_t abits = a ? 0 : ew_scalar_bits(as, dt), bbits = b ? 0 : ew_scalar_bits(bs, dt);
    const int64_t *st[4] = {so, sc, a ? sa : NULL, b ? sb : NULL};
    gm_cu_geom<4> g;
    if (ew_geom<4>(ndim, shape, st, &g) < 0) return GM_ERR_ARG;
    switch (gm_dtype_size(dt)) {
    case 1: return where_size<uint8_t>(out, cond, a, abits, b, bbits, g, ctx);
    case 2: return where_size<uint16_t>(out, cond, a, abits, b, bbits, g, ctx);
    case 4: return where_size<uint32_t>(out, cond, a, abits, b, bbits, g, ctx);
    default: return where_size<uint64_t>(out, cond, a, abits, b, bbits, g, ctx);
    }
}

template <typename U> static int fill_size(char *out, uint64_t bits, const gm_cu_geom<1> &g, gm_cuda_ctx *ctx) {
    ew_fill_fn<U> f = {ew_bits_as<U>(bits)};
    return ew_launch(f, g, ctx, out);
}

extern "C" int cuda_elementwise_fill_forward(char *out, const int64_t *so, gm_dtype dt, const gm_scalar *value,
                                             int ndim, const int64_t *shape, gm_cuda_ctx *ctx) {
    if (dt < 0 || dt >= GM_NDTYPES_ALL || !out || !value || !ctx) return GM_ERR_ARG; /* any storage dtype */
    const uint64_t bits = ew_scalar_bits(value, dt);
    const int64_t *st[1] = {so};
    gm_cu_geom<1> g;
    if (ew_geom<1>(ndim, shape, st, &g) < 0) return GM_ERR_ARG;
    if (g.numel == 0) return GM_OK;
    const size_t es = gm_dtype_size(dt);
    /* Contiguous and the value's bytes all equal (zeros, most often): the driver's memset. */
    if (g.ndim == 1 && g.st[0][0] == (int64_t)es) {
        int same = 1;
        for (size_t k = 1; k < es; k++) same &= ((bits >> (8 * k)) & 0xff) == (bits & 0xff);
        if (same) {
            GM_CU_CHECK(ctx, cudaMemsetAsync(out, (int)(bits & 0xff), (size_t)g.numel * es,
                                             (cudaStream_t)ctx->stream));
            return GM_OK;
        }
    }
    switch (es) {
    case 1: return fill_size<uint8_t>(out, bits, g, ctx);
    case 2: return fill_size<uint16_t>(out, bits, g, ctx);
    case 4: return fill_size<uint32_t>(out, bits, g, ctx);
    default: return fill_size<uint64_t>(out, bits, g, ctx);
    }
}

/* ---- cast / copy ---------------------------------------------------------------------------------------------- */
template <typename U> static int copy_size(char *out, const char *a, const gm_cu_geom<2> &g, gm_cuda_ctx *ctx) {
    ew_copy_fn<U> f;
    return ew_launch(f, g, ctx, out, a);
}

/* A cast involving a storage-only integer dtype: gm_cast_any (kernels/elementwise_ops.h), as on the CPU. */
struct ew_cast_any_fn {
    int s, d;
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        gm_cast_any(EW_OUT(p, off), d, p[1] + off[1], s);
    }
};

template <int S, int D> static int cast_launch(char *out, const char *a, const gm_cu_geom<2> &g, gm_cuda_ctx *ctx) {
    ew_cast_fn<S, D> f;
    return ew_launch(f, g, ctx, out, a);
}

template <int S> static int cast_from(gm_dtype out_dt, char *out, const char *a, const gm_cu_geom<2> &g,
                                      gm_cuda_ctx *ctx) {
#define EW_CAST_TO(D) return cast_launch<S, D>(out, a, g, ctx)
    GM_CU_SWITCH_ALL(out_dt, EW_CAST_TO);
#undef EW_CAST_TO
    return GM_ERR_ARG;
}

extern "C" int cuda_elementwise_cast_forward(char *out, const int64_t *so, gm_dtype out_dt,
                                             const char *a, const int64_t *sa, gm_dtype a_dt,
                                             int ndim, const int64_t *shape, gm_cuda_ctx *ctx) {
    if ((int)out_dt < 0 || out_dt >= GM_NDTYPES_ALL || (int)a_dt < 0 || a_dt >= GM_NDTYPES_ALL || !out || !a || !ctx)
        return GM_ERR_ARG;
    const int64_t *st[2] = {so, sa};
    gm_cu_geom<2> g;
    if (ew_geom<2>(ndim, shape, st, &g) < 0) return GM_ERR_ARG;
    if (g.numel == 0) return GM_OK;
    if (out_dt == a_dt) { /* bytes move as they are (bool included, like a memcpy) */
        const size_t es = gm_dtype_size(a_dt);
        if (g.ndim == 1 && g.st[0][0] == (int64_t)es && g.st[1][0] == (int64_t)es) {
            if (out == a) return GM_OK; /* copying a tensor onto itself */
            GM_CU_CHECK(ctx, cudaMemcpyAsync(out, a, (size_t)g.numel * es, cudaMemcpyDeviceToDevice,
                                             (cudaStream_t)ctx->stream));
            return GM_OK;
        }
        switch (es) {
        case 1: return copy_size<uint8_t>(out, a, g, ctx);
        case 2: return copy_size<uint16_t>(out, a, g, ctx);
        case 4: return copy_size<uint32_t>(out, a, g, ctx);
        default: return copy_size<uint64_t>(out, a, g, ctx);
        }
    }
    if (gm_dtype_is_narrow(out_dt) || gm_dtype_is_narrow(a_dt)) {
        ew_cast_any_fn f = {(int)a_dt, (int)out_dt};
        return ew_launch(f, g, ctx, out, a);
    }
#define EW_CAST_FROM(S) return cast_from<S>(out_dt, out, a, g, ctx)
    GM_CU_SWITCH_ALL(a_dt, EW_CAST_FROM);
#undef EW_CAST_FROM
    return GM_ERR_ARG;
}

/* ---- float32 + bfloat16 -> float32 (elementwise_add_widen_forward's twin) ------------------------------------ */
struct ew_add_widen_fn {
    __device__ __forceinline__ void operator()(const char *const *p, const int64_t *off) const {
        *(float *)EW_OUT(p, off) = ew_ld<GM_F32>(p[1] + off[1]) + ew_ld<GM_BF16>(p[2] + off[2]);
    }
};

extern "C" int cuda_elementwise_add_widen_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                                                  const char *b, const int64_t *sb, gm_dtype b_dt, int ndim,
                                                  const int64_t *shape, gm_cuda_ctx *ctx) {
    if (!out || !a || !b || !so || !sa || !sb || !ctx) return GM_ERR_ARG;
    if (b_dt != GM_BF16) return GM_ERR_UNSUPPORTED;
    const int64_t *st[3] = {so, sa, sb};
    gm_cu_geom<3> g;
    if (ew_geom<3>(ndim, shape, st, &g) < 0) return GM_ERR_ARG;
    ew_add_widen_fn f;
    return ew_launch(f, g, ctx, out, a, b);
}
