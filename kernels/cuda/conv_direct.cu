/* kernels/cuda/conv_direct.cu — own CUDA kernels of the convolution family (conv.h), compiled in both builds:
 *  - the direct convolution, every pass, any geometry (groups, stride, dilation, padding on any side as the
 *    geometry's P and Q imply), any float dtype, no workspace. On a GPU it runs what cuDNN cannot express
 *    (asymmetric padding, empty tensors, conv.h); in the emulator build it is the convolution (emu/conv_emu.cpp).
 *    It is a plain sum per output element: correct and deterministic, not fast; cuDNN handles the common cases.
 *  - the bias fill (the forward writes the bias first and cuDNN adds onto it, as the CPU kernel does with gemm),
 *  - the bias gradient (per-channel sums) and column sums (the linear layer's bias gradient), in double as on
 *    the CPU, by block reductions in a fixed order: deterministic.
 * Arithmetic: float for float32/float16/bfloat16, double for float64 (gm_cu_type's acc). A float32 sum runs in
 * chunks of CONV_KCHUNK terms added onto the total, as the CPU's gemm does (conv_geom.h says why). */
#include "conv.h"
#include "cuda_common.cuh"

/* ---- direct passes ---------------------------------------------------------------------------------------- */
/* part += v; every CONV_KCHUNK terms of a float32 sum, part moves onto total. float64 sums run in one piece, and
 * so do float16/bfloat16 ones, as on the CPU (conv_half.c says why). */
template <int DT, typename A>
__device__ __forceinline__ void chunk_add(A &total, A &part, int &terms, A v) {
    part += v;
    if (DT == GM_F32 && ++terms == CONV_KCHUNK) {
        total += part;
        part = 0;
        terms = 0;
    }
}

template <int DT>
__global__ void direct_fwd(void *out, const void *inp, const void *wt, const void *bias, conv_geom g, int64_t total) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const int64_t Cg = g.C / g.G, Kg = g.K / g.G;
    GM_CU_GRID_STRIDE(i, total) {
        const int64_t q = i % g.Q, t1 = i / g.Q, p = t1 % g.P, t2 = t1 / g.P, k = t2 % g.K, n = t2 / g.K;
        const int64_t grp = k / Kg;
        A acc = bias ? gm_cu_ld<DT>((const S *)bias + k) : (A)0, part = 0;
        int terms = 0;
        const S *x = (const S *)inp + n * g.xs[0] + grp * Cg * g.xs[1];
        const S *w = (const S *)wt + k * Cg * g.R * g.S;
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t r = 0; r < g.R; r++) {
                const int64_t h = p * g.sh - g.ph + r * g.dh;
                if (h < 0 || h >= g.H) continue;
                for (int64_t s = 0; s < g.S; s++) {
                    const int64_t x_ = q * g.sw - g.pw + s * g.dw;
                    if (x_ < 0 || x_ >= g.W) continue;
                    chunk_add<DT>(acc, part, terms, gm_cu_ld<DT>(x + c * g.xs[1] + h * g.xs[2] + x_ * g.xs[3]) *
                                                        gm_cu_ld<DT>(w + (c * g.R + r) * g.S + s));
                }
            }
        gm_cu_st<DT>((S *)out + i, acc + part);
    }
}

/* dinp[n, c, h, w] = bias[c] + sum over the group's output channels k and the taps (r, s) that reach (h, w). */
template <int DT>
__global__ void direct_bwd_data(void *dinp, const void *dout, const void *wt, const void *bias, conv_geom g,
                                int64_t total) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const int64_t Cg = g.C / g.G, Kg = g.K / g.G;
    GM_CU_GRID_STRIDE(i, total) {
        const int64_t w_ = i % g.W, t1 = i / g.W, h = t1 % g.H, t2 = t1 / g.H, c = t2 % g.C, n = t2 / g.C;
        const int64_t grp = c / Cg, cc = c - grp * Cg;
        A acc = bias ? gm_cu_ld<DT>((const S *)bias + c) : (A)0, part = 0;
        int terms = 0;
        for (int64_t r = 0; r < g.R; r++) {
            const int64_t ph = h + g.ph - r * g.dh; /* = p * sh */
            if (ph < 0 || ph % g.sh) continue;
            const int64_t p = ph / g.sh;
            if (p >= g.P) continue;
            for (int64_t s = 0; s < g.S; s++) {
                const int64_t qw = w_ + g.pw - s * g.dw;
                if (qw < 0 || qw % g.sw) continue;
                const int64_t q = qw / g.sw;
                if (q >= g.Q) continue;
                for (int64_t kk = 0; kk < Kg; kk++) {
                    const int64_t k = grp * Kg + kk;
                    chunk_add<DT>(acc, part, terms,
                              gm_cu_ld<DT>((const S *)dout + ((n * g.K + k) * g.P + p) * g.Q + q) *
                                  gm_cu_ld<DT>((const S *)wt + ((k * Cg + cc) * g.R + r) * g.S + s));
                }
            }
        }
        gm_cu_st<DT>((S *)dinp + i, acc + part);
    }
}

/* One block per weight element (k, c, r, s): its threads split the (n, p, q) sum, then a block reduction. */
template <int DT>
__global__ void direct_bwd_weight(void *dwt, const void *dout, const void *inp, conv_geom g, int64_t total) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    const int64_t Cg = g.C / g.G, Kg = g.K / g.G, PQ = g.P * g.Q, NPQ = g.N * PQ;
    for (int64_t e = blockIdx.x; e < total; e += gridDim.x) { /* e is the same for the whole block */
        const int64_t s = e % g.S, t1 = e / g.S, r = t1 % g.R, t2 = t1 / g.R, c = t2 % Cg, k = t2 / Cg;
        const int64_t grp = k / Kg;
        A acc = 0;
        for (int64_t j = threadIdx.x; j < NPQ; j += blockDim.x) {
            const int64_t q = j % g.Q, p = j / g.Q % g.P, n = j / PQ;
            const int64_t h = p * g.sh - g.ph + r * g.dh, x_ = q * g.sw - g.pw + s * g.dw;
            if (h < 0 || h >= g.H || x_ < 0 || x_ >= g.W) continue;
            acc += gm_cu_ld<DT>((const S *)dout + (n * g.K + k) * PQ + p * g.Q + q) *
                   gm_cu_ld<DT>((const S *)inp + n * g.xs[0] + (grp * Cg + c) * g.xs[1] + h * g.xs[2] +
                                x_ * g.xs[3]);
        }
        acc = gm_cu_block_reduce(acc, gm_cu_sum());
        if (threadIdx.x == 0) gm_cu_st<DT>((S *)dwt + e, acc);
    }
}

static int geom_ok(const conv_geom *g) {
    return g && g->N >= 0 && g->C >= 0 && g->H >= 0 && g->W >= 0 && g->K >= 0 && g->R >= 1 && g->S >= 1 &&
           g->P >= 0 && g->Q >= 0 && g->sh >= 1 && g->sw >= 1 && g->dh >= 1 && g->dw >= 1 && g->ph >= 0 &&
           g->pw >= 0 && g->G >= 1 && g->C % g->G == 0 && g->K % g->G == 0;
}

template <int DT>
static void launch_fwd(void *out, const void *inp, const void *w, const void *b, const conv_geom *g,
                       gm_cuda_ctx *ctx) {
    const int64_t total = g->N * g->K * g->P * g->Q;
    if (total > 0) GM_LAUNCH(direct_fwd<DT>, gm_cu_blocks(total, ctx), GM_CU_THREADS, ctx, out, inp, w, b, *g, total);
}

template <int DT>
static void launch_bwd_data(void *dinp, const void *dout, const void *w, const void *b, const conv_geom *g,
                            gm_cuda_ctx *ctx) {
    const int64_t total = g->N * g->C * g->H * g->W;
    if (total > 0)
        GM_LAUNCH(direct_bwd_data<DT>, gm_cu_blocks(total, ctx), GM_CU_THREADS, ctx, dinp, dout, w, b, *g, total);
}

template <int DT>
static void launch_bwd_weight(void *dw, const void *dout, const void *inp, const conv_geom *g, gm_cuda_ctx *ctx) {
    const int64_t total = g->K * (g->C / g->G) * g->R * g->S;
    if (total <= 0) return;
    const unsigned blocks = (unsigned)gm_cu_min<int64_t>(total, GM_CU_MAX_BLOCKS);
    GM_LAUNCH(direct_bwd_weight<DT>, blocks, GM_CU_THREADS, ctx, dw, dout, inp, *g, total);
}

extern "C" int cuda_conv2d_direct_forward(void *out, const void *inp, const void *weight, const void *bias,
                                          const conv_geom *g, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!geom_ok(g)) return GM_ERR_ARG;
#define CALL(DT) launch_fwd<DT>(out, inp, weight, bias, g, ctx)
    GM_CU_SWITCH_FLOAT(dt, CALL);
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_conv2d_direct_backward_data(void *dinp, const void *dout, const void *weight, const void *bias,
                                                const conv_geom *g, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!geom_ok(g)) return GM_ERR_ARG;
#define CALL(DT) launch_bwd_data<DT>(dinp, dout, weight, bias, g, ctx)
    GM_CU_SWITCH_FLOAT(dt, CALL);
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_conv2d_direct_backward_weight(void *dweight, const void *dout, const void *inp,
                                                  const conv_geom *g, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!geom_ok(g)) return GM_ERR_ARG;
#define CALL(DT) launch_bwd_weight<DT>(dweight, dout, inp, g, ctx)
    GM_CU_SWITCH_FLOAT(dt, CALL);
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- bias fill and add ------------------------------------------------------------------------------------ */
/* out (N, K, L) = bias[k] (ADD = 0; a copy of the stored bits, no rounding; 0 where bias is NULL), or
 * out += bias[k] in the dtype's arithmetic type (ADD = 1: the bias of a convolution that cuDNN's graph API ran
 * with beta = 0, conv_plan.cu: a plan per geometry, not per bias). */
template <int DT, int ADD>
__global__ void bias_rows(void *out, const void *bias, int64_t K, int64_t L, int64_t total) {
    typedef typename gm_cu_type<DT>::st S;
    GM_CU_GRID_STRIDE(i, total) {
        const S *b = bias ? (const S *)bias + (L == 1 ? i % K : i / L % K) : nullptr;
        S *o = (S *)out + i;
        if (ADD) gm_cu_st<DT>(o, gm_cu_ld<DT>(o) + gm_cu_ld<DT>(b));
        else *o = b ? *b : (S)0;
    }
}

template <int DT, int ADD>
static void launch_bias(void *out, const void *bias, int64_t N, int64_t K, int64_t L, gm_cuda_ctx *ctx) {
    const int64_t total = N * K * L;
    auto *k = &bias_rows<DT, ADD>;
    if (total > 0) GM_LAUNCH(k, gm_cu_blocks(total, ctx), GM_CU_THREADS, ctx, out, bias, K, L, total);
}

extern "C" int cuda_conv_fill_bias(void *out, const void *bias, int64_t N, int64_t K, int64_t L, gm_dtype dt,
                                   gm_cuda_ctx *ctx) {
    if (N < 0 || K < 0 || L < 0) return GM_ERR_ARG;
#define CALL(DT) launch_bias<DT, 0>(out, bias, N, K, L, ctx)
    GM_CU_SWITCH_FLOAT(dt, CALL);
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_conv_add_bias(void *out, const void *bias, int64_t N, int64_t K, int64_t L, gm_dtype dt,
                                  gm_cuda_ctx *ctx) {
    if (N < 0 || K < 0 || L < 0 || !bias) return GM_ERR_ARG;
#define CALL(DT) launch_bias<DT, 1>(out, bias, N, K, L, ctx)
    GM_CU_SWITCH_FLOAT(dt, CALL);
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- bias gradient: per-channel sums over (n, l) --------------------------------------------------------- */
template <int DT>
__global__ void channel_sums(void *db, const void *t, int64_t N, int64_t K, int64_t L, int64_t s0, int64_t s1,
                             int64_t s2) {
    typedef typename gm_cu_type<DT>::st S;
    for (int64_t k = blockIdx.x; k < K; k += gridDim.x) { /* one channel per block */
        const S *tk = (const S *)t + k * s1;
        double acc = 0.0;
        if (L >= GM_CU_THREADS) { /* the usual conv case: threads walk a (n, k) row, coalesced when s2 == 1 */
            for (int64_t n = 0; n < N; n++)
                for (int64_t l = threadIdx.x; l < L; l += blockDim.x) acc += (double)gm_cu_ld<DT>(tk + n * s0 + l * s2);
        } else { /* short rows: split the flat (n, l) range instead */
            for (int64_t j = threadIdx.x; j < N * L; j += blockDim.x)
                acc += (double)gm_cu_ld<DT>(tk + (j / L) * s0 + (j % L) * s2);
        }
        acc = gm_cu_block_reduce(acc, gm_cu_sum());
        if (threadIdx.x == 0) gm_cu_st<DT>((S *)db + k, (typename gm_cu_type<DT>::acc)acc);
    }
}

template <int DT>
static void launch_channel_sums(void *db, const void *t, int64_t N, int64_t K, int64_t L, const int64_t ts[3],
                                gm_cuda_ctx *ctx) {
    if (K <= 0) return;
    const unsigned blocks = (unsigned)gm_cu_min<int64_t>(K, GM_CU_MAX_BLOCKS);
    GM_LAUNCH(channel_sums<DT>, blocks, GM_CU_THREADS, ctx, db, t, N, K, L, ts[0], ts[1], ts[2]);
}

extern "C" int cuda_conv_bias_backward(void *dbias, const void *t, int64_t N, int64_t K, int64_t L,
                                       const int64_t ts[3], gm_dtype dt, gm_cuda_ctx *ctx) {
    if (N < 0 || K < 0 || L < 0 || (N * L > 0 && !t)) return GM_ERR_ARG;
#define CALL(DT) launch_channel_sums<DT>(dbias, t, N, K, L, ts, ctx)
    GM_CU_SWITCH_FLOAT(dt, CALL);
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

/* ---- column sums: 32 columns per block, 8 row lanes each, reduced in a fixed order ---------------------- */
#define COLS_PER_BLOCK 32
#define ROW_LANES (GM_CU_THREADS / COLS_PER_BLOCK)

template <int DT>
__global__ void column_sums(void *out, const void *t, int64_t M, int64_t F, int64_t rs, int64_t cs) {
    typedef typename gm_cu_type<DT>::st S;
    __shared__ double part[ROW_LANES][COLS_PER_BLOCK];
    const int tx = threadIdx.x % COLS_PER_BLOCK, ty = threadIdx.x / COLS_PER_BLOCK;
    for (int64_t c0 = (int64_t)blockIdx.x * COLS_PER_BLOCK; c0 < F; c0 += (int64_t)gridDim.x * COLS_PER_BLOCK) {
        const int64_t col = c0 + tx;
        double acc = 0.0;
        if (col < F)
            for (int64_t m = ty; m < M; m += ROW_LANES) acc += (double)gm_cu_ld<DT>((const S *)t + m * rs + col * cs);
        part[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && col < F) {
            double sum = 0.0;
            for (int j = 0; j < ROW_LANES; j++) sum += part[j][tx];
            gm_cu_st<DT>((S *)out + col, (typename gm_cu_type<DT>::acc)sum);
        }
        __syncthreads(); /* part is rewritten by the next column block */
    }
}

template <int DT>
static void launch_column_sums(void *out, const void *t, int64_t M, int64_t F, int64_t rs, int64_t cs,
                               gm_cuda_ctx *ctx) {
    if (F <= 0) return;
    const int64_t want = (F + COLS_PER_BLOCK - 1) / COLS_PER_BLOCK;
    const unsigned blocks = (unsigned)gm_cu_min<int64_t>(want, GM_CU_MAX_BLOCKS);
    GM_LAUNCH(column_sums<DT>, blocks, GM_CU_THREADS, ctx, out, t, M, F, rs, cs);
}

extern "C" int cuda_conv_column_sums(void *out, const void *t, int64_t M, int64_t F, int64_t rs, int64_t cs,
                                     gm_dtype dt, gm_cuda_ctx *ctx) {
    if (M < 0 || F < 0 || (M * F > 0 && !t)) return GM_ERR_ARG;
#define CALL(DT) launch_column_sums<DT>(out, t, M, F, rs, cs, ctx)
    GM_CU_SWITCH_FLOAT(dt, CALL);
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
