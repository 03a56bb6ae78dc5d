/* kernels/cpu/matmul.h — batched matrix product on the CPU: out (batch..., M, N) = a (batch..., M, K) @
 * b (batch..., K, N). float32/float64 through OpenBLAS gemm, float16/bfloat16 through float32 sgemm in a
 * caller-provided workspace, int64 by a plain loop. Pure compute: nothing is allocated. */
#ifndef GM_KERNELS_CPU_MATMUL_H
#define GM_KERNELS_CPU_MATMUL_H

#include "../matmul_geom.h"

/* The test of kernels/matmul_geom.h's matmul_blas_layout (which both backends share), for csrc and this kernel. */
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
