/* kernels/cpu/linear.c — the linear layer on the CPU (conv.h): out = x @ w^T + bias as one BLAS gemm over
 * operands in any BLAS layout (conv_mat), and its gradients, float32 and float64; bfloat16 on gemm_bf16 (float32
 * sums, each result rounded once, no float32 copy of an operand). */
#ifndef CONV_T

#include "conv_internal.h"
#include "gemm_bf16.h"

/* Thread t of nt's block of an (M, N) output: a block of its rows, or of its columns where there are fewer rows.
 * Each pass of the layer (forward; backward's dx, dw and db) runs in one OpenMP region, every thread on its block
 * with single-threaded BLAS, as the convolutions run theirs. Measured on a 2-layer Transformer encoder step (2
 * cores): OpenBLAS's own threads, spinning after each product beside the OpenMP threads of the ops between them,
 * made the same layers 20-40 % slower inside the model than alone. */
typedef struct {
    int64_t r0, nr, c0, nc; /* rows [r0, r0 + nr), columns [c0, c0 + nc); nr or nc is 0 for an idle thread */
} linear_block;

static linear_block block_of(int t, int nt, int64_t M, int64_t N) {
    const int by_rows = M >= N;
    const int64_t len = by_rows ? M : N, step = (len + nt - 1) / nt, s0 = min64(len, t * step);
    const int64_t n = min64(step, len - s0);
    return by_rows ? (linear_block){s0, n, 0, N} : (linear_block){0, M, s0, n};
}

/* Below this many multiply-adds a pass runs on the calling thread, OpenBLAS threading its products as it decides:
 * waking our OpenMP workers (asleep at once under OMP_WAIT_POLICY=PASSIVE) and setting OpenBLAS's thread count
 * cost more than a small product. Measured (2 cores): an LSTM's (32, 128) @ (128, 512) step product took 99 us
 * forward in a region against 46 without; at 8M multiply-adds, (128, 128) @ (128, 512), the two were equal. */
#define LINEAR_REGION_GRAIN (1 << 23)

static int linear_threads(int nthreads, double macs) {
    return nthreads > 1 && macs >= LINEAR_REGION_GRAIN ? nthreads : 1;
}

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

/* The block b of C (M, N) = op(A) op(B) + beta C: its rows of op(A), its columns of op(B). */
static void FN(gemm_block)(linear_block b, int ta, int tb, int64_t K, const T *A, int64_t lda, const T *B,
                           int64_t ldb, T beta, T *C, int64_t ldc) {
    if (b.nr <= 0 || b.nc <= 0) return;
    FN(conv_gemm)(ta, tb, b.nr, b.nc, K, 1, ta ? A + b.r0 : A + b.r0 * lda, lda, tb ? B + b.c0 * ldb : B + b.c0,
                  ldb, beta, C + b.r0 * ldc + b.c0, ldc);
}

static int FN(linear_forward)(T *out, conv_mat x, conv_mat w, const T *bias, int64_t M, int64_t Fi, int64_t Fo,
                              int nthreads) {
    if (M == 0 || Fo == 0) return GM_OK;
    if (!out || (Fi > 0 && (!x.p || !w.p))) return GM_ERR_ARG;
    const int nt = linear_threads(nthreads, (double)M * (double)Fo * (double)(Fi > 0 ? Fi : 1));
    blas_single_begin(nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const linear_block b = block_of(omp_get_thread_num(), omp_get_num_threads(), M, Fo);
        if (bias || Fi == 0) /* the bias first, the product added onto it */
            for (int64_t m = b.r0; m < b.r0 + b.nr; m++) {
                T *o = out + m * Fo;
                for (int64_t j = b.c0; j < b.c0 + b.nc; j++) o[j] = bias ? bias[j] : 0;
            }
        /* out = x @ w^T: w is (Fo, Fi), so BLAS transposes a row-major w and reads a column-major one as it is */
        if (Fi > 0)
            FN(gemm_block)(b, x.trans, !w.trans, Fi, (const T *)x.p, x.ld, (const T *)w.p, w.ld, bias ? 1 : 0, out,
                           Fo);
    }
    blas_single_end(nt);
    return GM_OK;
}

static int FN(linear_backward)(T *dx, T *dw, T *db, conv_mat g, conv_mat x, conv_mat w, int64_t M, int64_t Fi,
                               int64_t Fo, int nthreads) {
    /* no terms to sum: zeros, and no product below */
    if (dx && M * Fi > 0 && Fo == 0) memset(dx, 0, (size_t)(M * Fi) * sizeof(T));
    if (dw && Fo * Fi > 0 && M == 0) memset(dw, 0, (size_t)(Fo * Fi) * sizeof(T));
    const int do_dx = dx && M * Fi > 0 && Fo > 0, do_dw = dw && Fo * Fi > 0 && M > 0, do_db = db && Fo > 0;
    const double macs = (double)M * (double)Fo * ((do_dx ? (double)Fi : 0) + (do_dw ? (double)Fi : 0) + do_db);
    const int64_t rs = g.trans ? 1 : g.ld, cs = g.trans ? g.ld : 1, nblk = (Fo + 63) / 64;
    const T *gp = (const T *)g.p;
    const int nt = linear_threads(nthreads, macs);
    blas_single_begin(nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int t = omp_get_thread_num(), tn = omp_get_num_threads();
        if (do_dx) /* dx (M, Fi) = g (M, Fo) @ w (Fo, Fi) */
            FN(gemm_block)(block_of(t, tn, M, Fi), g.trans, w.trans, Fo, gp, g.ld, (const T *)w.p, w.ld, 0, dx, Fi);
        if (do_dw) /* dw (Fo, Fi) = g^T (Fo, M) @ x (M, Fi) */
            FN(gemm_block)(block_of(t, tn, Fo, Fi), !g.trans, x.trans, M, gp, g.ld, (const T *)x.p, x.ld, 0, dw,
                           Fi);
        /* db: column sums of g, 64 columns a block so that each pass over a row is one cache line run */
        for (int64_t blk = t; do_db && blk < nblk; blk += tn) {
            const int64_t o0 = blk * 64, len = min64(64, Fo - o0);
            double acc[64] = {0};
            for (int64_t m = 0; m < M; m++) {
                const T *row = gp + m * rs + o0 * cs;
                for (int64_t j = 0; j < len; j++) acc[j] += row[j * cs];
            }
            for (int64_t j = 0; j < len; j++) db[o0 + j] = (T)acc[j];
        }
    }
    blas_single_end(nt);
    return GM_OK;
}

#endif
