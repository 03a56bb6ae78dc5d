/* csrc/args.c — argument helpers every layer shares: dtype names, shapes (parsing, printing, checked element
 * counts), dimension wrapping and the same-device check. They read a tensor's fields at most; nothing here
 * allocates a tensor or knows the allocator, so the allocator and the Tensor object may both use them. */
#include "gm.h"

static const char *const dtype_names[GM_NDTYPES_ALL] = {"float32", "float64", "float16", "bfloat16", "int64", "bool",
                                                        "uint8", "int8", "int16", "int32"};

const char *gm_dtype_name(gm_dtype dt) { return (unsigned)dt < GM_NDTYPES_ALL ? dtype_names[dt] : "?"; }

int gm_check_compute_dtype(const char *op, const char *argname, gm_dtype dt) {
    if (!gm_dtype_is_narrow(dt)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s of dtype %s is not supported (gpumemnet stores %s tensors and can "
                 "cast, copy, index, concatenate and compare them; cast with .long() or .float() first)",
                 op, argname, gm_dtype_name(dt), gm_dtype_name(dt));
    return -1;
}

int gm_parse_dtype(PyObject *obj, gm_dtype *dt, const char *argname) {
    if (PyLong_Check(obj)) {
        long v = PyLong_AsLong(obj);
        if (v >= 0 && v < GM_NDTYPES_ALL) { *dt = (gm_dtype)v; return 0; }
    } else if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        for (int i = 0; s && i < GM_NDTYPES_ALL; i++)
            if (strcmp(s, dtype_names[i]) == 0) { *dt = (gm_dtype)i; return 0; }
    }
    PyErr_Format(PyExc_TypeError, "%s: unknown dtype %R; expected one of float32, float64, float16, bfloat16, "
                 "int64, bool, uint8, int8, int16, int32", argname, obj);
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
