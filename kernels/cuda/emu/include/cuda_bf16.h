/* kernels/cuda/emu/include/cuda_bf16.h — __nv_bfloat16 for the CUDA emulator: a struct holding the bfloat16
 * bits, converted with kernels/common.h's gm_float_to_bf16 / gm_bf16_to_float (round to nearest even, quiet
 * NaN), as the CPU kernels do. Conversions and bit casts only (see cuda_fp16.h). Valid C and C++. */
#ifndef GM_EMU_CUDA_BF16_H
#define GM_EMU_CUDA_BF16_H

#include <stdint.h>

#include "../../../common.h"

typedef struct __nv_bfloat16 {
    unsigned short __x;
} __nv_bfloat16;
typedef __nv_bfloat16 nv_bfloat16;

static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    __nv_bfloat16 h;
    h.__x = gm_float_to_bf16(f);
    return h;
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return gm_bf16_to_float(h.__x); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    __nv_bfloat16 h;
    h.__x = u;
    return h;
}
static inline __nv_bfloat16 __short_as_bfloat16(short s) { return __ushort_as_bfloat16((unsigned short)s); }

#endif
