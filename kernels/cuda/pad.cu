/* kernels/cuda/pad.cu — F.pad on CUDA (pad.h): one thread per output element for the forward (an element-sized
 * copy, or the fill), one per input element for the backward (the gather of kernels/pad_geom.h's pad_readers,
 * summed in double in the CPU's order): no atomics, deterministic. */
#include "pad.h"
#include "nn_common.cuh"

#include <string.h>

template <typename T>
__global__ void pad_fwd_kernel(T *out, const T *inp, T fill, pad_geom g, int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const int64_t ow = i % g.out[2], oh = (i / g.out[2]) % g.out[1], od = (i / (g.out[2] * g.out[1])) % g.out[0];
        const int64_t p = i / (g.out[2] * g.out[1] * g.out[0]);
        const int64_t sd = pad_src(g.mode, od, g.in[0], g.before[0]), sh = pad_src(g.mode, oh, g.in[1], g.before[1]);
        const int64_t sw = pad_src(g.mode, ow, g.in[2], g.before[2]);
        out[i] = sd < 0 || sh < 0 || sw < 0 ? fill : inp[((p * g.in[0] + sd) * g.in[1] + sh) * g.in[2] + sw];
    }
}

template <int DT>
__global__ void pad_bwd_kernel(void *dinp, const void *dout, pad_geom g, int64_t total) {
    GM_CU_GRID_STRIDE(i, total) {
        const int64_t D = g.in[0], H = g.in[1], W = g.in[2], OD = g.out[0], OH = g.out[1], OW = g.out[2];
        const int64_t w = i % W, h = (i / W) % H, d = (i / (W * H)) % D, p = i / (W * H * D);
        int64_t dlo[3], dhi[3], hlo[3], hhi[3], wlo[3], whi[3];
        const int nd = pad_readers(g.mode, d, D, g.before[0], OD, dlo, dhi);
        const int nh = pad_readers(g.mode, h, H, g.before[1], OH, hlo, hhi);
        const int nw = pad_readers(g.mode, w, W, g.before[2], OW, wlo, whi);
        double s = 0.0;
        for (int a = 0; a < nd; a++)
            for (int64_t od = dlo[a]; od < dhi[a]; od++)
                for (int b = 0; b < nh; b++)
                    for (int64_t oh = hlo[b]; oh < hhi[b]; oh++) {
                        const int64_t row = ((p * OD + od) * OH + oh) * OW;
                        for (int c = 0; c < nw; c++)
                            for (int64_t ow = wlo[c]; ow < whi[c]; ow++) s += nn_ld<DT>(dout, row + ow);
                    }
        nn_st<DT>(dinp, i, s);
    }
}

static int geom_ok(const pad_geom *g) {
    if (g->planes < 0 || g->mode < PAD_CONSTANT || g->mode > PAD_CIRCULAR) return 0;
    for (int k = 0; k < 3; k++)
        if (g->in[k] < 0 || g->out[k] < 0 || (g->mode != PAD_CONSTANT && g->in[k] < 1)) return 0;
    return 1;
}

template <typename T>
static void launch_fwd(void *out, const void *inp, const void *fill, const pad_geom *g, int64_t total,
                       gm_cuda_ctx *ctx) {
    T f = 0;
    if (fill) memcpy(&f, fill, sizeof f);
    GM_LAUNCH(pad_fwd_kernel<T>, gm_cu_blocks(total, ctx), GM_CU_THREADS, ctx, (T *)out, (const T *)inp, f, *g,
              total);
}

extern "C" int cuda_pad_forward(void *out, const void *inp, const void *fill, const pad_geom *g, gm_dtype dt,
                                gm_cuda_ctx *ctx) {
    if (!geom_ok(g) || (g->mode == PAD_CONSTANT && !fill)) return GM_ERR_ARG;
    const int64_t total = g->planes * g->out[0] * g->out[1] * g->out[2];
    if (total == 0) return GM_OK;
    switch (gm_dtype_size(dt)) {
    case 1: launch_fwd<uint8_t>(out, inp, fill, g, total, ctx); break;
    case 2: launch_fwd<uint16_t>(out, inp, fill, g, total, ctx); break;
    case 4: launch_fwd<uint32_t>(out, inp, fill, g, total, ctx); break;
    case 8: launch_fwd<uint64_t>(out, inp, fill, g, total, ctx); break;
    default: return GM_ERR_ARG;
    }
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}

extern "C" int cuda_pad_backward(void *dinp, const void *dout, const pad_geom *g, gm_dtype dt, gm_cuda_ctx *ctx) {
    if (!geom_ok(g) || !gm_dtype_is_float(dt)) return GM_ERR_ARG;
    const int64_t total = g->planes * g->in[0] * g->in[1] * g->in[2];
    if (total == 0) return GM_OK;
#define CALL(DT)                                                                                             \
    {                                                                                                        \
        auto *k = &pad_bwd_kernel<DT>;                                                                       \
        GM_LAUNCH(k, gm_cu_blocks(total, ctx), GM_CU_THREADS, ctx, dinp, dout, *g, total);                   \
    }
    NN_CU_DISPATCH(dt, CALL)
#undef CALL
    GM_CU_LAUNCHED(ctx);
    return GM_OK;
}
