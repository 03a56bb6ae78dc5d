/* kernels/cuda/cublas_common.cuh — what the files that call cuBLAS (linear.cu, matmul.cu) share: the check macro
 * and the cuBLAS types of a dtype. Include it after <cublas_v2.h>, which such a .cu names itself: that include is
 * how setup.py and the emulator tests know to leave the file out of the emulator build (emu/ stands in). */
#ifndef GM_KERNELS_CUDA_CUBLAS_COMMON_CUH
#define GM_KERNELS_CUDA_CUBLAS_COMMON_CUH

#include <cublas_v2.h>

#include "cuda_common.cuh"

/* GM_CU_CHECK for a cuBLAS call: "call failed at file:line: status (reason)" in ctx->err, GM_ERR_BACKEND. */
#define GM_CUBLAS_CHECK(ctx, call)                                                                           \
    do {                                                                                                     \
        cublasStatus_t gm_s_ = (call);                                                                       \
        if (gm_s_ != CUBLAS_STATUS_SUCCESS) {                                                                \
            snprintf((ctx)->err, sizeof (ctx)->err, "%s failed at %s:%d: %s (%s)", #call, __FILE__, __LINE__, \
                     cublasGetStatusName(gm_s_), cublasGetStatusString(gm_s_));                              \
            return GM_ERR_BACKEND;                                                                           \
        }                                                                                                    \
    } while (0)

/* The data type of a float dtype and the compute type of its products: float32 accumulation for float32, float16
 * and bfloat16 (TF32 tensor cores for float32 only when ctx->allow_tf32), float64 for float64. 0 for another
 * dtype. */
static inline int gm_cublas_types(gm_dtype dt, const gm_cuda_ctx *ctx, cudaDataType_t *type,
                                  cublasComputeType_t *compute) {
    switch (dt) {
    case GM_F32:
        *type = CUDA_R_32F;
        *compute = ctx->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        return 1;
    case GM_F64: *type = CUDA_R_64F, *compute = CUBLAS_COMPUTE_64F; return 1;
    case GM_F16: *type = CUDA_R_16F, *compute = CUBLAS_COMPUTE_32F; return 1;
    case GM_BF16: *type = CUDA_R_16BF, *compute = CUBLAS_COMPUTE_32F; return 1;
    default: return 0;
    }
}

#endif
