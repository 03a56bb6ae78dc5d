/* kernels/cpu/conv_plan.c — how a CPU convolution pass runs before it runs: the algorithm a geometry takes
 * (conv2d_algo), the tiles and threads a pass shares its work into for the workspace it is given (conv_plan,
 * hb_plan), the workspace bytes each pass asks for (conv2d_workspace_nbytes: csrc sizes its allocation with it, and
 * meta plans with it exactly as the CPU does), the OpenBLAS thread guard and the geometry's checks. */
#include "conv_internal.h"

#include <stdlib.h>

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


static int64_t tile_cap_of(const conv_geom *g, size_t col, size_t target) {
    int64_t cols = max64(CONV_TILE_MIN_COLS, col ? (int64_t)(target / col) : g->P * g->Q);
    return g->Q > 0 ? ceil_div64(cols, g->Q) * g->Q : cols;
}

conv_plan conv_plan_cols(const conv_geom *g, conv_pass pass, conv_algo algo, size_t col, size_t target, size_t budget,
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

/* A plan of whole items per tile (conv_plan.items) for the forward or input-gradient of an im2col geometry whose
 * item has at most half the output positions a tile wants (deep layers at the end of a network: 512->512 at 7x7
 * is 49 columns): one gemm over several items' columns instead of one short gemm per item, which repacked the
 * whole weight for every 49 columns (58 % of the sgemm ceiling, one thread; benchmarks/conv_gflops.py; a gemm of
 * 196 columns already ran at ~95 % of a long one, so 14x14 keeps its per-item tiles and workspace). The tile is
 * sized as the within-item one is (CONV_TILE_TARGET, at least CONV_TILE_MIN_COLS columns), counting the K/G
 * extra rows per column: the bound the within-item tiles already had, which a small image used to stay below.
 * The batches are balanced (8 items of 49 at two threads: 4 + 4, not 6 + 2) and there are at least as many
 * (batch, group) units as threads. items = 0 (not such a plan) when an item fills half a tile or more, there is
 * one item, or the budget cannot hold two items per thread: the within-item plan then runs. Planned again from
 * the bytes it asks for, it gives the same plan (the budget bound is applied last). */
static conv_plan plan_items(const conv_geom *g, size_t col, size_t budget, int nthreads) {
    const int64_t N = g->N, G = g->G, PQ = g->P * g->Q, CRS = g->C / G * g->R * g->S;
    const double macs = (double)N * (double)g->K * (double)PQ * (double)CRS;
    conv_plan p = {nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1, 0, 1, 0, 0};
    if (PQ == 0 || N < 2 || col == 0) return p;
    const int64_t want = max64(CONV_TILE_MIN_COLS, (int64_t)(CONV_TILE_TARGET / col));
    if (2 * PQ > want) return p; /* 14x14's 196 columns already ran near the peak (and kept their workspace) */
    int64_t batches = ceil_div64(N, min64(N, ceil_div64(want, PQ)));
    batches = ceil_div64(ceil_div64(batches * G, p.nt) * p.nt, G); /* units a multiple of the threads */
    int64_t nb = ceil_div64(N, min64(batches, N));
    nb = min64(nb, (int64_t)(budget / ((size_t)p.nt * (size_t)PQ * col)));
    if (nb < 2) return p;
    p.items = nb;
    p.tile = nb * PQ;
    p.slots = p.nt;
    return p;
}

/* Whether a pass may run tiles of whole items: the im2col forward and input-gradient of a deep layer, K/G >= 32
 * and C/G*R*S >= 512 (64 channels at 3x3), whose weight gemm repacks for every item. A shallow layer's weight
 * stays in cache, and its tile of items would be larger than its activations (a 16->32 3x3 layer at 8x8: 176
 * KiB against 96 KiB); ResNeXt's groups of 4 channels gained nothing either. Not the pointwise
 * gemm, which copies nothing: gathering a deep 1x1 layer's items (512->512 at 7x7, 256->1024 at 14x14) into
 * the workspace measured no faster there, and a pointwise pass keeps needing no workspace. */
static int items_allowed(const conv_geom *g, conv_pass pass, conv_algo algo) {
    return algo == CONV_ALGO_IM2COL && pass != CONV_BACKWARD_WEIGHT && g->K / g->G >= 32 &&
           g->C / g->G * g->R * g->S >= 512;
}

/* The weight-gradient's tiles of whole items (im2col, a deep layer on a map of at most half a tile: 512->512 at
 * 2x2 in ResNet-18 at 64x64): one gemm summing over nb items' positions instead of one per item, whose short
 * sums (4 positions) read and wrote the whole weight-gradient (9 MiB) once per item: 34 GFLOP/s on one thread.
 * One shared buffer (slots 1): the threads gather grad_output's rows and build their rows of the columns, then
 * each sums its columns of dW (conv.c, backward_weight_items). Planned again from its bytes, the same plan. */
static conv_plan plan_items_weight(const conv_geom *g, size_t col, size_t budget, int nthreads) {
    const int64_t N = g->N, PQ = g->P * g->Q;
    conv_plan p = conv_plan_cols(g, CONV_BACKWARD_WEIGHT, CONV_ALGO_IM2COL, col, CONV_TILE_TARGET, budget, nthreads);
    p.items = 0;
    if (PQ == 0 || N < 2 || col == 0) return p;
    const int64_t want = max64(CONV_TILE_MIN_COLS, (int64_t)(CONV_TILE_TARGET / col));
    if (2 * PQ > want) return p;
    const int64_t nb = min64(min64(N, want / PQ), (int64_t)(budget / ((size_t)PQ * col)));
    if (nb < 2) return p;
    p.items = nb;
    p.tile = nb * PQ;
    p.slots = 1;
    return p;
}

conv_plan conv_plan_pass(const conv_geom *g, conv_pass pass, size_t es, size_t budget, int nthreads) {
    const conv_algo algo = conv2d_algo(g, pass);
    if (pass == CONV_BACKWARD_WEIGHT && algo == CONV_ALGO_IM2COL && g->K / g->G >= 32 &&
        g->C / g->G * g->R * g->S >= 512) {
        conv_plan p = plan_items_weight(g, conv_item_col_nbytes(g, es), budget, nthreads);
        if (p.items) return p;
    }
    if (items_allowed(g, pass, algo)) {
        conv_plan p = plan_items(g, conv_item_col_nbytes(g, es), budget, nthreads);
        if (p.items) return p;
    }
    return conv_plan_cols(g, pass, algo, (size_t)((g->C / g->G) * g->R * g->S) * es, CONV_TILE_TARGET, budget,
                          nthreads);
}

#define CONV_HALF_MIN_ROWS 256

size_t conv_hb_plan_for(const conv_geom *g, conv_pass pass, size_t budget, int nthreads, hb_plan *hp) {
    const int64_t Cg = g->C / g->G, Kg = g->K / g->G, RS = g->R * g->S, CRS = Cg * RS, PQ = g->P * g->Q;
    const int64_t HW = g->H * g->W, NG = g->N * g->G;
    const double macs = (double)g->N * (double)g->K * (double)PQ * (double)CRS;
    int nt = nthreads > 1 && macs >= CONV_GEMM_GRAIN ? nthreads : 1;
    /* rows of columns a tile of CONV_TILE_MIN_COLS positions (or of the whole map, when smaller) may hold within
     * the target, beside grad_output's: a 2x2 map of 512 channels otherwise got blocks of one row or channel, and
     * one tiny product per row (ResNet-18's last stage at 64x64 spent seconds there) */
    const int64_t cols = max64(1, min64(PQ, CONV_TILE_MIN_COLS));
    /* and at least CONV_HALF_MIN_ROWS: with Kg >= 256 channels on a map of >= 256 positions (VGG's 256-channel
     * layers at 16x16) the target alone left one row, so one column per product, and grad_output was packed
     * again for every row (373 ms for the weight-gradient that float32 ran in 8) */
    const int64_t rows = max64(CONV_HALF_MIN_ROWS, (int64_t)(CONV_HALF_TILE_TARGET / sizeof(float)) / cols - Kg);
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

static size_t half_workspace_nbytes(const conv_geom *g, gm_dtype dt, conv_pass pass, size_t limit, int nthreads) {
    const int64_t CRS = g->C / g->G * g->R * g->S;
    if (conv2d_algo(g, pass) == CONV_ALGO_DEPTHWISE) return conv_depthwise_half_nbytes(g, pass, limit, nthreads);
    if (g->K == 0 || CRS == 0 || g->H * g->W == 0) return 0;
    if (g->P * g->Q > 0 && g->N > 0) { /* the small, AMX and direct routes (conv_half*.c) where they run and fit */
        const size_t sn = dt == GM_BF16 ? conv_half_small_nbytes(g, pass) : 0;
        if (sn && sn <= limit) return sn;
        const size_t fn = dt == GM_BF16 ? conv_half_few_nbytes(g, pass, nthreads) : 0;
        if (fn && fn <= limit) return fn;
        const size_t an = dt == GM_BF16 ? conv_half_amx_nbytes(g, pass, nthreads) : 0;
        if (an && an <= limit) return an;
        const size_t dn = conv_half_direct_nbytes(g, dt, pass, nthreads);
        if (dn && dn <= limit) return dn;
    }
    if (pass != CONV_FORWARD) {
        if (g->P * g->Q == 0 || g->N == 0) return 0;
        hb_plan p;
        size_t least = conv_hb_plan_for(g, pass, limit, nthreads, &p);
        return least ? least : hb_nbytes(&p);
    }
    if (g->P * g->Q == 0 || g->N == 0) return 0;
    const size_t fixed = half_fixed_nbytes(g), col = half_col_nbytes(g);
    if (limit < fixed + col) return fixed + col;
    conv_plan p = conv_plan_cols(g, pass, CONV_ALGO_IM2COL, col, CONV_HALF_TILE_TARGET, limit - fixed, nthreads);
    return fixed + (size_t)p.slots * (size_t)p.tile * col;
}

/* The direct kernel (conv_direct.c) where it applies and wins; see conv_internal.h. Its loops index a plane in
 * 32-bit lanes (p = j / W in float: exact below 2^21 positions) and keep the shifts of at most 64 taps; K/G and
 * C/G at least 8 (its block of output channels; below that im2col wastes less). Where it wins (one thread,
 * against im2col + OpenBLAS, benchmarks/conv_gflops.py): the forward and input-gradient when vectors of 16
 * positions fill the plane to 90 % or more (7x7 = 49 of 64 lanes lost to a deep layer's im2col, 512->512 at
 * 102 against 133 GFLOP/s; 14x14 = 196 of 208 broke even at 256 channels; 8x8, 28x28, 64x64 won by 1.2-2x);
 * the weight-gradient up to 64x64 channels (2x at 16 and 32 channels, even at 64; at 128 and more its
 * per-channel-pair lane sums and re-reads of grad_output lost to the gemm: 113 against 134 at 28x28). At stride
 * 2 the forward and input-gradient, over the phases of the input or its gradient: 7x7/2 64->64 at 56x56 159
 * and 156 against 109 and 95, 3x3/2 64->128 137 and 132 against 122 and 117, 3x3/2 128->256 at 28x28 even (its
 * 14x14 output). The CPU check runs once. */
int conv_direct_use(const conv_geom *g, conv_pass pass) {
    static int avx512 = -1;
    if (avx512 < 0) avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
    if (!avx512) return 0;
    const int64_t Cg = g->C / g->G, Kg = g->K / g->G, RS = g->R * g->S, HW = g->H * g->W, PQ = g->P * g->Q;
    if (RS < 2 || RS > 64 || HW >= (1 << 21) || Cg < 8 || Kg < 8 || 10 * PQ < 9 * 16 * ceil_div64(PQ, 16)) return 0;
    if (g->sh == 2 && g->sw == 2) /* the forward over the input's four phases, each at most the output's size */
        return pass != CONV_BACKWARD_WEIGHT && (g->H + 1) / 2 <= g->P && (g->W + 1) / 2 <= g->Q;
    if (g->sh != 1 || g->sw != 1 || g->P != g->H || g->Q != g->W) return 0;
    if (pass != CONV_BACKWARD_DATA && !planes_contiguous(g)) return 0;
    if (pass == CONV_BACKWARD_WEIGHT) return RS == 9 && Cg * Kg <= 64 * 64;
    return 1;
}

/* Winograd F(2x2, 3x3) (conv_winograd.c) where it applies: see there for the measurements behind the choice.
 * GPUMEMNET_CONV_WINOGRAD=0 turns it off, =1 on wherever it applies (tests, benchmarks); read on every call, so
 * a test can switch it (meta and the CPU plan alike). */
int conv_winograd_use(const conv_geom *g, conv_pass pass, int nthreads) {
    static int avx512 = -1;
    if (avx512 < 0) avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
    if (!avx512 || pass == CONV_BACKWARD_WEIGHT) return 0;
    if (g->R != 3 || g->S != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->G != 1) return 0;
    if (g->C < 64 || g->K < 64 || g->K * g->C * 9 > INT_MAX) return 0;
    if (pass == CONV_FORWARD ? g->W > 1 && g->xs[3] != 1 : g->ph > 2 || g->pw > 2) return 0;
    const char *env = getenv("GPUMEMNET_CONV_WINOGRAD");
    if (env && (env[0] == '0' || env[0] == '1')) return env[0] == '1';
    (void)nthreads; /* the threads share the tiles and the weight's transform alike: the same rule */
    /* The output tiles (2x2) and what they waste on an odd edge: at least 8 outputs in 3 tiles (7x7: 49 in 16,
     * 5x5: 25 in 9; not 3x3, 9 in 4, nor 1x1). The transformed weight (16/9 of the weight, written every call)
     * is paid back over the tiles: 64 or more up to 256x256 channels, 128 or more beyond, where the weight comes
     * from DRAM. Against the direct/im2col path (one thread, CPU time, paired rounds; forward / input-gradient):
     * 64 tiles: 64->64 at 8x8 1.07 / 1.08x, 256->256 at 7x7 1.24 / 1.18x, at 4x4 1.32 / 1.21x; 16 tiles:
     * 256->256 at 4x4 1.27 / 0.98x; 512->512 at 7x7: 32 tiles 1.10 / 0.61x, 64 tiles 1.06 / 0.75x, 128 tiles
     * 1.33 / 1.05x; 4 tiles (batch 4 at 2x2, ResNet-18's last stage at 64x64) 0.4 / 0.3x. */
    const int64_t P = pass == CONV_FORWARD ? g->P : g->H, Q = pass == CONV_FORWARD ? g->Q : g->W;
    const int64_t tiles = g->N * ((P + 1) / 2) * ((Q + 1) / 2);
    if (3 * g->N * P * Q < 8 * tiles) return 0;
    return tiles >= (g->C * g->K <= 256 * 256 ? 64 : 128);
}

size_t conv2d_workspace_nbytes(const conv_geom *g, gm_dtype dt, conv_pass pass, size_t limit, int nthreads) {
    if (dt == GM_F32 && pass != CONV_BACKWARD_WEIGHT && conv_winograd_use(g, pass, nthreads) && g->N > 0 &&
        conv_winograd_ws_nbytes(g, pass, nthreads) <= limit) {
        if (pass == CONV_FORWARD ? g->K * g->P * g->Q == 0 : g->C * g->H * g->W * g->P * g->Q == 0) return 0;
        return conv_winograd_ws_nbytes(g, pass, nthreads);
    }
    if (is_half(dt)) return half_workspace_nbytes(g, dt, pass, limit, nthreads);
    if (dt == GM_F32 && pass == CONV_BACKWARD_WEIGHT && conv_wgrad_use(g) && conv_wgrad_fits(g, limit) &&
        g->K * g->C * g->R * g->S * g->P * g->Q > 0)
        return conv_wgrad_ws_nbytes(g, limit); /* conv_wgrad.c */
    if (dt == GM_F32 && pass == CONV_BACKWARD_WEIGHT && conv_direct_use(g, pass)) return 0;
    if (dt == GM_F32 && conv_direct_use(g, pass) && g->N > 0 && conv_direct_ws_nbytes_threads(g, pass, nthreads) <= limit) {
        if (pass == CONV_FORWARD ? g->K * g->P * g->Q == 0 : g->C * g->H * g->W == 0) return 0;
        return conv_direct_ws_nbytes_threads(g, pass, nthreads);
    }
    if (conv2d_algo(g, pass) != CONV_ALGO_IM2COL) return 0;
    size_t col = conv2d_column_nbytes(g, dt);
    if (col == 0 || g->P * g->Q == 0 || g->N == 0 || g->K == 0) return 0;
    if (col > limit) return col;
    conv_plan p = conv_plan_pass(g, pass, gm_dtype_size(dt), limit, nthreads);
    return (size_t)p.slots * (size_t)p.tile * (p.items ? conv_item_col_nbytes(g, gm_dtype_size(dt)) : col);
}

int conv_check_geom(const conv_geom *g) {
    if (!g || g->N < 0 || g->C < 0 || g->H < 0 || g->W < 0 || g->K < 0 || g->R < 1 || g->S < 1 || g->P < 0 ||
        g->Q < 0 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0 || g->G < 1 ||
        g->C % g->G || g->K % g->G)
        return GM_ERR_ARG;
    int64_t CRS = g->C / g->G * g->R * g->S;
    if (CRS > INT_MAX || g->K > INT_MAX || g->P * g->Q > INT_MAX || g->H * g->W > INT_MAX) return GM_ERR_UNSUPPORTED;
    return GM_OK;
}
