/* kernels/cuda/emu/matmul_emu.cpp — the emulator build's stand-in for kernels/cuda/matmul.cu, which calls cuBLAS
 * (not available to the emulator): the same entry point, computed with plain loops on the emulator's "device"
 * memory (host memory). Same numbers as the real file up to summation order: float types accumulate in float32
 * (float64 in float64) and round once to the output dtype; int64 is exact and wraps. It reads any strides, so it
 * also covers matmul.cu's packing of 16-bit operands that cuBLAS cannot read (the workspace goes unused).
 * Emulated kernels run to completion when launched, so every input is ready when this is called. */
#include <string.h>

#include "../matmul.h"
#include "blas_emu.h"

namespace {

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
    const int64_t nb = matmul_batch_count(g);
    if (nb < 0) return GM_ERR_ARG;
    const int64_t es = (int64_t)gm_dtype_size(dt);
    if (nb == 0 || g->M == 0 || g->N == 0) return GM_OK;
    if (!out || (g->K > 0 && (!a || !b))) return GM_ERR_ARG;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t oa, ob;
        matmul_batch_offsets(g, bi, &oa, &ob);
        const char *pa = (const char *)a + oa, *pb = (const char *)b + ob;
        char *po = (char *)out + bi * g->M * g->N * es;
        if (dt == GM_I64) product_i64(po, pa, pb, g);
        else blas_emu::gemm(dt, g->M, g->N, g->K, pa, g->a_rs, g->a_cs, pb, g->b_rs, g->b_cs, 0, po, g->N * es);
    }
    return GM_OK;
}
