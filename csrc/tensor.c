/* csrc/tensor.c — the Tensor object underneath: storage (a refcounted allocator block), new tensors (gm_empty and
 * its variants, gm_view) and their geometry (numel, contiguity, strides). No Python-visible behaviour lives here:
 * the TensorBase type, its attributes and the creation functions are tensor_type.c, views tensor_views.c.
 * Autograd metadata (grad, grad_fn, hooks) is stored in the object but only Python reads it (DESIGN.md). */
#include "gm.h"

PyTypeObject *GMTensor_Base;  /* set by tensor_type.c when it makes the type */
PyTypeObject *GMTensor_Class;

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
    int ok = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0) return 1; /* an empty tensor is contiguous whatever its strides (PyTorch's rule) */
        if (t->shape[i] != 1 && t->strides[i] != s) ok = 0;
        s *= t->shape[i];
    }
    return ok;
}

void gm_byte_strides(const GMTensor *t, int64_t *out) {
    int64_t item = (int64_t)gm_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) out[i] = t->strides[i] * item;
}

/* ---- storage ---------------------------------------------------------------------------------------- */
PyObject *gm_inference_var;

/* Whether inference_mode() is on here: what makes a storage, and so every tensor on it, an inference tensor's
 * (PyTorch's rule: a tensor made in inference mode is one, a view is one when its base is). One ContextVar read
 * per new storage, about 10 ns. */
static int inference_on(void) {
    PyObject *v = NULL;
    if (!gm_inference_var) return 0;
    if (PyContextVar_Get(gm_inference_var, NULL, &v) < 0) {
        PyErr_Clear();
        return 0;
    }
    int on = v == Py_True;
    Py_XDECREF(v);
    return on;
}

gm_storage *gm_storage_wrap(gm_block *b, gm_device dev, size_t nbytes) {
    gm_storage *s = PyMem_Calloc(1, sizeof *s);
    if (!s) { gm_free(b); PyErr_NoMemory(); return NULL; }
    s->block = b;
    s->refcount = 1;
    s->data = gm_block_data(b);
    s->nbytes = nbytes;
    s->device = dev;
    s->inference = inference_on();
    return s;
}

gm_storage *gm_storage_new(gm_device dev, size_t nbytes) {
    gm_block *b = gm_alloc(dev, nbytes);
    return b ? gm_storage_wrap(b, dev, nbytes) : NULL;
}

void gm_storage_decref(gm_storage *s) {
    if (!s || --s->refcount > 0) return;
    gm_free(s->block);
    Py_XDECREF(s->borrowed);
    Py_XDECREF(s->views);
    PyMem_Free(s);
}

gm_storage *gm_storage_borrow(char *data, size_t nbytes, PyObject *owner) {
    gm_storage *s = PyMem_Calloc(1, sizeof *s);
    if (!s) { PyErr_NoMemory(); return NULL; }
    s->borrowed = Py_NewRef(owner);
    s->refcount = 1;
    s->data = data;
    s->nbytes = nbytes;
    s->device = (gm_device){GM_DEV_CPU, 0};
    s->inference = inference_on();
    return s;
}

/* ---- object lifetime ------------------------------------------------------------------------------------ */
static GMTensor *tensor_alloc(void) {
    GMTensor *t = (GMTensor *)GMTensor_Class->tp_alloc(GMTensor_Class, 0);
    return t;
}

/* How gm_empty* get their bytes. */
enum { ALLOC_RAISE, ALLOC_TRY, ALLOC_PINNED, ALLOC_META_HOST };

static GMTensor *empty_with(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev, int how) {
    int64_t numel = gm_checked_numel(ndim, shape, "shape");
    if (numel < 0) return NULL;
    gm_note_work(numel); /* the op's size, for GM_KERNEL's GIL policy (threads.c) */
    int64_t nbytes;
    if (__builtin_mul_overflow(numel, (int64_t)gm_dtype_size(dt), &nbytes)) {
        PyErr_Format(PyExc_ValueError, "shape: %lld elements of %s overflow the addressable size",
                     (long long)numel, gm_dtype_name(dt));
        return NULL;
    }
    gm_block *b = how == ALLOC_PINNED      ? gm_alloc_pinned((size_t)nbytes)
                  : how == ALLOC_META_HOST ? gm_alloc_meta_host((size_t)nbytes)
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
    if (ndim > 0) memcpy(t->shape, shape, sizeof(int64_t) * ndim);  /* a 0-d tensor may pass shape = NULL */
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

GMTensor *gm_empty_meta_host(int ndim, const int64_t *shape, gm_dtype dt) {
    return empty_with(ndim, shape, dt, (gm_device){GM_DEV_META, 0}, ALLOC_META_HOST);
}

GMTensor *gm_view_of_storage(gm_storage *s, int ndim, const int64_t *shape, const int64_t *strides, gm_dtype dt) {
    GMTensor *t = tensor_alloc();
    if (!t) return NULL;
    t->storage = s;
    s->refcount++;
    t->ndim = ndim;
    t->dtype = dt;
    t->device = s->device;
    t->offset = 0;
    if (ndim > 0) {
        memcpy(t->shape, shape, sizeof(int64_t) * ndim);
        memcpy(t->strides, strides, sizeof(int64_t) * ndim);
    }
    return t;
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
    t->unversioned = base->unversioned;
    if (ndim > 0) {  /* a 0-d view may pass NULL arrays, which memcpy must not get even for 0 bytes */
        memcpy(t->shape, shape, sizeof(int64_t) * ndim);
        memcpy(t->strides, strides, sizeof(int64_t) * ndim);
    }
    return t;
}
