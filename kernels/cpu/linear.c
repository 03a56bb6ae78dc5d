/* kernels/cpu/linear.c — the linear layer on the CPU (conv.h): out = x @ w^T + bias as one BLAS gemm over
 * operands in any BLAS layout (conv_mat), and its gradients, float32 and float64; bfloat16 on gemm_bf16 (float32
 * sums, each result rounded once, no float32 copy of an operand). */
#ifndef CONV_T

#include "conv_internal.h"
#include "gemm_bf16.h"

#define CONV_TEMPLATE "linear.c"
#include "conv_typed.h"

static int check_linear(int64_t M, int64_t Fi, int64_t Fo) {
    if (M < 0 || Fi < 0 || Fo < 0) return GM_ERR_ARG;
    return M > INT_MAX || Fi > INT_MAX || Fo > INT_MAX ? GM_ERR_UNSUPPORTED : GM_OK;
}

/* The bfloat16 view of a conv_mat (rows, cols): element (i, j), or of its transpose when t. */
static gm_bmat bmat(conv_mat m, int t) {
    const int64_t rs = m.trans ? 1 : m.ld, cs = m.trans ? m.ld : 1;
    return t ? (gm_bmat){(const uint16_t *)m.p, cs, rs} : (gm_bmat){(const uint16_t *)m.p, rs, cs};
}

static int linear_forward_bf16(uint16_t *out, conv_mat x, conv_mat w, const uint16_t *bias, int64_t M, int64_t Fi,
                               int64_t Fo, int nthreads) {
    if (M == 0 || Fo == 0) return GM_OK;
    if (!out || (Fi > 0 && (!x.p || !w.p))) return GM_ERR_ARG;
    /* the bias first, then the product onto it: one rounding */
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < Fo; j++) out[m * Fo + j] = bias ? bias[j] : 0;
    return gemm_bf16(M, Fo, Fi, bmat(x, 0), bmat(w, 1), bias ? 1 : 0, out, Fo, 1, nthreads);
}

static int linear_backward_bf16(uint16_t *dx, uint16_t *dw, uint16_t *db, conv_mat g, conv_mat x, conv_mat w, int64_t M,
                                int64_t Fi, int64_t Fo, int nthreads) {
    int st = GM_OK;
    if (dx && M * Fi > 0) st = gemm_bf16(M, Fi, Fo, bmat(g, 0), bmat(w, 0), 0, dx, Fi, 1, nthreads); /* g @ w */
    if (!st && dw && Fo * Fi > 0) st = gemm_bf16(Fo, Fi, M, bmat(g, 1), bmat(x, 0), 0, dw, Fi, 1, nthreads); /* g^T x */
    if (!st && db && Fo > 0) { /* column sums of g in double, rounded once */
        const gm_bmat gb = bmat(g, 0);
        int nt = use_threads(nthreads, (double)M * (double)Fo);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
        for (int64_t o = 0; o < Fo; o++) {
            double acc = 0;
            for (int64_t m = 0; m < M; m++) acc += gm_bf16_to_float(gb.p[m * gb.rs + o * gb.cs]);
            db[o] = gm_float_to_bf16((float)acc);
        }
    }
    return st;
}

int linear_forward(void *out, conv_mat x, conv_mat w, const void *bias, int64_t M, int64_t Fi, int64_t Fo, gm_dtype dt,
                   int nthreads) {
    int st = check_linear(M, Fi, Fo);
    if (st) return st;
    if (dt == GM_F32) return linear_forward_f32(out, x, w, bias, M, Fi, Fo, nthreads);
    if (dt == GM_F64) return linear_forward_f64(out, x, w, bias, M, Fi, Fo, nthreads);
    if (dt == GM_BF16) return linear_forward_bf16(out, x, w, bias, M, Fi, Fo, nthreads);
    return GM_ERR_UNSUPPORTED;
}

int linear_backward(void *dx, void *dw, void *db, conv_mat g, conv_mat x, conv_mat w, int64_t M, int64_t Fi, int64_t Fo,
                    gm_dtype dt, int nthreads) {
    int st = check_linear(M, Fi, Fo);
    if (st) return st;
    if (dt == GM_F32) return linear_backward_f32(dx, dw, db, g, x, w, M, Fi, Fo, nthreads);
    if (dt == GM_F64) return linear_backward_f64(dx, dw, db, g, x, w, M, Fi, Fo, nthreads);
    if (dt == GM_BF16) return linear_backward_bf16(dx, dw, db, g, x, w, M, Fi, Fo, nthreads);
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
