/* csrc/ops_conv_internal.h — private to the convolution family (ops_conv.c and the files it lists): the
 * argument checks and operand helpers its forward, backward, linear and workspace files share, how a
 * convolution pass is handed to conv_run_passes (ops_conv_workspace.c), and the entry points ops_conv.c's method
 * table registers. Nothing outside the family includes it. */
#ifndef GM_OPS_CONV_INTERNAL_H
#define GM_OPS_CONV_INTERNAL_H

#include "gm.h"
#include "ops_util.h"
#include "cpu/conv.h"

/* ---- arguments (the longer checks and the shape plans live in ops_conv_args.c) ------------------------------- */

static inline GMTensor *as_tensor(PyObject *o, const char *op, const char *name, int allow_none) {
    if (allow_none && o == Py_None) return NULL;
    if (!gm_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor%s, got %.100s", op, name, allow_none ? " or None" : "",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return (GMTensor *)o;
}

/* A shape either from the tensor or, when it was not saved for backward, from the tuple passed beside it. */
static inline int shape_of(GMTensor *t, PyObject *shape, const char *op, const char *name, int *nd, int64_t *out) {
    if (t) {
        *nd = t->ndim;
        memcpy(out, t->shape, sizeof(int64_t) * t->ndim);
        return 0;
    }
    if (!shape || shape == Py_None) {
        PyErr_Format(PyExc_ValueError, "%s: pass either %s or %s_shape", op, name, name);
        return -1;
    }
    return gm_parse_shape(shape, nd, out, name);
}


/* input, weight (tensors) and bias (a tensor or None) of a forward: 0, or -1 with a TypeError naming the first
 * that is not (*b is NULL for None). */
static inline int forward_operands(const char *op, PyObject *xo, PyObject *wo, PyObject *bo, GMTensor **x,
                                   GMTensor **w, GMTensor **b) {
    *x = as_tensor(xo, op, "input", 0);
    *w = *x ? as_tensor(wo, op, "weight", 0) : NULL;
    *b = *w ? as_tensor(bo, op, "bias", 1) : NULL;
    return !*w || (bo != Py_None && !*b) ? -1 : 0;
}

/* Every tensor argument: same dtype as the first, floating point, same device. NULL entries are skipped.
 * cpu_half: the CPU kernels read float16/bfloat16 themselves (depthwise too: kernels/cpu/conv_depthwise.c). */
int conv_check_operands(const char *op, GMTensor **ts, const char **names, int n, int cpu_half);

/* Whether conv2d's (or its backward's) bfloat16 input x with weight w and bias b (or NULL) of `groups` groups is
 * the mixed form the CPU passes read as it is: a float32 weight and bias, one group, on the CPU (or meta standing
 * for it), on a CPU whose bfloat16 passes widen the weight (conv_half_reads_f32_weight). Autocast passes its
 * parameters so, with no bfloat16 copy (python/gpumemnet/nn/_functional_conv.py); the geometry then carries wf32.
 * Any other mix of dtypes is refused by conv_check_operands. */
int conv_f32_weight(GMTensor *x, GMTensor *w, GMTensor *b, int64_t groups);

/* conv_check_operands of all n operands, or, when they are the mixed form above, of the first nact (the
 * bfloat16 activations) and of the rest (weight, bias: float32) apart, with the devices checked together. */
int conv_check_mixed(const char *op, GMTensor **ts, const char **names, int n, int nact, int mixed);

static inline int check_bias(const char *op, GMTensor *b, int64_t n, const char *what) {
    if (!b || (b->ndim == 1 && b->shape[0] == n)) return 0;
    char sb[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: bias must be 1-D with %s=%lld elements, got shape %s", op, what,
                 (long long)n, gm_shape_str(b->ndim, b->shape, sb));
    return -1;
}

static inline int check_4d(const char *op, const char *name, const char *layout, int nd, const int64_t *shape) {
    if (nd == 4) return 0;
    char s[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: expected a 4-D %s %s, got shape %s", op, name, layout,
                 gm_shape_str(nd, shape, s));
    return -1;
}

static inline int check_needed(const char *op, GMTensor *t, const char *name, const char *grad) {
    if (t) return 0;
    PyErr_Format(PyExc_ValueError, "%s: %s is needed to compute the %s gradient", op, name, grad);
    return -1;
}

static inline PyObject *grads_tuple(GMTensor *a, GMTensor *b, GMTensor *c) {
    PyObject *r = PyTuple_Pack(3, a ? (PyObject *)a : Py_None, b ? (PyObject *)b : Py_None,
                               c ? (PyObject *)c : Py_None);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    return r;
}

static inline int parse_mask(PyObject *o, int mask[3]) {
    if (PyTuple_Check(o) && PyArg_ParseTuple(o, "ppp", &mask[0], &mask[1], &mask[2])) return 0;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "output_mask must be a tuple of 3 bools (input, weight, bias), got %R", o);
    return -1;
}

/* grad_output (a tensor), input and weight (tensors or None) of a backward: 0, or -1 with a TypeError. */
static inline int backward_operands(const char *op, PyObject *goo, PyObject *xo, PyObject *wo, GMTensor **go,
                                    GMTensor **x, GMTensor **w) {
    if (!(*go = as_tensor(goo, op, "grad_output", 0))) return -1;
    *x = as_tensor(xo, op, "input", 1);
    if (xo != Py_None && !*x) return -1;
    *w = as_tensor(wo, op, "weight", 1);
    return wo != Py_None && !*w ? -1 : 0;
}

/* The input gradient (mask[0]) needs the weight, the weight gradient (mask[1]) the input: for conv2d, linear and
 * conv_transpose2d alike (the roles in the kernels differ). */
static inline int check_needed_operands(const char *op, const int mask[3], GMTensor *x, GMTensor *w) {
    if (mask[0] && check_needed(op, w, "weight", "input") < 0) return -1;
    if (mask[1] && check_needed(op, x, "input", "weight") < 0) return -1;
    return 0;
}

/* grad_output against the forward's output shape. */
static inline int check_grad_output(const char *op, GMTensor *go, int nd, const int64_t *oshape) {
    if (go->ndim == nd && !memcmp(go->shape, oshape, sizeof(int64_t) * nd)) return 0;
    char sg[GM_SHAPE_BUF], so[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: grad_output has shape %s, expected the output's shape %s", op,
                 gm_shape_str(go->ndim, go->shape, sg), gm_shape_str(nd, oshape, so));
    return -1;
}

/* conv2d: input (N, C, H, W), weight (K, C/G, R, S) -> geometry and output shape (N, K, P, Q). */
int plan_conv2d(const char *op, const int64_t *xs, const int64_t *ws, PyObject *stride_o, PyObject *pad_o,
                PyObject *dil_o, int64_t groups, conv_geom *g, int64_t out[4]);
/* conv_transpose2d: input (N, Cin, H, W), weight (Cin, Cout/G, R, S) -> output (N, Cout, Ho, Wo) and the
 * geometry of the conv2d whose input-gradient it is: that conv's input is (N, Cout, Ho, Wo), its output
 * (N, Cin, H, W). */
int plan_conv_transpose2d(const char *op, const int64_t *xs, const int64_t *ws, PyObject *stride_o, PyObject *pad_o,
                          PyObject *opad_o, int64_t groups, PyObject *dil_o, conv_geom *g, int64_t out[4]);

static inline void set_input_strides(conv_geom *g, GMTensor *t) {
    for (int i = 0; i < 4; i++) g->xs[i] = t ? t->strides[i] : 0;
}

/* ---- operands ---------------------------------------------------------------------------------------------- */

static inline size_t tensor_nbytes(GMTensor *t) { return t ? (size_t)gm_numel(t) * gm_dtype_size(t->dtype) : 0; }

/* A contiguous workspace copy of t, or a new reference to t when it already is contiguous (or NULL). On failure
 * *out is NULL (so that the caller's cleanup releases nothing it does not own). */
static inline int contiguous(GMTensor *t, GMTensor **out, size_t *used) {
    *out = NULL;
    if (!t || gm_is_contiguous(t)) {
        *out = (GMTensor *)Py_XNewRef(t);
        return 0;
    }
    GMTensor *c = gm_empty_workspace(t->ndim, t->shape, t->dtype, t->device);
    if (!c) return -1;
    if (t->device.type != GM_DEV_META && gm_copy_into(c, t) < 0) {
        Py_DECREF(c);
        return -1;
    }
    *out = c;
    *used += tensor_nbytes(c);
    return 0;
}

/* The end of a forward: its operand copies are released (xc, wc, bc: the order the allocator sees), then out too
 * when the forward failed (rc < 0: NULL is returned, the exception stands). */
static inline PyObject *forward_result(int rc, GMTensor *xc, GMTensor *wc, GMTensor *bc, GMTensor *out) {
    RELEASE(xc, wc, bc);
    if (rc < 0) Py_CLEAR(out);
    return (PyObject *)out;
}

/* ---- running the passes (ops_conv_workspace.c) ------------------------------------------------------------ */

/* One pass of a convolution: `out` from operands a and b (and bias, or NULL), in the roles of kernels/cpu/conv.h:
 *   CONV_FORWARD          out = conv2d(a = input, b = weight) + bias
 *   CONV_BACKWARD_DATA    out = the input-gradient of a = grad_output through b = weight, + bias per channel
 *   CONV_BACKWARD_WEIGHT  out = the weight-gradient of a = grad_output and b = input (no bias) */
typedef struct {
    conv_pass pass;
    GMTensor *out, *a, *b, *bias;
} conv_job;

/* Runs n passes of geometry g, one after another. On CUDA each picks its cuDNN algorithm and takes and frees its
 * own workspace (meta standing for CUDA device N: the same pick and workspace, and nothing runs; with no device
 * to ask, no workspace); on the CPU, and on meta planning it, one im2col
 * workspace serves them all, within what `used` bytes of operand copies left of the limit, and is freed before
 * this returns. 0, or -1 + exception. */
int conv_run_passes(const char *op, const conv_geom *g, gm_dtype dt, gm_device dev, const conv_job *jobs, int n,
                    size_t used);

/* ---- the entry points (registered in ops_conv.c) ------------------------------------------------------- */

/* ops_conv.c */
GM_PY_KW_DECL(conv2d);
GM_PY_KW_DECL(conv_transpose2d);
/* ops_conv_backward.c */
GM_PY_KW_DECL(conv2d_backward);
GM_PY_KW_DECL(conv_transpose2d_backward);
/* ops_linear.c */
GM_PY_KW_DECL(linear);
GM_PY_KW_DECL(linear_backward);
/* ops_conv_workspace.c */
PyObject *gm_py_set_conv_workspace_limit(PyObject *self, PyObject *arg);
PyObject *gm_py_get_conv_workspace_limit(PyObject *self, PyObject *unused);
PyObject *gm_py_conv_algo_fake(PyObject *self, PyObject *arg);
PyObject *gm_py_conv_algo_last(PyObject *self, PyObject *args);
PyObject *gm_py_conv_algo_cache_clear(PyObject *self, PyObject *args);
PyObject *gm_py_conv_workspace_uncounted(PyObject *self, PyObject *unused);

#endif
