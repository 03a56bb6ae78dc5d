/* kernels/cuda/emu/conv_emu.cpp — the emulator build's stand-in for kernels/cuda/conv.cu (cuDNN is not there):
 * the same entry points (conv.h). There is one candidate, the direct kernels (kernels/cuda/conv_direct.cu, plain
 * sums over the taps with groups, stride, dilation and any padding), with no workspace; the passes run them in
 * the emulator. So the emulator tests the dispatch and the direct kernels, and the CPU-vs-CUDA comparisons of
 * the whole family, but not cuDNN itself (that needs a GPU). */
#include "../conv.h"

extern "C" int cuda_conv2d_algos(const conv_geom *g, gm_dtype dt, conv_pass pass, cuda_conv_algo *algos, int max,
                                 int *count, gm_cuda_ctx *ctx) {
    (void)dt, (void)pass, (void)ctx;
    if (!g || !algos || !count || max < 1) return GM_ERR_ARG;
    algos[0].algo = CUDA_CONV_DIRECT;
    algos[0].math = 0;
    algos[0].ws = 0;
    *count = 1;
    return GM_OK;
}

extern "C" int cuda_conv2d_forward(void *out, const void *inp, const void *weight, const void *bias,
                                   const conv_geom *g, gm_dtype dt, const cuda_conv_algo *algo, void *ws,
                                   size_t ws_nbytes, gm_cuda_ctx *ctx) {
    (void)ws, (void)ws_nbytes;
    if (!algo) return GM_ERR_ARG;
    return cuda_conv2d_direct_forward(out, inp, weight, bias, g, dt, ctx);
}

extern "C" int cuda_conv2d_backward_data(void *dinp, const void *dout, const void *weight, const void *bias,
                                         const conv_geom *g, gm_dtype dt, const cuda_conv_algo *algo, void *ws,
                                         size_t ws_nbytes, gm_cuda_ctx *ctx) {
    (void)ws, (void)ws_nbytes;
    if (!algo) return GM_ERR_ARG;
    return cuda_conv2d_direct_backward_data(dinp, dout, weight, bias, g, dt, ctx);
}

extern "C" int cuda_conv2d_backward_weight(void *dweight, const void *dout, const void *inp, const conv_geom *g,
                                           gm_dtype dt, const cuda_conv_algo *algo, void *ws, size_t ws_nbytes,
                                           gm_cuda_ctx *ctx) {
    (void)ws, (void)ws_nbytes;
    if (!algo) return GM_ERR_ARG;
    return cuda_conv2d_direct_backward_weight(dweight, dout, inp, g, dt, ctx);
}
