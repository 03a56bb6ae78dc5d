/* csrc/dist_nccl.c — gpumemnet.distributed's NCCL backend for CUDA tensors: libnccl.so.2 dlopen'ed at run time (as
 * MPI is, dist_mpi.h: a build never links it, so a CUDA build runs where NCCL is absent and then stages CUDA tensors
 * through MPI), communicators made from a unique id that python/gpumemnet/distributed/_nccl.py broadcasts over MPI
 * (llm.c's way), and collectives queued on the device's one stream (kernels/cuda/cuda_ctx.h), so they are ordered
 * with the kernels that make and read their tensors without any extra event, and the stream-ordered allocator may
 * reuse their blocks as for any kernel. Each Work records an event after its collective; test/wait poll it, and
 * ncclCommGetAsyncError, with a deadline. Without CUDA in the build every function raises RuntimeError.
 *
 * NCCL's C API is declared here from nccl.h (the parts used are stable since NCCL 2.10: ncclAvg, ncclBfloat16). */
#include "gm.h"

#include <dlfcn.h>
#include <sched.h>
#include <time.h>

#ifdef GM_WITH_CUDA
#include <cuda_runtime_api.h>

typedef struct { char internal[128]; } nccl_unique_id; /* NCCL_UNIQUE_ID_BYTES */
typedef void *nccl_comm;
enum { NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_INT64 = 4, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7,
       NCCL_FLOAT64 = 8, NCCL_BFLOAT16 = 9 };
enum { NCCL_SUCCESS = 0, NCCL_IN_PROGRESS = 7 };

static struct {
    void *lib;
    int (*get_version)(int *);
    int (*get_unique_id)(nccl_unique_id *);
    int (*comm_init_rank)(nccl_comm *, int, nccl_unique_id, int);
    int (*comm_destroy)(nccl_comm);
    int (*comm_abort)(nccl_comm);
    int (*comm_get_async_error)(nccl_comm, int *);
    const char *(*get_error_string)(int);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm, void *);
    int (*broadcast)(const void *, void *, size_t, int, int, nccl_comm, void *);
    int (*reduce)(const void *, void *, size_t, int, int, int, nccl_comm, void *);
    int (*all_gather)(const void *, void *, size_t, int, nccl_comm, void *);
    int (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm, void *);
} N;

static int nccl_fail(const char *what, int rc) {
    PyErr_Format(PyExc_RuntimeError, "%s failed in NCCL: %s (ncclResult %d)", what,
                 N.get_error_string ? N.get_error_string(rc) : "?", rc);
    return -1;
}

static int cuda_fail(const char *what, cudaError_t e) {
    PyErr_Format(PyExc_RuntimeError, "%s: CUDA error %s", what, cudaGetErrorString(e));
    return -1;
}

static PyObject *py_load(PyObject *self, PyObject *arg) {
    const char *path = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!path) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "path must be a str, got %R", arg);
        return NULL;
    }
    if (!N.lib) {
        dlerror();
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            PyErr_Format(PyExc_RuntimeError, "could not load NCCL from %s: %s", path, e ? e : "(no reason)");
            return NULL;
        }
        static const char *const names[] = {"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank",
                                            "ncclCommDestroy", "ncclCommAbort", "ncclCommGetAsyncError",
                                            "ncclGetErrorString", "ncclAllReduce", "ncclBroadcast", "ncclReduce",
                                            "ncclAllGather", "ncclReduceScatter"};
        void **slots[] = {(void **)&N.get_version, (void **)&N.get_unique_id, (void **)&N.comm_init_rank,
                          (void **)&N.comm_destroy, (void **)&N.comm_abort, (void **)&N.comm_get_async_error,
                          (void **)&N.get_error_string, (void **)&N.all_reduce, (void **)&N.broadcast,
                          (void **)&N.reduce, (void **)&N.all_gather, (void **)&N.reduce_scatter};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (!(*slots[i] = dlsym(lib, names[i]))) {
                dlclose(lib);
                memset(&N, 0, sizeof N);
                PyErr_Format(PyExc_RuntimeError, "%s has no %s (NCCL >= 2.10 is needed)", path, names[i]);
                return NULL;
            }
        }
        N.lib = lib;
    }
    int version = 0;
    N.get_version(&version);
    if (version < 21000) {
        PyErr_Format(PyExc_RuntimeError, "NCCL %d is too old: gpumemnet needs NCCL >= 2.10 (ncclAvg, bfloat16)",
                     version);
        return NULL;
    }
    return PyLong_FromLong(version);
}

static PyObject *py_unique_id(PyObject *self, PyObject *unused) {
    if (!N.lib) return PyErr_Format(PyExc_RuntimeError, "NCCL is not loaded");
    nccl_unique_id id;
    int rc = N.get_unique_id(&id);
    if (rc) return nccl_fail("ncclGetUniqueId", rc), NULL;
    return PyBytes_FromStringAndSize(id.internal, sizeof id.internal);
}

static void comm_destroy(PyObject *cap) {
    nccl_comm *c = PyCapsule_GetPointer(cap, "gpumemnet.nccl_comm");
    if (c && *c) N.comm_destroy(*c);
    PyMem_Free(c);
}

/* _C.dist_nccl_init(unique_id, nranks, rank, device) -> communicator. Blocks (without the GIL) until every rank
 * joined: the ranks call it right after the id's broadcast. */
static PyObject *py_init(PyObject *self, PyObject *args) {
    const char *idb;
    Py_ssize_t idlen;
    int nranks, rank, device;
    if (!PyArg_ParseTuple(args, "y#iii", &idb, &idlen, &nranks, &rank, &device)) return NULL;
    if (!N.lib) return PyErr_Format(PyExc_RuntimeError, "NCCL is not loaded");
    nccl_unique_id id;
    if (idlen != (Py_ssize_t)sizeof id.internal)
        return PyErr_Format(PyExc_ValueError, "unique_id must be %d bytes, got %zd", (int)sizeof id.internal, idlen);
    memcpy(id.internal, idb, sizeof id.internal);
    if (!gm_cuda_ctx_for((gm_device){GM_DEV_CUDA, device})) return NULL; /* makes the device current */
    nccl_comm *c = PyMem_Calloc(1, sizeof *c);
    if (!c) return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    cudaSetDevice(device); /* this thread's current device may differ without the GIL: set it again */
    rc = N.comm_init_rank(c, nranks, id, rank);
    Py_END_ALLOW_THREADS
    if (rc) {
        PyMem_Free(c);
        return nccl_fail("ncclCommInitRank", rc), NULL;
    }
    PyObject *cap = PyCapsule_New(c, "gpumemnet.nccl_comm", comm_destroy);
    if (!cap) N.comm_destroy(*c), PyMem_Free(c);
    return cap;
}

static PyObject *py_destroy(PyObject *self, PyObject *args) {
    PyObject *cap;
    int abort_;
    if (!PyArg_ParseTuple(args, "Op", &cap, &abort_)) return NULL;
    nccl_comm *c = PyCapsule_GetPointer(cap, "gpumemnet.nccl_comm");
    if (!c) return NULL;
    if (*c) {
        int rc = abort_ ? N.comm_abort(*c) : N.comm_destroy(*c);
        *c = NULL;
        if (rc) return nccl_fail(abort_ ? "ncclCommAbort" : "ncclCommDestroy", rc), NULL;
    }
    Py_RETURN_NONE;
}

typedef struct {
    cudaEvent_t done_event;
    int device, done;
    nccl_comm comm;
    PyObject *keep;
} nwork;

static void nwork_destroy(PyObject *cap) {
    nwork *w = PyCapsule_GetPointer(cap, "gpumemnet.nccl_work");
    if (!w) return;
    if (w->done_event) cudaEventDestroy(w->done_event);
    Py_XDECREF(w->keep);
    PyMem_Free(w);
}

static int nccl_dtype(gm_dtype dt) {
    switch (dt) {
    case GM_F32: return NCCL_FLOAT32;
    case GM_F64: return NCCL_FLOAT64;
    case GM_F16: return NCCL_FLOAT16;
    case GM_BF16: return NCCL_BFLOAT16;
    case GM_I64: return NCCL_INT64;
    case GM_I32: return NCCL_INT32;
    case GM_I8: return NCCL_INT8;
    case GM_BOOL: case GM_U8: return NCCL_UINT8;
    default: return -1; /* int16: NCCL has none; the caller stages it through MPI */
    }
}

static GMTensor *cuda_buffer(PyObject *o, const char *op, const char *arg, int device) {
    GMTensor *t = gm_tensor_arg(o, op, arg);
    if (!t) return NULL;
    if (t->device.type != GM_DEV_CUDA || t->device.index != device) {
        char buf[16];
        PyErr_Format(PyExc_ValueError, "%s: %s is on %s but the NCCL communicator is on cuda:%d", op, arg,
                     gm_device_str(t->device, buf), device);
        return NULL;
    }
    if (!gm_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be contiguous (call .contiguous() on it first)", op, arg);
        return NULL;
    }
    if (nccl_dtype(t->dtype) < 0) {
        PyErr_Format(PyExc_TypeError, "%s: NCCL has no %s type", op, gm_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

/* _C.dist_nccl_start(comm, device, kind, out, inp, op, root) -> work: kind all_reduce, broadcast, reduce (in place
 * on out), all_gather (out = world x inp), reduce_scatter (inp = world x out). op: 0 SUM, 1 PRODUCT, 2 MIN, 3 MAX,
 * 4 AVG (bool: SUM is MAX, PRODUCT is MIN). Sizes were checked by the caller against the world size; here only
 * that the two tensors agree in dtype and that out and inp fit the kind's ratio `ratio`. */
static PyObject *py_start(PyObject *self, PyObject *args) {
    PyObject *cap, *outo, *ino;
    const char *kind;
    int device, op, root, world;
    if (!PyArg_ParseTuple(args, "OisOOiii", &cap, &device, &kind, &outo, &ino, &op, &root, &world)) return NULL;
    nccl_comm *c = PyCapsule_GetPointer(cap, "gpumemnet.nccl_comm");
    if (!c) return NULL;
    if (!*c) return PyErr_Format(PyExc_RuntimeError, "%s: the NCCL communicator was destroyed", kind);
    GMTensor *out = cuda_buffer(outo, kind, "output", device), *in = NULL;
    if (!out) return NULL;
    if (ino != Py_None && !(in = cuda_buffer(ino, kind, "input", device))) return NULL;
    if (op < 0 || op > 4) return PyErr_Format(PyExc_ValueError, "%s: unknown reduce op %d", kind, op);
    static const int ops[5] = {0 /* sum */, 1 /* prod */, 3 /* min */, 2 /* max */, 4 /* avg */};
    int nop = ops[op], dt = nccl_dtype(out->dtype);
    if (out->dtype == GM_BOOL && op == 0) nop = 2;
    if (out->dtype == GM_BOOL && op == 1) nop = 3;
    size_t n = (size_t)gm_numel(out);
    int is_gather = strcmp(kind, "all_gather") == 0, is_rs = strcmp(kind, "reduce_scatter") == 0;
    if ((is_gather || is_rs) && (!in || in->dtype != out->dtype ||
                                 (is_gather ? gm_numel(out) != (int64_t)world * gm_numel(in)
                                            : gm_numel(in) != (int64_t)world * gm_numel(out))))
        return PyErr_Format(PyExc_ValueError, "%s: input and output do not match (dtype, world_size x elements)",
                            kind);
    gm_cuda_ctx *ctx = gm_cuda_ctx_for(out->device);
    if (!ctx) return NULL;
    nwork *w = PyMem_Calloc(1, sizeof *w);
    if (!w) return PyErr_NoMemory();
    w->device = device, w->comm = *c;
    w->keep = Py_BuildValue("(OO)", outo, ino);
    PyObject *wcap = w->keep ? PyCapsule_New(w, "gpumemnet.nccl_work", nwork_destroy) : NULL;
    if (!wcap) {
        Py_XDECREF(w->keep);
        PyMem_Free(w);
        return NULL;
    }
    char *po = gm_tensor_data(out);
    void *s = ctx->stream;
    int rc;
    if (strcmp(kind, "all_reduce") == 0) rc = N.all_reduce(po, po, n, dt, nop, *c, s);
    else if (strcmp(kind, "broadcast") == 0) rc = N.broadcast(po, po, n, dt, root, *c, s);
    else if (strcmp(kind, "reduce") == 0) rc = N.reduce(po, po, n, dt, nop, root, *c, s);
    else if (is_gather) rc = N.all_gather(gm_tensor_data(in), po, (size_t)gm_numel(in), dt, *c, s);
    else if (is_rs) rc = N.reduce_scatter(gm_tensor_data(in), po, n, dt, nop, *c, s);
    else {
        Py_DECREF(wcap);
        return PyErr_Format(PyExc_ValueError, "NCCL: unknown collective %s", kind);
    }
    if (rc) {
        Py_DECREF(wcap);
        return nccl_fail(kind, rc), NULL;
    }
    cudaError_t e = cudaEventCreateWithFlags(&w->done_event, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(w->done_event, (cudaStream_t)s);
    if (e != cudaSuccess) {
        Py_DECREF(wcap);
        return cuda_fail(kind, e), NULL;
    }
    gm_bump_version(out);
    return wcap;
}

/* 1 done, 0 pending, -1 error (with *what and the code set for the caller to raise with the GIL). */
static int poll_once(nwork *w, int *nccl_rc, cudaError_t *cuda_rc) {
    cudaError_t e = cudaEventQuery(w->done_event);
    if (e == cudaSuccess) return 1;
    if (e != cudaErrorNotReady) return *cuda_rc = e, -1;
    int async = 0;
    if (N.comm_get_async_error(w->comm, &async) == 0 && async != NCCL_SUCCESS && async != NCCL_IN_PROGRESS)
        return *nccl_rc = async, -1;
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static PyObject *raise_poll(int nccl_rc, cudaError_t cuda_rc) {
    if (nccl_rc) return nccl_fail("the NCCL communicator", nccl_rc), NULL;
    return cuda_fail("NCCL collective", cuda_rc), NULL;
}

static PyObject *py_test(PyObject *self, PyObject *cap) {
    nwork *w = PyCapsule_GetPointer(cap, "gpumemnet.nccl_work");
    if (!w) return NULL;
    int nrc = 0;
    cudaError_t crc = cudaSuccess;
    int r = w->done ? 1 : poll_once(w, &nrc, &crc);
    if (r < 0) return raise_poll(nrc, crc);
    if (r) w->done = 1;
    return PyBool_FromLong(r);
}

/* _C.dist_nccl_wait(work, timeout_s) -> True, or False when timeout_s passed first (the caller then aborts the
 * communicator, which is what ends a hung NCCL kernel). */
static PyObject *py_wait(PyObject *self, PyObject *args) {
    PyObject *cap;
    double timeout;
    if (!PyArg_ParseTuple(args, "Od", &cap, &timeout)) return NULL;
    nwork *w = PyCapsule_GetPointer(cap, "gpumemnet.nccl_work");
    if (!w) return NULL;
    double deadline = now_s() + timeout;
    for (long polls = 0;;) {
        int r = 0, nrc = 0, late = 0;
        cudaError_t crc = cudaSuccess;
        Py_BEGIN_ALLOW_THREADS
        double slice_end = now_s() + 0.1;
        while (!(r = w->done ? 1 : poll_once(w, &nrc, &crc))) {
            double t = now_s();
            if ((late = timeout >= 0 && t >= deadline) || t >= slice_end) break;
            struct timespec ts = {0, ++polls < 100 ? 2000 : 100000};
            nanosleep(&ts, NULL);
        }
        Py_END_ALLOW_THREADS
        if (r < 0) return raise_poll(nrc, crc);
        if (r) {
            w->done = 1;
            Py_RETURN_TRUE;
        }
        if (late) Py_RETURN_FALSE;
        if (PyErr_CheckSignals() < 0) return NULL;
    }
}

#else /* no CUDA in this build */
static PyObject *no_cuda(PyObject *self, PyObject *args) {
    PyErr_SetString(PyExc_RuntimeError, "NCCL: this build of gpumemnet has no CUDA");
    return NULL;
}
#define py_load no_cuda
#define py_unique_id no_cuda
#define py_init no_cuda
#define py_destroy no_cuda
#define py_start no_cuda
#define py_test no_cuda
#define py_wait no_cuda
#endif

PyMethodDef gm_dist_nccl_methods[] = {
    {"dist_nccl_load", py_load, METH_O, "dlopen libnccl: its version (e.g. 22703)."},
    {"dist_nccl_unique_id", py_unique_id, METH_NOARGS, "ncclGetUniqueId: 128 bytes for rank 0 to broadcast."},
    {"dist_nccl_init", py_init, METH_VARARGS, "ncclCommInitRank(unique_id, nranks, rank, device) -> communicator."},
    {"dist_nccl_destroy", py_destroy, METH_VARARGS, "ncclCommDestroy (or ncclCommAbort): (communicator, abort)."},
    {"dist_nccl_start", py_start, METH_VARARGS,
     "Queue a collective on the device's stream: (comm, device, kind, output, input, op, root, world_size)."},
    {"dist_nccl_test", py_test, METH_O, "Whether an NCCL collective completed."},
    {"dist_nccl_wait", py_wait, METH_VARARGS, "Wait for an NCCL collective, at most timeout_s: True, or False."},
    {NULL, NULL, 0, NULL},
};
