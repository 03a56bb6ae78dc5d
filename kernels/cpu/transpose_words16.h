/* The transpose of a 16 x 16 matrix of 32-bit words held in 16 AVX-512 registers, shared by gemm_bf16.c's AMX
 * packing and conv_half_amx.c's (both move pairs of bfloat16 as one word). Compiled for AVX-512 by its callers'
 * target attribute; a caller checks the CPU first. */
#ifndef GM_TRANSPOSE_WORDS16_H
#define GM_TRANSPOSE_WORDS16_H

#include <immintrin.h>

/* o[i] = column i of the matrix whose rows are r[0..15] (r is overwritten). */
__attribute__((target("avx512f"))) static inline void transpose_words16(__m512i o[16], __m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* r[4b + c] holds, in each 128-bit lane L, word 4L + c of rows 4b .. 4b + 3 */
    for (int c = 0; c < 4; c++) {
        const __m512i a0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88), a1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
        const __m512i b0 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
        const __m512i b1 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
        o[c] = _mm512_shuffle_i32x4(a0, b0, 0x88);
        o[8 + c] = _mm512_shuffle_i32x4(a0, b0, 0xdd);
        o[4 + c] = _mm512_shuffle_i32x4(a1, b1, 0x88);
        o[12 + c] = _mm512_shuffle_i32x4(a1, b1, 0xdd);
    }
}

#endif
