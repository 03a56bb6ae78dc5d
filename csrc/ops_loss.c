/* csrc/ops_loss.c — the losses, forward and backward: cross_entropy (fused with log-softmax) and nll_loss (the
 * class losses), the pointwise ones (mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div:
 * kernels/loss_ops.h), binary_cross_entropy_with_logits; the checks of their
 * targets, and the CUDA kernels' cross-block scratch, which meta standing for CUDA requests too
 * (kernels/cpu/loss.c, kernels/cuda/loss.cu). Part of the nn op family (ops_nnops.c has its interface and method
 * table; ops_nn_internal.h the helpers it shares). */
#include "ops_nn_internal.h"

#include <math.h>

#include "cpu/loss.h"
#include "cuda/scratch_sizes.h"
#include "meta_target.h"

#ifdef GM_WITH_CUDA
#include "../kernels/cuda/loss.h"
#endif

static int reduction_arg(const char *op, int reduction) {
    if (reduction >= LOSS_NONE && reduction <= LOSS_SUM) return 0;
    PyErr_Format(PyExc_ValueError, "%s: unknown reduction code %d; expected NONE=0, MEAN=1, SUM=2", op, reduction);
    return -1;
}

/* The losses' fixed record of partials on CUDA (kernels/cuda/scratch_sizes.h) in float64 elements. */
#define LOSS_SCRATCH_N ((int64_t)((CUDA_LOSS_SCRATCH_BYTES + 7) / 8))

static PyObject *float_or_nan(double v, GMTensor *like) {
    return PyFloat_FromDouble(like->device.type == GM_DEV_META ? NAN : v);
}

/* ---- class losses: cross_entropy, nll_loss ------------------------------------------------------------------ */

/* The geometry of class scores of shape `shape` against target: (C,) with a 0-d target (one sample), or
 * (N, C, d1, ...) with target (N, d1, ...). Checks the target's dtype and shape. */
static int class_geometry(const char *op, int ndim, const int64_t *shape, GMTensor *target, int64_t *N, int64_t *C,
                          int64_t *inner) {
    char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF], e[GM_SHAPE_BUF];
    if (target->dtype != GM_I64) {
        PyErr_Format(PyExc_TypeError, "%s: target must be an int64 tensor of class indices, got %s%s", op,
                     gm_dtype_name(target->dtype), gm_dtype_is_float(target->dtype) ?
                     " (class-probability targets must have the input's shape; convert class indices with .long())" : "");
        return -1;
    }
    if (ndim < 1) {
        PyErr_Format(PyExc_ValueError, "%s: input must have a class dim: shape (C,) or (N, C, ...), got shape ()", op);
        return -1;
    }
    int64_t expect[GM_MAX_DIMS];
    int endim;
    if (ndim == 1) {
        *N = 1;
        *C = shape[0];
        *inner = 1;
        endim = 0;
    } else {
        *N = shape[0];
        *C = shape[1];
        *inner = 1;
        expect[0] = shape[0];
        for (int d = 2; d < ndim; d++) {
            *inner *= shape[d];
            expect[d - 1] = shape[d];
        }
        endim = ndim - 1;
    }
    if (target->ndim != endim || memcmp(target->shape, expect, sizeof(int64_t) * endim)) {
        PyErr_Format(PyExc_ValueError, "%s: target shape %s does not match input shape %s: expected target shape %s",
                     op, gm_shape_str(target->ndim, target->shape, a), gm_shape_str(ndim, shape, b),
                     gm_shape_str(endim, expect, e));
        return -1;
    }
    if (*C < 1) {
        PyErr_Format(PyExc_ValueError, "%s: input shape %s has no classes (C = 0)", op, gm_shape_str(ndim, shape, a));
        return -1;
    }
    return 0;
}

/* Class weights as a contiguous float64 workspace array (tiny), or NULL for None. *ok is 0 on error. */
static GMTensor *class_weight(const char *op, PyObject *wo, GMTensor *like, int64_t C, int *ok) {
    GMTensor *w;
    *ok = 0;
    if (opt_tensor_arg(wo, op, "weight", &w) < 0) return NULL;
    if (!w) {
        *ok = 1;
        return NULL;
    }
    if (check_float(op, "weight", w) < 0 || gm_check_same_device(op, like, w) < 0) return NULL;
    if (w->ndim != 1 || w->shape[0] != C) {
        char b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: weight should have shape (%lld,) (one weight per class), got shape %s", op,
                     (long long)C, gm_shape_str(w->ndim, w->shape, b));
        return NULL;
    }
    GMTensor *wd = contig_as(w, GM_F64);
    *ok = wd != NULL;
    return wd;
}

/* IndexError for the target `value` at flat position `pos` (the same text on every device). */
static int bad_target_error(const char *op, int64_t pos, int64_t value, int64_t C, int64_t ignore_index) {
    PyErr_Format(PyExc_IndexError, "%s: target %lld is out of bounds for %lld classes (expected a class index in "
                 "[0, %lld) or ignore_index=%lld; at flat position %lld of the target)", op, (long long)value,
                 (long long)C, (long long)C, (long long)ignore_index, (long long)pos);
    return -1;
}

/* IndexError naming the first class index outside [0, C) that is not ignore_index (cpu: meta has no data; cuda
 * checks when its kernels run, see device_check_targets and the class-loss forwards). */
static int check_targets(const char *op, GMTensor *t, int64_t C, int64_t ignore_index) {
    if (!on_cpu(t)) return 0;
    GMTensor *c = contig(t); /* a strided view (y[:, task]): the elements it holds, in order */
    if (!c) return -1;
    const int64_t *p = (const int64_t *)data(c), bad = loss_first_bad_target(p, gm_numel(c), C, ignore_index);
    int rc = bad < 0 ? 0 : bad_target_error(op, bad, p[bad], C, ignore_index);
    Py_DECREF(c);
    return rc;
}

/* check_targets for a CUDA kernel's record of the first bad target (kernels/cuda/loss.h: position or -1, value). */
static int check_bad_record(const char *op, const int64_t bad[2], int64_t C, int64_t ignore_index) {
    return bad[0] < 0 ? 0 : bad_target_error(op, bad[0], bad[1], C, ignore_index);
}

/* Whether t's class indices are known valid without reading the device: they went up from the host as t's whole
 * storage, unchanged since (gm_index_summary), and each is in [0, C) or ignore_index. *kept: how many are not
 * ignore_index (the weight sum without class weights). 0 when unknown: the device checks and counts. */
static int targets_known(const GMTensor *t, int64_t C, int64_t ignore_index, int64_t *kept) {
    const gm_storage *st = t->storage;
    const gm_index_summary *m = &st->idx;
    if (t->device.type != GM_DEV_CUDA || !m->known || m->version != st->version || t->offset != 0 ||
        gm_numel(t) != m->n || !gm_is_contiguous((GMTensor *)t))
        return 0;
    if (ignore_index == GM_DEFAULT_IGNORE_INDEX) {
        *kept = m->n - m->n_ignored;
        return *kept == 0 || (m->lo_kept >= 0 && m->hi_kept < C);
    }
    if (m->lo < 0 || m->hi >= C) return 0;
    if (ignore_index >= m->lo && ignore_index <= m->hi) return 0; /* how many are ignored is not known */
    *kept = m->n;
    return 1;
}

/* How a loss's CUDA entry point runs (kernels/cuda/loss.h). LOSS_QUEUES: it returns once its work is queued, and
 * keeps the GIL as GM_KERNEL does. LOSS_WAITS: it reads a result back (the class losses' weight sum and first bad
 * target) and so waits for the stream, without the GIL, as a CPU kernel computes. */
enum { LOSS_QUEUES, LOSS_WAITS };

/* GM_KERNEL (gm.h) for a loss whose CUDA kernel takes the losses' device scratch (kernels/cuda/loss.h): on cuda,
 * scratch_n float64s of workspace (0: none) are allocated after the outputs, handed to CUDA_CALL as `scratch`
 * (NULL when none) beside `ctx`, and freed right after the call (the allocator is stream-ordered); on meta
 * standing for CUDA the same request is made and released at that point (meta_scratch), so that an estimate sees
 * the CUDA run's bytes. mode: LOSS_QUEUES or LOSS_WAITS. Evaluates to 0, or to -1 with an exception naming op. */
#define LOSS_KERNEL(op, dev, scratch_n, mode, CPU_CALL, CUDA_CALL)                                              \
    ((dev).type == GM_DEV_CPU ? GM_KERNEL_CPU_(op, CPU_CALL) : LOSS_KERNEL_CUDA(op, dev, scratch_n, mode, CUDA_CALL))
/* LOSS_KERNEL's CUDA half on its own: nothing (0) on cpu and on meta standing for the CPU. */
#define LOSS_KERNEL_CUDA(op, dev, scratch_n, mode, CUDA_CALL)                                                   \
    ((dev).type == GM_DEV_CUDA ? LOSS_ON_CUDA_(op, dev, scratch_n, mode, CUDA_CALL)                             \
                               : meta_scratch(dev, gm_meta_as_cuda(dev) ? (scratch_n) : 0))
#ifdef GM_WITH_CUDA
#define LOSS_ON_CUDA_(op, dev, scratch_n, mode, CUDA_CALL)                                                      \
    ({                                                                                                          \
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(dev);                                                                \
        GMTensor *scratch_t_ = NULL;                                                                            \
        int rc_ = -1;                                                                                           \
        if (ctx && cuda_scratch(dev, scratch_n, &scratch_t_) == 0) {                                            \
            void *scratch = data(scratch_t_);                                                                   \
            PyThreadState *gil_ = (mode) == LOSS_WAITS ? PyEval_SaveThread() : NULL; /* Py_BEGIN_ALLOW_THREADS */ \
            const int st_ = (CUDA_CALL);                                                                        \
            if (gil_) PyEval_RestoreThread(gil_);                                                               \
            Py_XDECREF(scratch_t_);                                                                             \
            rc_ = gm_cuda_kernel_status(op, st_, ctx);                                                          \
        }                                                                                                       \
        rc_;                                                                                                    \
    })

/* n float64s of workspace on dev for a CUDA kernel's scratch; *out is NULL when n is 0. 0, or -1 + exception. */
static int cuda_scratch(gm_device dev, int64_t n, GMTensor **out) {
    *out = n > 0 ? gm_empty_workspace(1, &n, GM_F64, dev) : NULL;
    return n > 0 && !*out ? -1 : 0;
}
#else
#define LOSS_ON_CUDA_(op, dev, scratch_n, mode, CUDA_CALL) GM_KERNEL_CUDA_(op, dev, CUDA_CALL)
#endif

/* The targets' check on the device, where the CPU's (check_targets, before any output) cannot read them: cuda
 * searches them with the losses' scratch and reads the first bad one back; meta standing for CUDA makes that
 * scratch's request. Backward calls it after its output, as the forwards' kernels check on the way. */
static int device_check_targets(const char *op, GMTensor *t, int64_t C, int64_t ignore_index) {
    int64_t bad[2] = {-1, 0}, kept;
    if (targets_known(t, C, ignore_index, &kept)) return 0;
    if (LOSS_KERNEL_CUDA(op, t->device, LOSS_SCRATCH_N, LOSS_WAITS,
                         cuda_loss_first_bad_target(bad, (const int64_t *)data(t), gm_numel(t), C, ignore_index,
                                                    scratch, ctx)) < 0)
        return -1;
    return check_bad_record(op, bad, C, ignore_index);
}

/* A class-loss forward on cuda without waiting for the device: the targets known valid (targets_known) and no
 * class weights (whose sum over the targets only the device has), *wsum = the targets not ignored. */
static int known_weight_sum(const GMTensor *t, const GMTensor *weight, int64_t C, int64_t ignore_index,
                            double *wsum) {
    int64_t kept;
    if (weight || !targets_known(t, C, ignore_index, &kept)) return 0;
    *wsum = (double)kept;
    return 1;
}

/* Output of a loss: the per-element shape for NONE, 0-d otherwise. */
static GMTensor *loss_out(int reduction, GMTensor *per_element, gm_dtype dt) {
    if (reduction == LOSS_NONE) return gm_empty(per_element->ndim, per_element->shape, dt, per_element->device);
    return gm_empty(0, NULL, dt, per_element->device);
}

/* The gradient of a loss output: the per-element shape for NONE, one element otherwise. */
static int check_loss_grad(const char *op, GMTensor *g, int reduction, GMTensor *per_element, gm_dtype dt) {
    if (check_float(op, "grad", g) < 0) return -1;
    if (g->dtype != dt) {
        PyErr_Format(PyExc_TypeError, "%s: grad dtype %s does not match the input's %s", op, gm_dtype_name(g->dtype),
                     gm_dtype_name(dt));
        return -1;
    }
    if (reduction == LOSS_NONE) return same_shape(op, "grad", g, "loss", per_element);
    if (gm_numel(g) == 1) return 0;
    char b[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: a reduced loss has one element, but grad has shape %s", op,
                 gm_shape_str(g->ndim, g->shape, b));
    return -1;
}

static int smoothing_arg(const char *op, double eps) {
    return unit_interval_arg(op, eps, "label_smoothing must be in [0, 1], got");
}

/* The class losses' forward arguments, checked in this order: input x (float), the reduction, cross_entropy's
 * label smoothing (eps; NULL for nll_loss, which has none), the devices, target t (int64 class indices of x's
 * shape less the class dim; on the CPU each in range or ignore_index), and the class weight (None, or (C,) laid
 * out as float64 into *wd, a new reference or NULL). 0, or -1 + exception. */
static int class_loss_args(const char *name, PyObject *xo, PyObject *to, PyObject *wo, int reduction, const double *eps,
                           long long ignore_index, GMTensor **x, GMTensor **t, int64_t *N, int64_t *C, int64_t *inner,
                           GMTensor **wd) {
    *x = gm_tensor_arg(xo, name, "input");
    *t = *x ? gm_tensor_arg(to, name, "target") : NULL;
    if (!*t || check_float(name, "input", *x) < 0 || reduction_arg(name, reduction) < 0 ||
        (eps && smoothing_arg(name, *eps) < 0) || check_devices(name, *x, t, 1) < 0 ||
        class_geometry(name, (*x)->ndim, (*x)->shape, *t, N, C, inner) < 0 ||
        check_targets(name, *t, *C, ignore_index) < 0)
        return -1;
    int ok;
    *wd = class_weight(name, wo, *x, *C, &ok);
    return ok ? 0 : -1;
}

PyObject *gm_py_cross_entropy(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "target", "weight", "ignore_index", "reduction", "label_smoothing", NULL};
    const char *name = "cross_entropy";
    PyObject *xo, *to, *wo = Py_None;
    long long ignore_index = -100;
    int reduction = LOSS_MEAN;
    double eps = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OLid:cross_entropy", kwlist, &xo, &to, &wo, &ignore_index,
                                     &reduction, &eps))
        return NULL;
    GMTensor *x, *t, *wd;
    int64_t N, C, inner;
    if (class_loss_args(name, xo, to, wo, reduction, &eps, ignore_index, &x, &t, &N, &C, &inner, &wd) < 0)
        return NULL;
    GMTensor *xc = contig(x), *tc = contig(t), *loss = NULL, *lse = NULL;
    PyObject *res = NULL;
    double wsum = 0.0;
    if (!xc || !tc || !(loss = loss_out(reduction, t, x->dtype)) ||
        !(lse = gm_empty(t->ndim, t->shape, stats_dtype(x->dtype), x->device)))
        goto done;
    int64_t bad[2] = {-1, 0}; /* the CUDA kernel checks the targets (the CPU's are checked above) */
    const int known = known_weight_sum(tc, wd, C, ignore_index, &wsum);
    (void)known; /* read by the CUDA call only */
    if (LOSS_KERNEL(name, x->device, LOSS_SCRATCH_N, known ? LOSS_QUEUES : LOSS_WAITS,
                    cross_entropy_forward(data(loss), data(lse), &wsum, data(xc), (const int64_t *)data(tc),
                                          (const double *)data(wd), N, C, inner, ignore_index, reduction, eps,
                                          x->dtype, lse->dtype, gm_num_threads),
                    cuda_cross_entropy_forward(data(loss), data(lse), known ? NULL : &wsum, data(xc),
                                               (const int64_t *)data(tc), (const double *)data(wd), N, C, inner,
                                               ignore_index, reduction, eps, x->dtype, lse->dtype, scratch,
                                               known ? NULL : bad, ctx)) < 0 ||
        check_bad_record(name, bad, C, ignore_index) < 0)
        goto done;
    PyObject *ws = float_or_nan(wsum, x);
    if (ws) res = Py_BuildValue("(OON)", (PyObject *)loss, (PyObject *)lse, ws);
done:
    RELEASE(loss, lse, xc, tc, wd);
    return res;
}

PyObject *gm_py_cross_entropy_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "x", "target", "weight", "lse", "ignore_index", "reduction", "label_smoothing",
                             "wsum", NULL};
    const char *name = "cross_entropy_backward";
    PyObject *go, *xo, *to, *wo, *lo;
    long long ignore_index;
    int reduction;
    double eps, wsum;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOLidd:cross_entropy_backward", kwlist, &go, &xo, &to, &wo,
                                     &lo, &ignore_index, &reduction, &eps, &wsum))
        return NULL;
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *x = g ? gm_tensor_arg(xo, name, "input") : NULL;
    GMTensor *t = x ? gm_tensor_arg(to, name, "target") : NULL, *l = t ? gm_tensor_arg(lo, name, "lse") : NULL;
    int64_t N, C, inner;
    if (!l || check_float(name, "input", x) < 0 || reduction_arg(name, reduction) < 0 || smoothing_arg(name, eps) < 0)
        return NULL;
    GMTensor *others[3] = {x, t, l};
    if (check_devices(name, g, others, 3) < 0 || class_geometry(name, x->ndim, x->shape, t, &N, &C, &inner) < 0 ||
        check_loss_grad(name, g, reduction, t, x->dtype) < 0 || same_shape(name, "lse", l, "target", t) < 0 ||
        check_targets(name, t, C, ignore_index) < 0)
        return NULL;
    if (l->dtype != stats_dtype(x->dtype)) {
        PyErr_Format(PyExc_TypeError, "%s: lse must be %s for %s input, got %s", name,
                     gm_dtype_name(stats_dtype(x->dtype)), gm_dtype_name(x->dtype), gm_dtype_name(l->dtype));
        return NULL;
    }
    int ok;
    GMTensor *wd = class_weight(name, wo, x, C, &ok);
    if (!ok) return NULL;
    GMTensor *gc = contig(g), *xc = contig(x), *tc = contig(t), *lc = contig(l), *dx = NULL;
    if (!gc || !xc || !tc || !lc || !(dx = gm_empty(x->ndim, x->shape, x->dtype, x->device))) goto done;
    if (device_check_targets(name, tc, C, ignore_index) < 0 ||
        GM_KERNEL(name, x->device,
                  cross_entropy_backward(data(dx), data(gc), data(xc), (const int64_t *)data(tc),
                                         (const double *)data(wd), data(lc), N, C, inner, ignore_index, reduction, eps,
                                         wsum, x->dtype, l->dtype, gm_num_threads),
                  cuda_cross_entropy_backward(data(dx), data(gc), data(xc), (const int64_t *)data(tc),
                                              (const double *)data(wd), data(lc), N, C, inner, ignore_index, reduction,
                                              eps, wsum, x->dtype, l->dtype, ctx)) < 0)
        Py_CLEAR(dx);
done:
    RELEASE(gc, xc, tc, lc, wd);
    return (PyObject *)dx;
}

PyObject *gm_py_nll_loss(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "target", "weight", "ignore_index", "reduction", NULL};
    const char *name = "nll_loss";
    PyObject *xo, *to, *wo = Py_None;
    long long ignore_index = -100;
    int reduction = LOSS_MEAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OLi:nll_loss", kwlist, &xo, &to, &wo, &ignore_index,
                                     &reduction))
        return NULL;
    GMTensor *x, *t, *wd;
    int64_t N, C, inner;
    if (class_loss_args(name, xo, to, wo, reduction, NULL, ignore_index, &x, &t, &N, &C, &inner, &wd) < 0)
        return NULL;
    GMTensor *xc = contig(x), *tc = contig(t), *loss = NULL;
    PyObject *res = NULL;
    double wsum = 0.0;
    if (!xc || !tc || !(loss = loss_out(reduction, t, x->dtype))) goto done;
    int64_t bad[2] = {-1, 0}; /* the CUDA kernel checks the targets (the CPU's are checked above) */
    const int known = known_weight_sum(tc, wd, C, ignore_index, &wsum);
    (void)known; /* read by the CUDA call only */
    if (LOSS_KERNEL(name, x->device, LOSS_SCRATCH_N, known ? LOSS_QUEUES : LOSS_WAITS,
                    nll_loss_forward(data(loss), &wsum, data(xc), (const int64_t *)data(tc), (const double *)data(wd),
                                     N, C, inner, ignore_index, reduction, x->dtype, gm_num_threads),
                    cuda_nll_loss_forward(data(loss), known ? NULL : &wsum, data(xc), (const int64_t *)data(tc),
                                          (const double *)data(wd), N, C, inner, ignore_index, reduction, x->dtype,
                                          scratch, known ? NULL : bad, ctx)) < 0 ||
        check_bad_record(name, bad, C, ignore_index) < 0)
        goto done;
    PyObject *ws = float_or_nan(wsum, x);
    if (ws) res = Py_BuildValue("(ON)", (PyObject *)loss, ws);
done:
    RELEASE(loss, xc, tc, wd);
    return res;
}

/* Backward of nll_loss takes the input's shape and dtype, not the input: its gradient does not depend on the
 * values, so the forward keeps nothing input-sized alive. */
PyObject *gm_py_nll_loss_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "target", "weight", "ignore_index", "reduction", "wsum", "shape", "dtype", NULL};
    const char *name = "nll_loss_backward";
    PyObject *go, *to, *wo, *shpo, *dto;
    long long ignore_index;
    int reduction, ndim;
    double wsum;
    int64_t shape[GM_MAX_DIMS];
    gm_dtype dt;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOLidOO:nll_loss_backward", kwlist, &go, &to, &wo, &ignore_index,
                                     &reduction, &wsum, &shpo, &dto))
        return NULL;
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *t = g ? gm_tensor_arg(to, name, "target") : NULL;
    int64_t N, C, inner;
    if (!t || gm_parse_shape(shpo, &ndim, shape, "shape") < 0 || gm_parse_dtype(dto, &dt, "dtype") < 0 ||
        reduction_arg(name, reduction) < 0 || check_devices(name, g, &t, 1) < 0 ||
        class_geometry(name, ndim, shape, t, &N, &C, &inner) < 0 || check_loss_grad(name, g, reduction, t, dt) < 0 ||
        check_targets(name, t, C, ignore_index) < 0)
        return NULL;
    int ok;
    GMTensor *wd = class_weight(name, wo, g, C, &ok);
    if (!ok) return NULL;
    GMTensor *gc = contig(g), *tc = contig(t), *dx = NULL;
    if (!gc || !tc || !(dx = gm_empty(ndim, shape, dt, g->device))) goto done;
    if (device_check_targets(name, tc, C, ignore_index) < 0 ||
        GM_KERNEL(name, g->device,
                  nll_loss_backward(data(dx), data(gc), (const int64_t *)data(tc), (const double *)data(wd), N, C,
                                    inner, ignore_index, reduction, wsum, dt, gm_num_threads),
                  cuda_nll_loss_backward(data(dx), data(gc), (const int64_t *)data(tc), (const double *)data(wd), N,
                                         C, inner, ignore_index, reduction, wsum, dt, ctx)) < 0)
        Py_CLEAR(dx);
done:
    RELEASE(gc, tc, wd);
    return (PyObject *)dx;
}

/* ---- pointwise losses: mse, l1, smooth_l1, huber, binary_cross_entropy, kl_div ----------------------------- */

static const char *const pw_names[LOSS_POINTWISE_OPS] = {"mse_loss",    "l1_loss",              "smooth_l1_loss",
                                                         "huber_loss", "binary_cross_entropy", "kl_div"};

static int pw_op_arg(int op) {
    if (op >= 0 && op < LOSS_POINTWISE_OPS) return 0;
    PyErr_Format(PyExc_ValueError, "pointwise_loss: unknown op %d; expected MSE=0 L1=1 SMOOTH_L1=2 HUBER=3 BCE=4 "
                 "KL_DIV=5", op);
    return -1;
}

/* param: smooth_l1's beta >= 0 and huber's delta > 0, with PyTorch's messages (RuntimeError). */
static int pw_param_arg(int op, double param) {
    if (op == LOSS_SMOOTH_L1 && !(param >= 0.0)) {
        gm_errorf(PyExc_RuntimeError, "smooth_l1_loss does not support negative values for beta, got %g", param);
        return -1;
    }
    if (op == LOSS_HUBER && !(param > 0.0)) {
        gm_errorf(PyExc_RuntimeError, "huber_loss does not support non-positive values for delta, got %g", param);
        return -1;
    }
    return 0;
}

/* input and target: float, same shape (no silent broadcasting: a (N, 1) vs (N,) mix-up is a classic bug) and
 * same dtype. */
static int check_pair(const char *op, GMTensor *x, GMTensor *t) {
    if (check_float(op, "input", x) < 0 || check_float(op, "target", t) < 0 || check_devices(op, x, &t, 1) < 0)
        return -1;
    if (x->ndim != t->ndim || memcmp(x->shape, t->shape, sizeof(int64_t) * x->ndim)) {
        char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: target shape %s does not match input shape %s (they must be equal)", op,
                     gm_shape_str(t->ndim, t->shape, a), gm_shape_str(x->ndim, x->shape, b));
        return -1;
    }
    return same_dtype(op, "target", t, "input", x);
}

/* The gradients a pointwise loss's backward (mse/l1, bce) is asked for, each of x's shape and dtype: *dx when
 * need_x, then *dt when need_t (the others stay NULL). 0, or -1 + exception. */
static int input_target_grads(GMTensor *x, int need_x, int need_t, GMTensor **dx, GMTensor **dt) {
    if (need_x && !(*dx = gm_empty(x->ndim, x->shape, x->dtype, x->device))) return -1;
    if (need_t && !(*dt = gm_empty(x->ndim, x->shape, x->dtype, x->device))) return -1;
    return 0;
}

/* The CPU kernel's status, noting in *ok whether it was LOSS_ERR_RANGE. */
static int range_status(int status, int *ok) {
    *ok = status != LOSS_ERR_RANGE;
    return status;
}

/* The mse/l1/bce forwards' scratch (kernels/cuda/loss.h): their kernels reduce across blocks for MEAN and SUM only. */
static int64_t reduced_scratch_n(int reduction) { return reduction != LOSS_NONE ? LOSS_SCRATCH_N : 0; }

PyObject *gm_py_pointwise_loss(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "x", "target", "reduction", "param", NULL};
    int op, reduction = LOSS_MEAN;
    double param = 0.0;
    PyObject *xo, *to;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOO|id:pointwise_loss", kwlist, &op, &xo, &to, &reduction,
                                     &param))
        return NULL;
    if (pw_op_arg(op) < 0 || pw_param_arg(op, param) < 0) return NULL;
    const char *name = pw_names[op];
    GMTensor *x = gm_tensor_arg(xo, name, "input"), *t = x ? gm_tensor_arg(to, name, "target") : NULL;
    if (!t || reduction_arg(name, reduction) < 0 || check_pair(name, x, t) < 0) return NULL;
    GMTensor *xc = contig(x), *tc = contig(t), *loss = NULL;
    if (!xc || !tc || !(loss = loss_out(reduction, x, x->dtype))) goto done;
    int range_ok = 1;
    if (LOSS_KERNEL(name, x->device, reduced_scratch_n(reduction), LOSS_QUEUES,
                    range_status(pointwise_loss_forward(data(loss), data(xc), data(tc), gm_numel(x), op, param,
                                                        reduction, x->dtype, gm_num_threads), &range_ok),
                    cuda_pointwise_loss_forward(data(loss), data(xc), data(tc), gm_numel(x), op, param, reduction,
                                                x->dtype, scratch, ctx)) < 0) {
        Py_CLEAR(loss);
        if (!range_ok) { /* PyTorch's error, in place of the generic kernel-status one */
            PyErr_Clear();
            PyErr_SetString(PyExc_RuntimeError, "binary_cross_entropy: all elements of input should be between 0 "
                            "and 1");
        }
    }
done:
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    return (PyObject *)loss;
}

PyObject *gm_py_pointwise_loss_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "grad", "x", "target", "reduction", "need_x", "need_target", "param", NULL};
    int op, reduction, need_x, need_t;
    double param = 0.0;
    PyObject *go, *xo, *to;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOOOipp|d:pointwise_loss_backward", kwlist, &op, &go, &xo, &to,
                                     &reduction, &need_x, &need_t, &param))
        return NULL;
    if (pw_op_arg(op) < 0 || pw_param_arg(op, param) < 0) return NULL;
    const char *name = pw_names[op];
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *x = g ? gm_tensor_arg(xo, name, "input") : NULL;
    GMTensor *t = x ? gm_tensor_arg(to, name, "target") : NULL;
    if (!t || reduction_arg(name, reduction) < 0 || check_pair(name, x, t) < 0 ||
        check_devices(name, x, &g, 1) < 0 || check_loss_grad(name, g, reduction, x, x->dtype) < 0)
        return NULL;
    GMTensor *gc = contig(g), *xc = contig(x), *tc = contig(t), *dx = NULL, *dtg = NULL;
    PyObject *res = NULL;
    if (!gc || !xc || !tc || input_target_grads(x, need_x, need_t, &dx, &dtg) < 0) goto done;
    if (GM_KERNEL(name, x->device,
                  pointwise_loss_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), gm_numel(x), op,
                                          param, reduction, x->dtype, gm_num_threads),
                  cuda_pointwise_loss_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), gm_numel(x), op,
                                               param, reduction, x->dtype, ctx)) < 0)
        goto done;
    res = pair_or_none(dx, dtg);
done:
    RELEASE(gc, xc, tc, dx, dtg);
    return res;
}

/* ---- binary_cross_entropy_with_logits ------------------------------------------------------------------------- */

/* A weight broadcast over x, laid out for the kernel: contiguous over the trailing dims of x it spans, in x's
 * dtype; element i of x reads element i % *period. (C,) against (N, C) costs C values, (C, 1, 1) against
 * (N, C, H, W) C*H*W; a full-shape weight that is already contiguous in x's dtype is used as it is. */
static GMTensor *suffix_weight(const char *op, const char *argname, PyObject *o, GMTensor *x, int64_t *period,
                               int *ok) {
    GMTensor *w;
    *ok = 0;
    *period = 1;
    if (opt_tensor_arg(o, op, argname, &w) < 0) return NULL;
    if (!w) {
        *ok = 1;
        return NULL;
    }
    if (check_float(op, argname, w) < 0 || gm_check_same_device(op, x, w) < 0) return NULL;
    int fits = w->ndim <= x->ndim, first = w->ndim; /* first: w's leading non-1 dim */
    for (int d = 0; fits && d < w->ndim; d++) {
        int64_t xs = x->shape[x->ndim - w->ndim + d];
        if (w->shape[d] != 1 && w->shape[d] != xs) fits = 0;
        if (w->shape[d] != 1 && first == w->ndim) first = d;
    }
    if (!fits) {
        char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: %s shape %s cannot be broadcast to input shape %s", op, argname,
                     gm_shape_str(w->ndim, w->shape, a), gm_shape_str(x->ndim, x->shape, b));
        return NULL;
    }
    const int k = w->ndim - first; /* trailing dims of x the weight spans */
    const int64_t *sshape = x->shape + x->ndim - k;
    for (int d = 0; d < k; d++) *period *= sshape[d];
    GMTensor *out;
    if (k == w->ndim && gm_is_contiguous(w) && w->dtype == x->dtype && !memcmp(w->shape, sshape, sizeof(int64_t) * k)) {
        out = (GMTensor *)Py_NewRef(w);
    } else {
        GMTensor *tail = gm_view(w, k, w->shape + first, w->strides + first, w->offset); /* drop leading 1s */
        if (!tail) return NULL;
        out = gm_empty_workspace(k, sshape, x->dtype, x->device);
        if (out && x->device.type != GM_DEV_META && gm_copy_into(out, tail) < 0) Py_CLEAR(out);
        Py_DECREF(tail);
    }
    *ok = out != NULL;
    return out;
}

/* Parse and lay out everything both directions take. Returns 0 or -1; on success the caller owns *wc, *pwc. */
static int bce_args(const char *op, GMTensor *x, GMTensor *t, PyObject *wo, PyObject *pwo, int reduction,
                    GMTensor **wc, int64_t *wp, GMTensor **pwc, int64_t *pwp) {
    int ok;
    *wc = *pwc = NULL;
    if (reduction_arg(op, reduction) < 0 || check_pair(op, x, t) < 0) return -1;
    *wc = suffix_weight(op, "weight", wo, x, wp, &ok);
    if (!ok) return -1;
    *pwc = suffix_weight(op, "pos_weight", pwo, x, pwp, &ok);
    if (!ok) {
        Py_CLEAR(*wc);
        return -1;
    }
    return 0;
}

PyObject *gm_py_bce_with_logits(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "target", "weight", "pos_weight", "reduction", NULL};
    const char *name = "binary_cross_entropy_with_logits";
    PyObject *xo, *to, *wo = Py_None, *pwo = Py_None;
    int reduction = LOSS_MEAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOi:bce_with_logits", kwlist, &xo, &to, &wo, &pwo, &reduction))
        return NULL;
    GMTensor *x = gm_tensor_arg(xo, name, "input"), *t = x ? gm_tensor_arg(to, name, "target") : NULL, *wc, *pwc;
    int64_t wp, pwp;
    if (!t || bce_args(name, x, t, wo, pwo, reduction, &wc, &wp, &pwc, &pwp) < 0) return NULL;
    GMTensor *xc = contig(x), *tc = contig(t), *loss = NULL;
    if (!xc || !tc || !(loss = loss_out(reduction, x, x->dtype))) goto done;
    if (LOSS_KERNEL(name, x->device, reduced_scratch_n(reduction), LOSS_QUEUES,
                    bce_logits_forward(data(loss), data(xc), data(tc), data(wc), wp, data(pwc), pwp, gm_numel(x),
                                       reduction, x->dtype, gm_num_threads),
                    cuda_bce_logits_forward(data(loss), data(xc), data(tc), data(wc), wp, data(pwc), pwp, gm_numel(x),
                                            reduction, x->dtype, scratch, ctx)) < 0)
        Py_CLEAR(loss);
done:
    RELEASE(xc, tc, wc, pwc);
    return (PyObject *)loss;
}

PyObject *gm_py_bce_with_logits_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "x", "target", "weight", "pos_weight", "reduction", "need_x", "need_target",
                             NULL};
    const char *name = "binary_cross_entropy_with_logits_backward";
    PyObject *go, *xo, *to, *wo, *pwo;
    int reduction, need_x, need_t;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOipp:bce_with_logits_backward", kwlist, &go, &xo, &to, &wo,
                                     &pwo, &reduction, &need_x, &need_t))
        return NULL;
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *x = g ? gm_tensor_arg(xo, name, "input") : NULL;
    GMTensor *t = x ? gm_tensor_arg(to, name, "target") : NULL, *wc, *pwc;
    int64_t wp, pwp;
    if (!t || check_devices(name, x, &g, 1) < 0 || check_loss_grad(name, g, reduction, x, x->dtype) < 0 ||
        bce_args(name, x, t, wo, pwo, reduction, &wc, &wp, &pwc, &pwp) < 0)
        return NULL;
    GMTensor *gc = contig(g), *xc = contig(x), *tc = contig(t), *dx = NULL, *dtg = NULL;
    PyObject *res = NULL;
    if (!gc || !xc || !tc || input_target_grads(x, need_x, need_t, &dx, &dtg) < 0) goto done;
    if (GM_KERNEL(name, x->device,
                  bce_logits_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), data(wc), wp, data(pwc), pwp,
                                      gm_numel(x), reduction, x->dtype, gm_num_threads),
                  cuda_bce_logits_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), data(wc), wp, data(pwc),
                                           pwp, gm_numel(x), reduction, x->dtype, ctx)) < 0)
        goto done;
    res = pair_or_none(dx, dtg);
done:
    RELEASE(gc, xc, tc, dx, dtg, wc, pwc);
    return res;
}
