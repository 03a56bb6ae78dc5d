/* kernels/cuda/emu/linear_emu.cpp — the emulator build's stand-in for kernels/cuda/linear.cu (cuBLAS is not
 * there): the same entry points (linear.h) with the products as plain loops on the emulator's device memory
 * (host memory), accumulating in float (double for float64) as cuBLAS does with our compute types. The bias
 * fill and the bias gradient are the real CUDA kernels of conv_direct.cu, run by the emulator. */
#include <string.h>

#include "../conv.h"
#include "../linear.h"

static double ld(const void *p, int64_t i, gm_dtype dt) {
    switch (dt) {
    case GM_F32: return ((const float *)p)[i];
    case GM_F64: return ((const double *)p)[i];
    case GM_F16: return gm_half_to_float(((const uint16_t *)p)[i]);
    default: return gm_bf16_to_float(((const uint16_t *)p)[i]);
    }
}

static void st(void *p, int64_t i, double v, gm_dtype dt) {
    switch (dt) {
    case GM_F32: ((float *)p)[i] = (float)v; break;
    case GM_F64: ((double *)p)[i] = v; break;
    case GM_F16: ((uint16_t *)p)[i] = gm_float_to_half((float)v); break;
    default: ((uint16_t *)p)[i] = gm_float_to_bf16((float)v); break;
    }
}

/* Row-major C (m x n, ldc) = op(A) op(B) (+ C), the same contract as linear.cu's gemm. */
static void gemm(gm_dtype dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                 const void *B, int64_t ldb, int accumulate, void *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc64 = 0.0;
            float acc32 = 0.0f;
            for (int64_t p = 0; p < k; p++) {
                const double a = ld(A, ta ? p * lda + i : i * lda + p, dt);
                const double b = ld(B, tb ? j * ldb + p : p * ldb + j, dt);
                if (dt == GM_F64) acc64 += a * b;
                else acc32 += (float)a * (float)b;
            }
            double v = dt == GM_F64 ? acc64 : (double)acc32;
            if (accumulate) v += ld(C, i * ldc + j, dt);
            st(C, i * ldc + j, v, dt);
        }
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
