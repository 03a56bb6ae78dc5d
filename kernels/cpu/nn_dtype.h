/* kernels/cpu/nn_dtype.h — element access shared by the nn kernels (activation, dropout, norm, softmax, loss).
 *
 * Each nn kernel's loop is written once, over these always-inline helpers, and NN_DISPATCH stamps it out
 * once per float dtype with `DT` an enum constant: inside each copy every helper's switch folds away and the
 * float32/float64/bfloat16 loops vectorize (-fopt-info-vec). Relying on GCC to unswitch a runtime dtype out of
 * the loop does not work here: with the half conversions inlined the loop is over its unswitching size limit,
 * and an OpenMP region is outlined before constants propagate. Measured on relu of 6.4M float32, one thread:
 * 110 ms with a runtime dtype, 2.4 ms dispatched (NumPy's maximum: 2.7 ms).
 *
 * Arithmetic is done in double for every dtype (float32/float16/bfloat16 are widened on load and rounded once
 * on store): these ops are memory-bound, and sums (softmax, batch statistics, losses) gain from the width.
 * Transcendentals go through nn_exp & co., which use the single-precision libm function for the narrow dtypes
 * (half the cost, and exactly the precision those dtypes can hold). */
#ifndef GM_KERNELS_CPU_NN_DTYPE_H
#define GM_KERNELS_CPU_NN_DTYPE_H

#include <math.h>
#include "../common.h"

#define NN_INLINE static inline __attribute__((always_inline))

/* Below this many elements a parallel region costs more than it saves (fork/join ~10 us). */
#define NN_PARALLEL_MIN 32768

/* Element i of a float array of dtype dt, as double. dt is an int so that NN_DISPATCH's enum constant DT passes
 * without a conversion warning. */
NN_INLINE double nn_ld(const void *p, int64_t i, int dt) {
    switch (dt) {
    case GM_F32: return ((const float *)p)[i];
    case GM_F64: return ((const double *)p)[i];
    case GM_F16: return gm_half_to_float(((const uint16_t *)p)[i]);
    default: return gm_bf16_to_float(((const uint16_t *)p)[i]);
    }
}

/* Store v as element i of a float array of dtype dt (half types: through float, round to nearest even). */
NN_INLINE void nn_st(void *p, int64_t i, int dt, double v) {
    switch (dt) {
    case GM_F32: ((float *)p)[i] = (float)v; break;
    case GM_F64: ((double *)p)[i] = v; break;
    case GM_F16: ((uint16_t *)p)[i] = gm_float_to_half((float)v); break;
    default: ((uint16_t *)p)[i] = gm_float_to_bf16((float)v); break;
    }
}

NN_INLINE double nn_exp(double x, int dt) { return dt == GM_F64 ? exp(x) : (double)expf((float)x); }
NN_INLINE double nn_log(double x, int dt) { return dt == GM_F64 ? log(x) : (double)logf((float)x); }
NN_INLINE double nn_log1p(double x, int dt) { return dt == GM_F64 ? log1p(x) : (double)log1pf((float)x); }
/* float32 tanh rounds to +-1 past 13 ln 2 (its distance from 1 is then under half an ulp): libmvec's vector tanhf
 * stops an ulp short there, and atanh / erfinv of the result were finite where PyTorch's are inf. */
#define NN_TANHF_ONE 9.0109134f
NN_INLINE double nn_tanh(double x, int dt) {
    if (dt == GM_F64) return tanh(x);
    const float f = (float)x;
    return fabsf(f) > NN_TANHF_ONE ? (double)copysignf(1.0f, f) : (double)tanhf(f);
}
NN_INLINE double nn_erf(double x, int dt) { return dt == GM_F64 ? erf(x) : (double)erff((float)x); }

/* Run the statements in __VA_ARGS__ once per float dtype, with DT the compile-time constant for the dtype
 * variable `var`. An enum (not a const variable) so that an OpenMP region inside sees a constant rather than a
 * captured variable. The enum also redeclares `var` itself as that constant inside the block, so a stray use of
 * the variable in a dispatched loop is specialised too instead of silently taking the slow path. */
#define NN_DISPATCH(var, ...)                                                                                \
    switch (var) {                                                                                           \
    case GM_F32: { enum { DT = GM_F32, var = GM_F32 }; __VA_ARGS__ } break;                                  \
    case GM_F64: { enum { DT = GM_F64, var = GM_F64 }; __VA_ARGS__ } break;                                  \
    case GM_F16: { enum { DT = GM_F16, var = GM_F16 }; __VA_ARGS__ } break;                                  \
    default: { enum { DT = GM_BF16, var = GM_BF16 }; __VA_ARGS__ } break;                                    \
    }

/* Threads to use for `work` elements: one below the grain, else the caller's count. */
NN_INLINE int nn_threads(int64_t work, int nthreads) { return work >= NN_PARALLEL_MIN && nthreads > 1 ? nthreads : 1; }

#endif
