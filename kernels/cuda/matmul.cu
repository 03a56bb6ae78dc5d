/* kernels/cuda/matmul.cu — batched matrix product through cuBLAS (matmul.h); the CPU twin is
 * kernels/cpu/matmul.c.
 *
 * cuBLAS is column-major and our matrices are row-major: a row-major (R, C) matrix with leading dimension ld is
 * the column-major (C, R) matrix with the same ld, its transpose. So out = a @ b is computed as the column-major
 * product out^T (N, M) = b^T (N, K) @ a^T (K, M): b is cuBLAS's first operand, a its second, and a transposed
 * operand (column-contiguous, matmul_blas_layout's trans = 1) becomes CUBLAS_OP_T, never a copy.
 *
 * Batches: batch dims whose strides nest in both operands are merged (the output is contiguous, so they always
 * nest there), the innermost merged dim becomes one cublasGemmStridedBatchedEx call (a broadcast operand has
 * stride 0) and any dims left over are a host loop of such calls.
 *
 * Precision: every float type accumulates in float32 (CUBLAS_COMPUTE_32F, and reductions in the accumulator
 * type: CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), as the CPU path does by widening halves to float32
 * sgemm; TF32 tensor cores only when ctx->allow_tf32; float64 in float64.
 *
 * cuBLAS's own workspace: we leave cuBLAS its default, which it allocates once per handle (one handle per device,
 * made by csrc/cuda.c) — a fixed cost of the device like the CUDA context, not of any product, so there is
 * nothing per op for the allocator (or the meta estimate) to account. */
#include <cublas_v2.h>
#include <limits.h>

#include "cublas_common.cuh"
#include "matmul.h"

/* ---- int64: exact, wrapping (unsigned arithmetic), like the CPU loop; no BLAS has it ------------------- */
__global__ void matmul_i64_kernel(uint64_t *out, const char *a, const char *b, matmul_geom g, int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        int64_t r = i / g.N, j = i - r * g.N, bi = r / g.M, m = r - bi * g.M;
        const char *pa = a + m * g.a_rs, *pb = b + j * g.b_cs;
        for (int d = g.nbatch - 1; d >= 0; d--) {
            int64_t q = bi / g.batch_shape[d];
            int64_t k = bi - q * g.batch_shape[d];
            pa += k * g.a_bstrides[d];
            pb += k * g.b_bstrides[d];
            bi = q;
        }
        uint64_t acc = 0;
        for (int64_t k = 0; k < g.K; k++) acc += *(const uint64_t *)(pa + k * g.a_cs) * *(const uint64_t *)(pb + k * g.b_rs);
        out[i] = acc;
    }
}

/* ---- 16-bit operands that cuBLAS cannot read: packed row-major into the workspace ------------------------- */
__global__ void pack16_kernel(uint16_t *dst, const char *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    GM_CU_GRID_STRIDE(i, rows * cols) {
        int64_t r = i / cols, c = i - r * cols;
        dst[i] = *(const uint16_t *)(src + r * rs + c * cs);
    }
}

/* ---- one (strided-batched) cuBLAS product ---------------------------------------------------------------- */
typedef struct {
    cudaDataType_t type;
    cublasComputeType_t compute;
    int64_t es;
} gemm_types;

typedef struct {
    const char *a, *b;
    char *out;
    int ta, tb;         /* matmul_blas_layout's trans flags */
    int64_t lda, ldb;   /* elements */
    int64_t sa, sb, so; /* batch strides in elements */
    int64_t count;      /* matrices in this call */
} gemm_call;

static int gemm(gm_cuda_ctx *ctx, const gemm_types *t, const matmul_geom *g, const gemm_call *c) {
    cublasHandle_t h = (cublasHandle_t)ctx->cublas;
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    const int f64 = t->type == CUDA_R_64F;
    const void *alpha = f64 ? (const void *)&one_d : (const void *)&one_f;
    const void *beta = f64 ? (const void *)&zero_d : (const void *)&zero_f;
    for (int64_t done = 0; done < c->count;) { /* batchCount is an int */
        int n = (int)gm_cu_min<int64_t>(c->count - done, INT_MAX);
        GM_CUBLAS_CHECK(ctx, cublasGemmStridedBatchedEx(
                                 h, c->tb ? CUBLAS_OP_T : CUBLAS_OP_N, c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->N,
                                 (int)g->M, (int)g->K, alpha, c->b + done * c->sb * t->es, t->type, (int)c->ldb,
                                 c->sb, c->a + done * c->sa * t->es, t->type, (int)c->lda, c->sa, beta,
                                 c->out + done * c->so * t->es, t->type, (int)g->N, c->so, n, t->compute,
                                 CUBLAS_GEMM_DEFAULT));
        done += n;
    }
    return GM_OK;
}

/* A 16-bit (rows, cols) operand at src as cuBLAS will read it: src itself when its layout is readable (ok), else
 * its row-major copy in dst, packed only when src differs from the last one packed there (*last): a broadcast
 * operand is packed once for the whole batch. */
static const char *readable(int ok, const char *src, const char **last, uint16_t *dst, int64_t rows, int64_t cols,
                            int64_t rs, int64_t cs, gm_cuda_ctx *ctx) {
    if (ok) return src;
    if (src != *last)
        GM_LAUNCH(pack16_kernel, gm_cu_blocks(rows * cols, ctx), GM_CU_THREADS, ctx, dst, src, rows, cols, rs, cs);
    *last = src;
    return (const char *)dst;
}

/* Batch dims without size-1 dims, merged where both operands' strides nest (innermost last). */
typedef struct {
    int n;
    int64_t shape[GM_MAX_DIMS], sa[GM_MAX_DIMS], sb[GM_MAX_DIMS];
} batch_dims;

static void merge_batches(const matmul_geom *g, batch_dims *bd) {
    bd->n = 0;
    for (int d = 0; d < g->nbatch; d++) {
        int64_t n = g->batch_shape[d], sa = g->a_bstrides[d], sb = g->b_bstrides[d];
        if (n == 1) continue;
        int k = bd->n;
        if (k > 0 && bd->sa[k - 1] == sa * n && bd->sb[k - 1] == sb * n) {
            bd->shape[k - 1] *= n;
            bd->sa[k - 1] = sa;
            bd->sb[k - 1] = sb;
            continue;
        }
        bd->shape[k] = n;
        bd->sa[k] = sa;
        bd->sb[k] = sb;
        bd->n++;
    }
}

extern "C" int cuda_matmul_forward(void *out, const void *a, const void *b, gm_dtype dt, const matmul_geom *g,
                                   void *workspace, size_t workspace_nbytes, gm_cuda_ctx *ctx) {
    if (!g || g->nbatch < 0 || g->nbatch > GM_MAX_DIMS || g->M < 0 || g->N < 0 || g->K < 0) return GM_ERR_ARG;
    if (dt == GM_BOOL || (int)dt < 0 || dt >= GM_NDTYPES) return GM_ERR_UNSUPPORTED;
    const int64_t nb = matmul_batch_count(g);
    if (nb < 0) return GM_ERR_ARG;
    const int64_t M = g->M, N = g->N, K = g->K, es = (int64_t)gm_dtype_size(dt);
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    if (nb == 0 || M == 0 || N == 0) return GM_OK;
    if (!out) return GM_ERR_ARG;
    if (K == 0) { /* an empty sum: zero bits are 0 in every dtype here */
        GM_CU_CHECK(ctx, cudaMemsetAsync(out, 0, (size_t)(nb * M * N * es), stream));
        return GM_OK;
    }
    if (!a || !b) return GM_ERR_ARG;
    if (dt == GM_I64) {
        GM_LAUNCH(matmul_i64_kernel, gm_cu_blocks(nb * M * N, ctx), GM_CU_THREADS, ctx, (uint64_t *)out,
                  (const char *)a, (const char *)b, *g, nb * M * N);
        GM_CU_LAUNCHED(ctx);
        return GM_OK;
    }
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) return GM_ERR_UNSUPPORTED; /* cuBLAS's int sizes */
    if (!ctx->cublas) {
        snprintf(ctx->err, sizeof ctx->err, "matmul: no cuBLAS handle for cuda:%d", ctx->device);
        return GM_ERR_BACKEND;
    }

    gemm_types t;
    t.es = es;
    if (!gm_cublas_types(dt, ctx, &t.type, &t.compute)) return GM_ERR_UNSUPPORTED; /* (bool and int64 left above) */
    GM_CUBLAS_CHECK(ctx, cublasSetMathMode((cublasHandle_t)ctx->cublas,
                                           (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));

    gemm_call c;
    int64_t lda, ldb;
    const int a_ok = matmul_blas_layout(M, K, g->a_rs, g->a_cs, (size_t)es, &c.ta, &lda);
    const int b_ok = matmul_blas_layout(K, N, g->b_rs, g->b_cs, (size_t)es, &c.tb, &ldb);
    c.lda = lda;
    c.ldb = ldb;
    const char *ca = (const char *)a, *cb = (const char *)b;
    char *co = (char *)out;

    if (!a_ok || !b_ok) {
        /* Only 16-bit operands get here (csrc copies float32/float64 ones into a BLAS layout): pack the unreadable
         * operand row-major into the workspace, one batch at a time (a broadcast operand once). */
        if (es != 2) return GM_ERR_ARG;
        if (!workspace || workspace_nbytes < (size_t)(M * K + K * N) * 2) return GM_ERR_ARG;
        uint16_t *pa = (uint16_t *)workspace, *pb = pa + M * K;
        const char *last_a = NULL, *last_b = NULL;
        if (!a_ok) { c.ta = 0; c.lda = K; }
        if (!b_ok) { c.tb = 0; c.ldb = N; }
        c.sa = c.sb = c.so = 0;
        c.count = 1;
        for (int64_t bi = 0; bi < nb; bi++) {
            int64_t oa, ob;
            matmul_batch_offsets(g, bi, &oa, &ob);
            c.a = readable(a_ok, ca + oa, &last_a, pa, M, K, g->a_rs, g->a_cs, ctx);
            c.b = readable(b_ok, cb + ob, &last_b, pb, K, N, g->b_rs, g->b_cs, ctx);
            GM_CU_LAUNCHED(ctx);
            c.out = co + bi * M * N * es;
            if (gemm(ctx, &t, g, &c) != GM_OK) return GM_ERR_BACKEND;
        }
        return GM_OK;
    }

    batch_dims bd;
    merge_batches(g, &bd);
    /* the innermost merged dim is one strided-batched call; the outer ones are looped here */
    const int inner = bd.n - 1;
    c.count = inner >= 0 ? bd.shape[inner] : 1;
    c.sa = inner >= 0 ? bd.sa[inner] / es : 0;
    c.sb = inner >= 0 ? bd.sb[inner] / es : 0;
    c.so = M * N;
    int64_t outer = nb / c.count, cnt[GM_MAX_DIMS] = {0}, oa = 0, ob = 0;
    for (int64_t o = 0; o < outer; o++) {
        c.a = ca + oa;
        c.b = cb + ob;
        c.out = co + o * c.count * M * N * es;
        if (gemm(ctx, &t, g, &c) != GM_OK) return GM_ERR_BACKEND;
        for (int d = inner - 1; d >= 0; d--) { /* advance the outer batch odometer */
            if (++cnt[d] < bd.shape[d]) {
                oa += bd.sa[d];
                ob += bd.sb[d];
                break;
            }
            cnt[d] = 0;
            oa -= bd.sa[d] * (bd.shape[d] - 1);
            ob -= bd.sb[d] * (bd.shape[d] - 1);
        }
    }
    return GM_OK;
}
