/* csrc/ops_reduce.c — reductions: _C.reduce (sum, mean, amax, amin, prod), max_dim / min_dim, argmax / argmin,
 * var. Each validates its arguments and infers the output shape once for every device, allocates the outputs,
 * then runs the backend kernel (none on meta). The input is never copied: the kernels read it through its
 * strides (kernels/cpu/reduce.c, kernels/cuda/reduce.cu), and every device allocates the same outputs. The input
 * is taken with gm_tensor_arg, which notes its size for GM_KERNEL's GIL policy: a full reduction's output is one
 * element, and only the input says the kernel is long. */
#include "gm.h"
#include "cpu/reduce.h"
#ifdef GM_WITH_CUDA
#include "cuda/reduce.h"
#endif

static const char *const op_names[] = {"sum", "mean", "amax", "amin", "prod"};

/* The result of validating a reduction: which dims go, the output shape, the kernel's geometry. */
typedef struct {
    int reduced[GM_MAX_DIMS];
    int out_ndim;
    int64_t out_shape[GM_MAX_DIMS];
    int64_t red_numel;
    reduce_geom g;
} plan;

/* ---- splitting long reductions ---------------------------------------------------------------------------------
 * On a GPU one block reduces a tile of outputs, so few outputs over a long extent (x.sum() of 10^8 elements)
 * would leave all but one multiprocessor idle: the CUDA kernels then split the extent in `parts` pieces reduced
 * into 16-byte partials (kernels/cuda/reduce.h). Only when at least 2 pieces of SPLIT_MIN elements exist, and
 * with outputs x pieces at most SPLIT_BLOCKS (plenty of blocks for any GPU). The decision depends on the shapes
 * alone, and the partials' scratch is allocated on every device (the CPU kernels ignore it), so that a run on cpu
 * or meta allocates exactly what one on cuda does: memory estimates stay exact. It is small: <= 32 KiB. */
#define SPLIT_MIN 65536
#define SPLIT_BLOCKS 2048

static int64_t split_parts(int64_t nout, int64_t nred) {
    if (nout <= 0 || nred < 2 * SPLIT_MIN) return 1;
    int64_t parts = nred / SPLIT_MIN, cap = SPLIT_BLOCKS / nout;
    if (parts > cap) parts = cap;
    return parts < 2 ? 1 : parts;
}

/* The scratch of p's reduction into *ws (NULL when it is not split) and its piece count. 0, or -1 + exception. */
static int split_scratch(const plan *p, GMTensor *a, GMTensor **ws, int64_t *parts) {
    int64_t nout = 1;
    for (int i = 0; i < p->out_ndim; i++) nout *= p->out_shape[i];
    *parts = split_parts(nout, p->red_numel);
    *ws = NULL;
    if (*parts <= 1) return 0;
    const int64_t nbytes = nout * *parts * 16; /* REDUCE_SPLIT_BYTES */
    *ws = gm_empty_workspace(1, &nbytes, GM_BOOL, a->device);
    return *ws ? 0 : -1;
}

static void *data_or_null(GMTensor *t) { return t ? gm_tensor_data(t) : NULL; }

/* Validate `dims` (None: all dims; an int; or a sequence of ints) against a and fill p. An empty sequence
 * reduces nothing (NumPy's axis=(); PyTorch's legacy "empty means all" is a trap we do not copy).
 * -1 with IndexError (out of range), ValueError (repeated) or TypeError (not ints). */
static int plan_reduction(const char *op, GMTensor *a, PyObject *dims, int keepdim, plan *p) {
    char buf[GM_SHAPE_BUF];
    memset(p, 0, sizeof *p);
    int nd = a->ndim;
    if (dims == Py_None) {
        for (int i = 0; i < nd; i++) p->reduced[i] = 1;
    } else {
        PyObject *seq;
        if (PyLong_Check(dims)) seq = PyTuple_Pack(1, dims);
        else seq = PySequence_Fast(dims, "");
        if (!seq) {
            PyErr_Format(PyExc_TypeError, "%s: dims must be None, an int or a sequence of ints, got %.100s", op,
                         Py_TYPE(dims)->tp_name);
            return -1;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        int seen0d = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            if (!PyLong_Check(item)) {
                PyErr_Format(PyExc_TypeError, "%s: dims must be ints, got %.100s at position %zd", op,
                             Py_TYPE(item)->tp_name, i);
                Py_DECREF(seq);
                return -1;
            }
            long long d = PyLong_AsLongLong(item);
            if (d == -1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
            int n1 = nd > 0 ? nd : 1; /* a 0-d tensor accepts dim 0 and -1, like PyTorch */
            if (d < -n1 || d >= n1) {
                PyErr_Format(PyExc_IndexError, "%s: dim %lld is out of range for a tensor with %d dimension%s "
                             "(shape %s); expected a dim in [%d, %d]", op, d, nd, nd == 1 ? "" : "s",
                             gm_shape_str(nd, a->shape, buf), -n1, n1 - 1);
                Py_DECREF(seq);
                return -1;
            }
            int w = (int)(d < 0 ? d + n1 : d);
            int *slot = nd > 0 ? &p->reduced[w] : &seen0d;
            if (*slot) {
                PyErr_Format(PyExc_ValueError, "%s: dim %d appears more than once in dims %R (tensor with %d "
                             "dimension%s)", op, w, dims, nd, nd == 1 ? "" : "s");
                Py_DECREF(seq);
                return -1;
            }
            *slot = 1;
        }
        Py_DECREF(seq);
    }
    int64_t es = (int64_t)gm_dtype_size(a->dtype);
    p->red_numel = 1;
    for (int i = 0; i < nd; i++) {
        if (p->reduced[i]) {
            p->g.red_shape[p->g.nred] = a->shape[i];
            p->g.red_strides[p->g.nred++] = a->strides[i] * es;
            p->red_numel *= a->shape[i];
            if (keepdim) p->out_shape[p->out_ndim++] = 1;
        } else {
            p->g.kept_shape[p->g.nkept] = a->shape[i];
            p->g.kept_strides[p->g.nkept++] = a->strides[i] * es;
            p->out_shape[p->out_ndim++] = a->shape[i];
        }
    }
    return 0;
}

/* Reductions with no identity (max, min, arg*) cannot reduce an empty extent. */
static int check_nonempty(const char *op, GMTensor *a, const plan *p) {
    if (p->red_numel > 0) return 0;
    char buf[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: cannot reduce a tensor of shape %s over an empty extent: the "
                 "operation has no identity (pass dims whose sizes are non-zero)", op,
                 gm_shape_str(a->ndim, a->shape, buf));
    return -1;
}

/* uint8, int8, int16 and int32 have no reduction kernels: they are reduced as an int64 workspace copy (the sums and
 * products PyTorch gives in int64 anyway), and amax/amin/max values are cast back to their dtype. */
static GMTensor *widened_copy(GMTensor *a) {
    GMTensor *w = gm_empty_workspace(a->ndim, a->shape, GM_I64, a->device);
    if (w && a->device.type != GM_DEV_META && gm_copy_into(w, a) < 0) Py_CLEAR(w);
    return w;
}

/* A new tensor of r's values in dtype dt; steals r. */
static GMTensor *narrowed_copy(GMTensor *r, gm_dtype dt) {
    if (!r) return NULL;
    GMTensor *n = gm_empty(r->ndim, r->shape, dt, r->device);
    if (n && r->device.type != GM_DEV_META && gm_copy_into(n, r) < 0) Py_CLEAR(n);
    Py_DECREF(r);
    return n;
}

static PyObject *py_reduce(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "a", "dims", "keepdim", "dtype", NULL};
    int op, keepdim = 0;
    PyObject *ao, *dims = Py_None, *dto = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO|OpO:reduce", kwlist, &op, &ao, &dims, &keepdim, &dto))
        return NULL;
    if (op < REDUCE_SUM || op > REDUCE_PROD) {
        PyErr_Format(PyExc_ValueError, "reduce: unknown op %d; expected SUM=0 MEAN=1 AMAX=2 AMIN=3 PROD=4", op);
        return NULL;
    }
    const char *name = op_names[op];
    GMTensor *a = gm_tensor_arg(ao, name, "input");
    if (!a) return NULL;
    gm_dtype in_dt = a->dtype, out_dt;
    int has_dt = dto != Py_None;
    if (has_dt && gm_parse_dtype(dto, &out_dt, "dtype") < 0) return NULL;
    switch (op) {
    case REDUCE_SUM:
    case REDUCE_PROD:
        /* Like PyTorch: integer and bool inputs accumulate into int64 so that counts do not overflow. */
        if (!has_dt) out_dt = gm_dtype_is_float(in_dt) ? in_dt : GM_I64;
        if (out_dt == GM_BOOL || (gm_dtype_is_float(in_dt) && !gm_dtype_is_float(out_dt))) {
            PyErr_Format(PyExc_TypeError, "%s: cannot accumulate a %s tensor in dtype %s; use a floating point "
                         "dtype%s", name, gm_dtype_name(in_dt), gm_dtype_name(out_dt),
                         gm_dtype_is_float(in_dt) ? "" : " or int64");
            return NULL;
        }
        break;
    case REDUCE_MEAN:
        if (!has_dt) out_dt = in_dt;
        if (!gm_dtype_is_float(out_dt)) {
            PyErr_Format(PyExc_TypeError, "mean: the result of a mean needs a floating point dtype, got %s%s; "
                         "pass dtype=float32 (or float64)", gm_dtype_name(out_dt),
                         has_dt ? "" : " (the input's dtype)");
            return NULL;
        }
        break;
    default: /* amax, amin: the result is one of the inputs */
        if (has_dt && out_dt != in_dt) {
            PyErr_Format(PyExc_TypeError, "%s: dtype is not supported (the result has the input's dtype %s); "
                         "got dtype=%s", name, gm_dtype_name(in_dt), gm_dtype_name(out_dt));
            return NULL;
        }
        out_dt = in_dt;
        break;
    }
    if (gm_dtype_is_narrow(in_dt)) { /* reduced as an int64 copy (above) */
        GMTensor *w = widened_copy(a);
        PyObject *in = w ? Py_BuildValue("(iOOiO)", op, (PyObject *)w, dims, keepdim,
                                         gm_dtype_is_float(out_dt) ? dto : Py_None) : NULL;
        GMTensor *r = in ? (GMTensor *)py_reduce(self, in, NULL) : NULL;
        Py_XDECREF(in);
        Py_XDECREF(w);
        return (PyObject *)(r && r->dtype != out_dt ? narrowed_copy(r, out_dt) : r);
    }
    plan p;
    if (plan_reduction(name, a, dims, keepdim, &p) < 0) return NULL;
    if ((op == REDUCE_AMAX || op == REDUCE_AMIN) && check_nonempty(name, a, &p) < 0) return NULL;
    GMTensor *out = gm_empty(p.out_ndim, p.out_shape, out_dt, a->device), *ws = NULL;
    int64_t parts;
    if (!out || split_scratch(&p, a, &ws, &parts) < 0) { Py_XDECREF(out); return NULL; }
    int rc = GM_KERNEL(name, a->device,
                       cpu_reduce_forward(gm_tensor_data(out), out_dt, gm_tensor_data(a), in_dt, &p.g, op,
                                          gm_num_threads),
                       cuda_reduce_forward(gm_tensor_data(out), out_dt, gm_tensor_data(a), in_dt, &p.g, op,
                                           data_or_null(ws), parts, ctx));
    Py_XDECREF(ws); /* stream-ordered: the device's next user of the block runs after this kernel */
    if (rc < 0) { Py_DECREF(out); return NULL; }
    return (PyObject *)out;
}

/* Shared by max_dim/min_dim (values and indices) and argmax/argmin (indices only). */
static PyObject *arg_reduce(const char *name, PyObject *ao, PyObject *dims, int keepdim, int is_max,
                            int want_values) {
    GMTensor *a = gm_tensor_arg(ao, name, "input");
    if (!a) return NULL;
    if (gm_dtype_is_narrow(a->dtype)) { /* ranked as an int64 copy, the values cast back (py_reduce says why) */
        GMTensor *w = widened_copy(a);
        PyObject *r = w ? arg_reduce(name, (PyObject *)w, dims, keepdim, is_max, want_values) : NULL;
        Py_XDECREF(w);
        if (!r || !want_values) return r;
        GMTensor *values = narrowed_copy((GMTensor *)Py_NewRef(PyTuple_GET_ITEM(r, 0)), a->dtype);
        PyObject *res = values ? PyTuple_Pack(2, (PyObject *)values, PyTuple_GET_ITEM(r, 1)) : NULL;
        Py_XDECREF(values);
        Py_DECREF(r);
        return res;
    }
    plan p;
    if (plan_reduction(name, a, dims, keepdim, &p) < 0) return NULL;
    if (check_nonempty(name, a, &p) < 0) return NULL;
    GMTensor *values = NULL, *indices = NULL;
    if (want_values && !(values = gm_empty(p.out_ndim, p.out_shape, a->dtype, a->device))) return NULL;
    if (!(indices = gm_empty(p.out_ndim, p.out_shape, GM_I64, a->device))) goto fail;
    void *vp = values ? gm_tensor_data(values) : NULL;
    GMTensor *ws = NULL;
    int64_t parts;
    if (split_scratch(&p, a, &ws, &parts) < 0) goto fail;
    int rc = GM_KERNEL(name, a->device,
                       cpu_reduce_arg_forward(vp, (int64_t *)gm_tensor_data(indices), gm_tensor_data(a), a->dtype,
                                              &p.g, is_max, gm_num_threads),
                       cuda_reduce_arg_forward(vp, (int64_t *)gm_tensor_data(indices), gm_tensor_data(a), a->dtype,
                                               &p.g, is_max, data_or_null(ws), parts, ctx));
    Py_XDECREF(ws);
    if (rc < 0) goto fail;
    if (!want_values) return (PyObject *)indices;
    PyObject *res = PyTuple_Pack(2, (PyObject *)values, (PyObject *)indices);
    Py_DECREF(values);
    Py_DECREF(indices);
    return res;
fail:
    Py_XDECREF(values);
    Py_XDECREF(indices);
    return NULL;
}

static PyObject *max_min_dim(PyObject *args, PyObject *kwargs, int is_max) {
    static char *kwlist[] = {"a", "dim", "keepdim", NULL};
    const char *name = is_max ? "max" : "min";
    PyObject *ao, *dim;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, is_max ? "OO|p:max_dim" : "OO|p:min_dim", kwlist, &ao, &dim,
                                     &keepdim))
        return NULL;
    if (!PyLong_Check(dim)) {
        PyErr_Format(PyExc_TypeError, "%s: dim must be an int, got %.100s", name, Py_TYPE(dim)->tp_name);
        return NULL;
    }
    return arg_reduce(name, ao, dim, keepdim, is_max, 1);
}

static PyObject *py_max_dim(PyObject *self, PyObject *args, PyObject *kwargs) {
    return max_min_dim(args, kwargs, 1);
}

static PyObject *py_min_dim(PyObject *self, PyObject *args, PyObject *kwargs) {
    return max_min_dim(args, kwargs, 0);
}

/* dim=None: the index into the flattened tensor, as in PyTorch. */
static PyObject *argmax_argmin(PyObject *args, PyObject *kwargs, int is_max) {
    static char *kwlist[] = {"a", "dim", "keepdim", NULL};
    const char *name = is_max ? "argmax" : "argmin";
    PyObject *ao, *dim = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, is_max ? "O|Op:argmax" : "O|Op:argmin", kwlist, &ao, &dim,
                                     &keepdim))
        return NULL;
    if (dim != Py_None && !PyLong_Check(dim)) {
        PyErr_Format(PyExc_TypeError, "%s: dim must be None or an int, got %.100s", name, Py_TYPE(dim)->tp_name);
        return NULL;
    }
    return arg_reduce(name, ao, dim, keepdim, is_max, 0);
}

static PyObject *py_argmax(PyObject *self, PyObject *args, PyObject *kwargs) {
    return argmax_argmin(args, kwargs, 1);
}

static PyObject *py_argmin(PyObject *self, PyObject *args, PyObject *kwargs) {
    return argmax_argmin(args, kwargs, 0);
}

static PyObject *py_var(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"a", "dims", "correction", "keepdim", NULL};
    PyObject *ao, *dims = Py_None;
    double correction = 1.0;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Odp:var", kwlist, &ao, &dims, &correction, &keepdim))
        return NULL;
    GMTensor *a = gm_tensor_arg(ao, "var", "input");
    if (!a || gm_check_compute_dtype("var", "input", a->dtype) < 0) return NULL;
    if (!gm_dtype_is_float(a->dtype)) {
        PyErr_Format(PyExc_TypeError, "var: needs a floating point tensor, got %s; convert it first (e.g. "
                     ".float())", gm_dtype_name(a->dtype));
        return NULL;
    }
    if (!(correction >= 0.0)) {
        gm_errorf(PyExc_ValueError, "var: correction must be a non-negative number, got %g", correction);
        return NULL;
    }
    plan p;
    if (plan_reduction("var", a, dims, keepdim, &p) < 0) return NULL;
    GMTensor *out = gm_empty(p.out_ndim, p.out_shape, a->dtype, a->device);
    if (!out) return NULL;
    int rc = GM_KERNEL("var", a->device,
                       cpu_reduce_var_forward(gm_tensor_data(out), gm_tensor_data(a), a->dtype, &p.g, correction,
                                              gm_num_threads),
                       cuda_reduce_var_forward(gm_tensor_data(out), gm_tensor_data(a), a->dtype, &p.g, correction,
                                               ctx));
    if (rc < 0) { Py_DECREF(out); return NULL; }
    return (PyObject *)out;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
PyMethodDef gm_reduce_methods[] = {
    {"reduce", KW(py_reduce),
     "reduce(op, a, dims=None, keepdim=False, dtype=None): SUM=0 MEAN=1 AMAX=2 AMIN=3 PROD=4 over dims (None: "
     "all; () reduces nothing)."},
    {"max_dim", KW(py_max_dim), "max_dim(a, dim, keepdim=False) -> (values, int64 indices of the first max)."},
    {"min_dim", KW(py_min_dim), "min_dim(a, dim, keepdim=False) -> (values, int64 indices of the first min)."},
    {"argmax", KW(py_argmax), "argmax(a, dim=None, keepdim=False): dim None indexes the flattened tensor."},
    {"argmin", KW(py_argmin), "argmin(a, dim=None, keepdim=False): dim None indexes the flattened tensor."},
    {"var", KW(py_var), "var(a, dims=None, correction=1, keepdim=False): two-pass variance."},
    {NULL, NULL, 0, NULL},
};
