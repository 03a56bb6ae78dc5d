/* kernels/cpu/bf16_lanes.h — 16 lanes of float32 <-> bfloat16 in AVX-512 registers, for the kernels that convert
 * as they go (bf16_convert.c, nn_bf16.c). Include only where GCC's x86 intrinsics exist; the callers check
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

#endif
