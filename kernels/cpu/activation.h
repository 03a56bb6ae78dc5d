/* kernels/cpu/activation.h — pointwise activations and their gradients on the CPU: relu, leaky_relu, sigmoid,
 * tanh, gelu (exact erf form and tanh approximation), silu, hardswish, hardsigmoid, mish, hardtanh (relu6 is
 * hardtanh(0, 6)), elu, softplus. Contiguous arrays, any float dtype (float16/bfloat16 are computed in float
 * precision and rounded once); pure compute, nothing allocated.
 *
 * The two parameters: alpha is leaky_relu's negative slope, elu's alpha, hardtanh's min_val and softplus's
 * beta; beta is hardtanh's max_val and softplus's threshold. The other ops ignore them.
 *
 * What backward reads (the memory point of this family): relu, leaky_relu with a slope >= 0, sigmoid, tanh,
 * hardsigmoid, hardtanh and elu with alpha >= 0 need only their OUTPUT, which the next layer usually keeps
 * anyway, so saving it costs no extra bytes and makes the in-place forms possible; gelu, silu, hardswish, mish,
 * softplus, leaky_relu with a negative slope and elu with alpha < 0 need the input (their output does not
 * determine it). */
#ifndef GM_KERNELS_CPU_ACTIVATION_H
#define GM_KERNELS_CPU_ACTIVATION_H

#include "../activation_ops.h" /* op codes ACT_* */
#include "../common.h"

/* out (n) = act(inp (n)), dtype dt (float). out may be inp (in place). GM_ERR_ARG for an unknown op or a
 * non-float dtype. */
int activation_forward(void *out, const void *inp, int64_t n, gm_dtype dt, int op, double alpha, double beta,
                       int nthreads);

/* dinp (n) = dout (n) * act'(.), reading `saved` (n): the output or the input, as listed above (for
 * relu/leaky_relu the test is saved > 0, which is the same on the output and the input when alpha >= 0; elu
 * decides by the sign of alpha which one it was given). dinp may be dout. */
int activation_backward(void *dinp, const void *dout, const void *saved, int64_t n, gm_dtype dt, int op,
                        double alpha, double beta, int nthreads);

/* relu's compact saved form: mask (ceil(n / 8) bytes) gets bit i % 8 of byte i / 8 set where out[i] is not <= 0
 * (NaN included): exactly the test relu's backward makes on its saved output. Autograd keeps it in place of the
 * output when nothing else keeps the output (python/gpumemnet/nn/_functional_pool.py). */
int relu_mask_pack(uint8_t *mask, const void *out, int64_t n, gm_dtype dt, int nthreads);

/* dinp (n) = bit i of mask ? dout[i] : +0.0, the same values as activation_backward(ACT_RELU) from the output the
 * mask was packed from (dout's bits copied as they are). dinp may be dout. */
int relu_mask_backward(void *dinp, const void *dout, const uint8_t *mask, int64_t n, gm_dtype dt, int nthreads);

/* prelu over inp viewed as (outer, C, inner) (C: the channel dim, 1 for inputs of fewer than 2 dims): out =
 * inp > 0 ? inp : w[c] * inp, w of wn = C elements, or of one shared by every channel (wn = 1); w has dtype dt.
 * out may be inp. GM_ERR_ARG for another wn, a non-float dtype or a negative size. */
int prelu_forward(void *out, const void *inp, const void *w, int64_t outer, int64_t C, int64_t inner, int64_t wn,
                  gm_dtype dt, int nthreads);

/* The gradients of prelu from dout and its input: dinp (same layout; may be dout; NULL: not wanted) and dw (wn
 * elements, sum of inp * dout where inp <= 0, in double; NULL: not wanted). partial: scratch of
 * prelu_outer_chunks(outer, C) * C doubles (activation_ops.h), needed with dw. The sums' order depends on the
 * shape only: the same result for any thread count. */
int prelu_backward(void *dinp, void *dw, double *partial, const void *dout, const void *inp, const void *w,
                   int64_t outer, int64_t C, int64_t inner, int64_t wn, gm_dtype dt, int nthreads);

#endif
