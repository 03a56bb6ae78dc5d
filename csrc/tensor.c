/* csrc/tensor.c — the Tensor object (storage + geometry + dtype + device), storage lifetime, views and the
 * creation functions that need no kernel. Arithmetic lives in ops_*.c; NumPy interop in numpy.c.
 * Autograd metadata (grad, grad_fn, hooks) is stored here but only Python reads it (DESIGN.md). */
#include "gm.h"
#include <math.h>
#include <omp.h>
#include <structmember.h>
#include <cblas.h>

PyTypeObject *GMTensor_Base;
PyTypeObject *GMTensor_Class;
PyObject *GM_OutOfMemoryError;
int gm_num_threads = 1;

static const char *const dtype_names[GM_NDTYPES] = {"float32", "float64", "float16", "bfloat16", "int64", "bool"};

const char *gm_dtype_name(gm_dtype dt) { return (unsigned)dt < GM_NDTYPES ? dtype_names[dt] : "?"; }

/* ---- parsing helpers ------------------------------------------------------------------------------ */
const char *gm_device_str(gm_device dev, char *buf) {
    if (dev.type == GM_DEV_CPU) strcpy(buf, "cpu");
    else if (dev.type == GM_DEV_META) strcpy(buf, "meta");
    else snprintf(buf, 16, "cuda:%d", dev.index);
    return buf;
}

int gm_parse_device(PyObject *obj, gm_device *dev, const char *argname) {
    PyObject *str = PyObject_Str(obj);
    if (!str) return -1;
    const char *s = PyUnicode_AsUTF8(str);
    int ok = 1;
    if (!s) { Py_DECREF(str); return -1; }
    if (strcmp(s, "cpu") == 0) *dev = (gm_device){GM_DEV_CPU, 0};
    else if (strcmp(s, "meta") == 0) *dev = (gm_device){GM_DEV_META, 0};
    else if (strcmp(s, "cuda") == 0) *dev = (gm_device){GM_DEV_CUDA, 0};
    else if (strncmp(s, "cuda:", 5) == 0) {
        char *end;
        long idx = strtol(s + 5, &end, 10);
        ok = *end == '\0' && end != s + 5 && idx >= 0 && idx < GM_MAX_CUDA_DEVICES;
        *dev = (gm_device){GM_DEV_CUDA, (int)idx};
    } else ok = 0;
    if (!ok)
        PyErr_Format(PyExc_ValueError, "%s: unknown device %R; expected 'cpu', 'meta', 'cuda' or 'cuda:N'",
                     argname, str);
    Py_DECREF(str);
    return ok ? 0 : -1;
}

int gm_parse_dtype(PyObject *obj, gm_dtype *dt, const char *argname) {
    if (PyLong_Check(obj)) {
        long v = PyLong_AsLong(obj);
        if (v >= 0 && v < GM_NDTYPES) { *dt = (gm_dtype)v; return 0; }
    } else if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        for (int i = 0; s && i < GM_NDTYPES; i++)
            if (strcmp(s, dtype_names[i]) == 0) { *dt = (gm_dtype)i; return 0; }
    }
    PyErr_Format(PyExc_TypeError, "%s: unknown dtype %R; expected one of float32, float64, float16, bfloat16, "
                 "int64, bool", argname, obj);
    return -1;
}

int gm_parse_shape(PyObject *obj, int *ndim, int64_t *shape, const char *argname) {
    if (PyLong_Check(obj)) {
        long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "%s: sizes must be non-negative, got %lld", argname, v);
            return -1;
        }
        *ndim = 1;
        shape[0] = v;
        return 0;
    }
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s: expected a shape (an int or a sequence of ints), got %.100s", argname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > GM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d dimensions are supported, got %zd", argname, GM_MAX_DIMS, n);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(item) && !PyIndex_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s: sizes must be ints, got %.100s at position %zd", argname,
                         Py_TYPE(item)->tp_name, i);
            Py_DECREF(seq);
            return -1;
        }
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
        shape[i] = v;
    }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
}

const char *gm_shape_str(int ndim, const int64_t *shape, char *buf) {
    size_t pos = 0;
    buf[pos++] = '(';
    for (int i = 0; i < ndim; i++)
        pos += snprintf(buf + pos, GM_SHAPE_BUF - pos, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (ndim == 1) pos += snprintf(buf + pos, GM_SHAPE_BUF - pos, ",");
    snprintf(buf + pos, GM_SHAPE_BUF - pos, ")");
    return buf;
}

int gm_wrap_dim(int64_t dim, int ndim, const char *argname) {
    int n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dim 0 and -1, like PyTorch */
    if (dim < -n || dim >= n) {
        PyErr_Format(PyExc_IndexError, "%s: dimension %lld is out of range for a tensor with %d dimension%s "
                     "(expected a value in [%d, %d])", argname, (long long)dim, ndim, ndim == 1 ? "" : "s", -n, n - 1);
        return -1;
    }
    return (int)(dim < 0 ? dim + n : dim);
}

int gm_check_same_device(const char *op, GMTensor *a, GMTensor *b) {
    if (gm_device_eq(a->device, b->device)) return 0;
    char da[16], db[16];
    PyErr_Format(PyExc_RuntimeError, "%s: expected all tensors on the same device, got %s and %s", op,
                 gm_device_str(a->device, da), gm_device_str(b->device, db));
    return -1;
}

int64_t gm_checked_numel(int ndim, const int64_t *shape, const char *argname) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: sizes must be non-negative, got %lld in dimension %d", argname,
                         (long long)shape[i], i);
            return -1;
        }
        if (__builtin_mul_overflow(n, shape[i], &n)) {
            char buf[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "%s: the number of elements of shape %s overflows 64 bits", argname,
                         gm_shape_str(ndim, shape, buf));
            return -1;
        }
    }
    return n;
}

/* ---- geometry --------------------------------------------------------------------------------------- */
int64_t gm_numel(const GMTensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

void gm_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

int gm_is_contiguous(const GMTensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0) return 1;
        if (t->shape[i] != 1 && t->strides[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

void gm_byte_strides(const GMTensor *t, int64_t *out) {
    int64_t item = (int64_t)gm_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) out[i] = t->strides[i] * item;
}

/* ---- storage ---------------------------------------------------------------------------------------- */
gm_storage *gm_storage_wrap(gm_block *b, gm_device dev, size_t nbytes) {
    gm_storage *s = PyMem_Calloc(1, sizeof *s);
    if (!s) { gm_free(b); PyErr_NoMemory(); return NULL; }
    s->block = b;
    s->refcount = 1;
    s->data = gm_block_data(b);
    s->nbytes = nbytes;
    s->device = dev;
    return s;
}

gm_storage *gm_storage_new(gm_device dev, size_t nbytes) {
    gm_block *b = gm_alloc(dev, nbytes);
    return b ? gm_storage_wrap(b, dev, nbytes) : NULL;
}

void gm_storage_decref(gm_storage *s) {
    if (!s || --s->refcount > 0) return;
    gm_free(s->block);
    PyMem_Free(s);
}

/* ---- object lifetime ------------------------------------------------------------------------------------ */
static GMTensor *tensor_alloc(void) {
    GMTensor *t = (GMTensor *)GMTensor_Class->tp_alloc(GMTensor_Class, 0);
    return t;
}

/* How gm_empty* get their bytes. */
enum { ALLOC_RAISE, ALLOC_TRY, ALLOC_PINNED };

static GMTensor *empty_with(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev, int how) {
    int64_t numel = gm_checked_numel(ndim, shape, "shape");
    if (numel < 0) return NULL;
    int64_t nbytes;
    if (__builtin_mul_overflow(numel, (int64_t)gm_dtype_size(dt), &nbytes)) {
        PyErr_Format(PyExc_ValueError, "shape: %lld elements of %s overflow the addressable size",
                     (long long)numel, gm_dtype_name(dt));
        return NULL;
    }
    gm_block *b = how == ALLOC_PINNED ? gm_alloc_pinned((size_t)nbytes)
                  : how == ALLOC_TRY  ? gm_try_alloc(dev, (size_t)nbytes)
                                      : gm_alloc(dev, (size_t)nbytes);
    gm_storage *s = b ? gm_storage_wrap(b, dev, (size_t)nbytes) : NULL;
    if (!s) return NULL;
    GMTensor *t = tensor_alloc();
    if (!t) { gm_storage_decref(s); return NULL; }
    t->storage = s;
    t->ndim = ndim;
    t->dtype = dt;
    t->device = dev;
    t->offset = 0;
    memcpy(t->shape, shape, sizeof(int64_t) * ndim);
    gm_contiguous_strides(ndim, shape, t->strides);
    t->output_nr = 0;
    return t;
}

GMTensor *gm_empty(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev) {
    return empty_with(ndim, shape, dt, dev, ALLOC_RAISE);
}

GMTensor *gm_try_empty(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev) {
    return empty_with(ndim, shape, dt, dev, ALLOC_TRY);
}

GMTensor *gm_empty_pinned(int ndim, const int64_t *shape, gm_dtype dt) {
    return empty_with(ndim, shape, dt, (gm_device){GM_DEV_CPU, 0}, ALLOC_PINNED);
}

GMTensor *gm_view(GMTensor *base, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset) {
    GMTensor *t = tensor_alloc();
    if (!t) return NULL;
    t->storage = base->storage;
    t->storage->refcount++;
    t->ndim = ndim;
    t->dtype = base->dtype;
    t->device = base->device;
    t->offset = offset;
    memcpy(t->shape, shape, sizeof(int64_t) * ndim);
    memcpy(t->strides, strides, sizeof(int64_t) * ndim);
    return t;
}

static int tensor_traverse(GMTensor *self, visitproc visit, void *arg) {
    Py_VISIT(self->grad);
    Py_VISIT(self->grad_fn);
    Py_VISIT(self->hooks);
    Py_VISIT(self->name);
    Py_VISIT(self->grad_acc);
    return 0;
}

static int tensor_clear(GMTensor *self) {
    Py_CLEAR(self->grad);
    Py_CLEAR(self->grad_fn);
    Py_CLEAR(self->hooks);
    Py_CLEAR(self->name);
    Py_CLEAR(self->grad_acc);
    return 0;
}

static void tensor_dealloc(GMTensor *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist) PyObject_ClearWeakRefs((PyObject *)self);
    tensor_clear(self);
    gm_storage_decref(self->storage);
    self->storage = NULL;
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free((PyObject *)self);
}

static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyErr_SetString(PyExc_TypeError, "create tensors with gpumemnet.tensor(...), zeros, empty, ... "
                    "rather than calling the class");
    return NULL;
}

/* ---- attributes ----------------------------------------------------------------------------------------- */
static PyObject *get_shape(GMTensor *self, void *c) {
    PyObject *t = PyTuple_New(self->ndim);
    for (int i = 0; t && i < self->ndim; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->shape[i]));
    return t;
}

static PyObject *get_strides(GMTensor *self, void *c) {
    PyObject *t = PyTuple_New(self->ndim);
    for (int i = 0; t && i < self->ndim; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->strides[i]));
    return t;
}

static PyObject *get_dtype(GMTensor *self, void *c) { return PyLong_FromLong(self->dtype); }
static PyObject *get_device(GMTensor *self, void *c) {
    char buf[16];
    return PyUnicode_FromString(gm_device_str(self->device, buf));
}
static PyObject *get_ndim(GMTensor *self, void *c) { return PyLong_FromLong(self->ndim); }
static PyObject *get_offset(GMTensor *self, void *c) { return PyLong_FromLongLong(self->offset); }
static PyObject *get_version(GMTensor *self, void *c) { return PyLong_FromLongLong(self->storage->version); }
static PyObject *get_storage_id(GMTensor *self, void *c) { return PyLong_FromVoidPtr(self->storage); }
static PyObject *get_storage_nbytes(GMTensor *self, void *c) { return PyLong_FromSize_t(self->storage->nbytes); }
static PyObject *get_data_ptr(GMTensor *self, void *c) { return PyLong_FromVoidPtr(gm_tensor_data(self)); }
static PyObject *get_is_meta(GMTensor *self, void *c) { return PyBool_FromLong(self->device.type == GM_DEV_META); }
static PyObject *get_is_pinned(GMTensor *self, void *c) {
    return PyBool_FromLong(gm_block_is_pinned(self->storage->block));
}

static PyObject *get_category(GMTensor *self, void *c) {
    return PyUnicode_FromString(gm_category_names[gm_block_category(self->storage->block)]);
}

static int set_category(GMTensor *self, PyObject *value, void *c) {
    const char *name = value && PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : NULL;
    for (int i = 0; name && i < GM_NCAT; i++) {
        if (strcmp(name, gm_category_names[i]) == 0) {
            gm_block_set_category(self->storage->block, i);
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "_category: expected one of parameter, gradient, optimizer, activation, "
                 "workspace, input, other; got %R", value);
    return -1;
}

static PyObject *get_name(GMTensor *self, void *c) { return Py_NewRef(self->name ? self->name : Py_None); }

/* The name also labels the storage's block, so an out-of-memory report can list "fc1.weight 2.17 GiB". */
static int set_name(GMTensor *self, PyObject *value, void *c) {
    if (value && value != Py_None) {
        if (!PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError, "_name: expected a str or None, got %.100s", Py_TYPE(value)->tp_name);
            return -1;
        }
        const char *label = gm_intern(value);
        if (!label) return -1;
        gm_block_set_label(self->storage->block, label);
    }
    PyObject *old = self->name;
    self->name = (value && value != Py_None) ? Py_NewRef(value) : NULL;
    Py_XDECREF(old);
    return 0;
}

static PyObject *get_requires_grad(GMTensor *self, void *c) { return PyBool_FromLong(self->requires_grad); }

static int set_requires_grad(GMTensor *self, PyObject *value, void *c) {
    int v = value ? PyObject_IsTrue(value) : 0;
    if (v < 0) return -1;
    if (v && !gm_dtype_is_float(self->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "requires_grad: only tensors of floating point dtype can require "
                     "gradients, this one is %s", gm_dtype_name(self->dtype));
        return -1;
    }
    self->requires_grad = v;
    return 0;
}

static PyObject *get_grad(GMTensor *self, void *c) { return Py_NewRef(self->grad ? self->grad : Py_None); }

static int set_grad(GMTensor *self, PyObject *value, void *c) {
    if (value && value != Py_None) {
        if (!gm_is_tensor(value)) {
            PyErr_Format(PyExc_TypeError, "grad: expected a Tensor or None, got %.100s", Py_TYPE(value)->tp_name);
            return -1;
        }
        GMTensor *g = (GMTensor *)value;
        int same = g->ndim == self->ndim && g->dtype == self->dtype && gm_device_eq(g->device, self->device);
        for (int i = 0; same && i < self->ndim; i++) same = g->shape[i] == self->shape[i];
        if (!same) {
            char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "grad: assigned gradient of shape %s and dtype %s does not match the "
                         "tensor's shape %s and dtype %s", gm_shape_str(g->ndim, g->shape, a),
                         gm_dtype_name(g->dtype), gm_shape_str(self->ndim, self->shape, b),
                         gm_dtype_name(self->dtype));
            return -1;
        }
    }
    PyObject *old = self->grad;
    self->grad = (value && value != Py_None) ? Py_NewRef(value) : NULL;
    Py_XDECREF(old);
    return 0;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)get_shape, NULL, "The size of each dimension.", NULL},
    {"_strides", (getter)get_strides, NULL, "Strides in elements.", NULL},
    {"_dtype", (getter)get_dtype, NULL, "dtype code.", NULL},
    {"_device", (getter)get_device, NULL, "Device string.", NULL},
    {"ndim", (getter)get_ndim, NULL, "Number of dimensions.", NULL},
    {"_offset", (getter)get_offset, NULL, "Offset into the storage, in elements.", NULL},
    {"_version", (getter)get_version, NULL, "In-place write counter of the storage.", NULL},
    {"_storage_id", (getter)get_storage_id, NULL, "Identity of the storage (equal for views).", NULL},
    {"_storage_nbytes", (getter)get_storage_nbytes, NULL, "Bytes of the storage.", NULL},
    {"_data_ptr", (getter)get_data_ptr, NULL, "Address of the first element.", NULL},
    {"is_meta", (getter)get_is_meta, NULL, "True for meta (shape-only) tensors.", NULL},
    {"_is_pinned", (getter)get_is_pinned, NULL, "True when the storage is pinned host memory (pin_memory).", NULL},
    {"_category", (getter)get_category, (setter)set_category, "Memory category of the storage.", NULL},
    {"requires_grad", (getter)get_requires_grad, (setter)set_requires_grad, "Whether autograd records ops.", NULL},
    {"grad", (getter)get_grad, (setter)set_grad, "Accumulated gradient, or None.", NULL},
    {"_name", (getter)get_name, (setter)set_name, "Name used in memory reports (labels the storage).", NULL},
    {NULL},
};

static PyMemberDef tensor_members[] = {
    {"grad_fn", T_OBJECT, offsetof(GMTensor, grad_fn), 0, "The autograd node that made this tensor."},
    {"_hooks", T_OBJECT, offsetof(GMTensor, hooks), 0, "Gradient hooks."},
    {"_grad_acc", T_OBJECT, offsetof(GMTensor, grad_acc), 0, "A leaf's gradient accumulator node."},
    {"_retains_grad", T_BOOL, offsetof(GMTensor, retains_grad), 0, "Whether a non-leaf keeps .grad."},
    {"_is_param", T_BOOL, offsetof(GMTensor, is_param), 0, "Whether this tensor is an nn.Parameter."},
    {"_is_view", T_BOOL, offsetof(GMTensor, is_view), 0, "Made by a recorded view of a tensor in a graph."},
    {"_output_nr", T_INT, offsetof(GMTensor, output_nr), 0, "Which output of grad_fn this is."},
    {NULL},
};

/* ---- views -------------------------------------------------------------------------------------------- */
static PyObject *shape_error(const char *op, GMTensor *self, int ndim, const int64_t *shape, const char *why) {
    char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: cannot view a tensor of shape %s as %s: %s", op,
                 gm_shape_str(self->ndim, self->shape, a), gm_shape_str(ndim, shape, b), why);
    return NULL;
}

/* Resolve one -1 in shape against numel; -1 + ValueError otherwise. */
static int infer_size(const char *op, GMTensor *self, int ndim, int64_t *shape) {
    int64_t numel = gm_numel(self), known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) { PyErr_Format(PyExc_ValueError, "%s: only one dimension can be -1", op); return -1; }
            infer = i;
        } else if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: invalid size %lld in dimension %d", op, (long long)shape[i], i);
            return -1;
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            shape_error(op, self, ndim, shape, "the size overflows");
            return -1;
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            shape_error(op, self, ndim, shape, "the -1 dimension cannot be inferred");
            return -1;
        }
        shape[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        char why[96];
        snprintf(why, sizeof why, "%lld elements cannot hold %lld", (long long)numel, (long long)known);
        shape_error(op, self, ndim, shape, why);
        return -1;
    }
    return 0;
}

/* Strides for viewing self as newshape without copying (PyTorch's algorithm), or 0 when impossible. */
static int view_strides(GMTensor *self, int ndim, const int64_t *newshape, int64_t *newstrides) {
    if (gm_numel(self) == 0 || gm_is_contiguous(self)) {
        gm_contiguous_strides(ndim, newshape, newstrides);
        return 1;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = self->strides[self->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = self->ndim - 1; d >= 0; d--) {
        tensor_numel *= self->shape[d];
        if (d == 0 || (self->shape[d - 1] != 1 && self->strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
                newstrides[view_d] = view_numel * chunk_base;
                view_numel *= newshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return 0;
            if (d > 0) {
                chunk_base = self->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static PyObject *tensor_view(GMTensor *self, PyObject *arg) {
    int ndim;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &ndim, shape, "view") < 0) return NULL;
    if (infer_size("view", self, ndim, shape) < 0) return NULL;
    if (!view_strides(self, ndim, shape, strides))
        return shape_error("view", self, ndim, shape,
                           "the tensor's strides are not compatible (use reshape, which copies when needed)");
    return (PyObject *)gm_view(self, ndim, shape, strides, self->offset);
}

static PyObject *tensor_can_view(GMTensor *self, PyObject *arg) {
    int ndim;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &ndim, shape, "reshape") < 0) return NULL;
    if (infer_size("reshape", self, ndim, shape) < 0) return NULL;
    return PyBool_FromLong(view_strides(self, ndim, shape, strides));
}

static PyObject *tensor_as_strided(GMTensor *self, PyObject *args) {
    PyObject *shp, *str;
    long long offset;
    int ndim, nstr;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "OOL:as_strided", &shp, &str, &offset)) return NULL;
    if (gm_parse_shape(shp, &ndim, shape, "as_strided(size)") < 0) return NULL;
    if (gm_parse_shape_any(str, &nstr, strides, "as_strided(stride)") < 0) return NULL;
    if (nstr != ndim) {
        PyErr_Format(PyExc_ValueError, "as_strided: size has %d dimensions but stride has %d", ndim, nstr);
        return NULL;
    }
    if (gm_checked_numel(ndim, shape, "as_strided(size)") < 0) return NULL;
    /* Every reachable element must lie inside the storage. */
    int64_t lo = offset, hi = offset, empty = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) empty = 1;
        if (strides[i] < 0) {
            PyErr_Format(PyExc_ValueError, "as_strided: negative strides are not supported (dimension %d)", i);
            return NULL;
        }
        hi += (shape[i] - 1) * strides[i];
    }
    int64_t cap = (int64_t)(self->storage->nbytes / gm_dtype_size(self->dtype));
    if (offset < 0 || (!empty && (lo < 0 || hi >= cap))) {
        PyErr_Format(PyExc_ValueError, "as_strided: the view reaches elements [%lld, %lld] outside the storage "
                     "of %lld elements", (long long)lo, (long long)hi, (long long)cap);
        return NULL;
    }
    return (PyObject *)gm_view(self, ndim, shape, strides, offset);
}

static PyObject *tensor_transpose(GMTensor *self, PyObject *args) {
    long long d0, d1;
    if (!PyArg_ParseTuple(args, "LL:transpose", &d0, &d1)) return NULL;
    int a = gm_wrap_dim(d0, self->ndim, "transpose(dim0)"), b = gm_wrap_dim(d1, self->ndim, "transpose(dim1)");
    if (a < 0 || b < 0) return NULL;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    memcpy(shape, self->shape, sizeof shape);
    memcpy(strides, self->strides, sizeof strides);
    if (self->ndim > 0) {
        shape[a] = self->shape[b]; shape[b] = self->shape[a];
        strides[a] = self->strides[b]; strides[b] = self->strides[a];
    }
    return (PyObject *)gm_view(self, self->ndim, shape, strides, self->offset);
}

static PyObject *tensor_permute(GMTensor *self, PyObject *arg) {
    int n;
    int64_t dims[GM_MAX_DIMS], shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &n, dims, "permute(dims)") < 0) return NULL;
    if (n != self->ndim) {
        PyErr_Format(PyExc_ValueError, "permute(dims): the tensor has %d dimensions but %d dims were given",
                     self->ndim, n);
        return NULL;
    }
    int seen[GM_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int d = gm_wrap_dim(dims[i], n, "permute(dims)");
        if (d < 0) return NULL;
        if (seen[d]++) {
            PyErr_Format(PyExc_ValueError, "permute(dims): dimension %d appears more than once", d);
            return NULL;
        }
        shape[i] = self->shape[d];
        strides[i] = self->strides[d];
    }
    return (PyObject *)gm_view(self, n, shape, strides, self->offset);
}

static PyObject *tensor_expand(GMTensor *self, PyObject *arg) {
    int n;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &n, shape, "expand(size)") < 0) return NULL;
    if (n < self->ndim) {
        char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "expand: cannot expand shape %s to %s: fewer dimensions",
                     gm_shape_str(self->ndim, self->shape, a), gm_shape_str(n, shape, b));
        return NULL;
    }
    int lead = n - self->ndim;
    for (int i = n - 1; i >= 0; i--) {
        int j = i - lead;
        if (j < 0) {
            if (shape[i] < 0) {
                PyErr_Format(PyExc_ValueError, "expand: size -1 is not allowed in a new leading dimension %d", i);
                return NULL;
            }
            strides[i] = 0;
            continue;
        }
        if (shape[i] == -1) shape[i] = self->shape[j];
        if (shape[i] == self->shape[j]) strides[i] = self->strides[j];
        else if (self->shape[j] == 1 && shape[i] >= 0) strides[i] = 0;
        else {
            char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "expand: cannot expand shape %s to %s: dimension %d has size %lld, "
                         "which is neither 1 nor %lld", gm_shape_str(self->ndim, self->shape, a),
                         gm_shape_str(n, shape, b), i, (long long)self->shape[j], (long long)shape[i]);
            return NULL;
        }
    }
    return (PyObject *)gm_view(self, n, shape, strides, self->offset);
}

/* Python-style slice bounds for one dimension; step must be positive (as in PyTorch). */
static PyObject *tensor_slice(GMTensor *self, PyObject *args) {
    long long dim;
    PyObject *startobj, *stopobj;
    long long step;
    if (!PyArg_ParseTuple(args, "LOOL:slice", &dim, &startobj, &stopobj, &step)) return NULL;
    int d = gm_wrap_dim(dim, self->ndim, "slice(dim)");
    if (d < 0) return NULL;
    if (self->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "slice: a 0-d tensor cannot be sliced");
        return NULL;
    }
    if (step <= 0) {
        PyErr_Format(PyExc_ValueError, "slice: step must be positive, got %lld (negative steps are not supported;"
                     " flip by indexing with a reversed index tensor)", step);
        return NULL;
    }
    int64_t size = self->shape[d], start = 0, stop = size;
    if (startobj != Py_None) {
        start = PyLong_AsLongLong(startobj);
        if (start == -1 && PyErr_Occurred()) return NULL;
        if (start < 0) start += size;
        start = start < 0 ? 0 : start > size ? size : start;
    }
    if (stopobj != Py_None) {
        stop = PyLong_AsLongLong(stopobj);
        if (stop == -1 && PyErr_Occurred()) return NULL;
        if (stop < 0) stop += size;
        stop = stop < 0 ? 0 : stop > size ? size : stop;
    }
    int64_t len = stop > start ? (stop - start + step - 1) / step : 0;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    memcpy(shape, self->shape, sizeof shape);
    memcpy(strides, self->strides, sizeof strides);
    shape[d] = len;
    strides[d] = self->strides[d] * step;
    int64_t offset = self->offset + (len > 0 ? start * self->strides[d] : 0);
    return (PyObject *)gm_view(self, self->ndim, shape, strides, offset);
}

static PyObject *tensor_select(GMTensor *self, PyObject *args) {
    long long dim, index;
    if (!PyArg_ParseTuple(args, "LL:select", &dim, &index)) return NULL;
    if (self->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "select: a 0-d tensor cannot be indexed");
        return NULL;
    }
    int d = gm_wrap_dim(dim, self->ndim, "select(dim)");
    if (d < 0) return NULL;
    int64_t size = self->shape[d];
    if (index < -size || index >= size) {
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld", index, d,
                     (long long)size);
        return NULL;
    }
    if (index < 0) index += size;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (i == d) continue;
        shape[n] = self->shape[i];
        strides[n++] = self->strides[i];
    }
    return (PyObject *)gm_view(self, n, shape, strides, self->offset + index * self->strides[d]);
}

static PyObject *tensor_unsqueeze(GMTensor *self, PyObject *arg) {
    long long dim = PyLong_AsLongLong(arg);
    if (dim == -1 && PyErr_Occurred()) return NULL;
    if (self->ndim >= GM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "unsqueeze: at most %d dimensions are supported", GM_MAX_DIMS);
        return NULL;
    }
    int d = gm_wrap_dim(dim, self->ndim + 1, "unsqueeze(dim)");
    if (d < 0) return NULL;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i <= self->ndim; i++) {
        if (i == d) {
            shape[n] = 1;
            strides[n++] = i < self->ndim ? self->shape[i] * self->strides[i] : 1;
        }
        if (i < self->ndim) {
            shape[n] = self->shape[i];
            strides[n++] = self->strides[i];
        }
    }
    return (PyObject *)gm_view(self, self->ndim + 1, shape, strides, self->offset);
}

static PyObject *tensor_squeeze(GMTensor *self, PyObject *arg) {
    int d = -1;
    if (arg != Py_None) {
        long long dim = PyLong_AsLongLong(arg);
        if (dim == -1 && PyErr_Occurred()) return NULL;
        d = gm_wrap_dim(dim, self->ndim, "squeeze(dim)");
        if (d < 0) return NULL;
    }
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (self->shape[i] == 1 && (d < 0 || i == d)) continue;
        shape[n] = self->shape[i];
        strides[n++] = self->strides[i];
    }
    return (PyObject *)gm_view(self, n, shape, strides, self->offset);
}

/* self takes src's storage, geometry, dtype and device, keeping its identity (PyTorch's `param.data = src`):
 * Module.to moves a parameter this way, so an optimizer built before the move still holds the moved tensor. */
static PyObject *tensor_set_data(GMTensor *self, PyObject *arg) {
    GMTensor *src = gm_tensor_arg(arg, "_set_data", "src");
    if (!src) return NULL;
    if (src == self) Py_RETURN_NONE;
    src->storage->refcount++;
    gm_storage_decref(self->storage);
    self->storage = src->storage;
    self->ndim = src->ndim;
    self->dtype = src->dtype;
    self->device = src->device;
    self->offset = src->offset;
    memcpy(self->shape, src->shape, sizeof self->shape);
    memcpy(self->strides, src->strides, sizeof self->strides);
    Py_RETURN_NONE;
}

static PyObject *tensor_is_contiguous(GMTensor *self, PyObject *unused) {
    return PyBool_FromLong(gm_is_contiguous(self));
}

static PyObject *tensor_numel(GMTensor *self, PyObject *unused) { return PyLong_FromLongLong(gm_numel(self)); }

static PyObject *tensor_item(GMTensor *self, PyObject *unused) {
    if (gm_numel(self) != 1) {
        char a[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "item: only a tensor with one element can be converted to a Python "
                     "number, this one has shape %s", gm_shape_str(self->ndim, self->shape, a));
        return NULL;
    }
    if (self->device.type == GM_DEV_CUDA) { /* one element to the host (waits for the kernels that write it) */
        GMTensor *host = gm_to_device(self, (gm_device){GM_DEV_CPU, 0});
        if (!host) return NULL;
        PyObject *v = tensor_item(host, NULL);
        Py_DECREF(host);
        return v;
    }
    if (self->device.type != GM_DEV_CPU) {
        PyErr_SetString(PyExc_RuntimeError, "item: a meta tensor has no data (it only has a shape)");
        return NULL;
    }
    const char *p = gm_tensor_data(self);
    if (self->dtype == GM_I64) { int64_t v; memcpy(&v, p, 8); return PyLong_FromLongLong(v); }
    if (self->dtype == GM_BOOL) return PyBool_FromLong(*p != 0);
    return PyFloat_FromDouble(gm_load_f64(p, self->dtype));
}

extern PyObject *gm_tensor_numpy(GMTensor *self, PyObject *unused); /* numpy.c */

static PyMethodDef tensor_methods[] = {
    {"_view", (PyCFunction)tensor_view, METH_O, "View with a new shape (no copy)."},
    {"_can_view", (PyCFunction)tensor_can_view, METH_O, "Whether _view(shape) would succeed."},
    {"_as_strided", (PyCFunction)tensor_as_strided, METH_VARARGS, "View with explicit geometry."},
    {"_transpose", (PyCFunction)tensor_transpose, METH_VARARGS, "Swap two dimensions (view)."},
    {"_permute", (PyCFunction)tensor_permute, METH_O, "Reorder dimensions (view)."},
    {"_expand", (PyCFunction)tensor_expand, METH_O, "Broadcast to a larger shape (view, stride 0)."},
    {"_slice", (PyCFunction)tensor_slice, METH_VARARGS, "start:stop:step along one dimension (view)."},
    {"_select", (PyCFunction)tensor_select, METH_VARARGS, "Index one dimension away (view)."},
    {"_unsqueeze", (PyCFunction)tensor_unsqueeze, METH_O, "Insert a dimension of size 1 (view)."},
    {"_squeeze", (PyCFunction)tensor_squeeze, METH_O, "Drop dimensions of size 1 (view)."},
    {"_is_contiguous", (PyCFunction)tensor_is_contiguous, METH_NOARGS, "Row-major contiguous?"},
    {"_set_data", (PyCFunction)tensor_set_data, METH_O, "Take another tensor's storage and geometry in place."},
    {"numel", (PyCFunction)tensor_numel, METH_NOARGS, "Number of elements."},
    {"item", (PyCFunction)tensor_item, METH_NOARGS, "The value of a one-element tensor as a Python number."},
    {"numpy", (PyCFunction)gm_tensor_numpy, METH_NOARGS, "A NumPy array sharing this CPU tensor's memory."},
    {NULL},
};

static PyTypeObject TensorBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpumemnet._C.TensorBase",
    .tp_basicsize = sizeof(GMTensor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C part of gpumemnet.Tensor: storage, geometry, dtype, device.",
    .tp_new = tensor_new,
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_traverse = (traverseproc)tensor_traverse,
    .tp_clear = (inquiry)tensor_clear,
    .tp_weaklistoffset = offsetof(GMTensor, weakreflist),
    .tp_methods = tensor_methods,
    .tp_members = tensor_members,
    .tp_getset = tensor_getset,
};

int gm_parse_shape_any(PyObject *obj, int *ndim, int64_t *shape, const char *argname) {
    /* Like gm_parse_shape but allows negative entries (-1 inference, negative dims): callers check. */
    if (PyLong_Check(obj)) {
        long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred()) return -1;
        *ndim = 1;
        shape[0] = v;
        return 0;
    }
    return gm_parse_shape(obj, ndim, shape, argname);
}

/* ---- creation ---------------------------------------------------------------------------------------- */
static PyObject *py_set_tensor_class(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, GMTensor_Base)) {
        PyErr_SetString(PyExc_TypeError, "_set_tensor_class: expected a subclass of TensorBase");
        return NULL;
    }
    if (((PyTypeObject *)cls)->tp_basicsize != GMTensor_Base->tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "_set_tensor_class: the subclass must declare __slots__ = ()");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XDECREF(GMTensor_Class == GMTensor_Base ? NULL : (PyObject *)GMTensor_Class);
    GMTensor_Class = (PyTypeObject *)cls;
    Py_RETURN_NONE;
}

static PyObject *py_empty(PyObject *self, PyObject *args) {
    PyObject *shp, *dto, *devo;
    int ndim, pin = 0;
    int64_t shape[GM_MAX_DIMS];
    gm_dtype dt;
    gm_device dev;
    if (!PyArg_ParseTuple(args, "OOO|p:empty", &shp, &dto, &devo, &pin)) return NULL;
    if (gm_parse_shape(shp, &ndim, shape, "size") < 0 || gm_parse_dtype(dto, &dt, "dtype") < 0 ||
        gm_parse_device(devo, &dev, "device") < 0)
        return NULL;
    if (!pin) return (PyObject *)gm_empty(ndim, shape, dt, dev);
    if (dev.type != GM_DEV_CPU) {
        char dn[16];
        return PyErr_Format(PyExc_RuntimeError, "empty: pin_memory=True needs device='cpu' (pinned memory is host "
                            "memory), got device='%s'", gm_device_str(dev, dn));
    }
    return (PyObject *)gm_empty_pinned(ndim, shape, dt);
}

static PyObject *py_arange(PyObject *self, PyObject *args) {
    double start, end, step;
    PyObject *dto, *devo;
    gm_dtype dt;
    gm_device dev;
    if (!PyArg_ParseTuple(args, "dddOO:arange", &start, &end, &step, &dto, &devo)) return NULL;
    if (gm_parse_dtype(dto, &dt, "dtype") < 0 || gm_parse_device(devo, &dev, "device") < 0) return NULL;
    if (step == 0 || step != step || start != start || end != end) {
        PyErr_Format(PyExc_ValueError, "arange: step must be non-zero and bounds finite (start=%g, end=%g, "
                     "step=%g)", start, end, step);
        return NULL;
    }
    if ((end - start) / step < 0) {
        PyErr_Format(PyExc_ValueError, "arange: the bounds start=%g, end=%g are inconsistent with step=%g",
                     start, end, step);
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count > 9.0e18) {
        PyErr_Format(PyExc_ValueError, "arange: %g elements are too many", count);
        return NULL;
    }
    int64_t n = (int64_t)count;
    if (dev.type == GM_DEV_CUDA) { /* made on the host and uploaded: arange is never hot */
        PyObject *a = Py_BuildValue("dddOs", start, end, step, dto, "cpu");
        int prev = gm_swap_category(GM_CAT_WORKSPACE);
        GMTensor *host = a ? (GMTensor *)py_arange(self, a) : NULL;
        gm_swap_category(prev);
        Py_XDECREF(a);
        if (!host) return NULL;
        GMTensor *t = gm_to_device(host, dev);
        Py_DECREF(host);
        return (PyObject *)t;
    }
    GMTensor *t = gm_empty(1, &n, dt, dev);
    if (!t || dev.type != GM_DEV_CPU) return (PyObject *)t;
    char *p = gm_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i * step;
        switch (dt) {
        case GM_F32: ((float *)p)[i] = (float)v; break;
        case GM_F64: ((double *)p)[i] = v; break;
        case GM_F16: ((uint16_t *)p)[i] = gm_float_to_half((float)v); break;
        case GM_BF16: ((uint16_t *)p)[i] = gm_float_to_bf16((float)v); break;
        case GM_I64: ((int64_t *)p)[i] = (int64_t)v; break;
        default: ((uint8_t *)p)[i] = v != 0; break;
        }
    }
    return (PyObject *)t;
}

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) {
        PyErr_Format(PyExc_ValueError, "set_num_threads: expected a positive number of threads, got %ld", n);
        return NULL;
    }
    gm_num_threads = (int)n;
    omp_set_num_threads((int)n);
    scipy_openblas_set_num_threads((int)n); /* one knob for both pools, as torch.set_num_threads */
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *unused) { return PyLong_FromLong(gm_num_threads); }

extern PyObject *gm_py_from_numpy(PyObject *self, PyObject *args, PyObject *kwargs); /* numpy.c */

/* _grads_free(list) -> tuple of bools: which gradients the autograd engine may hand over to a backward to write
 * its result into. A gradient is free when the list holds the only reference to it (no hook, no retained .grad,
 * no capture, no NumPy array, no second consumer holds it: each would hold a reference) and no other tensor
 * shares its storage (no view of it is alive). Only reference counts can tell this, hence C. */
static PyObject *py_grads_free(PyObject *self, PyObject *list) {
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "_grads_free: expected a list, got %s", Py_TYPE(list)->tp_name);
        return NULL;
    }
    const Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *res = PyTuple_New(n);
    if (!res) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(list, i); /* borrowed: the list's reference is the one counted */
        int free_ = 0;
        if (PyObject_TypeCheck(o, GMTensor_Base)) {
            GMTensor *t = (GMTensor *)o;
            free_ = Py_REFCNT(o) == 1 && t->storage->refcount == 1 && !t->requires_grad &&
                    (!t->grad_fn || t->grad_fn == Py_None);
        }
        PyTuple_SET_ITEM(res, i, Py_NewRef(free_ ? Py_True : Py_False));
    }
    return res;
}

PyMethodDef gm_tensor_module_methods[] = {
    {"_set_tensor_class", py_set_tensor_class, METH_O, "Register the Python Tensor class C creates."},
    {"empty", py_empty, METH_VARARGS, "empty(shape, dtype, device, pin_memory=False): uninitialised tensor."},
    {"arange", py_arange, METH_VARARGS, "arange(start, end, step, dtype, device)."},
    {"from_numpy", (PyCFunction)(void (*)(void))gm_py_from_numpy, METH_VARARGS | METH_KEYWORDS,
     "from_numpy(array, dtype=None, device='cpu'): copy an ndarray into tracked storage."},
    {"set_num_threads", py_set_num_threads, METH_O, "Threads used by gpumemnet's own CPU kernels."},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "Threads used by gpumemnet's own CPU kernels."},
    {"_grads_free", py_grads_free, METH_O, "Which gradients in a list nothing else references (autograd)."},
    {NULL},
};

int gm_tensor_type_init(PyObject *module) {
    if (PyType_Ready(&TensorBaseType) < 0) return -1;
    GMTensor_Base = &TensorBaseType;
    gm_num_threads = omp_get_max_threads();
    GMTensor_Class = &TensorBaseType;
    Py_INCREF(&TensorBaseType);
    if (PyModule_AddObject(module, "TensorBase", (PyObject *)&TensorBaseType) < 0) return -1;
    return 0;
}
