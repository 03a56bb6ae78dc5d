/* csrc/ops_index.c — indexing ops: index (gather along one dim), index_put_ (scatter, with accumulation for
 * index's backward), nonzero_flat and cat. Validation and shapes here, shared by every device; the CPU compute
 * is kernels/cpu/index.c; cat is a series of gm_copy_into into views of its output. On meta every op validates
 * and allocates what the CPU would (including temporaries) and computes nothing; nonzero_flat cannot run there
 * because its output size depends on the data. On cuda the kernels are kernels/cuda/index.cu, called with the
 * same arguments and after the same allocations (cat works wherever gm_copy_into does). */
#include "gm.h"
#include "cpu/index.h"
#ifdef GM_WITH_CUDA
#include "../kernels/cuda/index.h"
#endif


/* A fresh temporary like t's shape in dtype dt on t's device, tagged workspace; filled from t except on meta. */
static GMTensor *temp_copy(GMTensor *t, gm_dtype dt) {
    GMTensor *c = gm_empty(t->ndim, t->shape, dt, t->device);
    if (!c) return NULL;
    gm_block_set_category(c->storage->block, GM_CAT_WORKSPACE);
    if (t->device.type != GM_DEV_META && gm_copy_into(c, t) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return c;
}

/* The int64 index argument, contiguous (a new reference: the tensor itself or a workspace copy). Only int64 is
 * accepted: a float index is a bug in the caller, and bool masks go through nonzero_flat first. */
static GMTensor *index_arg(PyObject *o, const char *op, GMTensor *a) {
    GMTensor *idx = gm_tensor_arg(o, op, "index");
    if (!idx) return NULL;
    if (idx->dtype != GM_I64) {
        PyErr_Format(PyExc_TypeError, "%s: index must be an int64 tensor, got %s%s", op, gm_dtype_name(idx->dtype),
                     idx->dtype == GM_BOOL ? " (turn a bool mask into positions with nonzero first)" : "");
        return NULL;
    }
    if (gm_check_same_device(op, a, idx) < 0) return NULL;
    /* index_put_ into an int64 tensor that shares storage with its own index would rewrite the positions it is
     * still reading (past the bounds check): work from a copy then. */
    if (gm_is_contiguous(idx) && idx->storage != a->storage) return (GMTensor *)Py_NewRef(idx);
    return temp_copy(idx, GM_I64);
}

static int out_of_bounds(const char *op, int64_t value, int dim, int64_t size) {
    PyErr_Format(PyExc_IndexError, "%s: index %lld is out of bounds for dimension %d with size %lld", op,
                 (long long)value, dim, (long long)size);
    return -1;
}

/* Every index within [-size, size), or IndexError naming the first offender (meta has no data to check). On
 * cuda the check reads one number back from the device, which waits for the queued work: the price of raising
 * IndexError here, where the CPU raises it, instead of failing later inside a kernel. */
static int check_bounds(const char *op, GMTensor *idx, int dim, int64_t size) {
    const int64_t n = gm_numel(idx);
    if (idx->device.type == GM_DEV_CUDA) {
#ifdef GM_WITH_CUDA
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(idx->device);
        if (!ctx) return -1;
        int64_t pos, value;
        int st = cuda_index_check_bounds((const int64_t *)gm_tensor_data(idx), n, size, &pos, &value, ctx);
        if (gm_cuda_kernel_status(op, st, ctx) < 0) return -1;
        if (pos >= 0) return out_of_bounds(op, value, dim, size);
#endif
        return 0;
    }
    if (idx->device.type != GM_DEV_CPU) return 0;
    const int64_t *p = (const int64_t *)gm_tensor_data(idx);
    for (int64_t j = 0; j < n; j++)
        if (p[j] < -size || p[j] >= size) return out_of_bounds(op, p[j], dim, size);
    return 0;
}

/* a's geometry for indexing: a 0-d tensor is indexed as shape (1,), as PyTorch's index_select does. */
static void index_geometry(GMTensor *a, int *ndim, int64_t *shape, int64_t *strides) {
    if (a->ndim == 0) {
        *ndim = 1;
        shape[0] = 1;
        strides[0] = 0;
        return;
    }
    *ndim = a->ndim;
    memcpy(shape, a->shape, sizeof(int64_t) * a->ndim);
    memcpy(strides, a->strides, sizeof(int64_t) * a->ndim);
}

/* shape[:dim] + idx.shape + shape[dim+1:] into out; -1 + ValueError if it has too many dims. */
static int indexed_shape(const char *op, int ndim, const int64_t *shape, int dim, GMTensor *idx, int *ondim,
                         int64_t *oshape) {
    int n = ndim - 1 + idx->ndim;
    if (n > GM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: the result would have %d dimensions (tensor %d-d, index %d-d); at most "
                     "%d are supported", op, n, ndim, idx->ndim, GM_MAX_DIMS);
        return -1;
    }
    int k = 0;
    for (int d = 0; d < dim; d++) oshape[k++] = shape[d];
    for (int d = 0; d < idx->ndim; d++) oshape[k++] = idx->shape[d];
    for (int d = dim + 1; d < ndim; d++) oshape[k++] = shape[d];
    *ondim = n;
    return 0;
}

/* ---- index -------------------------------------------------------------------------------------------- */

static PyObject *py_index(PyObject *self, PyObject *args) {
    PyObject *ao, *io;
    long long dim_arg;
    if (!PyArg_ParseTuple(args, "OLO:index", &ao, &dim_arg, &io)) return NULL;
    GMTensor *a = gm_tensor_arg(ao, "index", "a");
    if (!a) return NULL;
    int ndim, ondim;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS], oshape[GM_MAX_DIMS];
    index_geometry(a, &ndim, shape, strides);
    int dim = gm_wrap_dim(dim_arg, a->ndim, "index: dim");
    if (dim < 0) return NULL;
    GMTensor *idx = index_arg(io, "index", a), *out = NULL;
    if (!idx) return NULL;
    if (check_bounds("index", idx, dim, shape[dim]) < 0 ||
        indexed_shape("index", ndim, shape, dim, idx, &ondim, oshape) < 0)
        goto fail;
    out = gm_empty(ondim, oshape, a->dtype, a->device);
    if (!out) goto fail;
    if (a->device.type != GM_DEV_META) {
        int64_t bstrides[GM_MAX_DIMS];
        for (int d = 0; d < ndim; d++) bstrides[d] = strides[d] * (int64_t)gm_dtype_size(a->dtype);
        if (GM_KERNEL("index", a->device,
                      index_gather_forward(gm_tensor_data(out), gm_tensor_data(a),
                                           (const int64_t *)gm_tensor_data(idx), gm_numel(idx), ndim, shape, bstrides,
                                           dim, gm_dtype_size(a->dtype), gm_num_threads),
                      cuda_index_gather_forward(gm_tensor_data(out), gm_tensor_data(a),
                                                (const int64_t *)gm_tensor_data(idx), gm_numel(idx), ndim, shape,
                                                bstrides, dim, gm_dtype_size(a->dtype), ctx)) < 0)
            goto fail;
    }
    Py_DECREF(idx);
    return (PyObject *)out;
fail:
    Py_XDECREF(out);
    Py_DECREF(idx);
    return NULL;
}

/* ---- index_put_ ---------------------------------------------------------------------------------------- */

static int kind_rank(gm_dtype dt) { return dt == GM_BOOL ? 0 : dt == GM_I64 ? 1 : 2; }

static GMTensor *scalar_tensor(PyObject *v, gm_dtype dt, gm_device dev, const char *op);

/* On cuda: the number written on the cpu, then copied to a workspace 0-d tensor on the device (which is what the
 * cpu allocates on its own device). */
static GMTensor *cuda_scalar_tensor(PyObject *v, gm_dtype dt, gm_device dev, const char *op) {
    gm_device cpu = {GM_DEV_CPU, 0};
    GMTensor *h = scalar_tensor(v, dt, cpu, op), *t = NULL;
    if (!h) return NULL;
    t = gm_empty(0, NULL, dt, dev);
    if (t) {
        gm_block_set_category(t->storage->block, GM_CAT_WORKSPACE);
        if (gm_copy_across(t, h) < 0) Py_CLEAR(t);
    }
    Py_DECREF(h);
    return t;
}

/* A 0-d tensor of dtype dt on dev holding the Python number v (written on cpu and cuda, not on meta), converted as
 * PyTorch's fills convert it: a float into an integer tensor truncates toward zero (scatter_(..., 1.0) on int32),
 * an integer into a narrower one keeps the low bits. */
static GMTensor *scalar_tensor(PyObject *v, gm_dtype dt, gm_device dev, const char *op) {
    int is_float = PyFloat_Check(v), is_int = PyLong_Check(v); /* bool is an int */
    if (!is_float && !is_int) {
        PyErr_Format(PyExc_TypeError, "%s: values must be a Tensor or a number, got %.100s", op,
                     Py_TYPE(v)->tp_name);
        return NULL;
    }
    if (dev.type == GM_DEV_CUDA) return cuda_scalar_tensor(v, dt, dev, op);
    GMTensor *t = gm_empty(0, NULL, dt, dev);
    if (!t || dev.type != GM_DEV_CPU) return t;
    gm_block_set_category(t->storage->block, GM_CAT_WORKSPACE);
    char *p = gm_tensor_data(t);
    if (dt == GM_BOOL) {
        int x = PyObject_IsTrue(v);
        if (x < 0) { Py_DECREF(t); return NULL; }
        *(uint8_t *)p = (uint8_t)x;
    } else if (!gm_dtype_is_float(dt)) {
        int64_t y;
        if (is_float) {
            double x = PyFloat_AsDouble(v);
            y = x != x ? 0 : x >= 9223372036854775807.0 ? INT64_MAX : x <= -9223372036854775808.0 ? INT64_MIN
                                                                                                 : (int64_t)x;
        } else {
            long long x = PyLong_AsLongLong(v);
            if (x == -1 && PyErr_Occurred()) { Py_DECREF(t); return NULL; }
            y = x;
        }
        switch (dt) {
        case GM_U8: *(uint8_t *)p = (uint8_t)y; break;
        case GM_I8: *(int8_t *)p = (int8_t)y; break;
        case GM_I16: { int16_t z = (int16_t)y; memcpy(p, &z, 2); break; }
        case GM_I32: { int32_t z = (int32_t)y; memcpy(p, &z, 4); break; }
        default: memcpy(p, &y, 8); break;
        }
    } else {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) { Py_DECREF(t); return NULL; }
        switch (dt) {
        case GM_F32: { float f = (float)x; memcpy(p, &f, 4); break; }
        case GM_F64: memcpy(p, &x, 8); break;
        case GM_F16: { uint16_t h = gm_float_to_half((float)x); memcpy(p, &h, 2); break; }
        default: { uint16_t h = gm_float_to_bf16((float)x); memcpy(p, &h, 2); break; }
        }
    }
    return t;
}

/* The values argument in a's dtype, not aliasing a (a new reference). */
static GMTensor *values_arg(PyObject *vo, GMTensor *a, const char *op) {
    if (!gm_is_tensor(vo)) return scalar_tensor(vo, a->dtype, a->device, op);
    GMTensor *v = (GMTensor *)vo;
    if (gm_check_same_device(op, a, v) < 0) return NULL;
    if (kind_rank(v->dtype) > kind_rank(a->dtype)) {
        PyErr_Format(PyExc_TypeError, "%s: cannot write %s values into a %s tensor", op, gm_dtype_name(v->dtype),
                     gm_dtype_name(a->dtype));
        return NULL;
    }
    /* A cast needs a copy; so does aliasing, or the kernel would read values it has already overwritten. */
    if (v->dtype != a->dtype || v->storage == a->storage) return temp_copy(v, a->dtype);
    return (GMTensor *)Py_NewRef(v);
}

static PyObject *py_index_put_(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"a", "dim", "index", "values", "accumulate", NULL};
    PyObject *ao, *io, *vo;
    long long dim_arg;
    int accumulate = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OLOO|p:index_put_", kwlist, &ao, &dim_arg, &io, &vo,
                                     &accumulate))
        return NULL;
    GMTensor *a = gm_tensor_arg(ao, "index_put_", "a");
    if (!a || (accumulate && gm_check_compute_dtype("index_put_(accumulate=True)", "a", a->dtype) < 0)) return NULL;
    int ndim, vndim;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS], vshape[GM_MAX_DIMS], vstrides[GM_MAX_DIMS];
    index_geometry(a, &ndim, shape, strides);
    int dim = gm_wrap_dim(dim_arg, a->ndim, "index_put_: dim");
    if (dim < 0) return NULL;
    GMTensor *idx = index_arg(io, "index_put_", a), *v = NULL;
    if (!idx) return NULL;
    if (check_bounds("index_put_", idx, dim, shape[dim]) < 0 ||
        indexed_shape("index_put_", ndim, shape, dim, idx, &vndim, vshape) < 0)
        goto fail;
    v = values_arg(vo, a, "index_put_");
    if (!v) goto fail;
    /* broadcast values to the indexed shape (NumPy rules, right-aligned): stride 0 where v has size 1 or no dim */
    if (v->ndim > vndim) goto bad_broadcast;
    for (int d = 0; d < vndim; d++) {
        int vd = d - (vndim - v->ndim);
        if (vd < 0 || (v->shape[vd] == 1 && vshape[d] != 1)) vstrides[d] = 0;
        else if (v->shape[vd] == vshape[d]) vstrides[d] = v->strides[vd];
        else goto bad_broadcast;
    }
    if (a->device.type != GM_DEV_META) {
        int64_t item = (int64_t)gm_dtype_size(a->dtype), dstrides[GM_MAX_DIMS];
        for (int d = 0; d < ndim; d++) dstrides[d] = strides[d] * item;
        for (int d = 0; d < vndim; d++) vstrides[d] *= item;
        if (GM_KERNEL("index_put_", a->device,
                      index_put_forward(gm_tensor_data(a), gm_tensor_data(v), (const int64_t *)gm_tensor_data(idx),
                                        idx->ndim, idx->shape, ndim, shape, dstrides, vstrides, dim, a->dtype,
                                        accumulate, gm_num_threads),
                      cuda_index_put_forward(gm_tensor_data(a), gm_tensor_data(v),
                                             (const int64_t *)gm_tensor_data(idx), idx->ndim, idx->shape, ndim, shape,
                                             dstrides, vstrides, dim, a->dtype, accumulate, ctx)) < 0)
            goto fail;
    }
    gm_bump_version(a);
    Py_DECREF(v);
    Py_DECREF(idx);
    return Py_NewRef(ao);
bad_broadcast: {
        char b1[GM_SHAPE_BUF], b2[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "index_put_: values of shape %s cannot be broadcast to the indexed shape %s",
                     gm_shape_str(v->ndim, v->shape, b1), gm_shape_str(vndim, vshape, b2));
    }
fail:
    Py_XDECREF(v);
    Py_DECREF(idx);
    return NULL;
}

/* ---- nonzero_flat --------------------------------------------------------------------------------------- */

static PyObject *py_nonzero_flat(PyObject *self, PyObject *mo) {
    GMTensor *m = gm_tensor_arg(mo, "nonzero_flat", "mask");
    if (!m) return NULL;
    if (m->dtype != GM_BOOL) {
        PyErr_Format(PyExc_TypeError, "nonzero_flat: mask must be a bool tensor, got %s", gm_dtype_name(m->dtype));
        return NULL;
    }
    if (m->device.type == GM_DEV_META) {
        PyErr_SetString(PyExc_RuntimeError,
                        "nonzero_flat: the size of the result depends on the mask's values, and a meta tensor has "
                        "no values; a model estimated on meta must not branch on data (use a fixed-size op such as "
                        "where, or run this part on cpu)");
        return NULL;
    }
    int64_t bstrides[GM_MAX_DIMS], count = 0;
    gm_byte_strides(m, bstrides);
    const uint8_t *data = (const uint8_t *)gm_tensor_data(m);
    GMTensor *out = NULL;
    if (m->device.type == GM_DEV_CUDA) {
#ifdef GM_WITH_CUDA
        /* the count is read back to the host (a wait): the output's size depends on it */
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(m->device);
        if (!ctx) return NULL;
        int st = cuda_index_nonzero_count(&count, data, m->ndim, m->shape, bstrides, ctx);
        if (gm_cuda_kernel_status("nonzero_flat", st, ctx) < 0) return NULL;
        if (!(out = gm_empty(1, &count, GM_I64, m->device))) return NULL;
        st = cuda_index_nonzero_fill((int64_t *)gm_tensor_data(out), count, data, m->ndim, m->shape, bstrides, ctx);
        if (gm_cuda_kernel_status("nonzero_flat", st, ctx) < 0) goto fail;
#endif
        return (PyObject *)out;
    }
    int st = index_nonzero_count(&count, data, m->ndim, m->shape, bstrides, gm_num_threads);
    if (gm_kernel_status("nonzero_flat", st) < 0) return NULL;
    if (!(out = gm_empty(1, &count, GM_I64, m->device))) return NULL;
    st = index_nonzero_fill((int64_t *)gm_tensor_data(out), count, data, m->ndim, m->shape, bstrides,
                            gm_num_threads);
    if (gm_kernel_status("nonzero_flat", st) < 0) goto fail;
    return (PyObject *)out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* ---- cat ------------------------------------------------------------------------------------------------ */

/* PyTorch's promotion among our dtypes: kinds bool < int64 < float; within floats float64 > float32 >
 * {float16, bfloat16}, and float16 with bfloat16 meets at float32 (neither holds the other). */
static gm_dtype promote(gm_dtype a, gm_dtype b) {
    if (a == b) return a;
    int fa = gm_dtype_is_float(a), fb = gm_dtype_is_float(b);
    if (fa && fb) {
        if (a == GM_F64 || b == GM_F64) return GM_F64;
        return GM_F32;
    }
    if (fa) return a;
    if (fb) return b;
    /* bool with an integer keeps the integer; two integers give PyTorch's promoteTypes, as ew_promote
     * (ops_elementwise_args.h): uint8 with int8 is int16, with a signed one that one; else the wider */
    if (a == GM_BOOL) return b;
    if (b == GM_BOOL) return a;
    if (a == GM_U8 || b == GM_U8) {
        gm_dtype other = a == GM_U8 ? b : a;
        return other == GM_I8 ? GM_I16 : other;
    }
    return gm_dtype_size(a) >= gm_dtype_size(b) ? a : b;
}

static PyObject *py_cat(PyObject *self, PyObject *args) {
    PyObject *seqo;
    long long dim_arg = 0;
    if (!PyArg_ParseTuple(args, "O|L:cat", &seqo, &dim_arg)) return NULL;
    if (gm_is_tensor(seqo)) { /* iterable, but cat(t) is a mistake for cat([t]) */
        PyErr_SetString(PyExc_TypeError, "cat: expected a sequence of Tensors, got a single Tensor");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(seqo, "cat: tensors must be a sequence of Tensors");
    if (!seq) return NULL;
    GMTensor *out = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    char b1[GM_SHAPE_BUF], b2[GM_SHAPE_BUF], d1[16], d2[16];
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "cat: expected a non-empty sequence of tensors");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!gm_is_tensor(items[i])) {
            PyErr_Format(PyExc_TypeError, "cat: expected a sequence of Tensors, got %.100s at position %zd",
                         Py_TYPE(items[i])->tp_name, i);
            goto fail;
        }
    GMTensor *t0 = (GMTensor *)items[0];
    if (t0->ndim == 0) {
        PyErr_SetString(PyExc_ValueError, "cat: the tensor at position 0 is 0-d; a 0-d tensor cannot be concatenated "
                        "(unsqueeze it first)");
        goto fail;
    }
    int dim = gm_wrap_dim(dim_arg, t0->ndim, "cat: dim");
    if (dim < 0) goto fail;
    int64_t oshape[GM_MAX_DIMS];
    memcpy(oshape, t0->shape, sizeof(int64_t) * t0->ndim);
    oshape[dim] = 0;
    gm_dtype dt = t0->dtype;
    for (Py_ssize_t i = 0; i < n; i++) {
        GMTensor *t = (GMTensor *)items[i];
        int ok = t->ndim == t0->ndim;
        for (int d = 0; ok && d < t0->ndim; d++) ok = d == dim || t->shape[d] == t0->shape[d];
        if (!ok) {
            PyErr_Format(PyExc_ValueError, "cat: the tensor at position %zd has shape %s but the one at position 0 "
                         "has shape %s; sizes must match except in dimension %d", i,
                         gm_shape_str(t->ndim, t->shape, b1), gm_shape_str(t0->ndim, t0->shape, b2), dim);
            goto fail;
        }
        if (!gm_device_eq(t->device, t0->device)) {
            PyErr_Format(PyExc_RuntimeError, "cat: expected all tensors on the same device, but the tensor at "
                         "position %zd is on %s and the one at position 0 on %s", i, gm_device_str(t->device, d1),
                         gm_device_str(t0->device, d2));
            goto fail;
        }
        if (__builtin_add_overflow(oshape[dim], t->shape[dim], &oshape[dim])) {
            PyErr_SetString(PyExc_ValueError, "cat: the concatenated size overflows 64 bits");
            goto fail;
        }
        dt = promote(dt, t->dtype);
    }
    out = gm_empty(t0->ndim, oshape, dt, t0->device);
    if (!out || t0->device.type == GM_DEV_META) goto done;
    int64_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        GMTensor *t = (GMTensor *)items[i];
        if (t->shape[dim] > 0 && gm_numel(t) > 0) {
            GMTensor *view = gm_view(out, out->ndim, t->shape, out->strides, start * out->strides[dim]);
            if (!view) goto fail;
            int rc = gm_copy_into(view, t);
            Py_DECREF(view);
            if (rc < 0) goto fail;
        }
        start += t->shape[dim];
    }
done:
    Py_DECREF(seq);
    return (PyObject *)out;
fail:
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

PyMethodDef gm_index_methods[] = {
    {"index", py_index, METH_VARARGS,
     "index(a, dim, index): a.shape[:dim] + index.shape + a.shape[dim+1:], gathered along dim (int64 index, "
     "negative values wrap)."},
    {"index_put_", (PyCFunction)(void (*)(void))py_index_put_, METH_VARARGS | METH_KEYWORDS,
     "index_put_(a, dim, index, values, accumulate=False): write (or add) values, broadcast to the indexed shape, "
     "at index along dim; returns a."},
    {"nonzero_flat", py_nonzero_flat, METH_O, "nonzero_flat(mask): int64 row-major positions of True (cpu and cuda; not meta)."},
    {"cat", py_cat, METH_VARARGS, "cat(tensors, dim=0): concatenate along dim, promoting dtypes."},
    {NULL, NULL, 0, NULL},
};
