/* kernels/cuda/emu/linear_emu.cpp — the emulator build's stand-in for kernels/cuda/linear.cu (cuBLAS is not
 * there): the same entry points (linear.h) with the products as plain loops on the emulator's device memory
 * (blas_emu.h: host memory, float accumulation, double for float64, as cuBLAS with our compute types). The bias
 * fill and the bias gradient are the real CUDA kernels of conv_direct.cu, run by the emulator. */
#include <string.h>

#include "../conv.h"
#include "../linear.h"
#include "blas_emu.h"

/* Row-major C (m x n, ldc) = op(A) op(B) (+ C), the same contract as linear.cu's gemm: an operand with its
 * transpose flag is read through element strides (ld, 1), or (1, ld) when transposed. */
static void gemm(gm_dtype dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                 const void *B, int64_t ldb, int accumulate, void *C, int64_t ldc) {
    const int64_t es = (int64_t)gm_dtype_size(dt);
    blas_emu::gemm(dt, m, n, k, (const char *)A, (ta ? 1 : lda) * es, (ta ? lda : 1) * es, (const char *)B,
                   (tb ? 1 : ldb) * es, (tb ? ldb : 1) * es, accumulate, (char *)C, ldc * es);
}

static int float_dtype(gm_dtype dt) { return dt == GM_F32 || dt == GM_F64 || dt == GM_F16 || dt == GM_BF16; }

extern "C" int cuda_linear_forward(void *out, conv_mat x, conv_mat w, const void *bias, int64_t M, int64_t Fi,
                                   int64_t Fo, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (M < 0 || Fi < 0 || Fo < 0 || !float_dtype(dt)) return GM_ERR_ARG;
    if (M == 0 || Fo == 0) return GM_OK;
    if (!out || (Fi > 0 && (!x.p || !w.p))) return GM_ERR_ARG;
    if (bias || Fi == 0) {
        int s = cuda_conv_fill_bias(out, bias, M, Fo, 1, dt, ctx);
        if (s != GM_OK || Fi == 0) return s;
    }
    gemm(dt, x.trans, !w.trans, M, Fo, Fi, x.p, x.ld, w.p, w.ld, bias != NULL, out, Fo);
    return GM_OK;
}

extern "C" int cuda_linear_backward(void *dx, void *dw, void *db, conv_mat g, conv_mat x, conv_mat w, int64_t M,
                                    int64_t Fi, int64_t Fo, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (M < 0 || Fi < 0 || Fo < 0 || !float_dtype(dt)) return GM_ERR_ARG;
    const size_t es = gm_dtype_size(dt);
    if (dx && M * Fi > 0) {
        if (Fo == 0) memset(dx, 0, (size_t)(M * Fi) * es);
        else gemm(dt, g.trans, w.trans, M, Fi, Fo, g.p, g.ld, w.p, w.ld, 0, dx, Fi);
    }
    if (dw && Fo * Fi > 0) {
        if (M == 0) memset(dw, 0, (size_t)(Fo * Fi) * es);
        else gemm(dt, !g.trans, x.trans, Fo, Fi, M, g.p, g.ld, x.p, x.ld, 0, dw, Fi);
    }
    if (db && Fo > 0) return cuda_conv_column_sums(db, g.p, M, Fo, g.trans ? 1 : g.ld, g.trans ? g.ld : 1, dt, ctx);
    return GM_OK;
}
