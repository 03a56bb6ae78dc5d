/* csrc/ops_amp.c — _C.amp_unscale_(grads, inv_scale) -> found_inf: GradScaler's fused unscale and
 * non-finite check over a list of gradients, in place. */
#include "gm.h"
#include "../kernels/cpu/amp.h"

static PyObject *py_amp_unscale(PyObject *self, PyObject *args) {
    PyObject *seq_obj;
    double inv_scale;
    if (!PyArg_ParseTuple(args, "Od:amp_unscale_", &seq_obj, &inv_scale)) return NULL;
    PyObject *seq = PySequence_Fast(seq_obj, "amp_unscale_: grads must be a sequence of tensors");
    if (!seq) return NULL;
    int found_inf = 0;
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
        if (t->device.type == GM_DEV_CUDA) {
            PyErr_SetString(PyExc_RuntimeError, "amp_unscale_: no CUDA kernel for this op yet");
            goto fail;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        GMTensor *t = (GMTensor *)PySequence_Fast_GET_ITEM(seq, i);
        if (t->device.type == GM_DEV_META) continue;
        int st = cpu_amp_unscale_forward(gm_tensor_data(t), t->dtype, gm_numel(t), inv_scale, &found_inf,
                                         gm_num_threads);
        if (st != GM_OK) {
            PyErr_Format(PyExc_RuntimeError, "amp_unscale_: the CPU kernel failed with status %d", st);
            goto fail;
        }
        gm_bump_version(t);
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
