/* csrc/cuda_event.c — CUDA events for gm.cuda.Event (python/gpumemnet/cuda/_streams.py): create one, record it on a
 * device's compute stream (where gpumemnet queues every kernel of that device), ask whether it passed, wait for it,
 * and the milliseconds between two timing events. An event is a capsule whose destructor destroys it.
 *
 * In a build without CUDA every function raises RuntimeError; gm.cuda.Event checks for a device before it gets
 * here, so that message is a fallback. */
#include "gm.h"

#define EVENT_CAPSULE "gpumemnet.cuda_event"

#ifdef GM_WITH_CUDA
#include <cuda_runtime_api.h>

int gm_cuda_check_cudart(cudaError_t st, const char *call, const char *file, int line); /* cuda.c */
int gm_cuda_raise(const char *what);                                                        /* cuda.c */
#define RT_CHECK(call) gm_cuda_check_cudart((call), #call, __FILE__, __LINE__)

static void event_free(PyObject *capsule) {
    cudaEvent_t ev = (cudaEvent_t)PyCapsule_GetPointer(capsule, EVENT_CAPSULE);
    if (ev) (void)cudaEventDestroy(ev);
}

static cudaEvent_t event_arg(PyObject *o, const char *fn) {
    if (!PyCapsule_IsValid(o, EVENT_CAPSULE)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a CUDA event handle, got %.100s", fn, Py_TYPE(o)->tp_name);
        return NULL;
    }
    return (cudaEvent_t)PyCapsule_GetPointer(o, EVENT_CAPSULE);
}

/* _cuda_event_new(device, timing) -> handle: an event of that device (created with the device current). */
static PyObject *py_event_new(PyObject *self, PyObject *args) {
    int device, timing;
    if (!PyArg_ParseTuple(args, "ip:_cuda_event_new", &device, &timing)) return NULL;
    if (!gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, device})) return NULL; /* makes the device current */
    cudaEvent_t ev;
    if (RT_CHECK(cudaEventCreateWithFlags(&ev, timing ? cudaEventDefault : cudaEventDisableTiming)))
        return gm_cuda_raise("Event"), NULL;
    PyObject *capsule = PyCapsule_New(ev, EVENT_CAPSULE, event_free);
    if (!capsule) (void)cudaEventDestroy(ev);
    return capsule;
}

/* _cuda_event_record(handle, device): record after the work queued so far on the device's compute stream. */
static PyObject *py_event_record(PyObject *self, PyObject *args) {
    PyObject *o;
    int device;
    if (!PyArg_ParseTuple(args, "Oi:_cuda_event_record", &o, &device)) return NULL;
    cudaEvent_t ev = event_arg(o, "Event.record");
    gm_cuda_ctx *c = ev ? gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, device}) : NULL;
    if (!c) return NULL;
    if (RT_CHECK(cudaEventRecord(ev, (cudaStream_t)c->stream))) return gm_cuda_raise("Event.record"), NULL;
    Py_RETURN_NONE;
}

/* _cuda_event_query(handle) -> bool: whether the stream has passed the event (True for one never recorded). */
static PyObject *py_event_query(PyObject *self, PyObject *o) {
    cudaEvent_t ev = event_arg(o, "Event.query");
    if (!ev) return NULL;
    cudaError_t st = cudaEventQuery(ev);
    if (st == cudaErrorNotReady) Py_RETURN_FALSE;
    if (RT_CHECK(st)) return gm_cuda_raise("Event.query"), NULL;
    Py_RETURN_TRUE;
}

/* _cuda_event_synchronize(handle): wait (without the GIL) until the stream has passed the event. */
static PyObject *py_event_synchronize(PyObject *self, PyObject *o) {
    cudaEvent_t ev = event_arg(o, "Event.synchronize");
    if (!ev) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = RT_CHECK(cudaEventSynchronize(ev));
    Py_END_ALLOW_THREADS
    if (rc) return gm_cuda_raise("Event.synchronize"), NULL;
    Py_RETURN_NONE;
}

/* _cuda_event_elapsed(start, end) -> float: milliseconds between two recorded timing events (both passed). */
static PyObject *py_event_elapsed(PyObject *self, PyObject *args) {
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:_cuda_event_elapsed", &a, &b)) return NULL;
    cudaEvent_t start = event_arg(a, "Event.elapsed_time"), end = start ? event_arg(b, "Event.elapsed_time") : NULL;
    if (!end) return NULL;
    float ms = 0;
    if (RT_CHECK(cudaEventElapsedTime(&ms, start, end))) return gm_cuda_raise("Event.elapsed_time"), NULL;
    return PyFloat_FromDouble(ms);
}

#else /* no CUDA in this build */
static PyObject *no_cuda(const char *fn) {
    return PyErr_Format(PyExc_RuntimeError, "%s: gpumemnet was built without CUDA", fn);
}
static PyObject *py_event_new(PyObject *self, PyObject *args) { return no_cuda("Event"); }
static PyObject *py_event_record(PyObject *self, PyObject *args) { return no_cuda("Event.record"); }
static PyObject *py_event_query(PyObject *self, PyObject *o) { return no_cuda("Event.query"); }
static PyObject *py_event_synchronize(PyObject *self, PyObject *o) { return no_cuda("Event.synchronize"); }
static PyObject *py_event_elapsed(PyObject *self, PyObject *args) { return no_cuda("Event.elapsed_time"); }
#endif

PyMethodDef gm_cuda_event_methods[] = {
    {"_cuda_event_new", py_event_new, METH_VARARGS, "_cuda_event_new(device, timing) -> a CUDA event handle."},
    {"_cuda_event_record", py_event_record, METH_VARARGS,
     "_cuda_event_record(handle, device): record on the device's compute stream."},
    {"_cuda_event_query", py_event_query, METH_O, "_cuda_event_query(handle) -> whether the event has passed."},
    {"_cuda_event_synchronize", py_event_synchronize, METH_O, "_cuda_event_synchronize(handle): wait for it."},
    {"_cuda_event_elapsed", py_event_elapsed, METH_VARARGS,
     "_cuda_event_elapsed(start, end) -> milliseconds between two recorded timing events."},
    {NULL, NULL, 0, NULL},
};
