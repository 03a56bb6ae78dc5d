/* kernels/cpu/activation.h — pointwise activations and their gradients on the CPU: relu, leaky_relu, sigmoid,
 * tanh, gelu (exact erf form and tanh approximation). Contiguous arrays, any float dtype (float16/bfloat16 are
 * computed in float precision and rounded once); pure compute, nothing allocated.
 *
 * What backward reads (the memory point of this family): relu, leaky_relu with a slope >= 0, sigmoid and tanh
 * need only their OUTPUT, which the next layer usually keeps anyway, so saving it costs no extra bytes and
 * makes the in-place forms possible; gelu and leaky_relu with a negative slope need the input. */
#ifndef GM_KERNELS_CPU_ACTIVATION_H
#define GM_KERNELS_CPU_ACTIVATION_H

#include "../activation_ops.h" /* op codes ACT_* */
#include "../common.h"

/* out (n) = act(inp (n)), dtype dt (float). out may be inp (in place). alpha: leaky_relu's negative slope.
 * GM_ERR_ARG for an unknown op or a non-float dtype. */
int activation_forward(void *out, const void *inp, int64_t n, gm_dtype dt, int op, double alpha, int nthreads);

/* dinp (n) = dout (n) * act'(.), reading `saved` (n): the output for relu, sigmoid, tanh and leaky_relu with
 * alpha >= 0, the input for gelu and leaky_relu with alpha < 0 (for relu/leaky_relu the test is saved > 0,
 * which is the same on the output and the input when alpha >= 0). dinp may be dout. */
int activation_backward(void *dinp, const void *dout, const void *saved, int64_t n, gm_dtype dt, int op,
                        double alpha, int nthreads);

#endif
