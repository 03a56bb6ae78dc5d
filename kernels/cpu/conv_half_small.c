/* kernels/cpu/conv_half_small.c — the bfloat16 passes of convolutions with few output positions in the whole batch
 * (N x P x Q <= SMALL_COLS: ResNet-18's layer4 at 64x64 inputs, micro-batch 2, has 8), which read the bfloat16
 * weight once, as it is stored. Measured against the float16 route (widened weight, sgemm), median of per-round
 * ratios, forward / input-gradient / weight-gradient, 2 threads: layer4's 512->512 0.47 0.65 0.42, its strided
 * 256->512 0.34 0.62 0.46; at 32 positions (layer3, 256 at 4x4) it lost (1.5 1.7 1.2, best of 7, measured
 * before the input-gradient read the weight in row blocks: each row of the weight meets four blocks of 8
 * columns), so SMALL_COLS is 16. There the work is the weight's bytes: 2.4M elements for one of layer4's 3x3
 * convolutions against 38M multiply-adds; the other routes widened the weight to float32 and read it
 * again in sgemm (10 bytes an element a pass) or packed it per item for gemm_bf16, padding 4 positions to 32.
 *   forward:         out[k, j] = sum over c of w[k, c] col[c, j], the columns gathered transposed (j, c) so that
 *                    pairs along c are contiguous in both: vdpbf16ps on the weight's rows as they are stored.
 *   input-gradient:  dcol[c, j] = sum over k of w[k, c] grad_output[k, j]: 32 of w's columns widened per row k, a
 *                    float32 product per position; then col2im into the float32 input-gradient, rounded once.
 *   weight-gradient: dw[k, c] = sum over j of grad_output[k, j] col[c, j]: the columns widened (j, c), each row of
 *                    the weight-gradient summed in float32 and rounded once.
 * Each result is a float32 sum rounded once, as on the other routes. AVX-512 BF16 only (gemm_bf16_native); the
 * workspace is conv_half_small_nbytes (conv_plan.c plans it as the CPU runs it). */
#include "conv_internal.h"
#include "bf16_convert.h"
#include "gemm_bf16.h"

#include <immintrin.h>
#include <stdlib.h>

#define SMALL_COLS 16
#define CPAD 32 /* rows of the columns (c) padded to whole vectors of 32 bfloat16 */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

int conv_half_small_use(const conv_geom *g, conv_pass pass) {
    const char *e = getenv("GPUMEMNET_BF16_CONV");
    if (e && (strcmp(e, "gemm") == 0 || strcmp(e, "widen") == 0 || strcmp(e, "direct") == 0 ||
              strcmp(e, "amx") == 0)) /* amx: conv_half_amx.c wherever it applies */
        return 0;
    /* the forward on AMX: gemm_bf16's AMX kernel (since its rework) won (1 thread, CPU time, median of 9, ms,
     * small route against products): ResNet-18's 512 -> 512 3x3 at 2x2, batch 2, 0.64 against 0.66, its 3x3/2
     * 256 -> 512 0.39 against 0.29, 1x1/2 0.06 against 0.03; MobileNetV2's 1x1 160 -> 960 at 2x2 0.08 against
     * 0.02, 960 -> 160 0.10 against 0.03, 320 -> 1280 0.14 against 0.04. The backward passes stay here (the
     * same layers' input-gradient 1.38 against 1.84, weight-gradient 0.72 against 2.16) */
    if (pass == CONV_FORWARD && conv_half_amx_usable()) return 0;
    const int64_t J = g->N * g->P * g->Q, CRS = g->C * g->R * g->S;
    /* weight-bound: at least 64K elements, and columns enough to be worth a pass over it */
    return g->G == 1 && J >= 1 && J <= SMALL_COLS && g->K * CRS >= 65536 && gemm_bf16_native();
}

size_t conv_half_small_nbytes(const conv_geom *g, conv_pass pass) {
    if (!conv_half_small_use(g, pass)) return 0;
    const int64_t J = g->N * g->P * g->Q, JP = (J + 7) / 8 * 8, CRS = g->C * g->R * g->S;
    const int64_t CP = (CRS + CPAD - 1) / CPAD * CPAD, K = g->K;
    /* the forward and input-gradient pad the positions to JP, a multiple of 8, with zero columns */
    if (pass == CONV_FORWARD) return align64((size_t)(JP * CP) * 2) + (size_t)(K * JP) * sizeof(float);
    if (pass == CONV_BACKWARD_DATA)
        return align64((size_t)(K * JP) * sizeof(float)) + align64((size_t)(CRS * JP) * sizeof(float)) +
               (size_t)(g->N * g->C * g->H * g->W) * sizeof(float);
    return align64((size_t)(J * CP) * sizeof(float)) + align64((size_t)(K * J) * sizeof(float)) + (size_t)(J * CP) * 2;
}

/* colT[j][c] (rows CP apart, zero past CRS) = the columns of x (j = (n, p, q), c = (c, r, s)), as stored. */
static void gather_cols(uint16_t *colT, int64_t CP, const uint16_t *x, const conv_geom *g) {
    const int64_t PQ = g->P * g->Q, CRS = g->C * g->R * g->S, J = g->N * PQ;
    for (int64_t j = 0; j < J; j++) {
        const int64_t n = j / PQ, p = j % PQ / g->Q, q = j % g->Q;
        uint16_t *d = colT + j * CP;
        for (int64_t c = 0; c < CRS; c++) {
            const int64_t ch = c / (g->R * g->S), r = c / g->S % g->R, s = c % g->S;
            const int64_t h = p * g->sh - g->ph + r * g->dh, w = q * g->sw - g->pw + s * g->dw;
            d[c] = h < 0 || h >= g->H || w < 0 || w >= g->W ? 0
                                                           : x[n * g->xs[0] + ch * g->xs[1] + h * g->xs[2] + w * g->xs[3]];
        }
        for (int64_t c = CRS; c < CP; c++) d[c] = 0;
    }
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void forward_rows(float *outf, const uint16_t *w,
                                                                                 const uint16_t *colT, int64_t k0,
                                                                                 int64_t k1, int64_t CRS, int64_t CP,
                                                                                 int64_t J) {
    const int64_t full = CRS / 32;
    const __mmask32 tail = (__mmask32)((1ull << (CRS % 32)) - 1);
    for (int64_t k = k0; k < k1; k++) {
        const uint16_t *wr = w + k * CRS;
        for (int64_t j0 = 0; j0 < J; j0 += 8) {
            __m512 acc[8];
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
            for (int64_t i = 0; i <= full; i++) {
                if (i == full && !tail) break;
                const __m512bh wv = (__m512bh)(i < full ? _mm512_loadu_si512(wr + 32 * i)
                                                        : _mm512_maskz_loadu_epi16(tail, wr + 32 * i));
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++)
                    acc[t] = _mm512_dpbf16_ps(acc[t], wv,
                                              (__m512bh)_mm512_loadu_si512(colT + (j0 + t) * CP + 32 * i));
            }
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) outf[k * J + j0 + t] += _mm512_reduce_add_ps(acc[t]);
        }
    }
}

int conv_half_small_forward(uint16_t *out, const uint16_t *x, const uint16_t *w, const uint16_t *bias,
                            const conv_geom *g, void *ws, int nthreads) {
    const int64_t PQ = g->P * g->Q, J = g->N * PQ, JP = (J + 7) / 8 * 8, CRS = g->C * g->R * g->S;
    const int64_t CP = (CRS + CPAD - 1) / CPAD * CPAD, K = g->K;
    uint16_t *colT = ws; /* JP rows: those past J zero */
    float *outf = (float *)((char *)ws + align64((size_t)(JP * CP) * 2));
    gather_cols(colT, CP, x, g);
    memset(colT + J * CP, 0, (size_t)((JP - J) * CP) * 2);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < JP; j++) outf[k * JP + j] = bias ? gm_bf16_to_float(bias[k]) : 0.0f;
    const int nt = nthreads > 1 && K >= 2 * 16 ? nthreads : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t b = 0; b < (K + 15) / 16; b++)
        forward_rows(outf, w, colT, 16 * b, min64(K, 16 * b + 16), CRS, CP, JP);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < J; j++) out[(j / PQ * K + k) * PQ + j % PQ] = gm_float_to_bf16(outf[k * JP + j]);
    return GM_OK;
}

/* dcol[c][j] for c in [c0, c0 + 32) (c0 + 32 <= CRS or the tail masked) += the sum over k in [k0, k1) of
 * w[k, c] gk[k][j] (= when k0 is 0). The caller's blocks of KBLK rows per 32 columns read the weight a few whole
 * cache lines per row at a time (a pass of all K rows per 32 columns touched K lines at once, one per 9 KiB). */
#define KBLK 64
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void data_cols(float *dcol, const uint16_t *w,
                                                                              const float *gk, int64_t c0, int64_t CRS,
                                                                              int64_t k0, int64_t K, int64_t J) {
    const int64_t cn = CRS - c0 < 32 ? CRS - c0 : 32;
    const __mmask32 m = cn == 32 ? ~(__mmask32)0 : (__mmask32)((1u << cn) - 1);
    for (int64_t j0 = 0; j0 < J; j0 += 8) { /* J a multiple of 8 */
        __m512 acc[8][2];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
        for (int64_t k = k0; k < K; k++) {
            const __m512i raw = _mm512_maskz_loadu_epi16(m, w + k * CRS + c0);
            /* bfloat16 -> float32: the 16 bits become the upper half */
            const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(raw)), 16));
            const __m512 hi =
                _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(raw, 1)), 16));
            const float *gr = gk + k * J + j0;
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                const __m512 gv = _mm512_set1_ps(gr[t]);
                acc[t][0] = _mm512_fmadd_ps(lo, gv, acc[t][0]);
                acc[t][1] = _mm512_fmadd_ps(hi, gv, acc[t][1]);
            }
        }
        float buf[32];
        for (int t = 0; t < 8; t++) {
            _mm512_storeu_ps(buf, acc[t][0]);
            _mm512_storeu_ps(buf + 16, acc[t][1]);
            if (k0 == 0) for (int64_t c = 0; c < cn; c++) dcol[(c0 + c) * J + j0 + t] = buf[c];
            else for (int64_t c = 0; c < cn; c++) dcol[(c0 + c) * J + j0 + t] += buf[c];
        }
    }
}

int conv_half_small_backward_data(uint16_t *dx, const uint16_t *dout, const uint16_t *w, const uint16_t *bias,
                                  const conv_geom *g, void *ws, int nthreads) {
    const int64_t PQ = g->P * g->Q, J = g->N * PQ, JP = (J + 7) / 8 * 8, CRS = g->C * g->R * g->S, K = g->K;
    const int64_t HW = g->H * g->W;
    float *gk = ws, *dcol = (float *)((char *)ws + align64((size_t)(K * JP) * sizeof(float)));
    float *dx32 = (float *)((char *)dcol + align64((size_t)(CRS * JP) * sizeof(float)));
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < JP; j++)
            gk[k * JP + j] = j < J ? gm_bf16_to_float(dout[(j / PQ * K + k) * PQ + j % PQ]) : 0.0f;
    const int64_t nc = (CRS + 31) / 32;
    const int nt = nthreads > 1 && nc >= 4 ? nthreads : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t b = 0; b < nc; b++)
        for (int64_t k0 = 0; k0 < K; k0 += KBLK) data_cols(dcol, w, gk, 32 * b, CRS, k0, min64(K, k0 + KBLK), JP);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t i = 0; i < HW; i++) dx32[(n * g->C + c) * HW + i] = bias ? gm_bf16_to_float(bias[c]) : 0.0f;
    for (int64_t c = 0; c < CRS; c++) { /* col2im */
        const int64_t ch = c / (g->R * g->S), r = c / g->S % g->R, s = c % g->S;
        for (int64_t j = 0; j < J; j++) {
            const int64_t n = j / PQ, p = j % PQ / g->Q, q = j % g->Q;
            const int64_t h = p * g->sh - g->ph + r * g->dh, x = q * g->sw - g->pw + s * g->dw;
            if (h >= 0 && h < g->H && x >= 0 && x < g->W) dx32[(n * g->C + ch) * HW + h * g->W + x] += dcol[c * JP + j];
        }
    }
    gm_cvt_f32_to_bf16(dx, dx32, g->N * g->C * HW);
    return GM_OK;
}

/* dw's rows [k0, k0 + RB) (RB 4, or 1 for the rest): row k = sum over j of gk[k][j] colw[j] (float32 rows CP
 * apart), rounded once, 256 columns at a time; 4 rows x 32 columns keep 8 independent sums in flight (one sum
 * at a time waited on each multiply-add's latency: 3.4 ms for ResNet-18's layer3 at micro-batch 2). */
#define WEIGHT_ROWS(RB)                                                                                          \
    __attribute__((target("avx512f"))) static void weight_rows##RB(uint16_t *dw, const float *gk, const float *colw, \
                                                                    int64_t k0, int64_t CRS, int64_t CP, int64_t J) { \
        float row[RB][256];                                                                                      \
        for (int64_t c0 = 0; c0 < CRS; c0 += 256) {                                                              \
            const int64_t cn = CRS - c0 < 256 ? CRS - c0 : 256;                                                  \
            for (int64_t c = 0; c < cn; c += 32) { /* colw's rows are CP (a multiple of 32) >= c0 + c + 32 */    \
                __m512 acc[RB][2];                                                                               \
                for (int r = 0; r < RB; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();                        \
                for (int64_t j = 0; j < J; j++) {                                                                \
                    const __m512 a = _mm512_loadu_ps(colw + j * CP + c0 + c);                                    \
                    const __m512 b = _mm512_loadu_ps(colw + j * CP + c0 + c + 16);                               \
                    for (int r = 0; r < RB; r++) {                                                               \
                        const __m512 gv = _mm512_set1_ps(gk[(k0 + r) * J + j]);                                  \
                        acc[r][0] = _mm512_fmadd_ps(gv, a, acc[r][0]);                                           \
                        acc[r][1] = _mm512_fmadd_ps(gv, b, acc[r][1]);                                           \
                    }                                                                                            \
                }                                                                                                \
                for (int r = 0; r < RB; r++) {                                                                   \
                    _mm512_storeu_ps(row[r] + c, acc[r][0]);                                                     \
                    _mm512_storeu_ps(row[r] + c + 16, acc[r][1]);                                                \
                }                                                                                                \
            }                                                                                                    \
            for (int r = 0; r < RB; r++) gm_cvt_f32_to_bf16(dw + (k0 + r) * CRS + c0, row[r], cn);               \
        }                                                                                                        \
    }
WEIGHT_ROWS(4)
WEIGHT_ROWS(1)

int conv_half_small_backward_weight(uint16_t *dw, const uint16_t *dout, const uint16_t *x, const conv_geom *g,
                                    void *ws, int nthreads) {
    const int64_t PQ = g->P * g->Q, J = g->N * PQ, CRS = g->C * g->R * g->S, CP = (CRS + CPAD - 1) / CPAD * CPAD;
    const int64_t K = g->K;
    float *colw = ws, *gk = (float *)((char *)ws + align64((size_t)(J * CP) * sizeof(float)));
    uint16_t *colT = (uint16_t *)((char *)gk + align64((size_t)(K * J) * sizeof(float)));
    gather_cols(colT, CP, x, g);
    gm_cvt_bf16_to_f32(colw, colT, J * CP);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < J; j++) gk[k * J + j] = gm_bf16_to_float(dout[(j / PQ * K + k) * PQ + j % PQ]);
    const int nt = nthreads > 1 && K >= 32 ? nthreads : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t k = 0; k < (K + 3) / 4 * 4; k += 4) {
        if (k + 4 <= K) weight_rows4(dw, gk, colw, k, CRS, CP, J);
        else for (int64_t r = k; r < K; r++) weight_rows1(dw, gk, colw, r, CRS, CP, J);
    }
    return GM_OK;
}
