/* kernels/cuda/linear.cu — the linear layer on cuBLAS (linear.h). Not compiled in the emulator build
 * (emu/linear_emu.cpp stands in).
 *
 * cuBLAS is column-major and our matrices row-major: a row-major C (m x n) = op(A) op(B) is the column-major
 * C^T = op(B)^T op(A)^T, so every product swaps its operands and keeps their transpose flags; the leading
 * dimensions are the ones BLAS already takes for the CPU (conv_mat). cublasGemmEx with float32 compute for
 * float32 / float16 / bfloat16 (fp32 accumulation; CUBLAS_COMPUTE_32F_FAST_TF32 only when ctx->allow_tf32) and
 * float64 compute for float64. */
#include <cublas_v2.h>

#include "conv.h"
#include "cublas_common.cuh"
#include "linear.h"

static int fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

/* Row-major C (m x n, ldc) = op(A) (m x k) op(B) (k x n) + (accumulate ? C : 0). */
static int gemm(gm_cuda_ctx *ctx, gm_dtype dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A,
                int64_t lda, const void *B, int64_t ldb, int accumulate, void *C, int64_t ldc) {
    if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) || !fits_int(ldc))
        return GM_ERR_UNSUPPORTED;
    if (!ctx->cublas) {
        snprintf(ctx->err, sizeof ctx->err, "no cuBLAS handle for device %d", ctx->device);
        return GM_ERR_BACKEND;
    }
    cudaDataType_t t;
    cublasComputeType_t compute;
    if (!gm_cublas_types(dt, ctx, &t, &compute)) return GM_ERR_ARG;
    const double a64 = 1.0, b64 = accumulate ? 1.0 : 0.0;
    const float a32 = 1.0f, b32 = accumulate ? 1.0f : 0.0f;
    const void *alpha = dt == GM_F64 ? (const void *)&a64 : (const void *)&a32;
    const void *beta = dt == GM_F64 ? (const void *)&b64 : (const void *)&b32;
    GM_CUBLAS_CHECK(ctx, cublasGemmEx((cublasHandle_t)ctx->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, alpha, B, t, (int)ldb, A, t,
                                 (int)lda, beta, C, t, (int)ldc, compute, CUBLAS_GEMM_DEFAULT));
    return GM_OK;
}

extern "C" int cuda_linear_forward(void *out, conv_mat x, conv_mat w, const void *bias, int64_t M, int64_t Fi,
                                   int64_t Fo, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (M < 0 || Fi < 0 || Fo < 0) return GM_ERR_ARG;
    if (M == 0 || Fo == 0) return GM_OK;
    if (!out || (Fi > 0 && (!x.p || !w.p))) return GM_ERR_ARG;
    if (bias || Fi == 0) { /* the bias first, the product added onto it: no output-sized temporary */
        int st = cuda_conv_fill_bias(out, bias, M, Fo, 1, dt, ctx);
        if (st != GM_OK || Fi == 0) return st;
    }
    /* out = x @ w^T: w is (Fo, Fi), so a row-major w is read transposed and a column-major one as it is */
    return gemm(ctx, dt, x.trans, !w.trans, M, Fo, Fi, x.p, x.ld, w.p, w.ld, bias != NULL, out, Fo);
}

extern "C" int cuda_linear_backward(void *dx, void *dw, void *db, conv_mat g, conv_mat x, conv_mat w, int64_t M,
                                    int64_t Fi, int64_t Fo, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (M < 0 || Fi < 0 || Fo < 0) return GM_ERR_ARG;
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t es = gm_dtype_size(dt);
    int st;
    if (dx && M * Fi > 0) { /* dx (M, Fi) = g (M, Fo) @ w (Fo, Fi) */
        if (Fo == 0) GM_CU_CHECK(ctx, cudaMemsetAsync(dx, 0, (size_t)(M * Fi) * es, s));
        else if ((st = gemm(ctx, dt, g.trans, w.trans, M, Fi, Fo, g.p, g.ld, w.p, w.ld, 0, dx, Fi)) != GM_OK)
            return st;
    }
    if (dw && Fo * Fi > 0) { /* dw (Fo, Fi) = g^T (Fo, M) @ x (M, Fi) */
        if (M == 0) GM_CU_CHECK(ctx, cudaMemsetAsync(dw, 0, (size_t)(Fo * Fi) * es, s));
        else if ((st = gemm(ctx, dt, !g.trans, x.trans, Fo, Fi, M, g.p, g.ld, x.p, x.ld, 0, dw, Fi)) != GM_OK)
            return st;
    }
    if (db && Fo > 0) /* column sums of g */
        return cuda_conv_column_sums(db, g.p, M, Fo, g.trans ? 1 : g.ld, g.trans ? g.ld : 1, dt, ctx);
    return GM_OK;
}
