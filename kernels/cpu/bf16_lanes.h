/* kernels/cpu/bf16_lanes.h — float32 -> bfloat16 rounding on 16 lanes of AVX-512 or 8 of AVX2, for the kernels
 * that convert as they go (bf16_convert.c, nn_bf16.c). Include only where GCC's x86 intrinsics exist; the callers check
 * the CPU at run time before calling into code that uses these. */
#ifndef GM_KERNELS_CPU_BF16_LANES_H
#define GM_KERNELS_CPU_BF16_LANES_H

#include <immintrin.h>

/* gm_float_to_bf16 on 16 lanes: (x + 0x7fff + lsb) >> 16 rounds to nearest even, and (x >> 16) | 0x40 keeps a nan
 * a quiet nan. vcvtneps2bf16 would be one instruction but flushes subnormals to zero. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m256i gm_bf16_narrow16(__m512i x) {
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i q = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, q));
}

/* The same on 8 lanes of AVX2, left in the low 16 bits of each 32-bit lane (CPUs without AVX-512). */
__attribute__((target("avx2"))) static inline __m256i gm_bf16_round8(__m256i x) {
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    /* |x| as a signed int is >= 0, so a signed compare finds the nans */
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(r, q, nan);
}

#endif
