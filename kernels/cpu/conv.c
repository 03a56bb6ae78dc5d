/* kernels/cpu/conv.c — conv2d forward/backward (im2col + gemm, pointwise gemm, direct depthwise) and the linear
 * layer on the CPU (see conv.h). Nothing here allocates: the im2col columns live in the caller's workspace.
 *
 * The element-type-specific code is written once, in the second half of this file, which includes itself once
 * per type (float, double) with CONV_T set: a C template without a second file to keep in step.
 *
 * Parallelism: each pass is one OpenMP region whose threads call a single-threaded gemm on their own share
 * (forward: tiles of output positions, each thread with its own column buffer; input-gradient: items and
 * channel blocks, whose col2im writes are disjoint; weight-gradient: blocks of the weight-gradient's columns,
 * each thread filling its rows of one shared column buffer): no atomics, no partial sums to reduce. OpenBLAS
 * (scipy-openblas32's pthreads build) has no per-thread thread count, so it is set to one thread while such a
 * region runs (blas_single_*). The alternative we measured first, tiles one after another with OpenMP for
 * im2col and one multithreaded OpenBLAS gemm per tile, hands each tile to two thread pools in turn; on a 2-core
 * machine shared with other jobs it ran the 64->64 56x56 3x3 forward at 2-4 GFLOP/s with 2 threads, against
 * 24-51 for this design (benchmarks/conv_gflops.py; on one thread the two are the same code). The buffer per
 * thread costs no memory beyond the limit: the threads share it, in smaller tiles.
 */
#ifndef CONV_T

#include "conv.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>

/* Elements touched below which a loop stays on one thread: a fork/join costs a few microseconds. */
#define CONV_PARALLEL_GRAIN 32768

static inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* [*qa, *qb): the output columns q whose input column q*stride + off lies in [0, W), clipped to [0, Q). */
static inline void valid_cols(int64_t off, int64_t stride, int64_t W, int64_t Q, int64_t *qa, int64_t *qb) {
    int64_t lo = max64(0, -floor_div(off, stride)); /* ceil(-off / stride) */
    int64_t hi = min64(Q, floor_div(W - 1 - off, stride) + 1);
    *qa = min64(lo, Q);
    *qb = max64(hi, *qa);
}

static inline int use_threads(int nthreads, double work) {
    return nthreads > 1 && work >= CONV_PARALLEL_GRAIN ? nthreads : 1;
}

/* Whether element (h, w) of every (n, c) plane of inp is at h*W + w: the plane is a contiguous row of H*W. */
static int planes_contiguous(const conv_geom *g) {
    return (g->W == 1 || g->xs[3] == 1) && (g->H == 1 || g->xs[2] == g->W);
}

conv_algo conv2d_algo(const conv_geom *g, conv_pass pass) {
    int64_t Cg = g->C / g->G;
    if (g->G > 1 && Cg == 1) return CONV_ALGO_DEPTHWISE;
    int one = g->R == 1 && g->S == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->P == g->H &&
              g->Q == g->W;
    if (!one) return CONV_ALGO_IM2COL;
    if (pass == CONV_BACKWARD_DATA) return CONV_ALGO_POINTWISE; /* dinp is contiguous */
    /* BLAS reads inp's (Cg, H*W) block of one item and group with leading dimension xs[1]. */
    int64_t HW = g->H * g->W;
    if (planes_contiguous(g) && (Cg == 1 || (g->xs[1] >= HW && g->xs[1] <= INT_MAX))) return CONV_ALGO_POINTWISE;
    return CONV_ALGO_IM2COL;
}

size_t conv2d_column_nbytes(const conv_geom *g, gm_dtype dt) {
    return (size_t)((g->C / g->G) * g->R * g->S) * gm_dtype_size(dt);
}

static inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Multiply-adds below which a pass runs on one thread. */
#define CONV_GEMM_GRAIN (1 << 20)

/* How a pass shares its work: nt threads; tiles of `tile` output positions; for the input-gradient, each
 * (item, group) split into `nchunk` blocks of channels. The im2col buffer is `slots` x tile columns. */
typedef struct {
    int nt;
    int64_t tile, nchunk, slots;
} conv_plan;

/* The most columns a thread's tile takes, whatever the limit allows: about CONV_TILE_TARGET bytes (the columns
 * then stay in L2 between im2col and gemm, and the buffer shrinks with the image, so a smaller micro-batch
 * or image needs less), but at least CONV_TILE_MIN_COLS columns, below which gemm runs short of its peak
 * (benchmarks/conv_gflops.py), rounded up to whole output rows. A constant of the geometry: deterministic, and
 * the same on meta as on the CPU. 256 KiB rather than the 1 MiB of earlier versions: the workspace is a fixed
 * cost that gradient accumulation cannot divide (2 MiB of a 23 MiB UNet step at 4 micro-batches), and the
 * step time did not move beyond the machine's noise (benchmarks/memory_techniques.py). */
#define CONV_TILE_TARGET ((size_t)256 << 10)
#define CONV_TILE_MIN_COLS 256
/* The half-precision passes' target (see hb_plan below). */
#define CONV_HALF_TILE_TARGET ((size_t)256 << 10)

static int64_t tile_cap_of(const conv_geom *g, size_t col, size_t target) {
    int64_t cols = max64(CONV_TILE_MIN_COLS, col ? (int64_t)(target / col) : g->P * g->Q);
    return g->Q > 0 ? ceil_div64(cols, g->Q) * g->Q : cols;
}


/* The plan for at most `budget` bytes of workspace, `col` bytes per column of a thread's buffer. Applied to
 * the workspace it returns (the kernels do), it gives the same plan again. tile is 0 when one column does not
 * fit. */
static conv_plan plan_cols(const conv_geom *g, conv_pass pass, conv_algo algo, size_t col, size_t target, size_t budget,
                           int nthreads) {
    const int64_t Cg = g->C / g->G, CRS = Cg * g->R * g->S, PQ = g->P * g->Q, NG = g->N * g->G;
    const double macs = (double)g->N * (double)g->K * (double)PQ * (double)CRS;
    conv_plan p = {nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1, PQ, 1, 0};
    if (PQ == 0 || NG == 0) return p;
    const int64_t cap = tile_cap_of(g, col, target);
    if (pass == CONV_BACKWARD_WEIGHT) {
        /* one shared buffer of columns; the threads split its rows (the weight-gradient's columns) */
        int64_t rows = algo == CONV_ALGO_IM2COL ? CRS : Cg;
        if (p.nt > rows) p.nt = (int)(rows > 0 ? rows : 1);
        if (algo == CONV_ALGO_IM2COL) {
            p.slots = 1;
            p.tile = col ? min64(min64(PQ, cap * p.nt), (int64_t)(budget / col)) : PQ;
        }
        return p;
    }
    if (algo == CONV_ALGO_IM2COL) { /* a buffer per thread */
        if (col && (size_t)p.nt > budget / col) p.nt = (int)max64(1, (int64_t)(budget / col));
        p.slots = p.nt;
        p.tile = col ? min64(min64(PQ, cap), (int64_t)(budget / ((size_t)p.nt * col))) : PQ;
        if (p.tile < 1) return p;
    }
    if (pass == CONV_BACKWARD_DATA && algo == CONV_ALGO_IM2COL) {
        /* col2im of one (item, group) stays on one thread per channel block: split channels if items are few */
        if (NG < p.nt) p.nchunk = min64(Cg, ceil_div64(p.nt, NG));
    } else if (NG * ceil_div64(PQ, p.tile) < p.nt) {
        /* fewer tiles than threads (batch 1, small images): split the positions further */
        p.tile = ceil_div64(PQ, ceil_div64(p.nt, NG));
    }
    return p;
}

static conv_plan plan_pass(const conv_geom *g, conv_pass pass, size_t es, size_t budget, int nthreads) {
    return plan_cols(g, pass, conv2d_algo(g, pass), (size_t)((g->C / g->G) * g->R * g->S) * es, CONV_TILE_TARGET,
                     budget, nthreads);
}

/* The half-precision forward (conv2d_forward_half below) keeps the weight and bias widened to float32 at the
 * start of its workspace, then per thread a float32 column buffer and a float32 output tile (Kg rows): its
 * "column" is CRS + Kg floats. */
static int is_half(gm_dtype dt) { return dt == GM_F16 || dt == GM_BF16; }

static size_t half_fixed_nbytes(const conv_geom *g) {
    size_t n = (size_t)(g->K * (g->C / g->G) * g->R * g->S + g->K) * sizeof(float);
    return (n + 63) & ~(size_t)63; /* the buffers after it start on a cache line */
}

static size_t half_col_nbytes(const conv_geom *g) {
    return (size_t)((g->C / g->G) * g->R * g->S + g->K / g->G) * sizeof(float);
}

/* The half-precision backward passes (conv2d_backward_*_half below) keep the same shape of workspace: widened
 * weight (and bias) or the float32 weight-gradient first, then per thread a float32 plane block and tile
 * buffers. hb_plan says how a pass shares them.
 *   input-gradient: a unit is (item, group, block of `chunk` channels); its thread sums the block's gradient in a
 *     float32 plane buffer (chunk x H x W) and rounds it once; per position of a tile it needs the widened
 *     grad_output column (Kg) and the block's columns (chunk x R x S).
 *   weight-gradient: thread t owns rows [CRS t / nt, CRS (t+1) / nt) of the columns, so its share of the float32
 *     weight-gradient, and builds them `chunk` rows at a time; per position it needs those rows of the columns
 *     and the widened grad_output column (Kg).
 * The plane block is at most CONV_HALF_PLANE_TARGET bytes (at least one channel): the float32 scratch of the
 * input-gradient follows the image, not the batch or the channel count. A thread's tile buffers aim at
 * CONV_HALF_TILE_TARGET bytes (the half forward's too), as the float32 passes': these passes are what autocast
 * runs when memory is short, and gemm keeps near its peak with CONV_TILE_MIN_COLS columns
 * (benchmarks/conv_gflops.py). */
#define CONV_HALF_PLANE_TARGET ((size_t)256 << 10)

typedef struct {
    int nt;
    int64_t tile, chunk;  /* chunk: channels per unit (input-gradient) or the most rows per thread (weight) */
    size_t fixed, plane;  /* bytes before the per-thread buffers; bytes of one thread's plane block */
    size_t col;           /* bytes per position of one thread's tile buffers */
} hb_plan;

/* The plan for at most `budget` bytes; 0 when it fits, else the least workspace the pass needs. */
static size_t hb_plan_for(const conv_geom *g, conv_pass pass, size_t budget, int nthreads, hb_plan *hp) {
    const int64_t Cg = g->C / g->G, Kg = g->K / g->G, RS = g->R * g->S, CRS = Cg * RS, PQ = g->P * g->Q;
    const int64_t HW = g->H * g->W, NG = g->N * g->G;
    const double macs = (double)g->N * (double)g->K * (double)PQ * (double)CRS;
    int nt = nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1;
    /* rows of columns a tile of CONV_TILE_MIN_COLS positions may hold within the target, beside grad_output's */
    const int64_t rows = max64(1, (int64_t)(CONV_HALF_TILE_TARGET / sizeof(float)) / CONV_TILE_MIN_COLS - Kg);
    for (;;) {
        hb_plan p = {nt, 0, 0, 0, 0, 0};
        if (pass == CONV_BACKWARD_DATA) {
            p.chunk = min64(Cg, max64(1, (int64_t)(CONV_HALF_PLANE_TARGET / sizeof(float)) / max64(HW, 1)));
            p.chunk = min64(p.chunk, max64(1, rows / RS));
            if (NG * ceil_div64(Cg, p.chunk) < nt) /* few items: smaller blocks, so every thread has one */
                p.chunk = max64(1, ceil_div64(Cg, ceil_div64(nt, NG)));
            p.nt = (int)min64(nt, NG * ceil_div64(Cg, p.chunk));
            p.fixed = (size_t)(g->K * CRS + g->C) * sizeof(float);
            p.plane = (size_t)(p.chunk * HW) * sizeof(float);
            p.col = (size_t)(p.chunk * RS + Kg) * sizeof(float);
        } else {
            p.nt = (int)min64(nt, CRS);
            p.chunk = min64(ceil_div64(CRS, p.nt), rows);
            p.fixed = (size_t)(g->K * CRS) * sizeof(float);
            p.col = (size_t)(p.chunk + Kg) * sizeof(float);
        }
        p.fixed = (p.fixed + 63) & ~(size_t)63;
        const size_t least = p.fixed + (size_t)p.nt * (p.plane + p.col);
        if (budget >= least) {
            const size_t per = (budget - p.fixed) / (size_t)p.nt - p.plane;
            p.tile = min64(min64(PQ, tile_cap_of(g, p.col, CONV_HALF_TILE_TARGET)), (int64_t)(per / p.col));
            *hp = p;
            return 0;
        }
        if (nt == 1) return least;
        nt = 1; /* one thread needs one set of buffers */
    }
}

static size_t hb_nbytes(const hb_plan *p) {
    return p->fixed + (size_t)p->nt * (p->plane + (size_t)p->tile * p->col);
}

static size_t half_workspace_nbytes(const conv_geom *g, conv_pass pass, size_t limit, int nthreads) {
    const int64_t CRS = g->C / g->G * g->R * g->S;
    if (conv2d_algo(g, pass) == CONV_ALGO_DEPTHWISE) return 0; /* unsupported */
    if (g->K == 0 || CRS == 0 || g->H * g->W == 0) return 0;
    if (pass != CONV_FORWARD) {
        if (g->P * g->Q == 0 || g->N == 0) return 0;
        hb_plan p;
        size_t least = hb_plan_for(g, pass, limit, nthreads, &p);
        return least ? least : hb_nbytes(&p);
    }
    if (g->P * g->Q == 0 || g->N == 0) return 0;
    const size_t fixed = half_fixed_nbytes(g), col = half_col_nbytes(g);
    if (limit < fixed + col) return fixed + col;
    conv_plan p = plan_cols(g, pass, CONV_ALGO_IM2COL, col, CONV_HALF_TILE_TARGET, limit - fixed, nthreads);
    return fixed + (size_t)p.slots * (size_t)p.tile * col;
}

size_t conv2d_workspace_nbytes(const conv_geom *g, gm_dtype dt, conv_pass pass, size_t limit, int nthreads) {
    if (is_half(dt)) return half_workspace_nbytes(g, pass, limit, nthreads);
    if (conv2d_algo(g, pass) != CONV_ALGO_IM2COL) return 0;
    size_t col = conv2d_column_nbytes(g, dt);
    if (col == 0 || g->P * g->Q == 0 || g->N == 0 || g->K == 0) return 0;
    if (col > limit) return col;
    conv_plan p = plan_pass(g, pass, gm_dtype_size(dt), limit, nthreads);
    return (size_t)p.slots * (size_t)p.tile * col;
}

/* OpenBLAS at one thread while any conv region runs; the last region out restores the caller's count. */
static int blas_users, blas_saved;

static void blas_single_begin(int nt) {
    if (nt <= 1) return;
#pragma omp critical(gm_conv_blas)
    {
        if (blas_users++ == 0) {
            blas_saved = scipy_openblas_get_num_threads();
            if (blas_saved != 1) scipy_openblas_set_num_threads(1);
        }
    }
}

static void blas_single_end(int nt) {
    if (nt <= 1) return;
#pragma omp critical(gm_conv_blas)
    {
        if (--blas_users == 0 && blas_saved != 1) scipy_openblas_set_num_threads(blas_saved);
    }
}

/* Checks shared by the conv entry points: sizes, and what BLAS's 32-bit integers can index. */
static int check_geom(const conv_geom *g) {
    if (!g || g->N < 0 || g->C < 0 || g->H < 0 || g->W < 0 || g->K < 0 || g->R < 1 || g->S < 1 || g->P < 0 ||
        g->Q < 0 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0 || g->G < 1 ||
        g->C % g->G || g->K % g->G)
        return GM_ERR_ARG;
    int64_t CRS = g->C / g->G * g->R * g->S;
    if (CRS > INT_MAX || g->K > INT_MAX || g->P * g->Q > INT_MAX || g->H * g->W > INT_MAX) return GM_ERR_UNSUPPORTED;
    return GM_OK;
}

/* ---- the typed code, once per element type ------------------------------------------------------------- */
#define CONV_T float
#define CONV_SUF f32
#define CONV_GEMM scipy_cblas_sgemm
#include "conv.c"
#undef CONV_T
#undef CONV_SUF
#undef CONV_GEMM

#define CONV_T double
#define CONV_SUF f64
#define CONV_GEMM scipy_cblas_dgemm
#include "conv.c"
#undef CONV_T
#undef CONV_SUF
#undef CONV_GEMM

/* ---- the half-precision forward: float16/bfloat16 storage, float32 arithmetic, rounded once ----------------
 * The input is read as it is stored (im2col widens while it gathers) and the output is rounded a tile at a
 * time, so no float32 copy of either exists: the workspace holds the widened weight and bias (small) and, per
 * thread, a float32 column buffer and a float32 output tile. Every algorithm but depthwise runs as im2col here
 * (for a 1x1 convolution the columns are the widened input tile). */
/* noinline: inlined into im2col_h, GCC left these loops scalar (-fopt-info-vec) */
static __attribute__((noinline)) void load_run_h(float *d, const uint16_t *x, int64_t step, int64_t n, gm_dtype dt) {
    if (dt == GM_F16 && step == 1) {
        for (int64_t i = 0; i < n; i++) d[i] = gm_half_to_float(x[i]);
    } else if (dt == GM_F16) {
        for (int64_t i = 0; i < n; i++) d[i] = gm_half_to_float(x[i * step]);
    } else if (step == 1) {
        for (int64_t i = 0; i < n; i++) d[i] = gm_bf16_to_float(x[i]);
    } else {
        for (int64_t i = 0; i < n; i++) d[i] = gm_bf16_to_float(x[i * step]);
    }
}

/* im2col_f32 over a half-precision input: the same columns, widened; rows [j0, j1) only, row j0 first in col. */
static void im2col_h(float *col, int64_t ld, const uint16_t *x, const conv_geom *g, int64_t n, int64_t grp,
                     int64_t s0, int64_t cnt, int64_t j0, int64_t j1, gm_dtype dt) {
    const int64_t Cg = g->C / g->G, R = g->R, S = g->S, Q = g->Q;
    const int64_t xs1 = g->xs[1], xs2 = g->xs[2], xs3 = g->xs[3];
    const uint16_t *xg = x + n * g->xs[0] + grp * Cg * xs1;
    for (int64_t row = j0; row < j1; row++) {
        const int64_t c = row / (R * S), r = row / S % R, s = row % S, off = s * g->dw - g->pw;
        const uint16_t *xc = xg + c * xs1;
        int64_t qa, qb;
        valid_cols(off, g->sw, g->W, Q, &qa, &qb);
        for (int64_t pos = s0, end = s0 + cnt; pos < end;) {
            const int64_t p = pos / Q, q0 = pos - p * Q, q1 = min64(Q, q0 + end - pos);
            const int64_t h = p * g->sh - g->ph + r * g->dh;
            float *d = col + (row - j0) * ld + (pos - s0) - q0; /* d[q] for q in [q0, q1) */
            if (h < 0 || h >= g->H) {
                for (int64_t q = q0; q < q1; q++) d[q] = 0;
            } else {
                const int64_t a = min64(max64(qa, q0), q1), b = min64(max64(qb, a), q1);
                for (int64_t q = q0; q < a; q++) d[q] = 0;
                load_run_h(d + a, xc + h * xs2 + (a * g->sw + off) * xs3, g->sw * xs3, b - a, dt);
                for (int64_t q = b; q < q1; q++) d[q] = 0;
            }
            pos += q1 - q0;
        }
    }
}

/* rows (n) of dst (ld apart) = src (n, len) rounded to dt. */
static __attribute__((noinline)) void round_rows_h(uint16_t *dst, int64_t ld, const float *src, int64_t n, int64_t len, gm_dtype dt) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t *d = dst + i * ld;
        const float *sp = src + i * len;
        if (dt == GM_F16) {
            for (int64_t j = 0; j < len; j++) d[j] = gm_float_to_half(sp[j]);
        } else {
            for (int64_t j = 0; j < len; j++) d[j] = gm_float_to_bf16(sp[j]);
        }
    }
}

static int conv2d_forward_half(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                               const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q;
    if (N == 0 || K == 0 || PQ == 0) return GM_OK;
    if (!out || !w || (N * g->C > 0 && !x)) return GM_ERR_ARG;
    if (conv2d_algo(g, CONV_FORWARD) == CONV_ALGO_DEPTHWISE) return GM_ERR_UNSUPPORTED;
    if (CRS == 0) { /* no input channels: the output is the bias, already in dt */
        for (int64_t i = 0; i < N * K; i++)
            for (int64_t j = 0; j < PQ; j++) out[i * PQ + j] = bias ? bias[i % K] : 0;
        return GM_OK;
    }
    const size_t fixed = half_fixed_nbytes(g), colb = half_col_nbytes(g);
    if (!ws || ws_nbytes < fixed + colb) return GM_ERR_ARG;
    const conv_plan pl = plan_cols(g, CONV_FORWARD, CONV_ALGO_IM2COL, colb, CONV_HALF_TILE_TARGET, ws_nbytes - fixed,
                                   nthreads);
    if (pl.tile < 1) return GM_ERR_ARG;
    float *w32 = ws, *b32 = w32 + K * CRS, *bufs = (float *)((char *)ws + fixed);
    load_run_h(w32, w, 1, K * CRS, dt);
    if (bias) load_run_h(b32, bias, 1, K, dt);
    const int64_t tile = pl.tile, ntile = ceil_div64(PQ, tile), units = N * G * ntile;
    blas_single_begin(pl.nt);
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / (G * ntile), grp = u / ntile % G, s0 = u % ntile * tile, cnt = min64(tile, PQ - s0);
        float *col = bufs + (int64_t)omp_get_thread_num() * tile * (CRS + Kg), *ot = col + tile * CRS;
        im2col_h(col, cnt, x, g, n, grp, s0, cnt, 0, CRS, dt);
        /* bias first, then gemm onto it, as the float32 forward does: the same sums, so the same roundings */
        if (bias) fill_rows_f32(ot, b32 + grp * Kg, Kg, cnt, cnt);
        gemm_f32(0, 0, Kg, cnt, CRS, 1, w32 + grp * Kg * CRS, CRS, col, cnt, bias ? 1 : 0, ot, cnt);
        round_rows_h(out + (n * K + grp * Kg) * PQ + s0, PQ, ot, Kg, cnt, dt);
    }
    blas_single_end(pl.nt);
    return GM_OK;
}

/* rows (n) of dst (len floats each, contiguous) = rows of src (ld apart) widened. */
static void widen_rows_h(float *dst, const uint16_t *src, int64_t ld, int64_t n, int64_t len, gm_dtype dt) {
    for (int64_t i = 0; i < n; i++) load_run_h(dst + i * len, src + i * ld, 1, len, dt);
}

/* The input-gradient in half precision (see hb_plan): per (item, group, channel block) the gradient is summed
 * in a float32 plane block and rounded once, so no float32 copy of grad_output or of the input-gradient exists. */
static int conv2d_backward_data_half(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                     const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, C = g->C, K = g->K, G = g->G, Cg = C / G, Kg = K / G, RS = g->R * g->S;
    const int64_t CRS = Cg * RS, PQ = g->P * g->Q, HW = g->H * g->W;
    if (N == 0 || C == 0 || HW == 0) return GM_OK;
    if (!dx || (K > 0 && (!w || (PQ > 0 && !dout)))) return GM_ERR_ARG;
    if (conv2d_algo(g, CONV_BACKWARD_DATA) == CONV_ALGO_DEPTHWISE) return GM_ERR_UNSUPPORTED;
    if (Kg == 0 || PQ == 0) { /* nothing flows back: dinp is the bias (or zeros), already in dt */
        for (int64_t i = 0; i < N * C; i++)
            for (int64_t j = 0; j < HW; j++) dx[i * HW + j] = bias ? bias[i % C] : 0;
        return GM_OK;
    }
    hb_plan pl;
    if (!ws || hb_plan_for(g, CONV_BACKWARD_DATA, ws_nbytes, nthreads, &pl) || pl.tile < 1) return GM_ERR_ARG;
    float *w32 = ws, *b32 = w32 + K * CRS;
    load_run_h(w32, w, 1, K * CRS, dt);
    if (bias) load_run_h(b32, bias, 1, C, dt);
    const int64_t tile = pl.tile, chunk = pl.chunk, nchunk = ceil_div64(Cg, chunk), units = N * G * nchunk;
    const int64_t per = (int64_t)((pl.plane + (size_t)tile * pl.col) / sizeof(float));
    float *bufs = (float *)((char *)ws + pl.fixed);
    blas_single_begin(pl.nt);
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / (G * nchunk), grp = u / nchunk % G, c0 = u % nchunk * chunk;
        const int64_t c1 = min64(Cg, c0 + chunk);
        float *plane = bufs + (int64_t)omp_get_thread_num() * per, *dcol = plane + chunk * HW;
        float *g32 = dcol + tile * chunk * RS;
        fill_rows_f32(plane, bias ? b32 + grp * Cg + c0 : NULL, c1 - c0, HW, HW);
        for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
            const int64_t cnt = min64(tile, PQ - s0);
            widen_rows_h(g32, dout + (n * K + grp * Kg) * PQ + s0, PQ, Kg, cnt, dt);
            gemm_f32(1, 0, (c1 - c0) * RS, cnt, Kg, 1, w32 + grp * Kg * CRS + c0 * RS, CRS, g32, cnt, 0, dcol, cnt);
            col2im_f32(plane, dcol, g, c0, c1, s0, cnt);
        }
        round_rows_h(dx + (n * C + grp * Cg + c0) * HW, HW, plane, c1 - c0, HW, dt);
    }
    blas_single_end(pl.nt);
    return GM_OK;
}

/* The weight-gradient in half precision (see hb_plan): summed over items and positions into a float32
 * weight-gradient, rounded once; each thread widens the tiles of grad_output and builds its rows of the columns. */
static int conv2d_backward_weight_half(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                       gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q;
    if (K == 0 || CRS == 0) return GM_OK;
    if (!dw) return GM_ERR_ARG;
    if (conv2d_algo(g, CONV_BACKWARD_WEIGHT) == CONV_ALGO_DEPTHWISE) return GM_ERR_UNSUPPORTED;
    if (N == 0 || PQ == 0) {
        memset(dw, 0, (size_t)(K * CRS) * sizeof(uint16_t)); /* +0 in both half formats */
        return GM_OK;
    }
    if (!dout || !x) return GM_ERR_ARG;
    hb_plan pl;
    if (!ws || hb_plan_for(g, CONV_BACKWARD_WEIGHT, ws_nbytes, nthreads, &pl) || pl.tile < 1) return GM_ERR_ARG;
    float *dw32 = ws, *bufs = (float *)((char *)ws + pl.fixed);
    memset(dw32, 0, (size_t)(K * CRS) * sizeof(float));
    const int64_t tile = pl.tile, per = (int64_t)((size_t)tile * pl.col / sizeof(float));
    const int nt = pl.nt;
    blas_single_begin(nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int64_t t = omp_get_thread_num(), j0 = CRS * t / nt, j1 = CRS * (t + 1) / nt;
        float *col = bufs + t * per, *g32 = col + tile * pl.chunk;
        for (int64_t n = 0; n < N && j1 > j0; n++) {
            for (int64_t grp = 0; grp < G; grp++) {
                for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
                    const int64_t cnt = min64(tile, PQ - s0);
                    widen_rows_h(g32, dout + (n * K + grp * Kg) * PQ + s0, PQ, Kg, cnt, dt);
                    for (int64_t ja = j0; ja < j1; ja += pl.chunk) {
                        const int64_t jb = min64(j1, ja + pl.chunk);
                        im2col_h(col, cnt, x, g, n, grp, s0, cnt, ja, jb, dt);
                        gemm_f32(0, 1, Kg, jb - ja, cnt, 1, g32, cnt, col, cnt, 1, dw32 + grp * Kg * CRS + ja, CRS);
                    }
                }
            }
        }
    }
    blas_single_end(nt);
    round_rows_h(dw, K * CRS, dw32, 1, K * CRS, dt);
    return GM_OK;
}

/* The bias gradient of half-precision t: sums in double, as the float32 one, rounded once. */
static int conv_bias_backward_half(uint16_t *db, const uint16_t *t, int64_t N, int64_t K, int64_t L,
                                   const int64_t ts[3], gm_dtype dt, int nthreads) {
    int nt = use_threads(nthreads, (double)N * (double)K * (double)L);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t k = 0; k < K; k++) {
        double acc = 0;
        for (int64_t n = 0; n < N; n++) {
            const uint16_t *p = t + n * ts[0] + k * ts[1];
            for (int64_t l = 0; l < L; l++)
                acc += dt == GM_F16 ? gm_half_to_float(p[l * ts[2]]) : gm_bf16_to_float(p[l * ts[2]]);
        }
        db[k] = dt == GM_F16 ? gm_float_to_half((float)acc) : gm_float_to_bf16((float)acc);
    }
    return GM_OK;
}

/* ---- entry points: dtype dispatch ----------------------------------------------------------------------- */
int conv2d_forward(void *out, const void *inp, const void *weight, const void *bias, const conv_geom *g,
                   gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    int st = check_geom(g);
    if (st) return st;
    if (dt == GM_F32) return conv2d_forward_f32(out, inp, weight, bias, g, ws, ws_nbytes, nthreads);
    if (dt == GM_F64) return conv2d_forward_f64(out, inp, weight, bias, g, ws, ws_nbytes, nthreads);
    if (is_half(dt)) return conv2d_forward_half(out, inp, weight, bias, g, dt, ws, ws_nbytes, nthreads);
    return GM_ERR_UNSUPPORTED;
}

int conv2d_backward_data(void *dinp, const void *dout, const void *weight, const void *bias, const conv_geom *g,
                         gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    int st = check_geom(g);
    if (st) return st;
    if (dt == GM_F32) return conv2d_backward_data_f32(dinp, dout, weight, bias, g, ws, ws_nbytes, nthreads);
    if (dt == GM_F64) return conv2d_backward_data_f64(dinp, dout, weight, bias, g, ws, ws_nbytes, nthreads);
    if (is_half(dt)) return conv2d_backward_data_half(dinp, dout, weight, bias, g, dt, ws, ws_nbytes, nthreads);
    return GM_ERR_UNSUPPORTED;
}

int conv2d_backward_weight(void *dweight, const void *dout, const void *inp, const conv_geom *g, gm_dtype dt,
                           void *ws, size_t ws_nbytes, int nthreads) {
    int st = check_geom(g);
    if (st) return st;
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

#define T CONV_T
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, CONV_SUF)

/* 16-byte vectors (SSE2, the x86-64 baseline the build targets) through GCC/Clang vector extensions: the
 * auto-vectorizer left the depthwise loops scalar (it will not keep an accumulator array in registers). */
typedef T FN(vec) __attribute__((vector_size(16)));
#define VEC FN(vec)
#define VL ((int)(sizeof(VEC) / sizeof(T)))

static inline VEC FN(vload)(const T *p) {
    VEC v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void FN(vstore)(T *p, VEC v) { memcpy(p, &v, sizeof v); }

/* Row-major gemm C (M, N) = alpha op(A) op(B) + beta C, sizes already checked against INT_MAX. */
static inline void FN(gemm)(int ta, int tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,
                            const T *B, int64_t ldb, T beta, T *C, int64_t ldc) {
    CONV_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M,
              (blasint)N, (blasint)K, alpha, A, (blasint)(lda > 0 ? lda : 1), B, (blasint)(ldb > 0 ? ldb : 1),
              beta, C, (blasint)(ldc > 0 ? ldc : 1));
}

/* Rows [j0, j1) of the im2col matrix of item n, group grp, output positions [s0, s0 + cnt): col (Cg*R*S, cnt)
 * row-major with rows ld >= cnt apart, row (c, r, s) holding inp[n, grp*Cg + c, p*sh - ph + r*dh,
 * q*sw - pw + s*dw] (0 in the padding) for position p*Q + q. Only rows [j0, j1) of col are written. */
static void FN(im2col)(T *col, int64_t ld, const T *x, const conv_geom *g, int64_t n, int64_t grp, int64_t s0,
                       int64_t cnt, int64_t j0, int64_t j1) {
    const int64_t Cg = g->C / g->G, R = g->R, S = g->S, Q = g->Q;
    const int64_t xs1 = g->xs[1], xs2 = g->xs[2], xs3 = g->xs[3];
    const T *xg = x + n * g->xs[0] + grp * Cg * xs1;
    for (int64_t row = j0; row < j1; row++) {
        const int64_t c = row / (R * S), r = row / S % R, s = row % S, off = s * g->dw - g->pw;
        const T *xc = xg + c * xs1;
        int64_t qa, qb;
        valid_cols(off, g->sw, g->W, Q, &qa, &qb);
        for (int64_t pos = s0, end = s0 + cnt; pos < end;) {
            const int64_t p = pos / Q, q0 = pos - p * Q, q1 = min64(Q, q0 + end - pos);
            const int64_t h = p * g->sh - g->ph + r * g->dh;
            T *d = col + row * ld + (pos - s0) - q0; /* d[q] for q in [q0, q1) */
            if (h < 0 || h >= g->H) {
                for (int64_t q = q0; q < q1; q++) d[q] = 0;
            } else {
                const T *xr = xc + h * xs2;
                const int64_t a = min64(max64(qa, q0), q1), b = min64(max64(qb, a), q1);
                for (int64_t q = q0; q < a; q++) d[q] = 0;
                if (g->sw == 1 && xs3 == 1) {
                    if (b > a) memcpy(d + a, xr + a + off, (size_t)(b - a) * sizeof(T));
                } else {
                    for (int64_t q = a; q < b; q++) d[q] = xr[(q * g->sw + off) * xs3];
                }
                for (int64_t q = b; q < q1; q++) d[q] = 0;
            }
            pos += q1 - q0;
        }
    }
}

/* The adjoint of im2col for channels [c0, c1): dx (c1 - c0, H, W), channel c0's plane first (contiguous), += the
 * columns of positions [s0, s0 + cnt) in col, whose first row is channel c0's (r, s) = (0, 0). */
static void FN(col2im)(T *dx, const T *col, const conv_geom *g, int64_t c0, int64_t c1, int64_t s0, int64_t cnt) {
    const int64_t R = g->R, S = g->S, Q = g->Q, H = g->H, W = g->W;
    for (int64_t c = c0; c < c1; c++) {
        T *dxc = dx + (c - c0) * H * W;
        for (int64_t r = 0; r < R; r++) {
            for (int64_t s = 0; s < S; s++) {
                const int64_t off = s * g->dw - g->pw;
                const T *src = col + (((c - c0) * R + r) * S + s) * cnt;
                int64_t qa, qb;
                valid_cols(off, g->sw, W, Q, &qa, &qb);
                for (int64_t pos = s0, end = s0 + cnt; pos < end;) {
                    const int64_t p = pos / Q, q0 = pos - p * Q, q1 = min64(Q, q0 + end - pos);
                    const int64_t h = p * g->sh - g->ph + r * g->dh;
                    if (h >= 0 && h < H) {
                        const T *sp = src + (pos - s0) - q0;
                        T *dr = dxc + h * W;
                        const int64_t a = min64(max64(qa, q0), q1), b = min64(max64(qb, a), q1);
                        if (g->sw == 1) {
                            T *d = dr + off;
                            for (int64_t q = a; q < b; q++) d[q] += sp[q];
                        } else {
                            for (int64_t q = a; q < b; q++) dr[q * g->sw + off] += sp[q];
                        }
                    }
                    pos += q1 - q0;
                }
            }
        }
    }
}

/* rows (n) of dst, each len long and ld apart, set to vals[i] (0 when vals is NULL). */
static void FN(fill_rows)(T *dst, const T *vals, int64_t n, int64_t len, int64_t ld) {
    for (int64_t i = 0; i < n; i++) {
        T v = vals ? vals[i] : 0, *d = dst + i * ld;
        for (int64_t j = 0; j < len; j++) d[j] = v;
    }
}

/* Sum of a[i] * b[i * bstride], i < n, in vector lanes (partial sums) for the contiguous case. */
static inline T FN(dot)(const T *a, const T *b, int64_t bstride, int64_t n) {
    int64_t i = 0;
    T sum = 0;
    if (bstride == 1) {
        VEC acc = {0};
        for (; i + VL <= n; i += VL) acc += FN(vload)(a + i) * FN(vload)(b + i);
        for (int l = 0; l < VL; l++) sum += acc[l];
    }
    for (; i < n; i++) sum += a[i] * b[i * bstride];
    return sum;
}

/* ---- depthwise: C == G, each input channel feeds mult = K / C output channels --------------------------- */
/* One plane of a single-channel correlation: o (P, Q) = b0 (or o itself, when accumulate) + sum over taps (r, s)
 * of wt(r, s) * x[p*sh - ph + r*dh, q*sw - pw + s*dw], x (H, W) read at element strides (xrs, xcs) and 0 outside,
 * wt(r, s) = wk[r*wrs + s*wcs]. Interior columns (all S taps inside the row) are computed DW_BLOCK at a time in
 * registers, so each output is stored once instead of once per tap. */
#define DW_BLOCK 16
#define DW_EDGE 32
static void FN(dw_plane)(T *o, const T *x, int64_t xrs, int64_t xcs, const T *wk, int64_t wrs, int64_t wcs, T b0,
                         int accumulate, const conv_geom *d) {
    const int64_t H = d->H, W = d->W, P = d->P, Q = d->Q, R = d->R, S = d->S, sh = d->sh, sw = d->sw;
    const int64_t ph = d->ph, pw = d->pw, dh = d->dh, dwl = d->dw, step = sw * xcs;
    /* [lo, hi): columns whose taps all fall inside [0, W) */
    const int64_t lo = min64(Q, max64(0, -floor_div(-pw, sw)));
    const int64_t hi = max64(lo, min64(Q, floor_div(W - 1 - (S - 1) * dwl + pw, sw) + 1));
    /* the taps [s0, s1) inside the row for the first DW_EDGE edge columns (left, then right): the same for
     * every row, so the divisions are done once per plane */
    int64_t edge_s0[DW_EDGE], edge_s1[DW_EDGE];
    for (int64_t i = 0; i < DW_EDGE && i < lo + Q - hi; i++) {
        const int64_t q = i < lo ? i : hi + i - lo, c0 = q * sw - pw;
        edge_s0[i] = min64(S, max64(0, -floor_div(c0, dwl)));
        edge_s1[i] = max64(edge_s0[i], min64(S, floor_div(W - 1 - c0, dwl) + 1));
    }
    for (int64_t p = 0; p < P; p++) {
        T *orow = o + p * Q;
        const int64_t h0 = p * sh - ph; /* row of tap r: h0 + r*dh; the taps inside [0, H) are [r0, r1) */
        const int64_t r0 = min64(R, max64(0, -floor_div(h0, dh)));
        const int64_t r1 = max64(r0, min64(R, floor_div(H - 1 - h0, dh) + 1));
        int64_t q = 0;
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: the left border [0, lo); pass 1: what the blocks leave, up to Q; one output at a time, over
             * the taps that fall inside the row */
            const int64_t qend = pass == 0 ? lo : Q;
            for (; q < qend; q++) {
                const int64_t c0 = q * sw - pw; /* column of tap s: c0 + s*dw; the taps inside [0, W) are [s0, s1) */
                int64_t s0 = 0, s1 = S;
                if (q < lo || q >= hi) {
                    const int64_t i = q < lo ? q : lo + q - hi;
                    if (i < DW_EDGE) {
                        s0 = edge_s0[i];
                        s1 = edge_s1[i];
                    } else {
                        s0 = min64(S, max64(0, -floor_div(c0, dwl)));
                        s1 = max64(s0, min64(S, floor_div(W - 1 - c0, dwl) + 1));
                    }
                }
                T acc = accumulate ? orow[q] : b0;
                for (int64_t r = r0; r < r1; r++) {
                    const T *xr = x + (h0 + r * dh) * xrs + c0 * xcs, *wr = wk + r * wrs;
                    for (int64_t s = s0; s < s1; s++) acc += wr[s * wcs] * xr[s * dwl * xcs];
                }
                orow[q] = acc;
            }
            if (pass == 1) break;
            /* blocks of DW_BLOCK outputs, then of one vector, while all taps are inside the row */
            for (int nv = DW_BLOCK / VL; nv >= 1; nv = nv > 1 ? 1 : 0) {
                for (; q + nv * VL <= hi; q += nv * VL) {
                    VEC acc[DW_BLOCK / VL];
                    for (int v = 0; v < nv; v++)
                        acc[v] = accumulate ? FN(vload)(orow + q + v * VL) : b0 + (VEC){0};
                    for (int64_t r = r0; r < r1; r++) {
                        const T *xr = x + (h0 + r * dh) * xrs + (q * sw - pw) * xcs, *wr = wk + r * wrs;
                        for (int64_t s = 0; s < S; s++) {
                            const T wv = wr[s * wcs], *xp = xr + s * dwl * xcs;
                            for (int v = 0; v < nv; v++) {
                                VEC xv;
                                if (step == 1) {
                                    xv = FN(vload)(xp + v * VL);
                                } else {
                                    for (int l = 0; l < VL; l++) xv[l] = xp[(v * VL + l) * step];
                                }
                                acc[v] += wv * xv;
                            }
                        }
                    }
                    for (int v = 0; v < nv; v++) FN(vstore)(orow + q + v * VL, acc[v]);
                }
            }
        }
    }
}

/* Planes are handed out a few at a time rather than split up front: on a machine shared with other work a
 * thread that loses its core then delays only its current planes. */
static void FN(depthwise_forward)(T *out, const T *x, const T *w, const T *bias, const conv_geom *g, int nthreads) {
    const int64_t K = g->K, mult = K / g->C, RS = g->R * g->S, PQ = g->P * g->Q;
    int nt = use_threads(nthreads, (double)g->N * (double)K * (double)PQ * (double)RS);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 4)
    for (int64_t nk = 0; nk < g->N * K; nk++) {
        const int64_t n = nk / K, k = nk % K;
        FN(dw_plane)(out + nk * PQ, x + n * g->xs[0] + (k / mult) * g->xs[1], g->xs[2], g->xs[3], w + k * RS, g->S,
                     1, bias ? bias[k] : 0, 0, g);
    }
}

/* dinp (N, C, H, W): each (n, c) plane gathers from its mult output channels; one thread owns a plane. With
 * stride 1 that is the forward's correlation of dout with the flipped kernel, padded by dilation*(k-1) - pad;
 * otherwise each dout row is scattered tap by tap. */
static void FN(depthwise_backward_data)(T *dx, const T *dout, const T *w, const T *bias, const conv_geom *g,
                                        int nthreads) {
    const int64_t C = g->C, K = g->K, mult = K / C, R = g->R, S = g->S, P = g->P, Q = g->Q, H = g->H, W = g->W;
    const int64_t RS = R * S;
    const conv_geom flip = {.N = g->N, .C = K, .H = P, .W = Q, .K = C, .R = R, .S = S, .P = H, .Q = W, .sh = 1,
                            .sw = 1, .ph = g->dh * (R - 1) - g->ph, .pw = g->dw * (S - 1) - g->pw, .dh = g->dh,
                            .dw = g->dw, .G = C};
    int nt = use_threads(nthreads, (double)g->N * (double)K * (double)(P * Q) * (double)RS);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 4)
    for (int64_t nc = 0; nc < g->N * C; nc++) {
        const int64_t n = nc / C, c = nc % C;
        T *dxc = dx + nc * H * W;
        const T b0 = bias ? bias[c] : 0;
        if (g->sh == 1 && g->sw == 1) {
            for (int64_t m = 0; m < mult; m++) {
                const int64_t k = c * mult + m;
                FN(dw_plane)(dxc, dout + (n * K + k) * P * Q, Q, 1, w + k * RS + RS - 1, -S, -1, b0, m > 0, &flip);
            }
            if (mult == 0)
                for (int64_t i = 0; i < H * W; i++) dxc[i] = b0;
            continue;
        }
        for (int64_t i = 0; i < H * W; i++) dxc[i] = b0;
        for (int64_t m = 0; m < mult; m++) {
            const int64_t k = c * mult + m;
            const T *dk = dout + (n * K + k) * P * Q, *wk = w + k * RS;
            for (int64_t p = 0; p < P; p++) {
                const T *drow = dk + p * Q;
                for (int64_t r = 0; r < R; r++) {
                    const int64_t h = p * g->sh - g->ph + r * g->dh;
                    if (h < 0 || h >= H) continue;
                    T *dr = dxc + h * W;
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t off = s * g->dw - g->pw;
                        const T wv = wk[r * S + s];
                        int64_t qa, qb;
                        valid_cols(off, g->sw, W, Q, &qa, &qb);
                        for (int64_t q = qa; q < qb; q++) dr[q * g->sw + off] += wv * drow[q];
                    }
                }
            }
        }
    }
}

/* dweight (K, 1, R, S): one thread owns each output channel's R*S taps and sums over items and positions. */
static void FN(depthwise_backward_weight)(T *dw, const T *dout, const T *x, const conv_geom *g, int nthreads) {
    const int64_t K = g->K, mult = K / g->C, R = g->R, S = g->S, P = g->P, Q = g->Q;
    const int64_t xs2 = g->xs[2], xs3 = g->xs[3];
    int nt = use_threads(nthreads, (double)g->N * (double)K * (double)(P * Q) * (double)(R * S));
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 1)
    for (int64_t k = 0; k < K; k++) {
        T *dwk = dw + k * R * S;
        for (int64_t i = 0; i < R * S; i++) dwk[i] = 0;
        for (int64_t n = 0; n < g->N; n++) {
            const T *xc = x + n * g->xs[0] + (k / mult) * g->xs[1], *dk = dout + (n * K + k) * P * Q;
            for (int64_t p = 0; p < P; p++) {
                for (int64_t r = 0; r < R; r++) {
                    const int64_t h = p * g->sh - g->ph + r * g->dh;
                    if (h < 0 || h >= g->H) continue;
                    const T *xr = xc + h * xs2;
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t off = s * g->dw - g->pw;
                        int64_t qa, qb;
                        valid_cols(off, g->sw, g->W, Q, &qa, &qb);
                        if (qb > qa)
                            dwk[r * S + s] += FN(dot)(dk + p * Q + qa, xr + (qa * g->sw + off) * xs3, g->sw * xs3,
                                                      qb - qa);
                    }
                }
            }
        }
    }
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
        FN(depthwise_forward)(out, x, w, bias, g, nthreads);
        return GM_OK;
    }
    if (CRS == 0) { /* no input channels: an empty sum */
        for (int64_t n = 0; n < N; n++) FN(fill_rows)(out + n * K * PQ, bias, K, PQ, PQ);
        return GM_OK;
    }
    const conv_plan pl = plan_pass(g, CONV_FORWARD, sizeof(T), ws_nbytes, nthreads);
    if (pl.tile < 1 || (algo == CONV_ALGO_IM2COL && !ws)) return GM_ERR_ARG;
    const int64_t tile = pl.tile, ntile = ceil_div64(PQ, tile), units = N * G * ntile;
    const int64_t ldx = Cg == 1 ? PQ : g->xs[1];
    blas_single_begin(pl.nt);
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / (G * ntile), grp = u / ntile % G, s0 = u % ntile * tile, cnt = min64(tile, PQ - s0);
        T *o = out + (n * K + grp * Kg) * PQ + s0;
        /* The bias goes in first and the gemm adds onto it: no second pass over the output. */
        if (bias) FN(fill_rows)(o, bias + grp * Kg, Kg, cnt, PQ);
        const T *B = x + n * g->xs[0] + grp * Cg * g->xs[1] + s0;
        int64_t ldb = ldx;
        if (algo == CONV_ALGO_IM2COL) {
            T *col = ws + (int64_t)omp_get_thread_num() * tile * CRS;
            FN(im2col)(col, cnt, x, g, n, grp, s0, cnt, 0, CRS);
            B = col;
            ldb = cnt;
        }
        FN(gemm)(0, 0, Kg, cnt, CRS, 1, w + grp * Kg * CRS, CRS, B, ldb, bias ? 1 : 0, o, PQ);
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
        FN(depthwise_backward_data)(dx, dout, w, bias, g, nthreads);
        return GM_OK;
    }
    if (Kg == 0 || PQ == 0) { /* nothing flows back: dinp is the bias (or zeros) */
        for (int64_t n = 0; n < N; n++) FN(fill_rows)(dx + n * C * HW, bias, C, HW, HW);
        return GM_OK;
    }
    const conv_plan pl = plan_pass(g, CONV_BACKWARD_DATA, sizeof(T), ws_nbytes, nthreads);
    if (pl.tile < 1 || (algo == CONV_ALGO_IM2COL && !ws)) return GM_ERR_ARG;
    blas_single_begin(pl.nt);
    if (algo == CONV_ALGO_POINTWISE) { /* dinp[n, g] (Cg, HW) = w_g^T (Cg, Kg) @ dout[n, g] (Kg, HW), by columns */
        const int64_t tile = pl.tile, ntile = ceil_div64(PQ, tile), units = N * G * ntile;
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
        for (int64_t u = 0; u < units; u++) {
            const int64_t n = u / (G * ntile), grp = u / ntile % G, s0 = u % ntile * tile;
            const int64_t cnt = min64(tile, PQ - s0);
            T *d = dx + (n * C + grp * Cg) * HW + s0;
            if (bias) FN(fill_rows)(d, bias + grp * Cg, Cg, cnt, HW);
            FN(gemm)(1, 0, Cg, cnt, Kg, 1, w + grp * Kg * Cg, Cg, dout + (n * K + grp * Kg) * PQ + s0, PQ,
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
            FN(fill_rows)(dxg + c0 * HW, bias ? bias + grp * Cg + c0 : NULL, c1 - c0, HW, HW);
            for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
                const int64_t cnt = min64(tile, PQ - s0);
                FN(gemm)(1, 0, (c1 - c0) * RS, cnt, Kg, 1, w + grp * Kg * CRS + c0 * RS, CRS,
                         dout + (n * K + grp * Kg) * PQ + s0, PQ, 0, dcol, cnt);
                FN(col2im)(dxg + c0 * HW, dcol, g, c0, c1, s0, cnt);
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
        FN(depthwise_backward_weight)(dw, dout, x, g, nthreads);
        return GM_OK;
    }
    memset(dw, 0, (size_t)(K * CRS) * sizeof(T));
    if (N == 0 || PQ == 0) return GM_OK;
    if (!dout || !x) return GM_ERR_ARG;
    const conv_plan pl = plan_pass(g, CONV_BACKWARD_WEIGHT, sizeof(T), ws_nbytes, nthreads);
    if (pl.tile < 1 || (algo == CONV_ALGO_IM2COL && !ws)) return GM_ERR_ARG;
    /* dw_g (Kg, CRS) += dout tile (Kg, cnt) @ columns^T (cnt, CRS): thread t owns the dw columns [j0, j1), so it
     * builds only those rows of the (shared) column buffer and never waits for the others. The rows stay `tile`
     * apart even in a short last tile: a thread that is ahead then never writes into another's rows. */
    const int64_t tile = pl.tile, ldx = Cg == 1 ? PQ : g->xs[1];
    const int nt = pl.nt;
    blas_single_begin(nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int64_t t = omp_get_thread_num(), rows = algo == CONV_ALGO_IM2COL ? CRS : Cg;
        const int64_t j0 = rows * t / nt, j1 = rows * (t + 1) / nt;
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
                        FN(im2col)(ws, tile, x, g, n, grp, s0, cnt, j0, j1);
                        B = ws + j0 * tile;
                        ldb = tile;
                    }
                    FN(gemm)(0, 1, Kg, j1 - j0, cnt, 1, dg, PQ, B, ldb, 1, dw + grp * Kg * CRS + j0, CRS);
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

/* ---- linear ---------------------------------------------------------------------------------------------- */
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
    FN(gemm)(x.trans, !w.trans, M, Fo, Fi, 1, (const T *)x.p, x.ld, (const T *)w.p, w.ld, bias ? 1 : 0, out, Fo);
    return GM_OK;
}

static int FN(linear_backward)(T *dx, T *dw, T *db, conv_mat g, conv_mat x, conv_mat w, int64_t M, int64_t Fi,
                               int64_t Fo, int nthreads) {
    if (dx && M * Fi > 0) { /* dx (M, Fi) = g (M, Fo) @ w (Fo, Fi) */
        if (Fo == 0) memset(dx, 0, (size_t)(M * Fi) * sizeof(T));
        else FN(gemm)(g.trans, w.trans, M, Fi, Fo, 1, (const T *)g.p, g.ld, (const T *)w.p, w.ld, 0, dx, Fi);
    }
    if (dw && Fo * Fi > 0) { /* dw (Fo, Fi) = g^T (Fo, M) @ x (M, Fi) */
        if (M == 0) memset(dw, 0, (size_t)(Fo * Fi) * sizeof(T));
        else FN(gemm)(!g.trans, x.trans, Fo, Fi, M, 1, (const T *)g.p, g.ld, (const T *)x.p, x.ld, 0, dw, Fi);
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

#undef VEC
#undef VL
#undef T
#undef CAT_
#undef CAT
#undef FN

#endif
