/* csrc/meta_target.c — the per-thread meta target (see meta_target.h). */
#include "meta_target.h"

static _Thread_local int target_cuda;   /* 0: meta stands for the CPU (the default), 1: for CUDA */
static _Thread_local int target_sms;    /* the CUDA target's multiprocessors, 0 when unknown */

int gm_meta_as_cuda(gm_device dev) { return dev.type == GM_DEV_META && target_cuda; }

int gm_meta_sm_count(void) { return target_sms; }

static PyObject *current(void) { return Py_BuildValue("(si)", target_cuda ? "cuda" : "cpu", target_sms); }

PyObject *gm_py_set_meta_target(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"target", "sm_count", NULL};
    const char *target;
    int sms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|i:_set_meta_target", kwlist, &target, &sms)) return NULL;
    int cuda;
    if (!strcmp(target, "cpu")) cuda = 0;
    else if (!strcmp(target, "cuda")) cuda = 1;
    else {
        PyErr_Format(PyExc_ValueError, "_set_meta_target: target must be 'cpu' or 'cuda', got '%s'", target);
        return NULL;
    }
    if (sms < 0) {
        PyErr_Format(PyExc_ValueError, "_set_meta_target: sm_count must be >= 0 (0: unknown), got %d", sms);
        return NULL;
    }
    PyObject *prev = current();
    if (!prev) return NULL;
    target_cuda = cuda;
    target_sms = cuda ? sms : 0;
    return prev;
}

PyObject *gm_py_get_meta_target(PyObject *self, PyObject *unused) { return current(); }
