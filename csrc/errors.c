/* csrc/errors.c — the exceptions the C core raises that every layer needs: gm.OutOfMemoryError (raised by the
 * allocator, caught by autograd and the memory tools), gm.ArgumentError and gm.ArgumentTypeError (every ValueError
 * and TypeError csrc raises: gm.h redirects PyExc_ValueError and PyExc_TypeError to them), the one message for a
 * failed CPU kernel, and gm_errorf. The bottom of the C core: the allocator and the CUDA layer use it, it uses
 * nothing else in csrc/. */
#include "gm.h" /* Python.h first, as CPython asks */

/* This file makes the two classes, so it needs CPython's own ValueError and TypeError (gm.h's redirection off). */
#undef PyExc_ValueError
#undef PyExc_TypeError

#include <stdarg.h>
#include <stdio.h>

PyObject *GM_OutOfMemoryError;
PyObject *GM_ArgumentError;
PyObject *GM_ArgumentTypeError;

static PyObject *new_error(PyObject *module, const char *name, const char *doc, PyObject *first, PyObject *second) {
    char qualified[64];
    snprintf(qualified, sizeof qualified, "gpumemnet.%s", name);
    PyObject *bases = second ? PyTuple_Pack(2, first, second) : (Py_INCREF(first), first);
    if (!bases) return NULL;
    PyObject *cls = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    Py_DECREF(bases);
    if (!cls) return NULL;
    Py_INCREF(cls); /* one reference for the module, one for the C global */
    if (PyModule_AddObject(module, name, cls) < 0) {
        Py_DECREF(cls);
        Py_DECREF(cls);
        return NULL;
    }
    return cls;
}

/* Why two bases: PyTorch raises RuntimeError for nearly every bad shape, size or dtype (TORCH_CHECK), so its
 * users write `except RuntimeError`; Python (and gpumemnet until now) says ValueError or TypeError. A class
 * deriving from both is caught by either `except`, as NumPy's AxisError (ValueError and IndexError) is. */
int gm_errors_init(PyObject *module) {
    GM_OutOfMemoryError = new_error(
        module, "OutOfMemoryError",
        "A device ran out of memory (or hit the limit set with gpumemnet.memory.set_limit). The message and the "
        "attributes say what was asked, for what, and what holds the memory.",
        PyExc_RuntimeError, NULL);
    GM_ArgumentError = GM_OutOfMemoryError ? new_error(
        module, "ArgumentError",
        "A bad argument value (a shape, size, dim, device or hyperparameter). Both a ValueError and a "
        "RuntimeError, so `except ValueError` and PyTorch's `except RuntimeError` both catch it.",
        PyExc_ValueError, PyExc_RuntimeError) : NULL;
    GM_ArgumentTypeError = GM_ArgumentError ? new_error(
        module, "ArgumentTypeError",
        "An argument of the wrong type or dtype. Both a TypeError and a RuntimeError, so `except TypeError` and "
        "PyTorch's `except RuntimeError` both catch it.",
        PyExc_TypeError, PyExc_RuntimeError) : NULL;
    return GM_ArgumentTypeError ? 0 : -1;
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
