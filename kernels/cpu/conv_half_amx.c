/* kernels/cpu/conv_half_amx.c — the bfloat16 passes of convolutions (forward and weight-gradient at stride 1 or
 * 2, input-gradient at stride 1) as implicit products on the AMX tile unit: no im2col, no float32 copy of an
 * activation.
 *
 * tdpbf16ps adds a (16 x 2k) bfloat16 tile A times a (k pairs x 16) tile B of bfloat16 pairs into a 16 x 16
 * float32 tile. Here A is a block of 16 output channels x up to 32 input channels of one tap (r, s) of the
 * weight, packed once per call, and B is read straight from the input: the input of one item is packed once into
 * "pair planes", zero-padded, xp[i][h][w] = (x[2i][h - ph][w - pw], x[2i + 1][...]) (one 32-bit word), so that
 * the tap's B tile for 16 consecutive output positions is 16 consecutive words of consecutive pair planes (the
 * output laid out "flat", see plane_cols): a tile load with the pair plane's size as its stride. The sum over taps
 * and channel blocks stays in the accumulator tiles; each result is that float32 sum (plus the bias) rounded once
 * to bfloat16, as on the other routes. A stride of 2 splits the planes into the input's phases (plane_stride).
 *
 * The input-gradient of a stride-1 convolution is the forward of grad_output with the weight transposed (k <-> c)
 * and flipped (r, s -> R-1-r, S-1-s), padded by R-1-ph and S-1-pw: the same kernel with the weight packed so. The
 * weight-gradient (below) reads the same planes of the input as A and grad_output's pairs of positions as B.
 *
 * Threads take whole items (one pair-plane buffer each); the workspace is the packed weight and those buffers
 * (conv_half_amx_nbytes, which conv_plan.c gives meta too). Where it runs: conv_half_amx_use. */
#define _GNU_SOURCE /* syscall() */
#include "conv_internal.h"
#include "bf16_convert.h"
#include "bf16_lanes.h"
#include "transpose_words16.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Whether the tile unit may be used: CPUID leaf 7 EDX bits 22 (AMX-BF16) and 24 (AMX-TILE), and Linux's grant
 * of the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM; idempotent, gemm_bf16.c asks too).
 * GPUMEMNET_GEMM_BF16=portable or =avx512 (the tests' switches for gemm_bf16's other paths) turn it off too. */
static int amx_state = -1;

int conv_half_amx_usable(void) {
    int s = __atomic_load_n(&amx_state, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *e = getenv("GPUMEMNET_GEMM_BF16");
        s = 0;
#if defined(__linux__) && defined(__x86_64__)
        unsigned a, b, c, d;
        __builtin_cpu_init();
        if (!(e && (strcmp(e, "portable") == 0 || strcmp(e, "avx512") == 0)) &&
            __builtin_cpu_supports("avx512bf16") && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1) &&
            (d >> 24 & 1))
            s = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#endif
        __atomic_store_n(&amx_state, s, __ATOMIC_RELAXED);
    }
    return s;
}

/* One pass as a forward: Ci input channels of H x W at `in` (strides is), Co output channels of P x Q. */
typedef struct {
    int64_t N, Ci, H, W, Co, P, Q, R, S, ph, pw, sh, sw;
    int64_t is[4];
} amx_job;

/* Pairs per channel block (the B tile's rows, A's columns / 2): up to 16, fewer for fewer channels so that a
 * 16-channel layer's tiles are not half zeros. */
static int64_t pairs_per_block(int64_t Ci) { return min64(16, (Ci + 1) / 2); }

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The geometry of the pass, as a forward (see the top). */
static amx_job job_of(const conv_geom *g, conv_pass pass) {
    amx_job j;
    j.N = g->N;
    j.R = g->R;
    j.S = g->S;
    j.sh = g->sh; /* the input-gradient's are 1 (conv_half_amx_use) */
    j.sw = g->sw;
    if (pass == CONV_FORWARD) {
        j.Ci = g->C, j.H = g->H, j.W = g->W, j.Co = g->K, j.P = g->P, j.Q = g->Q, j.ph = g->ph, j.pw = g->pw;
        memcpy(j.is, g->xs, sizeof j.is);
    } else { /* grad_output is contiguous */
        j.Ci = g->K, j.H = g->P, j.W = g->Q, j.Co = g->C, j.P = g->H, j.Q = g->W;
        j.ph = g->R - 1 - g->ph, j.pw = g->S - 1 - g->pw;
        j.is[3] = 1, j.is[2] = g->Q, j.is[1] = g->P * g->Q, j.is[0] = g->K * g->P * g->Q;
    }
    return j;
}

/* Bytes of the packed weight and of one item's pair planes. */
static size_t weight_nbytes(const amx_job *j) {
    const int64_t npb = pairs_per_block(j->Ci), cb = ceil_div64((j->Ci + 1) / 2, npb), kb = ceil_div64(j->Co, 16);
    return (size_t)(j->R * j->S * kb * cb * 16 * npb * 2) * 2;
}

/* The pair planes' columns (the output's plus S - 1) and the blocks of 16 "flat" positions f = p * Wp + q that
 * cover the output (those with q >= Q are computed and dropped: S - 1 of every Wp, so that a map of 8 or 4
 * columns still fills whole tiles); a pair plane holds Hp = P + R - 1 rows and zeros past them, as far as the
 * last pair of blocks reads. */
static int64_t plane_cols(const amx_job *j) { return j->Q + (j->S - 1) / j->sw; }

static int64_t plane_rows(const amx_job *j) { return j->P + (j->R - 1) / j->sh; }

static int64_t flat_blocks(const amx_job *j) { return ceil_div64((j->P - 1) * plane_cols(j) + j->Q, 16); }

/* A stride of 2 splits the padded input into its sh x sw phases (rows and columns even and odd), each a plane of
 * plane_rows x plane_cols: tap (r, s) reads phase (r % sh, s % sw) from (r / sh, s / sw) on, so that the output's
 * consecutive positions are again consecutive words. */
static int64_t phases(const amx_job *j) { return j->sh * j->sw; }

static int64_t plane_stride(const amx_job *j) {
    const int64_t Wp = plane_cols(j), off = (j->R - 1) / j->sh * Wp + (j->S - 1) / j->sw;
    return max64(plane_rows(j) * Wp, ceil_div64(flat_blocks(j), 2) * 32 + off);
}

static size_t planes_nbytes(const amx_job *j) {
    const int64_t npb = pairs_per_block(j->Ci), pairs = ceil_div64((j->Ci + 1) / 2, npb) * npb;
    return (size_t)(pairs * phases(j) * plane_stride(j)) * 4;
}

/* Multiply-adds below which a pass runs on one thread: the tile unit does 2^24 in about 80 us on one thread
 * (the UNet's layers ran near 200 G/s), what waking a passive OpenMP thread costs. MobileNetV2's 1x1 layers at
 * batch 2 (2 threads, wall time) took 0.15-0.25 ms a pass on two threads against 0.01-0.1 on one. */
#define AMX_GRAIN ((double)(1 << 24))

static double macs_of(const amx_job *j) {
    return (double)j->N * (double)j->Co * (double)j->Ci * (double)(j->R * j->S) * (double)(j->P * j->Q);
}

static int threads_of(const amx_job *j, int nthreads) {
    return macs_of(j) < AMX_GRAIN ? 1 : (int)max64(1, min64(nthreads, j->N));
}

/* Which passes take the tile unit: bfloat16 (conv_half.c asks for no other dtype), stride 1 (or 2 but for the
 * input-gradient), no dilation, one group, padding within the kernel (the input-gradient's padding R-1-ph must
 * not be negative). Measured against
 * the float32 passes, the former rule (direct route, bfloat16 products, small route; before gemm_bf16's AMX
 * kernel was reworked) and, after that rework, bfloat16 products (gemm_bf16), on the UNet's (batch 16), VGG-11's
 * and ResNet-18's (batch 2) layers (1 thread, CPU time, median of 7, interleaved; ms forward / input-gradient /
 * weight-gradient; the shapes of benchmarks/bf16_conv_routes.py):
 *   shape (N, C -> K, map)          float32         former rule     products        AMX
 *   UNet (16, 3 -> 16, 64)          0.77 0.99 0.74  0.81 0.95 0.78                  0.48 0.45 0.80
 *   UNet (16, 16 -> 16, 64)         1.91 1.92 2.61  2.15 2.19 2.59  4.31 4.26 -     0.72 0.70 0.86
 *   UNet (16, 48 -> 16, 64)         6.29 5.64 8.98  6.56 6.59 9.32                  2.04 1.58 1.88
 *   UNet (16, 32 -> 32, 32)         1.93 1.93 1.92  2.04 1.99 1.91  2.88 3.92 -     0.42 0.40 0.57
 *   UNet (16, 64 -> 64, 16)         1.31 1.32 1.67  1.42 1.33 1.62  2.36 2.75 -     0.54 0.50 0.42
 *   UNet (16, 128 -> 128, 8)        1.47 1.44 1.62  1.54 1.50 1.75  2.24 2.49 -     0.56 0.51 0.55
 *   UNet (16, 16 -> 3, 64) 1x1      0.20 0.19 0.19  0.27 0.51 0.25                  0.22 0.22 0.32
 *   VGG (2, 3 -> 64, 64)            0.33 0.42 0.45  0.49 0.40 0.26  0.21 0.15 0.20  0.23 0.25 0.29
 *   VGG (2, 64 -> 128, 32)          0.99 1.06 1.58  1.36 1.32 1.91  0.66 0.70 0.63  0.34 0.29 0.34
 *   VGG (2, 256 -> 256, 16)         2.54 2.63 3.51  2.96 2.85 4.11  1.24 1.41 1.30  0.71 0.73 0.95
 *   VGG (2, 256 -> 512, 8)          2.48 2.52 1.93  ~1.3 1.9 2.2   0.61 1.24 1.17  0.87 0.89 0.93
 *   VGG (2, 512 -> 512, 8)          4.88 5.40 3.84  2.12 2.71 4.63  1.35 2.55 2.56  1.73 1.77 1.54
 *   VGG (2, 512 -> 512, 4)          1.95 2.40 1.51  1.64 2.22 2.31  0.77 1.89 2.94  1.33 1.48 1.63
 *   ResNet-18 l1 (2, 64 -> 64, 16)  0.18 0.16 0.22  0.21 0.19 0.26  0.22 0.23 0.22  0.08 0.07 0.06
 *   ResNet-18 l2 (2, 128 -> 128, 8) 0.28 0.27 0.35  0.40 0.33 0.40  0.22 0.24 0.24  0.12 0.11 0.10
 *   ResNet-18 l3 (2, 256 -> 256, 4) 0.45 0.47 0.41  0.67 0.65 0.59  0.27 0.45 0.73  0.32 0.31 0.30
 *   MobileNetV2 1x1 (2, 576 -> 96, 4) 0.03 0.02 0.03                0.01 0.07 0.09  0.03 0.06 0.04
 * so every backward pass where it applies but those of 3 input channels into 32 or more (products: the VGG's
 * first layer), and the forward where the batch has 256 positions or more, or 64 or more and a weight of at
 * most 2^18 elements: with fewer the weight's packing (per call; element by element for a 3x3) is the work and
 * gemm_bf16 packs faster. The small route (conv_half_small.c, <= 16 positions) is asked first for the backward
 * passes. Strides of 2 (the forward and weight-gradient, over the input's phases; ms forward / weight-gradient,
 * products against AMX): the UNet's 2x2/2 transposed convolutions' backward (as conv2d, batch 16, 64 -> 128 on
 * 16x16) 0.47 0.50 against 0.35 0.27, (32 -> 64 on 32x32) 0.52 0.49 against 0.36 0.38, (16 -> 32 on 64x64) 1.01
 * 0.92 against 0.58 0.59; ResNet-18's 7x7/2 stem 0.32 0.31 against 0.25 0.31, 3x3/2 64 -> 128 0.12 0.13 against
 * 0.09 0.09, 128 -> 256 (forward on products by the rule above) 0.29 against 0.21 weight-gradient; its 1x1/2
 * 64 -> 128 0.02 0.02 against 0.03 0.03 (so not those). GPUMEMNET_BF16_CONV=amx takes this route wherever it
 * applies (and passes over the small route); =gemm, =widen and =direct (the other routes' switches) never. */
int conv_half_amx_use(const conv_geom *g, conv_pass pass) {
    const char *e = getenv("GPUMEMNET_BF16_CONV");
    if (e && (strcmp(e, "gemm") == 0 || strcmp(e, "widen") == 0 || strcmp(e, "direct") == 0)) return 0;
    /* strides of 2: the forward and weight-gradient over the input's phases (see plane_stride) */
    if (g->sh < 1 || g->sh > 2 || g->sw < 1 || g->sw > 2 || g->dh != 1 || g->dw != 1 || g->G != 1) return 0;
    if (pass == CONV_BACKWARD_DATA && (g->sh != 1 || g->sw != 1)) return 0;
    /* (a strided 1x1 reads one phase of four: products, measured below) */
    if (g->ph > g->R - 1 || g->pw > g->S - 1 || g->N < 1 || g->C < 1 || g->K < 1 || g->P < 1 || g->Q < 1) return 0;
    if (g->R * g->S > 64 || !conv_half_amx_usable()) return 0;
    const amx_job j = job_of(g, pass == CONV_BACKWARD_WEIGHT ? CONV_FORWARD : pass);
    if (plane_rows(&j) * plane_cols(&j) > 1 << 24 || g->C > 1 << 16) return 0;
    if (e && strcmp(e, "amx") == 0) return 1;
    /* a forward of few positions in the batch for its weight: the weight's packing (per call; element-wise for a
     * 3x3) is then the work, which gemm_bf16's AMX kernel does faster (see above) */
    const int64_t NPQ = g->N * g->P * g->Q;
    if (pass == CONV_FORWARD && NPQ < 256 && (g->K * g->C * g->R * g->S > 1 << 18 || NPQ < 64)) return 0;
    /* 3 input channels and 32 or more output channels: products of few rows, where gemm_bf16 won */
    if (pass != CONV_FORWARD && g->C < 8 && g->K >= 32) return 0;
    if (g->R * g->S == 1 && (g->sh > 1 || g->sw > 1)) return 0;
    return 1;
}

static size_t wgrad_nbytes(const conv_geom *g);

size_t conv_half_amx_nbytes(const conv_geom *g, conv_pass pass, int nthreads) {
    if (!conv_half_amx_use(g, pass)) return 0;
    if (pass == CONV_BACKWARD_WEIGHT) return wgrad_nbytes(g);
    const amx_job j = job_of(g, pass);
    return align64(weight_nbytes(&j)) + (size_t)threads_of(&j, nthreads) * align64(planes_nbytes(&j));
}

/* The weight as A tiles: wp[rs][kb][cb] is 16 rows (output channels) x 2 npb bfloat16 (input channels), zero past
 * the layer's. Forward: element (o, i, r, s) of the job is w[o][i][r][s]; input-gradient: w[i][o][R-1-r][S-1-s].
 * Each (o, i) reads its R x S taps as stored, one run, and writes them to the R x S tiles: an element-wise walk
 * in the tiles' order (reading 9 elements apart) cost 3 ms of a 512 -> 512 3x3 layer's 3.2. */
static void pack_weight(uint16_t *wp, const uint16_t *w, const amx_job *j, conv_pass pass, int nt) {
    const int64_t RS = j->R * j->S, npb = pairs_per_block(j->Ci), cbn = ceil_div64((j->Ci + 1) / 2, npb);
    const int64_t kbn = ceil_div64(j->Co, 16), blk = 16 * npb * 2, tap = kbn * cbn * blk; /* tiles of one tap */
    const int fwd = pass == CONV_FORWARD;
    if (RS == 1) { /* 1x1: a tile's row is a run of the weight's row (forward) or column (input-gradient) */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
        for (int64_t t = 0; t < kbn * cbn; t++) {
            const int64_t kb = t / cbn, cb = t % cbn, i0 = cb * 2 * npb, ni = min64(2 * npb, j->Ci - i0);
            uint16_t *d = wp + t * blk;
            for (int64_t row = 0; row < 16; row++) {
                const int64_t o = kb * 16 + row;
                uint16_t *dr = d + row * 2 * npb;
                if (o >= j->Co || ni <= 0) {
                    memset(dr, 0, (size_t)(2 * npb) * 2);
                    continue;
                }
                if (fwd) memcpy(dr, w + o * j->Ci + i0, (size_t)ni * 2);
                else for (int64_t c = 0; c < ni; c++) dr[c] = w[(i0 + c) * j->Co + o];
                memset(dr + ni, 0, (size_t)(2 * npb - ni) * 2);
            }
        }
        return;
    }
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t t = 0; t < kbn * cbn; t++) {
        const int64_t kb = t / cbn, cb = t % cbn;
        uint16_t *d = wp + t * blk;
        for (int64_t row = 0; row < 16; row++) {
            const int64_t o = kb * 16 + row;
            for (int64_t col = 0; col < 2 * npb; col++) {
                const int64_t i = cb * 2 * npb + col, e = row * 2 * npb + col;
                if (o >= j->Co || i >= j->Ci) {
                    for (int64_t rs = 0; rs < RS; rs++) d[rs * tap + e] = 0;
                } else if (fwd) {
                    const uint16_t *src = w + (o * j->Ci + i) * RS;
                    for (int64_t rs = 0; rs < RS; rs++) d[rs * tap + e] = src[rs];
                } else { /* the taps flipped: (r, s) -> (R-1-r, S-1-s) is rs -> RS-1-rs */
                    const uint16_t *src = w + (i * j->Co + o) * RS;
                    for (int64_t rs = 0; rs < RS; rs++) d[rs * tap + e] = src[RS - 1 - rs];
                }
            }
        }
    }
}

/* One item's pair planes (see the top): xp[i][h][w] at xp + i * plane_stride + h * Wp + w; rows of contiguous
 * channels interleaved 32 elements at a time (element-wise, this packing cost as much as a 16-channel layer's
 * products). */
__attribute__((target("avx512f,avx512bw"))) static void pack_planes(uint32_t *xp, const uint16_t *x,
                                                                     const amx_job *j) {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    const int64_t npb = pairs_per_block(j->Ci), pairs = ceil_div64((j->Ci + 1) / 2, npb) * npb;
    const int64_t Hp = plane_rows(j), Wp = plane_cols(j), PS = plane_stride(j), nph = phases(j);
    memset(xp, 0, (size_t)(pairs * nph * PS) * 4);
    for (int64_t i = 0; i < pairs && 2 * i < j->Ci; i++) {
        const uint16_t *c0 = x + 2 * i * j->is[1], *c1 = c0 + j->is[1];
        const int has1 = 2 * i + 1 < j->Ci;
        for (int64_t h = 0; h < j->H; h++) {
            const int64_t hh = h + j->ph;
            if (hh / j->sh >= Hp) break;
            const uint16_t *a = c0 + h * j->is[2], *b = c1 + h * j->is[2];
            if (j->sw == 2 || j->sh == 2) { /* phase (hh % sh, ww % sw) at (hh / sh, ww / sw) */
                uint32_t *d = xp + (i * nph + hh % j->sh * j->sw) * PS + hh / j->sh * Wp;
                for (int64_t ph = 0; ph < j->sw; ph++) { /* column phase ph: ww = v * sw + ph, w = ww - pw */
                    uint32_t *dp = d + ph * PS;
                    const int64_t v0 = j->pw > ph ? (j->pw - ph + j->sw - 1) / j->sw : 0;
                    const int64_t v1 = min64(Wp, (j->W - 1 + j->pw - ph) / j->sw + 1); /* w < W */
                    const int64_t st = j->sw * j->is[3];
                    const uint16_t *pa = a + (v0 * j->sw + ph - j->pw) * j->is[3];
                    const uint16_t *pb = b + (v0 * j->sw + ph - j->pw) * j->is[3];
                    if (has1)
                        for (int64_t v = v0; v < v1; v++, pa += st, pb += st)
                            dp[v] = (uint32_t)*pa | (uint32_t)*pb << 16;
                    else
                        for (int64_t v = v0; v < v1; v++, pa += st) dp[v] = (uint32_t)*pa;
                }
                continue;
            }
            uint32_t *d = xp + i * PS + hh * Wp + j->pw;
            const int64_t w1 = min64(j->W, Wp - j->pw);
            if (has1 && j->is[3] == 1) {
                int64_t w = 0;
                for (; w + 32 <= w1; w += 32) { /* word w = (a[w], b[w]): a in the low half */
                    const __m512i va = _mm512_loadu_si512(a + w), vb = _mm512_loadu_si512(b + w);
                    _mm512_storeu_si512(d + w, _mm512_permutex2var_epi16(va, lo, vb));
                    _mm512_storeu_si512(d + w + 16, _mm512_permutex2var_epi16(va, hi, vb));
                }
                for (; w < w1; w++) d[w] = (uint32_t)a[w] | (uint32_t)b[w] << 16;
            } else
                for (int64_t w = 0; w < w1; w++)
                    d[w] = (uint32_t)a[w * j->is[3]] | (has1 ? (uint32_t)b[w * j->is[3]] << 16 : 0);
        }
    }
}

struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64)));

/* Tiles 0-3: accumulators (16 x 16 float32); 4 and (two_a) 5: A (16 x 2 npb bfloat16); 6, 7 and (!two_a) 5: B
 * (npb pairs x 16). */
__attribute__((target("amx-tile,amx-bf16"))) static void configure(int64_t npb, int two_a) {
    struct amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        const int a = t == 4 || (t == 5 && two_a);
        cfg.rows[t] = (uint8_t)(t >= 5 && !a ? npb : 16);
        cfg.colsb[t] = (uint16_t)(a ? npb * 4 : 64);
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg)); /* not _tile_loadconfig: see gemm_bf16.c */
}

/* rows (kn) of acc (32 flat positions from f0 each, 32 apart) plus the bias, rounded into the output planes: the
 * positions with q < Q only, a masked store per run of one output row (a call of gm_cvt_f32_to_bf16 per run
 * cost about as much as the products of a 16-channel layer). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void store_block(uint16_t *out, const float *acc,
                                                                            int64_t kn, int64_t k0, int64_t f0,
                                                                            const uint16_t *bias, const amx_job *j) {
    const int64_t Wp = plane_cols(j), PQ = j->P * j->Q, fend = min64(f0 + 32, (j->P - 1) * Wp + j->Q);
    for (int64_t k = 0; k < kn; k++) {
        __m512 v0 = _mm512_load_ps(acc + k * 32), v1 = _mm512_load_ps(acc + k * 32 + 16);
        if (bias) {
            const __m512 bv = _mm512_set1_ps(gm_bf16_to_float(bias[k0 + k]));
            v0 = _mm512_add_ps(v0, bv);
            v1 = _mm512_add_ps(v1, bv);
        }
        const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(gm_bf16_narrow16(_mm512_castps_si512(v0))),
                                             gm_bf16_narrow16(_mm512_castps_si512(v1)), 1);
        uint16_t *o = out + (k0 + k) * PQ;
        for (int64_t f = f0; f < fend;) { /* runs of one output row: lanes [f - f0, f - f0 + n) */
            const int64_t p = f / Wp, q = f - p * Wp, n = min64(fend, p * Wp + j->Q) - f;
            if (n > 0) {
                const int64_t i0 = f - f0;
                const __mmask32 m = (__mmask32)((((uint64_t)1 << n) - 1) << i0);
                _mm512_mask_storeu_epi16(o + p * j->Q + q - i0, m, h); /* lanes outside m are not touched */
            }
            f = (p + 1) * Wp;
        }
    }
}

/* One item: out (Co planes of P x Q, contiguous) = the job's convolution of the item's pair planes. A pair of
 * 16-channel blocks of the weight (all taps: 2 x 9 x 16 x 2 KiB at 512 channels) stays in L2 while it meets every
 * position of the item, two blocks of 16 positions at a time. */
__attribute__((target("avx512f,avx512bw,amx-tile,amx-bf16"))) static void item_amx(
    uint16_t *out, const uint32_t *xp, const uint16_t *wp, const uint16_t *bias, const amx_job *j) {
    const int64_t npb = pairs_per_block(j->Ci), cbn = ceil_div64((j->Ci + 1) / 2, npb), kbn = ceil_div64(j->Co, 16);
    const int64_t Wp = plane_cols(j), nph = phases(j), PS = plane_stride(j), RS = j->R * j->S, nblk = flat_blocks(j);
    const int64_t blk = 16 * npb * 2, lda = npb * 4, ldb = nph * PS * 4, CS = npb * nph * PS; /* CS: a block */
    float acc[32 * 32] __attribute__((aligned(64)));
    if (kbn == 1) { /* 16 output channels or fewer: 4 blocks of positions, so that 4 sums are in flight (2 left
                     * the products waiting on each other: the UNet's 16 -> 16 on 64x64 ...) */
        for (int64_t bi = 0; bi < nblk; bi += 4) {
            const int64_t nq = min64(4, nblk - bi);
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t rs = 0; rs < RS; rs++) {
                const int64_t r = rs / j->S, s = rs % j->S;
                const uint16_t *a = wp + rs * cbn * blk;
                const uint32_t *b = xp + (r % j->sh * j->sw + s % j->sw) * PS + bi * 16 + r / j->sh * Wp + s / j->sw;
                for (int64_t cb = 0; cb < cbn; cb++, b += CS) {
                    _tile_loadd(4, a + cb * blk, lda);
                    _tile_loadd(5, b, ldb);
                    _tile_dpbf16ps(0, 4, 5);
                    if (nq > 1) {
                        _tile_loadd(6, b + 16, ldb);
                        _tile_dpbf16ps(1, 4, 6);
                    }
                    if (nq > 2) {
                        _tile_loadd(7, b + 32, ldb);
                        _tile_dpbf16ps(2, 4, 7);
                    }
                    if (nq > 3) {
                        _tile_loadd(5, b + 48, ldb);
                        _tile_dpbf16ps(3, 4, 5);
                    }
                }
            }
            /* blocks 0, 1 to acc's columns 0-31, blocks 2, 3 to rows 16-31 (stored as the next 32 positions) */
            _tile_stored(0, acc, 128);
            _tile_stored(1, acc + 16, 128);
            _tile_stored(2, acc + 16 * 32, 128);
            _tile_stored(3, acc + 16 * 32 + 16, 128);
            const int64_t kn = j->Co;
            store_block(out, acc, kn, 0, bi * 16, bias, j);
            if (nq > 2) store_block(out, acc + 16 * 32, kn, 0, bi * 16 + 32, bias, j);
        }
        return;
    }
    for (int64_t kb = 0; kb < kbn; kb += 2) {
        const int k2 = kb + 1 < kbn;
        for (int64_t bi = 0; bi < nblk; bi += 2) {
            const int q2 = bi + 1 < nblk;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t rs = 0; rs < RS; rs++) {
                const int64_t r = rs / j->S, s = rs % j->S;
                const uint16_t *a = wp + (rs * kbn + kb) * cbn * blk;
                const uint32_t *b = xp + (r % j->sh * j->sw + s % j->sw) * PS + bi * 16 + r / j->sh * Wp + s / j->sw;
                for (int64_t cb = 0; cb < cbn; cb++) {
                    _tile_loadd(4, a + cb * blk, lda);
                    _tile_loadd(6, b + cb * CS, ldb);
                    _tile_dpbf16ps(0, 4, 6);
                    if (q2) {
                        _tile_loadd(7, b + cb * CS + 16, ldb);
                        _tile_dpbf16ps(1, 4, 7);
                    }
                    if (k2) {
                        _tile_loadd(5, a + (cbn + cb) * blk, lda);
                        _tile_dpbf16ps(2, 5, 6);
                        if (q2) _tile_dpbf16ps(3, 5, 7);
                    }
                }
            }
            _tile_stored(0, acc, 128);
            _tile_stored(1, acc + 16, 128);
            _tile_stored(2, acc + 16 * 32, 128);
            _tile_stored(3, acc + 16 * 32 + 16, 128);
            store_block(out, acc, min64(32, j->Co - kb * 16), kb * 16, bi * 16, bias, j);
        }
    }
}

__attribute__((target("amx-tile"))) static void release(void) { _tile_release(); }

static int run(uint16_t *out, const uint16_t *in, const uint16_t *w, const uint16_t *bias, const conv_geom *g,
               conv_pass pass, void *ws, int nthreads) {
    const amx_job j = job_of(g, pass);
    const int nt = threads_of(&j, nthreads);
    uint16_t *wp = ws;
    char *planes = (char *)ws + align64(weight_nbytes(&j));
    const size_t pn = align64(planes_nbytes(&j));
    const int64_t outn = j.Co * j.P * j.Q;
    pack_weight(wp, w, &j, pass, nt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int t = omp_get_thread_num();
        uint32_t *xp = (uint32_t *)(planes + (size_t)t * pn);
        configure(pairs_per_block(j.Ci), ceil_div64(j.Co, 16) > 1);
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < j.N; n++) {
            pack_planes(xp, in + n * j.is[0], &j);
            item_amx(out + n * outn, xp, wp, bias, &j);
        }
        release(); /* a configured tile state makes every context switch save 8 KiB */
    }
    return GM_OK;
}

int conv_half_amx_forward(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                          const conv_geom *g, void *ws, int nthreads) {
    return run(out, x, w, bias, g, CONV_FORWARD, ws, nthreads);
}

int conv_half_amx_backward_data(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                const conv_geom *g, void *ws, int nthreads) {
    return run(dx, dout, w, bias, g, CONV_BACKWARD_DATA, ws, nthreads);
}

/* ---- the weight-gradient: dw[k][c][r][s] = the sum over items and positions of grad_output[k][p][q] times
 * x[c][p + r - ph][q + s - pw], in float32, rounded once. The transposed product dw'[c][k] of each tap, with the
 * positions laid out "flat" as above (f = p * Wp + q): A is the padded input, xp[c][f'] (f' = h' * Wp + w'), 16
 * channels x the 32 positions from f + r * Wp + s, a tile load from a row at any offset; B is grad_output as
 * pairs of positions per output channel, gt[m][k] = (go[k][2m], go[k][2m + 1]) with go[k][f] zero where q >= Q
 * and past the map (those positions add nothing), 16 pairs x 16 channels. Only grad_output is transposed (16 x
 * 16 words at a time) and the input is copied row by row: no im2col. Items are packed a group at a time (about
 * WG_GROUP_TARGET bytes, at least one item); the float32 sums dw32[rs][c][k] are loaded into the accumulator
 * tiles once per group, summed over its items' positions and stored, the threads sharing the tiles; dw32 is laid
 * out [c][rs][k], so that its conversion to dw's [k][c][rs] is a transpose of (C x RS) x K, 16 x 16 at a time. */
#define WG_GROUP_TARGET ((size_t)2 << 20)

typedef struct {
    /* flat columns, positions summed per item, xp's row (of one phase), padded K and C, items a group, phases
     * (sh x sw: a strided layer's input is split as the forward's, see plane_stride) */
    int64_t Wp, F, Lx, kp, cp, nb, nph;
} wg_geom;

static size_t wg_item_nbytes(const wg_geom *w) {
    return align64((size_t)(w->cp * w->nph * w->Lx) * 2 + (size_t)(w->F * w->kp) * 2);
}

static wg_geom wg_of(const conv_geom *g) {
    wg_geom w;
    w.nph = g->sh * g->sw;
    w.Wp = g->Q + (g->S - 1) / g->sw;
    w.F = ceil_div64(g->P * w.Wp, 32) * 32;
    w.Lx = ceil_div64(w.F + (g->R - 1) / g->sh * w.Wp + (g->S - 1) / g->sw, 32) * 32;
    w.kp = ceil_div64(g->K, 16) * 16;
    w.cp = ceil_div64(g->C, 16) * 16;
    w.nb = max64(1, min64(g->N, (int64_t)(WG_GROUP_TARGET / wg_item_nbytes(&w))));
    return w;
}

static size_t wgrad_nbytes(const conv_geom *g) {
    const wg_geom w = wg_of(g);
    return align64((size_t)(g->R * g->S * w.kp * w.cp) * 4) + (size_t)w.nb * wg_item_nbytes(&w);
}

/* Item n's padded input rows xp[c][phase] (Lx elements; the padding and the channels past C stay zero). */
static void wg_pack_x(uint16_t *xp, const uint16_t *x, const conv_geom *g, const wg_geom *w, int64_t c) {
    uint16_t *d = xp + c * w->nph * w->Lx;
    const uint16_t *xc = x + c * g->xs[1];
    if (w->nph > 1) { /* phase (hh % sh, ww % sw) at (hh / sh, ww / sw) */
        for (int64_t h = 0; h < g->H; h++) {
            const int64_t hh = h + g->ph;
            const int64_t u = hh / g->sh;
            uint16_t *o = d + hh % g->sh * g->sw * w->Lx + u * w->Wp;
            const uint16_t *row = xc + h * g->xs[2];
            for (int64_t ph = 0; ph < g->sw; ph++) { /* column phase ph: ww = v * sw + ph, i = ww - pw */
                const int64_t v0 = g->pw > ph ? (g->pw - ph + g->sw - 1) / g->sw : 0;
                const int64_t v1 = min64(min64(w->Wp, w->Lx - u * w->Wp), (g->W - 1 + g->pw - ph) / g->sw + 1);
                const int64_t st = g->sw * g->xs[3];
                const uint16_t *src = row + (v0 * g->sw + ph - g->pw) * g->xs[3];
                for (int64_t v = v0; v < v1; v++, src += st) o[ph * w->Lx + v] = *src;
            }
        }
        return;
    }
    const int64_t n = min64(g->W, w->Wp - g->pw);
    for (int64_t h = 0; h < g->H && (h + g->ph) * w->Wp + g->pw + n <= w->Lx; h++) {
        uint16_t *o = d + (h + g->ph) * w->Wp + g->pw;
        const uint16_t *row = xc + h * g->xs[2];
        if (g->xs[3] == 1) memcpy(o, row, (size_t)n * 2);
        else for (int64_t i = 0; i < n; i++) o[i] = row[i * g->xs[3]];
    }
}

/* gt's block of output channels [16 kb, 16 kb + 16) for all F / 2 pairs: 16 rows x 32 positions of the flat
 * grad_output staged, then transposed as 16 x 16 words (pairs of positions) into 16 rows of gt, kp words apart. */
__attribute__((target("avx512f"))) static void wg_pack_go(uint32_t *gt, const uint16_t *dout, const conv_geom *g,
                                                          const wg_geom *w, int64_t kb) {
    const int64_t PQ = g->P * g->Q;
    uint16_t st[16][32] __attribute__((aligned(64)));
    for (int64_t f0 = 0; f0 < w->F; f0 += 32) {
        const int64_t p0 = f0 / w->Wp, q0 = f0 - p0 * w->Wp;
        for (int64_t i = 0; i < 16; i++) {
            const int64_t k = kb * 16 + i;
            if (k >= g->K) {
                memset(st[i], 0, sizeof st[i]);
                continue;
            }
            const uint16_t *src = dout + k * PQ;
            for (int64_t j = 0, p = p0, q = q0; j < 32;) { /* runs of one row, then its S - 1 zero columns */
                const int64_t n = min64(32 - j, q < g->Q ? g->Q - q : w->Wp - q);
                if (q < g->Q && p < g->P) memcpy(st[i] + j, src + p * g->Q + q, (size_t)n * 2);
                else memset(st[i] + j, 0, (size_t)n * 2);
                j += n;
                q += n;
                if (q == w->Wp) q = 0, p++;
            }
        }
        __m512i r[16], o[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_load_si512(st[i]);
        transpose_words16(o, r);
        uint32_t *d = gt + (f0 / 2) * w->kp + kb * 16;
        for (int i = 0; i < 16; i++) _mm512_storeu_si512(d + i * w->kp, o[i]);
    }
}

/* dw32's 2 x 2 tiles of 16 x 16 at tap rs, rows (input channels) cb.., columns (output channels) kb.. += the
 * group's (gn items) sums. */
__attribute__((target("avx512f,avx512bw,amx-tile,amx-bf16"))) static void wg_unit(
    float *dw32, const char *items, int64_t gn, int first, const conv_geom *g, const wg_geom *w, int64_t rs,
    int64_t cb, int64_t kb) {
    const int64_t kbn = w->kp / 16, cbn = w->cp / 16, r = rs / g->S, s = rs % g->S, XL = w->nph * w->Lx;
    const int64_t off = (r % g->sh * g->sw + s % g->sw) * w->Lx + r / g->sh * w->Wp + s / g->sw;
    const int c2 = cb + 1 < cbn, k2 = kb + 1 < kbn;
    const int64_t RS = g->R * g->S, ldc = RS * w->kp * 4, lda = XL * 2, ldb = w->kp * 4;
    const int64_t in = (int64_t)wg_item_nbytes(w);
    float *c = dw32 + (cb * 16 * RS + rs) * w->kp + kb * 16;
    if (first) { /* the first group's sums start at zero: dw32 is neither cleared nor read */
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, c, ldc);
        if (k2) _tile_loadd(1, c + 16, ldc);
        if (c2) _tile_loadd(2, c + 16 * RS * w->kp, ldc);
        if (c2 && k2) _tile_loadd(3, c + 16 * RS * w->kp + 16, ldc);
    }
    for (int64_t n = 0; n < gn; n++) {
        const uint16_t *xa = (const uint16_t *)(items + n * in) + cb * 16 * XL + off;
        const uint32_t *gb = (const uint32_t *)(items + n * in + w->cp * XL * 2) + kb * 16;
        for (int64_t f = 0; f < w->F; f += 32) {
            _tile_loadd(4, xa + f, lda);
            _tile_loadd(6, gb + f / 2 * w->kp, ldb);
            _tile_dpbf16ps(0, 4, 6);
            if (k2) {
                _tile_loadd(7, gb + f / 2 * w->kp + 16, ldb);
                _tile_dpbf16ps(1, 4, 7);
            }
            if (c2) {
                _tile_loadd(5, xa + 16 * XL + f, lda);
                _tile_dpbf16ps(2, 5, 6);
                if (k2) _tile_dpbf16ps(3, 5, 7);
            }
        }
    }
    _tile_stored(0, c, ldc);
    if (k2) _tile_stored(1, c + 16, ldc);
    if (c2) _tile_stored(2, c + 16 * RS * w->kp, ldc);
    if (c2 && k2) _tile_stored(3, c + 16 * RS * w->kp + 16, ldc);
}

/* dw[k][j] = dw32[j][k] rounded (j = c * RS + rs), k in [k0, k0 + 16) and j in [j0, j0 + 16): 16 rows of dw32
 * (it holds whole blocks: cp * RS rows of kp) transposed in registers and rounded as gm_float_to_bf16 (an
 * element-wise walk cost 0.4 ms of a 256 -> 256 3x3 weight-gradient's 0.7). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void wg_store(uint16_t *dw, const float *dw32, int64_t k0,
                                                                          int64_t j0, int64_t K, int64_t CRS,
                                                                          int64_t kp) {
    __m512i r[16], o[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(dw32 + (j0 + i) * kp + k0);
    transpose_words16(o, r);
    const int64_t jn = min64(16, CRS - j0);
    const __mmask16 m = (__mmask16)((1u << jn) - 1); /* jn 16: all 16 lanes */
    for (int64_t i = 0; i < 16 && k0 + i < K; i++)
        _mm256_mask_storeu_epi16(dw + (k0 + i) * CRS + j0, m, gm_bf16_narrow16(o[i]));
}

int conv_half_amx_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g, void *ws,
                                  int nthreads) {
    const wg_geom w = wg_of(g);
    const int64_t RS = g->R * g->S, kbn = w.kp / 16, cbn = w.cp / 16, CRS = g->C * RS;
    const int64_t units = RS * ceil_div64(kbn, 2) * ceil_div64(cbn, 2), in = (int64_t)wg_item_nbytes(&w);
    float *dw32 = ws;
    char *items = (char *)ws + align64((size_t)(RS * w.kp * w.cp) * 4);
    const amx_job jf = job_of(g, CONV_FORWARD);
    const int nt = macs_of(&jf) < AMX_GRAIN ? 1 : (int)max64(1, min64(nthreads, units));
    /* with 32 x 32-channel blocks enough for the threads, a unit takes a block's taps and rounds its part of dw
     * while its float32 sums are in cache: a pass over all of dw32 after the products (9 MiB at 512 -> 512 3x3)
     * cost a third of VGG's 512 -> 512 at 8x8, batch 2 (1 thread, CPU time: 2.42 -> 1.54 ms; at 4x4 2.32 ->
     * 1.63, ResNet-18's 256 -> 256 at 4x4 0.53 -> 0.30) */
    const int64_t kh = ceil_div64(kbn, 2), ch = ceil_div64(cbn, 2);
    const int fused = kh * ch >= 4 * nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        configure(16, 1);
        for (int64_t n0 = 0; n0 < g->N; n0 += w.nb) {
            const int64_t gn = min64(w.nb, g->N - n0);
#pragma omp for schedule(static)
            for (int64_t i = 0; i < gn; i++) memset(items + i * in, 0, (size_t)(w.cp * w.nph * w.Lx) * 2);
#pragma omp for schedule(static) nowait
            for (int64_t t = 0; t < gn * g->C; t++)
                wg_pack_x((uint16_t *)(items + t / g->C * in), x + (n0 + t / g->C) * g->xs[0], g, &w, t % g->C);
#pragma omp for schedule(static)
            for (int64_t t = 0; t < gn * kbn; t++)
                wg_pack_go((uint32_t *)(items + t / kbn * in + w.cp * w.nph * w.Lx * 2),
                           dout + (n0 + t / kbn) * g->K * g->P * g->Q, g, &w, t % kbn);
            if (fused) { /* a unit: all taps of 32 x 32 channels, rounded into dw after the last group */
                const int last = n0 + gn >= g->N;
#pragma omp for schedule(dynamic)
                for (int64_t u = 0; u < kh * ch; u++) {
                    const int64_t kb = u % kh * 2, cb = u / kh * 2;
                    for (int64_t rs = 0; rs < RS; rs++) wg_unit(dw32, items, gn, n0 == 0, g, &w, rs, cb, kb);
                    const int64_t j1 = min64(CRS, (cb + 2) * 16 * RS);
                    for (int64_t j0 = cb * 16 * RS; last && j0 < j1; j0 += 16)
                        for (int64_t k0 = kb * 16; k0 < min64(g->K, kb * 16 + 32); k0 += 16)
                            wg_store(dw, dw32, k0, j0, g->K, CRS, w.kp);
                }
            } else {
#pragma omp for schedule(dynamic)
                for (int64_t u = 0; u < units; u++) {
                    const int64_t rs = u % RS, cc = u / RS;
                    wg_unit(dw32, items, gn, n0 == 0, g, &w, rs, cc / kh * 2, cc % kh * 2);
                }
            }
        }
        release();
        const int64_t jb = ceil_div64(CRS, 16);
#pragma omp for schedule(static)
        for (int64_t b = 0; b < (fused ? 0 : kbn * jb); b++)
            wg_store(dw, dw32, b / jb * 16, b % jb * 16, g->K, CRS, w.kp);
    }
    return GM_OK;
}
