/* csrc/random.c — the global random generator and the random fills: manual_seed, get/set_rng_state, rand,
 * randn, uniform_, normal_ (plus the _philox_block test hook).
 *
 * The generator is counter-based (Philox4x32-10, kernels/cpu/philox.h defines the stream): its whole state is
 * (seed, offset), two integers that checkpointing saves and restores to replay a segment's dropout masks
 * exactly (DESIGN.md). There is ONE generator for the process, shared by cpu, cuda and meta: a fill of n
 * elements on any device draws stream blocks [offset, offset + blocks(n)) and advances offset past them, so the
 * same program produces the same numbers on CPU and CUDA, and a rehearsal on meta (which allocates the same
 * tensors but computes nothing) advances the generator exactly as the real run would — whatever runs after it
 * sees the state it would have seen. Callers who want a rehearsal to leave no trace save and restore the state.
 * The state lives in C, guarded by the GIL (no function here releases it).
 *
 * Seeds: an int in [-2^63, 2^64); negative seeds are taken modulo 2^64 as PyTorch does. The seed at import is
 * PyTorch's default (67280421310721), so an unseeded run is reproducible from one run to the next. */
#include "gm.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>

#include "cpu/philox.h"

static uint64_t g_seed = GM_PHILOX_DEFAULT_SEED;
static uint64_t g_offset = 0;
/* 0 while an estimate runs on this thread (_set_meta_draws): its meta replay of a step then leaves the generator
 * where it was, so a script estimated before it trains (`gpumemnet run`) draws the numbers it draws without the
 * estimate. Per thread: a trainer in another thread keeps drawing from the shared generator meanwhile. */
static _Thread_local int meta_draws = 1;

/* A Python int in [lo_signed, 2^64) as uint64 (two's complement for negatives); -1 + exception. */
static int parse_u64(PyObject *o, uint64_t *out, int allow_negative, const char *op, const char *argname) {
    if (!PyLong_Check(o)) {
        if (PyIndex_Check(o) && !PyBool_Check(o)) {
            PyObject *i = PyNumber_Index(o);
            if (!i) return -1;
            int r = parse_u64(i, out, allow_negative, op, argname);
            Py_DECREF(i);
            return r;
        }
        PyErr_Format(PyExc_TypeError, "%s: %s must be an int, got %.100s", op, argname, Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow == 0) {
        if (v < 0 && !allow_negative) goto range;
        *out = (uint64_t)v;
        return 0;
    }
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto range;
        }
        *out = u;
        return 0;
    }
range:
    PyErr_Format(PyExc_ValueError, "%s: %s must be in [%s, 2**64), got %R", op, argname,
                 allow_negative ? "-2**63" : "0", o);
    return -1;
}

static PyObject *py_manual_seed(PyObject *self, PyObject *arg) {
    uint64_t seed;
    if (parse_u64(arg, &seed, 1, "manual_seed", "seed") < 0) return NULL;
    g_seed = seed;
    g_offset = 0;
    Py_RETURN_NONE;
}

static PyObject *py_get_rng_state(PyObject *self, PyObject *unused) {
    return Py_BuildValue("(KK)", (unsigned long long)g_seed, (unsigned long long)g_offset);
}

static PyObject *py_set_rng_state(PyObject *self, PyObject *args) {
    PyObject *so, *oo;
    uint64_t seed, offset;
    if (!PyArg_ParseTuple(args, "OO:set_rng_state", &so, &oo)) return NULL;
    if (parse_u64(so, &seed, 0, "set_rng_state", "seed") < 0 ||
        parse_u64(oo, &offset, 0, "set_rng_state", "offset") < 0)
        return NULL;
    g_seed = seed;
    g_offset = offset;
    Py_RETURN_NONE;
}

static int check_float_dtype(const char *op, gm_dtype dt) {
    if (gm_dtype_is_float(dt)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: random fills need a floating-point dtype (float32, float64, float16, "
                 "bfloat16), got %s", op, gm_dtype_name(dt));
    return -1;
}

/* Largest finite value of a float dtype: bounds outside it would make every sample inf. */
static double dtype_max(gm_dtype dt) {
    switch (dt) {
    case GM_F64: return DBL_MAX;
    case GM_F16: return 65504.0;
    case GM_BF16: return 3.3895313892515355e38; /* (2 - 2^-7) * 2^127 */
    default: return FLT_MAX;
    }
}

static int check_uniform_args(const char *op, gm_dtype dt, double low, double high) {
    if (!isfinite(low) || !isfinite(high))
        return gm_errorf(PyExc_ValueError, "%s: low and high must be finite, got low=%g, high=%g", op, low, high);
    if (low > high) return gm_errorf(PyExc_ValueError, "%s: expected low <= high, got low=%g, high=%g", op, low, high);
    double m = dtype_max(dt);
    if (fabs(low) > m || fabs(high) > m || !isfinite(high - low) || high - low > m)
        return gm_errorf(PyExc_ValueError, "%s: the range [%g, %g) does not fit %s (largest value %g, and high - low must not "
                           "exceed it)", op, low, high, gm_dtype_name(dt), m);
    return 0;
}

static int check_normal_args(const char *op, double mean, double std) {
    if (!isfinite(mean) || !isfinite(std))
        return gm_errorf(PyExc_ValueError, "%s: mean and std must be finite, got mean=%g, std=%g", op, mean, std);
    if (std < 0) return gm_errorf(PyExc_ValueError, "%s: std must be non-negative, got %g", op, std);
    return 0;
}

/* Run the kernel for a contiguous tensor t on its device (cpu or cuda; meta never gets here). */
static int run_fill(const char *op, GMTensor *t, int dist, double a, double b, uint64_t offset) {
    int64_t n = gm_numel(t);
    if (t->device.type == GM_DEV_CPU) {
        int st = gm_philox_fill(gm_tensor_data(t), t->dtype, dist, n, g_seed, offset, a, b, gm_num_threads);
        if (st == GM_OK) return 0;
        PyErr_Format(PyExc_RuntimeError, "%s: the CPU kernel failed with status %d (an argument the validation "
                     "missed; please report)", op, st);
        return -1;
    }
#ifdef GM_WITH_CUDA
    gm_cuda_ctx *ctx = gm_cuda_ctx_for(t->device);
    if (!ctx) return -1;
    int st = gm_philox_fill_cuda(gm_tensor_data(t), t->dtype, dist, n, g_seed, offset, a, b, t->device.index,
                                 ctx->stream, ctx->err, sizeof ctx->err);
    return gm_cuda_kernel_status(op, st, ctx);
#else
    char d[16];
    PyErr_Format(PyExc_RuntimeError, "%s: tensor on %s, but this build of gpumemnet has no CUDA support", op,
                 gm_device_str(t->device, d));
    return -1;
#endif
}

/* Fill t (any strides) with stream elements 0..numel-1 in row-major order and advance the generator. A
 * non-contiguous t is filled through a contiguous temporary (tagged workspace) so that the numbers depend only
 * on the logical shape; the temporary is allocated on meta too, so meta's allocations match the real run's. */
static int fill(const char *op, GMTensor *t, int dist, double a, double b) {
    if (check_float_dtype(op, t->dtype) < 0) return -1;
    const int64_t n = gm_numel(t);
    const uint64_t offset = g_offset, used = gm_philox_blocks(t->dtype, n);
    if (n > 0) {
        if (gm_is_contiguous(t)) {
            if (t->device.type != GM_DEV_META && run_fill(op, t, dist, a, b, offset) < 0) return -1;
        } else {
            GMTensor *tmp = gm_empty(t->ndim, t->shape, t->dtype, t->device);
            if (!tmp) return -1;
            gm_block_set_category(tmp->storage->block, GM_CAT_WORKSPACE);
            /* the copy runs on meta too: it moves no value there, but refuses an expanded t as the CPU does */
            int rc = (t->device.type != GM_DEV_META && run_fill(op, tmp, dist, a, b, offset) < 0) ||
                     gm_copy_into(t, tmp) < 0 ? -1 : 0;
            Py_DECREF(tmp);
            if (rc < 0) return -1;
        }
    }
    if (t->device.type != GM_DEV_META || meta_draws) g_offset = offset + used; /* modulo 2^64, like the counter */
    gm_bump_version(t);
    return 0;
}

/* rand/randn(shape, dtype=float32, device="cpu") */
static PyObject *create(const char *op, int dist, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"shape", "dtype", "device", NULL};
    PyObject *shp, *dto = Py_None, *devo = Py_None;
    int ndim;
    int64_t shape[GM_MAX_DIMS];
    gm_dtype dt = GM_F32;
    gm_device dev = {GM_DEV_CPU, 0};
    char fmt[32];
    snprintf(fmt, sizeof fmt, "O|OO:%s", op);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shp, &dto, &devo)) return NULL;
    if (gm_parse_shape(shp, &ndim, shape, "shape") < 0) return NULL;
    if (dto != Py_None && gm_parse_dtype(dto, &dt, "dtype") < 0) return NULL;
    if (devo != Py_None && gm_parse_device(devo, &dev, "device") < 0) return NULL;
    if (check_float_dtype(op, dt) < 0) return NULL;
    GMTensor *t = gm_empty(ndim, shape, dt, dev);
    if (!t) return NULL;
    if (fill(op, t, dist, 0.0, 1.0) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
}

static PyObject *py_rand(PyObject *self, PyObject *args, PyObject *kwargs) {
    return create("rand", GM_RNG_UNIFORM, args, kwargs);
}
static PyObject *py_randn(PyObject *self, PyObject *args, PyObject *kwargs) {
    return create("randn", GM_RNG_NORMAL, args, kwargs);
}

static GMTensor *tensor_arg(PyObject *o, const char *op) {
    if (gm_is_tensor(o)) return (GMTensor *)o;
    PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, got %.100s", op, Py_TYPE(o)->tp_name);
    return NULL;
}

static PyObject *py_uniform_(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"t", "low", "high", NULL};
    PyObject *to;
    double low = 0.0, high = 1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|dd:uniform_", kwlist, &to, &low, &high)) return NULL;
    GMTensor *t = tensor_arg(to, "uniform_");
    if (!t || check_float_dtype("uniform_", t->dtype) < 0 || check_uniform_args("uniform_", t->dtype, low, high) < 0)
        return NULL;
    if (fill("uniform_", t, GM_RNG_UNIFORM, low, high) < 0) return NULL;
    return Py_NewRef(to);
}

static PyObject *py_normal_(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"t", "mean", "std", NULL};
    PyObject *to;
    double mean = 0.0, std = 1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|dd:normal_", kwlist, &to, &mean, &std)) return NULL;
    GMTensor *t = tensor_arg(to, "normal_");
    if (!t || check_float_dtype("normal_", t->dtype) < 0 || check_normal_args("normal_", mean, std) < 0)
        return NULL;
    if (fill("normal_", t, GM_RNG_NORMAL, mean, std) < 0) return NULL;
    return Py_NewRef(to);
}

/* _philox_block(counter4, key2) -> 4 ints: the raw block function, for known-answer tests. */
static PyObject *py_philox_block(PyObject *self, PyObject *args) {
    unsigned int c[4], k[2];
    if (!PyArg_ParseTuple(args, "(IIII)(II):_philox_block", &c[0], &c[1], &c[2], &c[3], &k[0], &k[1]))
        return NULL;
    uint32_t ctr[4] = {c[0], c[1], c[2], c[3]}, key[2] = {k[0], k[1]}, out[4];
    philox4x32_10(ctr, key, out);
    return Py_BuildValue("(kkkk)", (unsigned long)out[0], (unsigned long)out[1], (unsigned long)out[2],
                         (unsigned long)out[3]);
}

static PyObject *py_set_meta_draws(PyObject *self, PyObject *on) {
    int v = PyObject_IsTrue(on);
    if (v < 0) return NULL;
    int prev = meta_draws;
    meta_draws = v;
    return PyBool_FromLong(prev);
}

PyMethodDef gm_random_methods[] = {
    {"manual_seed", py_manual_seed, METH_O, "manual_seed(seed): set the generator to (seed, offset 0)."},
    {"get_rng_state", py_get_rng_state, METH_NOARGS, "get_rng_state() -> (seed, offset)."},
    {"_set_meta_draws", py_set_meta_draws, METH_O,
     "_set_meta_draws(on) -> previous: whether fills of meta tensors on this thread advance the generator."},
    {"set_rng_state", py_set_rng_state, METH_VARARGS, "set_rng_state(seed, offset)."},
    {"rand", (PyCFunction)(void (*)(void))py_rand, METH_VARARGS | METH_KEYWORDS,
     "rand(shape, dtype=float32, device='cpu'): uniform on [0, 1)."},
    {"randn", (PyCFunction)(void (*)(void))py_randn, METH_VARARGS | METH_KEYWORDS,
     "randn(shape, dtype=float32, device='cpu'): standard normal."},
    {"uniform_", (PyCFunction)(void (*)(void))py_uniform_, METH_VARARGS | METH_KEYWORDS,
     "uniform_(t, low=0, high=1): fill t in place from U[low, high)."},
    {"normal_", (PyCFunction)(void (*)(void))py_normal_, METH_VARARGS | METH_KEYWORDS,
     "normal_(t, mean=0, std=1): fill t in place from N(mean, std^2)."},
    {"_philox_block", py_philox_block, METH_VARARGS,
     "_philox_block((c0, c1, c2, c3), (k0, k1)) -> the 4 words of Philox4x32-10 (test hook)."},
    {NULL, NULL, 0, NULL},
};
