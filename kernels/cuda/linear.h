/* kernels/cuda/linear.h — the linear layer on CUDA: the CPU's linear_forward / linear_backward with the prefix
 * cuda_ and the device context in place of `nthreads`. Same operands (conv_mat, kernels/conv_geom.h: pointer,
 * transpose flag, leading dimension, as BLAS reads a row-major matrix), contiguous outputs, device pointers.
 *
 * linear.cu runs the products on cuBLAS (cublasGemmEx: float32 accumulation for every float dtype, double for
 * float64; TF32 only with ctx->allow_tf32); the bias is written into the output first and the product added
 * onto it (beta = 1), as on the CPU; the bias gradient is a deterministic column sum (conv_direct.cu).
 * emu/linear_emu.cpp stands in for it in the emulator build (plain loops). */
#ifndef GM_KERNELS_CUDA_LINEAR_H
#define GM_KERNELS_CUDA_LINEAR_H

#include "../conv_geom.h" /* conv_mat */
#include "cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_linear_forward(void *out, conv_mat x, conv_mat w, const void *bias, int64_t M, int64_t Fi, int64_t Fo,
                        gm_dtype dt, gm_cuda_ctx *ctx);
int cuda_linear_backward(void *dx, void *dw, void *db, conv_mat g, conv_mat x, conv_mat w, int64_t M, int64_t Fi,
                         int64_t Fo, gm_dtype dt, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
