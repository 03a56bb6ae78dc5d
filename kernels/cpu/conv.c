/* kernels/cpu/conv.c — conv2d's entry points on the CPU (see conv.h): the dtype dispatch, and the passes of the
 * im2col + gemm and pointwise gemm algorithms (forward, input-gradient, weight-gradient) and the bias gradient.
 * Nothing here allocates: the im2col columns live in the caller's workspace. The rest of the family:
 *   conv_plan.c       algorithm choice, tiles and threads, workspace sizes (conv2d_workspace_nbytes)
 *   conv_im2col.c     im2col, col2im
 *   conv_depthwise.c  the direct depthwise kernels
 *   conv_direct.c     the direct float32 kernels of stride-1 same-size layers (AVX-512), dispatched below
 *   conv_wgrad.c      the float32 weight-gradient's outer-product kernel (AVX-512), dispatched below
 *   conv_half.c       the float16/bfloat16 passes
 *   linear.c          the linear layer
 * over conv_internal.h. The element-type-specific code is written once, under `#else` below, and compiled once
 * per type (float, double) by conv_typed.h: a C template without a second file to keep in step.
 *
 * Parallelism: each pass is one OpenMP region whose threads call a single-threaded gemm on their own share
 * (forward: tiles of output positions, each thread with its own column buffer; input-gradient: items and
 * channel blocks, whose col2im writes are disjoint; weight-gradient: blocks of the weight-gradient's columns,
 * each thread filling its rows of one shared column buffer): no atomics, no partial sums to reduce. OpenBLAS
 * (scipy-openblas32's pthreads build) has no per-thread thread count, so it is set to one thread while such a
 * region runs (conv_blas_single_*). The alternative we measured first, tiles one after another with OpenMP for
 * im2col and one multithreaded OpenBLAS gemm per tile, hands each tile to two thread pools in turn; on a 2-core
 * machine shared with other jobs it ran the 64->64 56x56 3x3 forward at 2-4 GFLOP/s with 2 threads, against
 * 24-51 for this design (benchmarks/conv_gflops.py; on one thread the two are the same code). The buffer per
 * thread costs no memory beyond the limit: the threads share it, in smaller tiles.
 */
#ifndef CONV_T

#include "conv_internal.h"

#define CONV_TEMPLATE "conv.c"
#include "conv_typed.h"

/* ---- entry points: dtype dispatch ----------------------------------------------------------------------- */
int conv2d_forward(void *out, const void *inp, const void *weight, const void *bias, const conv_geom *g,
                   gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    int st = conv_check_geom(g);
    if (st) return st;
    if (dt == GM_F32 && ws && conv_winograd_use(g, CONV_FORWARD, nthreads) && g->N * g->K * g->P * g->Q > 0 &&
        ws_nbytes >= conv_winograd_ws_nbytes(g, CONV_FORWARD, nthreads)) {
        if (!out || !weight || !inp) return GM_ERR_ARG;
        conv_winograd_forward(out, inp, weight, bias, g, ws, nthreads);
        return GM_OK;
    }
    if (dt == GM_F32 && ws && conv_direct_use(g, CONV_FORWARD) &&
        ws_nbytes >= conv_direct_ws_nbytes_threads(g, CONV_FORWARD, nthreads)) {
        if (g->N * g->K * g->P * g->Q == 0) return GM_OK;
        if (!out || !weight || !inp) return GM_ERR_ARG;
        conv_direct_forward(out, inp, weight, bias, g, ws, nthreads);
        return GM_OK;
    }
    if (dt == GM_F32) return conv2d_forward_f32(out, inp, weight, bias, g, ws, ws_nbytes, nthreads);
    if (dt == GM_F64) return conv2d_forward_f64(out, inp, weight, bias, g, ws, ws_nbytes, nthreads);
    if (is_half(dt)) return conv2d_forward_half(out, inp, weight, bias, g, dt, ws, ws_nbytes, nthreads);
    return GM_ERR_UNSUPPORTED;
}

int conv2d_backward_data(void *dinp, const void *dout, const void *weight, const void *bias, const conv_geom *g,
                         gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    int st = conv_check_geom(g);
    if (st) return st;
    if (dt == GM_F32 && ws && conv_winograd_use(g, CONV_BACKWARD_DATA, nthreads) && g->N * g->C * g->H * g->W > 0 &&
        g->P * g->Q > 0 && ws_nbytes >= conv_winograd_ws_nbytes(g, CONV_BACKWARD_DATA, nthreads)) {
        if (!dinp || !weight || !dout) return GM_ERR_ARG;
        conv_winograd_backward_data(dinp, dout, weight, bias, g, ws, nthreads);
        return GM_OK;
    }
    if (dt == GM_F32 && ws && conv_direct_use(g, CONV_BACKWARD_DATA) &&
        ws_nbytes >= conv_direct_ws_nbytes_threads(g, CONV_BACKWARD_DATA, nthreads)) {
        if (g->N * g->C * g->H * g->W == 0) return GM_OK;
        if (!dinp || !weight || !dout) return GM_ERR_ARG;
        conv_direct_backward_data(dinp, dout, weight, bias, g, ws, nthreads);
        return GM_OK;
    }
    if (dt == GM_F32) return conv2d_backward_data_f32(dinp, dout, weight, bias, g, ws, ws_nbytes, nthreads);
    if (dt == GM_F64) return conv2d_backward_data_f64(dinp, dout, weight, bias, g, ws, ws_nbytes, nthreads);
    if (is_half(dt)) return conv2d_backward_data_half(dinp, dout, weight, bias, g, dt, ws, ws_nbytes, nthreads);
    return GM_ERR_UNSUPPORTED;
}

int conv2d_backward_weight(void *dweight, const void *dout, const void *inp, const conv_geom *g, gm_dtype dt,
                           void *ws, size_t ws_nbytes, int nthreads) {
    int st = conv_check_geom(g);
    if (st) return st;
    if (dt == GM_F32 && ws && conv_wgrad_use(g) && conv_wgrad_fits(g, ws_nbytes) &&
        g->K * g->C * g->R * g->S * g->P * g->Q > 0) {
        if (!dweight || !dout || !inp) return GM_ERR_ARG;
        conv_wgrad_backward_weight(dweight, dout, inp, g, ws, ws_nbytes, nthreads);
        return GM_OK;
    }
    if (dt == GM_F32 && conv_direct_use(g, CONV_BACKWARD_WEIGHT)) {
        const size_t n = (size_t)(g->K * (g->C / g->G) * g->R * g->S);
        if (n == 0) return GM_OK;
        if (!dweight) return GM_ERR_ARG;
        if (g->N * g->P * g->Q == 0) {
            memset(dweight, 0, n * sizeof(float));
            return GM_OK;
        }
        if (!dout || !inp) return GM_ERR_ARG;
        conv_direct_backward_weight(dweight, dout, inp, g, nthreads);
        return GM_OK;
    }
    if (dt == GM_F32) return conv2d_backward_weight_f32(dweight, dout, inp, g, ws, ws_nbytes, nthreads);
    if (dt == GM_F64) return conv2d_backward_weight_f64(dweight, dout, inp, g, ws, ws_nbytes, nthreads);
    if (is_half(dt)) return conv2d_backward_weight_half(dweight, dout, inp, g, dt, ws, ws_nbytes, nthreads);
    return GM_ERR_UNSUPPORTED;
}

int conv_bias_backward(void *dbias, const void *t, int64_t N, int64_t K, int64_t L, const int64_t ts[3],
                       gm_dtype dt, int nthreads) {
    if (N < 0 || K < 0 || L < 0 || (K > 0 && !dbias)) return GM_ERR_ARG;
    if (dt == GM_F32) return conv_bias_backward_f32(dbias, t, N, K, L, ts, nthreads);
    if (dt == GM_F64) return conv_bias_backward_f64(dbias, t, N, K, L, ts, nthreads);
    if (is_half(dt)) return conv_bias_backward_half(dbias, t, N, K, L, ts, dt, nthreads);
    return GM_ERR_UNSUPPORTED;
}

#else /* ================ typed part: T is CONV_T, FN(name) is name_<suffix> ================================ */

/* ---- tiles of whole items (conv_plan.items, see plan_items in conv_plan.c) ----------------------------------
 * A unit is (batch of `items` consecutive items, group); its thread's buffer holds the batch's columns side by
 * side (C/G*R*S rows, `tile` apart) and K/G rows more: the gemm's output, copied (with the bias) into each
 * item's planes (forward), or the batch's grad_output gathered (input-gradient). The copies move K/G*P*Q
 * elements per item against the gemm's K/G*P*Q*C/G*R*S multiply-adds. */
static int FN(forward_items)(T *out, const T *x, const T *w, const T *bias, const conv_geom *g, T *ws,
                             const conv_plan *pl) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q, tile = pl->tile, nb = pl->items, units = ceil_div64(N, nb) * G;
    blas_single_begin(pl->nt);
#pragma omp parallel for num_threads(pl->nt) if (pl->nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t grp = u % G, n0 = u / G * nb, n1 = min64(N, n0 + nb), cnt = (n1 - n0) * PQ;
        T *col = ws + (int64_t)omp_get_thread_num() * tile * (CRS + Kg), *ot = col + tile * CRS;
        for (int64_t n = n0; n < n1; n++) FN(conv_im2col)(col + (n - n0) * PQ, tile, x, g, n, grp, 0, PQ, 0, CRS);
        FN(conv_gemm)(0, 0, Kg, cnt, CRS, 1, w + grp * Kg * CRS, CRS, col, tile, 0, ot, tile);
        for (int64_t n = n0; n < n1; n++) {
            for (int64_t k = 0; k < Kg; k++) {
                const T *src = ot + k * tile + (n - n0) * PQ;
                T *dst = out + (n * K + grp * Kg + k) * PQ;
                if (bias) {
                    const T b = bias[grp * Kg + k];
                    for (int64_t i = 0; i < PQ; i++) dst[i] = src[i] + b;
                } else {
                    memcpy(dst, src, (size_t)PQ * sizeof(T));
                }
            }
        }
    }
    blas_single_end(pl->nt);
    return GM_OK;
}

static int FN(backward_data_items)(T *dx, const T *dout, const T *w, const T *bias, const conv_geom *g, T *ws,
                                   const conv_plan *pl) {
    const int64_t N = g->N, C = g->C, K = g->K, G = g->G, Cg = C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q, HW = g->H * g->W, tile = pl->tile, nb = pl->items;
    const int64_t units = ceil_div64(N, nb) * G;
    blas_single_begin(pl->nt);
#pragma omp parallel for num_threads(pl->nt) if (pl->nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t grp = u % G, n0 = u / G * nb, n1 = min64(N, n0 + nb), cnt = (n1 - n0) * PQ;
        T *dcol = ws + (int64_t)omp_get_thread_num() * tile * (CRS + Kg), *dyt = dcol + tile * CRS;
        for (int64_t n = n0; n < n1; n++)
            for (int64_t k = 0; k < Kg; k++)
                memcpy(dyt + k * tile + (n - n0) * PQ, dout + (n * K + grp * Kg + k) * PQ, (size_t)PQ * sizeof(T));
        FN(conv_gemm)(1, 0, CRS, cnt, Kg, 1, w + grp * Kg * CRS, CRS, dyt, tile, 0, dcol, tile);
        for (int64_t n = n0; n < n1; n++) {
            T *dxg = dx + (n * C + grp * Cg) * HW;
            FN(conv_fill_rows)(dxg, bias ? bias + grp * Cg : NULL, Cg, HW, HW);
            FN(conv_col2im_ld)(dxg, dcol + (n - n0) * PQ, tile, g, 0, Cg, 0, PQ);
        }
    }
    blas_single_end(pl->nt);
    return GM_OK;
}

/* The weight-gradient over tiles of whole items (conv_plan.items, plan_items_weight in conv_plan.c): the buffer
 * holds the batch's columns side by side (C/G*R*S rows, `tile` apart) and its grad_output gathered (K/G rows);
 * thread t gathers its share of grad_output's rows and builds its rows [j0, j1) of the columns, and after a
 * barrier sums dW's columns [j0, j1) over all the batch's positions in one gemm (chunked as every float32 gemm).
 * The second barrier keeps the next batch's gather from overwriting rows another thread still reads. */
static int FN(backward_weight_items)(T *dw, const T *dout, const T *x, const conv_geom *g, T *ws,
                                     const conv_plan *pl) {
    const int64_t N = g->N, K = g->K, G = g->G, Kg = K / G, CRS = g->C / G * g->R * g->S, PQ = g->P * g->Q;
    const int64_t tile = pl->tile, nb = pl->items, units = ceil_div64(N, nb) * G;
    const int nt = pl->nt;
    T *col = ws, *dyt = ws + tile * CRS;
    blas_single_begin(nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* shares of the team OpenMP gave, which may be smaller than nt (OMP_THREAD_LIMIT, a nested region) */
        const int64_t t = omp_get_thread_num(), tn = omp_get_num_threads();
        const int64_t j0 = CRS * t / tn, j1 = CRS * (t + 1) / tn, k0 = Kg * t / tn, k1 = Kg * (t + 1) / tn;
        for (int64_t u = 0; u < units; u++) {
            const int64_t grp = u % G, n0 = u / G * nb, n1 = min64(N, n0 + nb), cnt = (n1 - n0) * PQ;
            for (int64_t n = n0; n < n1; n++) {
                for (int64_t k = k0; k < k1; k++)
                    memcpy(dyt + k * tile + (n - n0) * PQ, dout + (n * K + grp * Kg + k) * PQ, (size_t)PQ * sizeof(T));
                if (j1 > j0) FN(conv_im2col)(col + (n - n0) * PQ, tile, x, g, n, grp, 0, PQ, j0, j1);
            }
#pragma omp barrier
            if (j1 > j0)
                FN(conv_gemm)(0, 1, Kg, j1 - j0, cnt, 1, dyt, tile, col + j0 * tile, tile, 1, dw + grp * Kg * CRS + j0,
                              CRS);
#pragma omp barrier
        }
    }
    blas_single_end(nt);
    return GM_OK;
}

/* ---- the three passes ------------------------------------------------------------------------------------ */
static int FN(conv2d_forward)(T *out, const T *x, const T *w, const T *bias, const conv_geom *g, T *ws,
                              size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q;
    if (N == 0 || K == 0 || PQ == 0) return GM_OK;
    if (!out || !w || (N * g->C > 0 && !x)) return GM_ERR_ARG;
    const conv_algo algo = conv2d_algo(g, CONV_FORWARD);
    if (algo == CONV_ALGO_DEPTHWISE) {
        FN(conv_depthwise_forward)(out, x, w, bias, g, nthreads);
        return GM_OK;
    }
    if (CRS == 0) { /* no input channels: an empty sum */
        for (int64_t n = 0; n < N; n++) FN(conv_fill_rows)(out + n * K * PQ, bias, K, PQ, PQ);
        return GM_OK;
    }
    const conv_plan pl = conv_plan_pass(g, CONV_FORWARD, sizeof(T), ws_nbytes, nthreads);
    if (pl.tile < 1 || (algo == CONV_ALGO_IM2COL && !ws)) return GM_ERR_ARG;
    if (pl.items) return FN(forward_items)(out, x, w, bias, g, ws, &pl);
    const int64_t tile = pl.tile, ntile = ceil_div64(PQ, tile), units = N * G * ntile;
    const int64_t ldx = Cg == 1 ? PQ : g->xs[1];
    blas_single_begin(pl.nt);
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / (G * ntile), grp = u / ntile % G, s0 = u % ntile * tile, cnt = min64(tile, PQ - s0);
        T *o = out + (n * K + grp * Kg) * PQ + s0;
        /* The bias goes in first and the gemm adds onto it: no second pass over the output. */
        if (bias) FN(conv_fill_rows)(o, bias + grp * Kg, Kg, cnt, PQ);
        const T *B = x + n * g->xs[0] + grp * Cg * g->xs[1] + s0;
        int64_t ldb = ldx;
        if (algo == CONV_ALGO_IM2COL) {
            T *col = ws + (int64_t)omp_get_thread_num() * tile * CRS;
            FN(conv_im2col)(col, cnt, x, g, n, grp, s0, cnt, 0, CRS);
            B = col;
            ldb = cnt;
        }
        FN(conv_gemm)(0, 0, Kg, cnt, CRS, 1, w + grp * Kg * CRS, CRS, B, ldb, bias ? 1 : 0, o, PQ);
    }
    blas_single_end(pl.nt);
    return GM_OK;
}

static int FN(conv2d_backward_data)(T *dx, const T *dout, const T *w, const T *bias, const conv_geom *g, T *ws,
                                    size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, C = g->C, K = g->K, G = g->G, Cg = C / G, Kg = K / G, RS = g->R * g->S;
    const int64_t CRS = Cg * RS, PQ = g->P * g->Q, HW = g->H * g->W;
    if (N == 0 || C == 0 || HW == 0) return GM_OK;
    if (!dx || (K > 0 && (!w || (PQ > 0 && !dout)))) return GM_ERR_ARG;
    const conv_algo algo = conv2d_algo(g, CONV_BACKWARD_DATA);
    if (algo == CONV_ALGO_DEPTHWISE) {
        FN(conv_depthwise_backward_data)(dx, dout, w, bias, g, nthreads);
        return GM_OK;
    }
    if (Kg == 0 || PQ == 0) { /* nothing flows back: dinp is the bias (or zeros) */
        for (int64_t n = 0; n < N; n++) FN(conv_fill_rows)(dx + n * C * HW, bias, C, HW, HW);
        return GM_OK;
    }
    const conv_plan pl = conv_plan_pass(g, CONV_BACKWARD_DATA, sizeof(T), ws_nbytes, nthreads);
    if (pl.tile < 1 || (algo == CONV_ALGO_IM2COL && !ws)) return GM_ERR_ARG;
    if (pl.items) return FN(backward_data_items)(dx, dout, w, bias, g, ws, &pl);
    blas_single_begin(pl.nt);
    if (algo == CONV_ALGO_POINTWISE) { /* dinp[n, g] (Cg, HW) = w_g^T (Cg, Kg) @ dout[n, g] (Kg, HW), by columns */
        const int64_t tile = pl.tile, ntile = ceil_div64(PQ, tile), units = N * G * ntile;
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
        for (int64_t u = 0; u < units; u++) {
            const int64_t n = u / (G * ntile), grp = u / ntile % G, s0 = u % ntile * tile;
            const int64_t cnt = min64(tile, PQ - s0);
            T *d = dx + (n * C + grp * Cg) * HW + s0;
            if (bias) FN(conv_fill_rows)(d, bias + grp * Cg, Cg, cnt, HW);
            FN(conv_gemm)(1, 0, Cg, cnt, Kg, 1, w + grp * Kg * Cg, Cg, dout + (n * K + grp * Kg) * PQ + s0, PQ,
                     bias ? 1 : 0, d, HW);
        }
    } else { /* per (item, group, channel block): dcol = w_g^T @ dout tile, then col2im into its own channels */
        const int64_t tile = pl.tile, nchunk = pl.nchunk, chunk = ceil_div64(Cg, nchunk), units = N * G * nchunk;
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
        for (int64_t u = 0; u < units; u++) {
            const int64_t n = u / (G * nchunk), grp = u / nchunk % G, c0 = u % nchunk * chunk;
            const int64_t c1 = min64(Cg, c0 + chunk);
            if (c0 >= c1) continue;
            T *dxg = dx + (n * C + grp * Cg) * HW, *dcol = ws + (int64_t)omp_get_thread_num() * tile * CRS;
            FN(conv_fill_rows)(dxg + c0 * HW, bias ? bias + grp * Cg + c0 : NULL, c1 - c0, HW, HW);
            for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
                const int64_t cnt = min64(tile, PQ - s0);
                FN(conv_gemm)(1, 0, (c1 - c0) * RS, cnt, Kg, 1, w + grp * Kg * CRS + c0 * RS, CRS,
                         dout + (n * K + grp * Kg) * PQ + s0, PQ, 0, dcol, cnt);
                FN(conv_col2im)(dxg + c0 * HW, dcol, g, c0, c1, s0, cnt);
            }
        }
    }
    blas_single_end(pl.nt);
    return GM_OK;
}

static int FN(conv2d_backward_weight)(T *dw, const T *dout, const T *x, const conv_geom *g, T *ws,
                                      size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q;
    if (K == 0 || CRS == 0) return GM_OK;
    if (!dw) return GM_ERR_ARG;
    const conv_algo algo = conv2d_algo(g, CONV_BACKWARD_WEIGHT);
    if (algo == CONV_ALGO_DEPTHWISE) {
        if (N * PQ > 0 && (!dout || !x)) return GM_ERR_ARG;
        FN(conv_depthwise_backward_weight)(dw, dout, x, g, nthreads);
        return GM_OK;
    }
    memset(dw, 0, (size_t)(K * CRS) * sizeof(T));
    if (N == 0 || PQ == 0) return GM_OK;
    if (!dout || !x) return GM_ERR_ARG;
    const conv_plan pl = conv_plan_pass(g, CONV_BACKWARD_WEIGHT, sizeof(T), ws_nbytes, nthreads);
    if (pl.tile < 1 || (algo == CONV_ALGO_IM2COL && !ws)) return GM_ERR_ARG;
    if (pl.items) return FN(backward_weight_items)(dw, dout, x, g, ws, &pl);
    /* dw_g (Kg, CRS) += dout tile (Kg, cnt) @ columns^T (cnt, CRS): thread t owns the dw columns [j0, j1), so it
     * builds only those rows of the (shared) column buffer and never waits for the others. The rows stay `tile`
     * apart even in a short last tile: a thread that is ahead then never writes into another's rows. */
    const int64_t tile = pl.tile, ldx = Cg == 1 ? PQ : g->xs[1];
    const int nt = pl.nt;
    blas_single_begin(nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int64_t t = omp_get_thread_num(), tn = omp_get_num_threads(), rows = algo == CONV_ALGO_IM2COL ? CRS : Cg;
        const int64_t j0 = rows * t / tn, j1 = rows * (t + 1) / tn; /* of the team OpenMP gave (see above) */
        for (int64_t n = 0; n < N && j1 > j0; n++) {
            for (int64_t grp = 0; grp < G; grp++) {
                for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
                    const int64_t cnt = min64(tile, PQ - s0);
                    const T *dg = dout + (n * K + grp * Kg) * PQ + s0, *B;
                    int64_t ldb;
                    if (algo == CONV_ALGO_POINTWISE) {
                        B = x + n * g->xs[0] + (grp * Cg + j0) * g->xs[1] + s0;
                        ldb = ldx;
                    } else {
                        FN(conv_im2col)(ws, tile, x, g, n, grp, s0, cnt, j0, j1);
                        B = ws + j0 * tile;
                        ldb = tile;
                    }
                    FN(conv_gemm)(0, 1, Kg, j1 - j0, cnt, 1, dg, PQ, B, ldb, 1, dw + grp * Kg * CRS + j0, CRS);
                }
            }
        }
    }
    blas_single_end(nt);
    return GM_OK;
}

static int FN(conv_bias_backward)(T *db, const T *t, int64_t N, int64_t K, int64_t L, const int64_t ts[3],
                                  int nthreads) {
    if (N * L > 0 && !t) return GM_ERR_ARG;
    int nt = use_threads(nthreads, (double)N * (double)K * (double)L);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t k = 0; k < K; k++) {
        double acc = 0;
        for (int64_t n = 0; n < N; n++) {
            const T *p = t + n * ts[0] + k * ts[1];
            if (ts[2] == 1) {
                for (int64_t l = 0; l < L; l++) acc += p[l];
            } else {
                for (int64_t l = 0; l < L; l++) acc += p[l * ts[2]];
            }
        }
        db[k] = (T)acc;
    }
    return GM_OK;
}


#endif
