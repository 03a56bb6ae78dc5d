/* kernels/cuda/matmul.h — batched matrix product on CUDA: out (batch..., M, N) = a (batch..., M, K) @
 * b (batch..., K, N), the twin of kernels/cpu/matmul.h (same matmul_geom, same workspace argument), with the CPU
 * kernel's `cpu_` prefix replaced by `cuda_` and `int nthreads` by the context.
 *
 * float32 / float64 / float16 / bfloat16 through cuBLAS with float32 accumulation (float64: float64), TF32 only
 * when ctx->allow_tf32 (gm.backends.cuda.matmul.allow_tf32); int64 by an exact wrapping kernel. float32/float64
 * operands must be in a BLAS layout (csrc copies the others, as for the CPU); 16-bit operands in any layout
 * (those that cuBLAS cannot read are packed into `workspace`, which csrc sizes with cpu_matmul_workspace_nbytes
 * for every device). In the emulator build kernels/cuda/emu/matmul_emu.cpp provides the same entry point with
 * plain loops. */
#ifndef GM_KERNELS_CUDA_MATMUL_H
#define GM_KERNELS_CUDA_MATMUL_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../matmul_geom.h"
#include "cuda_ctx.h"

int cuda_matmul_forward(void *out, const void *a, const void *b, gm_dtype dt, const matmul_geom *g,
                        void *workspace, size_t workspace_nbytes, gm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
