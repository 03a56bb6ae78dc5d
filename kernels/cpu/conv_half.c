/* kernels/cpu/conv_half.c — the float16/bfloat16 passes of conv2d (not depthwise): storage in half precision,
 * arithmetic in float32, each result rounded once. Inputs are widened tile by tile as they are gathered and
 * results rounded a tile (forward), a block of planes (input-gradient) or once (weight-gradient) at a time, so the
 * workspace holds the widened weight (or the float32 weight-gradient) and per-thread float32 tiles, never a
 * float32 copy of an activation (hb_plan in conv_internal.h). conv.c dispatches to them; depthwise geometries go
 * on to conv_depthwise.c's half passes.
 * The gemms sum K in one piece (conv_gemm_f32_whole), not in float32's chunks (conv_internal.h): a result rounded
 * to half precision (2^-8 or 2^-11) gains nothing from a float32 sum 1e-7 nearer float64. */
#include "conv_internal.h"
#include "bf16_convert.h"
#include "gemm_bf16.h"

#include <stdint.h> /* SIZE_MAX */
#include <stdlib.h>

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
        gm_cvt_bf16_to_f32(d, x, n);
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
static __attribute__((noinline)) void round_rows_h(uint16_t *dst, int64_t ld, const float *src, int64_t n, int64_t len,
                                                   gm_dtype dt) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t *d = dst + i * ld;
        const float *sp = src + i * len;
        if (dt == GM_F16) {
            for (int64_t j = 0; j < len; j++) d[j] = gm_float_to_half(sp[j]);
        } else {
            gm_cvt_f32_to_bf16(d, sp, len);
        }
    }
}

/* A whole weight (or weight-gradient) of n contiguous elements widened (round 0) or rounded (round 1), shared
 * among nt threads: ResNet-18's layer4 weights have 2.4M elements, converted on every pass. */
#define CONVERT_GRAIN 65536
static void convert_all(float *f, uint16_t *h, int64_t n, int round, gm_dtype dt, int nt) {
    const int64_t parts = n >= 2 * CONVERT_GRAIN && nt > 1 ? nt : 1;
#pragma omp parallel for num_threads(parts) if (parts > 1) schedule(static)
    for (int64_t t = 0; t < parts; t++) {
        const int64_t a = n * t / parts, b = n * (t + 1) / parts;
        if (round) round_rows_h(h + a, 0, f + a, 1, b - a, dt);
        else load_run_h(f + a, h + a, 1, b - a, dt);
    }
}

/* ---- bfloat16 on bfloat16 products (gemm_bf16.h): the operands stay bfloat16, only sums are float32 ------------
 * The same units and workspace as the float16 passes (the plans do not change, so meta's bytes stay the CPU's),
 * of which these use less: columns are gathered as bfloat16 into the float32 column buffer's first half. */

/* im2col_h's columns, kept bfloat16 (a copy, no widening). */
static void im2col_b(uint16_t *col, int64_t ld, const uint16_t *x, const conv_geom *g, int64_t n, int64_t grp,
                     int64_t s0, int64_t cnt, int64_t j0, int64_t j1) {
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
            uint16_t *d = col + (row - j0) * ld + (pos - s0) - q0;
            if (h < 0 || h >= g->H) {
                memset(d + q0, 0, (size_t)(q1 - q0) * 2);
            } else {
                const int64_t a = min64(max64(qa, q0), q1), b = min64(max64(qb, a), q1), st = g->sw * xs3;
                const uint16_t *src = xc + h * xs2 + (a * g->sw + off) * xs3;
                memset(d + q0, 0, (size_t)(a - q0) * 2);
                if (st == 1) memcpy(d + a, src, (size_t)(b - a) * 2);
                else for (int64_t q = a; q < b; q++) d[q] = src[(q - a) * st];
                memset(d + b, 0, (size_t)(q1 - b) * 2);
            }
            pos += q1 - q0;
        }
    }
}

/* A 1x1, stride-1, unpadded convolution over a contiguous image reads its columns straight from the input. */
static int direct_cols(const conv_geom *g) {
    return g->R == 1 && g->S == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->xs[3] == 1 &&
           g->xs[2] == g->W;
}

/* Which bfloat16 passes run on gemm_bf16 (bfloat16 operands, float32 sums) rather than the float16 route (widened
 * tiles, sgemm), of those the AMX route (conv_half_amx.c: stride 1, one group, on a CPU with AMX; asked after the
 * small route, before the direct route) leaves: strided, dilated and grouped convolutions, CPUs without AMX.
 * Both round each result once from float32 sums, so they differ only by the order of the sums (the same results
 * but for rare ties: a few in 10^4 elements of ResNet-18's layer4 shapes). GPUMEMNET_BF16_CONV=gemm
 * puts every pass on gemm_bf16 and =widen none (the tests run both); otherwise the rule below, measured per pass
 * with both routes interleaved in one process (best of 11, 2 threads, AMX; widened -> gemm_bf16, ms):
 *   shape (N, C -> K, map)          forward           input-gradient    weight-gradient
 *   ResNet-18 l1 (2, 64 -> 64, 16)  0.41 -> 0.31      0.43 -> 0.36      0.46 -> 0.31
 *   ResNet-18 l3 (2, 256 -> 256, 4) 0.69 -> 0.50      0.59 -> 0.72      0.59 -> 0.73
 *   ResNet-18 l4 (2, 512 -> 512, 2) 1.99 -> 1.91      2.21 -> 2.81      1.86 -> 2.22
 *   UNet (16, 3 -> 16, 64)          0.77 -> 1.43      0.83 -> 0.91      0.90 -> 3.96
 *   UNet (16, 16 -> 16, 64)         6.66 -> 7.67      9.19 -> 7.62      7.50 -> 12.19
 *   UNet (16, 32 -> 32, 32)         6.23 -> 5.05      7.85 -> 7.96      8.37 -> 4.89
 *   UNet (16, 64 -> 64, 16)         7.85 -> 3.96      3.49 -> 3.06      5.99 -> 2.69
 *   UNet (16, 16 -> 3, 64) 1x1      0.30 -> 0.72      0.52 -> 0.54      0.28 -> 1.97
 * Rows are padded to 32 by the tile unit: the forward's and the weight-gradient's are the group's output channels,
 * the input-gradient's its input channels x R x S; with fewer gemm_bf16 loses. Columns are output positions
 * (padded to 32 too), and the input-gradient transposes the weight once per call: on small maps (ResNet-18's
 * layer3 and 4) the float16 route wins. benchmarks/bf16_conv_routes.py measures the table again. Off the native
 * product the float16 route is always taken. */
#define BF16_GEMM_MIN_ROWS 32
#define BF16_GEMM_MIN_POSITIONS_FWD 32
#define BF16_GEMM_MIN_POSITIONS 64
/* On AMX, since gemm_bf16's AMX kernel was reworked, the input-gradient wins from 16 positions and the forward at
 * any (the stride-1 layers of larger maps take conv_half_amx.c first; conv_half_small_use has the forward's
 * measurements at 2x2): ResNet-18's 3x3/2 128 -> 256 at batch 2 (a 4x4 output; 1 thread, CPU time, median of 7)
 * 0.15 and 0.22 ms against 0.33 and 0.26 on the float16 route, its weight-gradient 0.29 against 0.26 (so that
 * stays at 64); 1x1/2 128 -> 256 0.02 against 0.03. */
#define BF16_GEMM_MIN_POSITIONS_AMX 16
/* 0: the rule, 1: always, 2: never (and neither forced route takes the direct route below), 3: the direct route
 * wherever it applies, else the rule. Read on every call (a getenv is ~0.1 us beside a convolution's >= 10 us), so
 * that a benchmark can switch routes between calls in one process and compare them interleaved. The rule now
 * takes the direct route wherever it applies too (half_direct_route), so 3 acts as 0. */
static int bf16_conv_env(void) {
    const char *e = getenv("GPUMEMNET_BF16_CONV");
    return !e ? 0 : strcmp(e, "gemm") == 0 ? 1 : strcmp(e, "widen") == 0 ? 2 : strcmp(e, "direct") == 0 ? 3 : 0;
}

static int bf16_on_gemm(const conv_geom *g, conv_pass pass) {
    const int mode = bf16_conv_env();
    if (mode == 1 || mode == 2) return mode == 1;
    /* The table above is AMX's. On an Intel CPU with AVX512-BF16 and no AMX (2 threads, ms forward / input-gradient
     * / weight-gradient, products against the direct route) VGG-11's 128 -> 256 at 16x16 took 2.38 2.49 2.56
     * against 1.35 1.32 1.66, 256 -> 256 at 16x16 4.58 4.81 4.86 against 2.25 2.24 2.82 (gemm_bf16.h: half the
     * rate of float32 FMAs there). */
    if (!gemm_bf16_amx()) return 0;
    const int64_t Kg = g->K / g->G, PQ = g->P * g->Q;
    switch (pass) {
    case CONV_FORWARD: /* on AMX at any map: see conv_half_small_use */
        return Kg >= BF16_GEMM_MIN_ROWS && (conv_half_amx_usable() || PQ >= BF16_GEMM_MIN_POSITIONS_FWD);
    case CONV_BACKWARD_DATA:
        return g->C / g->G * g->R * g->S >= BF16_GEMM_MIN_ROWS &&
               PQ >= (conv_half_amx_usable() ? BF16_GEMM_MIN_POSITIONS_AMX : BF16_GEMM_MIN_POSITIONS);
    default: return Kg >= BF16_GEMM_MIN_ROWS && PQ >= BF16_GEMM_MIN_POSITIONS;
    }
}

/* The weight (n elements) and bias (nb, or none) as a pass's float32 operands w32 and b32: widened from dt, or,
 * where they are stored as float32 (g->wf32: autocast's parameters, which then need no bfloat16 copy), rounded to
 * bfloat16 and widened back: the same operands bit for bit, one pass over float32 instead of a cast to bfloat16
 * (a pass) and its widening (another). */
static void load_weight(float *w32, float *b32, const void *w, const void *bias, int64_t n, int64_t nb,
                        const conv_geom *g, gm_dtype dt, int nt) {
    if (!g->wf32) {
        convert_all(w32, (uint16_t *)w, n, 0, dt, nt);
        if (bias) load_run_h(b32, bias, 1, nb, dt);
        return;
    }
    const float *wf = w;
    const int64_t parts = n >= 2 * CONVERT_GRAIN && nt > 1 ? nt : 1;
#pragma omp parallel for num_threads(parts) if (parts > 1) schedule(static)
    for (int64_t t = 0; t < parts; t++) {
        const int64_t a = n * t / parts, b = n * (t + 1) / parts;
        gm_cvt_f32_to_bf16_f32(w32 + a, wf + a, b - a);
    }
    if (bias) gm_cvt_f32_to_bf16_f32(b32, bias, nb);
}

/* Whether the bfloat16 passes of a one-group convolution can read a float32 weight and bias (g->wf32): every
 * route they take on this CPU widens the weight (load_weight). The routes on bfloat16 products (small, AMX,
 * gemm_bf16) read it as bfloat16 and run where the CPU multiplies bfloat16 (gemm_bf16_native), or under
 * GPUMEMNET_BF16_CONV=gemm; there autocast casts the weight as before. */
int conv_half_reads_f32_weight(void) { return !gemm_bf16_native() && bf16_conv_env() != 1; }

/* ---- the direct route: float32 direct kernels (conv_direct.c) on widened groups of items ---------------------
 * Where the float32 passes take the direct kernel (stride-1 same-size or stride-2 3x3 layers of few channels on
 * large maps: the UNet's 16 to 64 channels at 64x64 to 16x16) a pass alone beat both half routes by 2-5x under
 * load (im2col of 9 rows per channel, products of 16 to 64 rows; benchmarks/bf16_conv_routes.py), and the
 * UNet's whole autocast step too (half_direct_route): the passes widen a group of items' input (and grad_output)
 * to float32, run the float32 kernel (direct, Winograd or conv_wgrad.c's) on the group as a batch and round its
 * result once, as the other routes round their float32 sums. The group's float32 copies (about
 * HALF_DIRECT_TARGET bytes, at least one item; 4 MiB measured no faster in the UNet's step) are the workspace's,
 * with the widened weight (forward, input-gradient) or the float32 weight-gradient and one group's
 * (weight-gradient) and the kernel's own workspace: conv_half_direct_nbytes. */
#define HALF_DIRECT_TARGET ((size_t)1 << 20)

/* The geometry of one group of nb contiguous float32 items. */
static conv_geom half_direct_geom(const conv_geom *g, int64_t nb) {
    conv_geom c = *g;
    c.N = nb;
    c.xs[0] = g->C * g->H * g->W;
    c.xs[1] = g->H * g->W;
    c.xs[2] = g->W;
    c.xs[3] = 1;
    return c;
}

/* Which passes: wherever the float32 direct kernel applies (conv_direct_use, on the widened copy's layout), but
 * under a forced product route (GPUMEMNET_BF16_CONV=gemm or =widen); =direct is the rule. An earlier measurement
 * (before the float32 direct kernels were reworked) had the route losing the UNet's whole autocast step (151 ms
 * against 139 ms), so it was left to =direct. Measured again on the UNet's layers (batch 16; CPU time, 1
 * thread, median of 5, interleaved; ms forward / input-gradient / weight-gradient, direct against the former
 * rule): 16 -> 16 at 64x64 2.48 2.34 3.23 against 5.14 5.19 6.21, 32 -> 32 at 32x32 2.26 2.20 2.99 against
 * 3.00 4.12 2.62, 64 -> 64 at 16x16 2.14 2.07 2.77 against 2.56 2.85 2.46, 32 -> 16 at 64x64 5.00 4.93 6.68
 * against 8.24 9.45 7.70; over all the UNet's 3x3 layers 29.4 29.1 38.6 against about 42 48 42 (float32 26.4
 * 26.4 29.5); the whole autocast step (2 threads, 11 paired rounds under load) 160 ms against 206 (0.78x). But
 * the weight-gradient stays on bfloat16 products where those take it (bf16_on_gemm: 32 or more output channels). */
static int64_t half_direct_items(const conv_geom *g);

/* Whether the weight-gradient's groups run the float32 outer-product kernel (conv_wgrad.c), as the float32 pass
 * does where it applies: every group (the last one may hold fewer items) must fit it within its own workspace
 * (conv_wgrad_ws_nbytes of a whole group). On the UNet's layers (1 thread, CPU time, ms) the float32 pass took
 * 1.64 at 128 -> 128 on 8x8, 3.25 at 128 -> 64 on 16x16, 1.66 at 64 -> 64 on 16x16 against bfloat16 products'
 * 2.89, 4.95 and 2.50. */
static int half_wgrad_kernel(const conv_geom *g) {
    const int64_t nb = half_direct_items(g), last = g->N - (g->N - 1) / nb * nb;
    const conv_geom c = half_direct_geom(g, nb), l = half_direct_geom(g, last);
    return g->N > 0 && g->K * g->C * g->R * g->S * g->P * g->Q > 0 && conv_wgrad_use(&c) &&
           conv_wgrad_fits(&c, SIZE_MAX) && conv_wgrad_fits(&l, SIZE_MAX);
}

static int half_direct_route(const conv_geom *g, gm_dtype dt, conv_pass pass) {
    const int mode = bf16_conv_env();
    if (mode == 1 || mode == 2) return 0;
    /* beyond 128 channels either way bfloat16 products (the tile unit) won: VGG-11's layers at batch 2 (1
     * thread, ms forward / input-gradient / weight-gradient, products against this route): 256 -> 512 at 8x8
     * 1.30 1.91 2.20 against 5.18 3.05 3.20, 512 -> 512 at 8x8 3.13 8.03 4.82 against 9.51 10.33 9.50, 128 -> 256
     * at 16x16 1.20 1.31 1.30 against 1.40 1.42 1.98 */
    if (mode == 0 && dt == GM_BF16 && gemm_bf16_amx() && (g->C / g->G > 128 || g->K / g->G > 128)) return 0;
    /* strided layers (the stride-1 ones take conv_half_amx.c) on AMX: gemm_bf16's AMX kernel (since its rework)
     * beat this route where bf16_on_gemm takes products (1 thread, CPU time, median of 7, ms forward /
     * input-gradient / weight-gradient, products against this route): the UNet's 2x2/2 transposed convolutions
     * (as conv2d: batch 16, 64 -> 128 on 16x16) 0.44 0.42 0.46 against 0.65 0.61 0.56, (32 -> 64 on 32x32) 0.51
     * 0.56 0.49 against 0.69 0.65 0.53, (16 -> 32 on 64x64) 0.84 0.94 0.73 against 0.84 0.92 0.75; ResNet-18's
     * 3x3/2 at batch 2, 64 -> 128 on 16x16 0.12 0.13 0.13 against 0.18 0.16 0.14, 128 -> 256 on 8x8 0.14 0.22
     * (weight-gradient on the float16 route: 0.26) against 0.32 0.31 */
    if (mode == 0 && dt == GM_BF16 && (g->sh > 1 || g->sw > 1) && conv_half_amx_usable()) return 0;
    if (pass == CONV_BACKWARD_WEIGHT && half_wgrad_kernel(g)) return 1;
    /* the weight-gradient of 32 or more output channels ran faster on bfloat16 products (2.62 against 2.99 ms at
     * 32 -> 32 on 32x32, 2.46 against 2.77 at 64 -> 64 on 16x16, 5.30 against 6.30 at 64 -> 32 on 32x32) */
    if (mode == 0 && dt == GM_BF16 && pass == CONV_BACKWARD_WEIGHT && bf16_on_gemm(g, pass)) return 0;
    /* on the widened copy's contiguous layout, so that the route and its bytes do not depend on the input's
     * strides (meta plans from shapes) */
    const conv_geom c = half_direct_geom(g, g->N);
    return conv_direct_use(&c, pass);
}

/* Items per group: the group's float32 input and output (or input and grad_output) within HALF_DIRECT_TARGET,
 * and at most half the batch, so that the copies never outweigh the half-precision tensors they widen (a whole
 * batch of a small layer fit the target: the digits CNN's 16 -> 32 at 4x4, batch 64, widened all 64 items and
 * set its autocast step's peak, 0.60 MiB against PyTorch's 0.69). */
static int64_t half_direct_items(const conv_geom *g) {
    const size_t item = (size_t)(g->C * g->H * g->W + g->K * g->P * g->Q) * sizeof(float);
    const int64_t half = (g->N + 1) / 2;
    return max64(1, min64(half, (int64_t)(HALF_DIRECT_TARGET / (item ? item : 1))));
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* One item of the input (at p, with g's strides) widened to C contiguous planes. */
static void widen_item(float *d, const uint16_t *p, const conv_geom *g, gm_dtype dt, int nthreads) {
    const int64_t HW = g->H * g->W;
    if (g->xs[3] == 1 && g->xs[2] == g->W && g->xs[1] == HW) {
        convert_all(d, (uint16_t *)p, g->C * HW, 0, dt, nthreads);
        return;
    }
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t h = 0; h < g->H; h++)
            load_run_h(d + c * HW + h * g->W, p + c * g->xs[1] + h * g->xs[2], g->xs[3], g->W, dt);
}

/* The forward and input-gradient of a group (c: a whole group's geometry) run Winograd where the float32 passes
 * would (conv_winograd_use: 64 or more channels each way; float32 then beat the direct kernel on the UNet's
 * 64 -> 64 at 16x16, 1.34 against 1.94 ms, and 128 -> 64 at 16x16, 2.70 against 3.85), else the direct kernel:
 * the kernel's workspace is the larger of the two, so that a smaller last group whose Winograd plan would not fit
 * takes the direct kernel. */
static size_t half_kernel_nbytes(const conv_geom *c, conv_pass pass, int nthreads) {
    const size_t d = conv_direct_ws_nbytes(c, pass);
    if (!conv_winograd_use(c, pass, nthreads)) return d;
    const size_t w = conv_winograd_ws_nbytes(c, pass, nthreads);
    return w > d ? w : d;
}

size_t conv_half_direct_nbytes(const conv_geom *g, gm_dtype dt, conv_pass pass, int nthreads) {
    if (g->N < 1 || !half_direct_route(g, dt, pass)) return 0;
    const int64_t nb = half_direct_items(g), KCRS = g->K * (g->C / g->G) * g->R * g->S;
    const conv_geom c = half_direct_geom(g, nb);
    const size_t items = (size_t)nb * (size_t)(g->C * g->H * g->W + g->K * g->P * g->Q) * sizeof(float);
    if (pass == CONV_BACKWARD_WEIGHT)
        return align64((size_t)(2 * KCRS) * sizeof(float)) + align64(items) +
               (half_wgrad_kernel(g) ? conv_wgrad_ws_nbytes(&c, SIZE_MAX) : 0);
    return align64((size_t)(KCRS + max64(g->K, g->C)) * sizeof(float)) +
           align64(half_kernel_nbytes(&c, pass, nthreads)) + items;
}

/* The forward or input-gradient on the direct route: in (the input, or grad_output) widened a group at a time. */
static void half_direct_pass(uint16_t *out, const uint16_t *in, const uint16_t *w,
                             const uint16_t *bias, const conv_geom *g, conv_pass pass, gm_dtype dt, void *ws,
                             int nthreads) {
    const int fwd = pass == CONV_FORWARD;
    const int64_t nb = half_direct_items(g), KCRS = g->K * (g->C / g->G) * g->R * g->S;
    const int64_t inn = fwd ? g->C * g->H * g->W : g->K * g->P * g->Q;
    const int64_t outn = fwd ? g->K * g->P * g->Q : g->C * g->H * g->W, nbias = fwd ? g->K : g->C;
    const conv_geom c = half_direct_geom(g, nb);
    float *w32 = ws, *b32 = w32 + KCRS;
    float *pk = (float *)((char *)ws + align64((size_t)(KCRS + max64(g->K, g->C)) * sizeof(float)));
    const size_t kn = half_kernel_nbytes(&c, pass, nthreads);
    const int wino = conv_winograd_use(&c, pass, nthreads);
    float *in32 = (float *)((char *)pk + align64(kn)), *out32 = in32 + nb * inn;
    load_weight(w32, b32, w, bias, KCRS, nbias, g, dt, nthreads);
    for (int64_t n0 = 0; n0 < g->N; n0 += nb) {
        conv_geom cg = half_direct_geom(g, min64(nb, g->N - n0));
        for (int64_t i = 0; i < cg.N; i++) {
            if (fwd) widen_item(in32 + i * inn, in + (n0 + i) * g->xs[0], g, dt, nthreads);
            else convert_all(in32 + i * inn, (uint16_t *)in + (n0 + i) * inn, inn, 0, dt, nthreads);
        }
        if (wino && conv_winograd_ws_nbytes(&cg, pass, nthreads) <= kn) {
            if (fwd) conv_winograd_forward(out32, in32, w32, bias ? b32 : NULL, &cg, pk, nthreads);
            else conv_winograd_backward_data(out32, in32, w32, bias ? b32 : NULL, &cg, pk, nthreads);
        } else if (fwd) {
            conv_direct_forward(out32, in32, w32, bias ? b32 : NULL, &cg, pk, nthreads);
        } else {
            conv_direct_backward_data(out32, in32, w32, bias ? b32 : NULL, &cg, pk, nthreads);
        }
        convert_all(out32, out + n0 * outn, cg.N * outn, 1, dt, nthreads);
    }
}

/* The weight-gradient on the direct route: each group's float32 weight-gradient added to the total, rounded once. */
static void half_direct_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g, gm_dtype dt,
                               void *ws, int nthreads) {
    const int64_t nb = half_direct_items(g), KCRS = g->K * (g->C / g->G) * g->R * g->S;
    const int64_t xn = g->C * g->H * g->W, gn = g->K * g->P * g->Q;
    float *sum = ws, *part = sum + KCRS;
    float *x32 = (float *)((char *)ws + align64((size_t)(2 * KCRS) * sizeof(float))), *g32 = x32 + nb * xn;
    const int wg = half_wgrad_kernel(g);
    const conv_geom c = half_direct_geom(g, nb);
    const size_t wn = wg ? conv_wgrad_ws_nbytes(&c, SIZE_MAX) : 0;
    float *wws = (float *)((char *)x32 + align64((size_t)nb * (size_t)(xn + gn) * sizeof(float)));
    memset(sum, 0, (size_t)KCRS * sizeof(float));
    for (int64_t n0 = 0; n0 < g->N; n0 += nb) {
        conv_geom cg = half_direct_geom(g, min64(nb, g->N - n0));
        for (int64_t i = 0; i < cg.N; i++) widen_item(x32 + i * xn, x + (n0 + i) * g->xs[0], g, dt, nthreads);
        convert_all(g32, (uint16_t *)dout + n0 * gn, cg.N * gn, 0, dt, nthreads);
        if (wg) conv_wgrad_backward_weight(part, g32, x32, &cg, wws, wn, nthreads);
        else conv_direct_backward_weight(part, g32, x32, &cg, nthreads);
        for (int64_t i = 0; i < KCRS; i++) sum[i] += part[i];
    }
    convert_all(sum, dw, KCRS, 1, dt, nthreads);
}

static int conv2d_forward_bf16(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                               const conv_geom *g, const conv_plan *pl, float *bufs) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q, tile = pl->tile, ntile = ceil_div64(PQ, tile), units = N * G * ntile;
    const int direct = direct_cols(g);
#pragma omp parallel for num_threads(pl->nt) if (pl->nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / (G * ntile), grp = u / ntile % G, s0 = u % ntile * tile, cnt = min64(tile, PQ - s0);
        uint16_t *o = out + (n * K + grp * Kg) * PQ + s0;
        gm_bmat b = {x + n * g->xs[0] + grp * Cg * g->xs[1] + s0, g->xs[1], 1};
        if (!direct) {
            uint16_t *col = (uint16_t *)(bufs + (int64_t)omp_get_thread_num() * tile * (CRS + Kg));
            im2col_b(col, cnt, x, g, n, grp, s0, cnt, 0, CRS);
            b = (gm_bmat){col, cnt, 1};
        }
        /* bias first, then the product onto it, rounded once */
        for (int64_t k = 0; k < Kg && bias; k++)
            for (int64_t j = 0; j < cnt; j++) o[k * PQ + j] = bias[grp * Kg + k];
        gemm_bf16(Kg, cnt, CRS, (gm_bmat){w + grp * Kg * CRS, CRS, 1}, b, bias ? 1 : 0, o, PQ, 1, 1);
    }
    return GM_OK;
}

int conv2d_forward_half(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                        const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q;
    if (N == 0 || K == 0 || PQ == 0) return GM_OK;
    if (!out || !w || (N * g->C > 0 && !x)) return GM_ERR_ARG;
    if (g->wf32 && (dt != GM_BF16 || G != 1 || !conv_half_reads_f32_weight())) return GM_ERR_ARG;
    if (conv2d_algo(g, CONV_FORWARD) == CONV_ALGO_DEPTHWISE) /* conv_depthwise.c */
        return conv_depthwise_half_forward(out, x, w, bias, g, dt, ws, ws_nbytes, nthreads);
    if (CRS == 0) { /* no input channels: the output is the bias, already in dt (or float32: rounded once) */
        for (int64_t i = 0; i < N * K; i++)
            for (int64_t j = 0; j < PQ; j++)
                out[i * PQ + j] = !bias ? 0 : g->wf32 ? gm_float_to_bf16(((const float *)bias)[i % K]) : bias[i % K];
        return GM_OK;
    }
    const size_t sn = dt == GM_BF16 ? conv_half_small_nbytes(g, CONV_FORWARD) : 0;
    if (sn && ws && ws_nbytes >= sn) return conv_half_small_forward(out, x, w, bias, g, ws, nthreads);
    const size_t fn = dt == GM_BF16 ? conv_half_few_nbytes(g, CONV_FORWARD, nthreads) : 0;
    if (fn && ws && ws_nbytes >= fn) return conv_half_few_forward(out, x, w, bias, g, ws, nthreads);
    const size_t an = dt == GM_BF16 ? conv_half_amx_nbytes(g, CONV_FORWARD, nthreads) : 0;
    if (an && ws && ws_nbytes >= an) return conv_half_amx_forward(out, x, w, bias, g, ws, nthreads);
    const size_t dn = conv_half_direct_nbytes(g, dt, CONV_FORWARD, nthreads);
    if (dn && ws && ws_nbytes >= dn) {
        half_direct_pass(out, x, w, bias, g, CONV_FORWARD, dt, ws, nthreads);
        return GM_OK;
    }
    const size_t fixed = half_fixed_nbytes(g), colb = half_col_nbytes(g);
    if (!ws || ws_nbytes < fixed + colb) return GM_ERR_ARG;
    const conv_plan pl = conv_plan_cols(g, CONV_FORWARD, CONV_ALGO_IM2COL, colb, CONV_HALF_TILE_TARGET,
                                        ws_nbytes - fixed, nthreads);
    if (pl.tile < 1) return GM_ERR_ARG;
    float *w32 = ws, *b32 = w32 + K * CRS, *bufs = (float *)((char *)ws + fixed);
    if (dt == GM_BF16 && bf16_on_gemm(g, CONV_FORWARD)) {
        blas_single_begin(pl.nt);
        int st = conv2d_forward_bf16(out, x, w, bias, g, &pl, bufs);
        blas_single_end(pl.nt);
        return st;
    }
    load_weight(w32, b32, w, bias, K * CRS, K, g, dt, pl.nt);
    const int64_t tile = pl.tile, ntile = ceil_div64(PQ, tile), units = N * G * ntile;
    blas_single_begin(pl.nt);
#pragma omp parallel for num_threads(pl.nt) if (pl.nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / (G * ntile), grp = u / ntile % G, s0 = u % ntile * tile, cnt = min64(tile, PQ - s0);
        float *col = bufs + (int64_t)omp_get_thread_num() * tile * (CRS + Kg), *ot = col + tile * CRS;
        im2col_h(col, cnt, x, g, n, grp, s0, cnt, 0, CRS, dt);
        /* bias first, then gemm onto it, as the float32 forward does (which sums K > 128 in chunks) */
        if (bias) conv_fill_rows_f32(ot, b32 + grp * Kg, Kg, cnt, cnt);
        conv_gemm_f32_whole(0, 0, Kg, cnt, CRS, 1, w32 + grp * Kg * CRS, CRS, col, cnt, bias ? 1 : 0, ot, cnt);
        round_rows_h(out + (n * K + grp * Kg) * PQ + s0, PQ, ot, Kg, cnt, dt);
    }
    blas_single_end(pl.nt);
    return GM_OK;
}

/* The input-gradient on bfloat16 products: the weight transposed once to (group, CRS, Kg) bfloat16 in the
 * widened weight's slot (half its size), so that its slices pack as rows; sums per channel block in float32. */
static void conv2d_backward_data_bf16(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                      const conv_geom *g, const hb_plan *pl, void *ws) {
    const int64_t N = g->N, C = g->C, K = g->K, G = g->G, Cg = C / G, Kg = K / G, RS = g->R * g->S;
    const int64_t CRS = Cg * RS, PQ = g->P * g->Q, HW = g->H * g->W;
    uint16_t *wt = ws;
    float *b32 = (float *)ws + K * CRS;
    /* in 32 x 32 blocks, so that both sides stay in cache lines: an element-wise transpose of a 512 x 4608 weight
     * cost more than the product it serves */
    const int64_t kb = ceil_div64(Kg, 32), jb = ceil_div64(CRS, 32);
#pragma omp parallel for num_threads(pl->nt) if (pl->nt > 1) schedule(static)
    for (int64_t blk = 0; blk < G * kb * jb; blk++) {
        const int64_t grp = blk / (kb * jb), k0 = blk / jb % kb * 32, j0 = blk % jb * 32;
        const int64_t k1 = min64(Kg, k0 + 32), j1 = min64(CRS, j0 + 32);
        for (int64_t k = k0; k < k1; k++)
            for (int64_t j = j0; j < j1; j++) wt[(grp * CRS + j) * Kg + k] = w[(grp * Kg + k) * CRS + j];
    }
    if (bias) load_run_h(b32, bias, 1, C, GM_BF16);
    const int64_t tile = pl->tile, chunk = pl->chunk, nchunk = ceil_div64(Cg, chunk), units = N * G * nchunk;
    const int64_t per = (int64_t)((pl->plane + (size_t)tile * pl->col) / sizeof(float));
    float *bufs = (float *)((char *)ws + pl->fixed);
#pragma omp parallel for num_threads(pl->nt) if (pl->nt > 1) schedule(dynamic)
    for (int64_t u = 0; u < units; u++) {
        const int64_t n = u / (G * nchunk), grp = u / nchunk % G, c0 = u % nchunk * chunk;
        const int64_t c1 = min64(Cg, c0 + chunk);
        float *plane = bufs + (int64_t)omp_get_thread_num() * per, *dcol = plane + chunk * HW;
        conv_fill_rows_f32(plane, bias ? b32 + grp * Cg + c0 : NULL, c1 - c0, HW, HW);
        for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
            const int64_t cnt = min64(tile, PQ - s0);
            gemm_bf16((c1 - c0) * RS, cnt, Kg, (gm_bmat){wt + (grp * CRS + c0 * RS) * Kg, Kg, 1},
                      (gm_bmat){dout + (n * K + grp * Kg) * PQ + s0, PQ, 1}, 0, dcol, cnt, 0, 1);
            conv_col2im_f32(plane, dcol, g, c0, c1, s0, cnt);
        }
        round_rows_h(dx + (n * C + grp * Cg + c0) * HW, HW, plane, c1 - c0, HW, GM_BF16);
    }
}

/* The weight-gradient on bfloat16 products: as the float16 pass, with the columns and grad_output read as
 * bfloat16 and the float32 weight-gradient summed by gemm_bf16. */
static void conv2d_backward_weight_bf16(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                        const hb_plan *pl, float *dw32, float *bufs) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q, tile = pl->tile, per = (int64_t)((size_t)tile * pl->col / sizeof(float));
    /* the float16 route's buffer of (chunk + Kg) float32 rows holds 2 (chunk + Kg) bfloat16 rows of columns (it
     * widens no grad_output): the more rows a product has, the fewer times grad_output is packed */
    const int64_t chunk = (int64_t)(pl->col / sizeof(uint16_t));
    const int nt = pl->nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* the team OpenMP gives, which may be smaller than nt (OMP_THREAD_LIMIT, a nested region) */
        const int64_t t = omp_get_thread_num(), tn = omp_get_num_threads();
        const int64_t j0 = CRS * t / tn, j1 = CRS * (t + 1) / tn;
        uint16_t *col = (uint16_t *)(bufs + t * per);
        for (int64_t n = 0; n < N && j1 > j0; n++) {
            for (int64_t grp = 0; grp < G; grp++) {
                for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
                    const int64_t cnt = min64(tile, PQ - s0);
                    const gm_bmat go = {dout + (n * K + grp * Kg) * PQ + s0, PQ, 1};
                    for (int64_t ja = j0; ja < j1; ja += chunk) {
                        const int64_t jb = min64(j1, ja + chunk);
                        im2col_b(col, cnt, x, g, n, grp, s0, cnt, ja, jb);
                        gemm_bf16(Kg, jb - ja, cnt, go, (gm_bmat){col, 1, cnt}, 1, dw32 + grp * Kg * CRS + ja, CRS, 0,
                                  1);
                    }
                }
            }
        }
    }
    convert_all(dw32, dw, K * CRS, 1, GM_BF16, nt);
}

/* rows (n) of dst (len floats each, contiguous) = rows of src (ld apart) widened. */
static void widen_rows_h(float *dst, const uint16_t *src, int64_t ld, int64_t n, int64_t len, gm_dtype dt) {
    for (int64_t i = 0; i < n; i++) load_run_h(dst + i * len, src + i * ld, 1, len, dt);
}

/* The input-gradient in half precision (see hb_plan): per (item, group, channel block) the gradient is summed
 * in a float32 plane block and rounded once, so no float32 copy of grad_output or of the input-gradient exists. */
int conv2d_backward_data_half(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                              const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, C = g->C, K = g->K, G = g->G, Cg = C / G, Kg = K / G, RS = g->R * g->S;
    const int64_t CRS = Cg * RS, PQ = g->P * g->Q, HW = g->H * g->W;
    if (N == 0 || C == 0 || HW == 0) return GM_OK;
    if (!dx || (K > 0 && (!w || (PQ > 0 && !dout)))) return GM_ERR_ARG;
    if (g->wf32 && (dt != GM_BF16 || G != 1 || !conv_half_reads_f32_weight())) return GM_ERR_ARG;
    if (Kg == 0 || PQ == 0) { /* nothing flows back: dinp is the bias (or zeros), already in dt (or float32) */
        for (int64_t i = 0; i < N * C; i++)
            for (int64_t j = 0; j < HW; j++)
                dx[i * HW + j] = !bias ? 0 : g->wf32 ? gm_float_to_bf16(((const float *)bias)[i % C]) : bias[i % C];
        return GM_OK;
    }
    if (conv2d_algo(g, CONV_BACKWARD_DATA) == CONV_ALGO_DEPTHWISE) /* conv_depthwise.c */
        return conv_depthwise_half_backward_data(dx, dout, w, bias, g, dt, ws, ws_nbytes, nthreads);
    const size_t sn = dt == GM_BF16 ? conv_half_small_nbytes(g, CONV_BACKWARD_DATA) : 0;
    if (sn && ws && ws_nbytes >= sn) return conv_half_small_backward_data(dx, dout, w, bias, g, ws, nthreads);
    const size_t fn = dt == GM_BF16 ? conv_half_few_nbytes(g, CONV_BACKWARD_DATA, nthreads) : 0;
    if (fn && ws && ws_nbytes >= fn) return conv_half_few_backward_data(dx, dout, w, bias, g, ws, nthreads);
    const size_t an = dt == GM_BF16 ? conv_half_amx_nbytes(g, CONV_BACKWARD_DATA, nthreads) : 0;
    if (an && ws && ws_nbytes >= an) return conv_half_amx_backward_data(dx, dout, w, bias, g, ws, nthreads);
    const size_t dn = conv_half_direct_nbytes(g, dt, CONV_BACKWARD_DATA, nthreads);
    if (dn && ws && ws_nbytes >= dn) {
        half_direct_pass(dx, dout, w, bias, g, CONV_BACKWARD_DATA, dt, ws, nthreads);
        return GM_OK;
    }
    hb_plan pl;
    if (!ws || conv_hb_plan_for(g, CONV_BACKWARD_DATA, ws_nbytes, nthreads, &pl) || pl.tile < 1) return GM_ERR_ARG;
    if (dt == GM_BF16 && bf16_on_gemm(g, CONV_BACKWARD_DATA)) {
        blas_single_begin(pl.nt);
        conv2d_backward_data_bf16(dx, dout, w, bias, g, &pl, ws);
        blas_single_end(pl.nt);
        return GM_OK;
    }
    float *w32 = ws, *b32 = w32 + K * CRS;
    load_weight(w32, b32, w, bias, K * CRS, C, g, dt, pl.nt);
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
        conv_fill_rows_f32(plane, bias ? b32 + grp * Cg + c0 : NULL, c1 - c0, HW, HW);
        for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
            const int64_t cnt = min64(tile, PQ - s0);
            widen_rows_h(g32, dout + (n * K + grp * Kg) * PQ + s0, PQ, Kg, cnt, dt);
            conv_gemm_f32_whole(1, 0, (c1 - c0) * RS, cnt, Kg, 1, w32 + grp * Kg * CRS + c0 * RS, CRS, g32, cnt, 0,
                                dcol, cnt);
            conv_col2im_f32(plane, dcol, g, c0, c1, s0, cnt);
        }
        round_rows_h(dx + (n * C + grp * Cg + c0) * HW, HW, plane, c1 - c0, HW, dt);
    }
    blas_single_end(pl.nt);
    return GM_OK;
}

/* The weight-gradient in half precision (see hb_plan): summed over items and positions into a float32
 * weight-gradient, rounded once; each thread widens the tiles of grad_output and builds its rows of the columns. */
int conv2d_backward_weight_half(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    const int64_t N = g->N, K = g->K, G = g->G, Cg = g->C / G, Kg = K / G, CRS = Cg * g->R * g->S;
    const int64_t PQ = g->P * g->Q;
    if (K == 0 || CRS == 0) return GM_OK;
    if (!dw) return GM_ERR_ARG;
    if (N == 0 || PQ == 0) {
        memset(dw, 0, (size_t)(K * CRS) * sizeof(uint16_t)); /* +0 in both half formats */
        return GM_OK;
    }
    if (!dout || !x) return GM_ERR_ARG;
    if (conv2d_algo(g, CONV_BACKWARD_WEIGHT) == CONV_ALGO_DEPTHWISE) /* conv_depthwise.c */
        return conv_depthwise_half_backward_weight(dw, dout, x, g, dt, ws, ws_nbytes, nthreads);
    const size_t sn = dt == GM_BF16 ? conv_half_small_nbytes(g, CONV_BACKWARD_WEIGHT) : 0;
    if (sn && ws && ws_nbytes >= sn) return conv_half_small_backward_weight(dw, dout, x, g, ws, nthreads);
    const size_t fn = dt == GM_BF16 ? conv_half_few_nbytes(g, CONV_BACKWARD_WEIGHT, nthreads) : 0;
    if (fn && ws && ws_nbytes >= fn) return conv_half_few_backward_weight(dw, dout, x, g, ws, nthreads);
    const size_t an = dt == GM_BF16 ? conv_half_amx_nbytes(g, CONV_BACKWARD_WEIGHT, nthreads) : 0;
    if (an && ws && ws_nbytes >= an) return conv_half_amx_backward_weight(dw, dout, x, g, ws, nthreads);
    const size_t dn = conv_half_direct_nbytes(g, dt, CONV_BACKWARD_WEIGHT, nthreads);
    if (dn && ws && ws_nbytes >= dn) {
        half_direct_weight(dw, dout, x, g, dt, ws, nthreads);
        return GM_OK;
    }
    hb_plan pl;
    if (!ws || conv_hb_plan_for(g, CONV_BACKWARD_WEIGHT, ws_nbytes, nthreads, &pl) || pl.tile < 1) return GM_ERR_ARG;
    float *dw32 = ws, *bufs = (float *)((char *)ws + pl.fixed);
    memset(dw32, 0, (size_t)(K * CRS) * sizeof(float));
    if (dt == GM_BF16 && bf16_on_gemm(g, CONV_BACKWARD_WEIGHT)) {
        blas_single_begin(pl.nt);
        conv2d_backward_weight_bf16(dw, dout, x, g, &pl, dw32, bufs);
        blas_single_end(pl.nt);
        return GM_OK;
    }
    const int64_t tile = pl.tile, per = (int64_t)((size_t)tile * pl.col / sizeof(float));
    const int nt = pl.nt;
    blas_single_begin(nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* the team OpenMP gives, which may be smaller than nt (OMP_THREAD_LIMIT, a nested region) */
        const int64_t t = omp_get_thread_num(), tn = omp_get_num_threads();
        const int64_t j0 = CRS * t / tn, j1 = CRS * (t + 1) / tn;
        float *col = bufs + t * per, *g32 = col + tile * pl.chunk;
        for (int64_t n = 0; n < N && j1 > j0; n++) {
            for (int64_t grp = 0; grp < G; grp++) {
                for (int64_t s0 = 0; s0 < PQ; s0 += tile) {
                    const int64_t cnt = min64(tile, PQ - s0);
                    widen_rows_h(g32, dout + (n * K + grp * Kg) * PQ + s0, PQ, Kg, cnt, dt);
                    for (int64_t ja = j0; ja < j1; ja += pl.chunk) {
                        const int64_t jb = min64(j1, ja + pl.chunk);
                        im2col_h(col, cnt, x, g, n, grp, s0, cnt, ja, jb, dt);
                        conv_gemm_f32_whole(0, 1, Kg, jb - ja, cnt, 1, g32, cnt, col, cnt, 1,
                                            dw32 + grp * Kg * CRS + ja, CRS);
                    }
                }
            }
        }
    }
    blas_single_end(nt);
    convert_all(dw32, dw, K * CRS, 1, dt, nt);
    return GM_OK;
}

/* The bias gradient of half-precision t: sums in double, as the float32 one, rounded once. */
int conv_bias_backward_half(uint16_t *db, const uint16_t *t, int64_t N, int64_t K, int64_t L,
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
