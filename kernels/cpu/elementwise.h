/* kernels/cpu/elementwise.h — CPU elementwise kernels: binary and unary math, comparisons, clamp, where, cast-copy
 * and fill over strided N-d operands. Pure compute: no Python, no allocation; each returns a GM_* status.
 *
 * Conventions shared by every kernel here:
 *  - an operand is a base pointer plus `ndim` BYTE strides over the common `shape` (0 on broadcast dims);
 *  - a NULL operand pointer means "the scalar argument beside it", broadcast everywhere;
 *  - arithmetic is done in the compute type of `dt`: float for float32/float16/bfloat16 (loaded with
 *    gm_half_to_float / gm_bf16_to_float, stored with round-to-nearest-even), double for float64, int64 for int64
 *    and bool (bool results stored as v != 0, so add = or, mul = and);
 *  - `nthreads` bounds the OpenMP team; small problems run on the calling thread. */
#ifndef GM_KERNELS_CPU_ELEMENTWISE_H
#define GM_KERNELS_CPU_ELEMENTWISE_H

#include "../elementwise_ops.h" /* op codes, gm_scalar, gm_f64_to_i64_sat */

/* out = op(a, b) elementwise; out, a, b are (shape) with byte strides so, sa, sb.
 * a, b: dtype dt (or NULL: the scalar *as / *bs). out: dtype dt, or bool for comparisons.
 * Integer semantics: add/sub/mul wrap around; div truncates and x/0 = 0 (never traps; _C.binary does true
 * division in float32 instead); pow with a negative exponent is 0 except for bases 1 and -1.
 * Float maximum/minimum propagate NaN. GM_ERR_ARG for a bad op/dtype, GM_ERR_UNSUPPORTED for sub on bool. */
int elementwise_binary_forward(char *out, const int64_t *so,
                               const char *a, const int64_t *sa, const gm_scalar *as,
                               const char *b, const int64_t *sb, const gm_scalar *bs,
                               int op, gm_dtype dt, int ndim, const int64_t *shape, int nthreads);

/* out = op(a); out, a are (shape). a: dtype dt; out: dtype dt, or bool for logical_not.
 * exp/log/sqrt need a float dt (GM_ERR_UNSUPPORTED otherwise); neg of bool is GM_ERR_UNSUPPORTED;
 * sign keeps NaN and signed zeros; abs and sign of bool are the identity. */
int elementwise_unary_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                              int op, gm_dtype dt, int ndim, const int64_t *shape, int nthreads);

/* out = min(max(a, lo), hi); every operand dtype dt. lo (hi) == NULL with los (his) == NULL: no bound.
 * NaN in a or in a bound gives NaN (like numpy.clip); lo > hi gives hi (like PyTorch). */
int elementwise_clamp_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                              const char *lo, const int64_t *slo, const gm_scalar *los,
                              const char *hi, const int64_t *shi, const gm_scalar *his,
                              gm_dtype dt, int ndim, const int64_t *shape, int nthreads);

/* out = cond ? a : b; cond is bool; a, b, out are dtype dt (a/b NULL: the scalar, rounded to dt once). */
int elementwise_where_forward(char *out, const int64_t *so, const char *cond, const int64_t *sc,
                              const char *a, const int64_t *sa, const gm_scalar *as,
                              const char *b, const int64_t *sb, const gm_scalar *bs,
                              gm_dtype dt, int ndim, const int64_t *shape, int nthreads);

/* out = (out_dt) a, any dtype to any dtype; a's strides may be 0 to broadcast. Float to int64 truncates toward
 * zero and saturates (NaN -> 0) instead of invoking C's undefined conversion; anything to bool is v != 0. */
int elementwise_cast_forward(char *out, const int64_t *so, gm_dtype out_dt,
                             const char *a, const int64_t *sa, gm_dtype a_dt,
                             int ndim, const int64_t *shape, int nthreads);

/* out = a + (float)b: out and a float32, b of dtype b_dt (bfloat16 only: GM_ERR_UNSUPPORTED otherwise); strides
 * in bytes, 0 to broadcast. The float32 sum of b's widened copy bit for bit, without that copy (binary's add of a
 * float32 and a bfloat16 tensor: autocast's weight gradients accumulating into float32 .grad). */
int elementwise_add_widen_forward(char *out, const int64_t *so, const char *a, const int64_t *sa, const char *b,
                                  const int64_t *sb, gm_dtype b_dt, int ndim, const int64_t *shape, int nthreads);

/* out[...] = value, rounded to dt once (bool: value != 0). */
int elementwise_fill_forward(char *out, const int64_t *so, gm_dtype dt, const gm_scalar *value,
                             int ndim, const int64_t *shape, int nthreads);

#endif
