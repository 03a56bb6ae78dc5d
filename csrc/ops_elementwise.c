/* csrc/ops_elementwise.c — _C.binary, unary, clamp, where, copy_, fill_ and the C helper gm_copy_into.
 *
 * Each op: parse tensor-or-number operands, check devices, compute the result dtype by PyTorch's promotion rules,
 * broadcast shapes, check `out`, then allocate (cast temporaries, the output) through the allocator and run the
 * backend's kernel (kernels/cpu/elementwise.c, kernels/cuda/elementwise.cu). On meta everything but the kernel
 * happens, so the allocator sees the same temporaries a real run makes; CUDA allocates exactly what the CPU does.
 * Kernels take one dtype per op, so an operand of another dtype is cast into a temporary first; the temporary
 * has the operand's own shape (not the broadcast one), so a broadcast scalar-like tensor costs a few bytes. */
#include "gm.h"
#include "../kernels/cpu/elementwise.h"
#ifdef GM_WITH_CUDA
#include "../kernels/cuda/elementwise.h"
#endif
#include "ops_elementwise_args.h"

/* Kernels this large run without the GIL so that other Python threads (data loading) keep going. */
#define EW_NOGIL_MIN 65536

static const char *const binary_names[GM_EW_NBINARY] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                                        "eq", "ne", "lt", "le", "gt", "ge", "fmod",
                                                        "remainder", "atan2", "floor_divide"};
static const char *const unary_names[GM_EW_NUNARY] = {
    "neg", "exp", "log", "sqrt", "abs", "sign", "logical_not", "round", "floor", "ceil", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "erf", "erfc", "log1p", "expm1", "log2", "log10", "exp2"};

/* ---- devices, shapes, memory overlap ------------------------------------------------------------------------- */
/* The op's device: that of its first operand that is not a 0-d CPU tensor (those become numbers on another device,
 * ew_host_number), else the first operand's; every other tensor, `out` included, must be on it. */
static int ew_same_device(const char *op, ew_arg *args, int n, GMTensor *out, gm_device *dev) {
    GMTensor *first = NULL;
    for (int i = 0; i < n && !first; i++)
        if (args[i].present && args[i].t && !ew_is_host_0d(args[i].t)) first = args[i].t;
    for (int i = 0; i <= n; i++) {
        GMTensor *t = i < n ? (args[i].present ? args[i].t : NULL) : out;
        if (!t) continue;
        if (!first) first = t;
        else if (i < n && ew_is_host_0d(t) && !gm_device_eq(t->device, first->device)) ew_host_number(&args[i]);
        else if (gm_check_same_device(op, first, t) < 0) return -1;
    }
    *dev = first->device;
    return 0;
}

/* Broadcast the shapes of the tensor operands (numbers are 0-d) into ndim/shape, NumPy style. */
static int ew_broadcast(const char *op, const ew_arg *args, int n, int *ndim, int64_t *shape) {
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (args[i].present && args[i].t && args[i].t->ndim > nd) nd = args[i].t->ndim;
    for (int d = 0; d < nd; d++) shape[d] = 1;
    for (int i = 0; i < n; i++) {
        const GMTensor *t = args[i].present ? args[i].t : NULL;
        if (!t) continue;
        for (int d = 0; d < t->ndim; d++) {
            int od = nd - t->ndim + d;
            int64_t s = t->shape[d];
            if (s == shape[od] || s == 1) continue;
            if (shape[od] == 1) {
                shape[od] = s;
                continue;
            }
            /* name every tensor shape: "shapes (2, 3) and (4,) cannot be broadcast: dim 1 has sizes 3 and 4" */
            char msg[4 * GM_SHAPE_BUF], buf[GM_SHAPE_BUF];
            size_t pos = 0;
            int shown = 0, total = 0;
            for (int j = 0; j < n; j++) total += args[j].present && args[j].t;
            for (int j = 0; j < n && pos < sizeof msg - GM_SHAPE_BUF; j++) {
                if (!args[j].present || !args[j].t) continue;
                const char *sep = shown == 0 ? "" : shown == total - 1 ? " and " : ", ";
                pos += snprintf(msg + pos, sizeof msg - pos, "%s%s", sep,
                                gm_shape_str(args[j].t->ndim, args[j].t->shape, buf));
                shown++;
            }
            PyErr_Format(PyExc_ValueError, "%s: shapes %s cannot be broadcast: dim %d has sizes %lld and %lld", op,
                         msg, od, (long long)shape[od], (long long)s);
            return -1;
        }
    }
    *ndim = nd;
    return 0;
}

/* Byte strides of t read as a tensor of the broadcast shape (ndim, shape): 0 on new and size-1 dims. */
static void ew_bcast_strides(const GMTensor *t, int ndim, const int64_t *shape, int64_t *out) {
    int64_t item = (int64_t)gm_dtype_size(t->dtype);
    for (int d = 0; d < ndim; d++) {
        int td = d - (ndim - t->ndim);
        out[d] = (td < 0 || t->shape[td] == 1 || shape[d] == 1) ? 0 : t->strides[td] * item;
    }
}

/* [lo, hi): the bytes t's elements occupy (an empty range for an empty tensor). */
static void ew_byte_range(const GMTensor *t, uintptr_t *lo, uintptr_t *hi) {
    uintptr_t base = (uintptr_t)gm_tensor_data(t);
    int64_t item = (int64_t)gm_dtype_size(t->dtype), neg = 0, pos = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            *lo = *hi = base;
            return;
        }
        int64_t ext = (t->shape[d] - 1) * t->strides[d] * item;
        if (ext < 0) neg += ext;
        else pos += ext;
    }
    *lo = base + neg;
    *hi = base + pos + item;
}

/* Whether reading src (broadcast to dst's shape) while writing dst elementwise could read an already-written
 * element: they share memory and are not the very same elements in the same order (in-place a += b is fine). */
static int ew_overlaps(const GMTensor *dst, const GMTensor *src) {
    if (dst->storage != src->storage) return 0;
    uintptr_t dlo, dhi, slo, shi;
    ew_byte_range(dst, &dlo, &dhi);
    ew_byte_range(src, &slo, &shi);
    if (dlo >= dhi || slo >= shi || dhi <= slo || shi <= dlo) return 0;
    if (dst->dtype != src->dtype || dst->offset != src->offset) return 1;
    int64_t sd[GM_MAX_DIMS], ss[GM_MAX_DIMS];
    gm_byte_strides(dst, sd);
    ew_bcast_strides(src, dst->ndim, dst->shape, ss);
    for (int d = 0; d < dst->ndim; d++)
        if (dst->shape[d] > 1 && sd[d] != ss[d]) return 1;
    return 0;
}

/* An output whose elements alias each other (an expanded view) cannot be written elementwise. */
static int ew_check_writable(const char *op, const GMTensor *out, const char *argname) {
    for (int d = 0; d < out->ndim; d++)
        if (out->shape[d] > 1 && out->strides[d] == 0) {
            char buf[GM_SHAPE_BUF];
            PyErr_Format(PyExc_RuntimeError, "%s: %s (shape %s) is a broadcast view in which several elements share "
                         "one memory location; write into a contiguous tensor (e.g. .clone()) instead", op, argname,
                         gm_shape_str(out->ndim, out->shape, buf));
            return -1;
        }
    return 0;
}

static int ew_kernel_status(const char *op, int st) {
    if (st == GM_OK) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: the CPU kernel failed with status %d (%s)", op, st,
                 st == GM_ERR_UNSUPPORTED ? "unsupported dtype" : "bad arguments");
    return -1;
}

/* Run one CPU kernel call, without the GIL when it is big enough to matter. */
#define EW_RUN(st, numel, call)                                                                                \
    do {                                                                                                       \
        if ((numel) >= EW_NOGIL_MIN) {                                                                         \
            Py_BEGIN_ALLOW_THREADS st = (call);                                                                \
            Py_END_ALLOW_THREADS                                                                               \
        } else {                                                                                               \
            st = (call);                                                                                       \
        }                                                                                                      \
    } while (0)

/* Run the kernel of device `dev` (never meta: callers skip the kernel there) and set rc to 0, or -1 with the
 * exception set. CUDA_CALL may use `ctx`, the device's context. A CUDA launch only queues work on the device's
 * stream, so it keeps the GIL. In a build without CUDA no tensor can live on a CUDA device (the allocator refuses
 * to create one), so only the CPU call is compiled. */
#ifdef GM_WITH_CUDA
#define EW_DISPATCH(rc, op, dev, numel, CPU_CALL, CUDA_CALL)                                                   \
    do {                                                                                                       \
        if ((dev).type == GM_DEV_CUDA) {                                                                       \
            gm_cuda_ctx *ctx = gm_cuda_ctx_for(dev);                                                           \
            rc = ctx ? gm_cuda_kernel_status(op, (CUDA_CALL), ctx) : -1;                                       \
        } else {                                                                                               \
            int st_;                                                                                           \
            EW_RUN(st_, numel, CPU_CALL);                                                                      \
            rc = ew_kernel_status(op, st_);                                                                    \
        }                                                                                                      \
    } while (0)
#else
#define EW_DISPATCH(rc, op, dev, numel, CPU_CALL, CUDA_CALL)                                                   \
    do {                                                                                                       \
        int st_;                                                                                               \
        EW_RUN(st_, numel, CPU_CALL);                                                                          \
        rc = ew_kernel_status(op, st_);                                                                        \
    } while (0)
#endif

/* dst <- src, casting, src broadcast to dst's shape. Validated by the caller; no overlap handling; nothing runs
 * on meta. */
static int ew_copy_raw(const char *op, GMTensor *dst, GMTensor *src) {
    if (dst->device.type == GM_DEV_META) return 0;
    int64_t sd[GM_MAX_DIMS], ss[GM_MAX_DIMS], n = gm_numel(dst);
    if (n == 0) return 0;
    gm_byte_strides(dst, sd);
    ew_bcast_strides(src, dst->ndim, dst->shape, ss);
    int rc;
    EW_DISPATCH(rc, op, dst->device, n,
                elementwise_cast_forward(gm_tensor_data(dst), sd, dst->dtype, gm_tensor_data(src), ss, src->dtype,
                                         dst->ndim, dst->shape, gm_num_threads),
                cuda_elementwise_cast_forward(gm_tensor_data(dst), sd, dst->dtype, gm_tensor_data(src), ss,
                                              src->dtype, dst->ndim, dst->shape, ctx));
    return rc;
}

/* A new tensor holding src's values as dtype dt (src's shape, contiguous). */
static GMTensor *ew_cast_new(const char *op, GMTensor *src, gm_dtype dt) {
    GMTensor *t = gm_empty_workspace(src->ndim, src->shape, dt, src->device); /* freed when the op is done */
    if (t && ew_copy_raw(op, t, src) < 0) Py_CLEAR(t);
    return t;
}

/* Make operand x readable by a kernel computing in cdt and writing `dst` (may be NULL): cast it into a temporary
 * when its dtype differs, copy it when it overlaps dst, then record its broadcast byte strides. */
static int ew_prepare(const char *op, ew_arg *x, gm_dtype cdt, GMTensor *dst, int ndim, const int64_t *shape) {
    if (!x->present || !x->t) return 0;
    if (x->t->dtype != cdt || (dst && ew_overlaps(dst, x->t))) {
        x->tmp = ew_cast_new(op, x->t, cdt);
        if (!x->tmp) return -1;
    }
    ew_bcast_strides(x->tmp ? x->tmp : x->t, ndim, shape, x->bst);
    return 0;
}

/* The data pointer of a prepared operand, NULL for a number or an absent operand (the kernels' convention). */
static const char *ew_data(const ew_arg *x) {
    if (!x->present || !x->t) return NULL;
    return gm_tensor_data(x->tmp ? x->tmp : x->t);
}

static const gm_scalar *ew_scalar(const ew_arg *x) { return x->present && !x->t ? &x->s : NULL; }

/* The output of an op: `out` itself when given with the result dtype, else a fresh tensor (which is copied into
 * out afterwards when out has another dtype). Checks out's shape and dtype. */
static GMTensor *ew_output(const char *op, GMTensor *out, gm_dtype rdt, int ndim, const int64_t *shape,
                           gm_device dev) {
    if (out) {
        int same = out->ndim == ndim;
        for (int d = 0; same && d < ndim; d++) same = out->shape[d] == shape[d];
        if (!same) {
            char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "%s: out has shape %s but the result has shape %s", op,
                         gm_shape_str(out->ndim, out->shape, a), gm_shape_str(ndim, shape, b));
            return NULL;
        }
        if (ew_check_out_dtype(op, rdt, out) < 0 || ew_check_writable(op, out, "out") < 0) return NULL;
        if (out->dtype == rdt) {
            Py_INCREF(out);
            return out;
        }
    }
    return gm_empty(ndim, shape, rdt, dev);
}

/* Finish an op whose kernel wrote `res`: move it into out if out was given with another dtype, bump out's version.
 * Steals res; returns the new reference to hand back to Python. */
static PyObject *ew_finish(const char *op, GMTensor *res, GMTensor *out) {
    if (!out) return (PyObject *)res;
    if (res != out) {
        int rc = ew_copy_raw(op, out, res);
        Py_DECREF(res);
        if (rc < 0) return NULL;
        Py_INCREF(out);
    }
    gm_bump_version(out);
    return (PyObject *)out;
}

/* ---- uint8, int8, int16 and int32: computed in int64, wrapped back ----------------------------------------------
 * The kernels compute in float32/64 (float16/bfloat16 stored), int64 and bool. An op on the narrower integers
 * (torchvision's AutoAugment does int32 arithmetic, its ToTensor uint8) runs on int64 copies of them and its int64
 * result is cast back, which wraps exactly as their own two's-complement arithmetic would: PyTorch's values, one
 * transient int64 copy of each operand and of the result more. */

/* o as an int64 workspace copy when it is a tensor of one of those dtypes, else o itself; a new reference. */
static PyObject *ew_widened(PyObject *o) {
    if (!gm_is_tensor(o) || !gm_dtype_is_narrow(((GMTensor *)o)->dtype)) return Py_NewRef(o);
    return (PyObject *)ew_cast_new("cast", (GMTensor *)o, GM_I64);
}

/* The result r of the op on widened operands, back in dtype dt when it is int64 (anything else, such as true
 * division's float, as it is), or written into out. Steals r. */
static PyObject *ew_narrowed(const char *op, PyObject *r, gm_dtype dt, GMTensor *out) {
    if (!r) return NULL;
    GMTensor *w = (GMTensor *)r, *res = ew_output(op, out, w->dtype == GM_I64 ? dt : w->dtype, w->ndim, w->shape,
                                                  w->device);
    if (res && ew_copy_raw(op, res, w) < 0) Py_CLEAR(res);
    Py_DECREF(r);
    return res ? ew_finish(op, res, out) : NULL;
}

/* fn(self, args) with every narrow tensor among args widened and no out=, its result narrowed to dt or into out. */
static PyObject *ew_via_int64(const char *op, PyObject *(*fn)(PyObject *, PyObject *, PyObject *), PyObject *self,
                              PyObject *args, gm_dtype dt, GMTensor *out) {
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *wide = PyTuple_New(n), *r = NULL;
    if (!wide) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *w = ew_widened(PyTuple_GET_ITEM(args, i));
        if (!w) goto done;
        PyTuple_SET_ITEM(wide, i, w);
    }
    r = fn(self, wide, NULL);
done:
    Py_DECREF(wide);
    return ew_narrowed(op, r, dt, out);
}

/* ---- binary --------------------------------------------------------------------------------------------------- */
static PyObject *binary_impl(int op, PyObject *ao, PyObject *bo, PyObject *outo);

static PyObject *py_binary(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "a", "b", "out", NULL};
    int op;
    PyObject *ao, *bo, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOO|O:binary", kwlist, &op, &ao, &bo, &outo)) return NULL;
    return binary_impl(op, ao, bo, outo);
}

PyObject *gm_binary(int op, PyObject *a, PyObject *b) { return binary_impl(op, a, b, Py_None); }

PyObject *gm_binary_out(int op, PyObject *a, PyObject *b, PyObject *out) { return binary_impl(op, a, b, out); }

/* Integer x // 0, x % 0 and fmod(x, 0): PyTorch's CPU kernels raise its RuntimeError "ZeroDivisionError" (its CUDA
 * kernels do not, nor do ours: a check there would synchronise). 1 if the divisor b, as the kernel reads it (int64,
 * broadcast byte strides over the output's shape), holds a zero. */
static int ew_int_divisor_has_zero(const ew_arg *b, int ndim, const int64_t *shape, int64_t n) {
    if (!b->t) return b->s.i == 0;
    const char *p = ew_data(b);
    int64_t idx[GM_MAX_DIMS] = {0}, off = 0;
    for (int64_t k = 0; k < n; k++) {
        if (*(const int64_t *)(p + off) == 0) return 1;
        for (int d = ndim - 1; d >= 0; d--) { /* the next element in row-major order */
            if (++idx[d] < shape[d]) {
                off += b->bst[d];
                break;
            }
            off -= b->bst[d] * (shape[d] - 1);
            idx[d] = 0;
        }
    }
    return 0;
}

static PyObject *binary_impl(int op, PyObject *ao, PyObject *bo, PyObject *outo) {
    if (op < 0 || op >= GM_EW_NBINARY) {
        PyErr_Format(PyExc_ValueError, "binary: unknown op code %d (expected 0..%d)", op, GM_EW_NBINARY - 1);
        return NULL;
    }
    char name[32];
    snprintf(name, sizeof name, "binary(%s)", binary_names[op]);
    ew_arg x[2];
    GMTensor *out, *res = NULL;
    gm_device dev;
    int ndim;
    int64_t shape[GM_MAX_DIMS];
    if (ew_parse_arg(ao, &x[0], name, "a") < 0 || ew_parse_arg(bo, &x[1], name, "b") < 0 ||
        ew_parse_out(outo, &out, name) < 0)
        return NULL;
    if (!x[0].t && !x[1].t) {
        PyErr_Format(PyExc_TypeError, "%s: at least one of a and b must be a Tensor", name);
        return NULL;
    }
    if (ew_same_device(name, x, 2, out, &dev) < 0) return NULL;

    gm_dtype cdt = ew_result_type(x, 2), rdt;
    if (gm_dtype_is_narrow(cdt)) {
        if (gm_ew_is_comparison(op)) {
            cdt = GM_I64; /* compared in int64: the same answer */
        } else { /* computed in int64 and wrapped back (above) */
            PyObject *a = ew_widened(ao), *b = a ? ew_widened(bo) : NULL;
            PyObject *r = b ? binary_impl(op, a, b, Py_None) : NULL;
            Py_XDECREF(a);
            Py_XDECREF(b);
            return ew_narrowed(name, r, cdt, out);
        }
    }
    if ((op == GM_EW_DIV || op == GM_EW_ATAN2) && !gm_dtype_is_float(cdt))
        cdt = gm_default_float; /* true division */
    if ((op == GM_EW_FMOD || op == GM_EW_REMAINDER || op == GM_EW_FLOORDIV) && cdt == GM_BOOL) {
        PyErr_Format(PyExc_NotImplementedError, "%s: not implemented for bool tensors (convert them to int first)",
                     name);
        return NULL;
    }
    for (int i = 0; op == GM_EW_SUB && i < 2; i++) /* PyTorch refuses any bool operand, number or tensor */
        if (x[i].t ? x[i].t->dtype == GM_BOOL : x[i].host_dtype ? x[i].host_dtype - 1 == GM_BOOL
                                                                : x[i].kind == EW_NUM_BOOL) {
            PyErr_Format(PyExc_NotImplementedError, "%s: Subtraction, the `-` operator, with a bool tensor is not "
                         "supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator "
                         "instead.", name);
            return NULL;
        }
    rdt = gm_ew_is_comparison(op) ? GM_BOOL : cdt;
    if (ew_check_scalars(name, x, 2, cdt) < 0 || ew_broadcast(name, x, 2, &ndim, shape) < 0) return NULL;
    if (!(res = ew_output(name, out, rdt, ndim, shape, dev))) return NULL;
    /* float32 + bfloat16 (autocast's weight gradients into float32 .grad): b is widened as it is read, with no
     * float32 copy of it, on every device and on meta alike (so the bytes counted agree) */
    int widen = op == GM_EW_ADD && cdt == GM_F32 && x[0].t && x[1].t && x[1].t->dtype == GM_BF16 &&
                !ew_overlaps(res, x[1].t);
    if (widen) ew_bcast_strides(x[1].t, ndim, shape, x[1].bst);
    if (ew_prepare(name, &x[0], cdt, res, ndim, shape) < 0 || (!widen && ew_prepare(name, &x[1], cdt, res, ndim, shape) < 0))
        goto fail;
    int64_t n = gm_numel(res);
    if ((op == GM_EW_FMOD || op == GM_EW_REMAINDER || op == GM_EW_FLOORDIV) && cdt == GM_I64 &&
        dev.type == GM_DEV_CPU && n > 0 && ew_int_divisor_has_zero(&x[1], ndim, shape, n)) {
        PyErr_Format(PyExc_RuntimeError, "ZeroDivisionError: %s of integers by zero (the divisor b holds a 0)", name);
        goto fail;
    }
    if (dev.type != GM_DEV_META && n > 0) {
        int64_t so[GM_MAX_DIMS];
        gm_byte_strides(res, so);
        int rc;
        if (widen)
            EW_DISPATCH(rc, name, dev, n,
                        elementwise_add_widen_forward(gm_tensor_data(res), so, ew_data(&x[0]), x[0].bst,
                                                      ew_data(&x[1]), x[1].bst, GM_BF16, ndim, shape, gm_num_threads),
                        cuda_elementwise_add_widen_forward(gm_tensor_data(res), so, ew_data(&x[0]), x[0].bst,
                                                           ew_data(&x[1]), x[1].bst, GM_BF16, ndim, shape, ctx));
        else
            EW_DISPATCH(rc, name, dev, n,
                        elementwise_binary_forward(gm_tensor_data(res), so, ew_data(&x[0]), x[0].bst, ew_scalar(&x[0]),
                                                   ew_data(&x[1]), x[1].bst, ew_scalar(&x[1]), op, cdt, ndim, shape,
                                                   gm_num_threads),
                        cuda_elementwise_binary_forward(gm_tensor_data(res), so, ew_data(&x[0]), x[0].bst,
                                                        ew_scalar(&x[0]), ew_data(&x[1]), x[1].bst, ew_scalar(&x[1]),
                                                        op, cdt, ndim, shape, ctx));
        if (rc < 0) goto fail;
    }
    ew_release(x, 2);
    return ew_finish(name, res, out);
fail:
    ew_release(x, 2);
    Py_XDECREF(res);
    return NULL;
}

/* ---- unary ---------------------------------------------------------------------------------------------------- */
static PyObject *py_unary(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "a", "out", NULL};
    int op;
    PyObject *ao, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO|O:unary", kwlist, &op, &ao, &outo)) return NULL;
    if (op < 0 || op >= GM_EW_NUNARY) {
        PyErr_Format(PyExc_ValueError, "unary: unknown op code %d (expected 0..%d)", op, GM_EW_NUNARY - 1);
        return NULL;
    }
    char name[32];
    snprintf(name, sizeof name, "unary(%s)", unary_names[op]);
    if (!gm_is_tensor(ao)) {
        PyErr_Format(PyExc_TypeError, "%s: a must be a Tensor, got %.100s", name, Py_TYPE(ao)->tp_name);
        return NULL;
    }
    ew_arg x;
    GMTensor *out, *res = NULL;
    gm_device dev;
    if (ew_parse_arg(ao, &x, name, "a") < 0 || ew_parse_out(outo, &out, name) < 0 ||
        ew_same_device(name, &x, 1, out, &dev) < 0)
        return NULL;
    GMTensor *a = x.t;
    gm_dtype cdt = a->dtype, rdt;
    if (gm_dtype_is_narrow(cdt)) { /* computed in int64 and wrapped back */
        PyObject *in = Py_BuildValue("(iO)", op, ao), *r = in ? ew_via_int64(name, py_unary, self, in, cdt, out) : NULL;
        Py_XDECREF(in);
        return r;
    }
    if (op == GM_EW_NEG && cdt == GM_BOOL) {
        PyErr_Format(PyExc_TypeError, "%s: negating a bool tensor is not supported; use logical_not instead", name);
        return NULL;
    }
    if (gm_ew_unary_promotes(op) && !gm_dtype_is_float(cdt)) cdt = gm_default_float;
    if ((op == GM_EW_ROUND || op == GM_EW_FLOOR || op == GM_EW_CEIL) && !gm_dtype_is_float(cdt)) {
        /* PyTorch returns an integer tensor unchanged; the Python layer does that, so reaching here is a misuse */
        PyErr_Format(PyExc_TypeError, "%s: expects a floating-point tensor, got %s", name, gm_dtype_name(cdt));
        return NULL;
    }
    rdt = op == GM_EW_LOGICAL_NOT ? GM_BOOL : cdt;
    if (!(res = ew_output(name, out, rdt, a->ndim, a->shape, dev))) return NULL;
    if (ew_prepare(name, &x, cdt, res, a->ndim, a->shape) < 0) goto fail;
    int64_t n = gm_numel(res);
    if (dev.type != GM_DEV_META && n > 0) {
        int64_t so[GM_MAX_DIMS];
        gm_byte_strides(res, so);
        int rc;
        EW_DISPATCH(rc, name, dev, n,
                    elementwise_unary_forward(gm_tensor_data(res), so, ew_data(&x), x.bst, op, cdt, a->ndim,
                                              a->shape, gm_num_threads),
                    cuda_elementwise_unary_forward(gm_tensor_data(res), so, ew_data(&x), x.bst, op, cdt, a->ndim,
                                                   a->shape, ctx));
        if (rc < 0) goto fail;
    }
    ew_release(&x, 1);
    return ew_finish(name, res, out);
fail:
    ew_release(&x, 1);
    Py_XDECREF(res);
    return NULL;
}

/* clamp(x[0], x[1], x[2]) or, with is_where, where(x[0], x[1], x[2]) into res over the broadcast shape: the two
 * kernels share one signature (x[1] and x[2] a tensor or a scalar each). Nothing runs on meta or when res is
 * empty. 0, or -1 + exception. */
static int ew_run3(const char *name, int is_where, GMTensor *res, ew_arg *x, gm_dtype cdt, int ndim,
                   const int64_t *shape, gm_device dev) {
    int64_t n = gm_numel(res);
    if (dev.type == GM_DEV_META || n == 0) return 0;
    int64_t so[GM_MAX_DIMS];
    gm_byte_strides(res, so);
    int rc;
    EW_DISPATCH(rc, name, dev, n,
                (is_where ? elementwise_where_forward : elementwise_clamp_forward)(
                    gm_tensor_data(res), so, ew_data(&x[0]), x[0].bst, ew_data(&x[1]), x[1].bst, ew_scalar(&x[1]),
                    ew_data(&x[2]), x[2].bst, ew_scalar(&x[2]), cdt, ndim, shape, gm_num_threads),
                (is_where ? cuda_elementwise_where_forward : cuda_elementwise_clamp_forward)(
                    gm_tensor_data(res), so, ew_data(&x[0]), x[0].bst, ew_data(&x[1]), x[1].bst, ew_scalar(&x[1]),
                    ew_data(&x[2]), x[2].bst, ew_scalar(&x[2]), cdt, ndim, shape, ctx));
    return rc;
}

/* ---- clamp ---------------------------------------------------------------------------------------------------- */
static PyObject *py_clamp(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"a", "min", "max", "out", NULL};
    const char *name = "clamp";
    PyObject *ao, *lo = Py_None, *hi = Py_None, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO:clamp", kwlist, &ao, &lo, &hi, &outo)) return NULL;
    if (!gm_is_tensor(ao)) {
        PyErr_Format(PyExc_TypeError, "clamp: a must be a Tensor, got %.100s", Py_TYPE(ao)->tp_name);
        return NULL;
    }
    ew_arg x[3];
    GMTensor *out, *res = NULL;
    gm_device dev;
    int ndim;
    int64_t shape[GM_MAX_DIMS];
    if (ew_parse_arg(ao, &x[0], name, "a") < 0 || ew_parse_opt(lo, &x[1], name, "min") < 0 ||
        ew_parse_opt(hi, &x[2], name, "max") < 0 || ew_parse_out(outo, &out, name) < 0)
        return NULL;
    if (!x[1].present && !x[2].present) {
        PyErr_SetString(PyExc_ValueError, "clamp: at least one of 'min' or 'max' must not be None");
        return NULL;
    }
    if (ew_same_device(name, x, 3, out, &dev) < 0) return NULL;
    gm_dtype cdt = ew_result_type(x, 3);
    if (gm_dtype_is_narrow(cdt)) { /* computed in int64 and wrapped back */
        PyObject *in = PyTuple_Pack(3, ao, lo, hi), *r = in ? ew_via_int64(name, py_clamp, self, in, cdt, out) : NULL;
        Py_XDECREF(in);
        return r;
    }
    if (cdt == GM_BOOL) {
        PyErr_SetString(PyExc_TypeError, "clamp: not supported for bool tensors with bool bounds");
        return NULL;
    }
    if (ew_check_scalars(name, x, 3, cdt) < 0 || ew_broadcast(name, x, 3, &ndim, shape) < 0) return NULL;
    if (!(res = ew_output(name, out, cdt, ndim, shape, dev))) return NULL;
    for (int i = 0; i < 3; i++)
        if (ew_prepare(name, &x[i], cdt, res, ndim, shape) < 0) goto fail;
    if (ew_run3(name, 0, res, x, cdt, ndim, shape, dev) < 0) goto fail;
    ew_release(x, 3);
    return ew_finish(name, res, out);
fail:
    ew_release(x, 3);
    Py_XDECREF(res);
    return NULL;
}

/* ---- where ---------------------------------------------------------------------------------------------------- */
static PyObject *py_where(PyObject *self, PyObject *args);
static PyObject *where_no_kwargs(PyObject *self, PyObject *args, PyObject *kwargs) { return py_where(self, args); }

static PyObject *where_impl(PyObject *self, PyObject *args, PyObject *co, PyObject *ao, PyObject *bo);

/* A 0-d CPU condition with values on another device is moved there first (the kernels read it from memory). */
static PyObject *py_where(PyObject *self, PyObject *args) {
    PyObject *co, *ao, *bo;
    if (!PyArg_ParseTuple(args, "OOO:where", &co, &ao, &bo)) return NULL;
    GMTensor *on = NULL;
    for (int i = 0; i < 2 && !on; i++) {
        PyObject *v = i ? bo : ao;
        if (gm_is_tensor(v) && !ew_is_host_0d((GMTensor *)v)) on = (GMTensor *)v;
    }
    if (!gm_is_tensor(co) || !ew_is_host_0d((GMTensor *)co) || !on || on->device.type == GM_DEV_CPU)
        return where_impl(self, args, co, ao, bo);
    PyObject *moved = (PyObject *)gm_to_device((GMTensor *)co, on->device);
    PyObject *r = moved ? where_impl(self, args, moved, ao, bo) : NULL;
    Py_XDECREF(moved);
    return r;
}

static PyObject *where_impl(PyObject *self, PyObject *args, PyObject *co, PyObject *ao, PyObject *bo) {
    const char *name = "where";
    if (!gm_is_tensor(co) || ((GMTensor *)co)->dtype != GM_BOOL) {
        PyErr_Format(PyExc_TypeError, "where: condition must be a bool Tensor, got %s",
                     gm_is_tensor(co) ? gm_dtype_name(((GMTensor *)co)->dtype) : Py_TYPE(co)->tp_name);
        return NULL;
    }
    /* x[0] is the condition: it takes part in devices and broadcasting, not in the result dtype */
    ew_arg x[3];
    GMTensor *res = NULL;
    gm_device dev;
    int ndim;
    int64_t shape[GM_MAX_DIMS];
    if (ew_parse_arg(co, &x[0], name, "condition") < 0 || ew_parse_arg(ao, &x[1], name, "a") < 0 ||
        ew_parse_arg(bo, &x[2], name, "b") < 0 || ew_same_device(name, x, 3, NULL, &dev) < 0)
        return NULL;
    gm_dtype cdt = ew_result_type(x + 1, 2);
    if (gm_dtype_is_narrow(cdt)) /* computed in int64 and wrapped back */
        return ew_via_int64(name, where_no_kwargs, self, args, cdt, NULL);
    if (ew_check_scalars(name, x + 1, 2, cdt) < 0 || ew_broadcast(name, x, 3, &ndim, shape) < 0) return NULL;
    if (!(res = gm_empty(ndim, shape, cdt, dev))) return NULL;
    /* where has no out=, so nothing it reads can overlap what it writes */
    if (ew_prepare(name, &x[0], GM_BOOL, NULL, ndim, shape) < 0 ||
        ew_prepare(name, &x[1], cdt, NULL, ndim, shape) < 0 || ew_prepare(name, &x[2], cdt, NULL, ndim, shape) < 0)
        goto fail;
    if (ew_run3(name, 1, res, x, cdt, ndim, shape, dev) < 0) goto fail;
    ew_release(x, 3);
    return (PyObject *)res;
fail:
    ew_release(x, 3);
    Py_XDECREF(res);
    return NULL;
}

/* ---- copy_ / fill_ -------------------------------------------------------------------------------------------- */
static int copy_into(const char *op, GMTensor *dst, GMTensor *src) {
    const int across = !gm_device_eq(dst->device, src->device) && dst->device.type != GM_DEV_META;
    if (across && src->device.type == GM_DEV_META) {
        char a[16];
        PyErr_Format(PyExc_RuntimeError, "%s: cannot copy out of a meta tensor into a %s tensor: meta tensors "
                     "have shapes but no data", op, gm_device_str(dst->device, a));
        return -1;
    }
    /* src must broadcast to dst's shape without changing it */
    int ok = src->ndim <= dst->ndim, bad = -1;
    for (int d = 0; ok && d < src->ndim; d++) {
        int od = dst->ndim - src->ndim + d;
        if (src->shape[d] != dst->shape[od] && src->shape[d] != 1) {
            ok = 0;
            bad = od;
        }
    }
    if (!ok) {
        char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
        if (bad >= 0)
            PyErr_Format(PyExc_ValueError, "%s: source shape %s cannot be broadcast to destination shape %s: dim %d "
                         "has sizes %lld and %lld", op, gm_shape_str(src->ndim, src->shape, a),
                         gm_shape_str(dst->ndim, dst->shape, b), bad, (long long)dst->shape[bad],
                         (long long)src->shape[bad - (dst->ndim - src->ndim)]);
        else
            PyErr_Format(PyExc_ValueError, "%s: source shape %s has more dimensions than destination shape %s", op,
                         gm_shape_str(src->ndim, src->shape, a), gm_shape_str(dst->ndim, dst->shape, b));
        return -1;
    }
    if (ew_check_writable(op, dst, "the destination") < 0) return -1;
    int rc;
    /* across devices: gm_copy_across moves the bytes and broadcasts/casts on dst's device (and bumps the version) */
    if (across) return gm_copy_across(dst, src);
    if (dst->device.type != GM_DEV_META && ew_overlaps(dst, src)) {
        /* x[1:].copy_(x[:-1]) must read the old values: go through a temporary */
        GMTensor *tmp = ew_cast_new(op, src, src->dtype);
        if (!tmp) return -1;
        rc = ew_copy_raw(op, dst, tmp);
        Py_DECREF(tmp);
    } else {
        rc = ew_copy_raw(op, dst, src);
    }
    if (rc < 0) return -1;
    gm_bump_version(dst);
    return 0;
}

/* Bumps dst's version: every write into an existing tensor is one autograd must be able to see. */
int gm_copy_into(GMTensor *dst, GMTensor *src) { return copy_into("copy_", dst, src); }

static PyObject *py_copy_(PyObject *self, PyObject *args) {
    PyObject *d, *s;
    if (!PyArg_ParseTuple(args, "OO:copy_", &d, &s)) return NULL;
    if (!gm_is_tensor(d) || !gm_is_tensor(s)) {
        PyErr_Format(PyExc_TypeError, "copy_: dst and src must be Tensors, got %.100s and %.100s",
                     Py_TYPE(d)->tp_name, Py_TYPE(s)->tp_name);
        return NULL;
    }
    if (copy_into("copy_", (GMTensor *)d, (GMTensor *)s) < 0) return NULL;
    return Py_NewRef(d);
}

static PyObject *py_fill_(PyObject *self, PyObject *args) {
    PyObject *to, *vo;
    if (!PyArg_ParseTuple(args, "OO:fill_", &to, &vo)) return NULL;
    if (!gm_is_tensor(to)) {
        PyErr_Format(PyExc_TypeError, "fill_: t must be a Tensor, got %.100s", Py_TYPE(to)->tp_name);
        return NULL;
    }
    GMTensor *t = (GMTensor *)to;
    if (gm_is_tensor(vo)) { /* a 0-d tensor value, as in PyTorch */
        GMTensor *v = (GMTensor *)vo;
        if (v->ndim != 0) {
            PyErr_Format(PyExc_ValueError, "fill_: a tensor value must be 0-dimensional, got %d dimensions", v->ndim);
            return NULL;
        }
        if (copy_into("fill_", t, v) < 0) return NULL;
        return Py_NewRef(to);
    }
    ew_arg x;
    if (ew_parse_arg(vo, &x, "fill_", "value") < 0) return NULL;
    if (x.big && !gm_dtype_is_float(t->dtype)) {
        PyErr_Format(PyExc_OverflowError, "fill_: value does not fit in %s", gm_dtype_name(t->dtype));
        return NULL;
    }
    int64_t n = gm_numel(t);
    if (t->device.type != GM_DEV_META && n > 0) {
        int64_t so[GM_MAX_DIMS];
        gm_byte_strides(t, so);
        int rc;
        /* an expanded view is fine here: every aliased element receives the same value */
        EW_DISPATCH(rc, "fill_", t->device, n,
                    elementwise_fill_forward(gm_tensor_data(t), so, t->dtype, &x.s, t->ndim, t->shape,
                                             gm_num_threads),
                    cuda_elementwise_fill_forward(gm_tensor_data(t), so, t->dtype, &x.s, t->ndim, t->shape, ctx));
        if (rc < 0) return NULL;
    }
    gm_bump_version(t);
    return Py_NewRef(to);
}

gm_dtype gm_default_float = GM_F32;

static PyObject *py_set_default_float(PyObject *self, PyObject *arg) {
    (void)self;
    gm_dtype dt;
    if (gm_parse_dtype(arg, &dt, "dtype") < 0) return NULL;
    if (!gm_dtype_is_float(dt)) {
        PyErr_Format(PyExc_TypeError, "set_default_dtype: only floating-point types are supported as the default "
                     "type, got %s", gm_dtype_name(dt));
        return NULL;
    }
    gm_default_float = dt;
    Py_RETURN_NONE;
}

PyMethodDef gm_elementwise_methods[] = {
    {"_set_default_float", py_set_default_float, METH_O,
     "_set_default_float(dtype code): the dtype Python floats and integer true division give (set_default_dtype)."},
    {"binary", (PyCFunction)(void (*)(void))py_binary, METH_VARARGS | METH_KEYWORDS,
     "binary(op, a, b, out=None): elementwise op with broadcasting and type promotion."},
    {"unary", (PyCFunction)(void (*)(void))py_unary, METH_VARARGS | METH_KEYWORDS,
     "unary(op, a, out=None): elementwise unary op."},
    {"clamp", (PyCFunction)(void (*)(void))py_clamp, METH_VARARGS | METH_KEYWORDS,
     "clamp(a, min=None, max=None, out=None): min/max are tensors or numbers; NaN propagates."},
    {"where", py_where, METH_VARARGS, "where(cond, a, b): cond ? a : b, broadcast; a/b tensors or numbers."},
    {"copy_", py_copy_, METH_VARARGS, "copy_(dst, src): copy src into dst (broadcast, cast); returns dst."},
    {"fill_", py_fill_, METH_VARARGS, "fill_(t, value): set every element of t to value; returns t."},
    {NULL, NULL, 0, NULL},
};
