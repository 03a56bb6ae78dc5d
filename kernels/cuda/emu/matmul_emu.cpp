/* kernels/cuda/emu/matmul_emu.cpp — the emulator build's stand-in for kernels/cuda/matmul.cu, which calls cuBLAS
 * (not available to the emulator): the same entry point, computed with plain loops on the emulator's "device"
 * memory (host memory). Same numbers as the real file up to summation order: float types accumulate in float32
 * (float64 in float64) and round once to the output dtype; int64 is exact and wraps. It reads any strides, so it
 * also covers matmul.cu's packing of 16-bit operands that cuBLAS cannot read (the workspace goes unused).
 * Emulated kernels run to completion when launched, so every input is ready when this is called. */
#include <string.h>

#include "../matmul.h"

namespace {

template <typename Acc> Acc load(const char *p, gm_dtype dt) {
    switch (dt) {
    case GM_F32: { float v; memcpy(&v, p, 4); return (Acc)v; }
    case GM_F64: { double v; memcpy(&v, p, 8); return (Acc)v; }
    case GM_F16: { uint16_t v; memcpy(&v, p, 2); return (Acc)gm_half_to_float(v); }
    default: { uint16_t v; memcpy(&v, p, 2); return (Acc)gm_bf16_to_float(v); }
    }
}

void store(char *p, gm_dtype dt, double v) {
    switch (dt) {
    case GM_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case GM_F64: memcpy(p, &v, 8); break;
    case GM_F16: { uint16_t h = gm_float_to_half((float)v); memcpy(p, &h, 2); break; }
    default: { uint16_t h = gm_float_to_bf16((float)v); memcpy(p, &h, 2); break; }
    }
}

/* One (M, K) @ (K, N) product at a, b into the contiguous out. */
template <typename Acc>
void product(char *out, const char *a, const char *b, gm_dtype dt, const matmul_geom *g, int64_t es) {
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) {
            Acc acc = 0;
            for (int64_t k = 0; k < g->K; k++)
                acc += load<Acc>(a + i * g->a_rs + k * g->a_cs, dt) * load<Acc>(b + k * g->b_rs + j * g->b_cs, dt);
            store(out + (i * g->N + j) * es, dt, (double)acc);
        }
}

void product_i64(char *out, const char *a, const char *b, const matmul_geom *g) {
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) {
            uint64_t acc = 0;
            for (int64_t k = 0; k < g->K; k++) {
                uint64_t x, y;
                memcpy(&x, a + i * g->a_rs + k * g->a_cs, 8);
                memcpy(&y, b + k * g->b_rs + j * g->b_cs, 8);
                acc += x * y;
            }
            memcpy(out + (i * g->N + j) * 8, &acc, 8);
        }
}

} // namespace

extern "C" int cuda_matmul_forward(void *out, const void *a, const void *b, gm_dtype dt, const matmul_geom *g,
                                   void *workspace, size_t workspace_nbytes, gm_cuda_ctx *ctx) {
    (void)workspace;
    (void)workspace_nbytes;
    (void)ctx;
    if (!g || g->nbatch < 0 || g->nbatch > GM_MAX_DIMS || g->M < 0 || g->N < 0 || g->K < 0) return GM_ERR_ARG;
    if (dt == GM_BOOL || (int)dt < 0 || dt >= GM_NDTYPES) return GM_ERR_UNSUPPORTED;
    int64_t nb = 1;
    for (int d = 0; d < g->nbatch; d++) {
        if (g->batch_shape[d] < 0) return GM_ERR_ARG;
        nb *= g->batch_shape[d];
    }
    const int64_t es = (int64_t)gm_dtype_size(dt);
    if (nb == 0 || g->M == 0 || g->N == 0) return GM_OK;
    if (!out || (g->K > 0 && (!a || !b))) return GM_ERR_ARG;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t oa = 0, ob = 0, r = bi;
        for (int d = g->nbatch - 1; d >= 0; d--) {
            int64_t k = r % g->batch_shape[d];
            r /= g->batch_shape[d];
            oa += k * g->a_bstrides[d];
            ob += k * g->b_bstrides[d];
        }
        const char *pa = (const char *)a + oa, *pb = (const char *)b + ob;
        char *po = (char *)out + bi * g->M * g->N * es;
        if (dt == GM_I64) product_i64(po, pa, pb, g);
        else if (dt == GM_F64) product<double>(po, pa, pb, dt, g, es);
        else product<float>(po, pa, pb, dt, g, es);
    }
    return GM_OK;
}
