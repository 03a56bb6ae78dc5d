/* kernels/matmul_geom.h — the geometry of a batched matrix product, out (batch..., M, N) = a (batch..., M, K) @
 * b (batch..., K, N), and the test of whether BLAS (OpenBLAS on the CPU, cuBLAS on CUDA) reads an operand as it
 * is. Shared by both backends (kernels/README.md); the kernels are declared in kernels/cpu/matmul.h and
 * kernels/cuda/matmul.h. */
#ifndef GM_KERNELS_MATMUL_GEOM_H
#define GM_KERNELS_MATMUL_GEOM_H

#include <limits.h>

#include "common.h"

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
 * *ld (elements) that fits BLAS's 32-bit integers. Returns 0 when the matrix needs a contiguous copy.
 * (kernels/cpu/matmul.h's cpu_matmul_blas_layout answers the same for csrc and the CPU kernel.) */
static inline int matmul_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, size_t elem, int *trans,
                                     int64_t *ld) {
    if (rows <= 0 || cols <= 0) { /* nothing is read: any valid ld will do */
        *trans = 0;
        *ld = cols > 1 ? cols : 1;
        return cols <= INT_MAX;
    }
    if (elem == 0 || rs % (int64_t)elem || cs % (int64_t)elem) return 0;
    int64_t r = rs / (int64_t)elem, c = cs / (int64_t)elem;
    /* Row-major: (i, j) at i*ld + j, which needs unit column steps and ld >= cols. A single row has no row
     * stride to speak of, so ld is free. */
    if (cols == 1 || c == 1) {
        if (rows == 1) {
            *trans = 0;
            *ld = cols;
            return cols <= INT_MAX;
        }
        if (r >= cols && r <= INT_MAX) {
            *trans = 0;
            *ld = r;
            return 1;
        }
    }
    /* Column-major, read by BLAS as the transpose of a row-major (cols, rows) matrix: (i, j) at j*ld + i. */
    if (rows == 1 || r == 1) {
        if (cols == 1) {
            *trans = 1;
            *ld = rows;
            return rows <= INT_MAX;
        }
        if (c >= rows && c <= INT_MAX) {
            *trans = 1;
            *ld = c;
            return 1;
        }
    }
    return 0;
}

/* The number of products in the batch (the product of batch_shape), or -1 for a negative batch size. */
static inline int64_t matmul_batch_count(const matmul_geom *g) {
    int64_t nb = 1;
    for (int d = 0; d < g->nbatch; d++) {
        if (g->batch_shape[d] < 0) return -1;
        nb *= g->batch_shape[d];
    }
    return nb;
}

/* Byte offsets in a and in b of product bi of the batch (row-major over batch_shape). */
GM_HD static inline void matmul_batch_offsets(const matmul_geom *g, int64_t bi, int64_t *oa, int64_t *ob) {
    *oa = 0;
    *ob = 0;
    for (int d = g->nbatch - 1; d >= 0; d--) {
        const int64_t i = bi % g->batch_shape[d];
        bi /= g->batch_shape[d];
        *oa += i * g->a_bstrides[d];
        *ob += i * g->b_bstrides[d];
    }
}

#endif
