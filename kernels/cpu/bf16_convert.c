/* kernels/cpu/bf16_convert.c — float32 <-> bfloat16 over contiguous runs (bf16_convert.h). The build targets
 * x86-64's baseline (SSE2), where GCC's vectorized float32 -> bfloat16 loop spends ~30 instructions on 8 values
 * (packing 32-bit lanes to 16 bits) and ran at half of memcpy's speed; AVX-512 narrows 16 lanes in one vpmovdw. */
#include "bf16_convert.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "bf16_lanes.h"
#define GM_CVT_X86 1
#endif

static void f32_to_bf16_scalar(uint16_t *d, const float *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = gm_float_to_bf16(s[i]);
}

static void bf16_to_f32_scalar(float *d, const uint16_t *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = gm_bf16_to_float(s[i]);
}

static void add_bf16_scalar(float *d, const float *a, const uint16_t *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = a[i] + gm_bf16_to_float(b[i]);
}

#ifdef GM_CVT_X86
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void f32_to_bf16_avx512(uint16_t *d, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(d + i), gm_bf16_narrow16(_mm512_loadu_si512(s + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(d + i, m, gm_bf16_narrow16(_mm512_maskz_loadu_epi32(m, s + i)));
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void bf16_to_f32_avx512(float *d, const uint16_t *s, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512(d + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i))),
                                                     16));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_epi32(d + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i)),
                                                             16));
    }
}

/* d = a + (float)b: the widening is exact, so this is the float32 sum of the widened copy, in one pass */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void add_bf16_avx512(float *d, const float *a, const uint16_t *b,
                                                                             int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 w = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(b + i))), 16));
        _mm512_storeu_ps(d + i, _mm512_add_ps(_mm512_loadu_ps(a + i), w));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 w = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, b + i)), 16));
        _mm512_mask_storeu_ps(d + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), w));
    }
}

static int have_avx512(void) {
    static int s = -1;
    int v = __atomic_load_n(&s, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
        __atomic_store_n(&s, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

void gm_cvt_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) {
#ifdef GM_CVT_X86
    if (n >= 16 && have_avx512()) {
        f32_to_bf16_avx512(dst, src, n);
        return;
    }
#endif
    f32_to_bf16_scalar(dst, src, n);
}

void gm_cvt_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) {
#ifdef GM_CVT_X86
    if (n >= 16 && have_avx512()) {
        bf16_to_f32_avx512(dst, src, n);
        return;
    }
#endif
    bf16_to_f32_scalar(dst, src, n);
}

void gm_add_bf16_to_f32(float *dst, const float *a, const uint16_t *b, int64_t n) {
#ifdef GM_CVT_X86
    if (n >= 16 && have_avx512()) {
        add_bf16_avx512(dst, a, b, n);
        return;
    }
#endif
    add_bf16_scalar(dst, a, b, n);
}
