/* kernels/elementwise_ops.h — the op codes, the scalar operand and the float -> int64 conversion of the
 * elementwise kernels, shared by both backends (kernels/README.md). The kernels, and the conventions they follow,
 * are declared in kernels/cpu/elementwise.h and kernels/cuda/elementwise.h. */
#ifndef GM_KERNELS_ELEMENTWISE_OPS_H
#define GM_KERNELS_ELEMENTWISE_OPS_H

#include "common.h"

#include <math.h>

/* Binary ops (codes are part of the _C interface, docs/C_API.md). FMOD (C's fmod: the sign of a) and REMAINDER
 * (Python's %: the sign of b) keep integer dtypes (bool refused; x % 0 is 0 for integers, as x / 0 is, instead of
 * a trap: on the CPU csrc raises PyTorch's ZeroDivisionError before a kernel runs); ATAN2 computes integers in
 * float32, as DIV does. FLOORDIV is floor(a / b), exact for integers (x // 0 is 0) and, for floats, PyTorch's div_floor: the quotient of a - fmod(a, b), so that a == b * (a // b) + a % b. */
enum {
    GM_EW_ADD = 0, GM_EW_SUB, GM_EW_MUL, GM_EW_DIV, GM_EW_POW, GM_EW_MAXIMUM, GM_EW_MINIMUM,
    GM_EW_EQ, GM_EW_NE, GM_EW_LT, GM_EW_LE, GM_EW_GT, GM_EW_GE, GM_EW_FMOD, GM_EW_REMAINDER, GM_EW_ATAN2,
    GM_EW_FLOORDIV, GM_EW_NBINARY
};
/* Unary ops. */
/* ROUND (half to even, as PyTorch and numpy.rint), FLOOR, CEIL: float dtypes only (an integer is its own rounding;
 * the Python layer returns it unchanged). */
/* SIN .. EXP2: the math library's functions (sinf / sin ...), float dtypes only; an integer input is computed in
 * float32, as exp/log/sqrt are (PyTorch's promotion). */
enum { GM_EW_NEG = 0, GM_EW_EXP, GM_EW_LOG, GM_EW_SQRT, GM_EW_ABS, GM_EW_SIGN, GM_EW_LOGICAL_NOT, GM_EW_ROUND,
       GM_EW_FLOOR, GM_EW_CEIL, GM_EW_SIN, GM_EW_COS, GM_EW_TAN, GM_EW_ASIN, GM_EW_ACOS, GM_EW_ATAN, GM_EW_SINH,
       GM_EW_COSH, GM_EW_ERF, GM_EW_ERFC, GM_EW_LOG1P, GM_EW_EXPM1, GM_EW_LOG2, GM_EW_LOG10, GM_EW_EXP2,
       GM_EW_NUNARY };

/* PyTorch's floor division of floats (div_floor): exact where floor(a / b) would round a quotient just below an
 * integer up to it. y == 0 gives a / y (inf or nan), as PyTorch, and a zero quotient the sign of a / y. */
#define GM_FLOORDIV_BODY(FLOOR, COPYSIGN)                                                                      \
    if (y == 0) return x / y;                                                                                  \
    d = (x - m) / y;                                                                                           \
    if (m != 0 && ((y < 0) != (m < 0))) d -= 1;                                                                \
    if (d == 0) return COPYSIGN(0, x / y); /* a zero quotient takes x / y's sign: -1 // -3 is +0 */           \
    f = FLOOR(d);                                                                                              \
    if (d - f > 0.5f) f += 1;                                                                                  \
    return f;
GM_HD static inline float gm_floordiv_f32(float x, float y, float m /* fmodf(x, y) */) {
    float d, f;
    GM_FLOORDIV_BODY(floorf, copysignf)
}
GM_HD static inline double gm_floordiv_f64(double x, double y, double m /* fmod(x, y) */) {
    double d, f;
    GM_FLOORDIV_BODY(floor, copysign)
}
#undef GM_FLOORDIV_BODY

/* Unary ops whose integer inputs are computed (and returned) in float32. */
static inline int gm_ew_unary_promotes(int op) {
    return op == GM_EW_EXP || op == GM_EW_LOG || op == GM_EW_SQRT || op >= GM_EW_SIN;
}

GM_HD static inline int gm_ew_is_comparison(int op) { return op >= GM_EW_EQ && op <= GM_EW_GE; }

/* A scalar operand. The caller fills both fields with the same number: kernels read `f` when computing in
 * float/double and `i` when computing in int64 (so an int64 scalar never goes through a double). */
typedef struct {
    double f;
    int64_t i;
} gm_scalar;

/* The saturating float -> int64 conversion both cast kernels use (and csrc, so it converts scalars the same way):
 * truncation toward zero, NaN -> 0, out of range -> INT64_MIN / INT64_MAX, instead of C's undefined conversion. */
GM_HD static inline int64_t gm_f64_to_i64_sat(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

/* One element of any dtype (storage-only ints included) into any dtype: floats widen to double, integers to int64,
 * then narrow as the cast kernels do (float -> int saturates to int64 first; int64 -> a narrower integer keeps the
 * low bits, wrapping as PyTorch's casts do; -> bool is != 0). The cast kernels of both backends use it for every
 * pair that involves a storage-only integer dtype (the other pairs have their own vectorised loops). */
GM_HD static inline void gm_cast_any(char *q, int d, const char *p, int s) {
    const int is_f = s <= GM_BF16;
    double f = 0;
    int64_t i = 0;
    switch (s) {
    case GM_F32: f = *(const float *)p; break;
    case GM_F64: f = *(const double *)p; break;
    case GM_F16: f = gm_half_to_float(*(const uint16_t *)p); break;
    case GM_BF16: f = gm_bf16_to_float(*(const uint16_t *)p); break;
    case GM_I64: i = *(const int64_t *)p; break;
    case GM_BOOL: i = *(const uint8_t *)p != 0; break;
    case GM_U8: i = *(const uint8_t *)p; break;
    case GM_I8: i = *(const int8_t *)p; break;
    case GM_I16: i = *(const int16_t *)p; break;
    default: i = *(const int32_t *)p; break;
    }
    if (is_f) i = gm_f64_to_i64_sat(f);
    switch (d) {
    case GM_F32: *(float *)q = is_f ? (float)f : (float)i; break;
    case GM_F64: *(double *)q = is_f ? f : (double)i; break;
    case GM_F16: *(uint16_t *)q = gm_float_to_half(is_f ? (float)f : (float)i); break;
    case GM_BF16: *(uint16_t *)q = gm_float_to_bf16(is_f ? (float)f : (float)i); break;
    case GM_I64: *(int64_t *)q = i; break;
    case GM_BOOL: *(uint8_t *)q = (uint8_t)(is_f ? f != 0 : i != 0); break;
    case GM_U8: case GM_I8: *(uint8_t *)q = (uint8_t)(uint64_t)i; break;
    case GM_I16: *(uint16_t *)q = (uint16_t)(uint64_t)i; break;
    default: *(uint32_t *)q = (uint32_t)(uint64_t)i; break;
    }
}

#endif
