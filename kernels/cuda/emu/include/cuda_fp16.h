/* kernels/cuda/emu/include/cuda_fp16.h — __half for the CUDA emulator: a struct holding the IEEE binary16 bits,
 * converted with kernels/common.h's gm_float_to_half / gm_half_to_float (round to nearest even, the same
 * functions the CPU kernels use, so both builds round alike).
 * Only conversions and bit casts: gpumemnet kernels compute in float (kernels/cuda/README.md), so __half
 * arithmetic and constructors are absent on purpose and using them is a compile error here. Valid C and C++. */
#ifndef GM_EMU_CUDA_FP16_H
#define GM_EMU_CUDA_FP16_H

#include <stdint.h>

#include "../../../common.h"

typedef struct __half {
    unsigned short __x;
} __half;
typedef __half half;

static inline __half __float2half_rn(float f) {
    __half h;
    h.__x = gm_float_to_half(f);
    return h;
}
static inline __half __float2half(float f) { return __float2half_rn(f); } /* the GPU's rounds to nearest too */
static inline float __half2float(__half h) { return gm_half_to_float(h.__x); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline __half __ushort_as_half(unsigned short u) {
    __half h;
    h.__x = u;
    return h;
}
static inline __half __short_as_half(short s) { return __ushort_as_half((unsigned short)s); }

#endif
