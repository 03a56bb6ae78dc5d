/* csrc/ophelpers.c — small helpers every op family shares: the tensor argument check and scratch tensors tagged
 * `workspace`. Above the Tensor object (tensor.c), below every op. A kernel status becomes an exception in
 * errors.c (CPU) and cuda.c (CUDA); GM_KERNEL in gm.h dispatches a kernel call. */
#include "gm.h"

GMTensor *gm_tensor_arg(PyObject *o, const char *op, const char *argname) {
    if (gm_is_tensor(o)) {
        gm_note_work(gm_numel((GMTensor *)o)); /* the op's size, for GM_KERNEL's GIL policy (threads.c) */
        return (GMTensor *)o;
    }
    PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor, got %.100s", op, argname, Py_TYPE(o)->tp_name);
    return NULL;
}

GMTensor *gm_empty_workspace(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev) {
    int prev = gm_swap_category(GM_CAT_WORKSPACE);
    GMTensor *t = gm_empty(ndim, shape, dt, dev);
    gm_swap_category(prev);
    return t;
}
