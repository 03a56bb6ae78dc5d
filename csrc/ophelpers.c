/* csrc/ophelpers.c — small helpers every op family shares: argument type checks, turning a kernel status into
 * an exception (GM_KERNEL in gm.h dispatches a kernel call and uses these), and scratch tensors tagged
 * `workspace`. */
#include "gm.h"

GMTensor *gm_tensor_arg(PyObject *o, const char *op, const char *argname) {
    if (gm_is_tensor(o)) return (GMTensor *)o;
    PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor, got %.100s", op, argname, Py_TYPE(o)->tp_name);
    return NULL;
}

int gm_kernel_status(const char *op, int status) {
    if (status == GM_OK) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: the CPU kernel failed with status %d%s", op, status,
                 status == GM_ERR_UNSUPPORTED ? " (a size exceeds BLAS's 32-bit integers, or the dtype is unsupported)"
                                              : " (an argument the validation missed; please report)");
    return -1;
}

GMTensor *gm_empty_workspace(int ndim, const int64_t *shape, gm_dtype dt, gm_device dev) {
    int prev = gm_swap_category(GM_CAT_WORKSPACE);
    GMTensor *t = gm_empty(ndim, shape, dt, dev);
    gm_swap_category(prev);
    return t;
}
