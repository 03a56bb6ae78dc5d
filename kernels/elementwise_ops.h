/* kernels/elementwise_ops.h — the op codes, the scalar operand and the float -> int64 conversion of the
 * elementwise kernels, shared by both backends (kernels/README.md). The kernels, and the conventions they follow,
 * are declared in kernels/cpu/elementwise.h and kernels/cuda/elementwise.h. */
#ifndef GM_KERNELS_ELEMENTWISE_OPS_H
#define GM_KERNELS_ELEMENTWISE_OPS_H

#include "common.h"

/* Binary ops (codes are part of the _C interface, docs/C_API.md). */
enum {
    GM_EW_ADD = 0, GM_EW_SUB, GM_EW_MUL, GM_EW_DIV, GM_EW_POW, GM_EW_MAXIMUM, GM_EW_MINIMUM,
    GM_EW_EQ, GM_EW_NE, GM_EW_LT, GM_EW_LE, GM_EW_GT, GM_EW_GE, GM_EW_NBINARY
};
/* Unary ops. */
/* ROUND (half to even, as PyTorch and numpy.rint), FLOOR, CEIL: float dtypes only (an integer is its own rounding;
 * the Python layer returns it unchanged). */
enum { GM_EW_NEG = 0, GM_EW_EXP, GM_EW_LOG, GM_EW_SQRT, GM_EW_ABS, GM_EW_SIGN, GM_EW_LOGICAL_NOT, GM_EW_ROUND,
       GM_EW_FLOOR, GM_EW_CEIL, GM_EW_NUNARY };

static inline int gm_ew_is_comparison(int op) { return op >= GM_EW_EQ && op < GM_EW_NBINARY; }

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

#endif
