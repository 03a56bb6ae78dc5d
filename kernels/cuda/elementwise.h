/* kernels/cuda/elementwise.h — the CUDA twins of kernels/cpu/elementwise.h: binary and unary math, comparisons,
 * clamp, where, cast-copy and fill over strided N-d operands on device memory.
 *
 * Same arguments, op codes, scalar convention (NULL operand = the gm_scalar beside it) and semantics as the CPU
 * kernels (see kernels/cpu/elementwise.h), with the final `int nthreads` replaced by the device context: data
 * pointers are device pointers, shape and stride arrays are host arrays. Work is queued on ctx->stream; the
 * call returns without waiting (kernels/cuda/README.md). */
#ifndef GM_KERNELS_CUDA_ELEMENTWISE_H
#define GM_KERNELS_CUDA_ELEMENTWISE_H

#include "../elementwise_ops.h"
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_elementwise_binary_forward(char *out, const int64_t *so,
                                    const char *a, const int64_t *sa, const gm_scalar *as,
                                    const char *b, const int64_t *sb, const gm_scalar *bs,
                                    int op, gm_dtype dt, int ndim, const int64_t *shape, gm_cuda_ctx *ctx);

int cuda_elementwise_unary_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                                   int op, gm_dtype dt, int ndim, const int64_t *shape, gm_cuda_ctx *ctx);

int cuda_elementwise_clamp_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                                   const char *lo, const int64_t *slo, const gm_scalar *los,
                                   const char *hi, const int64_t *shi, const gm_scalar *his,
                                   gm_dtype dt, int ndim, const int64_t *shape, gm_cuda_ctx *ctx);

int cuda_elementwise_where_forward(char *out, const int64_t *so, const char *cond, const int64_t *sc,
                                   const char *a, const int64_t *sa, const gm_scalar *as,
                                   const char *b, const int64_t *sb, const gm_scalar *bs,
                                   gm_dtype dt, int ndim, const int64_t *shape, gm_cuda_ctx *ctx);

/* Any dtype to any dtype, any strides (a's may be 0 to broadcast); same dtype moves bytes. */
int cuda_elementwise_cast_forward(char *out, const int64_t *so, gm_dtype out_dt,
                                  const char *a, const int64_t *sa, gm_dtype a_dt,
                                  int ndim, const int64_t *shape, gm_cuda_ctx *ctx);

/* out = a + (float)b, out and a float32, b bfloat16 (kernels/cpu/elementwise.h). */
int cuda_elementwise_add_widen_forward(char *out, const int64_t *so, const char *a, const int64_t *sa,
                                       const char *b, const int64_t *sb, gm_dtype b_dt, int ndim,
                                       const int64_t *shape, gm_cuda_ctx *ctx);

int cuda_elementwise_fill_forward(char *out, const int64_t *so, gm_dtype dt, const gm_scalar *value,
                                  int ndim, const int64_t *shape, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
