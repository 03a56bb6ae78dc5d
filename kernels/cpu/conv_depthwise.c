/* kernels/cpu/conv_depthwise.c — the direct kernels of depthwise convolutions (groups == channels, each input
 * channel feeding K/C output channels): the forward and both gradients, float32 and float64, no workspace. A gemm
 * per channel would be one row long and waste the BLAS (benchmarks/conv_gflops.py), so these loop over planes
 * with register-blocked rows instead. conv.c dispatches to them (conv2d_algo says when). The untyped part below
 * the template's include: the float16/bfloat16 passes (conv_half.c dispatches to them) on per-thread float32
 * planes. */
#ifndef CONV_T

#include "conv_internal.h"
#include "bf16_convert.h"

#define CONV_TEMPLATE "conv_depthwise.c"
#include "conv_typed.h"

/* ---- float16/bfloat16: half storage, float32 arithmetic, each result rounded once ----------------------------
 * Each plane is widened into the thread's float32 buffers, computed there and rounded once as it is written back,
 * so no float32 copy of an activation exists: the workspace is per thread one padded input plane (in phases, see
 * dw_layout), one output plane and one channel's taps (a 32x32 plane is 4 KiB: it stays in L1 between widening
 * and use). Undilated geometries run the flat loops below, dilated ones the float32 dw_plane above. Before these
 * existed, autocast widened every depthwise convolution's operands to float32 copies and ran its backward one item
 * at a time: MobileNetV2's autocast step (3x64x64, 2 micro-batches of 2, 2 threads, AMX CPU) cost 63.7 ms against
 * 46.0 in float32; with them 51.9 (benchmarks/bf16_depthwise.py has the passes: its depthwise layers' forward and
 * backward 9.4 -> 4.8 ms a micro-batch, the float32 passes 8.1). */

/* Rows shorter than this are converted inline: the calls into bf16_convert.c cost more than a 2- or 4-wide row. */
#define DW_SHORT 32

static inline float dw_h2f(uint16_t v, gm_dtype dt) {
    return dt == GM_BF16 ? gm_bf16_to_float(v) : gm_half_to_float(v);
}

/* d (rows, cols, contiguous) = the half-precision rows of s (rows rs, columns cs elements apart), widened. */
static void dw_widen(float *d, const uint16_t *s, int64_t rows, int64_t cols, int64_t rs, int64_t cs, gm_dtype dt) {
    for (int64_t i = 0; i < rows; i++, d += cols, s += rs) {
        if (dt == GM_BF16 && cs == 1 && cols < DW_SHORT) {
            for (int64_t j = 0; j < cols; j++) d[j] = gm_bf16_to_float(s[j]);
        } else if (dt == GM_BF16 && cs == 1) {
            gm_cvt_bf16_to_f32(d, s, cols);
        } else {
            for (int64_t j = 0; j < cols; j++) d[j] = dw_h2f(s[j * cs], dt);
        }
    }
}

static void dw_round(uint16_t *d, const float *s, int64_t n, gm_dtype dt) {
    if (dt == GM_BF16 && n < DW_SHORT) {
        for (int64_t i = 0; i < n; i++) d[i] = gm_float_to_bf16(s[i]);
    } else if (dt == GM_BF16) {
        gm_cvt_f32_to_bf16(d, s, n);
    } else {
        for (int64_t i = 0; i < n; i++) d[i] = gm_float_to_half(s[i]);
    }
}

static int64_t dw_align16(int64_t n) { return (n + 15) & ~(int64_t)15; } /* floats: whole 64-byte lines */

/* ---- undilated geometries: flat phases ------------------------------------------------------------------
 * The input plane is laid out zero-padded and split into its sh x sw phases (row h, column w of the padded plane
 * goes to phase (h % sh, w % sw) at (h / sh, w / sw)), each `pitch` floats a row. Tap (r, s) of output (p, q)
 * then reads phase (r % sh, s % sw) at (p + r / sh, q + s / sw): for every tap one contiguous run over the flat
 * index p * pitch + q, whatever the stride, without edge cases. The pitch - Q columns past each output row are
 * computed and dropped (the 2x2 and 4x4 planes of MobileNetV2's last stages waste half, which still beats the
 * per-column edge loops of dw_plane: those took 3 GMAC/s at 2x2). Each pass is a few loops the compiler
 * vectorizes, built for AVX-512 too and chosen at run time. Dilated geometries take dw_plane on plain planes. */
typedef struct {
    int64_t rows, pitch, F; /* a phase: rows x pitch floats, F of them */
    int64_t L;              /* the flat outputs: P * pitch */
    int64_t off[64];        /* tap r*S + s reads its phase's run from here (dw_tap): divisions done once a pass */
    int64_t front;          /* zeros before grad_output's flat plane in the input-gradient (its farthest tap) */
    int64_t xn, on, tn;     /* floats of the phases (with room for the last taps' overrun), of the flat plane
                             * (whole vectors; in the input-gradient after `front` zeros and up to a phase's
                             * whole vectors), of a padded input row */
} dw_lay;

static int dw_flat(const conv_geom *g) { return g->dh == 1 && g->dw == 1 && g->R * g->S <= 64; }

static dw_lay dw_layout(const conv_geom *g) {
    dw_lay l;
    const int64_t Hp = max64(g->H + g->ph, (g->P - 1) * g->sh + g->R);
    const int64_t Wp = max64(g->W + g->pw, (g->Q - 1) * g->sw + g->S);
    l.rows = ceil_div64(Hp, g->sh);
    l.pitch = ceil_div64(Wp, g->sw);
    l.F = dw_align16(l.rows * l.pitch); /* whole vectors: the input-gradient writes phases whole */
    l.L = g->P * l.pitch;
    /* the flat run of a tap in the last phase reads (and the input-gradient writes) up to S / sw past it */
    l.xn = dw_align16(g->sh * g->sw * l.F + g->S + 16);
    l.front = (g->R - 1) / g->sh * l.pitch + (g->S - 1) / g->sw;
    l.on = dw_align16(l.front + l.F + 16);
    l.tn = dw_align16(l.pitch * g->sw);
    for (int64_t t = 0; t < g->R * g->S && t < 64; t++) {
        const int64_t r = t / g->S, s = t % g->S;
        l.off[t] = (r % g->sh * g->sw + s % g->sw) * l.F + r / g->sh * l.pitch + s / g->sw;
    }
    return l;
}

/* Floats of one thread's buffers: flat phases and a flat output plane, or (dilated) an input plane and an output
 * plane; and one channel's taps (R*S). */
static int64_t dw_half_per_thread(const conv_geom *g) {
    if (dw_flat(g)) {
        const dw_lay l = dw_layout(g);
        return l.xn + l.on + l.tn + 16 * g->R * g->S; /* the taps, or the weight-gradient's vector sums */
    }
    return dw_align16(g->H * g->W) + dw_align16(g->P * g->Q) + dw_align16(g->R * g->S);
}

/* X = the phases of plane src (H, W; rows rs, columns cs elements apart), widened, zero elsewhere; t: a padded
 * row's scratch (tn floats), where a strided row is widened before it is dealt out to its phases. */
static void dw_fill(float *X, float *t, const dw_lay *l, const conv_geom *g, const uint16_t *src, int64_t rs,
                    int64_t cs, gm_dtype dt) {
    memset(X, 0, (size_t)l->xn * sizeof(float));
    if (g->sw > 1) memset(t, 0, (size_t)l->tn * sizeof(float));
    for (int64_t h = 0, a = g->ph % g->sh, i = g->ph / g->sh; h < g->H; h++) { /* padded row h + ph = i*sh + a */
        float *ph = X + a * g->sw * l->F + i * l->pitch;
        if (++a == g->sh) {
            a = 0;
            i++;
        }
        if (g->sw == 1) {
            dw_widen(ph + g->pw, src + h * rs, 1, g->W, 0, cs, dt);
            continue;
        }
        dw_widen(t + g->pw, src + h * rs, 1, g->W, 0, cs, dt);
        for (int64_t b = 0; b < g->sw; b++)
            for (int64_t i = 0; i < l->pitch; i++) ph[b * l->F + i] = t[i * g->sw + b];
    }
}

/* O (P rows of pitch, then zeros to whole vectors) = plane src (P, Q contiguous) widened, zero past Q in each
 * row: the flat loops then read whole vectors of it, and its zeros add nothing. */
static void dw_fill_out(float *O, const dw_lay *l, const conv_geom *g, const uint16_t *src, gm_dtype dt) {
    for (int64_t p = 0; p < g->P; p++) {
        dw_widen(O + p * l->pitch, src + p * g->Q, 1, g->Q, 0, 1, dt);
        for (int64_t q = g->Q; q < l->pitch; q++) O[p * l->pitch + q] = 0;
    }
    for (int64_t j = l->L; j < dw_align16(l->L); j++) O[j] = 0;
}

/* The three flat loops, compiled twice: for the baseline and for AVX-512 (dw_avx512 says which runs). */
#define DW_FLAT_LOOPS(SUF, ATTR)                                                                                     \
    ATTR static void dw_fwd_##SUF(float *o, const float *X, const float *wt, float b, const dw_lay *l,              \
                                  const conv_geom *g) {                                                             \
        const int64_t RS = g->R * g->S, L = l->L, *off = l->off;                                                    \
        /* DW_NV vectors of outputs in registers over all taps (whole vectors: o has room, X has slack) */          \
        for (int64_t j = 0; j < L; j += DW_NV * 16) {                                                               \
            dw_v16 acc[DW_NV];                                                                                      \
            for (int v = 0; v < DW_NV; v++) acc[v] = b + (dw_v16){0};                                               \
            const int nv = (int)min64(DW_NV, ceil_div64(L - j, 16));                                                \
            for (int64_t t = 0; t < RS; t++) {                                                                      \
                const float wv = wt[t], *xp = X + off[t] + j;                                                       \
                for (int v = 0; v < DW_NV; v++)                                                                     \
                    if (v < nv) {                                                                           \
                        dw_v16 xv;                                                                          \
                        memcpy(&xv, xp + 16 * v, sizeof xv);                                                \
                        acc[v] += wv * xv;                                                                  \
                    }                                                                                       \
            }                                                                                                       \
            for (int v = 0; v < nv; v++) memcpy(o + j + 16 * v, &acc[v], sizeof acc[v]);                           \
        }                                                                                                           \
    }                                                                                                               \
    /* Phase (a, b) of the input-gradient gathers from the taps (r, s) with r % sh == a, s % sw == b: element j of  \
     * it is the sum of w(r, s) * G[j - off(r, s) + its phase's start] (G after `front` zeros). Whole phases of     \
     * whole vectors, DW_NV in registers over the phase's taps (a scatter tap by tap stalled on its own stores). */ \
    ATTR static void dw_gather_##SUF(float *X, const float *G, const float *wt, int accumulate, const dw_lay *l,    \
                                     const conv_geom *g) {                                                          \
        for (int64_t a = 0; a < g->sh; a++)                                                                         \
            for (int64_t b = 0; b < g->sw; b++) {                                                                   \
                const int64_t base = (a * g->sw + b) * l->F;                                                        \
                float *xp = X + base;                                                                               \
                for (int64_t j = 0; j < l->F; j += DW_NV * 16) {                                                    \
                    dw_v16 acc[DW_NV];                                                                              \
                    for (int v = 0; v < DW_NV; v++) {                                                               \
                        acc[v] = (dw_v16){0};                                                                       \
                        if (accumulate && j + 16 * v < l->F) memcpy(&acc[v], xp + j + 16 * v, sizeof acc[v]);       \
                    }                                                                                               \
                    const int nv = (int)min64(DW_NV, ceil_div64(l->F - j, 16));                                     \
                    for (int64_t r = a; r < g->R; r += g->sh)                                                       \
                        for (int64_t s = b; s < g->S; s += g->sw) {                                                 \
                            const float wv = wt[r * g->S + s];                                                      \
                            const float *gp = G + l->front + j - (l->off[r * g->S + s] - base);                     \
                            for (int v = 0; v < DW_NV; v++)                                                         \
                                if (v < nv) {                                                                       \
                                    dw_v16 gv;                                                                      \
                                    memcpy(&gv, gp + 16 * v, sizeof gv);                                            \
                                    acc[v] += wv * gv;                                                              \
                                }                                                                                   \
                        }                                                                                           \
                    for (int v = 0; v < nv; v++) memcpy(xp + j + 16 * v, &acc[v], sizeof acc[v]);                  \
                }                                                                                                   \
            }                                                                                                       \
    }                                                                                                               \
    /* sv (16 lanes per tap) += the lanes of grad_output's flat plane (zero past L) times the tap's run; the lanes \
     * are summed once per channel, after every item. */                                                          \
    ATTR static void dw_dots_##SUF(float *sv, const float *G, const float *X, const dw_lay *l,                     \
                                   const conv_geom *g) {                                                            \
        for (int64_t t = 0; t < g->R * g->S; t++) {                                                                 \
            const float *xp = X + l->off[t];                                                                        \
            dw_v16 acc;                                                                                             \
            memcpy(&acc, sv + 16 * t, sizeof acc);                                                                  \
            for (int64_t j = 0; j < l->L; j += 16) {                                                                \
                dw_v16 xv, gv;                                                                                      \
                memcpy(&xv, xp + j, sizeof xv);                                                                     \
                memcpy(&gv, G + j, sizeof gv);                                                                      \
                acc += gv * xv;                                                                                     \
            }                                                                                                       \
            memcpy(sv + 16 * t, &acc, sizeof acc);                                                                  \
        }                                                                                                           \
    }

typedef float dw_v16 __attribute__((vector_size(64)));
#define DW_NV 4
DW_FLAT_LOOPS(base, )
DW_FLAT_LOOPS(avx512, __attribute__((target("avx512f,fma"))))

static int dw_avx512(void) {
    static int v = -1;
    if (v < 0) v = __builtin_cpu_supports("avx512f") ? 1 : 0;
    return v;
}

/* The threads a pass asks for: the float32 kernels' rule, at most one per unit of work (a plane of the forward or
 * of the input-gradient, an output channel of the weight-gradient), and at most as many as the bytes given
 * hold buffers for (so a tight workspace limit runs on fewer threads rather than failing). */
static int dw_half_threads(const conv_geom *g, conv_pass pass, size_t bytes, int nthreads) {
    const int64_t units = pass == CONV_FORWARD ? g->N * g->K : pass == CONV_BACKWARD_DATA ? g->N * g->C : g->K;
    const int64_t want = min64(use_threads(nthreads, (double)g->N * (double)g->K * (double)(g->P * g->Q) *
                                                         (double)(g->R * g->S)), max64(1, units));
    const size_t per = (size_t)dw_half_per_thread(g) * sizeof(float);
    return (int)min64(want, (int64_t)(bytes / per));
}

/* Whether the pass has anything to compute (else it needs no workspace: see the passes' early returns). */
static int dw_half_work(const conv_geom *g, conv_pass pass) {
    if (pass == CONV_FORWARD) return g->N * g->K * g->P * g->Q > 0;
    if (pass == CONV_BACKWARD_DATA) return g->N * g->C * g->H * g->W > 0 && g->K * g->P * g->Q > 0;
    return g->K * g->R * g->S > 0 && g->N * g->P * g->Q > 0;
}

size_t conv_depthwise_half_nbytes(const conv_geom *g, conv_pass pass, size_t limit, int nthreads) {
    if (!dw_half_work(g, pass)) return 0;
    const size_t per = (size_t)dw_half_per_thread(g) * sizeof(float);
    const int nt = dw_half_threads(g, pass, limit, nthreads);
    return nt >= 1 ? (size_t)nt * per : per; /* not even one thread's buffers: more than limit, the caller raises */
}

int conv_depthwise_half_forward(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                                const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    if (!dw_half_work(g, CONV_FORWARD)) return GM_OK;
    const int64_t K = g->K, mult = K / g->C, RS = g->R * g->S, PQ = g->P * g->Q, per = dw_half_per_thread(g);
    const int nt = dw_half_threads(g, CONV_FORWARD, ws ? ws_nbytes : 0, nthreads);
    if (nt < 1) return GM_ERR_ARG;
    if (dw_flat(g)) {
        const dw_lay l = dw_layout(g);
        const int avx = dw_avx512();
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 4)
        for (int64_t nk = 0; nk < g->N * K; nk++) {
            const int64_t n = nk / K, k = nk % K;
            float *X = (float *)ws + omp_get_thread_num() * per, *o = X + l.xn, *t = o + l.on, *wb = t + l.tn;
            dw_fill(X, t, &l, g, x + n * g->xs[0] + (k / mult) * g->xs[1], g->xs[2], g->xs[3], dt);
            dw_widen(wb, w + k * RS, 1, RS, 0, 1, dt);
            const float b0 = bias ? dw_h2f(bias[k], dt) : 0.f;
            if (avx) dw_fwd_avx512(o, X, wb, b0, &l, g);
            else dw_fwd_base(o, X, wb, b0, &l, g);
            for (int64_t p = 0; p < g->P; p++) dw_round(out + nk * PQ + p * g->Q, o + p * l.pitch, g->Q, dt);
        }
        return GM_OK;
    }
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 4)
    for (int64_t nk = 0; nk < g->N * K; nk++) {
        const int64_t n = nk / K, k = nk % K;
        float *xb = (float *)ws + omp_get_thread_num() * per, *ob = xb + dw_align16(g->H * g->W);
        float *wb = ob + dw_align16(PQ);
        dw_widen(xb, x + n * g->xs[0] + (k / mult) * g->xs[1], g->H, g->W, g->xs[2], g->xs[3], dt);
        dw_widen(wb, w + k * RS, 1, RS, 0, 1, dt);
        dw_plane_f32(ob, xb, g->W, 1, wb, g->S, 1, bias ? dw_h2f(bias[k], dt) : 0.f, 0, g);
        dw_round(out + nk * PQ, ob, PQ, dt);
    }
    return GM_OK;
}

/* As conv_depthwise_backward_data (a correlation with the flipped kernel at stride 1, a scatter otherwise), each
 * (n, c) plane summed over its mult output channels in float32 and rounded once. */
int conv_depthwise_half_backward_data(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                      const conv_geom *g, gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    if (!dw_half_work(g, CONV_BACKWARD_DATA)) return GM_OK;
    const int64_t C = g->C, K = g->K, mult = K / C, R = g->R, S = g->S, P = g->P, Q = g->Q, H = g->H, W = g->W;
    const int64_t RS = R * S, per = dw_half_per_thread(g);
    const conv_geom flip = {.N = g->N, .C = K, .H = P, .W = Q, .K = C, .R = R, .S = S, .P = H, .Q = W, .sh = 1,
                            .sw = 1, .ph = g->dh * (R - 1) - g->ph, .pw = g->dw * (S - 1) - g->pw, .dh = g->dh,
                            .dw = g->dw, .G = C};
    const int nt = dw_half_threads(g, CONV_BACKWARD_DATA, ws ? ws_nbytes : 0, nthreads);
    if (nt < 1) return GM_ERR_ARG;
    if (dw_flat(g)) { /* every tap scatters grad_output's flat plane onto the input-gradient's phases */
        const dw_lay l = dw_layout(g);
        const int avx = dw_avx512();
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 4)
        for (int64_t nc = 0; nc < g->N * C; nc++) {
            const int64_t n = nc / C, c = nc % C;
            float *X = (float *)ws + omp_get_thread_num() * per, *G = X + l.xn, *t = G + l.on, *wb = t + l.tn;
            const float b0 = bias ? dw_h2f(bias[c], dt) : 0.f;
            for (int64_t m = 0; m < mult; m++) { /* the output channels' gathers summed into X */
                const int64_t k = c * mult + m;
                memset(G, 0, (size_t)l.front * sizeof(float));
                dw_fill_out(G + l.front, &l, g, dout + (n * K + k) * P * Q, dt);
                for (int64_t j = l.front + l.L; j < l.on; j++) G[j] = 0;
                dw_widen(wb, w + k * RS, 1, RS, 0, 1, dt);
                if (avx) dw_gather_avx512(X, G, wb, m > 0, &l, g);
                else dw_gather_base(X, G, wb, m > 0, &l, g);
            }
            /* the plane's own positions, plus the bias, rounded once; padded row h + ph is row i of phase row a
             * (counted along: a division per row cost more than the row at stride 2) */
            for (int64_t h = 0, a = g->ph % g->sh, i = g->ph / g->sh; h < H; h++) {
                float *ph = X + a * g->sw * l.F + i * l.pitch;
                if (++a == g->sh) {
                    a = 0;
                    i++;
                }
                uint16_t *d = dx + nc * H * W + h * W;
                if (g->sw == 1) {
                    for (int64_t q = 0; q < W; q++) ph[g->pw + q] += b0;
                    dw_round(d, ph + g->pw, W, dt);
                    continue;
                }
                for (int64_t q = 0, b = g->pw % g->sw, iq = g->pw / g->sw; q < W; q++) { /* column q + pw */
                    t[q] = ph[b * l.F + iq] + b0;
                    if (++b == g->sw) {
                        b = 0;
                        iq++;
                    }
                }
                dw_round(d, t, W, dt);
            }
        }
        return GM_OK;
    }
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 4)
    for (int64_t nc = 0; nc < g->N * C; nc++) {
        const int64_t n = nc / C, c = nc % C;
        float *dxb = (float *)ws + omp_get_thread_num() * per, *gb = dxb + dw_align16(H * W);
        float *wb = gb + dw_align16(P * Q);
        const float b0 = bias ? dw_h2f(bias[c], dt) : 0.f;
        if (g->sh != 1 || g->sw != 1)
            for (int64_t i = 0; i < H * W; i++) dxb[i] = b0;
        for (int64_t m = 0; m < mult; m++) {
            const int64_t k = c * mult + m;
            dw_widen(gb, dout + (n * K + k) * P * Q, 1, P * Q, 0, 1, dt);
            dw_widen(wb, w + k * RS, 1, RS, 0, 1, dt);
            if (g->sh == 1 && g->sw == 1) {
                dw_plane_f32(dxb, gb, Q, 1, wb + RS - 1, -S, -1, b0, m > 0, &flip);
                continue;
            }
            for (int64_t p = 0; p < P; p++) {
                const float *drow = gb + p * Q;
                for (int64_t r = 0; r < R; r++) {
                    const int64_t h = p * g->sh - g->ph + r * g->dh;
                    if (h < 0 || h >= H) continue;
                    float *dr = dxb + h * W;
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t off = s * g->dw - g->pw;
                        const float wv = wb[r * S + s];
                        int64_t qa, qb;
                        valid_cols(off, g->sw, W, Q, &qa, &qb);
                        for (int64_t q = qa; q < qb; q++) dr[q * g->sw + off] += wv * drow[q];
                    }
                }
            }
        }
        dw_round(dx + nc * H * W, dxb, H * W, dt);
    }
    return GM_OK;
}

/* As conv_depthwise_backward_weight: one thread owns each output channel's taps, summed over items and positions
 * in float32 (in its buffer) and rounded once. */
int conv_depthwise_half_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                        gm_dtype dt, void *ws, size_t ws_nbytes, int nthreads) {
    if (!dw_half_work(g, CONV_BACKWARD_WEIGHT)) return GM_OK;
    const int64_t K = g->K, mult = K / g->C, R = g->R, S = g->S, P = g->P, Q = g->Q, H = g->H, W = g->W;
    const int64_t per = dw_half_per_thread(g);
    const int nt = dw_half_threads(g, CONV_BACKWARD_WEIGHT, ws ? ws_nbytes : 0, nthreads);
    if (nt < 1) return GM_ERR_ARG;
    if (dw_flat(g)) { /* tap (r, s): the dot of grad_output's flat plane (zero past Q) with the tap's run */
        const dw_lay l = dw_layout(g);
        const int avx = dw_avx512();
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 1)
        for (int64_t k = 0; k < K; k++) {
            float *X = (float *)ws + omp_get_thread_num() * per, *G = X + l.xn, *t = G + l.on, *acc = t + l.tn;
            memset(acc, 0, (size_t)(16 * R * S) * sizeof(float));
            for (int64_t n = 0; n < g->N; n++) {
                dw_fill(X, t, &l, g, x + n * g->xs[0] + (k / mult) * g->xs[1], g->xs[2], g->xs[3], dt);
                dw_fill_out(G, &l, g, dout + (n * K + k) * P * Q, dt);
                if (avx) dw_dots_avx512(acc, G, X, &l, g);
                else dw_dots_base(acc, G, X, &l, g);
            }
            for (int64_t i = 0; i < R * S; i++) { /* each tap's lanes summed; block i is read before acc[i] is set */
                float sum = 0;
                for (int l16 = 0; l16 < 16; l16++) sum += acc[16 * i + l16];
                acc[i] = sum;
            }
            dw_round(dw + k * R * S, acc, R * S, dt);
        }
        return GM_OK;
    }
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 1)
    for (int64_t k = 0; k < K; k++) {
        float *xb = (float *)ws + omp_get_thread_num() * per, *gb = xb + dw_align16(H * W);
        float *acc = gb + dw_align16(P * Q);
        for (int64_t i = 0; i < R * S; i++) acc[i] = 0;
        for (int64_t n = 0; n < g->N; n++) {
            dw_widen(xb, x + n * g->xs[0] + (k / mult) * g->xs[1], H, W, g->xs[2], g->xs[3], dt);
            dw_widen(gb, dout + (n * K + k) * P * Q, 1, P * Q, 0, 1, dt);
            for (int64_t p = 0; p < P; p++) {
                for (int64_t r = 0; r < R; r++) {
                    const int64_t h = p * g->sh - g->ph + r * g->dh;
                    if (h < 0 || h >= H) continue;
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t off = s * g->dw - g->pw;
                        int64_t qa, qb;
                        valid_cols(off, g->sw, W, Q, &qa, &qb);
                        if (qb > qa)
                            acc[r * S + s] += dot_f32(gb + p * Q + qa, xb + h * W + qa * g->sw + off, g->sw, qb - qa);
                    }
                }
            }
        }
        dw_round(dw + k * R * S, acc, R * S, dt);
    }
    return GM_OK;
}

#else /* ================ typed part: T is CONV_T, FN(name) is name_<suffix> ================================ */

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
void FN(conv_depthwise_forward)(T *out, const T *x, const T *w, const T *bias, const conv_geom *g, int nthreads) {
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
void FN(conv_depthwise_backward_data)(T *dx, const T *dout, const T *w, const T *bias, const conv_geom *g,
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
void FN(conv_depthwise_backward_weight)(T *dw, const T *dout, const T *x, const conv_geom *g, int nthreads) {
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


#undef VEC
#undef VL

#endif
