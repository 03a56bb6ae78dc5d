/* kernels/cpu/matmul.c — batched matrix product on the CPU (see matmul.h). Batches are a loop of gemm calls
 * with per-batch pointer offsets (a 0 batch stride broadcasts without a copy); transposed operands are passed
 * to BLAS as transpose flags, never copied. float16 operands are widened to float32 in the caller's workspace
 * because OpenBLAS has no half gemm that we can rely on across CPUs; bfloat16 ones are multiplied as they are by
 * gemm_bf16 where the CPU has AMX (widened as float16 elsewhere). */
#include "matmul.h"
#include "blas_threads.h"
#include "gemm_bf16.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>

/* Multiply-adds below which threading the int64 loop / the half conversions is not worth it. */
#define MATMUL_PARALLEL_GRAIN 65536

/* The rule itself lives in kernels/matmul_geom.h, which the CUDA backend reads too. */
int cpu_matmul_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, size_t elem, int *trans,
                           int64_t *ld) {
    return matmul_blas_layout(rows, cols, rs, cs, elem, trans, ld);
}

size_t cpu_matmul_workspace_nbytes(gm_dtype dt, int64_t M, int64_t N, int64_t K) {
    if (dt != GM_F16 && dt != GM_BF16) return 0;
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    /* bfloat16 runs on gemm_bf16 where the CPU has AMX, which needs none; CUDA, whose allocations meta (= the
     * CPU's) predicts, packs an operand cuBLAS cannot read into (M K + K N) 16-bit elements. Elsewhere one widened
     * sgemm (all of OpenBLAS's threads) beats gemm_bf16's portable blocks and its AVX512-BF16 kernel (half the
     * rate of float32 FMAs on Intel's cores, gemm_bf16.h). */
    if (dt == GM_BF16 && gemm_bf16_amx()) return (size_t)(M * K + K * N) * 2;
    return (size_t)(M * K + K * N + M * N) * sizeof(float);
}

static inline float load_half(const char *p, gm_dtype dt) {
    uint16_t v = *(const uint16_t *)p;
    return dt == GM_F16 ? gm_half_to_float(v) : gm_bf16_to_float(v);
}

/* dst (rows, cols) contiguous float32 = the strided half matrix at src. */
static void widen(float *dst, const char *src, gm_dtype dt, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                  int nt) {
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t i = 0; i < rows; i++) {
        const char *p = src + i * rs;
        float *d = dst + i * cols;
        for (int64_t j = 0; j < cols; j++, p += cs) d[j] = load_half(p, dt);
    }
}

static void narrow(char *dst, const float *src, gm_dtype dt, int64_t n, int nt) {
    uint16_t *d = (uint16_t *)dst;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t i = 0; i < n; i++) d[i] = dt == GM_F16 ? gm_float_to_half(src[i]) : gm_float_to_bf16(src[i]);
}

/* Byte offsets of batch number bi into a and b. */
static void batch_offsets(const matmul_geom *g, int64_t bi, int64_t *oa, int64_t *ob) {
    *oa = 0;
    *ob = 0;
    for (int d = g->nbatch - 1; d >= 0; d--) {
        int64_t i = bi % g->batch_shape[d];
        bi /= g->batch_shape[d];
        *oa += i * g->a_bstrides[d];
        *ob += i * g->b_bstrides[d];
    }
}

/* Exact and wrapping (unsigned arithmetic), like PyTorch's int64 matmul. Rows of all batches are the unit
 * of parallel work; the i-k-j order streams rows of b and out. */
static void matmul_i64(char *out, const char *a, const char *b, const matmul_geom *g, int64_t nb, int nt) {
    const int64_t M = g->M, N = g->N, K = g->K;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t r = 0; r < nb * M; r++) {
        int64_t bi = r / M, i = r % M, oa, ob;
        batch_offsets(g, bi, &oa, &ob);
        const char *pa = a + oa + i * g->a_rs, *pb = b + ob;
        uint64_t *o = (uint64_t *)out + r * N;
        for (int64_t j = 0; j < N; j++) o[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            uint64_t aik = *(const uint64_t *)(pa + k * g->a_cs);
            const char *pbk = pb + k * g->b_rs;
            for (int64_t j = 0; j < N; j++) o[j] += aik * *(const uint64_t *)(pbk + j * g->b_cs);
        }
    }
}

int cpu_matmul_forward(void *out, const void *a, const void *b, gm_dtype dt, const matmul_geom *g,
                       void *workspace, size_t workspace_nbytes, int nthreads) {
    if (!g || g->nbatch < 0 || g->nbatch > GM_MAX_DIMS || g->M < 0 || g->N < 0 || g->K < 0) return GM_ERR_ARG;
    if (dt == GM_BOOL || (int)dt < 0 || dt >= GM_NDTYPES) return GM_ERR_UNSUPPORTED;
    int64_t nb = 1;
    for (int d = 0; d < g->nbatch; d++) {
        if (g->batch_shape[d] < 0) return GM_ERR_ARG;
        nb *= g->batch_shape[d];
    }
    const int64_t M = g->M, N = g->N, K = g->K;
    const size_t es = gm_dtype_size(dt);
    if (nb == 0 || M == 0 || N == 0) return GM_OK;
    if (!out) return GM_ERR_ARG;
    if (K == 0) { /* an empty sum: zero bits are 0 in every dtype here */
        memset(out, 0, (size_t)(nb * M * N) * es);
        return GM_OK;
    }
    if (!a || !b) return GM_ERR_ARG;
    double work = (double)nb * (double)M * (double)N * (double)K;
    int nt = nthreads > 1 && work >= MATMUL_PARALLEL_GRAIN ? nthreads : 1;
    if (dt == GM_I64) {
        matmul_i64((char *)out, (const char *)a, (const char *)b, g, nb, nt);
        return GM_OK;
    }
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) return GM_ERR_UNSUPPORTED; /* 32-bit BLAS integers */

    const char *ca = (const char *)a, *cb = (const char *)b;
    char *co = (char *)out;
    if (dt == GM_BF16 && gemm_bf16_amx()) { /* float32 sums of bfloat16 products, rounded once (any strides) */
        for (int64_t bi = 0; bi < nb; bi++) {
            int64_t oa, ob;
            batch_offsets(g, bi, &oa, &ob);
            const gm_bmat ma = {(const uint16_t *)(ca + oa), g->a_rs / 2, g->a_cs / 2};
            const gm_bmat mb = {(const uint16_t *)(cb + ob), g->b_rs / 2, g->b_cs / 2};
            const int st = gemm_bf16(M, N, K, ma, mb, 0, co + bi * M * N * (int64_t)es, N, 1, nthreads);
            if (st != GM_OK) return st;
        }
        return GM_OK;
    }
    if (dt == GM_F16 || dt == GM_BF16) {
        if (M * K > INT_MAX || K * N > INT_MAX) return GM_ERR_UNSUPPORTED;
        if (!workspace || workspace_nbytes < cpu_matmul_workspace_nbytes(dt, M, N, K)) return GM_ERR_ARG;
        float *fa = (float *)workspace, *fb = fa + M * K, *fc = fb + K * N;
        const char *last_a = NULL, *last_b = NULL;
        for (int64_t bi = 0; bi < nb; bi++) {
            int64_t oa, ob;
            batch_offsets(g, bi, &oa, &ob);
            /* A broadcast operand is the same matrix batch after batch: widen it once. */
            if (ca + oa != last_a) widen(fa, last_a = ca + oa, dt, M, K, g->a_rs, g->a_cs, nt);
            if (cb + ob != last_b) widen(fb, last_b = cb + ob, dt, K, N, g->b_rs, g->b_cs, nt);
            scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, 1.0f,
                              fa, (blasint)K, fb, (blasint)N, 0.0f, fc, (blasint)N);
            narrow(co + bi * M * N * (int64_t)es, fc, dt, M * N, nt);
        }
        return GM_OK;
    }

    int ta, tb;
    int64_t lda, ldb;
    if (!cpu_matmul_blas_layout(M, K, g->a_rs, g->a_cs, es, &ta, &lda)) return GM_ERR_ARG;
    if (!cpu_matmul_blas_layout(K, N, g->b_rs, g->b_cs, es, &tb, &ldb)) return GM_ERR_ARG;
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
#define MATMUL_GEMM(pa, pb, pc)                                                                                 \
    do {                                                                                                      \
        if (dt == GM_F32)                                                                                     \
            scipy_cblas_sgemm(CblasRowMajor, TA, TB, (blasint)M, (blasint)N, (blasint)K, 1.0f, (const float *)(pa), \
                              (blasint)lda, (const float *)(pb), (blasint)ldb, 0.0f, (float *)(pc), (blasint)N);   \
        else                                                                                                  \
            scipy_cblas_dgemm(CblasRowMajor, TA, TB, (blasint)M, (blasint)N, (blasint)K, 1.0, (const double *)(pa), \
                              (blasint)lda, (const double *)(pb), (blasint)ldb, 0.0, (double *)(pc), (blasint)N);  \
    } while (0)
    /* Many products each below OpenBLAS's own threading (attention's heads: 128 of 50 x 32 @ 32 x 50) ran one
     * after another on one core. A thread each, on single-threaded BLAS (blas_threads.h): a 2-layer Transformer
     * encoder step took 43 ms against 48 (2 cores, interleaved runs). Each product is the same call either way. */
    if (nt > 1 && nb >= nt) {
        blas_single_begin(nt);
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t bi = 0; bi < nb; bi++) {
            int64_t pa, pb;
            batch_offsets(g, bi, &pa, &pb);
            MATMUL_GEMM(ca + pa, cb + pb, co + bi * M * N * (int64_t)es);
        }
        blas_single_end(nt);
        return GM_OK;
    }
    int64_t cnt[GM_MAX_DIMS] = {0}, oa = 0, ob = 0;
    for (int64_t bi = 0; bi < nb; bi++) {
        MATMUL_GEMM(ca + oa, cb + ob, co + bi * M * N * (int64_t)es);
        for (int d = g->nbatch - 1; d >= 0; d--) { /* advance the batch odometer */
            if (++cnt[d] < g->batch_shape[d]) {
                oa += g->a_bstrides[d];
                ob += g->b_bstrides[d];
                break;
            }
            cnt[d] = 0;
            oa -= g->a_bstrides[d] * (g->batch_shape[d] - 1);
            ob -= g->b_bstrides[d] * (g->batch_shape[d] - 1);
        }
    }
#undef MATMUL_GEMM
    return GM_OK;
}
