/* csrc/threads.c — how many threads gpumemnet's CPU kernels use, and when a CPU kernel gives the GIL away.
 *
 * The GIL policy (GM_KERNEL in gm.h): a kernel runs without the GIL when the op is large, so that other Python
 * threads (a data loader, a second training loop) run meanwhile; a small op keeps it. Releasing and taking the
 * GIL back costs two atomic handshakes when nobody waits, but when another thread is running Python it costs a
 * wait of up to the interpreter's switch interval (5 ms) to get it back: a 1 µs op must not pay that (a.sum() of
 * 16 floats next to a busy Python thread: 104 µs per call when it gave the GIL away, 1.1 µs keeping it). The size of
 * the op is the largest tensor (in elements) the op created or took as an argument since the last dispatch on
 * this thread: gm_empty and gm_tensor_arg note it, GM_KERNEL reads and resets it. Every op allocates its output
 * through gm_empty, so the rule is at least "output elements >= GM_NOGIL_MIN_WORK"; ops that parse their inputs
 * with gm_tensor_arg also count their inputs (a full reduction of a large tensor has a 1-element output), and a
 * fused optimizer step notes its whole group (ops_optim.c). _C._gil_released_kernels() counts, per thread, the
 * kernels that ran without the GIL (tests/test_gil_policy.py). A note left by an op whose kernel ran elsewhere
 * (elementwise's own threshold, conv, matmul) is taken by the next GM_KERNEL: at worst one small op then gives the
 * GIL away, as every op did before. */
#include "gm.h"
#include <omp.h>
#include <cblas.h>

int gm_num_threads = 1;
_Thread_local int64_t gm_op_work;
_Thread_local int64_t gm_gil_released_kernels;

void gm_threads_init(void) { gm_num_threads = omp_get_max_threads(); }

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) {
        PyErr_Format(PyExc_ValueError, "set_num_threads: expected a positive number of threads, got %ld", n);
        return NULL;
    }
    gm_num_threads = (int)n;
    omp_set_num_threads((int)n);
    scipy_openblas_set_num_threads((int)n); /* one knob for both pools, as torch.set_num_threads */
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *unused) { return PyLong_FromLong(gm_num_threads); }

static PyObject *py_gil_released_kernels(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(gm_gil_released_kernels);
}

PyMethodDef gm_threads_methods[] = {
    {"set_num_threads", py_set_num_threads, METH_O, "Threads used by gpumemnet's own CPU kernels."},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "Threads used by gpumemnet's own CPU kernels."},
    {"_gil_released_kernels", py_gil_released_kernels, METH_NOARGS,
     "How many CPU kernels the calling thread has run without the GIL (GM_KERNEL's policy; for tests)."},
    {NULL},
};
