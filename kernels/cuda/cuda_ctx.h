/* kernels/cuda/cuda_ctx.h — what every CUDA kernel entry point receives instead of the CPU kernels' `nthreads`:
 * the device, its one stream, the library handles bound to that stream, and a buffer for a failure message.
 * Plain C: csrc/ fills it (csrc/cuda.c: gm_cuda_ctx_for) and the .cu files of kernels/cuda/ read it.
 *
 * Conventions for every CUDA entry point (see kernels/cuda/README.md):
 *  - name = the CPU kernel's name with the prefix `cuda_` (elementwise_binary_forward -> cuda_elementwise_...),
 *    the same arguments (pointers are device pointers, shapes/strides arrays are host arrays) with the final
 *    `int nthreads` replaced by `gm_cuda_ctx *ctx`;
 *  - work is queued on ctx->stream and the call returns without waiting (the allocator is stream-ordered on
 *    the same stream, so freeing an input right after the call is safe);
 *  - status: GM_OK, GM_ERR_ARG / GM_ERR_UNSUPPORTED like the CPU kernel, or GM_ERR_BACKEND with ctx->err
 *    holding "call failed at file:line: reason". */
#ifndef GM_KERNELS_CUDA_CTX_H
#define GM_KERNELS_CUDA_CTX_H

#include <stddef.h>

typedef struct gm_cuda_ctx {
    int device;      /* the CUDA device index; it is current on the calling thread during the call */
    void *stream;    /* cudaStream_t: every kernel and library call of this device goes here */
    void *cublas;    /* cublasHandle_t bound to stream (NULL in the emulator) */
    void *cudnn;     /* cudnnHandle_t bound to stream (NULL in the emulator) */
    int sm_count;    /* multiprocessors: sizes grids of grid-stride loops */
    int allow_tf32;  /* gm.backends.cuda.matmul.allow_tf32: cuBLAS products */
    int cudnn_allow_tf32; /* gm.backends.cudnn.allow_tf32: cuDNN convolutions */
    char err[512];   /* failure text for GM_ERR_BACKEND */
} gm_cuda_ctx;

#endif
