/* csrc/ops_activation.c — the element-wise activations (relu, leaky_relu, sigmoid, tanh, gelu, silu, hardswish,
 * hardsigmoid, mish, hardtanh, elu, softplus; in-place forms), prelu (with its weight's gradient) and softmax /
 * log_softmax, forward and backward: validation, outputs, and the kernels of
 * kernels/cpu/{activation,softmax}.c and kernels/cuda/{activation,softmax}.cu. Part of the nn op family
 * (ops_nnops.c has its interface and method table; ops_nn_internal.h the helpers it shares). */
#include "ops_nn_internal.h"

#include "cpu/activation.h"
#include "cpu/softmax.h"

#ifdef GM_WITH_CUDA
#include "../kernels/cuda/activation.h"
#include "../kernels/cuda/softmax.h"
#endif

/* ---- activations -------------------------------------------------------------------------------------------- */

static const char *const act_names[ACT_N] = {"relu", "leaky_relu", "sigmoid", "tanh", "gelu", "gelu", "silu",
                                             "hardswish", "hardsigmoid", "mish", "hardtanh", "elu", "softplus"};

static int act_op_arg(int op) {
    if (op >= 0 && op < ACT_N) return 0;
    PyErr_Format(PyExc_ValueError, "activation: unknown op %d; expected RELU=0 LEAKY_RELU=1 SIGMOID=2 TANH=3 "
                 "GELU=4 GELU_TANH=5 SILU=6 HARDSWISH=7 HARDSIGMOID=8 MISH=9 HARDTANH=10 ELU=11 SOFTPLUS=12", op);
    return -1;
}

PyObject *gm_py_activation(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "x", "alpha", "out", "beta", NULL};
    int op;
    double alpha = 0.0, beta = 0.0;
    PyObject *xo, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO|dOd:activation", kwlist, &op, &xo, &alpha, &outo, &beta))
        return NULL;
    if (act_op_arg(op) < 0) return NULL;
    const char *name = act_names[op];
    GMTensor *x = gm_tensor_arg(xo, name, "input");
    if (!x || check_float(name, "input", x) < 0 || check_devices(name, x, NULL, 0) < 0) return NULL;
    const int inplace = outo != Py_None;
    if (inplace && outo != xo) {
        PyErr_Format(PyExc_ValueError, "%s: out must be the input itself (the in-place form) or None", name);
        return NULL;
    }
    GMTensor *xc = contig(x), *out = NULL;
    if (!xc) return NULL;
    /* in place: the kernel runs on x's data when x is contiguous, else on the copy, which goes back into x */
    out = inplace ? (GMTensor *)Py_NewRef(xc) : gm_empty(x->ndim, x->shape, x->dtype, x->device);
    if (!out) goto fail;
    if (GM_KERNEL(name, x->device,
                  activation_forward(data(out), data(xc), gm_numel(x), x->dtype, op, alpha, beta, gm_num_threads),
                  cuda_activation_forward(data(out), data(xc), gm_numel(x), x->dtype, op, alpha, beta, ctx)) < 0 ||
        (inplace && inplace_writeback(x, xc) < 0))
        goto fail;
    Py_DECREF(xc);
    if (inplace) {
        Py_DECREF(out);
        return Py_NewRef(xo);
    }
    return (PyObject *)out;
fail:
    Py_XDECREF(out);
    Py_DECREF(xc);
    return NULL;
}

PyObject *gm_py_activation_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "grad", "saved", "alpha", "into_grad", "beta", NULL};
    int op, into_grad = 0;
    double alpha = 0.0, beta = 0.0;
    PyObject *go, *so;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOO|dpd:activation_backward", kwlist, &op, &go, &so, &alpha,
                                     &into_grad, &beta))
        return NULL;
    if (act_op_arg(op) < 0) return NULL;
    const char *name = act_names[op];
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *s = g ? gm_tensor_arg(so, name, "saved") : NULL;
    if (!s || check_float(name, "grad", g) < 0 || check_devices(name, g, &s, 1) < 0 ||
        same_shape(name, "grad", g, "saved tensor", s) < 0 || same_dtype(name, "grad", g, "saved tensor", s) < 0)
        return NULL;
    GMTensor *gc = contig(g), *sc = contig(s), *dx = NULL;
    if (!gc || !sc) goto done;
    dx = grad_result(g, into_grad);
    if (dx && GM_KERNEL(name, g->device,
                        activation_backward(data(dx), data(gc), data(sc), gm_numel(g), g->dtype, op, alpha, beta,
                                            gm_num_threads),
                        cuda_activation_backward(data(dx), data(gc), data(sc), gm_numel(g), g->dtype, op, alpha,
                                                 beta, ctx)) < 0)
        Py_CLEAR(dx);
done:
    Py_XDECREF(gc);
    Py_XDECREF(sc);
    return (PyObject *)dx;
}
/* ---- relu's bit mask: what autograd keeps of a relu's output that nothing else keeps ------------------------ */

/* relu_mask(out) -> uint8 (ceil(numel / 8),), bit i set where out[i] is not <= 0 (kernels/cpu/activation.h). */
PyObject *gm_py_relu_mask(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"out", NULL};
    PyObject *yo;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:relu_mask", kwlist, &yo)) return NULL;
    GMTensor *y = gm_tensor_arg(yo, "relu_mask", "out");
    if (!y || check_float("relu_mask", "out", y) < 0) return NULL;
    GMTensor *yc = contig(y), *m = NULL;
    if (!yc) return NULL;
    const int64_t n = gm_numel(y), nbytes = (n + 7) / 8;
    m = gm_empty(1, &nbytes, GM_U8, y->device);
    if (m && GM_KERNEL("relu_mask", y->device,
                       relu_mask_pack(data(m), data(yc), n, y->dtype, gm_num_threads),
                       cuda_relu_mask_pack(data(m), data(yc), n, y->dtype, ctx)) < 0)
        Py_CLEAR(m);
    Py_DECREF(yc);
    return (PyObject *)m;
}

/* relu_mask_backward(grad, mask, into_grad=False) -> grad where the mask's bit is set, else 0. */
PyObject *gm_py_relu_mask_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "mask", "into_grad", NULL};
    const char *name = "relu_mask_backward";
    PyObject *go, *mo;
    int into_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|p:relu_mask_backward", kwlist, &go, &mo, &into_grad))
        return NULL;
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *m = g ? gm_tensor_arg(mo, name, "mask") : NULL;
    if (!m || check_float(name, "grad", g) < 0 || check_devices(name, g, &m, 1) < 0) return NULL;
    const int64_t n = gm_numel(g);
    if (m->dtype != GM_U8 || m->ndim != 1 || m->shape[0] != (n + 7) / 8 || !gm_is_contiguous(m)) {
        char b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: mask must be a contiguous 1-D uint8 tensor of %lld bytes (one bit per "
                     "element of grad), got %s of shape %s", name, (long long)((n + 7) / 8),
                     gm_dtype_name(m->dtype), gm_shape_str(m->ndim, m->shape, b));
        return NULL;
    }
    GMTensor *gc = contig(g), *dx = NULL;
    if (!gc) return NULL;
    dx = grad_result(g, into_grad);
    if (dx && GM_KERNEL(name, g->device, relu_mask_backward(data(dx), data(gc), data(m), n, g->dtype, gm_num_threads),
                        cuda_relu_mask_backward(data(dx), data(gc), data(m), n, g->dtype, ctx)) < 0)
        Py_CLEAR(dx);
    Py_DECREF(gc);
    return (PyObject *)dx;
}

/* ---- softmax --------------------------------------------------------------------------------------------- */

/* (outer, D, inner) around dim; a 0-d tensor is one element along its only (implicit) dim. */
static int dim_geometry(GMTensor *x, long long dim_arg, const char *argname, int64_t *outer, int64_t *D,
                        int64_t *inner) {
    int dim = gm_wrap_dim(dim_arg, x->ndim, argname);
    if (dim < 0) return -1;
    *outer = *inner = 1;
    *D = x->ndim ? x->shape[dim] : 1;
    for (int d = 0; d < dim; d++) *outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) *inner *= x->shape[d];
    return 0;
}

PyObject *gm_py_softmax(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "dim", "log", NULL};
    PyObject *xo;
    long long dim;
    int log = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OL|p:softmax", kwlist, &xo, &dim, &log)) return NULL;
    const char *name = log ? "log_softmax" : "softmax";
    GMTensor *x = gm_tensor_arg(xo, name, "input");
    int64_t outer, D, inner;
    if (!x || check_float(name, "input", x) < 0 || check_devices(name, x, NULL, 0) < 0 ||
        dim_geometry(x, dim, log ? "log_softmax: dim" : "softmax: dim", &outer, &D, &inner) < 0)
        return NULL;
    GMTensor *xc = contig(x), *out = NULL;
    if (!xc) return NULL;
    out = gm_empty(x->ndim, x->shape, x->dtype, x->device);
    if (out && GM_KERNEL(name, x->device,
                         softmax_forward(data(out), data(xc), outer, D, inner, x->dtype, log, gm_num_threads),
                         cuda_softmax_forward(data(out), data(xc), outer, D, inner, x->dtype, log, ctx)) < 0)
        Py_CLEAR(out);
    Py_DECREF(xc);
    return (PyObject *)out;
}

PyObject *gm_py_softmax_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "out", "dim", "log", "into_grad", NULL};
    PyObject *go, *oo;
    long long dim;
    int log = 0, into_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOL|pp:softmax_backward", kwlist, &go, &oo, &dim, &log,
                                     &into_grad))
        return NULL;
    const char *name = log ? "log_softmax_backward" : "softmax_backward";
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *y = g ? gm_tensor_arg(oo, name, "out") : NULL;
    int64_t outer, D, inner;
    if (!y || check_float(name, "grad", g) < 0 || check_devices(name, g, &y, 1) < 0 ||
        same_shape(name, "grad", g, "out", y) < 0 || same_dtype(name, "grad", g, "out", y) < 0 ||
        dim_geometry(g, dim, log ? "log_softmax_backward: dim" : "softmax_backward: dim", &outer, &D, &inner) < 0)
        return NULL;
    GMTensor *gc = contig(g), *yc = contig(y), *dx = NULL;
    if (!gc || !yc) goto done;
    dx = grad_result(g, into_grad);
    if (dx && GM_KERNEL(name, g->device,
                        softmax_backward(data(dx), data(gc), data(yc), outer, D, inner, g->dtype, log,
                                         gm_num_threads),
                        cuda_softmax_backward(data(dx), data(gc), data(yc), outer, D, inner, g->dtype, log, ctx)) < 0)
        Py_CLEAR(dx);
done:
    Py_XDECREF(gc);
    Py_XDECREF(yc);
    return (PyObject *)dx;
}

/* ---- prelu ------------------------------------------------------------------------------------------------ */

/* x as (outer, C, inner) around its channel dim 1 (C = 1 below 2 dims), and the weight's count, which must be 1 or
 * C (PyTorch's rule and message). */
static int prelu_geometry(const char *op, GMTensor *x, GMTensor *w, int64_t *outer, int64_t *C, int64_t *inner,
                          int64_t *wn) {
    *outer = x->ndim >= 2 ? x->shape[0] : 1;
    *C = x->ndim >= 2 ? x->shape[1] : 1;
    *inner = 1;
    if (x->ndim < 2) *inner = gm_numel(x);
    for (int d = 2; d < x->ndim; d++) *inner *= x->shape[d];
    *wn = gm_numel(w);
    if (w->ndim > 1) {
        PyErr_Format(PyExc_ValueError, "%s: expected weight to be a scalar or 1D tensor, but got %d dims", op,
                     w->ndim);
        return -1;
    }
    if (*wn != 1 && *wn != *C) {
        PyErr_Format(PyExc_ValueError, "%s: mismatch of parameter numbers and input channel size: found parameter "
                     "numbers = %lld and channel size = %lld", op, (long long)*wn, (long long)*C);
        return -1;
    }
    return 0;
}

PyObject *gm_py_prelu(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "weight", NULL};
    PyObject *xo, *wo;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:prelu", kwlist, &xo, &wo)) return NULL;
    GMTensor *x = gm_tensor_arg(xo, "prelu", "input"), *w = x ? gm_tensor_arg(wo, "prelu", "weight") : NULL;
    int64_t outer, C, inner, wn;
    if (!w || check_float("prelu", "input", x) < 0 || check_devices("prelu", x, &w, 1) < 0 ||
        same_dtype("prelu", "input", x, "weight", w) < 0 || prelu_geometry("prelu", x, w, &outer, &C, &inner, &wn) < 0)
        return NULL;
    GMTensor *xc = contig(x), *wc = xc ? contig(w) : NULL, *out = NULL;
    if (!wc) goto done;
    out = gm_empty(x->ndim, x->shape, x->dtype, x->device);
    if (out && GM_KERNEL("prelu", x->device,
                         prelu_forward(data(out), data(xc), data(wc), outer, C, inner, wn, x->dtype, gm_num_threads),
                         cuda_prelu_forward(data(out), data(xc), data(wc), outer, C, inner, wn, x->dtype, ctx)) < 0)
        Py_CLEAR(out);
done:
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    return (PyObject *)out;
}

PyObject *gm_py_prelu_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "x", "weight", "need_input", "need_weight", "into_grad", NULL};
    PyObject *go, *xo, *wo;
    int need_x = 1, need_w = 1, into_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|ppp:prelu_backward", kwlist, &go, &xo, &wo, &need_x, &need_w,
                                     &into_grad))
        return NULL;
    const char *name = "prelu_backward";
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *x = g ? gm_tensor_arg(xo, name, "input") : NULL;
    GMTensor *w = x ? gm_tensor_arg(wo, name, "weight") : NULL;
    int64_t outer, C, inner, wn;
    GMTensor *others[2] = {x, w};
    if (!w || check_float(name, "grad", g) < 0 || check_devices(name, g, others, 2) < 0 ||
        same_shape(name, "grad", g, "input", x) < 0 || same_dtype(name, "grad", g, "input", x) < 0 ||
        same_dtype(name, "grad", g, "weight", w) < 0 || prelu_geometry(name, x, w, &outer, &C, &inner, &wn) < 0)
        return NULL;
    GMTensor *gc = contig(g), *xc = gc ? contig(x) : NULL, *wc = xc ? contig(w) : NULL, *dx = NULL, *dw = NULL;
    GMTensor *part = NULL;
    PyObject *res = NULL;
    if (!wc) goto done;
    /* dw before dx: the kernels read grad for dw before dx may overwrite it (into_grad) */
    if (need_w && !(dw = gm_empty(w->ndim, w->shape, w->dtype, w->device))) goto done;
    if (need_x && !(dx = grad_result(g, into_grad))) goto done;
    /* the weight gradient's partial sums (activation_ops.h): a size from the shape, the same on every device */
    int64_t segs = need_w ? (int64_t)prelu_outer_chunks(outer, C) * C : 0;
    if (segs > 0 && !(part = gm_empty_workspace(1, &segs, GM_F64, g->device))) goto done;
    if (GM_KERNEL(name, g->device,
                  prelu_backward(dx ? data(dx) : NULL, dw ? data(dw) : NULL, part ? data(part) : NULL, data(gc),
                                 data(xc), data(wc), outer, C, inner, wn, g->dtype, gm_num_threads),
                  cuda_prelu_backward(dx ? data(dx) : NULL, dw ? data(dw) : NULL, part ? data(part) : NULL, data(gc),
                                      data(xc), data(wc), outer, C, inner, wn, g->dtype, ctx)) < 0)
        goto done;
    res = pair_or_none(dx, dw);
done:
    Py_XDECREF(part);
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(dx);
    Py_XDECREF(dw);
    return res;
}
