/* csrc/meta_target.c — the per-thread meta target (see meta_target.h). */
#include "meta_target.h"

#ifdef GM_WITH_CUDA
int gm_cuda_device_count(void); /* csrc/cuda.c */
#endif

static _Thread_local int target_cuda;        /* 0: meta stands for the CPU (the default), 1: for CUDA */
static _Thread_local int target_sms;         /* the CUDA target's multiprocessors, 0 when unknown */
static _Thread_local int target_cudnn = -1;  /* the CUDA device whose cuDNN is asked, -1: none */

int gm_meta_as_cuda(gm_device dev) { return dev.type == GM_DEV_META && target_cuda; }

int gm_meta_sm_count(void) { return target_sms; }

int gm_meta_cudnn_device(void) { return target_cuda ? target_cudnn : -1; }

static PyObject *current(void) {
    if (!target_cuda) return Py_BuildValue("(si)", "cpu", 0);
    if (target_cudnn < 0) return Py_BuildValue("(si)", "cuda", target_sms);
    char name[32];
    snprintf(name, sizeof name, "cuda:%d", target_cudnn);
    return Py_BuildValue("(si)", name, target_sms);
}

/* "cuda:N" -> N when this process has CUDA device N (its cuDNN can be asked), else -1 with a ValueError. */
static int cudnn_device(const char *target) {
    char *end;
    long i = strtol(target + 5, &end, 10);
    int n = 0;
#ifdef GM_WITH_CUDA
    n = gm_cuda_device_count();
#endif
    if (target[5] < '0' || target[5] > '9' || *end || i < 0 || i >= n) {
        PyErr_Format(PyExc_ValueError, "_set_meta_target: target '%s' names no CUDA device of this process (it has "
                     "%d): 'cuda' stands for CUDA with no cuDNN to ask", target, n);
        return -1;
    }
    return (int)i;
}

PyObject *gm_py_set_meta_target(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"target", "sm_count", NULL};
    const char *target;
    int sms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|i:_set_meta_target", kwlist, &target, &sms)) return NULL;
    int cuda, cudnn = -1;
    if (!strcmp(target, "cpu")) cuda = 0;
    else if (!strcmp(target, "cuda")) cuda = 1;
    else if (!strncmp(target, "cuda:", 5)) {
        if ((cudnn = cudnn_device(target)) < 0) return NULL;
        cuda = 1;
    } else {
        PyErr_Format(PyExc_ValueError, "_set_meta_target: target must be 'cpu', 'cuda' or 'cuda:N', got '%s'",
                     target);
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
    target_cudnn = cudnn;
    return prev;
}

PyObject *gm_py_get_meta_target(PyObject *self, PyObject *unused) { return current(); }
