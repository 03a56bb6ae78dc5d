/* kernels/activation_ops.h — the op codes of the pointwise activations, shared by both backends
 * (kernels/README.md) and part of the _C interface (_C.activation(op, ...)). The kernels are declared in
 * kernels/cpu/activation.h and kernels/cuda/activation.h. */
#ifndef GM_KERNELS_ACTIVATION_OPS_H
#define GM_KERNELS_ACTIVATION_OPS_H

enum { ACT_RELU = 0, ACT_LEAKY_RELU = 1, ACT_SIGMOID = 2, ACT_TANH = 3, ACT_GELU = 4, ACT_GELU_TANH = 5, ACT_N };

#endif
