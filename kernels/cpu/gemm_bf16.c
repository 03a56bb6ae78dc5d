/* kernels/cpu/gemm_bf16.c — the bfloat16 matrix product (gemm_bf16.h).
 *
 * Where the CPU has AMX, the tile unit computes it (the AMX section below: its own blocking). Otherwise,
 * blocking as in GotoBLAS: C is cut into MC x NC blocks (the unit of parallel work); each block sums its
 * K in KC slices into a float32 tile, for which a slice of A (MC x KC) and of B (KC x NC) are packed the way the
 * micro-kernel reads them, then the tile is added to (or written over) C once, rounded to bfloat16 if C is.
 *
 * The native micro-kernel computes an MR x NR tile with vdpbf16ps, which multiplies pairs of bfloat16 along K
 * and adds both products to a float32 lane: A is packed as MR-row panels of K-pairs (one 32-bit word per row and
 * pair, broadcast), B as NR-column panels of K-pairs (32 words, two zmm registers); an odd K is padded with zero.
 * MR x NR = 8 x 32 keeps 16 accumulators, 2 B registers and a broadcast in the 32 zmm registers, and 16
 * independent vdpbf16ps per pair cover the instruction's latency on both FMA ports.
 *
 * Packing buffers are thread-local arrays of fixed size (~1.4 MiB a thread, `bufs`, created by the C runtime on
 * a thread's first use, as OpenBLAS keeps its own): the callers' workspace plans do not change,
 * so meta's byte count (which calls the same plans) stays equal to the CPU's. */
#define _GNU_SOURCE /* syscall() */
#include "gemm_bf16.h"
#include "transpose_words16.h"

#include <cblas.h>
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define MR 8
#define NR 32
#define MC 128
#define NC 256
#define KC 256 /* even: a slice holds whole K-pairs */

/* Multiply-adds below which the blocks stay on one thread. */
#define GEMM_BF16_GRAIN (1 << 20)

/* the AMX path's blocking (its section below) */
#define AMX_KMAX 4096
#define AMX_NC 512
#define AMX_GRAIN (1 << 25)
#define AMX_BWORDS (AMX_KMAX / 2 * 128) /* a B block: K / 2 pairs x 128 columns at K = AMX_KMAX (1 MiB) */
#define AMX_ACC (128 * 256)            /* float32 partial sums of a chunked bfloat16 C (128 KiB) */

/* A thread's buffers, one union: a call runs either the AMX path or the others (whose short sums, wide_a and
 * wide_b, the AMX path also calls, but never while its own buffers are in use), so a thread holds the larger set
 * (~1.4 MiB), not both. */
static _Thread_local union {
    struct {
        uint32_t pack_a[MC * KC / 2], pack_b[NC * KC / 2];
        float tile_c[MC * NC];
        float wide_a[MC * KC], wide_b[KC * NC]; /* the portable path's float32 slices */
    } g;
    struct {
        uint32_t b[AMX_BWORDS];
        uint16_t a[32 * (AMX_KMAX + 32)], tail[32 * 32];
        float scr[32 * 32], acc[AMX_ACC];
    } x;
} bufs __attribute__((aligned(64)));
#define pack_a (bufs.g.pack_a)
#define pack_b (bufs.g.pack_b)
#define tile_c (bufs.g.tile_c)
#define wide_a (bufs.g.wide_a)
#define wide_b (bufs.g.wide_b)
#define amx_b (bufs.x.b)
#define amx_a (bufs.x.a)
#define amx_tail (bufs.x.tail)
#define amx_scr (bufs.x.scr)
#define amx_acc (bufs.x.acc)

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int native_state = -1; /* -1: not yet decided */

int gemm_bf16_native(void) {
    int s = __atomic_load_n(&native_state, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *e = getenv("GPUMEMNET_GEMM_BF16");
        __builtin_cpu_init();
        s = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512bf16") && !(e && strcmp(e, "portable") == 0);
        __atomic_store_n(&native_state, s, __ATOMIC_RELAXED);
    }
    return s;
}

/* The (lo, hi) pair of bfloat16 as one word: lo in the low half, as vdpbf16ps reads it. */
static inline __attribute__((always_inline)) uint32_t pair(uint16_t lo, uint16_t hi) {
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* A's rows [0, mc) and columns [k0, k0 + kc) (p points at row 0, column 0) as ceil(mc / MR) panels of
 * kp = ceil(kc / 2) pairs x MR rows; rows past mc and the column past an odd kc are zero. */
static inline __attribute__((always_inline)) void pack_a_slice(uint32_t *dst, const uint16_t *p, int64_t rs,
                                                                 int64_t cs, int64_t mc, int64_t kc) {
    const int64_t kp = (kc + 1) / 2, kfull = kc / 2;
    for (int64_t ir = 0; ir < mc; ir += MR) {
        uint32_t *d = dst + ir * kp;
        const int64_t rows = min64(MR, mc - ir);
        for (int64_t i = 0; i < MR; i++) {
            const uint16_t *r = p + (ir + i) * rs;
            if (i >= rows) {
                for (int64_t q = 0; q < kp; q++) d[q * MR + i] = 0;
                continue;
            }
            if (cs == 1) {
                for (int64_t q = 0; q < kfull; q++) d[q * MR + i] = pair(r[2 * q], r[2 * q + 1]);
            } else {
                for (int64_t q = 0; q < kfull; q++) d[q * MR + i] = pair(r[2 * q * cs], r[(2 * q + 1) * cs]);
            }
            if (kp > kfull) d[kfull * MR + i] = pair(r[2 * kfull * cs], 0);
        }
    }
}

/* o[j] = pair(r0[j], r1[j]) for j < NR: two 16-bit interleaves (vpermt2w). */
__attribute__((target("avx512f,avx512bw"))) static inline void pair_rows(uint32_t *o, const uint16_t *r0,
                                                                          const uint16_t *r1) {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    const __m512i x0 = _mm512_loadu_si512(r0), x1 = _mm512_loadu_si512(r1);
    _mm512_storeu_si512(o, _mm512_permutex2var_epi16(x0, lo, x1));
    _mm512_storeu_si512(o + 16, _mm512_permutex2var_epi16(x0, hi, x1));
}

/* B transposed (rs 1): pairs of 16 columns x 16 pairs, each column's pairs contiguous in memory, transposed as a
 * 16 x 16 matrix of 32-bit words into o (rows NR words apart). */
__attribute__((target("avx512f"))) static inline void transpose_pairs16(uint32_t *o, const uint16_t *p, int64_t cs) {
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(p + i * cs);
    transpose_words16(t, r);
    for (int i = 0; i < 16; i++) _mm512_storeu_si512(o + i * NR, t[i]);
}

/* B's rows [0, kc) (K) and columns [0, nc) as ceil(nc / NR) panels of kp pairs x NR columns, zero-padded, the
 * panels kps >= kp pairs apart (the pairs past kp zero). */
static inline __attribute__((always_inline)) void pack_b_slice(uint32_t *dst, const uint16_t *p, int64_t rs,
                                                                 int64_t cs, int64_t kc, int64_t nc, int64_t kps) {
    const int64_t kp = (kc + 1) / 2;
    for (int64_t jr = 0; jr < nc; jr += NR) {
        uint32_t *d = dst + jr * kps;
        if (kps > kp) memset(d + kp * NR, 0, (size_t)((kps - kp) * NR) * sizeof(uint32_t));
        const int64_t cols = min64(NR, nc - jr);
        int64_t q = 0;
        if (rs == 1 && cols == NR) /* B transposed: whole 16 x 16 blocks of pairs at once */
            for (; q + 16 <= kc / 2; q += 16) {
                transpose_pairs16(d + q * NR, p + 2 * q + jr * cs, cs);
                transpose_pairs16(d + q * NR + 16, p + 2 * q + (jr + 16) * cs, cs);
            }
        for (; q < kp; q++) {
            const uint16_t *r0 = p + 2 * q * rs + jr * cs, *r1 = r0 + rs;
            const int odd = 2 * q + 1 >= kc; /* the last row of an odd slice pairs with zero */
            uint32_t *o = d + q * NR;
            if (cs == 1 && cols == NR && !odd) {
                pair_rows(o, r0, r1);
            } else if (rs == 1 && !odd) { /* B transposed: each pair is contiguous */
                for (int64_t j = 0; j < cols; j++) o[j] = pair(r0[j * cs], r0[j * cs + 1]);
                for (int64_t j = cols; j < NR; j++) o[j] = 0;
            } else {
                for (int64_t j = 0; j < cols; j++) o[j] = pair(r0[j * cs], odd ? 0 : r1[j * cs]);
                for (int64_t j = cols; j < NR; j++) o[j] = 0;
            }
        }
    }
}

/* tile (mr x nr of MR x NR, rows ldt apart) += the packed panels' product over kp pairs. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void kernel_native(int64_t kp, const uint32_t *pa,
                                                                                   const uint32_t *pb, float *tile,
                                                                                   int64_t ldt, int mr, int nr) {
    __m512 acc[MR][2];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t q = 0; q < kp; q++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb + q * NR);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(pb + q * NR + 16);
        const uint32_t *ap = pa + q * MR;
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
        }
    }
    const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        if (i < mr) {
            float *r = tile + i * ldt;
            _mm512_mask_storeu_ps(r, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, r), acc[i][0]));
            _mm512_mask_storeu_ps(r + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, r + 16), acc[i][1]));
        }
    }
}

/* One KC slice of a block on the native kernel: pack, then every MR x NR tile (B's panel stays in L1 while A's
 * panels stream from L2). Compiled for AVX-512 so that the packing loops vectorize with it. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void slice_native(const uint16_t *a, int64_t ars,
                                                                                  int64_t acs, const uint16_t *b,
                                                                                  int64_t brs, int64_t bcs, int64_t mc,
                                                                                  int64_t nc, int64_t kc) {
    const int64_t kp = (kc + 1) / 2;
    pack_a_slice(pack_a, a, ars, acs, mc, kc);
    pack_b_slice(pack_b, b, brs, bcs, kc, nc, kp);
    for (int64_t jr = 0; jr < nc; jr += NR)
        for (int64_t ir = 0; ir < mc; ir += MR)
            kernel_native(kp, pack_a + ir * kp, pack_b + jr * kp, tile_c + ir * NC + jr, NC, (int)min64(MR, mc - ir),
                          (int)min64(NR, nc - jr));
}

/* One KC slice on any CPU: both slices widened to float32 (exactly: bfloat16 is float32's upper half), then
 * OpenBLAS's sgemm adds their product to the tile. */
static void slice_widen(const uint16_t *a, int64_t ars, int64_t acs, const uint16_t *b, int64_t brs, int64_t bcs,
                        int64_t mc, int64_t nc, int64_t kc) {
    for (int64_t i = 0; i < mc; i++)
        for (int64_t k = 0; k < kc; k++) wide_a[i * kc + k] = gm_bf16_to_float(a[i * ars + k * acs]);
    for (int64_t k = 0; k < kc; k++)
        for (int64_t j = 0; j < nc; j++) wide_b[k * nc + j] = gm_bf16_to_float(b[k * brs + j * bcs]);
}

static void slice_portable(const uint16_t *a, int64_t ars, int64_t acs, const uint16_t *b, int64_t brs, int64_t bcs,
                           int64_t mc, int64_t nc, int64_t kc) {
    slice_widen(a, ars, acs, b, brs, bcs, mc, nc, kc);
    scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)mc, (blasint)nc, (blasint)kc, 1.0f, wide_a,
                      (blasint)kc, wide_b, (blasint)nc, 1.0f, tile_c, NC);
}

/* C's block for a short sum (K <= SHORT_K) into float32 C: both slices widened and sgemm writes C in place. The
 * block's float32 tile costs a clear and a pass over C per product, which for the weight-gradient of a 2x2 map
 * (K = 4 positions, C = 512 x 2304) is most of the work. (The AMX path, which sums into C's own tiles, was faster
 * at these sizes too: 512 x 4 x 2304 202 us against 239, 256 x 16 x 1152 39 against 73.) */
#define SHORT_K 16

static void block_short(int64_t i0, int64_t mc, int64_t j0, int64_t nc, int64_t K, gm_bmat a, gm_bmat b, int beta,
                        float *c, int64_t ldc) {
    slice_widen(a.p + i0 * a.rs, a.rs, a.cs, b.p + j0 * b.cs, b.rs, b.cs, mc, nc, K);
    scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)mc, (blasint)nc, (blasint)K, 1.0f, wide_a,
                      (blasint)K, wide_b, (blasint)nc, beta ? 1.0f : 0.0f, c + i0 * ldc + j0, (blasint)ldc);
}

/* C's block of rows [i0, i0 + mc) and columns [j0, j0 + nc). */
static void block(int64_t i0, int64_t mc, int64_t j0, int64_t nc, int64_t K, gm_bmat a, gm_bmat b, int beta, void *c,
                  int64_t ldc, int c_bf16, int mode) {
    for (int64_t i = 0; i < mc; i++) memset(tile_c + i * NC, 0, (size_t)nc * sizeof(float));
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = min64(KC, K - k0);
        const uint16_t *pa = a.p + i0 * a.rs + k0 * a.cs, *pb = b.p + k0 * b.rs + j0 * b.cs;
        if (mode == 1) slice_native(pa, a.rs, a.cs, pb, b.rs, b.cs, mc, nc, kc);
        else slice_portable(pa, a.rs, a.cs, pb, b.rs, b.cs, mc, nc, kc);
    }
    for (int64_t i = 0; i < mc; i++) {
        const float *t = tile_c + i * NC;
        if (c_bf16) {
            uint16_t *r = (uint16_t *)c + (i0 + i) * ldc + j0;
            if (beta)
                for (int64_t j = 0; j < nc; j++) r[j] = gm_float_to_bf16(t[j] + gm_bf16_to_float(r[j]));
            else
                for (int64_t j = 0; j < nc; j++) r[j] = gm_float_to_bf16(t[j]);
        } else {
            float *r = (float *)c + (i0 + i) * ldc + j0;
            if (beta)
                for (int64_t j = 0; j < nc; j++) r[j] += t[j];
            else
                memcpy(r, t, (size_t)nc * sizeof(float));
        }
    }
}

/* ---- AMX (Sapphire Rapids and later) --------------------------------------------------------------------------
 * tdpbf16ps multiplies a 16 x 32 bfloat16 tile of A (16 rows, 32 of K) by a 16-pair x 16-column tile of B (B in
 * the pair layout above) into a 16 x 16 float32 tile. Each thread takes a rectangle of C and, for a block of up to
 * AMX_NC columns, packs B's whole K once (panels of 32 columns, K zero-padded to a multiple of 32), shared by every
 * 32-row panel of A. A 32 x 32 block of C then stays in 4 accumulator tiles for the whole K (2 tiles of A and 2 of
 * B loaded per 32 of K) and goes to C once: stored straight into a float32 C, else through a 4 KiB scratch and
 * AVX-512 (bfloat16 C, beta 1, edges). Sums of K in slices with the accumulators through memory between them, as
 * the other paths do, measured slower (slices of 512: 1024^3 1127 -> 562 GF/s on one thread). A is read in place
 * when its rows are contiguous (cs 1), only a last partial 32 columns copied zero-padded; otherwise its 32-row
 * panel is packed (a transposed A in 32 x 32 blocks). Tiles are configured once per thread and call.
 * K above AMX_KMAX is summed in chunks: a float32 C is its own accumulator between chunks, a bfloat16 C's partial
 * sums wait in amx_acc (rows of the thread's rectangle in groups that fit). */

struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64)));

static int amx_state = -1;

/* CPUID leaf 7: AMX-BF16 (EDX bit 22) and AMX-TILE (bit 24). */
static int amx_cpuid(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (d >> 22 & 1) && (d >> 24 & 1);
}

/* Linux grants the tile data state to a process only on request (arch_prctl ARCH_REQ_XCOMP_PERM). */
static int amx_usable(void) {
    int s = __atomic_load_n(&amx_state, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *e = getenv("GPUMEMNET_GEMM_BF16");
        s = 0;
#if defined(__linux__) && defined(__x86_64__)
        __builtin_cpu_init();
        if (!(e && (strcmp(e, "portable") == 0 || strcmp(e, "avx512") == 0)) && __builtin_cpu_supports("avx512bf16"))
            s = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 &&
                amx_cpuid();
#endif
        __atomic_store_n(&amx_state, s, __ATOMIC_RELAXED);
    }
    return s;
}

int gemm_bf16_amx(void) { return gemm_bf16_native() && amx_usable(); }

/* Every tile 16 rows of 64 bytes: C 0-3, A 4-5, B 6-7. */
__attribute__((target("amx-tile,amx-bf16"))) static void amx_configure(void) {
    struct amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    /* not _tile_loadconfig: GCC 12's names only 8 bytes of the operand, and the row and column counts written
     * above were then dropped as dead stores */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

/* a configured tile state makes every context switch save 8 KiB */
__attribute__((target("amx-tile,amx-bf16"))) static void amx_release(void) { _tile_release(); }

/* Where a 32-row panel of A is read: k-steps [0, full) at p (rows ld bytes apart), then one step at tail (rows 64
 * bytes apart) when tail is set. */
typedef struct {
    const uint16_t *p, *tail;
    int64_t ld, full;
} amx_apanel;

/* r[0..15], 16 rows of 16 words, transposed in place. */
__attribute__((target("avx512f"))) static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    transpose_words16(t, r);
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* A's rows [0, mr) and columns [0, kc) (p at row 0, column 0) packed row-major into amx_a, rows ld elements
 * apart, rows past mr (up to rows) and columns past kc (up to kp32) zero. */
__attribute__((target("avx512f,avx512bw"))) static void amx_pack_a(const uint16_t *p, int64_t rs, int64_t cs,
                                                                     int mr, int rows, int64_t kc, int64_t kp32,
                                                                     int64_t ld) {
    uint16_t *d = amx_a;
    if (cs == 1) {
        for (int i = 0; i < rows; i++) {
            if (i < mr) memcpy(d + i * ld, p + i * rs, (size_t)kc * 2);
            memset(d + i * ld + (i < mr ? kc : 0), 0, (size_t)(kp32 - (i < mr ? kc : 0)) * 2);
        }
        return;
    }
    int64_t k = 0;
    if (rs == 1) { /* transposed: 32 rows of A are 64 contiguous bytes of each column; pairs, then 16 x 16 words */
        const __mmask32 m = mr >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << mr) - 1);
        const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                                            6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
        const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
        for (; k < kc; k += 32) { /* columns past kc (to kp32) zero */
            __m512i w0[16], w1[16]; /* pair q of rows 0-15, of rows 16-31 */
            for (int q = 0; q < 16; q++) {
                const int64_t k0 = k + 2 * q;
                const __m512i x0 = k0 < kc ? _mm512_maskz_loadu_epi16(m, p + k0 * cs) : _mm512_setzero_si512();
                const __m512i x1 =
                    k0 + 1 < kc ? _mm512_maskz_loadu_epi16(m, p + (k0 + 1) * cs) : _mm512_setzero_si512();
                w0[q] = _mm512_permutex2var_epi16(x0, lo, x1);
                w1[q] = _mm512_permutex2var_epi16(x0, hi, x1);
            }
            transpose16(w0);
            transpose16(w1);
            for (int i = 0; i < 16 && i < rows; i++) _mm512_storeu_si512(d + i * ld + k, w0[i]);
            for (int i = 0; i < 16 && i + 16 < rows; i++) _mm512_storeu_si512(d + (i + 16) * ld + k, w1[i]);
        }
    }
    for (int i = 0; i < rows; i++) {
        uint16_t *r = d + i * ld;
        for (int64_t j = k; j < kp32; j++) r[j] = i < mr && j < kc ? p[i * rs + j * cs] : 0;
    }
}

/* B's rows [0, kc) and columns [0, nc) into the panels of pack_b_slice (kps pairs each). A B with contiguous rows
 * is read a pair of whole rows at a time: column panel after column panel (as pack_b_slice reads) each 64-byte
 * line is a page apart from the last, and packing B from memory took half of 64 x 576 x 4096's time (now a
 * third). Prefetching rows ahead, or the next block's B during this block's products, measured slower. */
__attribute__((target("avx512f,avx512bw"))) static void amx_pack_b(uint32_t *dst, const uint16_t *p, int64_t rs,
                                                                     int64_t cs, int64_t kc, int64_t nc, int64_t kps) {
    if (cs != 1) {
        pack_b_slice(dst, p, rs, cs, kc, nc, kps);
        return;
    }
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    const int64_t np = (nc + 31) / 32, panel = 32 * kps;
    for (int64_t q = 0; q < kps; q++) {
        const int64_t k = 2 * q;
        uint32_t *o = dst + q * 32;
        if (k >= kc) {
            for (int64_t jp = 0; jp < np; jp++) memset(o + jp * panel, 0, 128);
            continue;
        }
        const uint16_t *r0 = p + k * rs, *r1 = r0 + rs;
        const int two = k + 1 < kc;
        for (int64_t jp = 0; jp < np; jp++) {
            const int64_t j = 32 * jp, cols = min64(32, nc - j);
            const __mmask32 m = cols == 32 ? 0xFFFFFFFFu : (__mmask32)((1u << cols) - 1);
            const __m512i x0 = _mm512_maskz_loadu_epi16(m, r0 + j);
            const __m512i x1 = two ? _mm512_maskz_loadu_epi16(m, r1 + j) : _mm512_setzero_si512();
            _mm512_storeu_si512(o + jp * panel, _mm512_permutex2var_epi16(x0, lo, x1));
            _mm512_storeu_si512(o + jp * panel + 16, _mm512_permutex2var_epi16(x0, hi, x1));
        }
    }
}

/* The panel of A's rows [0, mr) (of a 32-row panel, or 16 when rows is 16), columns [0, kc). */
static amx_apanel amx_a_panel(const uint16_t *p, int64_t rs, int64_t cs, int mr, int rows, int64_t kc) {
    const int64_t kp32 = (kc + 31) / 32 * 32;
    /* rows a multiple of 2 KiB apart fall on the same few L1 sets: 1024 x 1024 ran 10 % faster packed */
    if (cs == 1 && mr == rows && rs * 2 % 2048 != 0) {
        amx_apanel ap = {p, NULL, rs * 2, kc / 32};
        if (kc % 32) {
            const int64_t k0 = kc / 32 * 32;
            for (int i = 0; i < rows; i++) {
                memcpy(amx_tail + i * 32, p + i * rs + k0, (size_t)(kc - k0) * 2);
                memset(amx_tail + i * 32 + (kc - k0), 0, (size_t)(32 - (kc - k0)) * 2);
            }
            ap.tail = amx_tail;
        }
        return ap;
    }
    const int64_t ld = kp32 * 2 % 1024 ? kp32 : kp32 + 32; /* the packed rows off those sets */
    amx_pack_a(p, rs, cs, mr, rows, kc, kp32, ld);
    return (amx_apanel){amx_a, NULL, ld * 2, kp32 / 32};
}

/* The finished mr x nr block in amx_scr (rows 32 floats apart) into C, added to C's values when add. A bfloat16
 * C is rounded by vcvtne2ps2bf16 (to nearest even, as gm_float_to_bf16; it flushes subnormals, as tdpbf16ps
 * already does with its sums), 32 values an instruction: narrowing with integer operations cost a third of a
 * 32 x 32 block's time at K = 576. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void amx_store(int mr, int nr, float *cf,
                                                                                     uint16_t *cb, int64_t ldc,
                                                                                     int add) {
    const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
    const __mmask32 m = nr >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << nr) - 1);
    for (int i = 0; i < mr; i++) {
        __m512 v0 = _mm512_load_ps(amx_scr + i * 32), v1 = _mm512_load_ps(amx_scr + i * 32 + 16);
        if (cf) {
            float *r = cf + i * ldc;
            if (add) {
                v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, r));
                v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, r + 16));
            }
            _mm512_mask_storeu_ps(r, m0, v0);
            _mm512_mask_storeu_ps(r + 16, m1, v1);
        } else {
            uint16_t *r = cb + i * ldc;
            if (add) {
                const __m512i o = _mm512_maskz_loadu_epi16(m, r);
                const __m512i o0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(o));
                const __m512i o1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(o, 1));
                v0 = _mm512_add_ps(v0, _mm512_castsi512_ps(_mm512_slli_epi32(o0, 16)));
                v1 = _mm512_add_ps(v1, _mm512_castsi512_ps(_mm512_slli_epi32(o1, 16)));
            }
            _mm512_mask_storeu_epi16(r, m, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
        }
    }
}

/* amx_store for a transposed C (the product computed as C^T = B^T A^T): amx_scr's 32 x 32 block transposed in
 * place (four 16 x 16 word transposes), then its nr rows of mr values stored as C's rows. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void amx_store_t(int mr, int nr, float *cf,
                                                                                       uint16_t *cb, int64_t ldc,
                                                                                       int add) {
    uint32_t *s = (uint32_t *)amx_scr;
    __m512i r[16], u[16];
    for (int i = 0; i < 16; i++) {
        r[i] = _mm512_loadu_si512(s + i * 32 + 16);
        u[i] = _mm512_loadu_si512(s + (16 + i) * 32);
    }
    transpose16(r);
    transpose16(u);
    for (int i = 0; i < 16; i++) {
        _mm512_storeu_si512(s + (16 + i) * 32, r[i]);
        _mm512_storeu_si512(s + i * 32 + 16, u[i]);
    }
    for (int h = 0; h < 2; h++) {
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(s + (16 * h + i) * 32 + 16 * h);
        transpose16(r);
        for (int i = 0; i < 16; i++) _mm512_storeu_si512(s + (16 * h + i) * 32 + 16 * h, r[i]);
    }
    amx_store(nr, mr, cf, cb, ldc, add);
}

/* One block of C, 2 row tiles (R2) or 1 by 2 column tiles (C2) or 1, over the panel's K: accumulators from in
 * (ld bytes) or zero, B's panel at pb (16-pair k-steps 512 words apart), the sums stored to out (ld bytes). A
 * block of 16 rows or columns (an edge, M = 16) runs only the tiles it needs. */
#define AMX_BLOCK(NAME, R2, C2)                                                                                      \
    __attribute__((target("amx-tile,amx-bf16"))) static void NAME(amx_apanel a, const uint32_t *pb,                 \
                                                                  const float *in, int64_t ldi, float *out,          \
                                                                  int64_t ldo) {                                     \
        if (in) {                                                                                                    \
            _tile_loadd(0, in, ldi);                                                                                 \
            if (C2) _tile_loadd(1, in + 16, ldi);                                                                    \
            if (R2) _tile_loadd(2, (const char *)in + 16 * ldi, ldi);                                                \
            if (R2 && C2) _tile_loadd(3, (const char *)in + 16 * ldi + 64, ldi);                                     \
        } else {                                                                                                     \
            _tile_zero(0);                                                                                           \
            if (C2) _tile_zero(1);                                                                                   \
            if (R2) _tile_zero(2);                                                                                   \
            if (R2 && C2) _tile_zero(3);                                                                             \
        }                                                                                                            \
        const int64_t steps = a.full + (a.tail != NULL);                                                             \
        for (int64_t s = 0; s < steps; s++) {                                                                        \
            const uint16_t *pa = s < a.full ? a.p + 32 * s : a.tail;                                                 \
            const int64_t lda = s < a.full ? a.ld : 64;                                                              \
            _tile_loadd(4, pa, lda);                                                                                 \
            _tile_loadd(6, pb + 512 * s, 128);                                                                       \
            if (C2) _tile_loadd(7, pb + 512 * s + 16, 128);                                                          \
            _tile_dpbf16ps(0, 4, 6);                                                                                 \
            if (C2) _tile_dpbf16ps(1, 4, 7);                                                                         \
            if (R2) {                                                                                                \
                _tile_loadd(5, (const char *)pa + 16 * lda, lda);                                                    \
                _tile_dpbf16ps(2, 5, 6);                                                                             \
                if (C2) _tile_dpbf16ps(3, 5, 7);                                                                     \
            }                                                                                                        \
        }                                                                                                            \
        _tile_stored(0, out, ldo);                                                                                   \
        if (C2) _tile_stored(1, out + 16, ldo);                                                                      \
        if (R2) _tile_stored(2, (char *)out + 16 * ldo, ldo);                                                        \
        if (R2 && C2) _tile_stored(3, (char *)out + 16 * ldo + 64, ldo);                                             \
    }
AMX_BLOCK(amx_block22, 1, 1)
AMX_BLOCK(amx_block12, 0, 1)
AMX_BLOCK(amx_block21, 1, 0)
AMX_BLOCK(amx_block11, 0, 0)

/* C's rows [i0, i1) and columns [j0, j1) on the tile unit (the calling thread's tiles configured). */
__attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16"))) static void amx_rect(
    int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t K, gm_bmat a, gm_bmat b, int beta, void *c, int64_t ldc,
    int c_bf16, int ct) {
    const int64_t nch = (K + AMX_KMAX - 1) / AMX_KMAX, kch = ((K + nch - 1) / nch + 31) / 32 * 32;
    const int64_t kp16 = kch / 2; /* pairs of a chunk's packed B, a multiple of 16 */
    const int64_t ncmax = min64(AMX_NC, AMX_BWORDS / kp16 / 32 * 32);
    float *cf = c_bf16 ? NULL : (float *)c;
    uint16_t *cb = c_bf16 ? (uint16_t *)c : NULL;
    const int acc = c_bf16 && nch > 1; /* partial sums of a bfloat16 C wait in amx_acc */
    for (int64_t jc = j0; jc < j1; jc += ncmax) {
        const int64_t nc = min64(ncmax, j1 - jc), ncp = (nc + 31) / 32 * 32;
        const int64_t rows = acc ? AMX_ACC / ncp / 32 * 32 : i1 - i0;
        for (int64_t ic = i0; ic < i1; ic += rows) {
            const int64_t ie = min64(i1, ic + rows);
            for (int64_t ch = 0; ch < nch; ch++) {
                const int64_t k0 = ch * kch, kc = min64(kch, K - k0);
                const int first = ch == 0, last = ch == nch - 1;
                if (nch > 1 || ic == i0)
                    amx_pack_b(amx_b, b.p + k0 * b.rs + jc * b.cs, b.rs, b.cs, kc, nc, kp16);
                for (int64_t ir = ic; ir < ie; ir += 32) {
                    const int mr = (int)min64(32, ie - ir), two = mr > 16;
                    const amx_apanel ap = amx_a_panel(a.p + ir * a.rs + k0 * a.cs, a.rs, a.cs, mr, two ? 32 : 16, kc);
                    for (int64_t jr = 0; jr < nc; jr += 32) {
                        const int nr = (int)min64(32, nc - jr);
                        const uint32_t *pb = amx_b + jr * kp16;
                        const float *in = NULL;
                        int64_t ldi = 0;
                        float *out = amx_scr;
                        int64_t ldo = 128;
                        int direct = 0; /* the sums go straight to a float32 C */
                        if (acc) {
                            float *ab = amx_acc + (ir - ic) * ncp + jr;
                            if (!first) in = ab, ldi = ncp * 4;
                            if (!last) out = ab, ldo = ncp * 4;
                        } else if (cf && !ct && mr == (two ? 32 : 16) && nr == 32) {
                            float *cp = cf + ir * ldc + jc + jr;
                            if (beta || !first) in = cp, ldi = ldc * 4;
                            out = cp, ldo = ldc * 4, direct = 1;
                        }
                        if (nr > 16) (two ? amx_block22 : amx_block12)(ap, pb, in, ldi, out, ldo);
                        else (two ? amx_block21 : amx_block11)(ap, pb, in, ldi, out, ldo);
                        if (out == amx_scr && !direct && (last || !acc)) {
                            const int add = cf ? beta || !first : beta;
                            /* C's element (i, j) at i ldc + j, or at j ldc + i when ct */
                            const int64_t at = ct ? (jc + jr) * ldc + ir : ir * ldc + jc + jr;
                            (ct ? amx_store_t : amx_store)(mr, nr, cf ? cf + at : NULL, cb ? cb + at : NULL, ldc, add);
                        }
                    }
                }
            }
        }
    }
}

/* Packing cost, in cycles per element of K, of an M x N product whose A and B are read as they are laid out:
 * A in place if its rows are contiguous, else transposed in 32 x 32 blocks (~6 elements a cycle) once per block
 * of 256 columns; B pair-interleaved from rows (~16 a cycle) or transposed. Elementwise gathers ~1 a cycle. */
static double amx_pack_cost(int64_t M, int64_t N, gm_bmat a, gm_bmat b) {
    const double at = a.cs == 1 ? 0 : a.rs == 1 ? 1 / 6.0 : 1, bt = b.cs == 1 ? 1 / 16.0 : b.rs == 1 ? 1 / 6.0 : 1;
    return (double)M * (double)((N + 255) / 256) * at + (double)N * bt;
}

/* The product on the tile unit: C cut into one rectangle per thread, across columns (each thread packs only its
 * own B) or, where that balances better, across rows (B packed by each thread: it is then the small one).
 * Where transposing A costs more, it computes C^T = B^T A^T instead (A^T's rows are then B's, pair-interleaved,
 * and C is stored through transposed blocks): W^T @ dY of a deep layer's few positions (2304 x 512 x 16, W^T
 * read in place) had packed W^T 16 columns at a time. */
static void gemm_amx(int64_t M, int64_t N, int64_t K, gm_bmat a, gm_bmat b, int beta, void *c, int64_t ldc,
                     int c_bf16, int nt) {
    const gm_bmat at = {a.p, a.cs, a.rs}, bt = {b.p, b.cs, b.rs};
    const int ct = amx_pack_cost(N, M, bt, at) + (double)M * (double)N / (6.0 * (double)K) <
                   0.8 * amx_pack_cost(M, N, a, b);
    if (ct) {
        const int64_t t = M;
        M = N, N = t, a = bt, b = at;
    }
    const int64_t pm = (M + 31) / 32, pn = (N + 31) / 32;
    nt = (int)min64(nt, pm * pn);
    /* rounds of panels the busiest thread runs, per split */
    const int64_t wn = (pn + nt - 1) / nt * pm, wm = (pm + nt - 1) / nt * pn;
    const int by_rows = nt > 1 && (wm < wn || (wm == wn && N < M)); /* a tie: each thread reads the smaller whole */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* the team's own size: inside another parallel region it may have fewer threads than asked for */
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num(), P = by_rows ? pm : pn;
        const int64_t p0 = P * t / T * 32, p1 = P * (t + 1) / T * 32;
        amx_configure();
        if (by_rows) amx_rect(p0, min64(M, p1), 0, N, K, a, b, beta, c, ldc, c_bf16, ct);
        else amx_rect(0, M, p0, min64(N, p1), K, a, b, beta, c, ldc, c_bf16, ct);
        amx_release();
    }
}

int gemm_bf16(int64_t M, int64_t N, int64_t K, gm_bmat a, gm_bmat b, int beta, void *c, int64_t ldc, int c_bf16,
              int nthreads) {
    if (M < 0 || N < 0 || K < 0) return GM_ERR_ARG;
    if (M == 0 || N == 0) return GM_OK;
    if (!c || (K > 0 && (!a.p || !b.p))) return GM_ERR_ARG;
    const int native = gemm_bf16_native(), mode = native ? 1 + amx_usable() : 0;
    if (mode == 2 && K > 0) {
        /* a thread more per AMX_GRAIN multiply-adds: waking one (OpenMP's passive wait, a busy machine) cost
         * more than the tile unit's 60 us of work below that (128 x 1152 x 256: 85 us on one, 125 on two) */
        const double per = (double)M * (double)N * (double)K / AMX_GRAIN;
        gemm_amx(M, N, K, a, b, beta, c, ldc, c_bf16, per >= nthreads ? nthreads : per >= 2 ? (int)per : 1);
        return GM_OK;
    }
    const int64_t mb = (M + MC - 1) / MC, nb = (N + NC - 1) / NC, jobs = mb * nb;
    /* the portable path's sgemm shares its own work among OpenBLAS's threads */
    const int big = nthreads > 1 && (double)M * (double)N * (double)K >= GEMM_BF16_GRAIN;
    const int nt = native && big && jobs > 1 ? (int)min64(nthreads, jobs) : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic)
    for (int64_t job = 0; job < jobs; job++) {
        const int64_t i0 = job / nb * MC, j0 = job % nb * NC;
        if (!c_bf16 && K > 0 && K <= SHORT_K)
            block_short(i0, min64(MC, M - i0), j0, min64(NC, N - j0), K, a, b, beta, c, ldc);
        else
            block(i0, min64(MC, M - i0), j0, min64(NC, N - j0), K, a, b, beta, c, ldc, c_bf16, mode);
    }
    return GM_OK;
}
