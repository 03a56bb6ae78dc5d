/* kernels/cuda/nn_common.cuh — element access shared by the nn kernels on CUDA (activation, dropout, norm,
 * softmax, loss), the counterpart of kernels/cpu/nn_dtype.h.
 *
 * The CPU nn kernels compute in double for every float dtype (widened on load, rounded once on store) and take
 * transcendentals in single precision for the narrow dtypes. These helpers do exactly the same, so that the
 * CUDA results match the CPU ones: bit for bit where the math is elementwise and free of transcendentals
 * (relu, leaky_relu, dropout, batch-norm eval, ...), and to the last ulp of the libm difference otherwise. The
 * memory-bound ops pay nothing measurable for the double arithmetic on a data-centre GPU (H100/H200: fp64 at
 * half the fp32 rate). DT is a compile-time dtype everywhere: kernels are templates over it. */
#ifndef GM_KERNELS_CUDA_NN_COMMON_CUH
#define GM_KERNELS_CUDA_NN_COMMON_CUH

#include <math.h>

#include "cuda_common.cuh"

#define NN_DEV static __host__ __device__ __forceinline__

/* Element i of a float array of dtype DT, as double. */
template <int DT> NN_DEV double nn_ld(const void *p, int64_t i) {
    if (DT == GM_F32) return ((const float *)p)[i];
    if (DT == GM_F64) return ((const double *)p)[i];
    if (DT == GM_F16) return gm_half_to_float(((const uint16_t *)p)[i]);
    return gm_bf16_to_float(((const uint16_t *)p)[i]);
}

/* Store v as element i (16-bit types: through float, round to nearest even, as kernels/cpu/nn_dtype.h). */
template <int DT> NN_DEV void nn_st(void *p, int64_t i, double v) {
    if (DT == GM_F32) ((float *)p)[i] = (float)v;
    else if (DT == GM_F64) ((double *)p)[i] = v;
    else if (DT == GM_F16) ((uint16_t *)p)[i] = gm_float_to_half((float)v);
    else ((uint16_t *)p)[i] = gm_float_to_bf16((float)v);
}

/* The same with a runtime dtype: per-channel values (weights, running statistics) are few, read once per
 * channel or row, so a switch costs nothing there. */
NN_DEV double nn_ld_rt(const void *p, int64_t i, int dt) {
    switch (dt) {
    case GM_F32: return nn_ld<GM_F32>(p, i);
    case GM_F64: return nn_ld<GM_F64>(p, i);
    case GM_F16: return nn_ld<GM_F16>(p, i);
    default: return nn_ld<GM_BF16>(p, i);
    }
}
NN_DEV void nn_st_rt(void *p, int64_t i, int dt, double v) {
    switch (dt) {
    case GM_F32: nn_st<GM_F32>(p, i, v); break;
    case GM_F64: nn_st<GM_F64>(p, i, v); break;
    case GM_F16: nn_st<GM_F16>(p, i, v); break;
    default: nn_st<GM_BF16>(p, i, v); break;
    }
}

/* Transcendentals as the CPU kernels take them: double for float64, single precision otherwise. */
template <int DT> NN_DEV double nn_exp(double x) { return DT == GM_F64 ? exp(x) : (double)expf((float)x); }
template <int DT> NN_DEV double nn_log(double x) { return DT == GM_F64 ? log(x) : (double)logf((float)x); }
template <int DT> NN_DEV double nn_log1p(double x) { return DT == GM_F64 ? log1p(x) : (double)log1pf((float)x); }
template <int DT> NN_DEV double nn_tanh(double x) { return DT == GM_F64 ? tanh(x) : (double)tanhf((float)x); }
template <int DT> NN_DEV double nn_erf(double x) { return DT == GM_F64 ? erf(x) : (double)erff((float)x); }

/* Maximum that lets NaN win (a NaN row must give NaN), as the CPU loops' `if (v > mx || v != v) mx = v`. */
struct nn_nanmax {
    __host__ __device__ __forceinline__ double operator()(double a, double b) const {
        return (a != a) ? a : (b > a || b != b) ? b : a;
    }
};

struct nn_min_i64 {
    __host__ __device__ __forceinline__ int64_t operator()(int64_t a, int64_t b) const { return b < a ? b : a; }
};

/* Elementwise kernels take NN_ILP elements per thread per step of their grid-stride loop, loading all of them
 * before storing any: a GPU needs several loads in flight per thread to reach its memory bandwidth, and a plain
 * loop (a store between two loads through possibly aliasing pointers) keeps one. A step covers NN_ILP *
 * blockDim consecutive elements, thread t taking t, t + blockDim, ...: every access stays coalesced. */
#define NN_ILP 4
#define NN_ILP_STEPS(i0, n)                                                                                  \
    for (int64_t i0 = (int64_t)blockIdx.x * blockDim.x * NN_ILP + threadIdx.x; i0 < (n);                     \
         i0 += (int64_t)gridDim.x * blockDim.x * NN_ILP)
/* Blocks for an NN_ILP loop over n elements. */
static inline unsigned nn_ilp_blocks(int64_t n, const gm_cuda_ctx *ctx) {
    return gm_cu_blocks((n + NN_ILP - 1) / NN_ILP, ctx);
}

/* Instantiate CALL(DT) for a float dtype; GM_ERR_ARG otherwise (the CPU kernels' check). */
#define NN_CU_DISPATCH(dt, CALL) GM_CU_SWITCH_FLOAT(dt, CALL)

#endif
