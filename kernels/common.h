/* kernels/common.h — what every kernel and csrc/ share: dtypes, status codes, half-precision conversion.
 * No Python, no allocator here: kernels are pure functions over raw pointers (DESIGN.md). */
#ifndef GM_KERNELS_COMMON_H
#define GM_KERNELS_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define GM_MAX_DIMS 16

/* Helpers marked GM_HD are compiled for the GPU too (kernels/cuda/ shares them, so both backends round the same
 * way); in C and in the CUDA emulator they are plain functions. */
#if defined(__CUDACC__)
#define GM_HD __host__ __device__
#else
#define GM_HD
#endif

typedef enum {
    GM_F32 = 0,
    GM_F64 = 1,
    GM_F16 = 2,
    GM_BF16 = 3,
    GM_I64 = 4,
    GM_BOOL = 5,
    GM_NDTYPES, /* the compute dtypes: every kernel family takes these (and refuses the ones below with GM_ERR_ARG) */
    /* Storage-only integer dtypes (PyTorch's uint8/int8/int16/int32): tensors of them can be made, filled, cast,
     * copied, viewed, indexed, concatenated and compared (csrc casts them to int64 first); the other ops refuse
     * them in csrc with a TypeError naming the op and the dtype. */
    GM_U8 = GM_NDTYPES,
    GM_I8,
    GM_I16,
    GM_I32,
    GM_NDTYPES_ALL
} gm_dtype;

/* Kernel status: 0 is success; anything else is an error csrc/ turns into a Python exception. */
enum { GM_OK = 0, GM_ERR_ARG = 1, GM_ERR_UNSUPPORTED = 2, GM_ERR_BACKEND = 3 };

static inline size_t gm_dtype_size(gm_dtype dt) {
    static const size_t sizes[GM_NDTYPES_ALL] = {4, 8, 2, 2, 8, 1, 1, 1, 2, 4};
    return sizes[dt];
}

static inline int gm_dtype_is_float(gm_dtype dt) { return dt <= GM_BF16; }
static inline int gm_dtype_is_narrow(gm_dtype dt) { return dt >= GM_U8 && dt < GM_NDTYPES_ALL; }

/* IEEE half <-> float, round to nearest even, inf/nan/subnormals handled. Branch-light so that loops over halves
 * vectorise: every candidate is computed and picked with integer masks (with ternaries GCC sinks the float ops
 * into branches and then will not vectorise them). float -> half follows F. Giesen's "float_to_half_fast3_rtne".
 * Checked exhaustively against a reference with branches (every half; every float bit pattern). */
GM_HD static inline float gm_bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
GM_HD static inline uint32_t gm_f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
GM_HD static inline uint32_t gm_mask(int c) { return (uint32_t)0 - (uint32_t)(c != 0); }
/* (comparisons are on int32: the operands are below 2^31 and SSE2 has no unsigned 32-bit compare) */

GM_HD static inline float gm_half_to_float(uint16_t h) {
    const uint32_t em = h & 0x7fffu, sign = (uint32_t)(h & 0x8000u) << 16;
    /* subnormal: bits 0x3f000000|em are 0.5 + em*2^-24, so subtracting 0.5 leaves em*2^-24 exactly, without a
     * float-subnormal multiply that a process running with denormals-are-zero would flush */
    const uint32_t sub = gm_f_bits(gm_bits_f(0x3f000000u | em) - 0.5f);
    const uint32_t norm = (em << 13) + 0x38000000u;             /* rebias 15 -> 127 */
    const uint32_t special = norm | 0x7f800000u;                /* inf / nan keep their mantissa */
    const uint32_t ms = gm_mask((int32_t)em < 0x400), mi = gm_mask((int32_t)em >= 0x7c00);
    return gm_bits_f(((sub & ms) | (special & mi) | (norm & ~(ms | mi))) | sign);
}

GM_HD static inline uint16_t gm_float_to_half(float f) {
    const uint32_t x0 = gm_f_bits(f), sign = x0 & 0x80000000u, x = x0 ^ sign;
    const uint32_t special = 0x7c00u | (gm_mask((int32_t)x > 0x7f800000) & 0x200u); /* inf (also >= 65520), nan */
    /* below the smallest normal half a float add does the rounding: 0.5 has the half-subnormal ulp */
    const uint32_t sub = gm_f_bits(gm_bits_f(x) + 0.5f) - 0x3f000000u;
    /* rebias 127 -> 15 (mod 2^32), add the round-to-nearest-even bias, drop 13 mantissa bits */
    const uint32_t norm = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
    const uint32_t ms = gm_mask((int32_t)x < 0x38800000), mi = gm_mask((int32_t)x >= 0x47800000);
    return (uint16_t)(((sub & ms) | (special & mi) | (norm & ~(ms | mi))) | (sign >> 16));
}

GM_HD static inline float gm_bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

GM_HD static inline uint16_t gm_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    /* a select, not an early return: loops over this then vectorize (a float32 -> bfloat16 cast of 11M values
     * went from 115 ms to a memory pass) */
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16; /* round to nearest even */
    const uint32_t nan = (x >> 16) | 0x40u;                           /* quiet nan */
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* Load any dtype as double / store a double as any dtype: the slow generic path (casts, scalars). */
static inline double gm_load_f64(const char *p, gm_dtype dt) {
    switch (dt) {
    case GM_F32: { float v; memcpy(&v, p, 4); return v; }
    case GM_F64: { double v; memcpy(&v, p, 8); return v; }
    case GM_F16: { uint16_t v; memcpy(&v, p, 2); return gm_half_to_float(v); }
    case GM_BF16: { uint16_t v; memcpy(&v, p, 2); return gm_bf16_to_float(v); }
    case GM_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case GM_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case GM_U8: return *(const uint8_t *)p;
    case GM_I8: return *(const int8_t *)p;
    case GM_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case GM_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    default: return 0.0;
    }
}

#endif
