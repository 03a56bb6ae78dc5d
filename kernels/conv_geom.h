/* kernels/conv_geom.h — the geometry of a 2-D convolution and the operands of the linear layer, shared by both
 * backends (kernels/README.md: neither kernels/cpu/ nor kernels/cuda/ owns what both read). The kernels that take
 * them are declared in kernels/cpu/conv.h and kernels/cuda/conv.h, linear.h.
 *
 * One geometry describes a convolution and both of its gradients; conv_transpose2d is the input-gradient of the
 * convolution whose input is its output (csrc maps it onto the same passes on every device). */
#ifndef GM_KERNELS_CONV_GEOM_H
#define GM_KERNELS_CONV_GEOM_H

#include "common.h"

typedef struct {
    int64_t N, C, H, W;   /* input */
    int64_t K, R, S;      /* weight (K, C/G, R, S) */
    int64_t P, Q;         /* output */
    int64_t sh, sw;       /* stride */
    int64_t ph, pw;       /* padding before (top, left); the padding after is whatever P and Q imply */
    int64_t dh, dw;       /* dilation */
    int64_t G;            /* groups */
    int64_t xs[4];        /* element strides of inp (N, C, H, W) */
    int64_t wf32;         /* CPU bfloat16 passes only: weight and bias stored as float32, rounded to bfloat16 as
                           * they are widened (autocast's parameters, read with no bfloat16 copy); else 0 */
} conv_geom;

/* float32 sums of a convolution or linear layer run in chunks of this many terms, each chunk's total added onto
 * the output (CPU: conv_gemm_f32 in kernels/cpu/conv_internal.h; CUDA: the direct kernels of conv_direct.cu):
 * one running float32 total over a long K (C*R*S, or C) rounds at every term and lands 1.4-3x further from
 * float64 (tests/test_conv_accuracy.py). */
#define CONV_KCHUNK 128

/* The CPU's algorithms (kernels/cpu/conv.h says when each runs); the CUDA backend has its own candidates. */
typedef enum { CONV_ALGO_IM2COL = 0, CONV_ALGO_POINTWISE = 1, CONV_ALGO_DEPTHWISE = 2 } conv_algo;
typedef enum { CONV_FORWARD = 0, CONV_BACKWARD_DATA = 1, CONV_BACKWARD_WEIGHT = 2 } conv_pass;

/* A matrix operand of the linear layer, out (M, Fo) = x (M, Fi) @ w (Fo, Fi)^T + bias: a pointer, a transpose
 * flag and a leading dimension, as BLAS reads it: trans 0 means row-major with rows ld elements apart, trans 1
 * means column-major (the transpose of a row-major matrix). */
typedef struct {
    const void *p;
    int trans;
    int64_t ld;
} conv_mat;

#endif
