/* kernels/cpu/gemm_bf16.h — a bfloat16 matrix product with float32 sums, for the bfloat16 passes of conv2d,
 * linear and matmul. Neither OpenBLAS build we can depend on exports sbgemm (the scipy-openblas32 wheel and
 * Debian's libopenblas 0.3.21 are built without BUILD_BFLOAT16; oneDNN has a bf16 gemm only as an internal C++
 * symbol), so the product is ours: AMX tiles (tdpbf16ps) where the CPU has them, else an AVX512-BF16
 * micro-kernel (vdpbf16ps), otherwise the blocks are widened to float32 and multiplied by OpenBLAS's sgemm
 * (GPUMEMNET_GEMM_BF16=avx512 or portable forces the latter two). Operands are read at any element strides
 * (transposes cost nothing); packing buffers are fixed-size and thread-local, as OpenBLAS's own are, so the
 * caller's workspace and the allocator's count (meta == CPU) do not change. Nothing is allocated here. */
#ifndef GM_KERNELS_CPU_GEMM_BF16_H
#define GM_KERNELS_CPU_GEMM_BF16_H

#include "../common.h"

/* A bfloat16 matrix: element (i, j) at p[i * rs + j * cs]. */
typedef struct {
    const uint16_t *p;
    int64_t rs, cs;
} gm_bmat;

/* C (M, N) = A (M, K) @ B (K, N), plus C itself when beta is 1 (beta 0: C is only written). Products are summed
 * in float32. C is float32 (c_bf16 0) or bfloat16 (c_bf16 1: each element rounded once, to nearest even), rows
 * ldc elements apart. nthreads > 1 shares the blocks of C among OpenMP threads. K == 0 gives C = beta C.
 * Returns GM_ERR_ARG for negative sizes or missing pointers. */
int gemm_bf16(int64_t M, int64_t N, int64_t K, gm_bmat a, gm_bmat b, int beta, void *c, int64_t ldc, int c_bf16,
              int nthreads);

/* 1 when gemm_bf16 runs a bfloat16 kernel, AMX or AVX512-BF16 (the CPU has AVX512-BF16 and GPUMEMNET_GEMM_BF16 is
 * not "portable"). */
int gemm_bf16_native(void);

/* 1 when gemm_bf16 runs on AMX tiles (the CPU and Linux allow them, GPUMEMNET_GEMM_BF16 is neither "avx512" nor
 * "portable"). A rule measured on AMX should ask this, not gemm_bf16_native: without AMX the AVX512-BF16 kernel
 * multiplies at half the rate of float32 FMAs on Intel's cores (vdpbf16ps one every 2 cycles, 2 FMAs a cycle:
 * 1024^3 at ~100 GF/s against sgemm's ~200 on one Sapphire Rapids core). */
int gemm_bf16_amx(void);

#endif
