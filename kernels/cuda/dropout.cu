/* kernels/cuda/dropout.cu — dropout mask and its application on CUDA (see kernels/cpu/dropout.h for the mask's
 * definition, kernels/cpu/dropout.c for the reference). One thread per Philox block for the mask (4 mask bytes
 * per block, as the CPU loop), grid-stride loops for the application. */
#include "dropout.h"
#include "nn_common.cuh"
#include "../philox.h"

__global__ void dropout_mask_kernel(uint8_t *mask, int64_t n, int64_t nblocks, double keep, uint64_t seed,
                                    uint64_t offset, int bits, double inv) {
    GM_CU_GRID_STRIDE(b, nblocks) {
        uint32_t x[4];
        philox_stream_block(seed, offset + (uint64_t)b, x);
        const int64_t i0 = b * 4;
        const int m = n - i0 < 4 ? (int)(n - i0) : 4;
        for (int j = 0; j < m; j++) mask[i0 + j] = philox_narrow_uniform(x, j, bits, inv) < keep;
    }
}

/* float32, elementwise: as the CPU's hot path, the product in float and a dropped element +0 (even for inf). */
__global__ void dropout_apply_f32_kernel(float *out, const float *inp, const uint8_t *mask, int64_t n, float s) {
    NN_ILP_STEPS(i0, n) {
        float v[NN_ILP];
        uint8_t m[NN_ILP];
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            v[k] = i < n ? inp[i] : 0.0f;
            m[k] = i < n ? mask[i] : 0;
        }
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            if (i < n) out[i] = m[k] ? v[k] * s : 0.0f;
        }
    }
}

/* Every other case: the product in double, rounded once (the CPU's generic loops). Element i belongs to mask
 * entry i / inner; for inner == 1 that division is skipped. */
template <int DT, bool ELEMENTWISE>
__global__ void dropout_apply_kernel(void *out, const void *inp, const uint8_t *mask, int64_t n, int64_t inner,
                                     double scale) {
    NN_ILP_STEPS(i0, n) {
        double v[NN_ILP];
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            v[k] = i < n && mask[ELEMENTWISE ? i : i / inner] ? nn_ld<DT>(inp, i) * scale : 0.0;
        }
#pragma unroll
        for (int k = 0; k < NN_ILP; k++) {
            const int64_t i = i0 + (int64_t)k * blockDim.x;
            if (i < n) nn_st<DT>(out, i, v[k]);
        }
    }
}

extern "C" int cuda_dropout_mask_forward(uint8_t *mask, int64_t n, double p, uint64_t seed, uint64_t offset,
                                         gm_cuda_ctx *ctx) {
    if (n < 0 || !(p >= 0.0 && p <= 1.0)) return GM_ERR_ARG;
    if (n == 0) return GM_OK;
    const int bits = philox_uniform_bits(GM_F32);
    const double inv = ldexp(1.0, -bits);
    const int64_t nblocks = (int64_t)philox_blocks(GM_F32, n);
    GM_LAUNCH(dropout_mask_kernel, gm_cu_blocks(nblocks, ctx), GM_CU_THREADS, ctx, mask, n, nblocks, 1.0 - p, seed,
              offset, bits, inv);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

template <int DT>
static void launch_apply(void *out, const void *inp, const uint8_t *mask, int64_t n, int64_t inner, double scale,
                         unsigned grid, gm_cuda_ctx *ctx) {
    if (inner == 1) {
        auto *k = &dropout_apply_kernel<DT, true>;
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, out, inp, mask, n, inner, scale);
    } else {
        auto *k = &dropout_apply_kernel<DT, false>;
        GM_LAUNCH(k, grid, GM_CU_THREADS, ctx, out, inp, mask, n, inner, scale);
    }
}

extern "C" int cuda_dropout_apply_forward(void *out, const void *inp, const uint8_t *mask, int64_t outer,
                                          int64_t inner, double scale, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!gm_dtype_is_float(dt) || outer < 0 || inner < 0) return GM_ERR_ARG;
    const int64_t n = outer * inner;
    if (n == 0) return GM_OK;
    const unsigned grid = nn_ilp_blocks(n, ctx);
    if (inner == 1 && dt == GM_F32) {
        GM_LAUNCH(dropout_apply_f32_kernel, grid, GM_CU_THREADS, ctx, (float *)out, (const float *)inp, mask, n,
                  (float)scale);
    } else {
#define CALL(DT) launch_apply<DT>(out, inp, mask, n, inner, scale, grid, ctx)
        NN_CU_DISPATCH(dt, CALL)
#undef CALL
    }
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
