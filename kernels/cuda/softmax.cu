/* kernels/cuda/softmax.cu — softmax / log_softmax on CUDA (see kernels/cpu/softmax.h for the contract and
 * kernels/cpu/softmax.c for the reference).
 *
 * Two shapes of work over the (outer, D, inner) layout:
 *  - rows (inner == 1, D > SM_ROW_MIN: the usual last-dim softmax over many classes): one block per row,
 *    threads stride along the contiguous row, maximum and sums are block reductions;
 *  - columns (everything else: softmax over channels of (N, C, H, W), or short rows): one thread per
 *    (outer, inner) position walking its D values; neighbouring threads read neighbouring addresses when
 *    inner > 1, and a short row fits in a cache line or two when inner == 1.
 * The arithmetic follows the CPU kernel step by step (sums in double, NaN-winning maximum, an all -inf row
 * shifted by 0, and float32/float64 softmax rounding each exp to the dtype before scaling it), so results
 * differ from the CPU's only by summation order and the libm of exp/log. */
#include "softmax.h"
#include "nn_common.cuh"

/* Rows longer than this get a block each; shorter ones a thread each (a block would idle most threads). */
#define SM_ROW_MIN 64

/* The CPU's softmax in float32/float64 stores each exp and then rescales the stored value (one exp per
 * element): the value scaled is the exp rounded to the dtype. Half types recompute the exp in double. */
template <int DT> NN_DEV double sm_kept_exp(double e) { return DT == GM_F32 ? (double)(float)e : e; }

template <int DT, int LOG> __global__ void softmax_rows_kernel(void *out, const void *inp, int64_t rows, int64_t D) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t base = r * D;
        double mx = -INFINITY;
        for (int64_t d = threadIdx.x; d < D; d += GM_CU_THREADS) mx = nn_nanmax()(mx, nn_ld<DT>(inp, base + d));
        mx = gm_cu_block_reduce(mx, nn_nanmax());
        if (mx == -INFINITY) mx = 0.0; /* all -inf: exp gives 0 sums and NaN results, as PyTorch */
        double sum = 0.0;
        for (int64_t d = threadIdx.x; d < D; d += GM_CU_THREADS) sum += nn_exp<DT>(nn_ld<DT>(inp, base + d) - mx);
        sum = gm_cu_block_reduce(sum, gm_cu_sum());
        if (LOG) {
            const double lse = mx + nn_log<DT>(sum);
            for (int64_t d = threadIdx.x; d < D; d += GM_CU_THREADS)
                nn_st<DT>(out, base + d, nn_ld<DT>(inp, base + d) - lse);
        } else {
            const double inv = 1.0 / sum;
            for (int64_t d = threadIdx.x; d < D; d += GM_CU_THREADS)
                nn_st<DT>(out, base + d, sm_kept_exp<DT>(nn_exp<DT>(nn_ld<DT>(inp, base + d) - mx)) * inv);
        }
    }
}

template <int DT, int LOG>
__global__ void softmax_cols_kernel(void *out, const void *inp, int64_t outer, int64_t D, int64_t inner) {
    GM_CU_GRID_STRIDE(p, outer * inner) {
        const int64_t o = inner == 1 ? p : p / inner, j = p - o * inner;
        const int64_t base = o * D * inner + j;
        double mx = -INFINITY;
        for (int64_t d = 0; d < D; d++) {
            const double v = nn_ld<DT>(inp, base + d * inner);
            if (v > mx || v != v) mx = v;
        }
        if (mx == -INFINITY) mx = 0.0;
        double sum = 0.0;
        for (int64_t d = 0; d < D; d++) sum += nn_exp<DT>(nn_ld<DT>(inp, base + d * inner) - mx);
        if (LOG) {
            const double lse = mx + nn_log<DT>(sum);
            for (int64_t d = 0; d < D; d++) {
                const int64_t i = base + d * inner;
                nn_st<DT>(out, i, nn_ld<DT>(inp, i) - lse);
            }
        } else {
            const double inv = 1.0 / sum;
            for (int64_t d = 0; d < D; d++) {
                const int64_t i = base + d * inner;
                nn_st<DT>(out, i, sm_kept_exp<DT>(nn_exp<DT>(nn_ld<DT>(inp, i) - mx)) * inv);
            }
        }
    }
}

/* softmax: dinp = y * (g - sum(g * y)); log_softmax: dinp = g - exp(y) * sum(g). */
template <int DT, int LOG>
__global__ void softmax_bwd_rows_kernel(void *dinp, const void *dout, const void *out, int64_t rows, int64_t D) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t base = r * D;
        double acc = 0.0;
        for (int64_t d = threadIdx.x; d < D; d += GM_CU_THREADS) {
            const double g = nn_ld<DT>(dout, base + d);
            acc += LOG ? g : g * nn_ld<DT>(out, base + d);
        }
        acc = gm_cu_block_reduce(acc, gm_cu_sum());
        for (int64_t d = threadIdx.x; d < D; d += GM_CU_THREADS) {
            const double g = nn_ld<DT>(dout, base + d), y = nn_ld<DT>(out, base + d);
            nn_st<DT>(dinp, base + d, LOG ? g - nn_exp<DT>(y) * acc : y * (g - acc));
        }
    }
}

template <int DT, int LOG>
__global__ void softmax_bwd_cols_kernel(void *dinp, const void *dout, const void *out, int64_t outer, int64_t D,
                                        int64_t inner) {
    GM_CU_GRID_STRIDE(p, outer * inner) {
        const int64_t o = inner == 1 ? p : p / inner, j = p - o * inner;
        const int64_t base = o * D * inner + j;
        double acc = 0.0;
        for (int64_t d = 0; d < D; d++) {
            const int64_t i = base + d * inner;
            const double g = nn_ld<DT>(dout, i);
            acc += LOG ? g : g * nn_ld<DT>(out, i);
        }
        for (int64_t d = 0; d < D; d++) {
            const int64_t i = base + d * inner;
            const double g = nn_ld<DT>(dout, i), y = nn_ld<DT>(out, i);
            nn_st<DT>(dinp, i, LOG ? g - nn_exp<DT>(y) * acc : y * (g - acc));
        }
    }
}

static bool use_rows(int64_t D, int64_t inner) { return inner == 1 && D > SM_ROW_MIN; }
static unsigned row_blocks(int64_t rows) {
    return (unsigned)(rows < 1 ? 1 : rows > GM_CU_MAX_BLOCKS ? GM_CU_MAX_BLOCKS : rows);
}

template <int DT, int LOG>
static void launch_fwd(void *out, const void *inp, int64_t outer, int64_t D, int64_t inner, gm_cuda_ctx *ctx) {
    if (use_rows(D, inner)) {
        auto *k = &softmax_rows_kernel<DT, LOG>;
        GM_LAUNCH(k, row_blocks(outer), GM_CU_THREADS, ctx, out, inp, outer, D);
    } else {
        auto *k = &softmax_cols_kernel<DT, LOG>;
        GM_LAUNCH(k, gm_cu_blocks(outer * inner, ctx), GM_CU_THREADS, ctx, out, inp, outer, D, inner);
    }
}

template <int DT, int LOG>
static void launch_bwd(void *dinp, const void *dout, const void *out, int64_t outer, int64_t D, int64_t inner,
                       gm_cuda_ctx *ctx) {
    if (use_rows(D, inner)) {
        auto *k = &softmax_bwd_rows_kernel<DT, LOG>;
        GM_LAUNCH(k, row_blocks(outer), GM_CU_THREADS, ctx, dinp, dout, out, outer, D);
    } else {
        auto *k = &softmax_bwd_cols_kernel<DT, LOG>;
        GM_LAUNCH(k, gm_cu_blocks(outer * inner, ctx), GM_CU_THREADS, ctx, dinp, dout, out, outer, D, inner);
    }
}

extern "C" int cuda_softmax_forward(void *out, const void *inp, int64_t outer, int64_t D, int64_t inner, gm_dtype dt,
                                    int log, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || outer < 0 || D < 0 || inner < 0) return GM_ERR_ARG;
    if (outer == 0 || D == 0 || inner == 0) return GM_OK;
#define CALL(DT)                                                                                             \
    if (log) launch_fwd<DT, 1>(out, inp, outer, D, inner, ctx);                                              \
    else launch_fwd<DT, 0>(out, inp, outer, D, inner, ctx);
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_softmax_backward(void *dinp, const void *dout, const void *out, int64_t outer, int64_t D,
                                     int64_t inner, gm_dtype dt, int log, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || outer < 0 || D < 0 || inner < 0) return GM_ERR_ARG;
    if (outer == 0 || D == 0 || inner == 0) return GM_OK;
#define CALL(DT)                                                                                             \
    if (log) launch_bwd<DT, 1>(dinp, dout, out, outer, D, inner, ctx);                                       \
    else launch_bwd<DT, 0>(dinp, dout, out, outer, D, inner, ctx);
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
