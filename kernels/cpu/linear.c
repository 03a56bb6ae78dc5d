/* kernels/cpu/linear.c — the linear layer on the CPU (conv.h): out = x @ w^T + bias as one BLAS gemm over
 * operands in any BLAS layout (conv_mat), and its gradients, float32 and float64. */
#ifndef CONV_T

#include "conv_internal.h"

#define CONV_TEMPLATE "linear.c"
#include "conv_typed.h"

static int check_linear(int64_t M, int64_t Fi, int64_t Fo) {
    if (M < 0 || Fi < 0 || Fo < 0) return GM_ERR_ARG;
    return M > INT_MAX || Fi > INT_MAX || Fo > INT_MAX ? GM_ERR_UNSUPPORTED : GM_OK;
}

int linear_forward(void *out, conv_mat x, conv_mat w, const void *bias, int64_t M, int64_t Fi, int64_t Fo, gm_dtype dt,
                   int nthreads) {
    int st = check_linear(M, Fi, Fo);
    if (st) return st;
    if (dt == GM_F32) return linear_forward_f32(out, x, w, bias, M, Fi, Fo, nthreads);
    if (dt == GM_F64) return linear_forward_f64(out, x, w, bias, M, Fi, Fo, nthreads);
    return GM_ERR_UNSUPPORTED;
}

int linear_backward(void *dx, void *dw, void *db, conv_mat g, conv_mat x, conv_mat w, int64_t M, int64_t Fi, int64_t Fo,
                    gm_dtype dt, int nthreads) {
    int st = check_linear(M, Fi, Fo);
    if (st) return st;
    if (dt == GM_F32) return linear_backward_f32(dx, dw, db, g, x, w, M, Fi, Fo, nthreads);
    if (dt == GM_F64) return linear_backward_f64(dx, dw, db, g, x, w, M, Fi, Fo, nthreads);
    return GM_ERR_UNSUPPORTED;
}

#else /* ================ typed part: T is CONV_T, FN(name) is name_<suffix> ================================ */

static int FN(linear_forward)(T *out, conv_mat x, conv_mat w, const T *bias, int64_t M, int64_t Fi, int64_t Fo,
                              int nthreads) {
    if (M == 0 || Fo == 0) return GM_OK;
    if (!out || (Fi > 0 && (!x.p || !w.p))) return GM_ERR_ARG;
    if (bias || Fi == 0) {
        int nt = use_threads(nthreads, (double)M * (double)Fo);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
        for (int64_t m = 0; m < M; m++) {
            T *o = out + m * Fo;
            for (int64_t j = 0; j < Fo; j++) o[j] = bias ? bias[j] : 0;
        }
    }
    if (Fi == 0) return GM_OK;
    /* out = x @ w^T: w is (Fo, Fi), so BLAS transposes a row-major w and reads a column-major one as it is. */
    FN(conv_gemm)(x.trans, !w.trans, M, Fo, Fi, 1, (const T *)x.p, x.ld, (const T *)w.p, w.ld, bias ? 1 : 0, out, Fo);
    return GM_OK;
}

static int FN(linear_backward)(T *dx, T *dw, T *db, conv_mat g, conv_mat x, conv_mat w, int64_t M, int64_t Fi,
                               int64_t Fo, int nthreads) {
    if (dx && M * Fi > 0) { /* dx (M, Fi) = g (M, Fo) @ w (Fo, Fi) */
        if (Fo == 0) memset(dx, 0, (size_t)(M * Fi) * sizeof(T));
        else FN(conv_gemm)(g.trans, w.trans, M, Fi, Fo, 1, (const T *)g.p, g.ld, (const T *)w.p, w.ld, 0, dx, Fi);
    }
    if (dw && Fo * Fi > 0) { /* dw (Fo, Fi) = g^T (Fo, M) @ x (M, Fi) */
        if (M == 0) memset(dw, 0, (size_t)(Fo * Fi) * sizeof(T));
        else FN(conv_gemm)(!g.trans, x.trans, Fo, Fi, M, 1, (const T *)g.p, g.ld, (const T *)x.p, x.ld, 0, dw, Fi);
    }
    if (db && Fo > 0) { /* column sums of g, 64 columns per task so that each pass over a row is one cache line run */
        const int64_t rs = g.trans ? 1 : g.ld, cs = g.trans ? g.ld : 1, nblk = (Fo + 63) / 64;
        const T *gp = (const T *)g.p;
        int nt = use_threads(nthreads, (double)M * (double)Fo);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int64_t o0 = blk * 64, len = min64(64, Fo - o0);
            double acc[64] = {0};
            for (int64_t m = 0; m < M; m++) {
                const T *row = gp + m * rs + o0 * cs;
                for (int64_t j = 0; j < len; j++) acc[j] += row[j * cs];
            }
            for (int64_t j = 0; j < len; j++) db[o0 + j] = (T)acc[j];
        }
    }
    return GM_OK;
}

#endif
