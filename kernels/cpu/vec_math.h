/* kernels/cpu/vec_math.h — transcendental functions on SIMD registers, for the float32 loops whose cost they are
 * (sigmoid, tanh, GELU, SiLU...: scalar libm took about 4 ns an element, most of a recurrent layer's step).
 *
 * glibc ships vector versions of expf, expm1f, log1pf, tanhf and erff (libmvec: 16 lanes with AVX-512, 8 with AVX2,
 * 4 with SSE; at most 4 ulp, as its manual lists). GCC calls them from a vectorised loop when the scalar function is
 * declared `simd`. glibc's math.h declares that only under -ffast-math, which would also drop NaN and infinity
 * handling the kernels promise, so this header declares the five itself; setup.py defines GM_HAVE_LIBMVEC and links
 * libmvec where it exists (glibc on x86-64). Without it the same loops call the scalar functions.
 *
 * GM_VEC_CLONES compiles a function (and its OpenMP regions) three times, for AVX-512, AVX2 and the baseline, and
 * picks one at load time: the library itself is built for the baseline x86-64. A loop that should use the vector
 * functions is an `omp simd` loop (or `omp parallel for simd`) inside such a function. */
#ifndef GM_KERNELS_CPU_VEC_MATH_H
#define GM_KERNELS_CPU_VEC_MATH_H

#include <math.h>

#if defined(GM_HAVE_LIBMVEC) && defined(__x86_64__) && defined(__GNUC__)
float expf(float) __attribute__((simd("notinbranch")));
float expm1f(float) __attribute__((simd("notinbranch")));
float log1pf(float) __attribute__((simd("notinbranch")));
float tanhf(float) __attribute__((simd("notinbranch")));
float erff(float) __attribute__((simd("notinbranch")));
#define GM_VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GM_VEC_CLONES
#endif

#endif
