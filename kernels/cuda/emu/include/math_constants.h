/* kernels/cuda/emu/include/math_constants.h — the CUDART_* constants kernels commonly use, with the real
 * header's values (bit patterns for the special ones). A constant missing here is a compile error: add it. */
#ifndef GM_EMU_MATH_CONSTANTS_H
#define GM_EMU_MATH_CONSTANTS_H
#include "cuda_runtime.h"

#define CUDART_INF_F __int_as_float(0x7f800000)
#define CUDART_NAN_F __int_as_float(0x7fffffff)
#define CUDART_MIN_DENORM_F __int_as_float(0x00000001)
#define CUDART_MAX_NORMAL_F __int_as_float(0x7f7fffff)
#define CUDART_NEG_ZERO_F __int_as_float((int)0x80000000)
#define CUDART_ZERO_F 0.0f
#define CUDART_ONE_F 1.0f
#define CUDART_PI_F 3.141592654f
#define CUDART_SQRT_2PI_F 2.506628275f
#define CUDART_LN2_F 0.693147181f

#define CUDART_INF __longlong_as_double(0x7ff0000000000000LL)
#define CUDART_NAN __longlong_as_double((long long)0xfff8000000000000ULL)
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_SQRT_2PI 2.5066282746310002e+0
#define CUDART_LN2 6.9314718055994529e-1
#endif
