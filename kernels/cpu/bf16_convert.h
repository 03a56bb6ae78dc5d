/* kernels/cpu/bf16_convert.h — contiguous float32 <-> bfloat16 conversion at memory speed: AVX-512 where the CPU
 * has it (chosen at run time), otherwise the scalar loops of common.h, with the same results bit for bit
 * (gm_float_to_bf16: round to nearest even, a nan stays a quiet nan with its sign and upper payload). Used by
 * the casts (elementwise.c) and the bfloat16 convolutions (conv_half.c), which convert weights and gradients of
 * millions of elements per step. Pure functions: nothing allocated, no threads (callers share the work out). */
#ifndef GM_KERNELS_CPU_BF16_CONVERT_H
#define GM_KERNELS_CPU_BF16_CONVERT_H

#include "../common.h"

void gm_cvt_f32_to_bf16(uint16_t *dst, const float *src, int64_t n);
void gm_cvt_bf16_to_f32(float *dst, const uint16_t *src, int64_t n);
/* dst = src rounded to bfloat16 and widened back (gm_float_to_bf16, then exact): the float32 operand a bfloat16
 * pass computes on, read from a float32 tensor (autocast's parameters, conv_half.c) with no bfloat16 copy. */
void gm_cvt_f32_to_bf16_f32(float *dst, const float *src, int64_t n);
/* dst = a + (float)b elementwise (dst may be a): a float32 gradient taking a bfloat16 one in one pass, bit for bit
 * the float32 sum of b's widened copy (autocast's weight gradients accumulating into float32 parameters). */
void gm_add_bf16_to_f32(float *dst, const float *a, const uint16_t *b, int64_t n);

#endif
