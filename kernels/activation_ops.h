/* kernels/activation_ops.h — the op codes of the pointwise activations, shared by both backends
 * (kernels/README.md) and part of the _C interface (_C.activation(op, ...)). The kernels are declared in
 * kernels/cpu/activation.h and kernels/cuda/activation.h; what each op's two parameters (alpha, beta) mean and
 * which tensor its backward reads are documented there. */
#ifndef GM_KERNELS_ACTIVATION_OPS_H
#define GM_KERNELS_ACTIVATION_OPS_H

enum {
    ACT_RELU = 0, ACT_LEAKY_RELU = 1, ACT_SIGMOID = 2, ACT_TANH = 3, ACT_GELU = 4, ACT_GELU_TANH = 5,
    ACT_SILU = 6, ACT_HARDSWISH = 7, ACT_HARDSIGMOID = 8, ACT_MISH = 9, ACT_HARDTANH = 10, ACT_ELU = 11,
    ACT_SOFTPLUS = 12, ACT_N
};

/* hardsigmoid's slope, PyTorch's constant for every dtype: float's 1/6 (0.1666666716...), also in float64 */
#define ACT_ONE_SIXTH ((double)(1.0f / 6.0f))

/* prelu's weight gradient is summed in two deterministic steps on both backends: first one partial sum per
 * segment, a (chunk of the outer dim, channel) pair, then each weight's partials in segment order. The number of
 * outer chunks depends on the shape only, so the scratch (segments float64s, csrc allocates it on every device)
 * is the same on the CPU, CUDA and meta: about PRELU_SEGMENTS segments, at least one chunk per channel. */
#define PRELU_SEGMENTS 1024
static inline long long prelu_outer_chunks(long long outer, long long C) {
    long long want = C > 0 ? PRELU_SEGMENTS / C : 1;
    if (want < 1) want = 1;
    return outer < want ? outer : want;
}

#endif
