/* kernels/cpu/conv_typed.h — the CPU convolution kernels' C template: a file that defines CONV_TEMPLATE (its
 * own name) and includes this header gets the code under `#ifdef CONV_T` in it compiled once per element type,
 * T = float with FN(name) = name_f32 and T = double with name_f64 (the declarations of conv_internal.h). */
#define T CONV_T
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, CONV_SUF)

#define CONV_T float
#define CONV_SUF f32
#include CONV_TEMPLATE
#undef CONV_T
#undef CONV_SUF

#define CONV_T double
#define CONV_SUF f64
#include CONV_TEMPLATE
#undef CONV_T
#undef CONV_SUF

#undef T
#undef CAT_
#undef CAT
#undef FN
