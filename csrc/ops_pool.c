/* csrc/ops_pool.c — pooling and resizing: max_pool2d (indices only when asked), avg_pool2d,
 * adaptive_avg_pool2d, adaptive_max_pool2d, interpolate (nearest, nearest-exact, bilinear), and the backward of
 * each. Global pooling is built on these in python/gpumemnet/nn/_functional_pool.py.
 *
 * Each op validates its arguments and infers the output shape once for every device (PyTorch's rules: pad at
 * most half the kernel, ceil_mode's last window starting inside the input or the left padding, output at least
 * 1x1), allocates the outputs, then runs the CPU kernel (kernels/cpu/pool.c, resize.c); on meta it stops before
 * the kernel. Inputs are read through their strides, so nothing is copied and an inference max_pool2d allocates
 * exactly its output. Inputs are (N, C, H, W) or unbatched (C, H, W); for interpolate a 3-D input is (N, C, L),
 * as in PyTorch. On CUDA the same validation and allocations run, then kernels/cuda/pool.cu and resize.cu,
 * which give bit-identical results (see kernels/cuda/pool.h). */
#include "gm.h"

#include <math.h>

#include "cpu/pool.h"
#include "cpu/resize.h"
#ifdef GM_WITH_CUDA
#include "cuda/pool.h"
#include "cuda/resize.h"
#endif

/* ---- shared checks ------------------------------------------------------------------------------------- */

/* The tensor must hold floats (every device has kernels for the four float dtypes; meta needs none). */
static int check_float_tensor(const char *op, const char *argname, GMTensor *t) {
    if (!gm_dtype_is_float(t->dtype)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a floating-point %s, got %s", op, argname,
                     gm_dtype_name(t->dtype));
        return -1;
    }
    return 0;
}

/* An int or a sequence of one or two ints, as PyTorch's _pair; entries may be any sign (callers check). */
static int parse_pair(PyObject *o, int64_t out[2], const char *op, const char *argname) {
    int n;
    int64_t v[GM_MAX_DIMS];
    char name[96];
    snprintf(name, sizeof name, "%s: %s", op, argname);
    if (gm_parse_shape_any(o, &n, v, name) < 0) return -1;
    if (n != 1 && n != 2) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be an int or a pair of ints, got %R", op, argname, o);
        return -1;
    }
    out[0] = v[0];
    out[1] = v[n - 1];
    return 0;
}

/* The spatial view of a (N, C, H, W) or unbatched (C, H, W) shape. */
typedef struct {
    int ndim;
    int64_t shape[4];
    int64_t N, C, H, W;
} spatial;

static int spatial_of(const char *op, const char *argname, int ndim, const int64_t *shape, spatial *s) {
    char b[GM_SHAPE_BUF];
    int ok = ndim == 3 || ndim == 4;
    for (int d = ndim - 3; ok && d < ndim; d++) ok = shape[d] > 0; /* only the batch may be empty */
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: expected %s of 3 dimensions (C, H, W) or 4 (N, C, H, W) with non-zero "
                     "C, H and W, got shape %s", op, argname, gm_shape_str(ndim, shape, b));
        return -1;
    }
    s->ndim = ndim;
    memcpy(s->shape, shape, sizeof(int64_t) * ndim);
    s->N = ndim == 4 ? shape[0] : 1;
    s->C = shape[ndim - 3];
    s->H = shape[ndim - 2];
    s->W = shape[ndim - 1];
    return 0;
}

/* (N, C, OH, OW), or (C, OH, OW) for an unbatched input. */
static int out_shape(const spatial *s, int64_t oh, int64_t ow, int64_t *shape) {
    int k = 0;
    if (s->ndim == 4) shape[k++] = s->N;
    shape[k++] = s->C;
    shape[k++] = oh;
    shape[k++] = ow;
    return k;
}

/* Element strides of t as (N, C, H, W): an unbatched tensor has batch stride 0. */
static void strides4(const GMTensor *t, int64_t st[4]) {
    if (t->ndim == 4) {
        memcpy(st, t->strides, sizeof(int64_t) * 4);
    } else {
        st[0] = 0;
        memcpy(st + 1, t->strides, sizeof(int64_t) * 3);
    }
}

/* grad_output must have exactly the shape the forward produced. */
static int check_grad_shape(const char *op, GMTensor *g, int ndim, const int64_t *shape, const spatial *in) {
    int ok = g->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) ok = g->shape[d] == shape[d];
    if (ok) return 0;
    char b1[GM_SHAPE_BUF], b2[GM_SHAPE_BUF], b3[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: grad_output has shape %s, but the forward's output for an input of shape "
                 "%s has shape %s", op, gm_shape_str(g->ndim, g->shape, b1), gm_shape_str(in->ndim, in->shape, b2),
                 gm_shape_str(ndim, shape, b3));
    return -1;
}

/* input_shape argument of the backward ops: a sequence of ints describing a valid pooling input. */
static int input_shape_arg(const char *op, PyObject *o, spatial *s) {
    int n;
    int64_t shape[GM_MAX_DIMS];
    char name[96];
    snprintf(name, sizeof name, "%s: input_shape", op);
    if (gm_parse_shape(o, &n, shape, name) < 0) return -1;
    return spatial_of(op, "input_shape to describe an input", n, shape, s);
}

/* ---- pooling geometry ------------------------------------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

/* PyTorch's pooling_output_shape: with ceil_mode the last window must start inside the input or the left
 * padding, never in the right padding alone. */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode) {
    int64_t out = floor_div(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}

/* Validate kernel/stride/padding/dilation for input s and fill g (dilation (1, 1) for average pooling). */
static int pool_geometry(const char *op, const spatial *s, const int64_t k[2], const int64_t st[2],
                         const int64_t p[2], const int64_t d[2], int ceil_mode, pool2d_geom *g) {
    const char *what = NULL;
    const int64_t *bad = NULL;
    if (k[0] <= 0 || k[1] <= 0) what = "kernel_size must be positive", bad = k;
    else if (st[0] <= 0 || st[1] <= 0) what = "stride must be positive", bad = st;
    else if (d[0] <= 0 || d[1] <= 0) what = "dilation must be positive", bad = d;
    else if (p[0] < 0 || p[1] < 0) what = "padding must be non-negative", bad = p;
    if (what) {
        PyErr_Format(PyExc_ValueError, "%s: %s, got (%lld, %lld)", op, what, (long long)bad[0], (long long)bad[1]);
        return -1;
    }
    if (p[0] > k[0] / 2 || p[1] > k[1] / 2) {
        PyErr_Format(PyExc_ValueError, "%s: padding (%lld, %lld) must be at most half of kernel_size (%lld, %lld), "
                     "i.e. at most (%lld, %lld)", op, (long long)p[0], (long long)p[1], (long long)k[0],
                     (long long)k[1], (long long)(k[0] / 2), (long long)(k[1] / 2));
        return -1;
    }
    for (int i = 0; i < 2; i++) { /* huge arguments: refused before their products overflow (undefined in C) */
        int64_t span, padded;
        int span_over = __builtin_mul_overflow(d[i], k[i] - 1, &span) || __builtin_add_overflow(span, 1, &span);
        if (span_over || __builtin_mul_overflow(p[i], (int64_t)2, &padded) || __builtin_add_overflow(padded,
                i ? s->W : s->H, &padded) || __builtin_add_overflow(padded, st[i], &padded)) {
            PyErr_Format(PyExc_RuntimeError, "%s: %s overflows, but got kernel_size=%lld, dilation=%lld, padding=%lld "
                         "and stride=%lld in dim %d", op, span_over ? "effective kernel size" : "padded input size",
                         (long long)k[i], (long long)d[i], (long long)p[i], (long long)st[i], i);
            return -1;
        }
    }
    memset(g, 0, sizeof *g);
    g->N = s->N, g->C = s->C, g->H = s->H, g->W = s->W;
    g->kh = k[0], g->kw = k[1], g->sh = st[0], g->sw = st[1], g->ph = p[0], g->pw = p[1], g->dh = d[0], g->dw = d[1];
    g->OH = pool_out_size(s->H, k[0], st[0], p[0], d[0], ceil_mode);
    g->OW = pool_out_size(s->W, k[1], st[1], p[1], d[1], ceil_mode);
    if (g->OH < 1 || g->OW < 1) {
        char b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: the kernel is larger than the padded input: input of shape %s padded "
                     "by (%lld, %lld) is %lldx%lld, but kernel_size (%lld, %lld) with dilation (%lld, %lld) spans "
                     "%lldx%lld; the output would be %lldx%lld", op, gm_shape_str(s->ndim, s->shape, b),
                     (long long)p[0], (long long)p[1], (long long)(s->H + 2 * p[0]), (long long)(s->W + 2 * p[1]),
                     (long long)k[0], (long long)k[1], (long long)d[0], (long long)d[1],
                     (long long)(d[0] * (k[0] - 1) + 1), (long long)(d[1] * (k[1] - 1) + 1),
                     (long long)(g->OH > 0 ? g->OH : 0),
                     (long long)(g->OW > 0 ? g->OW : 0));
        return -1;
    }
    return 0;
}

/* ---- max_pool2d ------------------------------------------------------------------------------------------ */

static PyObject *py_max_pool2d(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "with_indices",
                             NULL};
    const char *op = "max_pool2d";
    PyObject *xo, *ko, *so, *po, *dno;
    int ceil_mode = 0, with_indices = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO|pi:max_pool2d", kwlist, &xo, &ko, &so, &po, &dno,
                                     &ceil_mode, &with_indices))
        return NULL;
    int64_t k[2], st[2], p[2], d[2], oshape[4];
    spatial s;
    pool2d_geom g;
    GMTensor *x = gm_tensor_arg(xo, op, "input");
    if (!x || check_float_tensor(op, "input", x) < 0 || spatial_of(op, "input", x->ndim, x->shape, &s) < 0 ||
        parse_pair(ko, k, op, "kernel_size") < 0 || parse_pair(so, st, op, "stride") < 0 ||
        parse_pair(po, p, op, "padding") < 0 || parse_pair(dno, d, op, "dilation") < 0 ||
        pool_geometry(op, &s, k, st, p, d, ceil_mode, &g) < 0)
        return NULL;
    int ond = out_shape(&s, g.OH, g.OW, oshape);
    GMTensor *out = gm_empty(ond, oshape, x->dtype, x->device), *idx = NULL;
    if (!out) return NULL;
    /* Indices only when backward or the caller needs them: an inference forward allocates its output alone.
     * with_indices=2: int8 taps in the window instead (autograd's compact saved form, kernels/cpu/pool.h). */
    const int taps = with_indices == 2;
    if (taps && g.kh * g.kw > 127) {
        PyErr_Format(PyExc_ValueError, "%s: int8 taps need a window of at most 127 elements, got %lldx%lld", op,
                     (long long)g.kh, (long long)g.kw);
        goto fail;
    }
    if (with_indices && !(idx = gm_empty(ond, oshape, taps ? GM_I8 : GM_I64, x->device))) goto fail;
    int64_t in[4];
    strides4(x, in);
    void *pidx = idx ? gm_tensor_data(idx) : NULL;
    if (GM_KERNEL(op, x->device,
                  taps ? maxpool2d_forward_taps(gm_tensor_data(out), pidx, gm_tensor_data(x), in, x->dtype, &g,
                                                gm_num_threads)
                       : maxpool2d_forward(gm_tensor_data(out), pidx, gm_tensor_data(x), in, x->dtype, &g,
                                           gm_num_threads),
                  taps ? cuda_maxpool2d_forward_taps(gm_tensor_data(out), pidx, gm_tensor_data(x), in, x->dtype, &g,
                                                     ctx)
                       : cuda_maxpool2d_forward(gm_tensor_data(out), pidx, gm_tensor_data(x), in, x->dtype, &g,
                                                ctx)) < 0)
        goto fail;
    if (!idx) return (PyObject *)out;
    PyObject *res = PyTuple_Pack(2, out, idx);
    Py_DECREF(out);
    Py_DECREF(idx);
    return res;
fail:
    Py_XDECREF(idx);
    Py_DECREF(out);
    return NULL;
}

/* The window of max_pool2d_backward's optional arguments: all None (unknown: the CPU needs only the indices,
 * CUDA then scatters per plane) or the forward's kernel_size, stride, padding, dilation, which must produce the
 * indices' OH x OW (with or without ceil_mode). Fills g's window; *known says whether it was given. */
static int backward_window(const char *op, const spatial *s, int64_t OH, int64_t OW, PyObject *ko, PyObject *so,
                           PyObject *po, PyObject *dno, pool2d_geom *g, int *known) {
    *known = ko != Py_None;
    if (!*known) {
        if (so != Py_None || po != Py_None || dno != Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: stride, padding and dilation need kernel_size", op);
            return -1;
        }
        return 0;
    }
    int64_t k[2], st[2], p[2] = {0, 0}, d[2] = {1, 1};
    if (parse_pair(ko, k, op, "kernel_size") < 0) return -1;
    st[0] = k[0], st[1] = k[1];
    if ((so != Py_None && parse_pair(so, st, op, "stride") < 0) ||
        (po != Py_None && parse_pair(po, p, op, "padding") < 0) ||
        (dno != Py_None && parse_pair(dno, d, op, "dilation") < 0))
        return -1;
    pool2d_geom a = {0}, b = {0};
    if (pool_geometry(op, s, k, st, p, d, 0, &a) < 0) { /* may still be valid with ceil_mode */
        PyErr_Clear();
        a.OH = a.OW = -1;
    }
    if (pool_geometry(op, s, k, st, p, d, 1, &b) < 0) return -1;
    if (!((a.OH == OH && a.OW == OW) || (b.OH == OH && b.OW == OW))) {
        PyErr_Format(PyExc_ValueError, "%s: indices of %lldx%lld outputs per plane do not come from this window "
                     "(kernel_size (%lld, %lld), stride (%lld, %lld), padding (%lld, %lld), dilation (%lld, %lld) "
                     "gives %lldx%lld, or %lldx%lld with ceil_mode)", op, (long long)OH, (long long)OW,
                     (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], (long long)p[0],
                     (long long)p[1], (long long)d[0], (long long)d[1], (long long)a.OH, (long long)a.OW,
                     (long long)b.OH, (long long)b.OW);
        return -1;
    }
    g->kh = k[0], g->kw = k[1], g->sh = st[0], g->sw = st[1], g->ph = p[0], g->pw = p[1], g->dh = d[0], g->dw = d[1];
    return 0;
}

static PyObject *py_max_pool2d_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "indices", "input_shape", "kernel_size", "stride", "padding", "dilation",
                             NULL};
    const char *op = "max_pool2d_backward";
    PyObject *go, *io, *shape_o, *ko = Py_None, *so = Py_None, *po = Py_None, *dno = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|OOOO:max_pool2d_backward", kwlist, &go, &io, &shape_o, &ko,
                                     &so, &po, &dno))
        return NULL;
    spatial s;
    GMTensor *g = gm_tensor_arg(go, op, "grad_output"), *idx = gm_tensor_arg(io, op, "indices");
    if (!g || !idx || check_float_tensor(op, "grad_output", g) < 0 || input_shape_arg(op, shape_o, &s) < 0 ||
        gm_check_same_device(op, g, idx) < 0)
        return NULL;
    const int taps = idx->dtype == GM_I8; /* max_pool2d(..., with_indices=2)'s taps: the window is needed */
    if (idx->dtype != GM_I64 && !(taps && ko != Py_None)) {
        PyErr_Format(PyExc_TypeError, "%s: indices must be int64 (or int8 window taps, with kernel_size), got %s",
                     op, gm_dtype_name(idx->dtype));
        return NULL;
    }
    if (idx->ndim != s.ndim || idx->shape[0] != s.shape[0] || (s.ndim == 4 && idx->shape[1] != s.C)) {
        char b1[GM_SHAPE_BUF], b2[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: indices of shape %s do not fit an input of shape %s", op,
                     gm_shape_str(idx->ndim, idx->shape, b1), gm_shape_str(s.ndim, s.shape, b2));
        return NULL;
    }
    if (check_grad_shape(op, g, idx->ndim, idx->shape, &s) < 0) return NULL;
    pool2d_geom geom = {s.N, s.C, s.H, s.W, idx->shape[s.ndim - 2], idx->shape[s.ndim - 1], 1, 1, 1, 1, 0, 0, 1, 1};
    int window;
    if (backward_window(op, &s, geom.OH, geom.OW, ko, so, po, dno, &geom, &window) < 0) return NULL;
    GMTensor *dx = gm_empty(s.ndim, s.shape, g->dtype, g->device), *ic = NULL;
    if (!dx) return NULL;
    ic = (GMTensor *)Py_NewRef(idx);
    if (!gm_is_contiguous(idx)) { /* the kernel walks indices flat; ours always are, a caller's may not be */
        Py_DECREF(ic);
        ic = gm_empty_workspace(idx->ndim, idx->shape, idx->dtype, idx->device);
        if (!ic || (idx->device.type != GM_DEV_META && gm_copy_into(ic, idx) < 0)) goto fail;
    }
    if (g->device.type == GM_DEV_META) { /* the same bytes as the CPU (the copy included), no kernel */
        Py_DECREF(ic);
        return (PyObject *)dx;
    }
    int64_t ds[4];
    strides4(g, ds);
    if (g->device.type == GM_DEV_CUDA) {
#ifdef GM_WITH_CUDA
        /* without the window the CUDA kernel scatters per plane (kernels/cuda/pool.h) */
        if (!window) geom.kh = geom.kw = 0;
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(g->device);
        void *pidx = gm_tensor_data(ic);
        if (!ctx || gm_cuda_kernel_status(op, taps ? cuda_maxpool2d_backward_taps(gm_tensor_data(dx), gm_tensor_data(g),
                                                                                  ds, pidx, g->dtype, &geom, ctx)
                                                   : cuda_maxpool2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds,
                                                                             pidx, g->dtype, &geom, ctx),
                                          ctx) < 0)
            goto fail;
#endif
        Py_DECREF(ic);
        return (PyObject *)dx;
    }
    void *pidx = gm_tensor_data(ic);
    int rc = taps ? maxpool2d_backward_taps(gm_tensor_data(dx), gm_tensor_data(g), ds, pidx, g->dtype, &geom,
                                            gm_num_threads)
                  : maxpool2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds, pidx, g->dtype, &geom,
                                       gm_num_threads);
    if (rc != GM_OK) {
        PyErr_Format(PyExc_IndexError, "%s: an index lies outside the %lldx%lld plane (valid: -1 for an empty "
                     "window, or 0 .. %lld); were the indices modified?", op, (long long)s.H, (long long)s.W,
                     (long long)(s.H * s.W - 1));
        goto fail;
    }
    Py_DECREF(ic);
    return (PyObject *)dx;
fail:
    Py_XDECREF(ic);
    Py_DECREF(dx);
    return NULL;
}

/* The backward from the input instead of indices: each window's argmax is found again in the input (the same
 * code as the forward's, so the same element). Autograd saves the input in place of indices when the input is
 * kept for backward anyway (python/gpumemnet/nn/_functional_pool.py): then max pooling keeps nothing of its own. */
static PyObject *py_max_pool2d_backward_input(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                             NULL};
    const char *op = "max_pool2d_backward_input";
    PyObject *go, *xo, *ko, *so, *po, *dno;
    int ceil_mode = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO|p:max_pool2d_backward_input", kwlist, &go, &xo, &ko, &so,
                                     &po, &dno, &ceil_mode))
        return NULL;
    int64_t k[2], st[2], p[2], d[2], oshape[4];
    spatial s;
    pool2d_geom geom;
    GMTensor *g = gm_tensor_arg(go, op, "grad_output"), *x = g ? gm_tensor_arg(xo, op, "input") : NULL;
    if (!x || check_float_tensor(op, "grad_output", g) < 0 || gm_check_same_device(op, g, x) < 0 ||
        spatial_of(op, "input", x->ndim, x->shape, &s) < 0 || parse_pair(ko, k, op, "kernel_size") < 0 ||
        parse_pair(so, st, op, "stride") < 0 || parse_pair(po, p, op, "padding") < 0 ||
        parse_pair(dno, d, op, "dilation") < 0 || pool_geometry(op, &s, k, st, p, d, ceil_mode, &geom) < 0)
        return NULL;
    if (x->dtype != g->dtype) {
        PyErr_Format(PyExc_TypeError, "%s: input is %s but grad_output is %s", op, gm_dtype_name(x->dtype),
                     gm_dtype_name(g->dtype));
        return NULL;
    }
    const int ond = out_shape(&s, geom.OH, geom.OW, oshape);
    if (check_grad_shape(op, g, ond, oshape, &s) < 0) return NULL;
    GMTensor *dx = gm_empty(s.ndim, s.shape, g->dtype, g->device);
    if (!dx) return NULL;
    int64_t ds[4], in[4];
    strides4(g, ds);
    strides4(x, in);
    if (GM_KERNEL(op, g->device,
                  maxpool2d_backward_input(gm_tensor_data(dx), gm_tensor_data(g), ds, gm_tensor_data(x), in,
                                           g->dtype, &geom, gm_num_threads),
                  cuda_maxpool2d_backward_input(gm_tensor_data(dx), gm_tensor_data(g), ds, gm_tensor_data(x), in,
                                                g->dtype, &geom, ctx)) < 0)
        Py_CLEAR(dx);
    return (PyObject *)dx;
}

/* ---- avg_pool2d ------------------------------------------------------------------------------------------ */

/* divisor_override: None (0 here) or a positive int. */
static int divisor_arg(const char *op, PyObject *o, int64_t *div) {
    *div = 0;
    if (o == Py_None) return 0;
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: divisor_override must be None or an int, got %.100s", op,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v <= 0) {
        PyErr_Format(PyExc_ValueError, "%s: divisor_override must be a positive int, got %lld", op, v);
        return -1;
    }
    *div = v;
    return 0;
}

/* The arguments shared by avg_pool2d and its backward, validated into g. */
static int avg_args(const char *op, const spatial *s, PyObject *ko, PyObject *so, PyObject *po, int ceil_mode,
                    PyObject *divo, pool2d_geom *g, int64_t *div) {
    int64_t k[2], st[2], p[2], d[2] = {1, 1};
    if (parse_pair(ko, k, op, "kernel_size") < 0 || parse_pair(so, st, op, "stride") < 0 ||
        parse_pair(po, p, op, "padding") < 0 || divisor_arg(op, divo, div) < 0)
        return -1;
    return pool_geometry(op, s, k, st, p, d, ceil_mode, g);
}

static PyObject *py_avg_pool2d(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                             "divisor_override", NULL};
    const char *op = "avg_pool2d";
    PyObject *xo, *ko, *so, *po, *divo = Py_None;
    int ceil_mode = 0, cip = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|ppO:avg_pool2d", kwlist, &xo, &ko, &so, &po, &ceil_mode,
                                     &cip, &divo))
        return NULL;
    spatial s;
    pool2d_geom g;
    int64_t div, oshape[4];
    GMTensor *x = gm_tensor_arg(xo, op, "input");
    if (!x || check_float_tensor(op, "input", x) < 0 || spatial_of(op, "input", x->ndim, x->shape, &s) < 0 ||
        avg_args(op, &s, ko, so, po, ceil_mode, divo, &g, &div) < 0)
        return NULL;
    int ond = out_shape(&s, g.OH, g.OW, oshape);
    GMTensor *out = gm_empty(ond, oshape, x->dtype, x->device);
    if (!out || x->device.type == GM_DEV_META) return (PyObject *)out;
    int64_t in[4];
    strides4(x, in);
    int rc = GM_KERNEL(op, x->device,
                       avgpool2d_forward(gm_tensor_data(out), gm_tensor_data(x), in, x->dtype, &g, cip, div,
                                         gm_num_threads),
                       cuda_avgpool2d_forward(gm_tensor_data(out), gm_tensor_data(x), in, x->dtype, &g, cip, div,
                                              ctx));
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

static PyObject *py_avg_pool2d_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input_shape", "kernel_size", "stride", "padding", "ceil_mode",
                             "count_include_pad", "divisor_override", NULL};
    const char *op = "avg_pool2d_backward";
    PyObject *go, *shape_o, *ko, *so, *po, *divo = Py_None;
    int ceil_mode = 0, cip = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO|ppO:avg_pool2d_backward", kwlist, &go, &shape_o, &ko,
                                     &so, &po, &ceil_mode, &cip, &divo))
        return NULL;
    spatial s;
    pool2d_geom geom;
    int64_t div, oshape[4];
    GMTensor *g = gm_tensor_arg(go, op, "grad_output");
    if (!g || check_float_tensor(op, "grad_output", g) < 0 || input_shape_arg(op, shape_o, &s) < 0 ||
        avg_args(op, &s, ko, so, po, ceil_mode, divo, &geom, &div) < 0 ||
        check_grad_shape(op, g, out_shape(&s, geom.OH, geom.OW, oshape), oshape, &s) < 0)
        return NULL;
    GMTensor *dx = gm_empty(s.ndim, s.shape, g->dtype, g->device);
    if (!dx || g->device.type == GM_DEV_META) return (PyObject *)dx;
    int64_t ds[4];
    strides4(g, ds);
    int rc = GM_KERNEL(op, g->device,
                       avgpool2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds, g->dtype, &geom, cip, div,
                                          gm_num_threads),
                       cuda_avgpool2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds, g->dtype, &geom, cip, div,
                                               ctx));
    if (rc < 0) {
        Py_DECREF(dx);
        return NULL;
    }
    return (PyObject *)dx;
}

/* ---- adaptive_avg_pool2d --------------------------------------------------------------------------------- */

static PyObject *py_adaptive_avg_pool2d(PyObject *self, PyObject *args) {
    const char *op = "adaptive_avg_pool2d";
    PyObject *xo, *so;
    if (!PyArg_ParseTuple(args, "OO:adaptive_avg_pool2d", &xo, &so)) return NULL;
    spatial s;
    int64_t os[2], oshape[4];
    GMTensor *x = gm_tensor_arg(xo, op, "input");
    if (!x || check_float_tensor(op, "input", x) < 0 || spatial_of(op, "input", x->ndim, x->shape, &s) < 0 ||
        parse_pair(so, os, op, "output_size") < 0)
        return NULL;
    if (os[0] < 0 || os[1] < 0) {
        PyErr_Format(PyExc_ValueError, "%s: output_size must be non-negative, got (%lld, %lld)", op,
                     (long long)os[0], (long long)os[1]);
        return NULL;
    }
    int ond = out_shape(&s, os[0], os[1], oshape);
    GMTensor *out = gm_empty(ond, oshape, x->dtype, x->device);
    if (!out || x->device.type == GM_DEV_META) return (PyObject *)out;
    pool2d_geom g = {s.N, s.C, s.H, s.W, os[0], os[1], 1, 1, 1, 1, 0, 0, 1, 1};
    int64_t in[4];
    strides4(x, in);
    int rc = GM_KERNEL(op, x->device,
                       adaptive_avgpool2d_forward(gm_tensor_data(out), gm_tensor_data(x), in, x->dtype, &g,
                                                  gm_num_threads),
                       cuda_adaptive_avgpool2d_forward(gm_tensor_data(out), gm_tensor_data(x), in, x->dtype, &g,
                                                       ctx));
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

/* (out, indices); the backward is max_pool2d_backward(grad, indices, input_shape), the window-less scatter. */
static PyObject *py_adaptive_max_pool2d(PyObject *self, PyObject *args) {
    const char *op = "adaptive_max_pool2d";
    PyObject *xo, *so;
    if (!PyArg_ParseTuple(args, "OO:adaptive_max_pool2d", &xo, &so)) return NULL;
    spatial s;
    int64_t os[2], oshape[4];
    GMTensor *x = gm_tensor_arg(xo, op, "input");
    if (!x || check_float_tensor(op, "input", x) < 0 || spatial_of(op, "input", x->ndim, x->shape, &s) < 0 ||
        parse_pair(so, os, op, "output_size") < 0)
        return NULL;
    if (os[0] < 0 || os[1] < 0) {
        PyErr_Format(PyExc_ValueError, "%s: output_size must be non-negative, got (%lld, %lld)", op,
                     (long long)os[0], (long long)os[1]);
        return NULL;
    }
    int ond = out_shape(&s, os[0], os[1], oshape);
    GMTensor *out = gm_empty(ond, oshape, x->dtype, x->device), *ind = out ? gm_empty(ond, oshape, GM_I64, x->device)
                                                                           : NULL;
    pool2d_geom g = {s.N, s.C, s.H, s.W, os[0], os[1], 1, 1, 1, 1, 0, 0, 1, 1};
    int64_t in[4];
    strides4(x, in);
    int64_t *pi = ind ? (int64_t *)gm_tensor_data(ind) : NULL;
    if (!ind || GM_KERNEL(op, x->device,
                          adaptive_maxpool2d_forward(gm_tensor_data(out), pi, gm_tensor_data(x), in, x->dtype, &g,
                                                     gm_num_threads),
                          cuda_adaptive_maxpool2d_forward(gm_tensor_data(out), pi, gm_tensor_data(x), in, x->dtype, &g,
                                                          ctx)) < 0) {
        Py_XDECREF(out);
        Py_XDECREF(ind);
        return NULL;
    }
    return Py_BuildValue("(NN)", out, ind);
}

static PyObject *py_adaptive_avg_pool2d_backward(PyObject *self, PyObject *args) {
    const char *op = "adaptive_avg_pool2d_backward";
    PyObject *go, *shape_o;
    if (!PyArg_ParseTuple(args, "OO:adaptive_avg_pool2d_backward", &go, &shape_o)) return NULL;
    spatial s;
    int64_t oshape[4];
    GMTensor *g = gm_tensor_arg(go, op, "grad_output");
    if (!g || check_float_tensor(op, "grad_output", g) < 0 || input_shape_arg(op, shape_o, &s) < 0) return NULL;
    if (g->ndim != s.ndim) { /* any output size is possible: take it from grad_output, check the rest */
        PyErr_Format(PyExc_ValueError, "%s: grad_output has %d dimensions but the input has %d", op, g->ndim,
                     s.ndim);
        return NULL;
    }
    const int64_t OH = g->shape[s.ndim - 2], OW = g->shape[s.ndim - 1];
    if (check_grad_shape(op, g, out_shape(&s, OH, OW, oshape), oshape, &s) < 0) return NULL;
    GMTensor *dx = gm_empty(s.ndim, s.shape, g->dtype, g->device);
    if (!dx || g->device.type == GM_DEV_META) return (PyObject *)dx;
    pool2d_geom geom = {s.N, s.C, s.H, s.W, OH, OW, 1, 1, 1, 1, 0, 0, 1, 1};
    int64_t ds[4];
    strides4(g, ds);
    int rc = GM_KERNEL(op, g->device,
                       adaptive_avgpool2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds, g->dtype, &geom,
                                                   gm_num_threads),
                       cuda_adaptive_avgpool2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds, g->dtype, &geom,
                                                        ctx));
    if (rc < 0) {
        Py_DECREF(dx);
        return NULL;
    }
    return (PyObject *)dx;
}

/* ---- interpolate ---------------------------------------------------------------------------------------- */

/* The resize problem of an input shape: 4-D (N, C, H, W), or 3-D (N, C, L) seen as (N, C, 1, L) (nearest modes
 * only, as in PyTorch, where bilinear needs 4-D). Fills g's sizes, mode and flags; out sizes from `size`. */
typedef struct {
    int ndim;
    int64_t shape[4];
} resize_in;

static int resize_mode_arg(const char *op, const char *mode) {
    if (!strcmp(mode, "nearest")) return RESIZE_NEAREST;
    if (!strcmp(mode, "nearest-exact")) return RESIZE_NEAREST_EXACT;
    if (!strcmp(mode, "bilinear")) return RESIZE_BILINEAR;
    PyErr_Format(PyExc_ValueError, "%s: mode must be 'nearest', 'nearest-exact' or 'bilinear', got '%s'", op, mode);
    return -1;
}

/* Validate an input shape for a mode and fill g's N, C, H, W (and mode, align_corners). */
static int resize_input(const char *op, int ndim, const int64_t *shape, int mode, int align, resize2d_geom *g) {
    char b[GM_SHAPE_BUF];
    if (ndim == 3 && mode == RESIZE_BILINEAR) {
        PyErr_Format(PyExc_ValueError, "%s: bilinear mode needs a 4-D input (N, C, H, W), got shape %s (a 3-D input "
                     "is (N, C, L), resized by the 1-D modes)", op, gm_shape_str(ndim, shape, b));
        return -1;
    }
    int ok = ndim == 3 || ndim == 4;
    for (int d = 1; ok && d < ndim; d++) ok = shape[d] > 0;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: expected a 4-D input (N, C, H, W) or, for the nearest modes, a 3-D input "
                     "(N, C, L), with non-zero sizes after the batch; got shape %s", op,
                     gm_shape_str(ndim, shape, b));
        return -1;
    }
    memset(g, 0, sizeof *g);
    g->N = shape[0], g->C = shape[1];
    g->H = ndim == 4 ? shape[2] : 1;
    g->W = shape[ndim - 1];
    g->OH = g->OW = 1;
    g->mode = mode;
    g->align_corners = align;
    g->is_1d = ndim == 3;
    return 0;
}

/* scales: None, or a sequence of (ndim - 2) entries each None or a positive float. */
static int scales_arg(const char *op, PyObject *o, int nsp, resize2d_geom *g) {
    double v[2] = {0.0, 0.0};
    if (o != Py_None) {
        PyObject *seq = PySequence_Fast(o, "");
        if (!seq || PySequence_Fast_GET_SIZE(seq) != nsp) {
            Py_XDECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: scales must be None or a sequence of %d numbers (or None), got %R",
                         op, nsp, o);
            return -1;
        }
        for (int i = 0; i < nsp; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            if (item == Py_None) continue;
            double x = PyFloat_AsDouble(item);
            if (x == -1.0 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
            if (!(x > 0.0) || isinf(x)) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "%s: scale factors must be positive and finite, got %R", op, o);
                return -1;
            }
            v[i] = x;
        }
        Py_DECREF(seq);
    }
    g->scale_h = nsp == 2 ? v[0] : 0.0;
    g->scale_w = v[nsp - 1];
    return 0;
}

static int resize_out_shape(const resize2d_geom *g, int ndim, int64_t *shape) {
    shape[0] = g->N;
    shape[1] = g->C;
    if (ndim == 4) shape[2] = g->OH;
    shape[ndim - 1] = g->OW;
    return ndim;
}

static void resize_strides(const GMTensor *t, int64_t st[4]) {
    st[0] = t->strides[0];
    st[1] = t->strides[1];
    st[2] = t->ndim == 4 ? t->strides[2] : 0;
    st[3] = t->strides[t->ndim - 1];
}

static PyObject *py_interpolate(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "size", "mode", "align_corners", "scales", NULL};
    const char *op = "interpolate", *mode_s = "nearest";
    PyObject *xo, *size_o, *scales_o = Py_None;
    int align = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|spO:interpolate", kwlist, &xo, &size_o, &mode_s, &align,
                                     &scales_o))
        return NULL;
    resize2d_geom g;
    int mode, n;
    int64_t size[GM_MAX_DIMS], oshape[4];
    GMTensor *x = gm_tensor_arg(xo, op, "input");
    if (!x || check_float_tensor(op, "input", x) < 0 || (mode = resize_mode_arg(op, mode_s)) < 0 ||
        resize_input(op, x->ndim, x->shape, mode, align, &g) < 0 ||
        gm_parse_shape_any(size_o, &n, size, "interpolate: size") < 0 || scales_arg(op, scales_o, x->ndim - 2, &g) < 0)
        return NULL;
    if (n != x->ndim - 2 || size[0] <= 0 || size[n - 1] <= 0) {
        char b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: size must be %d positive int%s for an input of shape %s, got %R", op,
                     x->ndim - 2, x->ndim == 4 ? "s" : "", gm_shape_str(x->ndim, x->shape, b), size_o);
        return NULL;
    }
    g.OH = x->ndim == 4 ? size[0] : 1;
    g.OW = size[n - 1];
    GMTensor *out = gm_empty(resize_out_shape(&g, x->ndim, oshape), oshape, x->dtype, x->device);
    if (!out || x->device.type == GM_DEV_META) return (PyObject *)out;
    int64_t in[4];
    resize_strides(x, in);
    int rc = GM_KERNEL(op, x->device,
                       resize2d_forward(gm_tensor_data(out), gm_tensor_data(x), in, x->dtype, &g, gm_num_threads),
                       cuda_resize2d_forward(gm_tensor_data(out), gm_tensor_data(x), in, x->dtype, &g, ctx));
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return (PyObject *)out;
}

static PyObject *py_interpolate_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input_shape", "mode", "align_corners", "scales", NULL};
    const char *op = "interpolate_backward", *mode_s = "nearest";
    PyObject *go, *shape_o, *scales_o = Py_None;
    int align = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|spO:interpolate_backward", kwlist, &go, &shape_o, &mode_s,
                                     &align, &scales_o))
        return NULL;
    resize2d_geom geom;
    int mode, n;
    int64_t shape[GM_MAX_DIMS], oshape[4];
    GMTensor *g = gm_tensor_arg(go, op, "grad_output");
    if (!g || check_float_tensor(op, "grad_output", g) < 0 || (mode = resize_mode_arg(op, mode_s)) < 0 ||
        gm_parse_shape(shape_o, &n, shape, "interpolate_backward: input_shape") < 0 ||
        resize_input(op, n, shape, mode, align, &geom) < 0 || scales_arg(op, scales_o, n - 2, &geom) < 0)
        return NULL;
    if (g->ndim != n) {
        PyErr_Format(PyExc_ValueError, "%s: grad_output has %d dimensions but the input has %d", op, g->ndim, n);
        return NULL;
    }
    geom.OH = n == 4 ? g->shape[2] : 1;
    geom.OW = g->shape[n - 1];
    spatial s = {n, {0}, 0, 0, 0, 0};
    memcpy(s.shape, shape, sizeof(int64_t) * n);
    if (geom.OH <= 0 || geom.OW <= 0 ||
        check_grad_shape(op, g, resize_out_shape(&geom, n, oshape), oshape, &s) < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: grad_output must have non-zero spatial sizes", op);
        return NULL;
    }
    GMTensor *dx = gm_empty(n, shape, g->dtype, g->device);
    if (!dx || g->device.type == GM_DEV_META) return (PyObject *)dx;
    int64_t ds[4];
    resize_strides(g, ds);
    int rc = GM_KERNEL(op, g->device,
                       resize2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds, g->dtype, &geom, gm_num_threads),
                       cuda_resize2d_backward(gm_tensor_data(dx), gm_tensor_data(g), ds, g->dtype, &geom, ctx));
    if (rc < 0) {
        Py_DECREF(dx);
        return NULL;
    }
    return (PyObject *)dx;
}

#define KW METH_VARARGS | METH_KEYWORDS
#define FN(f) (PyCFunction)(void (*)(void))(f)

PyMethodDef gm_pool_methods[] = {
    {"max_pool2d", FN(py_max_pool2d), KW,
     "max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode=False, with_indices=False): the output, "
     "or (output, int64 indices into each H*W plane) with with_indices; with_indices=2: int8 window taps."},
    {"max_pool2d_backward_input", FN(py_max_pool2d_backward_input), KW,
     "max_pool2d_backward_input(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode=False): "
     "max_pool2d's input-gradient, each window's argmax found again in input."},
    {"max_pool2d_backward", FN(py_max_pool2d_backward), KW,
     "max_pool2d_backward(grad_output, indices, input_shape, kernel_size=None, stride=None, padding=None, "
     "dilation=None): the input's gradient (scatter through indices). The window is optional; given, CUDA "
     "gathers per input element instead of scattering per plane (much faster for sliding windows). int8 taps "
     "(max_pool2d's with_indices=2) need the window."},
    {"avg_pool2d", FN(py_avg_pool2d), KW,
     "avg_pool2d(input, kernel_size, stride, padding, ceil_mode=False, count_include_pad=True, "
     "divisor_override=None)."},
    {"avg_pool2d_backward", FN(py_avg_pool2d_backward), KW,
     "avg_pool2d_backward(grad_output, input_shape, kernel_size, stride, padding, ceil_mode=False, "
     "count_include_pad=True, divisor_override=None)."},
    {"adaptive_max_pool2d", py_adaptive_max_pool2d, METH_VARARGS,
     "adaptive_max_pool2d(input, output_size) -> (out, int64 indices h*W + w)."},
    {"adaptive_avg_pool2d", py_adaptive_avg_pool2d, METH_VARARGS,
     "adaptive_avg_pool2d(input, output_size): PyTorch's floor/ceil windows."},
    {"adaptive_avg_pool2d_backward", py_adaptive_avg_pool2d_backward, METH_VARARGS,
     "adaptive_avg_pool2d_backward(grad_output, input_shape)."},
    {"interpolate", FN(py_interpolate), KW,
     "interpolate(input, size, mode='nearest', align_corners=False, scales=None): size and scales have one entry "
     "per spatial dim (a 3-D input is (N, C, L)); scales are the user's scale factors, used for source "
     "coordinates as PyTorch does."},
    {"interpolate_backward", FN(py_interpolate_backward), KW,
     "interpolate_backward(grad_output, input_shape, mode='nearest', align_corners=False, scales=None)."},
    {NULL, NULL, 0, NULL},
};
