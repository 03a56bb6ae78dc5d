/* kernels/cpu/matmul.h — batched matrix product on the CPU: out (batch..., M, N) = a (batch..., M, K) @
 * b (batch..., K, N). float32/float64 through OpenBLAS gemm, float16/bfloat16 through float32 sgemm in a
 * caller-provided workspace, int64 by a plain loop. Pure compute: nothing is allocated. */
#ifndef GM_KERNELS_CPU_MATMUL_H
#define GM_KERNELS_CPU_MATMUL_H

#include "../common.h"

typedef struct {
    int nbatch;
    int64_t batch_shape[GM_MAX_DIMS];
    int64_t a_bstrides[GM_MAX_DIMS]; /* bytes; 0 where a is broadcast along that batch dim */
    int64_t b_bstrides[GM_MAX_DIMS];
    int64_t M, N, K;
    int64_t a_rs, a_cs; /* bytes between rows / columns of one (M, K) matrix of a */
    int64_t b_rs, b_cs; /* same for one (K, N) matrix of b */
} matmul_geom;

/* Whether BLAS can read a (rows, cols) matrix with these byte strides as it is: row-contiguous (*trans = 0)
 * or column-contiguous (*trans = 1, read as the transpose of a row-major matrix), with a leading dimension
 * *ld (elements) that fits BLAS's 32-bit integers. Returns 0 when the matrix needs a contiguous copy. */
int cpu_matmul_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, size_t elem, int *trans,
                           int64_t *ld);

/* Whether the kernel needs `a`/`b` in a BLAS-readable layout (float32/float64); the other dtypes read any
 * strides. */
static inline int cpu_matmul_needs_blas_layout(gm_dtype dt) { return dt == GM_F32 || dt == GM_F64; }

/* Workspace bytes cpu_matmul_forward needs for one (M, K) @ (K, N) product of dtype dt (0 unless half). */
size_t cpu_matmul_workspace_nbytes(gm_dtype dt, int64_t M, int64_t N, int64_t K);

/* out is contiguous (batch..., M, N). K == 0 writes zeros. Returns GM_ERR_ARG for an unreadable layout or a
 * short workspace, GM_ERR_UNSUPPORTED for bool or sizes beyond BLAS's 32-bit integers. */
int cpu_matmul_forward(void *out, const void *a, const void *b, gm_dtype dt, const matmul_geom *g,
                       void *workspace, size_t workspace_nbytes, int nthreads);

#endif
