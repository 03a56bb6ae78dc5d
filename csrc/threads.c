/* csrc/threads.c — how many threads gpumemnet's CPU kernels use (OpenMP and OpenBLAS alike). */
#include "gm.h"
#include <omp.h>
#include <cblas.h>

int gm_num_threads = 1;

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

PyMethodDef gm_threads_methods[] = {
    {"set_num_threads", py_set_num_threads, METH_O, "Threads used by gpumemnet's own CPU kernels."},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "Threads used by gpumemnet's own CPU kernels."},
    {NULL},
};
