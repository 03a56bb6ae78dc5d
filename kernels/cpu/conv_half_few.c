/* kernels/cpu/conv_half_few.c — the bfloat16 passes of one-group convolutions with few output positions in the
 * whole batch (N x P x Q <= FEW_COLS) on CPUs without bfloat16 products (no AVX512-BF16: conv_half_small.c's
 * route is theirs). Such layers are bound by the weight's bytes: ResNet-18's layer4 at 64x64 inputs and
 * micro-batch 2 has 8 positions against 2.4M weights per 3x3 convolution. The float16 route (conv_half.c) widened
 * the whole weight into the workspace (a pass), and multiplied it item by item (sgemm packing it again per item);
 * under autocast the weight was first cast to bfloat16 (another pass, twice per micro-batch). Here the columns of
 * every item are gathered once (positions j = (n, p, q)), and the weight is read once per pass, a block at a time:
 * widened (bfloat16) or rounded to bfloat16 (a float32 weight, conv_geom.wf32: autocast's parameters) into a
 * per-thread float32 block that sgemm multiplies while it is in cache.
 *   forward:         out[k, j] = sum over c of w[k, c] col[c, j]        blocks of FEW_ROWS rows of w
 *   input-gradient:  dcol[c, j] = sum over k of w[k, c] gk[k, j]        blocks of FEW_STRIP columns of w (all rows)
 *   weight-gradient: dw[k, c] = sum over j of gk[k, j] col[c, j]        blocks of FEW_ROWS rows, rounded as made
 * Each result is a float32 sum rounded once, as on the other routes. The workspace is conv_half_few_nbytes. */
#include "conv_internal.h"
#include "bf16_convert.h"
#include "gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

/* ResNet-18 at micro-batch 2, 64x64 inputs: layer4 has 8 positions, layer3 32, layer2 128 */
#define FEW_COLS 16
#define FEW_ROWS 32 /* forward and weight-gradient: a block of 32 rows of 4608 floats is 576 KiB */
#define FEW_STRIP 64 /* input-gradient: 64 columns of every row (512 rows: 128 KiB) */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Off under a forced route (GPUMEMNET_BF16_CONV, read per call as conv_half_small_use does). */
int conv_half_few_use(const conv_geom *g) {
    const char *e = getenv("GPUMEMNET_BF16_CONV");
    if (e && (strcmp(e, "gemm") == 0 || strcmp(e, "widen") == 0 || strcmp(e, "direct") == 0 ||
              strcmp(e, "amx") == 0))
        return 0;
    const int64_t J = g->N * g->P * g->Q, CRS = g->C * g->R * g->S;
    /* weight-bound: at least 64K elements, and few enough columns that the weight's bytes are the work */
    return g->G == 1 && J >= 1 && J <= FEW_COLS && g->K * CRS >= 65536 && !gemm_bf16_native();
}

/* Per-thread float32 block: the larger of the row blocks (forward, weight-gradient) and the column strips. */
static int64_t block_floats(const conv_geom *g, conv_pass pass) {
    const int64_t CRS = g->C * g->R * g->S;
    return pass == CONV_BACKWARD_DATA ? g->K * FEW_STRIP : FEW_ROWS * CRS;
}

static int few_threads(const conv_geom *g, conv_pass pass, int nthreads) {
    const int64_t CRS = g->C * g->R * g->S;
    const int64_t blocks = pass == CONV_BACKWARD_DATA ? (CRS + FEW_STRIP - 1) / FEW_STRIP : (g->K + FEW_ROWS - 1) / FEW_ROWS;
    return nthreads < 1 ? 1 : blocks < nthreads ? (int)blocks : nthreads;
}

/* The workspace, in order: the columns (CRS x J: col, or dcol for the input-gradient), the K x J float32 block
 * (the forward's output, or the widened grad_output), the input-gradient's float32 dx (N C H W, that pass only),
 * and one block per thread. few_layout places them from ws (NULL: none placed) and returns the bytes. */
typedef struct {
    float *cols, *kj, *dx32, *blocks;
    size_t per; /* floats from one thread's block to the next */
} few_ws;

static size_t few_layout(few_ws *L, const conv_geom *g, conv_pass pass, int nthreads, void *ws) {
    const int64_t J = g->N * g->P * g->Q, CRS = g->C * g->R * g->S;
    const size_t cols = align64((size_t)(CRS * J) * sizeof(float)), kj = align64((size_t)(g->K * J) * sizeof(float));
    const size_t dx = pass == CONV_BACKWARD_DATA ? align64((size_t)(g->N * g->C * g->H * g->W) * sizeof(float)) : 0;
    const size_t per = align64((size_t)block_floats(g, pass) * sizeof(float));
    if (ws) {
        char *p = ws;
        *L = (few_ws){(float *)p, (float *)(p + cols), (float *)(p + cols + kj), (float *)(p + cols + kj + dx),
                      per / sizeof(float)};
    }
    return cols + kj + dx + (size_t)few_threads(g, pass, nthreads) * per;
}

size_t conv_half_few_nbytes(const conv_geom *g, conv_pass pass, int nthreads) {
    return conv_half_few_use(g) ? few_layout(NULL, g, pass, nthreads, NULL) : 0;
}

/* Where position j = (n, p, q) reads the input: item n's offset and the top-left corner (h, w) of its window.
 * Computed once per position (J <= FEW_COLS), so that the loops over c x j divide nothing. */
typedef struct {
    int64_t off, h, w;
} few_pos;

static void positions(few_pos *pos, const conv_geom *g) {
    const int64_t PQ = g->P * g->Q, J = g->N * PQ;
    for (int64_t j = 0; j < J; j++) {
        const int64_t n = j / PQ, p = j % PQ / g->Q, q = j % g->Q;
        pos[j] = (few_pos){n * g->xs[0], p * g->sh - g->ph, q * g->sw - g->pw};
    }
}

/* col[c][j] (CRS x J, float32) = the columns of the bfloat16 input x. */
static void gather_cols_f32(float *col, const uint16_t *x, const conv_geom *g) {
    const int64_t J = g->N * g->P * g->Q;
    few_pos pos[FEW_COLS];
    positions(pos, g);
    float *d = col;
    for (int64_t ch = 0; ch < g->C; ch++)
        for (int64_t r = 0; r < g->R; r++)
            for (int64_t s = 0; s < g->S; s++, d += J) {
                const uint16_t *xc = x + ch * g->xs[1];
                for (int64_t j = 0; j < J; j++) {
                    const int64_t h = pos[j].h + r * g->dh, w = pos[j].w + s * g->dw;
                    d[j] = h < 0 || h >= g->H || w < 0 || w >= g->W
                               ? 0.0f
                               : gm_bf16_to_float(xc[pos[j].off + h * g->xs[2] + w * g->xs[3]]);
                }
            }
}

/* gk[k][j] (K x J) = the bfloat16 grad_output (N, K, P, Q) widened, positions j = (n, p, q). */
static void gather_grad(float *gk, const uint16_t *dout, const conv_geom *g) {
    const int64_t PQ = g->P * g->Q, J = g->N * PQ;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t k = 0; k < g->K; k++)
            for (int64_t i = 0; i < PQ; i++) gk[k * J + n * PQ + i] = gm_bf16_to_float(dout[(n * g->K + k) * PQ + i]);
}

/* n floats of the weight from element `at` (bfloat16, or float32 where g->wf32) as the pass's float32 operand. */
static void load_w(float *d, const void *w, int64_t at, int64_t n, const conv_geom *g) {
    if (g->wf32) gm_cvt_f32_to_bf16_f32(d, (const float *)w + at, n);
    else gm_cvt_bf16_to_f32(d, (const uint16_t *)w + at, n);
}

static float bias_at(const void *bias, int64_t i, const conv_geom *g) {
    return g->wf32 ? gm_bf16_to_float(gm_float_to_bf16(((const float *)bias)[i])) : gm_bf16_to_float(((const uint16_t *)bias)[i]);
}

int conv_half_few_forward(uint16_t *out, const uint16_t *x, const void *w, const void *bias, const conv_geom *g,
                          void *ws, int nthreads) {
    const int64_t PQ = g->P * g->Q, J = g->N * PQ, CRS = g->C * g->R * g->S, K = g->K;
    few_ws L;
    few_layout(&L, g, CONV_FORWARD, nthreads, ws);
    float *col = L.cols, *outf = L.kj, *blocks = L.blocks;
    const size_t per = L.per;
    gather_cols_f32(col, x, g);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < J; j++) outf[k * J + j] = bias ? bias_at(bias, k, g) : 0.0f;
    const int nt = few_threads(g, CONV_FORWARD, nthreads);
    blas_single_begin(nt);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t k0 = 0; k0 < K; k0 += FEW_ROWS) {
        const int64_t rb = min64(FEW_ROWS, K - k0);
        float *wb = blocks + (size_t)omp_get_thread_num() * per;
        load_w(wb, w, k0 * CRS, rb * CRS, g);
        conv_gemm_f32_whole(0, 0, rb, J, CRS, 1, wb, CRS, col, J, 1, outf + k0 * J, J);
    }
    blas_single_end(nt);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t i = 0; i < PQ; i++) out[(n * K + k) * PQ + i] = gm_float_to_bf16(outf[k * J + n * PQ + i]);
    return GM_OK;
}

int conv_half_few_backward_data(uint16_t *dx, const uint16_t *dout, const void *w, const void *bias,
                                const conv_geom *g, void *ws, int nthreads) {
    const int64_t PQ = g->P * g->Q, J = g->N * PQ, CRS = g->C * g->R * g->S, K = g->K, HW = g->H * g->W;
    few_ws L;
    few_layout(&L, g, CONV_BACKWARD_DATA, nthreads, ws);
    float *dcol = L.cols, *gk = L.kj, *dx32 = L.dx32, *blocks = L.blocks;
    const size_t per = L.per;
    gather_grad(gk, dout, g);
    const int nt = few_threads(g, CONV_BACKWARD_DATA, nthreads);
    blas_single_begin(nt);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t c0 = 0; c0 < CRS; c0 += FEW_STRIP) {
        const int64_t cw = min64(FEW_STRIP, CRS - c0);
        float *wb = blocks + (size_t)omp_get_thread_num() * per; /* (K, cw): w's columns [c0, c0 + cw) */
        for (int64_t k = 0; k < K; k++) load_w(wb + k * cw, w, k * CRS + c0, cw, g);
        conv_gemm_f32_whole(1, 0, cw, J, K, 1, wb, cw, gk, J, 0, dcol + c0 * J, J);
    }
    blas_single_end(nt);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t i = 0; i < HW; i++) dx32[(n * g->C + c) * HW + i] = bias ? bias_at(bias, c, g) : 0.0f;
    few_pos pos[FEW_COLS]; /* col2im: dx32 is contiguous, so item n starts at n C H W */
    const conv_geom flat = {.N = g->N, .P = g->P, .Q = g->Q, .sh = g->sh, .sw = g->sw, .ph = g->ph, .pw = g->pw,
                            .xs = {g->C * HW, HW, g->W, 1}};
    positions(pos, &flat);
    const float *sc = dcol;
    for (int64_t ch = 0; ch < g->C; ch++)
        for (int64_t r = 0; r < g->R; r++)
            for (int64_t s = 0; s < g->S; s++, sc += J) {
                float *dc = dx32 + ch * HW;
                for (int64_t j = 0; j < J; j++) {
                    const int64_t h = pos[j].h + r * g->dh, x = pos[j].w + s * g->dw;
                    if (h >= 0 && h < g->H && x >= 0 && x < g->W) dc[pos[j].off + h * g->W + x] += sc[j];
                }
            }
    gm_cvt_f32_to_bf16(dx, dx32, g->N * g->C * HW);
    return GM_OK;
}

int conv_half_few_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                  void *ws, int nthreads) {
    const int64_t J = g->N * g->P * g->Q, CRS = g->C * g->R * g->S, K = g->K;
    few_ws L;
    few_layout(&L, g, CONV_BACKWARD_WEIGHT, nthreads, ws);
    float *col = L.cols, *gk = L.kj, *blocks = L.blocks;
    const size_t per = L.per;
    gather_cols_f32(col, x, g);
    gather_grad(gk, dout, g);
    const int nt = few_threads(g, CONV_BACKWARD_WEIGHT, nthreads);
    blas_single_begin(nt);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t k0 = 0; k0 < K; k0 += FEW_ROWS) {
        const int64_t rb = min64(FEW_ROWS, K - k0);
        float *db = blocks + (size_t)omp_get_thread_num() * per;
        conv_gemm_f32_whole(0, 1, rb, CRS, J, 1, gk + k0 * J, J, col, J, 0, db, CRS);
        gm_cvt_f32_to_bf16(dw + k0 * CRS, db, rb * CRS);
    }
    blas_single_end(nt);
    return GM_OK;
}
