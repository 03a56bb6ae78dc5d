/* csrc/dist_mpi.c — gpumemnet.distributed's MPI backend, the Python face: load the library, initialise MPI on a
 * duplicate of MPI_COMM_WORLD, start non-blocking collectives on contiguous CPU tensors, and test or wait for them
 * with a deadline. Python (python/gpumemnet/distributed) decides everything a user sees: argument checks with
 * PyTorch's names, CUDA tensors staged through host memory, ReduceOp.AVG, the list variants, the timeout error.
 * Errors are RuntimeErrors carrying the MPI library's own text. Calls go through dist_mpi_lib.c's wrappers, which
 * hide the library's ABI (dist_mpi.h). */
#include "gm.h"
#include "dist_mpi.h"

#include <limits.h>
#include <sched.h>
#include <time.h>

/* A communicator with this process's rank in it and its size. */
typedef struct {
    gm_mpi_handle comm; /* 0 before init / after free */
    int rank, size;
} group_t;

static group_t world;  /* our duplicate of MPI_COMM_WORLD: the default process group */
static int init_here;
static gm_mpi_handle half_ops[2][GM_MPI_NOPS]; /* user ops for float16 [0] and bfloat16 [1] */

static int mpi_fail(const char *what, int rc) {
    char text[1024];
    gm_mpi_error_string(rc, text, sizeof text);
    PyErr_Format(PyExc_RuntimeError, "%s failed in MPI (%s): %s", what, gm_mpi.abi_name, text);
    return -1;
}

/* float16 / bfloat16 reductions: MPI has no 16-bit float type, so halves travel as uint16 under user-defined ops
 * that compute in float32 and round back once per pair (PyTorch's NCCL path rounds per step the same way). */
#define HALF_OP(name, TO_F, FROM_F, EXPR)                                                                       \
    static void name(void *in, void *inout, int *len, void *dt) {                                               \
        (void)dt;                                                                                               \
        const uint16_t *a = in;                                                                                 \
        uint16_t *b = inout;                                                                                    \
        for (int i = 0; i < *len; i++) {                                                                        \
            float x = TO_F(a[i]), y = TO_F(b[i]);                                                               \
            b[i] = FROM_F(EXPR);                                                                                \
        }                                                                                                       \
    }
HALF_OP(f16_sum, gm_half_to_float, gm_float_to_half, x + y)
HALF_OP(f16_prod, gm_half_to_float, gm_float_to_half, x * y)
HALF_OP(f16_min, gm_half_to_float, gm_float_to_half, y < x ? y : x)
HALF_OP(f16_max, gm_half_to_float, gm_float_to_half, y > x ? y : x)
HALF_OP(bf16_sum, gm_bf16_to_float, gm_float_to_bf16, x + y)
HALF_OP(bf16_prod, gm_bf16_to_float, gm_float_to_bf16, x * y)
HALF_OP(bf16_min, gm_bf16_to_float, gm_float_to_bf16, y < x ? y : x)
HALF_OP(bf16_max, gm_bf16_to_float, gm_float_to_bf16, y > x ? y : x)

static PyObject *py_load(PyObject *self, PyObject *arg) {
    const char *path = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!path) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "path must be a str, got %R", arg);
        return NULL;
    }
    if (gm_mpi_load(path) < 0) return NULL;
    char version[8192];
    gm_mpi_library_version(version, sizeof version);
    return Py_BuildValue("(ss)", gm_mpi.abi_name, version);
}

static PyObject *py_init(PyObject *self, PyObject *unused) {
    if (!gm_mpi.lib) {
        PyErr_SetString(PyExc_RuntimeError, "no MPI library is loaded");
        return NULL;
    }
    int flag = 0, rc, provided = 0;
    if (world.comm) return Py_BuildValue("(iii)", world.rank, world.size, init_here);
    gm_mpi_lock();
    int fin = 0;
    gm_mpi_finalized(&fin); /* (MPI_Initialized stays true after MPI_Finalize) */
    if (fin) {
        gm_mpi_unlock();
        PyErr_SetString(PyExc_RuntimeError, "MPI was finalized in this process (destroy_process_group): it cannot be "
                        "initialised again, MPI allows one MPI_Init per process");
        return NULL;
    }
    rc = gm_mpi_initialized(&flag);
    if (!rc && !flag) {
        Py_BEGIN_ALLOW_THREADS /* the launcher's wire-up can take a while */
        rc = gm_mpi_init_thread(&provided);
        Py_END_ALLOW_THREADS
        init_here = rc == 0;
    }
    /* Errors come back as codes (turned into exceptions) instead of the default MPI_ERRORS_ARE_FATAL. */
    if (!rc) rc = gm_mpi_comm_set_errhandler(gm_mpi.comm_world, gm_mpi.errors_return);
    /* A duplicate keeps our collectives apart from any other MPI user in the process (mpi4py, a library). */
    gm_mpi_handle dup = 0;
    if (!rc) rc = gm_mpi_comm_dup(gm_mpi.comm_world, &dup);
    if (!rc) rc = gm_mpi_comm_rank(dup, &world.rank);
    if (!rc) rc = gm_mpi_comm_size(dup, &world.size);
    void (*const fns[2][GM_MPI_NOPS])(void *, void *, int *, void *) = {
        {f16_sum, f16_prod, f16_min, f16_max}, {bf16_sum, bf16_prod, bf16_min, bf16_max}};
    for (int i = 0; i < 2 && !rc; i++)
        for (int j = 0; j < GM_MPI_NOPS && !rc; j++) rc = gm_mpi_op_create(fns[i][j], 1, &half_ops[i][j]);
    gm_mpi_unlock();
    if (rc) return mpi_fail("init_process_group", rc), NULL;
    world.comm = dup;
    return Py_BuildValue("(iii)", world.rank, world.size, init_here);
}

/* Free our communicator and ops (destroy_process_group); MPI itself stays up for a later init_process_group. */
static PyObject *py_free(PyObject *self, PyObject *unused) {
    if (!world.comm) Py_RETURN_NONE;
    gm_mpi_lock();
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < GM_MPI_NOPS; j++)
            if (half_ops[i][j]) gm_mpi_op_free(&half_ops[i][j]);
    memset(half_ops, 0, sizeof half_ops);
    int rc = gm_mpi_comm_free(&world.comm);
    world.comm = 0;
    gm_mpi_unlock();
    if (rc) return mpi_fail("destroy_process_group", rc), NULL;
    Py_RETURN_NONE;
}

/* MPI_Finalize at interpreter exit, and only for an MPI we initialised: one that mpi4py or the program started is
 * theirs to end. After it MPI cannot start again in this process. */
static PyObject *py_finalize(PyObject *self, PyObject *unused) {
    if (!gm_mpi.lib || !init_here) Py_RETURN_NONE;
    int fin = 0, rc = 0;
    gm_mpi_lock();
    gm_mpi_finalized(&fin);
    if (!fin) {
        Py_BEGIN_ALLOW_THREADS
        rc = gm_mpi_finalize();
        Py_END_ALLOW_THREADS
    }
    gm_mpi_unlock();
    if (rc) return mpi_fail("MPI_Finalize", rc), NULL;
    Py_RETURN_NONE;
}

static PyObject *py_abort(PyObject *self, PyObject *arg) {
    int code = PyLong_Check(arg) ? (int)PyLong_AsLong(arg) : 1;
    if (!gm_mpi.lib) Py_RETURN_NONE;
    /* No lock: another thread may hold it inside a wait, and MPI_Abort is meant to be called from anywhere. */
    gm_mpi_abort(gm_mpi.comm_world, code);
    Py_RETURN_NONE; /* MPI_Abort should not return; if it did, the caller exits the process */
}

/* ---- collectives ------------------------------------------------------------------------------------------------ */
typedef struct {
    gm_mpi_handle req; /* the library's request (dist_mpi_lib.c: written through this pointer) */
    int done;
    PyObject *keep;    /* the tensors the request reads or writes: alive until it completed */
} work_t;

static void work_destroy(PyObject *cap) {
    work_t *w = PyCapsule_GetPointer(cap, "gpumemnet.dist_work");
    if (!w) return;
    /* A request still in flight keeps writing into its tensors: they are leaked rather than freed under it
     * (python/gpumemnet/distributed keeps every pending Work alive until it completed, so this is only reached
     * when the interpreter exits mid-collective). */
    if (w->done) Py_XDECREF(w->keep), PyMem_Free(w);
}

static work_t *work_of(PyObject *cap) { return PyCapsule_GetPointer(cap, "gpumemnet.dist_work"); }

/* The MPI datatype of a tensor; -1 + TypeError naming the op and argument when there is none. */
static int mpi_dtype(const char *op, const char *arg, gm_dtype dt) {
    switch (dt) {
    case GM_F32: return GM_MPI_F32;
    case GM_F64: return GM_MPI_F64;
    case GM_F16: case GM_BF16: return GM_MPI_U16; /* reduced by our user ops (mpi_op) */
    case GM_I16: return GM_MPI_I16;
    case GM_I64: return GM_MPI_I64;
    case GM_BOOL: case GM_U8: return GM_MPI_U8;
    case GM_I8: return GM_MPI_I8;
    case GM_I32: return GM_MPI_I32;
    default: break;
    }
    PyErr_Format(PyExc_TypeError, "%s: %s has dtype %s, which cannot be communicated", op, arg, gm_dtype_name(dt));
    return -1;
}

/* The MPI op for reduce op `op` on dtype dt: halves use our user ops; bool reduces as PyTorch's does (SUM is a
 * logical or = MAX over 0/1, PRODUCT a logical and = MIN). */
static gm_mpi_handle mpi_op(int op, gm_dtype dt) {
    if (dt == GM_F16 || dt == GM_BF16) return half_ops[dt == GM_BF16][op];
    if (dt == GM_BOOL && op == GM_MPI_SUM) op = GM_MPI_MAX;
    if (dt == GM_BOOL && op == GM_MPI_PRODUCT) op = GM_MPI_MIN;
    return gm_mpi.op[op];
}

/* A contiguous CPU tensor argument (NULL + exception naming it otherwise). */
static GMTensor *buffer_arg(PyObject *o, const char *op, const char *arg) {
    GMTensor *t = gm_tensor_arg(o, op, arg);
    if (!t) return NULL;
    if (t->device.type != GM_DEV_CPU) {
        char buf[16];
        PyErr_Format(PyExc_ValueError, "%s: %s is on %s; the MPI transport takes CPU tensors", op, arg,
                     gm_device_str(t->device, buf));
        return NULL;
    }
    if (!gm_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be contiguous (call .contiguous() on it first)", op, arg);
        return NULL;
    }
    if (gm_numel(t) > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %lld elements; one MPI call moves at most %d", op, arg,
                     (long long)gm_numel(t), INT_MAX);
        return NULL;
    }
    return t;
}

/* Checks that `big` holds world_size times `small`'s elements, of the same dtype. */
static int check_pair(const char *op, int world_size, GMTensor *big, const char *bigname, GMTensor *small,
                      const char *smallname) {
    if (big->dtype != small->dtype) {
        PyErr_Format(PyExc_TypeError, "%s: %s is %s but %s is %s; they must have the same dtype", op, bigname,
                     gm_dtype_name(big->dtype), smallname, gm_dtype_name(small->dtype));
        return -1;
    }
    if (gm_numel(big) != (int64_t)world_size * gm_numel(small)) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %lld elements; expected world_size (%d) x the %lld of %s", op,
                     bigname, (long long)gm_numel(big), world_size, (long long)gm_numel(small), smallname);
        return -1;
    }
    return 0;
}

/* The group a collective runs on: the default one (None) or a dist_mpi_split capsule. NULL + exception. */
static const group_t *group_arg(PyObject *o, const char *kind) {
    const group_t *g = &world;
    if (o != Py_None && !(g = PyCapsule_GetPointer(o, "gpumemnet.dist_comm"))) return NULL;
    if (!world.comm || !g->comm) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s", kind, !world.comm ? "MPI is not initialised (init_process_group)"
                                                                      : "the group was destroyed");
        return NULL;
    }
    return g;
}

/* _C.dist_mpi_start(kind, out, inp, op, root[, group]) -> work. kind is one of all_reduce, broadcast, reduce (in
 * place on out), all_gather, gather (out gets world_size x inp), reduce_scatter, scatter (inp holds world_size x
 * out), barrier. out or inp is None where the kind has none (gather's out and scatter's inp off the root). group:
 * None (the default group) or a dist_mpi_split capsule; root and the sizes are the group's. */
static PyObject *py_start(PyObject *self, PyObject *args) {
    const char *kind;
    PyObject *outo, *ino, *groupo = Py_None;
    int op, root;
    if (!PyArg_ParseTuple(args, "sOOii|O", &kind, &outo, &ino, &op, &root, &groupo)) return NULL;
    const group_t *g = group_arg(groupo, kind);
    if (!g) return NULL;
    const gm_mpi_handle comm = g->comm;
    const int world_rank = g->rank, world_size = g->size;
    if (op < 0 || op >= GM_MPI_NOPS) {
        PyErr_Format(PyExc_ValueError, "%s: unknown reduce op %d", kind, op);
        return NULL;
    }
    if (root < 0 || root >= world_size) {
        PyErr_Format(PyExc_ValueError, "%s: rank %d is not in the group (world_size %d)", kind, root, world_size);
        return NULL;
    }
    GMTensor *out = NULL, *in = NULL;
    if (outo != Py_None && !(out = buffer_arg(outo, kind, "output"))) return NULL;
    if (ino != Py_None && !(in = buffer_arg(ino, kind, "input"))) return NULL;
    GMTensor *t = out ? out : in;
    int dt = t ? mpi_dtype(kind, out ? "output" : "input", t->dtype) : GM_MPI_U8;
    if (dt < 0) return NULL;
    int is = (strcmp(kind, "barrier") == 0) ? 0 : -1;
    int need_out = 1, need_in = 0;
    const char *k[] = {"all_reduce", "broadcast", "reduce", "all_gather", "gather", "reduce_scatter", "scatter"};
    for (int i = 0; i < 7 && is < 0; i++)
        if (strcmp(kind, k[i]) == 0) is = i + 1;
    if (is < 0) {
        PyErr_Format(PyExc_ValueError, "unknown collective %R", PyTuple_GET_ITEM(args, 0));
        return NULL;
    }
    if (is == 0) need_out = 0;
    if (is >= 4) need_in = 1;
    if (is == 5 && world_rank != root) need_out = 0; /* gather: only the root receives */
    if (is == 7 && world_rank != root) need_in = 0;  /* scatter: only the root sends */
    if ((need_out && !out) || (need_in && !in)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor", kind, need_out && !out ? "output" : "input");
        return NULL;
    }
    if (out && in && is >= 4 && (is <= 5 ? check_pair(kind, world_size, out, "output", in, "input")
                                          : check_pair(kind, world_size, in, "input", out, "output")) < 0)
        return NULL;
    work_t *w = PyMem_Calloc(1, sizeof *w);
    if (!w) return PyErr_NoMemory();
    w->keep = Py_BuildValue("(OOO)", outo, ino, groupo);
    PyObject *cap = w->keep ? PyCapsule_New(w, "gpumemnet.dist_work", work_destroy) : NULL;
    if (!cap) {
        Py_XDECREF(w->keep);
        PyMem_Free(w);
        return NULL;
    }
    int n_out = out ? (int)gm_numel(out) : 0, n_in = in ? (int)gm_numel(in) : 0;
    char *po = out ? gm_tensor_data(out) : NULL, *pi = in ? gm_tensor_data(in) : NULL;
    gm_mpi_handle d = gm_mpi.dt[dt], o = t ? mpi_op(op, t->dtype) : 0;
    int rc;
    gm_mpi_lock();
    switch (is) {
    case 0: rc = gm_mpi_ibarrier(comm, &w->req); break;
    case 1: rc = gm_mpi_iallreduce(gm_mpi.in_place, po, n_out, d, o, comm, &w->req); break;
    case 2: rc = gm_mpi_ibcast(po, n_out, d, root, comm, &w->req); break;
    case 3:
        rc = gm_mpi_ireduce(world_rank == root ? gm_mpi.in_place : po, world_rank == root ? po : NULL, n_out, d, o,
                            root, comm, &w->req);
        break;
    case 4: rc = gm_mpi_iallgather(pi, n_in, d, po, comm, &w->req); break;
    case 5: rc = gm_mpi_igather(pi, n_in, d, po, root, comm, &w->req); break;
    case 6: rc = gm_mpi_ireduce_scatter_block(pi, po, n_out, d, o, comm, &w->req); break;
    default: rc = gm_mpi_iscatter(pi, n_out, d, po, root, comm, &w->req); break;
    }
    gm_mpi_unlock();
    if (rc) {
        w->done = 1; /* nothing in flight: the destructor may free the tensors */
        Py_DECREF(cap);
        return mpi_fail(kind, rc), NULL;
    }
    if (out) gm_bump_version(out);
    return cap;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One MPI_Test (which also drives MPI's progress). 1 done, 0 not yet, -1 + exception. */
static int test_once(work_t *w, const char *what) {
    if (w->done) return 1;
    int flag = 0;
    gm_mpi_lock();
    int rc = gm_mpi_test(&w->req, &flag);
    gm_mpi_unlock();
    if (rc) return mpi_fail(what, rc);
    if (flag) w->done = 1;
    return flag;
}

static PyObject *py_test(PyObject *self, PyObject *cap) {
    work_t *w = work_of(cap);
    if (!w) return NULL;
    int r = test_once(w, "is_completed");
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* _C.dist_mpi_wait(work, timeout_s) -> True when the collective completed, False when timeout_s (< 0: none)
 * passed first. Polls MPI_Test without the GIL, backing off from spinning to 1 ms sleeps, and takes the GIL back
 * every 100 ms to let Ctrl-C through. */
static PyObject *py_wait(PyObject *self, PyObject *args) {
    PyObject *cap;
    double timeout;
    if (!PyArg_ParseTuple(args, "Od", &cap, &timeout)) return NULL;
    work_t *w = work_of(cap);
    if (!w) return NULL;
    double deadline = now_s() + timeout;
    long polls = 0;
    for (;;) {
        int flag = 0, rc = 0, late = 0;
        Py_BEGIN_ALLOW_THREADS
        double slice_end = now_s() + 0.1;
        for (;;) {
            gm_mpi_lock();
            rc = gm_mpi_test(&w->req, &flag);
            gm_mpi_unlock();
            if (rc || flag) break;
            double t = now_s();
            if ((late = timeout >= 0 && t >= deadline) || t >= slice_end) break;
            if (++polls < 200) {
                sched_yield();
            } else {
                long us = polls < 1000 ? 20 : 1000;
                struct timespec ts = {0, us * 1000};
                nanosleep(&ts, NULL);
            }
        }
        Py_END_ALLOW_THREADS
        if (rc) return mpi_fail("wait", rc), NULL;
        if (flag) {
            w->done = 1;
            Py_RETURN_TRUE;
        }
        if (late) Py_RETURN_FALSE;
        if (PyErr_CheckSignals() < 0) return NULL;
    }
}

/* ---- groups of fewer ranks (new_group) ------------------------------------------------------------------------ */
static void group_destroy(PyObject *cap) {
    /* The communicator itself is freed by dist_mpi_comm_free (destroy_process_group, on every member): MPI_Comm_free
     * is collective, so one left unfreed when its last reference goes is leaked rather than freed on one rank. */
    PyMem_Free(PyCapsule_GetPointer(cap, "gpumemnet.dist_comm"));
}

/* _C.dist_mpi_split(member, key) -> a group capsule, or None off the group: MPI_Comm_split of the default group's
 * communicator, which every rank of it must call (new_group first waits for them all with a timeout, so that this
 * blocking call cannot hang). key orders the members' ranks in the new group. */
static PyObject *py_split(PyObject *self, PyObject *args) {
    int member, key;
    if (!PyArg_ParseTuple(args, "pi", &member, &key)) return NULL;
    if (!world.comm) {
        PyErr_SetString(PyExc_RuntimeError, "new_group: MPI is not initialised (init_process_group)");
        return NULL;
    }
    group_t g = {0, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    gm_mpi_lock();
    rc = gm_mpi_comm_split(world.comm, member ? 0 : GM_MPI_UNDEFINED, key, &g.comm);
    if (!rc && member) rc = gm_mpi_comm_rank(g.comm, &g.rank);
    if (!rc && member) rc = gm_mpi_comm_size(g.comm, &g.size);
    gm_mpi_unlock();
    Py_END_ALLOW_THREADS
    if (rc) return mpi_fail("new_group", rc), NULL;
    if (!member) Py_RETURN_NONE; /* g.comm is MPI_COMM_NULL: nothing to free */
    group_t *h = PyMem_Malloc(sizeof *h);
    PyObject *cap = h ? PyCapsule_New(h, "gpumemnet.dist_comm", group_destroy) : NULL;
    if (!cap) {
        PyMem_Free(h);
        gm_mpi_lock();
        gm_mpi_comm_free(&g.comm);
        gm_mpi_unlock();
        return h ? NULL : PyErr_NoMemory();
    }
    *h = g;
    return cap;
}

/* _C.dist_mpi_group_info(group) -> (rank, size) in it. */
static PyObject *py_group_info(PyObject *self, PyObject *cap) {
    const group_t *g = group_arg(cap, "group");
    return g ? Py_BuildValue("(ii)", g->rank, g->size) : NULL;
}

/* _C.dist_mpi_comm_free(group): MPI_Comm_free (destroy_process_group(group)); the group can no longer be used. */
static PyObject *py_comm_free(PyObject *self, PyObject *cap) {
    group_t *g = PyCapsule_GetPointer(cap, "gpumemnet.dist_comm");
    if (!g) return NULL;
    if (!g->comm) Py_RETURN_NONE;
    gm_mpi_lock();
    int rc = gm_mpi_comm_free(&g->comm);
    gm_mpi_unlock();
    g->comm = 0;
    if (rc) return mpi_fail("destroy_process_group", rc), NULL;
    Py_RETURN_NONE;
}

static PyObject *py_abi(PyObject *self, PyObject *unused) {
    if (!gm_mpi.lib) Py_RETURN_NONE;
    return PyUnicode_FromString(gm_mpi.abi_name);
}

PyMethodDef gm_dist_mpi_methods[] = {
    {"dist_mpi_load", py_load, METH_O, "dlopen an MPI library: (its ABI, its version text)."},
    {"dist_mpi_abi", py_abi, METH_NOARGS, "The loaded MPI library's ABI, or None."},
    {"dist_mpi_init", py_init, METH_NOARGS, "Initialise MPI (if needed) and our communicator: (rank, size, "
     "initialised here)."},
    {"dist_mpi_free", py_free, METH_NOARGS, "Free our communicator and ops (MPI stays initialised)."},
    {"dist_mpi_finalize", py_finalize, METH_NOARGS, "MPI_Finalize, if dist_mpi_init initialised MPI."},
    {"dist_mpi_abort", py_abort, METH_O, "MPI_Abort(MPI_COMM_WORLD, code): ends every rank."},
    {"dist_mpi_start", py_start, METH_VARARGS, "Start a non-blocking collective: (kind, output, input, op, root[, "
     "group])."},
    {"dist_mpi_split", py_split, METH_VARARGS, "MPI_Comm_split of the default group: (member, key) -> group or None."},
    {"dist_mpi_group_info", py_group_info, METH_O, "(rank, size) of this process in a group."},
    {"dist_mpi_comm_free", py_comm_free, METH_O, "Free a group's communicator."},
    {"dist_mpi_test", py_test, METH_O, "Whether a started collective completed (drives MPI's progress)."},
    {"dist_mpi_wait", py_wait, METH_VARARGS, "Wait for a collective, at most timeout_s: True, or False if late."},
    {NULL, NULL, 0, NULL},
};
