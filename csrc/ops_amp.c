/* csrc/ops_amp.c — _C.amp_unscale_(grads, inv_scale) -> found_inf: GradScaler's fused unscale and
 * non-finite check over a list of gradients, in place. The CPU gradients go through one call of kernels/cpu/amp.c
 * (one parallel pass over the list, without the GIL when large); the CUDA gradients of each device through one
 * call of kernels/cuda/amp.cu (one launch per dtype, one read-back of the flag). */
#include "gm.h"
#include "../kernels/cpu/amp.h"
#ifdef GM_WITH_CUDA
#include "../kernels/cuda/amp.h"

/* Unscale the CUDA gradients of the list, device by device. 0, or -1 + exception. */
static int unscale_cuda(PyObject *seq, double inv_scale, int *found_inf) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    void **ptr = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(void *));
    gm_dtype *dt = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(gm_dtype));
    int64_t *numel = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    int rc = -1;
    if (!ptr || !dt || !numel) {
        PyErr_NoMemory();
        goto done;
    }
    for (int dev = 0; dev < GM_MAX_CUDA_DEVICES; dev++) {
        int k = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            GMTensor *t = (GMTensor *)PySequence_Fast_GET_ITEM(seq, i);
            if (t->device.type != GM_DEV_CUDA || t->device.index != dev) continue;
            ptr[k] = gm_tensor_data(t);
            dt[k] = t->dtype;
            numel[k] = gm_numel(t);
            k++;
        }
        if (k == 0) continue;
        gm_device d = {GM_DEV_CUDA, dev};
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(d);
        if (!ctx) goto done;
        int st = cuda_amp_unscale_forward(ptr, dt, numel, k, inv_scale, found_inf, ctx);
        if (gm_cuda_kernel_status("amp_unscale_", st, ctx) < 0) goto done;
    }
    rc = 0;
done:
    PyMem_Free(ptr);
    PyMem_Free(dt);
    PyMem_Free(numel);
    return rc;
}
#endif

/* Unscale the CPU gradients of the list in one kernel call (the GIL released when they are large). 0, or -1 +
 * exception. */
static int unscale_cpu(PyObject *seq, double inv_scale, int *found_inf) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    void **ptr = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(void *));
    gm_dtype *dt = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(gm_dtype));
    int64_t *numel = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    int rc = -1, k = 0, st;
    int64_t total = 0;
    if (!ptr || !dt || !numel) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        GMTensor *t = (GMTensor *)PySequence_Fast_GET_ITEM(seq, i);
        if (t->device.type != GM_DEV_CPU) continue;
        ptr[k] = gm_tensor_data(t);
        dt[k] = t->dtype;
        numel[k] = gm_numel(t);
        total += numel[k++];
    }
    if (k == 0) {
        rc = 0;
        goto done;
    }
    if (total >= GM_NOGIL_MIN_WORK) {
        Py_BEGIN_ALLOW_THREADS
        st = cpu_amp_unscale_forward(ptr, dt, numel, k, inv_scale, found_inf, gm_num_threads);
        Py_END_ALLOW_THREADS
    } else {
        st = cpu_amp_unscale_forward(ptr, dt, numel, k, inv_scale, found_inf, gm_num_threads);
    }
    rc = gm_kernel_status("amp_unscale_", st);
done:
    PyMem_Free(ptr);
    PyMem_Free(dt);
    PyMem_Free(numel);
    return rc;
}

static PyObject *py_amp_unscale(PyObject *self, PyObject *args) {
    PyObject *seq_obj;
    double inv_scale;
    if (!PyArg_ParseTuple(args, "Od:amp_unscale_", &seq_obj, &inv_scale)) return NULL;
    PyObject *seq = PySequence_Fast(seq_obj, "amp_unscale_: grads must be a sequence of tensors");
    if (!seq) return NULL;
    int found_inf = 0, has_cuda = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    /* Validate everything before touching anything: a bad entry must not leave half the grads unscaled. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!gm_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "amp_unscale_: grads[%zd] is %.100s, not a Tensor", i,
                         Py_TYPE(o)->tp_name);
            goto fail;
        }
        GMTensor *t = (GMTensor *)o;
        if (!gm_dtype_is_float(t->dtype)) {
            PyErr_Format(PyExc_TypeError, "amp_unscale_: grads[%zd] has dtype %s; gradients are floating point",
                         i, gm_dtype_name(t->dtype));
            goto fail;
        }
        if (!gm_is_contiguous(t)) {
            PyErr_Format(PyExc_ValueError, "amp_unscale_: grads[%zd] is not contiguous", i);
            goto fail;
        }
        if (t->device.type == GM_DEV_CUDA) has_cuda = 1;
    }
    (void)has_cuda; /* read by the CUDA build only */
#ifdef GM_WITH_CUDA
    if (has_cuda && unscale_cuda(seq, inv_scale, &found_inf) < 0) goto fail;
#endif
    if (unscale_cpu(seq, inv_scale, &found_inf) < 0) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        GMTensor *t = (GMTensor *)PySequence_Fast_GET_ITEM(seq, i);
        if (t->device.type != GM_DEV_META) gm_bump_version(t);
    }
    Py_DECREF(seq);
    return PyBool_FromLong(found_inf);
fail:
    Py_DECREF(seq);
    return NULL;
}

PyMethodDef gm_amp_methods[] = {
    {"amp_unscale_", py_amp_unscale, METH_VARARGS,
     "amp_unscale_(grads, inv_scale) -> bool: multiply each gradient by inv_scale in place; True if any "
     "element is inf or nan."},
    {NULL, NULL, 0, NULL},
};
