/* csrc/ops_conv.c — the convolution family: conv2d, conv_transpose2d and linear, forward and backward, and the
 * bound on the convolution workspace. This file holds the forwards of conv2d and conv_transpose2d and the
 * family's method table; the rest lives in
 *   ops_conv_args.c       argument parsing and shape planning (conv_geom, output shapes)
 *   ops_conv_backward.c   conv2d_backward, conv_transpose2d_backward
 *   ops_conv_workspace.c  the im2col workspace bound, cuDNN's algorithm choice, running the passes
 *   ops_linear.c          linear and its backward
 * over the helpers of ops_conv_internal.h.
 *
 * Each op validates its arguments and infers shapes once for every device, allocates its outputs (current
 * category) and its scratch (category workspace, freed before it returns), and runs the CPU kernel
 * (kernels/cpu/conv.c) — on meta everything but the kernel, so the estimate sees every byte.
 *
 * conv_transpose2d has no kernel of its own: its forward is conv2d's input-gradient, its input-gradient is
 * conv2d's forward, its weight-gradient is conv2d's weight-gradient with the roles of the two activations
 * swapped. One conv_geom (the geometry of the underlying conv2d) drives all of them.
 *
 * Operands are copied only where a kernel needs them contiguous (weights, bias, gradients fed to gemm, the
 * transposed conv's input); the conv2d input is read through its strides. Such copies are workspace and
 * count against the limit, so the im2col columns get what is left of it.
 *
 * On CUDA the same validation, outputs and contiguous copies, then cuDNN (kernels/cuda/conv.h) with its own
 * workspace in place of the im2col columns: the algorithm is chosen among cuDNN's candidates by what the
 * allocator can give (cuda_conv_pick in ops_conv_workspace.c), so only the workspace differs from the CPU's
 * allocations. The linear layer runs on cuBLAS (kernels/cuda/linear.h) with exactly the CPU's allocations.
 *
 * On meta the allocations are the CPU's (im2col columns), or, when meta stands for CUDA (csrc/meta_target.h),
 * CUDA's: with a CUDA device in this process (target "cuda:N"), meta asks its cuDNN and picks the workspace
 * exactly as the device would (cuda_conv_pick, on meta's allocator), so an estimate for CUDA is byte-exact;
 * with none to ask (target "cuda"), convolutions take no workspace and the estimate says it was not counted. */
#include "ops_conv_internal.h"

/* ---- the forwards --------------------------------------------------------------------------------------------- */

/* A forward's one pass: conv2d's forward (CONV_FORWARD), or conv_transpose2d's, which is the input-gradient pass
 * (CONV_BACKWARD_DATA) of the conv whose input is its output. The weight and bias, and for conv_transpose2d the
 * input (its pass hands it to gemm), are copied where they are not contiguous; conv2d's input is read through
 * its strides. Then the output, then the pass. */
static PyObject *run_forward(const char *op, conv_pass pass, const conv_geom *g, const int64_t oshape[4], GMTensor *x,
                             GMTensor *w, GMTensor *b) {
    const int copy_x = pass == CONV_BACKWARD_DATA;
    GMTensor *xc = NULL, *wc = NULL, *bc = NULL, *out = NULL;
    size_t used = 0;
    int rc = -1;
    if ((!copy_x || contiguous(x, &xc, &used) == 0) && contiguous(w, &wc, &used) == 0 &&
        contiguous(b, &bc, &used) == 0 && (out = gm_empty(4, oshape, x->dtype, x->device))) {
        const conv_job job = {pass, out, copy_x ? xc : x, wc, bc};
        rc = conv_run_passes(op, g, x->dtype, x->device, &job, 1, used);
    }
    return forward_result(rc, xc, wc, bc, out);
}

/* input (N, C, H, W), weight (4-D, wlayout) and bias (or None) of a forward: tensors of one floating dtype on one
 * device, or, where *mixed is 1 on entry (conv2d) and they are conv_f32_weight's mixed form, a bfloat16 input
 * with a float32 weight and bias (*mixed stays 1; else it is set to 0). 0, or -1 + exception. */
static int conv_operands(const char *op, PyObject *xo, PyObject *wo, PyObject *bo, const char *wlayout, GMTensor **x,
                         GMTensor **w, GMTensor **b, int *mixed, int64_t groups) {
    if (forward_operands(op, xo, wo, bo, x, w, b) < 0) return -1;
    *mixed = *mixed && conv_f32_weight(*x, *w, *b, groups);
    GMTensor *ops[] = {*x, *w, *b};
    const char *names[] = {"input", "weight", "bias"};
    if (check_4d(op, "input", "(N, C, H, W)", (*x)->ndim, (*x)->shape) < 0 ||
        check_4d(op, "weight", wlayout, (*w)->ndim, (*w)->shape) < 0)
        return -1;
    return conv_check_mixed(op, ops, names, 3, 1, *mixed);
}

PyObject *gm_py_conv2d(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "weight", "bias", "stride", "padding", "dilation", "groups", NULL};
    const char *op = "conv2d";
    PyObject *xo, *wo, *bo = Py_None, *stride = NULL, *padding = NULL, *dilation = NULL;
    long long groups = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOOL:conv2d", kwlist, &xo, &wo, &bo, &stride, &padding,
                                     &dilation, &groups))
        return NULL;
    GMTensor *x, *w, *b;
    conv_geom g;
    int64_t oshape[4];
    int mixed = 1;
    if (conv_operands(op, xo, wo, bo, "(out_channels, in_channels/groups, kH, kW)", &x, &w, &b, &mixed, groups) < 0 ||
        plan_conv2d(op, x->shape, w->shape, stride, padding, dilation, groups, &g, oshape) < 0 ||
        check_bias(op, b, w->shape[0], "out_channels") < 0)
        return NULL;
    set_input_strides(&g, x);
    g.wf32 = mixed;
    return run_forward(op, CONV_FORWARD, &g, oshape, x, w, b);
}

PyObject *gm_py_conv_transpose2d(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "weight", "bias", "stride", "padding", "output_padding", "groups",
                             "dilation", NULL};
    const char *op = "conv_transpose2d";
    PyObject *xo, *wo, *bo = Py_None, *stride = NULL, *dilation = NULL, *padding = NULL, *opad = NULL;
    long long groups = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOOLO:conv_transpose2d", kwlist, &xo, &wo, &bo, &stride,
                                     &padding, &opad, &groups, &dilation))
        return NULL;
    GMTensor *x, *w, *b;
    conv_geom g;
    int64_t oshape[4];
    int mixed = 0; /* conv_transpose2d keeps one dtype (autocast casts its parameters) */
    if (conv_operands(op, xo, wo, bo, "(in_channels, out_channels/groups, kH, kW)", &x, &w, &b, &mixed, groups) < 0 ||
        plan_conv_transpose2d(op, x->shape, w->shape, stride, padding, opad, groups, dilation, &g, oshape) < 0 ||
        check_bias(op, b, oshape[1], "out_channels") < 0)
        return NULL;
    set_input_strides(&g, NULL); /* the underlying conv's input is our output: contiguous, never read */
    return run_forward(op, CONV_BACKWARD_DATA, &g, oshape, x, w, b);
}

static PyObject *gm_py_conv_reads_f32_weight(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(conv_half_reads_f32_weight());
}

/* ---- method table ----------------------------------------------------------------------------------------- */
#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
PyMethodDef gm_conv_methods[] = {
    {"conv2d", KW(gm_py_conv2d),
     "conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): NCHW; padding an int, a "
     "pair, 'same' or 'valid'."},
    {"conv2d_backward", KW(gm_py_conv2d_backward),
     "conv2d_backward(grad_output, input, weight, stride, padding, dilation, groups, output_mask, input_shape=None,"
     " weight_shape=None) -> (grad_input, grad_weight, grad_bias), None where output_mask is False. input may be "
     "None unless grad_weight is wanted, weight None unless grad_input is (then pass their shapes)."},
    {"conv_transpose2d", KW(gm_py_conv_transpose2d),
     "conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)."},
    {"conv_transpose2d_backward", KW(gm_py_conv_transpose2d_backward),
     "conv_transpose2d_backward(grad_output, input, weight, stride, padding, output_padding, groups, dilation, "
     "output_mask, input_shape=None, weight_shape=None) -> (grad_input, grad_weight, grad_bias)."},
    {"linear", KW(gm_py_linear), "linear(input, weight, bias=None): input (..., in) @ weight (out, in)^T + bias."},
    {"linear_backward", KW(gm_py_linear_backward),
     "linear_backward(grad_output, input, weight, output_mask, input_shape=None, weight_shape=None) -> "
     "(grad_input, grad_weight, grad_bias)."},
    {"_conv_reads_f32_weight", gm_py_conv_reads_f32_weight, METH_NOARGS,
     "_conv_reads_f32_weight() -> whether conv2d (one group) on the CPU takes a bfloat16 input with a float32 weight "
     "and bias as they are (this CPU's bfloat16 passes widen the weight; GPUMEMNET_BF16_CONV=gemm says no)."},
    {"set_conv_workspace_limit", gm_py_set_conv_workspace_limit, METH_O,
     "set_conv_workspace_limit(nbytes): the most scratch one convolution may hold (default 64 MiB)."},
    {"get_conv_workspace_limit", gm_py_get_conv_workspace_limit, METH_NOARGS,
     "get_conv_workspace_limit() -> bytes."},
    {"_conv_algo_fake", gm_py_conv_algo_fake, METH_O,
     "_conv_algo_fake(sizes or None): for tests, CUDA convolutions (and meta standing for a CUDA device) choose "
     "among candidates with these workspace sizes (best first; they run the direct kernels); None restores cuDNN's."
     " Clears both algorithm tables."},
    {"_conv_algo_last", gm_py_conv_algo_last, METH_VARARGS,
     "_conv_algo_last(which='cuda') -> dict(pass, index, cached, algo, math, workspace) of the last CUDA algorithm "
     "pick, or None; which='meta': the last pick of meta standing for a CUDA device."},
    {"_conv_algo_cache_clear", gm_py_conv_algo_cache_clear, METH_VARARGS,
     "_conv_algo_cache_clear(which='cuda'): forget the cached CUDA convolution algorithm choices ('meta': those of "
     "meta standing for a CUDA device, as estimate() does before each run)."},
    {"_conv_workspace_uncounted", gm_py_conv_workspace_uncounted, METH_NOARGS,
     "_conv_workspace_uncounted() -> how many convolution passes ran on meta standing for CUDA with no cuDNN to "
     "ask (their workspace not counted), on this thread so far."},
    {NULL, NULL, 0, NULL},
};
