/* csrc/transfer.c — copies between devices: gm_copy_across (copy_ / .to() / .cuda() / .cpu() across devices),
 * and pinned host memory (pin_memory) with non-blocking uploads from it.
 *
 * Bytes cross the bus only as one contiguous run in the source's dtype; everything else (strides, broadcasting,
 * dtype casts) is done by gm_copy_into on one side, where the kernels for it live. The common case, a contiguous
 * tensor copied into a fresh contiguous tensor of the same dtype (.cuda(), .cpu(), .to(device)), is a single
 * memcpy with no temporary. Temporaries are tagged `workspace` and freed before returning. */
#include "gm.h"

/* gm_copy_into (ops_elementwise.c), registered by module.c: transfer.c sits below the ops (gm.h). */
static int (*copy_same_device)(GMTensor *dst, GMTensor *src);

void gm_transfer_init(int (*same_device_copy)(GMTensor *dst, GMTensor *src)) { copy_same_device = same_device_copy; }

#ifdef GM_WITH_CUDA
/* csrc/cuda.c */
int gm_cuda_copy(int i, void *dst, const void *src, size_t n, int kind);
int gm_cuda_copy_peer(int dst_dev, void *dst, int src_dev, const void *src, size_t n);
int gm_cuda_stream_sync(int i);
int gm_cuda_copy_async(int i, void *dst, const void *src, size_t n, int kind);
int gm_cuda_event_wait(void *event, int i, int on_device);
int gm_cuda_raise(const char *what);
enum { GM_COPY_H2D = 1, GM_COPY_D2H = 2, GM_COPY_D2D = 3 };

/* An upload from pinned memory is truly asynchronous (the DMA reads the source while the host runs on), unlike one
 * from pageable memory, which returns once the source was staged. Blocking: wait for it, so that the caller may
 * overwrite or free the source (PyTorch's non_blocking=False). Non-blocking: record an event instead; the
 * allocator keeps the block from reuse until the stream passed it, and writing into the source before then is
 * the caller's race (as in PyTorch: synchronize first). */
static int after_pinned_upload(gm_block *src, int device, int non_blocking) {
    if (non_blocking && gm_block_record_stream(src, device) == 0) return 0;
    return gm_cuda_stream_sync(device); /* blocking, or no event could be recorded: wait instead */
}

/* n bytes from src (on device s) to dst (on device d): both contiguous, neither on meta. */
static int copy_bytes(gm_device d, void *dst, gm_device s, const void *src, size_t n) {
    if (d.type == GM_DEV_CUDA && s.type == GM_DEV_CPU) return gm_cuda_copy(d.index, dst, src, n, GM_COPY_H2D);
    if (d.type == GM_DEV_CPU && s.type == GM_DEV_CUDA) return gm_cuda_copy(s.index, dst, src, n, GM_COPY_D2H);
    if (d.type == GM_DEV_CUDA && s.type == GM_DEV_CUDA) {
        if (d.index == s.index) return gm_cuda_copy(d.index, dst, src, n, GM_COPY_D2D);
        return gm_cuda_copy_peer(d.index, dst, s.index, src, n);
    }
    memcpy(dst, src, n); /* cpu -> cpu: not reached through gm_copy_across, kept for completeness */
    return 0;
}
#endif

static int same_geometry_contiguous(const GMTensor *a, const GMTensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || !gm_is_contiguous(a) || !gm_is_contiguous(b)) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* dst's storage's gm_index_summary (gm.h) from the host's int64 values src, where they went up as dst's whole
 * storage in one run: at most a pass over memory the copy reads anyway. */
static void summarize_upload(GMTensor *dst, const GMTensor *src) {
    gm_storage *st = dst->storage;
    const int64_t n = gm_numel(src);
    st->idx.known = 0;
    if (src->device.type != GM_DEV_CPU || dst->device.type != GM_DEV_CUDA || src->dtype != GM_I64 ||
        dst->dtype != GM_I64 || dst->offset != 0 || (size_t)n * sizeof(int64_t) != st->nbytes)
        return;
    const int64_t *v = (const int64_t *)gm_tensor_data((GMTensor *)src);
    gm_index_summary m = {1, st->version, n, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0};
    for (int64_t i = 0; i < n; i++) {
        const int64_t x = v[i];
        m.lo = x < m.lo ? x : m.lo;
        m.hi = x > m.hi ? x : m.hi;
        if (x == GM_DEFAULT_IGNORE_INDEX) {
            m.n_ignored++;
            continue;
        }
        m.lo_kept = x < m.lo_kept ? x : m.lo_kept;
        m.hi_kept = x > m.hi_kept ? x : m.hi_kept;
    }
    st->idx = m;
}

int gm_copy_across(GMTensor *dst, GMTensor *src) { return gm_copy_across_async(dst, src, 0); }

int gm_copy_across_async(GMTensor *dst, GMTensor *src, int non_blocking) {
    char dn[16], sn[16];
    if (src->device.type == GM_DEV_META && dst->device.type != GM_DEV_META) {
        PyErr_Format(PyExc_RuntimeError, "copy_: a meta tensor has no data to copy to %s",
                     gm_device_str(dst->device, dn));
        return -1;
    }
    if (dst->device.type == GM_DEV_META) { /* shapes and allocations only: nothing to move */
        gm_bump_version(dst);
        return 0;
    }
#ifndef GM_WITH_CUDA
    (void)non_blocking;
    PyErr_Format(PyExc_RuntimeError, "copy_: cannot copy from %s to %s: this build has no CUDA support",
                 gm_device_str(src->device, sn), gm_device_str(dst->device, dn));
    return -1;
#else
    (void)dn;
    (void)sn;
    if (gm_numel(dst) == 0 || gm_numel(src) == 0) { /* the caller checked that the shapes broadcast */
        gm_bump_version(dst);
        return 0;
    }
    GMTensor *packed = NULL, *landed = NULL;
    int rc = -1;
    /* 1. the source as one contiguous run, on its own device */
    GMTensor *from = src;
    if (!gm_is_contiguous(src)) {
        packed = gm_empty_workspace(src->ndim, src->shape, src->dtype, src->device);
        if (!packed || copy_same_device(packed, src) < 0) goto done;
        from = packed;
    }
    /* 2. straight into dst when it has the same layout, otherwise into a landing tensor on dst's device */
    GMTensor *to = dst;
    if (!same_geometry_contiguous(dst, from)) {
        landed = gm_empty_workspace(from->ndim, from->shape, from->dtype, dst->device);
        if (!landed) goto done;
        to = landed;
    }
    size_t nbytes = (size_t)gm_numel(from) * gm_dtype_size(from->dtype);
    if (copy_bytes(to->device, gm_tensor_data(to), from->device, gm_tensor_data(from), nbytes) < 0) goto done;
    if (to->device.type == GM_DEV_CUDA && gm_block_is_pinned(from->storage->block) &&
        after_pinned_upload(from->storage->block, to->device.index, non_blocking) < 0)
        goto done;
    /* 3. strides, broadcasting and the dtype cast happen on dst's device */
    if (landed && copy_same_device(dst, landed) < 0) goto done;
    gm_bump_version(dst);
    if (!landed && from == src) summarize_upload(dst, src);
    rc = 0;
done:
    Py_XDECREF(packed);
    Py_XDECREF(landed);
    return rc;
#endif
}

GMTensor *gm_to_device(GMTensor *t, gm_device dev) {
    GMTensor *out = gm_empty(t->ndim, t->shape, t->dtype, dev);
    if (!out) return NULL;
    if (gm_copy_across(out, t) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* _C._to_device(t, device, non_blocking=False): a new contiguous tensor on device with t's values (autograd lives
 * in Python). */
static PyObject *py_to_device(PyObject *self, PyObject *args) {
    PyObject *to, *devo;
    int non_blocking = 0;
    gm_device dev;
    if (!PyArg_ParseTuple(args, "OO|p:_to_device", &to, &devo, &non_blocking)) return NULL;
    GMTensor *t = gm_tensor_arg(to, "to", "tensor");
    if (!t || gm_parse_device(devo, &dev, "device") < 0) return NULL;
    if (gm_device_eq(t->device, dev)) {
        GMTensor *out = gm_empty(t->ndim, t->shape, t->dtype, dev);
        if (out && copy_same_device(out, t) < 0) Py_CLEAR(out);
        return (PyObject *)out;
    }
    GMTensor *out = gm_empty(t->ndim, t->shape, t->dtype, dev);
    if (out && gm_copy_across_async(out, t, non_blocking) < 0) Py_CLEAR(out);
    return (PyObject *)out;
}

/* _C._pin_memory(t): a contiguous copy of CPU tensor t in pinned host memory (t itself when already pinned). */
static PyObject *py_pin_memory(PyObject *self, PyObject *arg) {
    GMTensor *t = gm_tensor_arg(arg, "pin_memory", "tensor");
    if (!t) return NULL;
    if (t->device.type != GM_DEV_CPU) {
        char dn[16];
        return PyErr_Format(PyExc_RuntimeError, "pin_memory: cannot pin a tensor on %s: only CPU tensors can be "
                            "pinned", gm_device_str(t->device, dn));
    }
    if (gm_block_is_pinned(t->storage->block)) return Py_NewRef(arg);
    GMTensor *out = gm_empty_pinned(t->ndim, t->shape, t->dtype);
    if (out && copy_same_device(out, t) < 0) Py_CLEAR(out);
    return (PyObject *)out;
}

/* ---- the copy stream (offload: gradients down during backward, saved tensors up ahead of use) ----------------- */
/* _copy_async(dst, src): dst.copy_(src) between a CUDA tensor and a host one (same dtype and size, both
 * contiguous) on the device's copy stream, after the compute stream's work so far, returning at once; both blocks
 * are kept from reuse until the copy ran (gm_block_record_copy_stream). On meta (an estimate), or host to host, a
 * plain copy. */
static PyObject *py_copy_async(PyObject *self, PyObject *args) {
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:_copy_async", &a, &b)) return NULL;
    GMTensor *dst = gm_tensor_arg(a, "_copy_async", "dst"), *src = dst ? gm_tensor_arg(b, "_copy_async", "src") : NULL;
    if (!src) return NULL;
    int64_t nd = gm_numel(dst), ns = gm_numel(src);
    if (dst->dtype != src->dtype || nd != ns || !gm_is_contiguous(dst) || !gm_is_contiguous(src))
        return PyErr_Format(PyExc_ValueError, "_copy_async: dst and src must be contiguous with the same dtype and "
                            "number of elements, got %lld and %lld elements of dtypes %s and %s", (long long)nd,
                            (long long)ns, gm_dtype_name(dst->dtype), gm_dtype_name(src->dtype));
    int dc = dst->device.type == GM_DEV_CUDA, sc = src->device.type == GM_DEV_CUDA;
    if (dst->device.type == GM_DEV_CPU && src->device.type == GM_DEV_CPU) {
        if (copy_same_device(dst, src) < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (dc == sc || dst->device.type == GM_DEV_META || src->device.type == GM_DEV_META) {
        if (gm_copy_across(dst, src) < 0) return NULL; /* meta: nothing moves; otherwise the synchronous copy */
        Py_RETURN_NONE;
    }
    if (dst->device.type != GM_DEV_CPU && src->device.type != GM_DEV_CPU) {
        char dn[16], sn[16];
        return PyErr_Format(PyExc_ValueError, "_copy_async: one tensor must be on a CUDA device and the other on the "
                            "host, got %s and %s", gm_device_str(dst->device, dn), gm_device_str(src->device, sn));
    }
#ifdef GM_WITH_CUDA
    int i = dc ? dst->device.index : src->device.index;
    size_t n = (size_t)ns * gm_dtype_size(src->dtype);
    if (gm_cuda_copy_async(i, gm_tensor_data(dst), gm_tensor_data(src), n, dc ? GM_COPY_H2D : GM_COPY_D2H) < 0)
        return NULL;
    if (n && (gm_block_record_copy_stream(dst->storage->block, i) < 0 ||
              gm_block_record_copy_stream(src->storage->block, i) < 0)) {
        gm_cuda_raise("_copy_async");
        return NULL;
    }
    gm_bump_version(dst);
    Py_RETURN_NONE;
#else
    return PyErr_Format(PyExc_RuntimeError, "_copy_async: this build has no CUDA support");
#endif
}

/* _copy_wait(t, device=None): wait for the last copy-stream copy that used t: the host (device None), or the
 * compute stream of CUDA device `device` (an int), before its next kernel reads t. Nothing to wait for: returns. */
static PyObject *py_copy_wait(PyObject *self, PyObject *args) {
    PyObject *a, *devo = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:_copy_wait", &a, &devo)) return NULL;
    GMTensor *t = gm_tensor_arg(a, "_copy_wait", "tensor");
    if (!t) return NULL;
#ifdef GM_WITH_CUDA
    if (t->device.type == GM_DEV_META || !t->storage || !t->storage->block) Py_RETURN_NONE;
    if (devo != Py_None && (!PyLong_Check(devo) || PyBool_Check(devo)))
        return PyErr_Format(PyExc_TypeError, "_copy_wait: device must be None or a CUDA device index (int), got %.100s",
                            Py_TYPE(devo)->tp_name);
    int ev_dev;
    void *ev = gm_block_copy_event(t->storage->block, &ev_dev);
    if (!ev) Py_RETURN_NONE;
    int i = devo == Py_None ? ev_dev : (int)PyLong_AsLong(devo);
    if (i < 0 && PyErr_Occurred()) return NULL;
    if (gm_cuda_event_wait(ev, i, devo != Py_None) < 0) return NULL;
#else
    (void)devo;
#endif
    Py_RETURN_NONE;
}

PyMethodDef gm_transfer_methods[] = {
    {"_to_device", py_to_device, METH_VARARGS,
     "_to_device(t, device, non_blocking=False): a contiguous copy of t on device (cpu, cuda:N; meta gets the "
     "shape only); non_blocking: an upload from pinned memory returns before it ran."},
    {"_pin_memory", py_pin_memory, METH_O, "_pin_memory(t): a contiguous copy of CPU tensor t in pinned memory."},
    {"_copy_async", py_copy_async, METH_VARARGS,
     "_copy_async(dst, src): copy between a CUDA and a host tensor on the device's copy stream, returning at once."},
    {"_copy_wait", py_copy_wait, METH_VARARGS,
     "_copy_wait(t, device=None): the host (or device's compute stream) waits for the last copy-stream copy of t."},
    {NULL, NULL, 0, NULL},
};
