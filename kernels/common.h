/* kernels/common.h — what every kernel and csrc/ share: dtypes, status codes, half-precision conversion.
 * No Python, no allocator here: kernels are pure functions over raw pointers (DESIGN.md). */
#ifndef GM_KERNELS_COMMON_H
#define GM_KERNELS_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define GM_MAX_DIMS 16

typedef enum {
    GM_F32 = 0,
    GM_F64 = 1,
    GM_F16 = 2,
    GM_BF16 = 3,
    GM_I64 = 4,
    GM_BOOL = 5,
    GM_NDTYPES
} gm_dtype;

/* Kernel status: 0 is success; anything else is an error csrc/ turns into a Python exception. */
enum { GM_OK = 0, GM_ERR_ARG = 1, GM_ERR_UNSUPPORTED = 2, GM_ERR_BACKEND = 3 };

static inline size_t gm_dtype_size(gm_dtype dt) {
    static const size_t sizes[GM_NDTYPES] = {4, 8, 2, 2, 8, 1};
    return sizes[dt];
}

static inline int gm_dtype_is_float(gm_dtype dt) { return dt <= GM_BF16; }

/* IEEE half <-> float, round-to-nearest-even, with inf/nan/subnormals handled. */
static inline float gm_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; mant <<= 1; } while (!(mant & 0x400u));
            bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t gm_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absx < 0x38800000u) { /* result is subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign; /* < half of the smallest subnormal */
        uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(absx >> 23); /* 14..24 */
        uint32_t half_mant = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (half_mant & 1u))) half_mant++;
        return (uint16_t)(sign | half_mant);
    }
    uint32_t r = absx - 0x38000000u; /* rebias exponent 127 -> 15, still in bit 23 position */
    uint32_t half = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
    return (uint16_t)(sign | half);
}

static inline float gm_bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t gm_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(x >> 16);
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
    default: return 0.0;
    }
}

#endif
