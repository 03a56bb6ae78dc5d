/* csrc/numpy.c — NumPy interop through the NumPy C API: copy any ndarray (any strides, byte order, numeric
 * dtype) into tracked storage, and expose a CPU tensor as an ndarray that shares its memory. */
#include "gm.h"
#define PY_ARRAY_UNIQUE_SYMBOL gm_ARRAY_API
#include <numpy/arrayobject.h>

int gm_numpy_init(void) {
    import_array1(-1);
    return 0;
}

static int dtype_to_npy(gm_dtype dt) {
    switch (dt) {
    case GM_F32: return NPY_FLOAT32;
    case GM_F64: return NPY_FLOAT64;
    case GM_F16: return NPY_FLOAT16;
    case GM_I64: return NPY_INT64;
    case GM_BOOL: return NPY_BOOL;
    case GM_U8: return NPY_UINT8;
    case GM_I8: return NPY_INT8;
    case GM_I16: return NPY_INT16;
    case GM_I32: return NPY_INT32;
    default: return -1; /* bfloat16: NumPy has no such type */
    }
}

/* The gpumemnet dtype an ndarray becomes by default: floats keep their width, uint8/int8/16/32 theirs (as
 * torch.from_numpy), other integers (uint16/32/64) become int64. */
static int default_dtype(PyArray_Descr *d, gm_dtype *out) {
    switch (d->kind) {
    case 'f':
        if (PyDataType_ELSIZE(d) == 2) { *out = GM_F16; return 0; }
        if (PyDataType_ELSIZE(d) == 4) { *out = GM_F32; return 0; }
        if (PyDataType_ELSIZE(d) == 8) { *out = GM_F64; return 0; }
        return -1; /* long double */
    case 'u':
        *out = PyDataType_ELSIZE(d) == 1 ? GM_U8 : GM_I64;
        return 0;
    case 'i':
        *out = PyDataType_ELSIZE(d) == 1 ? GM_I8 : PyDataType_ELSIZE(d) == 2 ? GM_I16 : PyDataType_ELSIZE(d) == 4 ? GM_I32 : GM_I64;
        return 0;
    case 'b': *out = GM_BOOL; return 0;
    default: return -1;
    }
}

PyObject *gm_py_from_numpy(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"array", "dtype", "device", NULL};
    PyObject *obj, *dto = Py_None, *devo = NULL;
    gm_device dev = {GM_DEV_CPU, 0};
    gm_dtype dt;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:from_numpy", kwlist, &obj, &dto, &devo)) return NULL;
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "from_numpy: expected a numpy.ndarray, got %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *src = (PyArrayObject *)obj;
    PyArray_Descr *descr = PyArray_DESCR(src);
    gm_dtype natural;
    if (default_dtype(descr, &natural) < 0) {
        PyObject *r = PyObject_Repr((PyObject *)descr);
        PyErr_Format(PyExc_TypeError, "from_numpy: arrays of dtype %S are not supported; expected a numeric array "
                     "(bool, integer, float16/32/64)", r ? r : Py_None);
        Py_XDECREF(r);
        return NULL;
    }
    if (dto == Py_None) dt = natural;
    else if (gm_parse_dtype(dto, &dt, "dtype") < 0) return NULL;
    if (devo && gm_parse_device(devo, &dev, "device") < 0) return NULL;
    int ndim = PyArray_NDIM(src);
    if (ndim > GM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "from_numpy: at most %d dimensions are supported, got %d", GM_MAX_DIMS, ndim);
        return NULL;
    }
    int64_t shape[GM_MAX_DIMS];
    for (int i = 0; i < ndim; i++) shape[i] = PyArray_DIM(src, i);
    if (dev.type == GM_DEV_CUDA) { /* through a CPU tensor: NumPy does the casting copy, then one upload */
        PyObject *kw = Py_BuildValue("{s:O}", "dtype", dto);
        PyObject *a = kw ? PyTuple_Pack(1, obj) : NULL;
        int prev = gm_swap_category(GM_CAT_WORKSPACE);
        GMTensor *host = a ? (GMTensor *)gm_py_from_numpy(self, a, kw) : NULL;
        gm_swap_category(prev);
        Py_XDECREF(a);
        Py_XDECREF(kw);
        if (!host) return NULL;
        GMTensor *t = gm_to_device(host, dev);
        Py_DECREF(host);
        return (PyObject *)t;
    }
    GMTensor *t = gm_empty(ndim, shape, dt, dev);
    if (!t || dev.type != GM_DEV_CPU || gm_numel(t) == 0) return (PyObject *)t;

    /* Let NumPy do the strided, byte-swapping, casting copy straight into our storage (one copy). bfloat16
     * goes through a float32 array NumPy can cast into, then rounds. */
    int npy = dtype_to_npy(dt == GM_BF16 ? GM_F32 : dt);
    npy_intp dims[GM_MAX_DIMS];
    for (int i = 0; i < ndim; i++) dims[i] = (npy_intp)shape[i];
    PyObject *dst;
    if (dt == GM_BF16) dst = PyArray_SimpleNew(ndim, dims, npy);
    else dst = PyArray_New(&PyArray_Type, ndim, dims, npy, NULL, gm_tensor_data(t), 0, NPY_ARRAY_CARRAY, NULL);
    if (!dst || PyArray_CopyInto((PyArrayObject *)dst, src) < 0) {
        Py_XDECREF(dst);
        Py_DECREF(t);
        return NULL;
    }
    if (dt == GM_BF16) {
        const float *f = PyArray_DATA((PyArrayObject *)dst);
        uint16_t *o = (uint16_t *)gm_tensor_data(t);
        for (int64_t i = 0, n = gm_numel(t); i < n; i++) o[i] = gm_float_to_bf16(f[i]);
    }
    Py_DECREF(dst);
    return (PyObject *)t;
}

/* from_numpy_shared(array): a CPU tensor over the array's own memory, as torch.from_numpy gives (writes through
 * either show in the other; the array lives as long as the tensor's storage). None where that cannot be: a dtype
 * that from_numpy widens (uint16/32/64 become int64), a read-only, misaligned or byte-swapped array, negative
 * strides or strides that are not whole elements; the caller copies then. The memory is NumPy's: the allocator
 * neither counts nor frees it. */
PyObject *gm_py_from_numpy_shared(PyObject *self, PyObject *obj) {
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "from_numpy: expected a numpy.ndarray, got %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    gm_dtype dt;
    int ndim = PyArray_NDIM(a);
    if (default_dtype(descr, &dt) < 0 || dtype_to_npy(dt) != descr->type_num || ndim > GM_MAX_DIMS ||
        !PyArray_ISWRITEABLE(a) || !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a))
        Py_RETURN_NONE;
    const int64_t item = (int64_t)PyDataType_ELSIZE(descr);
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS], extent = 1; /* extent: elements from the first to the last */
    int empty = 0;
    for (int i = 0; i < ndim; i++) {
        shape[i] = PyArray_DIM(a, i);
        int64_t st = PyArray_STRIDE(a, i);
        if (st < 0 || st % item) Py_RETURN_NONE;
        strides[i] = st / item;
        if (shape[i] == 0) empty = 1;
        else extent += (shape[i] - 1) * strides[i];
    }
    gm_storage *s = gm_storage_borrow(PyArray_DATA(a), empty ? 0 : (size_t)(extent * item), obj);
    if (!s) return NULL;
    GMTensor *t = gm_view_of_storage(s, ndim, shape, strides, dt);
    gm_storage_decref(s); /* the tensor holds its own reference */
    return (PyObject *)t;
}

PyObject *gm_tensor_numpy(GMTensor *self, PyObject *unused) {
    if (self->device.type == GM_DEV_CUDA) {
        /* A copy in host memory (PyTorch needs .cpu() first; .numpy(force=True) does this): the array owns the
         * new CPU tensor, so writing to it does not change the CUDA tensor. */
        GMTensor *host = gm_to_device(self, (gm_device){GM_DEV_CPU, 0});
        if (!host) return NULL;
        PyObject *arr = gm_tensor_numpy(host, NULL);
        Py_DECREF(host);
        return arr;
    }
    if (self->device.type != GM_DEV_CPU) {
        char d[16];
        PyErr_Format(PyExc_RuntimeError, "numpy: the tensor is on %s; only CPU tensors can be viewed as NumPy "
                     "arrays (use .cpu() first%s)", gm_device_str(self->device, d),
                     self->device.type == GM_DEV_META ? "; meta tensors have no data at all" : "");
        return NULL;
    }
    int npy = dtype_to_npy(self->dtype);
    if (npy < 0) {
        PyErr_SetString(PyExc_TypeError, "numpy: NumPy has no bfloat16 type; convert first with .float()");
        return NULL;
    }
    npy_intp dims[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    int64_t item = (int64_t)gm_dtype_size(self->dtype);
    for (int i = 0; i < self->ndim; i++) {
        dims[i] = (npy_intp)self->shape[i];
        strides[i] = (npy_intp)(self->strides[i] * item);
    }
    PyObject *arr = PyArray_New(&PyArray_Type, self->ndim, dims, npy, strides, gm_tensor_data(self), 0,
                                NPY_ARRAY_WRITEABLE | NPY_ARRAY_ALIGNED, NULL);
    if (!arr) return NULL;
    Py_INCREF(self); /* the array keeps the tensor, hence the storage, alive */
    if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)self) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}
