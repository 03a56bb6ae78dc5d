/* kernels/cuda/roi_align.cu — roi_align on CUDA (the CPU twin: kernels/cpu/roi_align.c; geometry and samples:
 * kernels/roi_align.h). One thread per output element (box, channel, bin): the forward sums its bin's samples,
 * the backward adds its gradient's share into the samples' taps with atomicAdd. float32 and float64. */
#include <type_traits>

#include "../roi_align.h"
#include "nn_common.cuh"
#include "roi_align.h"

/* Box k as roi_box, or false for one the CPU kernel would refuse (see roi_align.h). */
template <int DT> __device__ bool roi_box_at(const void *rois, int64_t k, const roi_align_geom g, roi_box *r) {
    double v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = nn_ld<DT>(rois, k * 5 + i);
        if (!isfinite(v[i])) return false;
    }
    if (v[0] < 0 || v[0] >= (double)g.N) return false;
    *r = roi_box_of(&g, v[0], v[1], v[2], v[3], v[4]);
    return true;
}

template <int DT>
__global__ void roi_align_fwd_kernel(void *out, const void *input, const void *rois, const roi_align_geom g) {
    const int64_t bins = g.PH * g.PW;
    GM_CU_GRID_STRIDE(e, g.K * g.C * bins) {
        const int64_t kc = e / bins, ph = e % bins / g.PW, pw = e % g.PW;
        roi_box r;
        double sum = 0.0;
        if (roi_box_at<DT>(rois, kc / g.C, g, &r)) {
            const int64_t base = (r.n * g.C + kc % g.C) * g.H * g.W;
            for (int64_t iy = 0; iy < r.grid_h; iy++)
                for (int64_t ix = 0; ix < r.grid_w; ix++) {
                    const roi_taps t = roi_sample(&r, ph, pw, iy, ix, g.H, g.W);
                    for (int q = 0; q < 4; q++) sum += t.w[q] * nn_ld<DT>(input, base + t.at[q]);
                }
            sum /= r.count;
        }
        nn_st<DT>(out, e, sum);
    }
}

template <int DT> __global__ void roi_align_zero_kernel(void *x, int64_t n) {
    GM_CU_GRID_STRIDE(i, n) nn_st<DT>(x, i, 0.0);
}

template <int DT>
__global__ void roi_align_bwd_kernel(void *grad_input, const void *grad, const void *rois, const roi_align_geom g) {
    typedef typename std::conditional<DT == GM_F64, double, float>::type T;
    const int64_t bins = g.PH * g.PW;
    GM_CU_GRID_STRIDE(e, g.K * g.C * bins) {
        const int64_t kc = e / bins, ph = e % bins / g.PW, pw = e % g.PW;
        roi_box r;
        if (!roi_box_at<DT>(rois, kc / g.C, g, &r)) continue;
        const int64_t base = (r.n * g.C + kc % g.C) * g.H * g.W;
        const double share = nn_ld<DT>(grad, e) / r.count;
        for (int64_t iy = 0; iy < r.grid_h; iy++)
            for (int64_t ix = 0; ix < r.grid_w; ix++) {
                const roi_taps t = roi_sample(&r, ph, pw, iy, ix, g.H, g.W);
                for (int q = 0; t.ok && q < 4; q++) atomicAdd((T *)grad_input + base + t.at[q], (T)(share * t.w[q]));
            }
    }
}

#define ROI_LAUNCH(KERNEL, n, ...)                                                                           \
    do {                                                                                                     \
        if (dt == GM_F32) GM_LAUNCH(KERNEL<GM_F32>, gm_cu_blocks(n, ctx), GM_CU_THREADS, ctx, __VA_ARGS__);  \
        else GM_LAUNCH(KERNEL<GM_F64>, gm_cu_blocks(n, ctx), GM_CU_THREADS, ctx, __VA_ARGS__);               \
    } while (0)

static bool roi_args_ok(const roi_align_geom *g, gm_dtype dt) {
    return (dt == GM_F32 || dt == GM_F64) && g->N >= 0 && g->C >= 0 && g->H >= 1 && g->W >= 1 && g->K >= 0 &&
           g->PH >= 1 && g->PW >= 1;
}

extern "C" int cuda_roi_align_forward(void *out, const void *input, const void *rois, const roi_align_geom *g,
                                      gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!roi_args_ok(g, dt)) return GM_ERR_ARG;
    const int64_t n = g->K * g->C * g->PH * g->PW;
    if (n == 0) return GM_OK;
    ROI_LAUNCH(roi_align_fwd_kernel, n, out, input, rois, *g);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_roi_align_backward(void *grad_input, const void *grad, const void *rois, const roi_align_geom *g,
                                       gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!roi_args_ok(g, dt)) return GM_ERR_ARG;
    const int64_t planes = g->N * g->C * g->H * g->W, n = g->K * g->C * g->PH * g->PW;
    if (planes > 0) ROI_LAUNCH(roi_align_zero_kernel, planes, grad_input, planes);
    if (n > 0) ROI_LAUNCH(roi_align_bwd_kernel, n, grad_input, grad, rois, *g);
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
