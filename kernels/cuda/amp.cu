/* kernels/cuda/amp.cu — GradScaler's unscale over a list of gradients (amp.h), the CUDA twin of
 * kernels/cpu/amp.c.
 *
 * The tensors of one dtype travel in a table in the kernel's parameters (as in optim.cu: no device memory, no
 * copy), cut into chunks that the blocks share out. The non-finite flag is a __device__ int rather than an
 * allocator block, so that unscale allocates nothing on CUDA as on the CPU; it is shared by every call on the
 * device, which is safe because all of them run on the device's one stream and each call reads the flag back
 * before it returns (under the GIL). */
#include <math.h>

#include "amp.h"
#include "cuda_common.cuh"

#ifdef GM_CUDA_EMU
#define AMP_CHUNK 1000 /* small, so the emulator's tests cross chunk boundaries */
#else
#define AMP_CHUNK 65536
#endif
#define AMP_CAP 128

__device__ int g_amp_found_inf;

struct amp_table {
    int n;
    int64_t chunk0[AMP_CAP + 1]; /* tensor t's first chunk; chunk0[n] = the total */
    int64_t numel[AMP_CAP];
    void *ptr[AMP_CAP];
};
static_assert(sizeof(amp_table) + sizeof(double) <= 4000, "kernel parameters must fit 4 KiB");

__global__ void amp_reset_kernel(int value) { g_amp_found_inf = value; }

template <int DT> __global__ void amp_unscale_kernel(amp_table L, float inv_scale) {
    typedef typename gm_cu_type<DT>::st S;
    typedef typename gm_cu_type<DT>::acc A;
    int bad = 0;
    for (int64_t c = blockIdx.x; c < L.chunk0[L.n]; c += gridDim.x) {
        int lo = 0, hi = L.n - 1; /* the tensor holding chunk c: the last t with chunk0[t] <= c */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (L.chunk0[mid] <= c) lo = mid;
            else hi = mid - 1;
        }
        S *p = (S *)L.ptr[lo];
        const int64_t i0 = (c - L.chunk0[lo]) * AMP_CHUNK, i1 = gm_cu_min<int64_t>(i0 + AMP_CHUNK, L.numel[lo]);
        for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
            gm_cu_st<DT>(p + i, gm_cu_ld<DT>(p + i) * (A)inv_scale); /* in float (double for float64) */
            bad |= !isfinite(gm_cu_ld<DT>(p + i)); /* as stored: a 16-bit overflow counts, as on the CPU */
        }
    }
    bad = gm_cu_block_reduce(bad, gm_cu_sum());
    if (threadIdx.x == 0 && bad) g_amp_found_inf = 1;
}

static void amp_flush(gm_dtype dt, amp_table &L, float inv_scale, gm_cuda_ctx *ctx) {
    if (L.n == 0) return;
    unsigned grid = gm_cu_blocks(L.chunk0[L.n] * GM_CU_THREADS, ctx); /* at most one block per chunk */
    switch (dt) {
    case GM_F32: GM_LAUNCH(amp_unscale_kernel<GM_F32>, grid, GM_CU_THREADS, ctx, L, inv_scale); break;
    case GM_F64: GM_LAUNCH(amp_unscale_kernel<GM_F64>, grid, GM_CU_THREADS, ctx, L, inv_scale); break;
    case GM_F16: GM_LAUNCH(amp_unscale_kernel<GM_F16>, grid, GM_CU_THREADS, ctx, L, inv_scale); break;
    default: GM_LAUNCH(amp_unscale_kernel<GM_BF16>, grid, GM_CU_THREADS, ctx, L, inv_scale); break;
    }
    L.n = 0;
}

extern "C" int cuda_amp_unscale_forward(void *const *g, const gm_dtype *dt, const int64_t *numel, int ntensors,
                                        double inv_scale, int *found_inf, gm_cuda_ctx *ctx) {
    if (ntensors < 0 || (ntensors > 0 && (!g || !dt || !numel))) return GM_ERR_ARG;
    for (int t = 0; t < ntensors; t++) {
        if (!gm_dtype_is_float(dt[t])) return GM_ERR_UNSUPPORTED;
        if (numel[t] < 0 || (numel[t] > 0 && !g[t])) return GM_ERR_ARG;
    }
    static const gm_dtype kinds[4] = {GM_F32, GM_F64, GM_F16, GM_BF16};
    const float inv = (float)inv_scale; /* PyTorch keeps 1/scale in a float32 tensor */
    int flag = 0;
    GM_LAUNCH(amp_reset_kernel, 1, 1, ctx, 0);
    amp_table L;
    for (int q = 0; q < 4; q++) {
        L.n = 0;
        L.chunk0[0] = 0;
        for (int t = 0; t < ntensors; t++) {
            if (dt[t] != kinds[q] || numel[t] == 0) continue;
            L.ptr[L.n] = g[t];
            L.numel[L.n] = numel[t];
            L.chunk0[L.n + 1] = L.chunk0[L.n] + (numel[t] + AMP_CHUNK - 1) / AMP_CHUNK;
            if (++L.n == AMP_CAP) {
                amp_flush(kinds[q], L, inv, ctx);
                L.chunk0[0] = 0;
            }
        }
        amp_flush(kinds[q], L, inv, ctx);
    }
    GM_CU_LAUNCHED(ctx);
    cudaStream_t s = (cudaStream_t)ctx->stream;
    GM_CU_CHECK(ctx, cudaMemcpyFromSymbolAsync(&flag, g_amp_found_inf, sizeof flag, 0, cudaMemcpyDeviceToHost, s));
    GM_CU_CHECK(ctx, cudaStreamSynchronize(s));
    if (flag) *found_inf = 1;
    return GM_OK;
}
