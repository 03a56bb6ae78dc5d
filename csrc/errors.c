/* csrc/errors.c — the exceptions the C core raises that every layer needs: gm.OutOfMemoryError (raised by the
 * allocator, caught by autograd and the memory tools) the one message for a failed CPU kernel, and gm_errorf. The bottom of
 * the C core: the allocator and the CUDA layer use it, it uses nothing else in csrc/. */
#include "gm.h" /* Python.h first, as CPython asks */

#include <stdarg.h>
#include <stdio.h>

PyObject *GM_OutOfMemoryError;

int gm_errors_init(PyObject *module) {
    GM_OutOfMemoryError = PyErr_NewExceptionWithDoc(
        "gpumemnet.OutOfMemoryError",
        "A device ran out of memory (or hit the limit set with gpumemnet.memory.set_limit). The message and the "
        "attributes say what was asked, for what, and what holds the memory.",
        PyExc_RuntimeError, NULL);
    if (!GM_OutOfMemoryError) return -1;
    Py_INCREF(GM_OutOfMemoryError);
    return PyModule_AddObject(module, "OutOfMemoryError", GM_OutOfMemoryError);
}

/* PyErr_Format has no %g or %f (it copies the rest of the format unchanged), and messages that quote a float need
 * them: this formats with vsnprintf first. Always returns -1, so `return gm_errorf(...)` reads as a failure. */
int gm_errorf(PyObject *type, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyErr_SetString(type, msg);
    return -1;
}

int gm_kernel_status(const char *op, int status) {
    if (status == GM_OK) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: the CPU kernel failed with status %d%s", op, status,
                 status == GM_ERR_UNSUPPORTED ? " (a size exceeds BLAS's 32-bit integers, or the dtype is unsupported)"
                                              : " (an argument the validation missed; please report)");
    return -1;
}
