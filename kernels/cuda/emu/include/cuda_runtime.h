/* kernels/cuda/emu/include/cuda_runtime.h — the CUDA emulator (GPUMEMNET_CUDA=emu): host API + kernel language.
 *
 * g++ compiles the kernels/cuda .cu files as C++17 against this header. Kernels then run on the CPU: a launch
 * (GM_LAUNCH -> gm_emu_launch) runs the blocks of the grid one after another on the calling thread, and the
 * threads of a block as cooperative fibers that switch only at __syncthreads() (emu_launch.cpp). Hence:
 *  - __shared__ is `static`: with one block at a time, one static object per declaration is that block's
 *    shared memory;
 *  - atomics are plain read-modify-writes: a fiber cannot be interrupted between the read and the write;
 *  - threadIdx/blockIdx/blockDim/gridDim are globals the scheduler sets before it switches into a fiber.
 * Deliberately missing (a compile error is the right answer, kernels/cuda/README.md): warp shuffles and votes,
 * __syncthreads_count/_and/_or, cooperative groups, `extern __shared__`, `<<<>>>`, bare min/max, __half
 * arithmetic.
 *
 * In C (csrc C files) only the host API of cuda_runtime_api.h is visible. */
#ifndef GM_EMU_CUDA_RUNTIME_H
#define GM_EMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
/* Standard headers first: some libstdc++ versions spell attributes as __noinline__, which must not meet the
 * macro below; once parsed here, their include guards keep later #includes from re-expanding them. */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- execution-space and storage qualifiers ------------------------------------------------------------ */
#define __host__
#define __device__
#define __global__
#define __device_builtin__
/* what nvcc itself gives the host compiler */
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
/* blocks run one at a time, so a static is one block's shared memory (fixed-size arrays only) */
#define __shared__ static
/* a plain global: written by the host (cudaMemcpyToSymbol below) and read by kernels, like constant memory */
#define __constant__

#ifdef __cplusplus

extern "C" {
/* The built-in variables of the running thread: set by the scheduler (emu_launch.cpp) before it switches into
 * a fiber. Kernels read them through the const references below. */
extern uint3 gm_emu_thread_idx, gm_emu_block_idx;
extern dim3 gm_emu_block_dim, gm_emu_grid_dim;
/* Suspends the calling fiber until every thread of its block has arrived; a no-op outside a kernel. */
void gm_emu_syncthreads(void);
/* Kills the running launch: the launch fails with cudaErrorLaunchFailure and `why` (sticky, as a GPU trap). */
void gm_emu_trap(const char *why);
/* Runs a launch: closure_fn(closure) once per thread of every block. Sets the last error on a bad
 * configuration (and runs nothing) or the sticky cudaErrorLaunchFailure when a kernel fails. `kernel` is only
 * used to name it in messages. */
void gm_emu_run(const dim3 *grid, const dim3 *block, void (*closure_fn)(void *), void *closure,
                const void *kernel, const void *const *pointer_args, const int *pointer_arg_numbers,
                int npointers);
}

inline const uint3 &threadIdx = gm_emu_thread_idx;
inline const uint3 &blockIdx = gm_emu_block_idx;
inline const dim3 &blockDim = gm_emu_block_dim;
inline const dim3 &gridDim = gm_emu_grid_dim;
inline const int warpSize = 32;

/* The call is opaque to the compiler (it is defined in another file and switches stacks), so every value in
 * shared or global memory is re-read after it; the asm keeps that true even under link-time optimisation. */
inline void __syncthreads(void) {
    __asm__ __volatile__("" ::: "memory");
    gm_emu_syncthreads();
    __asm__ __volatile__("" ::: "memory");
}
inline void __threadfence(void) { __asm__ __volatile__("" ::: "memory"); }
inline void __threadfence_block(void) { __asm__ __volatile__("" ::: "memory"); }
inline void __threadfence_system(void) { __asm__ __volatile__("" ::: "memory"); }
inline void __trap(void) { gm_emu_trap("the kernel called __trap()"); }

/* ---- launching ------------------------------------------------------------------------------------------
 * cuda_common.cuh's GM_LAUNCH calls gm_emu_launch(kernel, dim3(grid), dim3(block), args...). The kernel's
 * parameter types P come from `kernel` alone and each argument is converted to its P at the call, exactly as
 * in a real launch (a literal 0 to a pointer, an int64_t to an int); each thread then calls the kernel with
 * its own copies of the converted arguments, as each CUDA thread has its own parameters. */
template <typename T> struct gm_emu_same { typedef T type; };

template <typename... P> struct gm_emu_closure {
    void (*kernel)(P...);
    std::tuple<typename std::decay<P>::type...> args;
    static void run(void *self) {
        gm_emu_closure *c = static_cast<gm_emu_closure *>(self);
        std::apply(c->kernel, c->args);
    }
};

/* The launch checks the pointer arguments before anything runs (a host pointer where device memory is
 * expected works on the CPU but faults on a GPU); these collect them (object pointers only). */
template <typename T> inline void gm_emu_note_pointer(const T &v, int number, const void **ptrs, int *numbers,
                                                      int &n) {
    if constexpr (std::is_pointer<T>::value && !std::is_function<typename std::remove_pointer<T>::type>::value) {
        if (v) {
            ptrs[n] = (const void *)v;
            numbers[n++] = number;
        }
    }
}
template <typename Tuple, size_t... I>
inline void gm_emu_note_pointers([[maybe_unused]] const Tuple &t, [[maybe_unused]] const void **ptrs,
                                 [[maybe_unused]] int *numbers, [[maybe_unused]] int &n, std::index_sequence<I...>) {
    (gm_emu_note_pointer(std::get<I>(t), (int)I + 1, ptrs, numbers, n), ...);
}

template <typename... P>
inline void gm_emu_launch(void (*kernel)(P...), dim3 grid, dim3 block, typename gm_emu_same<P>::type... args) {
    gm_emu_closure<P...> c{kernel, std::tuple<typename std::decay<P>::type...>(args...)};
    const void *ptrs[sizeof...(P) + 1] = {};
    int numbers[sizeof...(P) + 1] = {}, n = 0;
    gm_emu_note_pointers(c.args, ptrs, numbers, n, std::index_sequence_for<P...>{});
    gm_emu_run(&grid, &block, &gm_emu_closure<P...>::run, &c, reinterpret_cast<const void *>(kernel), ptrs,
               numbers, n);
}

/* ---- atomics ------------------------------------------------------------------------------------------------
 * Exact without locks: fibers are cooperative on one OS thread and never switch inside these. Integer
 * arithmetic wraps like the hardware's (done in the unsigned type: signed overflow is undefined in C++). Each
 * returns the old value. */
#define GM_EMU_ATOMIC_RMW(name, T, U, expr)                                                                \
    inline T name(T *address, T val) {                                                                   \
        T old = *address;                                                                                \
        *address = (T)(expr);                                                                            \
        return old;                                                                                      \
    }
GM_EMU_ATOMIC_RMW(atomicAdd, int, unsigned, (unsigned)old + (unsigned)val)
GM_EMU_ATOMIC_RMW(atomicAdd, unsigned, unsigned, old + val)
GM_EMU_ATOMIC_RMW(atomicAdd, unsigned long long, unsigned long long, old + val)
GM_EMU_ATOMIC_RMW(atomicAdd, float, float, old + val)
GM_EMU_ATOMIC_RMW(atomicAdd, double, double, old + val)
GM_EMU_ATOMIC_RMW(atomicSub, int, unsigned, (unsigned)old - (unsigned)val)
GM_EMU_ATOMIC_RMW(atomicSub, unsigned, unsigned, old - val)
GM_EMU_ATOMIC_RMW(atomicExch, int, int, val)
GM_EMU_ATOMIC_RMW(atomicExch, unsigned, unsigned, val)
GM_EMU_ATOMIC_RMW(atomicExch, unsigned long long, unsigned long long, val)
GM_EMU_ATOMIC_RMW(atomicExch, float, float, val)
GM_EMU_ATOMIC_RMW(atomicMax, int, int, val > old ? val : old)
GM_EMU_ATOMIC_RMW(atomicMax, unsigned, unsigned, val > old ? val : old)
GM_EMU_ATOMIC_RMW(atomicMax, long long, long long, val > old ? val : old)
GM_EMU_ATOMIC_RMW(atomicMax, unsigned long long, unsigned long long, val > old ? val : old)
GM_EMU_ATOMIC_RMW(atomicMin, int, int, val < old ? val : old)
GM_EMU_ATOMIC_RMW(atomicMin, unsigned, unsigned, val < old ? val : old)
GM_EMU_ATOMIC_RMW(atomicMin, long long, long long, val < old ? val : old)
GM_EMU_ATOMIC_RMW(atomicMin, unsigned long long, unsigned long long, val < old ? val : old)
GM_EMU_ATOMIC_RMW(atomicOr, int, int, old | val)
GM_EMU_ATOMIC_RMW(atomicOr, unsigned, unsigned, old | val)
GM_EMU_ATOMIC_RMW(atomicOr, unsigned long long, unsigned long long, old | val)
GM_EMU_ATOMIC_RMW(atomicAnd, int, int, old & val)
GM_EMU_ATOMIC_RMW(atomicAnd, unsigned, unsigned, old & val)
GM_EMU_ATOMIC_RMW(atomicAnd, unsigned long long, unsigned long long, old & val)
GM_EMU_ATOMIC_RMW(atomicXor, int, int, old ^ val)
GM_EMU_ATOMIC_RMW(atomicXor, unsigned, unsigned, old ^ val)
GM_EMU_ATOMIC_RMW(atomicXor, unsigned long long, unsigned long long, old ^ val)
/* ((old >= val) ? 0 : old + 1) and ((old == 0 || old > val) ? val : old - 1), as documented */
GM_EMU_ATOMIC_RMW(atomicInc, unsigned, unsigned, old >= val ? 0u : old + 1u)
GM_EMU_ATOMIC_RMW(atomicDec, unsigned, unsigned, (old == 0u || old > val) ? val : old - 1u)
#undef GM_EMU_ATOMIC_RMW

#define GM_EMU_ATOMIC_CAS(T)                                                                               \
    inline T atomicCAS(T *address, T compare, T val) {                                                   \
        T old = *address;                                                                                \
        if (old == compare) *address = val;                                                              \
        return old;                                                                                      \
    }
GM_EMU_ATOMIC_CAS(int)
GM_EMU_ATOMIC_CAS(unsigned)
GM_EMU_ATOMIC_CAS(unsigned long long)
#undef GM_EMU_ATOMIC_CAS

/* ---- intrinsics ------------------------------------------------------------------------------------------ */
template <typename To, typename From> inline To gm_emu_bits(From v) {
    static_assert(sizeof(To) == sizeof(From), "bit cast between types of different sizes");
    To r;
    memcpy(&r, &v, sizeof r);
    return r;
}
inline int __float_as_int(float x) { return gm_emu_bits<int>(x); }
inline float __int_as_float(int x) { return gm_emu_bits<float>(x); }
inline unsigned __float_as_uint(float x) { return gm_emu_bits<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return gm_emu_bits<float>(x); }
inline long long __double_as_longlong(double x) { return gm_emu_bits<long long>(x); }
inline double __longlong_as_double(long long x) { return gm_emu_bits<double>(x); }

/* The fast-math intrinsics are less precise on a GPU; here they are the exact functions, so a result that
 * depends on their error is not caught (see emu_runtime.cpp, known limits). */
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; /* NaN -> 0 */ }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

/* Explicitly rounded arithmetic: one IEEE operation each (g++ -std=c++17 does not contract a*b+c into an fma,
 * and x86-64 SSE arithmetic rounds to nearest even). */
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return sqrt(a); }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }

/* Conversions. Float -> integer saturates and maps NaN to 0, like the hardware's (a plain C cast of an
 * out-of-range value is undefined). */
template <typename I, typename F> inline I gm_emu_f2i(F x) {
    if (x != x) return 0;
    if (x <= (F)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (x >= (F)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)x;
}
inline float __double2float_rn(double x) { return (float)x; }
inline int __float2int_rn(float x) { return gm_emu_f2i<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return gm_emu_f2i<int>(truncf(x)); }
inline int __float2int_rd(float x) { return gm_emu_f2i<int>(floorf(x)); }
inline int __float2int_ru(float x) { return gm_emu_f2i<int>(ceilf(x)); }
inline long long __float2ll_rn(float x) { return gm_emu_f2i<long long>(nearbyintf(x)); }
inline long long __float2ll_rz(float x) { return gm_emu_f2i<long long>(truncf(x)); }
inline int __double2int_rn(double x) { return gm_emu_f2i<int>(nearbyint(x)); }
inline int __double2int_rz(double x) { return gm_emu_f2i<int>(trunc(x)); }
inline long long __double2ll_rn(double x) { return gm_emu_f2i<long long>(nearbyint(x)); }
inline long long __double2ll_rz(double x) { return gm_emu_f2i<long long>(trunc(x)); }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline float __ll2float_rn(long long x) { return (float)x; }
inline double __ll2double_rn(long long x) { return (double)x; }

/* Integer intrinsics (defined for every input, as on the GPU: __clz(0) is 32, __ffs(0) is 0). */
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++, x >>= 1) r = (r << 1) | (x & 1u);
    return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

/* Read-only cache loads are plain loads here. */
template <typename T> inline T __ldg(const T *p) { return *p; }

/* ---- host API overloads of the real cuda_runtime.h (C++ only) ------------------------------------------- */
template <typename T> inline cudaError_t cudaMalloc(T **ptr, size_t size) {
    return ::cudaMalloc(reinterpret_cast<void **>(ptr), size);
}
template <typename T> inline cudaError_t cudaMallocHost(T **ptr, size_t size) {
    return ::cudaMallocHost(reinterpret_cast<void **>(ptr), size);
}
template <typename T> inline cudaError_t cudaHostAlloc(T **ptr, size_t size, unsigned int flags) {
    return ::cudaHostAlloc(reinterpret_cast<void **>(ptr), size, flags);
}
/* __constant__ / __device__ variables are ordinary globals: copy to/from them directly. */
template <typename T>
inline cudaError_t cudaMemcpyToSymbol(const T &symbol, const void *src, size_t count, size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    if (offset > sizeof(T) || count > sizeof(T) - offset || (count && !src)) return cudaErrorInvalidValue;
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    if (count) memcpy(reinterpret_cast<char *>(const_cast<T *>(&symbol)) + offset, src, count);
    return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t count, size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    if (offset > sizeof(T) || count > sizeof(T) - offset || (count && !dst)) return cudaErrorInvalidValue;
    if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    if (count) memcpy(dst, reinterpret_cast<const char *>(&symbol) + offset, count);
    return cudaSuccess;
}
/* The Async forms: launches and copies have run when they return, so these are the synchronous ones once the
 * stream is known to be live. */
template <typename T>
inline cudaError_t cudaMemcpyToSymbolAsync(const T &symbol, const void *src, size_t count, size_t offset = 0,
                                           cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t stream = 0) {
    if (cudaError_t e = gm_emu_stream_ready("cudaMemcpyToSymbolAsync", stream)) return e;
    return cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}
template <typename T>
inline cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const T &symbol, size_t count, size_t offset = 0,
                                             cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t stream = 0) {
    if (cudaError_t e = gm_emu_stream_ready("cudaMemcpyFromSymbolAsync", stream)) return e;
    return cudaMemcpyFromSymbol(dst, symbol, count, offset, kind);
}
/* The device address of a __device__ variable: the global itself, registered so that copies and kernel arguments
 * accept it as device memory. */
template <typename T> inline cudaError_t cudaGetSymbolAddress(void **dev_ptr, const T &symbol) {
    if (!dev_ptr) return cudaErrorInvalidValue;
    if (cudaError_t e = gm_emu_register_symbol(&symbol, sizeof(T))) return e;
    *dev_ptr = const_cast<T *>(&symbol);
    return cudaSuccess;
}

#endif /* __cplusplus */

#endif
