/* kernels/cuda/loss.cu — losses on CUDA (see kernels/cpu/loss.h for the math, kernels/cpu/loss.c for the
 * reference, and kernels/cuda/loss.h for the scratch and the host read-backs).
 *
 * Class losses over (N, C, inner) logits take one of two shapes of work, as softmax.cu:
 *  - rows (inner == 1 and C > CE_ROW_MIN: classification over many classes): one block per sample, the
 *    row's maximum and sums are block reductions;
 *  - columns (segmentation (N, C, H, W), or few classes): one thread per position walking its C classes
 *    (neighbouring threads read neighbouring addresses when inner > 1).
 * Reduced totals: every thread sums its positions in double, each block reduces its threads into one partial
 * in scratch, and a one-block kernel (loss_finish_kernel) reduces the partials and stores the loss. Summation
 * order is fixed for a given device, so results repeat exactly run to run; they differ from the CPU's only by
 * that order (and the libm of exp/log). The per-element math is the CPU kernel's, in double. */
#include "loss.h"
#include "nn_common.cuh"

#define CE_ROW_MIN 64
#define NO_BAD INT64_MAX

/* What loss_finish_kernel leaves at the start of scratch for the host. */
struct loss_result {
    double total, ws;
    int64_t bad, bad_value;
};

struct loss_scratch {
    loss_result *res;
    double *tot, *ws; /* CUDA_LOSS_PARTS partials each */
    int64_t *bad;
};

/* The record and the partials in scratch s; all NULL without scratch (mse/l1/bce with LOSS_NONE take none). */
static loss_scratch scratch_view(void *s) {
    loss_scratch v = {};
    if (!s) return v;
    v.res = (loss_result *)s;
    v.tot = (double *)((char *)s + sizeof(loss_result));
    v.ws = v.tot + CUDA_LOSS_PARTS;
    v.bad = (int64_t *)(v.ws + CUDA_LOSS_PARTS);
    return v;
}

/* Blocks of a reduction: at most CUDA_LOSS_PARTS (one partial each). */
static unsigned part_blocks(int64_t work, const gm_cuda_ctx *ctx) {
    const unsigned g = gm_cu_blocks(work, ctx);
    return g > CUDA_LOSS_PARTS ? CUDA_LOSS_PARTS : g;
}
static unsigned row_part_blocks(int64_t rows) {
    int64_t g = rows < 1 ? 1 : rows;
    if (g > GM_CU_MAX_BLOCKS) g = GM_CU_MAX_BLOCKS;
    if (g > CUDA_LOSS_PARTS) g = CUDA_LOSS_PARTS;
    return (unsigned)g;
}

/* Each block's threads' (total, weight sum, first bad position) into partial blockIdx.x. Every thread calls. */
__device__ __forceinline__ void store_parts(double tot, double ws, int64_t bad, double *ptot, double *pws,
                                            int64_t *pbad) {
    tot = gm_cu_block_reduce(tot, gm_cu_sum());
    ws = gm_cu_block_reduce(ws, gm_cu_sum());
    bad = gm_cu_block_reduce(bad, nn_min_i64());
    if (threadIdx.x == 0) {
        ptot[blockIdx.x] = tot;
        if (pws) pws[blockIdx.x] = ws;
        if (pbad) pbad[blockIdx.x] = bad;
    }
}

/* Whether position p's target class t counts, and its weight *wt (1 without weights), added to the thread's
 * weight sum *ws. It does not count when t is ignore_index, nor when t is outside [0, C): then *bad keeps the least
 * such position, for the host's IndexError (a bad target never makes a kernel read out of bounds). */
NN_DEV bool target_weight(int64_t t, int64_t p, int64_t C, int64_t ignore, const double *weight, double *wt,
                          double *ws, int64_t *bad) {
    if (t == ignore) return false;
    if (t < 0 || t >= C) {
        *bad = gm_cu_min(*bad, p);
        return false;
    }
    *wt = weight ? weight[t] : 1.0;
    *ws += *wt;
    return true;
}

/* Position i's loss li: stored for LOSS_NONE, else added to the thread's total. */
template <int DT> NN_DEV void put_loss(void *loss, int64_t i, double li, int reduction, double *tot) {
    if (reduction == LOSS_NONE) nn_st<DT>(loss, i, li);
    else *tot += li;
}

/* One block: partials -> res, and the reduced loss (sum, or mean over the weight sum / denom) into loss[0]. */
__global__ void loss_finish_kernel(loss_result *res, const double *ptot, const double *pws, const int64_t *pbad,
                                   int nparts, void *loss, int reduction, int dt, int mean_by_ws, double denom,
                                   const int64_t *target) {
    double tot = 0.0, ws = 0.0;
    int64_t bad = NO_BAD;
    for (int k = threadIdx.x; k < nparts; k += GM_CU_THREADS) {
        if (ptot) tot += ptot[k];
        if (pws) ws += pws[k];
        if (pbad) bad = gm_cu_min(bad, pbad[k]);
    }
    tot = gm_cu_block_reduce(tot, gm_cu_sum());
    ws = gm_cu_block_reduce(ws, gm_cu_sum());
    bad = gm_cu_block_reduce(bad, nn_min_i64());
    if (threadIdx.x == 0) {
        res->total = tot;
        res->ws = ws;
        res->bad = bad == NO_BAD ? -1 : bad;
        res->bad_value = bad == NO_BAD ? 0 : target[bad];
        if (loss && reduction != LOSS_NONE)
            nn_st_rt(loss, 0, dt, reduction == LOSS_MEAN ? tot / (mean_by_ws ? ws : denom) : tot);
    }
}

__global__ void bad_target_kernel(int64_t *pbad, const int64_t *target, int64_t n, int64_t C, int64_t ignore) {
    int64_t bad = NO_BAD;
    GM_CU_GRID_STRIDE(i, n) {
        const int64_t t = target[i];
        if ((t < 0 || t >= C) && t != ignore) {
            bad = i; /* positions only grow along a thread's walk: its first is its least */
            break;
        }
    }
    bad = gm_cu_block_reduce(bad, nn_min_i64());
    if (threadIdx.x == 0) pbad[blockIdx.x] = bad;
}

/* Copy the result record back, wait for it, and hand the host the weight sum (unless wsum is NULL) and the first
 * bad target (bad[0] = its position or -1, bad[1] = its value). Without bad, nothing is read back: the caller
 * knew the targets valid and their weight sum (loss.h), and the call returns once its work is queued. */
static int read_result(double *wsum, int64_t bad[2], const loss_scratch &v, gm_cuda_ctx *ctx) {
    GM_CU_LAUNCHED(ctx);
    if (!bad) return wsum ? GM_ERR_ARG : GM_OK;
    loss_result h;
    GM_CU_CHECK(ctx, cudaMemcpyAsync(&h, v.res, sizeof h, cudaMemcpyDeviceToHost, (cudaStream_t)ctx->stream));
    GM_CU_CHECK(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream));
    if (wsum) *wsum = h.ws;
    bad[0] = h.bad;
    bad[1] = h.bad_value;
    return GM_OK;
}

/* After a class loss's partial kernel (grid blocks): the one-block kernel that reduces the partials and stores
 * loss[0] (unless LOSS_NONE; the mean divides by the weight sum), then the read-back of read_result. */
static int finish_class_loss(void *loss, double *wsum, int64_t bad[2], const loss_scratch &v, unsigned grid,
                             int reduction, gm_dtype dt, const int64_t *target, gm_cuda_ctx *ctx) {
    GM_LAUNCH(loss_finish_kernel, 1, GM_CU_THREADS, ctx, v.res, (const double *)v.tot, (const double *)v.ws,
              (const int64_t *)v.bad, (int)grid, reduction == LOSS_NONE ? (void *)NULL : loss, reduction, (int)dt, 1,
              0.0, target);
    return read_result(wsum, bad, v, ctx);
}

extern "C" int cuda_loss_first_bad_target(int64_t bad[2], const int64_t *target, int64_t n, int64_t C,
                                          int64_t ignore_index, void *scratch, gm_cuda_ctx *ctx) {
    bad[0] = -1;
    bad[1] = 0;
    if (n < 0 || !scratch) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
    const loss_scratch v = scratch_view(scratch);
    const unsigned grid = part_blocks(n, ctx);
    GM_LAUNCH(bad_target_kernel, grid, GM_CU_THREADS, ctx, v.bad, target, n, C, ignore_index);
    GM_LAUNCH(loss_finish_kernel, 1, GM_CU_THREADS, ctx, v.res, (const double *)NULL, (const double *)NULL,
              (const int64_t *)v.bad, (int)grid, (void *)NULL, (int)LOSS_NONE, (int)GM_F32, 0, 0.0, target);
    return read_result(NULL, bad, v, ctx);
}

/* ---- cross_entropy ------------------------------------------------------------------------------------------ */

/* sum_c w_c (C without weights), by the whole block. */
__device__ __forceinline__ double block_weight_total(const double *weight, int64_t C) {
    if (!weight) return (double)C;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += GM_CU_THREADS) s += weight[c];
    return gm_cu_block_reduce(s, gm_cu_sum());
}

/* loss_i of a position with log-sum-exp l, target logit xt and sum_c w_c x_c = wx (see loss.h). */
NN_DEV double ce_position_loss(double l, double xt, double wx, double wt, double smoothing, double eps_c,
                               double wall) {
    double li = (1.0 - smoothing) * wt * (l - xt);
    if (smoothing != 0.0) li += eps_c * (wall * l - wx);
    return li;
}

template <int DT>
__global__ void ce_fwd_cols_kernel(void *loss, void *lse, double *ptot, double *pws, int64_t *pbad, const void *inp,
                                   const int64_t *target, const double *weight, int64_t N, int64_t C, int64_t inner,
                                   int64_t ignore, int reduction, double smoothing, int sdt) {
    const double eps_c = smoothing / (double)C;
    const double wall = smoothing != 0.0 ? block_weight_total(weight, C) : 0.0;
    double tot = 0.0, ws = 0.0;
    int64_t bad = NO_BAD;
    GM_CU_GRID_STRIDE(p, N * inner) {
        const int64_t n = inner == 1 ? p : p / inner, j = p - n * inner, base = n * C * inner + j;
        double mx = -INFINITY, sum = 0.0, wx = 0.0;
        for (int64_t c = 0; c < C; c++) {
            const double v = nn_ld<DT>(inp, base + c * inner);
            if (v > mx || v != v) mx = v;
        }
        if (mx == -INFINITY) mx = 0.0;
        for (int64_t c = 0; c < C; c++) {
            const double v = nn_ld<DT>(inp, base + c * inner);
            sum += nn_exp<DT>(v - mx);
            if (smoothing != 0.0) wx += (weight ? weight[c] : 1.0) * v;
        }
        const double l = mx + nn_log<DT>(sum);
        nn_st_rt(lse, p, sdt, l);
        const int64_t t = target[p];
        double li = 0.0, wt;
        if (target_weight(t, p, C, ignore, weight, &wt, &ws, &bad))
            li = ce_position_loss(l, nn_ld<DT>(inp, base + t * inner), wx, wt, smoothing, eps_c, wall);
        put_loss<DT>(loss, p, li, reduction, &tot);
    }
    store_parts(tot, ws, bad, ptot, pws, pbad);
}

template <int DT>
__global__ void ce_fwd_rows_kernel(void *loss, void *lse, double *ptot, double *pws, int64_t *pbad, const void *inp,
                                   const int64_t *target, const double *weight, int64_t N, int64_t C, int64_t ignore,
                                   int reduction, double smoothing, int sdt) {
    const double eps_c = smoothing / (double)C;
    const double wall = smoothing != 0.0 ? block_weight_total(weight, C) : 0.0;
    double tot = 0.0, ws = 0.0; /* thread 0's */
    int64_t bad = NO_BAD;
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const int64_t base = n * C;
        double mx = -INFINITY;
        for (int64_t c = threadIdx.x; c < C; c += GM_CU_THREADS) mx = nn_nanmax()(mx, nn_ld<DT>(inp, base + c));
        mx = gm_cu_block_reduce(mx, nn_nanmax());
        if (mx == -INFINITY) mx = 0.0;
        double sum = 0.0, wx = 0.0;
        for (int64_t c = threadIdx.x; c < C; c += GM_CU_THREADS) {
            const double v = nn_ld<DT>(inp, base + c);
            sum += nn_exp<DT>(v - mx);
            if (smoothing != 0.0) wx += (weight ? weight[c] : 1.0) * v;
        }
        sum = gm_cu_block_reduce(sum, gm_cu_sum());
        if (smoothing != 0.0) wx = gm_cu_block_reduce(wx, gm_cu_sum());
        if (threadIdx.x == 0) {
            const double l = mx + nn_log<DT>(sum);
            nn_st_rt(lse, n, sdt, l);
            const int64_t t = target[n];
            double li = 0.0, wt;
            if (target_weight(t, n, C, ignore, weight, &wt, &ws, &bad))
                li = ce_position_loss(l, nn_ld<DT>(inp, base + t), wx, wt, smoothing, eps_c, wall);
            put_loss<DT>(loss, n, li, reduction, &tot);
        }
    }
    store_parts(tot, ws, bad, ptot, pws, pbad);
}

/* The reduction's gradient scale for position i (kernels/cpu/loss.c's grad_scale). */
template <int DT> NN_DEV double grad_scale(const void *dout, int64_t i, int reduction, double denom) {
    if (reduction == LOSS_NONE) return nn_ld<DT>(dout, i);
    const double g = nn_ld<DT>(dout, 0);
    return reduction == LOSS_MEAN ? g / denom : g;
}

/* Per position: a = s ((1-eps) w_t + eps/C sum w), b = s (1-eps) w_t, e = s eps/C. False when the position has
 * no gradient (ignored, or a bad target the caller reports). */
template <int DT>
NN_DEV bool ce_grad_coefs(const void *dout, int64_t p, int64_t t, int64_t C, int64_t ignore, const double *weight,
                          int reduction, double smoothing, double eps_c, double wall, double wsum, double *a,
                          double *b, double *e) {
    if (t == ignore || t < 0 || t >= C) return false;
    const double s = grad_scale<DT>(dout, p, reduction, wsum);
    const double wt = weight ? weight[t] : 1.0;
    *b = s * (1.0 - smoothing) * wt;
    *e = s * eps_c;
    *a = *b + *e * wall;
    return true;
}

template <int DT>
__global__ void ce_bwd_cols_kernel(void *dinp, const void *dout, const void *inp, const int64_t *target,
                                   const double *weight, const void *lse, int64_t N, int64_t C, int64_t inner,
                                   int64_t ignore, int reduction, double smoothing, double wsum, int sdt) {
    const double eps_c = smoothing / (double)C, wall = block_weight_total(weight, C);
    GM_CU_GRID_STRIDE(p, N * inner) {
        const int64_t n = inner == 1 ? p : p / inner, j = p - n * inner, base = n * C * inner + j;
        const int64_t t = target[p];
        double a, b, e;
        if (!ce_grad_coefs<DT>(dout, p, t, C, ignore, weight, reduction, smoothing, eps_c, wall, wsum, &a, &b, &e)) {
            for (int64_t c = 0; c < C; c++) nn_st<DT>(dinp, base + c * inner, 0.0); /* exactly 0, even for inf */
            continue;
        }
        const double l = nn_ld_rt(lse, p, sdt);
        for (int64_t c = 0; c < C; c++) {
            const int64_t i = base + c * inner;
            const double wc = weight ? weight[c] : 1.0;
            nn_st<DT>(dinp, i, a * nn_exp<DT>(nn_ld<DT>(inp, i) - l) - e * wc - (c == t ? b : 0.0));
        }
    }
}

template <int DT>
__global__ void ce_bwd_rows_kernel(void *dinp, const void *dout, const void *inp, const int64_t *target,
                                   const double *weight, const void *lse, int64_t N, int64_t C, int64_t ignore,
                                   int reduction, double smoothing, double wsum, int sdt) {
    const double eps_c = smoothing / (double)C, wall = block_weight_total(weight, C);
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const int64_t base = n * C, t = target[n];
        double a, b, e;
        if (!ce_grad_coefs<DT>(dout, n, t, C, ignore, weight, reduction, smoothing, eps_c, wall, wsum, &a, &b, &e)) {
            for (int64_t c = threadIdx.x; c < C; c += GM_CU_THREADS) nn_st<DT>(dinp, base + c, 0.0);
            continue;
        }
        const double l = nn_ld_rt(lse, n, sdt);
        for (int64_t c = threadIdx.x; c < C; c += GM_CU_THREADS) {
            const double wc = weight ? weight[c] : 1.0;
            nn_st<DT>(dinp, base + c, a * nn_exp<DT>(nn_ld<DT>(inp, base + c) - l) - e * wc - (c == t ? b : 0.0));
        }
    }
}

static bool class_args_ok(gm_dtype dt, int64_t N, int64_t C, int64_t inner, int reduction) {
    return gm_dtype_is_float(dt) && N >= 0 && C >= 1 && inner >= 0 && reduction >= LOSS_NONE && reduction <= LOSS_SUM;
}
static bool ce_rows(int64_t C, int64_t inner) { return inner == 1 && C > CE_ROW_MIN; }

template <int DT>
static unsigned launch_ce_fwd(void *loss, void *lse, const loss_scratch &v, const void *inp, const int64_t *target,
                              const double *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore,
                              int reduction, double smoothing, int sdt, gm_cuda_ctx *ctx) {
    unsigned grid;
    if (ce_rows(C, inner)) {
        grid = row_part_blocks(N);
        auto *k = &ce_fwd_rows_kernel<DT>;
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, loss, lse, v.tot, v.ws, v.bad, inp, target, weight, N, C, ignore,
                  reduction, smoothing, sdt);
    } else {
        grid = part_blocks(N * inner, ctx);
        auto *k = &ce_fwd_cols_kernel<DT>;
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, loss, lse, v.tot, v.ws, v.bad, inp, target, weight, N, C, inner,
                  ignore, reduction, smoothing, sdt);
    }
    return grid;
}

extern "C" int cuda_cross_entropy_forward(void *loss, void *lse, double *wsum, const void *inp, const int64_t *target,
                                          const double *weight, int64_t N, int64_t C, int64_t inner,
                                          int64_t ignore_index, int reduction, double smoothing, gm_dtype dt,
                                          gm_dtype sdt, void *scratch, int64_t bad[2], gm_cuda_ctx *ctx) {
    if (bad) {
        bad[0] = -1;
        bad[1] = 0;
    }
    if (!class_args_ok(dt, N, C, inner, reduction) || !scratch) return GM_ERR_ARG;
    const loss_scratch v = scratch_view(scratch);
    unsigned grid = 1;
#define CALL(DT)                                                                                             \
    grid = launch_ce_fwd<DT>(loss, lse, v, inp, target, weight, N, C, inner, ignore_index, reduction, smoothing, \
                             (int)sdt, ctx)
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return finish_class_loss(loss, wsum, bad, v, grid, reduction, dt, target, ctx);
}

extern "C" int cuda_cross_entropy_backward(void *dinp, const void *dout, const void *inp, const int64_t *target,
                                           const double *weight, const void *lse, int64_t N, int64_t C, int64_t inner,
                                           int64_t ignore_index, int reduction, double smoothing, double wsum,
                                           gm_dtype dt, gm_dtype sdt, gm_cuda_ctx *ctx) {
    if (!class_args_ok(dt, N, C, inner, reduction)) return GM_ERR_ARG;
    if (N * inner == 0) return GM_OK;
    const bool rows = ce_rows(C, inner);
    const unsigned grid = rows ? row_part_blocks(N) : gm_cu_blocks(N * inner, ctx);
#define CALL(DT)                                                                                             \
    if (rows) {                                                                                              \
        auto *k = &ce_bwd_rows_kernel<DT>;                                                                   \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, dinp, dout, inp, target, weight, lse, N, C, ignore_index, reduction, \
                  smoothing, wsum, (int)sdt);                                                                \
    } else {                                                                                                 \
        auto *k = &ce_bwd_cols_kernel<DT>;                                                                   \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, dinp, dout, inp, target, weight, lse, N, C, inner, ignore_index,    \
                  reduction, smoothing, wsum, (int)sdt);                                                     \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- nll_loss ------------------------------------------------------------------------------------------------ */

template <int DT>
__global__ void nll_fwd_kernel(void *loss, double *ptot, double *pws, int64_t *pbad, const void *inp,
                               const int64_t *target, const double *weight, int64_t npos, int64_t C, int64_t inner,
                               int64_t ignore, int reduction) {
    double tot = 0.0, ws = 0.0;
    int64_t bad = NO_BAD;
    GM_CU_GRID_STRIDE(p, npos) {
        const int64_t t = target[p], n = inner == 1 ? p : p / inner, j = p - n * inner;
        double li = 0.0, wt;
        if (target_weight(t, p, C, ignore, weight, &wt, &ws, &bad)) li = -wt * nn_ld<DT>(inp, (n * C + t) * inner + j);
        put_loss<DT>(loss, p, li, reduction, &tot);
    }
    store_parts(tot, ws, bad, ptot, pws, pbad);
}

template <int DT>
__global__ void nll_bwd_kernel(void *dinp, const void *dout, const int64_t *target, const double *weight,
                               int64_t npos, int64_t C, int64_t inner, int64_t ignore, int reduction, double wsum) {
    GM_CU_GRID_STRIDE(p, npos) {
        const int64_t t = target[p], n = inner == 1 ? p : p / inner, j = p - n * inner;
        if (t == ignore || t < 0 || t >= C) continue;
        const double wt = weight ? weight[t] : 1.0;
        nn_st<DT>(dinp, (n * C + t) * inner + j, -wt * grad_scale<DT>(dout, p, reduction, wsum));
    }
}

extern "C" int cuda_nll_loss_forward(void *loss, double *wsum, const void *inp, const int64_t *target,
                                     const double *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore_index,
                                     int reduction, gm_dtype dt, void *scratch, int64_t bad[2], gm_cuda_ctx *ctx) {
    if (bad) {
        bad[0] = -1;
        bad[1] = 0;
    }
    if (!class_args_ok(dt, N, C, inner, reduction) || !scratch) return GM_ERR_ARG;
    const loss_scratch v = scratch_view(scratch);
    const int64_t npos = N * inner;
    const unsigned grid = part_blocks(npos, ctx);
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &nll_fwd_kernel<DT>;                                                                       \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, loss, v.tot, v.ws, v.bad, inp, target, weight, npos, C, inner,     \
                  ignore_index, reduction);                                                                  \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return finish_class_loss(loss, wsum, bad, v, grid, reduction, dt, target, ctx);
}

extern "C" int cuda_nll_loss_backward(void *dinp, const void *dout, const int64_t *target, const double *weight,
                                      int64_t N, int64_t C, int64_t inner, int64_t ignore_index, int reduction,
                                      double wsum, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!class_args_ok(dt, N, C, inner, reduction)) return GM_ERR_ARG;
    const int64_t npos = N * inner;
    if (npos == 0) return GM_OK;
    /* all-zero bits are +0 in every float dtype */
    GM_CU_CHECK(ctx, cudaMemsetAsync(dinp, 0, (size_t)(npos * C) * gm_dtype_size(dt), (cudaStream_t)ctx->stream));
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &nll_bwd_kernel<DT>;                                                                       \
        GM_LAUNCH(k, gm_cu_blocks(npos, ctx), GM_CU_THREADS, ctx, dinp, dout, target, weight, npos, C, inner,     \
                  ignore_index, reduction, wsum);                                                            \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- pointwise losses: mse, l1, smooth_l1, huber, binary_cross_entropy, kl_div (kernels/loss_ops.h) ---------- */

template <int DT>
__global__ void pointwise_fwd_kernel(void *loss, double *ptot, const void *x, const void *t, int64_t n, int op,
                                     double param, int reduction) {
    double tot = 0.0;
    GM_CU_GRID_STRIDE(i, n) {
        put_loss<DT>(loss, i, pointwise_loss_value(op, nn_ld<DT>(x, i), nn_ld<DT>(t, i), param), reduction, &tot);
    }
    if (reduction != LOSS_NONE) store_parts(tot, 0.0, NO_BAD, ptot, NULL, NULL); /* uniform over the block */
}

template <int DT>
__global__ void pointwise_bwd_kernel(void *dx, void *dt_, const void *dout, const void *x, const void *t, int64_t n,
                                     int op, double param, int reduction) {
    GM_CU_GRID_STRIDE(i, n) {
        const double s = grad_scale<DT>(dout, i, reduction, (double)n);
        double gx, gt;
        pointwise_loss_grads(op, nn_ld<DT>(x, i), nn_ld<DT>(t, i), param, &gx, &gt);
        if (dx) nn_st<DT>(dx, i, gx * s);
        if (dt_) nn_st<DT>(dt_, i, gt * s);
    }
}

/* After an mse/l1/bce partial kernel (grid blocks): the one-block kernel that stores loss[0] (LOSS_NONE stored
 * every element already), then the launches' status. */
static int finish_total(void *loss, const loss_scratch &v, unsigned grid, int reduction, gm_dtype dt, int64_t n,
                        gm_cuda_ctx *ctx) {
    if (reduction != LOSS_NONE) {
        GM_LAUNCH(loss_finish_kernel, 1, GM_CU_THREADS, ctx, v.res, (const double *)v.tot, (const double *)NULL,
                  (const int64_t *)NULL, (int)grid, loss, reduction, (int)dt, 0, (double)n, (const int64_t *)NULL);
    }
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_pointwise_loss_forward(void *loss, const void *x, const void *t, int64_t n, int op, double param,
                                           int reduction, gm_dtype dt, void *scratch, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= LOSS_POINTWISE_OPS || reduction < LOSS_NONE ||
        reduction > LOSS_SUM || (reduction != LOSS_NONE && !scratch))
        return GM_ERR_ARG;
    if (reduction == LOSS_NONE && n == 0) return GM_OK;
    const loss_scratch v = scratch_view(scratch);
    const unsigned grid = part_blocks(n, ctx);
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &pointwise_fwd_kernel<DT>;                                                                 \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, loss, v.tot, x, t, n, op, param, reduction);                  \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return finish_total(loss, v, grid, reduction, dt, n, ctx);
}

extern "C" int cuda_pointwise_loss_backward(void *dx, void *dt_, const void *dout, const void *x, const void *t,
                                            int64_t n, int op, double param, int reduction, gm_dtype dt,
                                            gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || n < 0 || op < 0 || op >= LOSS_POINTWISE_OPS || reduction < LOSS_NONE ||
        reduction > LOSS_SUM)
        return GM_ERR_ARG;
    if (n == 0 || (!dx && !dt_)) return GM_OK;
    const unsigned grid = gm_cu_blocks(n, ctx);
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &pointwise_bwd_kernel<DT>;                                                                 \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, dx, dt_, dout, x, t, n, op, param, reduction);                \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- binary_cross_entropy_with_logits ------------------------------------------------------------------------- */

/* softplus(x) and softplus(-x), without overflow for either sign of x. */
template <int DT> NN_DEV void softplus_pair(double x, double *sp_pos, double *sp_neg) {
    const double l = nn_log1p<DT>(nn_exp<DT>(-fabs(x)));
    *sp_pos = l + (x > 0.0 ? x : 0.0);
    *sp_neg = l + (x < 0.0 ? -x : 0.0);
}

template <int DT>
__global__ void bce_fwd_kernel(void *loss, double *ptot, const void *x, const void *t, const void *w, int64_t w_period,
                               const void *pw, int64_t pw_period, int64_t n, int reduction) {
    double tot = 0.0;
    GM_CU_GRID_STRIDE(i, n) {
        const double xi = nn_ld<DT>(x, i), ti = nn_ld<DT>(t, i);
        const double pwi = pw ? nn_ld<DT>(pw, i % pw_period) : 1.0;
        double spp, spn;
        softplus_pair<DT>(xi, &spp, &spn);
        double li = pwi * ti * spn + (1.0 - ti) * spp; /* a sum of non-negative terms: see kernels/cpu/loss.c */
        if (w) li *= nn_ld<DT>(w, i % w_period);
        put_loss<DT>(loss, i, li, reduction, &tot);
    }
    if (reduction != LOSS_NONE) store_parts(tot, 0.0, NO_BAD, ptot, NULL, NULL);
}

template <int DT>
__global__ void bce_bwd_kernel(void *dx, void *dtarget, const void *dout, const void *x, const void *t, const void *w,
                               int64_t w_period, const void *pw, int64_t pw_period, int64_t n, int reduction) {
    GM_CU_GRID_STRIDE(i, n) {
        const double xi = nn_ld<DT>(x, i), ti = nn_ld<DT>(t, i);
        const double pwi = pw ? nn_ld<DT>(pw, i % pw_period) : 1.0;
        double s = grad_scale<DT>(dout, i, reduction, (double)n);
        if (w) s *= nn_ld<DT>(w, i % w_period);
        if (dx) {
            const double sig_neg = 1.0 / (1.0 + nn_exp<DT>(xi)); /* sigmoid(-x); exp overflow gives 0, right */
            nn_st<DT>(dx, i, s * ((1.0 - ti) - (1.0 + (pwi - 1.0) * ti) * sig_neg));
        }
        if (dtarget) {
            double spp, spn;
            softplus_pair<DT>(xi, &spp, &spn);
            nn_st<DT>(dtarget, i, s * (pwi * spn - spp));
        }
    }
}

static bool bce_args_ok(gm_dtype dt, int64_t n, int reduction, const void *w, int64_t w_period, const void *pw,
                        int64_t pw_period) {
    return gm_dtype_is_float(dt) && n >= 0 && reduction >= LOSS_NONE && reduction <= LOSS_SUM &&
           !(w && w_period < 1) && !(pw && pw_period < 1);
}

extern "C" int cuda_bce_logits_forward(void *loss, const void *x, const void *t, const void *w, int64_t w_period,
                                       const void *pw, int64_t pw_period, int64_t n, int reduction, gm_dtype dt,
                                       void *scratch, gm_cuda_ctx *ctx) {
    if (!bce_args_ok(dt, n, reduction, w, w_period, pw, pw_period) || (reduction != LOSS_NONE && !scratch))
        return GM_ERR_ARG;
    if (reduction == LOSS_NONE && n == 0) return GM_OK;
    const loss_scratch v = scratch_view(scratch);
    const unsigned grid = part_blocks(n, ctx);
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &bce_fwd_kernel<DT>;                                                                       \
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, loss, v.tot, x, t, w, w_period, pw, pw_period, n, reduction);      \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    return finish_total(loss, v, grid, reduction, dt, n, ctx);
}

extern "C" int cuda_bce_logits_backward(void *dx, void *dtarget, const void *dout, const void *x, const void *t,
                                        const void *w, int64_t w_period, const void *pw, int64_t pw_period, int64_t n,
                                        int reduction, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!bce_args_ok(dt, n, reduction, w, w_period, pw, pw_period)) return GM_ERR_ARG;
    if (n == 0 || (!dx && !dtarget)) return GM_OK;
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &bce_bwd_kernel<DT>;                                                                       \
        GM_LAUNCH(k, gm_cu_blocks(n, ctx), GM_CU_THREADS, ctx, dx, dtarget, dout, x, t, w, w_period, pw, pw_period, \
                  n, reduction);                                                                             \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
