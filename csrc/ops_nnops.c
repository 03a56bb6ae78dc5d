/* csrc/ops_nnops.c — the nn op family: activations, dropout, batch norm, softmax, losses (forward and backward).
 *
 * Each _C function validates its arguments and infers output shapes (the same code for every device),
 * allocates its outputs with gm_empty (current category) and any scratch as workspace (freed before returning),
 * then runs the CPU kernel (kernels/cpu/{activation,dropout,norm,softmax,loss}.c). On meta everything but the
 * kernel happens, including contiguous copies and the generator's advance for dropout, so memory estimates and
 * the RNG state after a rehearsal match the real run. On cuda the same outputs are allocated and the kernels of
 * kernels/cuda/{activation,dropout,norm,softmax,loss}.cu run on the device's stream. One difference in memory:
 * a reduction across many blocks on cuda takes a small workspace for the blocks' partial sums, freed before the
 * op returns: batch norm's per-channel sums (training, and backward with weight/bias gradients: 16 bytes per
 * block, a few KiB), and the losses that reduce the whole input (the class losses always, forward and backward:
 * the forward returns its weight sum to Python and both check the targets; mse/l1/bce with reduction mean/sum:
 * CUDA_LOSS_SCRATCH_BYTES, ~12 KiB). The CPU kernels sum within one thread and need none. The class losses also
 * wait for the stream once per call, to read that weight sum and the first out-of-range target back.
 * When meta stands for CUDA (csrc/meta_target.h: gm.memory.estimate(device="cuda")), an op on meta allocates and
 * frees that same scratch at the same point (sizes from kernels/cuda/scratch_sizes.h), so the estimate is the
 * CUDA run's bytes; with the default target (the CPU) meta allocates exactly what the CPU does.
 *
 * Interface (python/gpumemnet/nn/_functional_nn.py is the only caller):
 *   activation(op, x, alpha=0.0, out=None) -> out        ops: RELU=0 LEAKY_RELU=1 SIGMOID=2 TANH=3 GELU=4
 *   activation_backward(op, grad, saved, alpha=0.0, into_grad=False)   GELU_TANH=5; out=x is the in-place form
 *   dropout(x, p, channelwise=False, inplace=False) -> (out, bool mask)   mask (x.shape) or (x.shape[:-2])
 *   dropout_backward(grad, mask, p, into_grad=False)
 *   batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) -> (out, mean, invstd)
 *   batch_norm_backward(grad, x, weight, mean, invstd, training, need_input, need_weight, need_bias,
 *                       param_dtype=None, into_grad=False) -> (dx | None, dweight | None, dbias | None)
 *   softmax(x, dim, log=False), softmax_backward(grad, out, dim, log=False, into_grad=False)
 *   cross_entropy(x, target, weight, ignore_index, reduction, label_smoothing) -> (loss, lse, wsum)
 *   cross_entropy_backward(grad, x, target, weight, lse, ignore_index, reduction, label_smoothing, wsum)
 *   nll_loss(x, target, weight, ignore_index, reduction) -> (loss, wsum)
 *   nll_loss_backward(grad, target, weight, ignore_index, reduction, wsum, shape, dtype) -> dx
 *   pointwise_loss(op, x, target, reduction), pointwise_loss_backward(op, grad, x, target, reduction, need_x,
 *                  need_target) -> (dx | None, dtarget | None)        ops: MSE=0 L1=1
 *   bce_with_logits(x, target, weight, pos_weight, reduction)
 *   bce_with_logits_backward(grad, x, target, weight, pos_weight, reduction, need_x, need_target)
 * reduction: NONE=0 MEAN=1 SUM=2 (PyTorch's enum).
 * into_grad: the autograd engine hands grad over (nothing else references it: autograd.Function.grad_is_free), so
 * the input gradient is written over it instead of into a new tensor of the same size. Each kernel reads
 * grad[i] before it writes dx[i] (batch norm: per channel, after that channel's sums; softmax: per row, after
 * the row's sum). */
#include "gm.h"

#include <math.h>
#include <stdio.h>

#include "cpu/activation.h"
#include "cpu/dropout.h"
#include "cpu/loss.h"
#include "cpu/norm.h"
#include "cpu/philox.h"
#include "cpu/softmax.h"
#include "cuda/scratch_sizes.h"
#include "meta_target.h"

#ifdef GM_WITH_CUDA
#include "../kernels/cuda/activation.h"
#include "../kernels/cuda/dropout.h"
#include "../kernels/cuda/loss.h"
#include "../kernels/cuda/norm.h"
#include "../kernels/cuda/softmax.h"
#endif

/* ---- shared helpers ----------------------------------------------------------------------------------------- */


/* None -> *out = NULL; a tensor -> *out = it; else TypeError. */
static int opt_tensor_arg(PyObject *o, const char *op, const char *argname, GMTensor **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    return (*out = gm_tensor_arg(o, op, argname)) ? 0 : -1;
}

static int check_float(const char *op, const char *argname, GMTensor *t) {
    if (gm_dtype_is_float(t->dtype)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s must be a floating point tensor (float32, float64, float16, bfloat16), "
                 "got %s", op, argname, gm_dtype_name(t->dtype));
    return -1;
}

/* The first tensor decides the device: every other must match it. */
static int check_devices(const char *op, GMTensor *first, GMTensor *const *others, int n) {
    for (int i = 0; i < n; i++)
        if (others[i] && gm_check_same_device(op, first, others[i]) < 0) return -1;
    return 0;
}

static int same_shape(const char *op, const char *an, GMTensor *a, const char *bn, GMTensor *b) {
    if (a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim)) return 0;
    char sa[GM_SHAPE_BUF], sb[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: %s shape %s does not match %s shape %s", op, an,
                 gm_shape_str(a->ndim, a->shape, sa), bn, gm_shape_str(b->ndim, b->shape, sb));
    return -1;
}

static int same_dtype(const char *op, const char *an, GMTensor *a, const char *bn, GMTensor *b) {
    if (a->dtype == b->dtype) return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s dtype %s does not match %s dtype %s", op, an, gm_dtype_name(a->dtype), bn,
                 gm_dtype_name(b->dtype));
    return -1;
}


static int reduction_arg(const char *op, int reduction) {
    if (reduction >= LOSS_NONE && reduction <= LOSS_SUM) return 0;
    PyErr_Format(PyExc_ValueError, "%s: unknown reduction code %d; expected NONE=0, MEAN=1, SUM=2", op, reduction);
    return -1;
}

static inline int on_cpu(const GMTensor *t) { return t->device.type == GM_DEV_CPU; }
static inline int on_cuda(const GMTensor *t) { return t->device.type == GM_DEV_CUDA; }
static inline void *data(GMTensor *t) { return t ? (void *)gm_tensor_data(t) : NULL; }

/* The CUDA kernels' scratch (kernels/cuda/scratch_sizes.h) in float64 elements: the losses' fixed record of
 * partials, batch norm's per-channel partial sums (for the meta target's multiprocessor count). */
#define LOSS_SCRATCH_N ((int64_t)((CUDA_LOSS_SCRATCH_BYTES + 7) / 8))
static int64_t bn_scratch_n(int64_t N, int64_t C, int64_t HW, int reduce) {
    return (int64_t)(cuda_batchnorm_workspace_bytes(N, C, HW, reduce, gm_meta_sm_count()) / sizeof(double));
}

/* On meta standing for CUDA (meta_target.h): the scratch the CUDA kernel would take (n float64s, 0: none),
 * allocated as workspace and freed at once, where the CUDA op holds it (after the outputs, freed before the op
 * returns). Same dtype and count as on CUDA, so the allocator sees the same request. */
static int meta_scratch(gm_device dev, int64_t n) {
    if (n <= 0) return 0;
    GMTensor *ws = gm_empty_workspace(1, &n, GM_F64, dev);
    Py_XDECREF(ws);
    return ws ? 0 : -1;
}

/* Statistics saved per channel/position: float64 for float64 data, float32 otherwise (as PyTorch keeps them). */
static inline gm_dtype stats_dtype(gm_dtype dt) { return dt == GM_F64 ? GM_F64 : GM_F32; }

/* t itself (new reference) when contiguous, else a contiguous workspace copy in dtype dt (filled except on meta).
 * The kernels of this family take contiguous arrays: activations coming out of conv/linear already are. */
static GMTensor *contig_as(GMTensor *t, gm_dtype dt) {
    if (gm_is_contiguous(t) && t->dtype == dt) return (GMTensor *)Py_NewRef(t);
    GMTensor *c = gm_empty_workspace(t->ndim, t->shape, dt, t->device);
    if (!c) return NULL;
    if (t->device.type != GM_DEV_META && gm_copy_into(c, t) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return c;
}
static GMTensor *contig(GMTensor *t) { return t ? contig_as(t, t->dtype) : NULL; }

/* Where a backward writes its same-shaped input gradient: over grad itself when the engine handed it over
 * (into_grad) and nothing else holds its storage, else a new tensor. */
static GMTensor *grad_result(GMTensor *g, int into_grad) {
    if (into_grad && gm_is_contiguous(g) && g->storage->refcount == 1) return (GMTensor *)Py_NewRef(g);
    return gm_empty(g->ndim, g->shape, g->dtype, g->device);
}

static PyObject *float_or_nan(double v, GMTensor *like) {
    return PyFloat_FromDouble(like->device.type == GM_DEV_META ? NAN : v);
}

/* ---- the generator (owned by random.c) ------------------------------------------------------------------- */

/* random.c keeps the (seed, offset) state static and gm.h exports no C accessor for it, so this file reaches it
 * through random.c's own method table: get_rng_state, then set_rng_state(seed, offset + blocks). Same effect
 * as a fill of that many blocks; the GIL is held throughout, so nothing draws in between. */
static PyObject *call_random(const char *name, PyObject *args) {
    for (PyMethodDef *m = gm_random_methods; m->ml_name; m++)
        if (!strcmp(m->ml_name, name)) return m->ml_meth(NULL, args);
    PyErr_Format(PyExc_RuntimeError, "dropout: random.c has no %s (internal error)", name);
    return NULL;
}

static int rng_take(uint64_t blocks, uint64_t *seed, uint64_t *offset) {
    PyObject *state = call_random("get_rng_state", NULL);
    if (!state) return -1;
    unsigned long long s, o;
    int ok = PyArg_ParseTuple(state, "KK", &s, &o);
    Py_DECREF(state);
    if (!ok) return -1;
    *seed = s;
    *offset = o;
    PyObject *args = Py_BuildValue("(KK)", s, (unsigned long long)(o + blocks)); /* wraps modulo 2^64, as in random.c */
    if (!args) return -1;
    PyObject *r = call_random("set_rng_state", args);
    Py_DECREF(args);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* ---- activations -------------------------------------------------------------------------------------------- */

static const char *const act_names[ACT_N] = {"relu", "leaky_relu", "sigmoid", "tanh", "gelu", "gelu"};

static int act_op_arg(int op) {
    if (op >= 0 && op < ACT_N) return 0;
    PyErr_Format(PyExc_ValueError, "activation: unknown op %d; expected RELU=0 LEAKY_RELU=1 SIGMOID=2 TANH=3 "
                 "GELU=4 GELU_TANH=5", op);
    return -1;
}

static PyObject *py_activation(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "x", "alpha", "out", NULL};
    int op;
    double alpha = 0.0;
    PyObject *xo, *outo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO|dO:activation", kwlist, &op, &xo, &alpha, &outo)) return NULL;
    if (act_op_arg(op) < 0) return NULL;
    const char *name = act_names[op];
    GMTensor *x = gm_tensor_arg(xo, name, "input");
    if (!x || check_float(name, "input", x) < 0 || check_devices(name, x, NULL, 0) < 0) return NULL;
    const int inplace = outo != Py_None;
    if (inplace && outo != xo) {
        PyErr_Format(PyExc_ValueError, "%s: out must be the input itself (the in-place form) or None", name);
        return NULL;
    }
    GMTensor *xc = contig(x), *out = NULL;
    if (!xc) return NULL;
    /* in place: the kernel runs on x's data when x is contiguous, else on the copy, which goes back into x */
    out = inplace ? (GMTensor *)Py_NewRef(xc) : gm_empty(x->ndim, x->shape, x->dtype, x->device);
    if (!out) goto fail;
    if (on_cuda(x)) {
#ifdef GM_WITH_CUDA
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(x->device);
        if (!ctx || gm_cuda_kernel_status(name, cuda_activation_forward(data(out), data(xc), gm_numel(x), x->dtype, op,
                                                                        alpha, ctx), ctx) < 0)
            goto fail;
        if (inplace && xc != x && gm_copy_into(x, xc) < 0) goto fail;
#endif
    } else if (on_cpu(x)) {
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = activation_forward(data(out), data(xc), gm_numel(x), x->dtype, op, alpha, gm_num_threads);
        Py_END_ALLOW_THREADS
        if (gm_kernel_status(name, st) < 0) goto fail;
        if (inplace && xc != x && gm_copy_into(x, xc) < 0) goto fail;
    }
    Py_DECREF(xc);
    if (inplace) {
        Py_DECREF(out);
        gm_bump_version(x);
        return Py_NewRef(xo);
    }
    return (PyObject *)out;
fail:
    Py_XDECREF(out);
    Py_DECREF(xc);
    return NULL;
}

static PyObject *py_activation_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "grad", "saved", "alpha", "into_grad", NULL};
    int op, into_grad = 0;
    double alpha = 0.0;
    PyObject *go, *so;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOO|dp:activation_backward", kwlist, &op, &go, &so, &alpha,
                                     &into_grad))
        return NULL;
    if (act_op_arg(op) < 0) return NULL;
    const char *name = act_names[op];
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *s = g ? gm_tensor_arg(so, name, "saved") : NULL;
    if (!s || check_float(name, "grad", g) < 0 || check_devices(name, g, &s, 1) < 0 ||
        same_shape(name, "grad", g, "saved tensor", s) < 0 || same_dtype(name, "grad", g, "saved tensor", s) < 0)
        return NULL;
    GMTensor *gc = contig(g), *sc = contig(s), *dx = NULL;
    if (!gc || !sc) goto done;
    dx = grad_result(g, into_grad);
    if (dx && GM_KERNEL(name, g->device,
                        activation_backward(data(dx), data(gc), data(sc), gm_numel(g), g->dtype, op, alpha,
                                            gm_num_threads),
                        cuda_activation_backward(data(dx), data(gc), data(sc), gm_numel(g), g->dtype, op, alpha,
                                                 ctx)) < 0)
        Py_CLEAR(dx);
done:
    Py_XDECREF(gc);
    Py_XDECREF(sc);
    return (PyObject *)dx;
}

/* ---- dropout ------------------------------------------------------------------------------------------------- */

/* The mask's geometry: (outer mask entries) x (inner elements each). channelwise: one entry per (N, C) of an
 * NCHW input, or per C of an unbatched CHW one. */
static int dropout_geometry(const char *op, GMTensor *x, int channelwise, int *mndim, int64_t *mshape,
                            int64_t *inner) {
    if (!channelwise) {
        *mndim = x->ndim;
        memcpy(mshape, x->shape, sizeof(int64_t) * x->ndim);
        *inner = 1;
        return 0;
    }
    if (x->ndim != 3 && x->ndim != 4) {
        char b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape %s", op,
                     gm_shape_str(x->ndim, x->shape, b));
        return -1;
    }
    *mndim = x->ndim - 2;
    memcpy(mshape, x->shape, sizeof(int64_t) * (x->ndim - 2));
    *inner = x->shape[x->ndim - 2] * x->shape[x->ndim - 1];
    return 0;
}

static int check_p(const char *op, double p) {
    if (p >= 0.0 && p <= 1.0) return 0;
    char msg[200];
    snprintf(msg, sizeof msg, "%s: dropout probability has to be between 0 and 1, but got %g", op, p);
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* 1/(1-p) for kept elements; p = 1 keeps nothing, so the scale is never used. */
static double keep_scale(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

static PyObject *py_dropout(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "p", "channelwise", "inplace", NULL};
    PyObject *xo;
    double p;
    int channelwise = 0, inplace = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Od|pp:dropout", kwlist, &xo, &p, &channelwise, &inplace))
        return NULL;
    const char *name = channelwise ? "dropout2d" : "dropout";
    GMTensor *x = gm_tensor_arg(xo, name, "input");
    if (!x || check_float(name, "input", x) < 0 || check_devices(name, x, NULL, 0) < 0 || check_p(name, p) < 0)
        return NULL;
    int mndim;
    int64_t mshape[GM_MAX_DIMS], inner;
    if (dropout_geometry(name, x, channelwise, &mndim, mshape, &inner) < 0) return NULL;
    const int64_t outer = gm_checked_numel(mndim, mshape, "mask");
    GMTensor *xc = contig(x), *out = NULL, *mask = NULL;
    if (!xc) return NULL;
    out = inplace ? (GMTensor *)Py_NewRef(xc) : gm_empty(x->ndim, x->shape, x->dtype, x->device);
    if (!out || !(mask = gm_empty(mndim, mshape, GM_BOOL, x->device))) goto fail;
    /* p = 1 draws nothing (every element is dropped whatever the draw), as in PyTorch */
    uint64_t seed = 0, offset = 0;
    if (p < 1.0 && rng_take(gm_philox_blocks(GM_F32, outer), &seed, &offset) < 0) goto fail;
    if (on_cuda(x)) {
#ifdef GM_WITH_CUDA
        /* p = 1: the mask kernel keeps nothing (u < 0 never holds) whatever (seed, offset) */
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(x->device);
        if (!ctx || gm_cuda_kernel_status(name, cuda_dropout_mask_forward((uint8_t *)data(mask), outer, p, seed, offset,
                                                                          ctx), ctx) < 0 ||
            gm_cuda_kernel_status(name, cuda_dropout_apply_forward(data(out), data(xc), (const uint8_t *)data(mask),
                                                                   outer, inner, keep_scale(p), x->dtype, ctx),
                                  ctx) < 0)
            goto fail;
        if (inplace && xc != x && gm_copy_into(x, xc) < 0) goto fail;
#endif
    } else if (on_cpu(x)) {
        int st;
        Py_BEGIN_ALLOW_THREADS
        if (p < 1.0) {
            st = dropout_mask_forward((uint8_t *)data(mask), outer, p, seed, offset, gm_num_threads);
        } else {
            memset(data(mask), 0, (size_t)outer);
            st = GM_OK;
        }
        if (st == GM_OK)
            st = dropout_apply_forward(data(out), data(xc), (const uint8_t *)data(mask), outer, inner, keep_scale(p),
                                       x->dtype, gm_num_threads);
        Py_END_ALLOW_THREADS
        if (gm_kernel_status(name, st) < 0) goto fail;
        if (inplace && xc != x && gm_copy_into(x, xc) < 0) goto fail;
    }
    Py_DECREF(xc);
    if (inplace) {
        Py_DECREF(out);
        gm_bump_version(x);
        out = (GMTensor *)Py_NewRef(xo);
    }
    PyObject *res = PyTuple_Pack(2, (PyObject *)out, (PyObject *)mask);
    Py_DECREF(out);
    Py_DECREF(mask);
    return res;
fail:
    Py_XDECREF(out);
    Py_XDECREF(mask);
    Py_DECREF(xc);
    return NULL;
}

static PyObject *py_dropout_backward(PyObject *self, PyObject *args) {
    PyObject *go, *mo;
    double p;
    int into_grad = 0;
    if (!PyArg_ParseTuple(args, "OOd|p:dropout_backward", &go, &mo, &p, &into_grad)) return NULL;
    const char *name = "dropout_backward";
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *m = g ? gm_tensor_arg(mo, name, "mask") : NULL;
    if (!m || check_float(name, "grad", g) < 0 || check_devices(name, g, &m, 1) < 0 || check_p(name, p) < 0)
        return NULL;
    if (m->dtype != GM_BOOL) {
        PyErr_Format(PyExc_TypeError, "%s: mask must be a bool tensor, got %s", name, gm_dtype_name(m->dtype));
        return NULL;
    }
    /* the mask's shape says which dropout made it: the gradient's own, or its leading dims (channelwise) */
    int64_t inner;
    if (m->ndim == g->ndim && !memcmp(m->shape, g->shape, sizeof(int64_t) * g->ndim)) {
        inner = 1;
    } else if (m->ndim == g->ndim - 2 && g->ndim >= 3 && !memcmp(m->shape, g->shape, sizeof(int64_t) * m->ndim)) {
        inner = g->shape[g->ndim - 2] * g->shape[g->ndim - 1];
    } else {
        char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: mask shape %s fits neither grad shape %s nor its leading dims", name,
                     gm_shape_str(m->ndim, m->shape, a), gm_shape_str(g->ndim, g->shape, b));
        return NULL;
    }
    GMTensor *gc = contig(g), *mc = contig(m), *dx = NULL;
    if (!gc || !mc) goto done;
    dx = grad_result(g, into_grad);
    if (dx && on_cuda(g)) {
#ifdef GM_WITH_CUDA
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(g->device);
        const uint8_t *mdata = (const uint8_t *)data(mc);
        if (!ctx || gm_cuda_kernel_status(name, cuda_dropout_apply_forward(data(dx), data(gc), mdata, gm_numel(m),
                                                                           inner, keep_scale(p), g->dtype, ctx),
                                          ctx) < 0)
            Py_CLEAR(dx);
#endif
    } else if (dx && on_cpu(g)) {
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = dropout_apply_forward(data(dx), data(gc), (const uint8_t *)data(mc), gm_numel(m), inner, keep_scale(p),
                                   g->dtype, gm_num_threads);
        Py_END_ALLOW_THREADS
        if (gm_kernel_status(name, st) < 0) Py_CLEAR(dx);
    }
done:
    Py_XDECREF(gc);
    Py_XDECREF(mc);
    return (PyObject *)dx;
}

/* ---- batch norm ---------------------------------------------------------------------------------------------- */

/* A per-channel argument: None, or a float tensor of shape (C,) on x's device. */
static int channel_arg(const char *op, const char *argname, PyObject *o, GMTensor *x, int64_t C, GMTensor **out) {
    if (opt_tensor_arg(o, op, argname, out) < 0) return -1;
    GMTensor *t = *out;
    if (!t) return 0;
    if (check_float(op, argname, t) < 0 || gm_check_same_device(op, x, t) < 0) return -1;
    if (t->ndim != 1 || t->shape[0] != C) {
        char b[GM_SHAPE_BUF], xs[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: %s should have shape (%lld,) (one value per channel of input shape %s), "
                     "got shape %s", op, argname, (long long)C, gm_shape_str(x->ndim, x->shape, xs),
                     gm_shape_str(t->ndim, t->shape, b));
        return -1;
    }
    return 0;
}

/* (N, C, HW) view of an input with at least 2 dims. */
static int nc_geometry(const char *op, GMTensor *x, int64_t *N, int64_t *C, int64_t *HW) {
    if (x->ndim < 2) {
        char b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: expected an input of at least 2 dims (N, C, ...), got shape %s", op,
                     gm_shape_str(x->ndim, x->shape, b));
        return -1;
    }
    *N = x->shape[0];
    *C = x->shape[1];
    *HW = 1;
    for (int d = 2; d < x->ndim; d++) *HW *= x->shape[d];
    return 0;
}

#ifdef GM_WITH_CUDA
/* The CUDA kernels' per-channel partial sums (kernels/cuda/norm.h): a few KiB of workspace, freed right after
 * the call. The CPU kernel needs none (one thread walks a whole channel); a GPU splits channels over blocks. */
static int bn_cuda_workspace(gm_device dev, int64_t N, int64_t C, int64_t HW, int reduce, const gm_cuda_ctx *ctx,
                             GMTensor **ws) {
    const size_t bytes = cuda_batchnorm_workspace_bytes(N, C, HW, reduce, ctx->sm_count);
    const int64_t n = (int64_t)(bytes / sizeof(double));
    *ws = bytes ? gm_empty_workspace(1, &n, GM_F64, dev) : NULL;
    return bytes && !*ws ? -1 : 0;
}
#endif

static PyObject *py_batch_norm(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps",
                             NULL};
    const char *name = "batch_norm";
    PyObject *xo, *rmo, *rvo, *wo, *bo;
    int training;
    double momentum, eps;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOpdd:batch_norm", kwlist, &xo, &rmo, &rvo, &wo, &bo,
                                     &training, &momentum, &eps))
        return NULL;
    GMTensor *x = gm_tensor_arg(xo, name, "input"), *rm, *rv, *w, *b;
    int64_t N, C, HW;
    if (!x || check_float(name, "input", x) < 0 || nc_geometry(name, x, &N, &C, &HW) < 0 ||
        channel_arg(name, "running_mean", rmo, x, C, &rm) < 0 || channel_arg(name, "running_var", rvo, x, C, &rv) < 0 ||
        channel_arg(name, "weight", wo, x, C, &w) < 0 || channel_arg(name, "bias", bo, x, C, &b) < 0)
        return NULL;
    GMTensor *others[4] = {rm, rv, w, b};
    if (check_devices(name, x, others, 4) < 0) return NULL;
    if ((!rm) != (!rv)) {
        PyErr_Format(PyExc_ValueError, "%s: running_mean and running_var must be given together (got only %s)", name,
                     rm ? "running_mean" : "running_var");
        return NULL;
    }
    if (!training && !rm) {
        PyErr_Format(PyExc_ValueError, "%s: running_mean and running_var are required in eval mode "
                     "(training=False): there are no statistics to normalize with", name);
        return NULL;
    }
    if ((w && b && same_dtype(name, "weight", w, "bias", b) < 0) ||
        (rm && same_dtype(name, "running_mean", rm, "running_var", rv) < 0))
        return NULL;
    if (training && N * HW <= 1) {
        char s[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "%s: expected more than 1 value per channel when training, got input shape %s",
                     name, gm_shape_str(x->ndim, x->shape, s));
        return NULL;
    }
    const gm_dtype sdt = stats_dtype(x->dtype), wdt = w ? w->dtype : b ? b->dtype : x->dtype;
    const gm_dtype rdt = rm ? rm->dtype : x->dtype;
    const int64_t cshape[1] = {C};
    GMTensor *xc = contig(x), *wc = contig(w), *bc = contig(b), *rmc = contig(rm), *rvc = contig(rv);
    GMTensor *out = NULL, *mean = NULL, *invstd = NULL;
    PyObject *res = NULL;
    if (!xc || (w && !wc) || (b && !bc) || (rm && (!rmc || !rvc))) goto done;
    if (!(out = gm_empty(x->ndim, x->shape, x->dtype, x->device)) || !(mean = gm_empty(1, cshape, sdt, x->device)) ||
        !(invstd = gm_empty(1, cshape, sdt, x->device)))
        goto done;
    if (on_cuda(x)) {
#ifdef GM_WITH_CUDA
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(x->device);
        GMTensor *ws = NULL;
        if (!ctx || bn_cuda_workspace(x->device, N, C, HW, training, ctx, &ws) < 0) goto done;
        const int st = cuda_batchnorm_forward(data(out), data(mean), data(invstd), data(rmc), data(rvc), data(xc),
                                              data(wc), data(bc), N, C, HW, x->dtype, wdt, rdt, sdt, training,
                                              momentum, eps, data(ws), ctx);
        Py_XDECREF(ws);
        if (gm_cuda_kernel_status(name, st, ctx) < 0) goto done;
        if (training && rm && ((rmc != rm && gm_copy_into(rm, rmc) < 0) || (rvc != rv && gm_copy_into(rv, rvc) < 0)))
            goto done;
#endif
    } else if (gm_meta_as_cuda(x->device)) { /* the CUDA kernel's scratch, for an estimate */
        if (meta_scratch(x->device, bn_scratch_n(N, C, HW, training)) < 0) goto done;
    } else if (on_cpu(x)) {
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = batchnorm_forward(data(out), data(mean), data(invstd), data(rmc), data(rvc), data(xc), data(wc),
                               data(bc), N, C, HW, x->dtype, wdt, rdt, sdt, training, momentum, eps, gm_num_threads);
        Py_END_ALLOW_THREADS
        if (gm_kernel_status(name, st) < 0) goto done;
        /* running stats that were not contiguous were updated in a copy: write it back */
        if (training && rm && ((rmc != rm && gm_copy_into(rm, rmc) < 0) || (rvc != rv && gm_copy_into(rv, rvc) < 0)))
            goto done;
    }
    if (training && rm) { /* the running stats change in place, outside any graph */
        gm_bump_version(rm);
        gm_bump_version(rv);
    }
    res = PyTuple_Pack(3, (PyObject *)out, (PyObject *)mean, (PyObject *)invstd);
done:
    Py_XDECREF(out);
    Py_XDECREF(mean);
    Py_XDECREF(invstd);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    Py_XDECREF(rmc);
    Py_XDECREF(rvc);
    return res;
}

static PyObject *py_batch_norm_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "x", "weight", "mean", "invstd", "training", "need_input", "need_weight",
                             "need_bias", "param_dtype", "into_grad", NULL};
    const char *name = "batch_norm_backward";
    PyObject *go, *xo, *wo, *mo, *io, *pdo = Py_None;
    int training, need_x, need_w, need_b, into_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOpppp|Op:batch_norm_backward", kwlist, &go, &xo, &wo, &mo,
                                     &io, &training, &need_x, &need_w, &need_b, &pdo, &into_grad))
        return NULL;
    /* input may be None in eval mode without a weight gradient (it is not read then): grad gives the geometry */
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *x = NULL, *w, *m, *is;
    int64_t N, C, HW;
    if (!g || (xo != Py_None && !(x = gm_tensor_arg(xo, name, "input"))) || check_float(name, "grad", g) < 0 ||
        (x && (same_shape(name, "grad", g, "input", x) < 0 || same_dtype(name, "grad", g, "input", x) < 0)) ||
        nc_geometry(name, g, &N, &C, &HW) < 0 || channel_arg(name, "weight", wo, g, C, &w) < 0 ||
        channel_arg(name, "mean", mo, g, C, &m) < 0 || channel_arg(name, "invstd", io, g, C, &is) < 0)
        return NULL;
    if (!x && (training || need_w)) {
        PyErr_Format(PyExc_TypeError, "%s: input is required in training mode and for the weight's gradient", name);
        return NULL;
    }
    if (!m || !is) {
        PyErr_Format(PyExc_TypeError, "%s: mean and invstd (the forward's saved statistics) are required", name);
        return NULL;
    }
    GMTensor *others[4] = {x, w, m, is};
    if (check_devices(name, g, others, 4) < 0 || same_dtype(name, "mean", m, "invstd", is) < 0) return NULL;
    gm_dtype wdt = w ? w->dtype : g->dtype;
    if (pdo != Py_None && gm_parse_dtype(pdo, &wdt, "param_dtype") < 0) return NULL;
    if (!gm_dtype_is_float(wdt)) {
        PyErr_Format(PyExc_TypeError, "%s: param_dtype must be a floating point dtype, got %s", name,
                     gm_dtype_name(wdt));
        return NULL;
    }
    const int64_t cshape[1] = {C};
    GMTensor *gc = contig(g), *xc = contig(x), *wc = contig(w), *mc = contig(m), *ic = contig(is);
    GMTensor *dx = NULL, *dw = NULL, *db = NULL;
    PyObject *res = NULL;
    if (!gc || (x && !xc) || (w && !wc) || !mc || !ic) goto done;
    if ((need_x && !(dx = grad_result(g, into_grad))) || (need_w && !(dw = gm_empty(1, cshape, wdt, g->device))) ||
        (need_b && !(db = gm_empty(1, cshape, wdt, g->device))))
        goto done;
    if (on_cuda(g)) {
#ifdef GM_WITH_CUDA
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(g->device);
        GMTensor *ws = NULL;
        if (!ctx || bn_cuda_workspace(g->device, N, C, HW, training || need_w || need_b, ctx, &ws) < 0) goto done;
        const int st = cuda_batchnorm_backward(data(dx), data(dw), data(db), data(gc), data(xc), data(wc), data(mc),
                                               data(ic), N, C, HW, g->dtype, wdt, m->dtype, training, data(ws), ctx);
        Py_XDECREF(ws);
        if (gm_cuda_kernel_status(name, st, ctx) < 0) goto done;
#endif
    } else if (gm_meta_as_cuda(g->device)) { /* the CUDA kernel's scratch, for an estimate */
        if (meta_scratch(g->device, bn_scratch_n(N, C, HW, training || need_w || need_b)) < 0) goto done;
    } else if (on_cpu(g)) {
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = batchnorm_backward(data(dx), data(dw), data(db), data(gc), data(xc), data(wc), data(mc), data(ic), N, C,
                                HW, g->dtype, wdt, m->dtype, training, gm_num_threads);
        Py_END_ALLOW_THREADS
        if (gm_kernel_status(name, st) < 0) goto done;
    }
    res = Py_BuildValue("(OOO)", dx ? (PyObject *)dx : Py_None, dw ? (PyObject *)dw : Py_None,
                        db ? (PyObject *)db : Py_None);
done:
    Py_XDECREF(dx);
    Py_XDECREF(dw);
    Py_XDECREF(db);
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(mc);
    Py_XDECREF(ic);
    return res;
}

/* ---- softmax --------------------------------------------------------------------------------------------- */

/* (outer, D, inner) around dim; a 0-d tensor is one element along its only (implicit) dim. */
static int dim_geometry(GMTensor *x, long long dim_arg, const char *argname, int64_t *outer, int64_t *D,
                        int64_t *inner) {
    int dim = gm_wrap_dim(dim_arg, x->ndim, argname);
    if (dim < 0) return -1;
    *outer = *inner = 1;
    *D = x->ndim ? x->shape[dim] : 1;
    for (int d = 0; d < dim; d++) *outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) *inner *= x->shape[d];
    return 0;
}

static PyObject *py_softmax(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "dim", "log", NULL};
    PyObject *xo;
    long long dim;
    int log = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OL|p:softmax", kwlist, &xo, &dim, &log)) return NULL;
    const char *name = log ? "log_softmax" : "softmax";
    GMTensor *x = gm_tensor_arg(xo, name, "input");
    int64_t outer, D, inner;
    if (!x || check_float(name, "input", x) < 0 || check_devices(name, x, NULL, 0) < 0 ||
        dim_geometry(x, dim, log ? "log_softmax: dim" : "softmax: dim", &outer, &D, &inner) < 0)
        return NULL;
    GMTensor *xc = contig(x), *out = NULL;
    if (!xc) return NULL;
    out = gm_empty(x->ndim, x->shape, x->dtype, x->device);
    if (out && GM_KERNEL(name, x->device,
                         softmax_forward(data(out), data(xc), outer, D, inner, x->dtype, log, gm_num_threads),
                         cuda_softmax_forward(data(out), data(xc), outer, D, inner, x->dtype, log, ctx)) < 0)
        Py_CLEAR(out);
    Py_DECREF(xc);
    return (PyObject *)out;
}

static PyObject *py_softmax_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "out", "dim", "log", "into_grad", NULL};
    PyObject *go, *oo;
    long long dim;
    int log = 0, into_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOL|pp:softmax_backward", kwlist, &go, &oo, &dim, &log,
                                     &into_grad))
        return NULL;
    const char *name = log ? "log_softmax_backward" : "softmax_backward";
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *y = g ? gm_tensor_arg(oo, name, "out") : NULL;
    int64_t outer, D, inner;
    if (!y || check_float(name, "grad", g) < 0 || check_devices(name, g, &y, 1) < 0 ||
        same_shape(name, "grad", g, "out", y) < 0 || same_dtype(name, "grad", g, "out", y) < 0 ||
        dim_geometry(g, dim, log ? "log_softmax_backward: dim" : "softmax_backward: dim", &outer, &D, &inner) < 0)
        return NULL;
    GMTensor *gc = contig(g), *yc = contig(y), *dx = NULL;
    if (!gc || !yc) goto done;
    dx = grad_result(g, into_grad);
    if (dx && GM_KERNEL(name, g->device,
                        softmax_backward(data(dx), data(gc), data(yc), outer, D, inner, g->dtype, log,
                                         gm_num_threads),
                        cuda_softmax_backward(data(dx), data(gc), data(yc), outer, D, inner, g->dtype, log, ctx)) < 0)
        Py_CLEAR(dx);
done:
    Py_XDECREF(gc);
    Py_XDECREF(yc);
    return (PyObject *)dx;
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
                     " (class-probability targets are not supported; convert indices with .long())" : "");
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
    const int64_t *p = (const int64_t *)data(t), bad = loss_first_bad_target(p, gm_numel(t), C, ignore_index);
    return bad < 0 ? 0 : bad_target_error(op, bad, p[bad], C, ignore_index);
}

/* check_targets for a CUDA kernel's record of the first bad target (kernels/cuda/loss.h: position or -1, value). */
static int check_bad_record(const char *op, const int64_t bad[2], int64_t C, int64_t ignore_index) {
    return bad[0] < 0 ? 0 : bad_target_error(op, bad[0], bad[1], C, ignore_index);
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
    int64_t bad[2] = {-1, 0};
    if (LOSS_KERNEL_CUDA(op, t->device, LOSS_SCRATCH_N, LOSS_WAITS,
                         cuda_loss_first_bad_target(bad, (const int64_t *)data(t), gm_numel(t), C, ignore_index,
                                                    scratch, ctx)) < 0)
        return -1;
    return check_bad_record(op, bad, C, ignore_index);
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
    if (eps >= 0.0 && eps <= 1.0) return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "%s: label_smoothing must be in [0, 1], got %g", op, eps);
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

static PyObject *py_cross_entropy(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "target", "weight", "ignore_index", "reduction", "label_smoothing", NULL};
    const char *name = "cross_entropy";
    PyObject *xo, *to, *wo = Py_None;
    long long ignore_index = -100;
    int reduction = LOSS_MEAN;
    double eps = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OLid:cross_entropy", kwlist, &xo, &to, &wo, &ignore_index,
                                     &reduction, &eps))
        return NULL;
    GMTensor *x = gm_tensor_arg(xo, name, "input"), *t = x ? gm_tensor_arg(to, name, "target") : NULL;
    int64_t N, C, inner;
    if (!t || check_float(name, "input", x) < 0 || reduction_arg(name, reduction) < 0 || smoothing_arg(name, eps) < 0 ||
        check_devices(name, x, &t, 1) < 0 || class_geometry(name, x->ndim, x->shape, t, &N, &C, &inner) < 0 ||
        check_targets(name, t, C, ignore_index) < 0)
        return NULL;
    int ok;
    GMTensor *wd = class_weight(name, wo, x, C, &ok);
    if (!ok) return NULL;
    GMTensor *xc = contig(x), *tc = contig(t), *loss = NULL, *lse = NULL;
    PyObject *res = NULL;
    double wsum = 0.0;
    if (!xc || !tc || !(loss = loss_out(reduction, t, x->dtype)) ||
        !(lse = gm_empty(t->ndim, t->shape, stats_dtype(x->dtype), x->device)))
        goto done;
    int64_t bad[2] = {-1, 0}; /* the CUDA kernel checks the targets (the CPU's are checked above) */
    if (LOSS_KERNEL(name, x->device, LOSS_SCRATCH_N, LOSS_WAITS,
                    cross_entropy_forward(data(loss), data(lse), &wsum, data(xc), (const int64_t *)data(tc),
                                          (const double *)data(wd), N, C, inner, ignore_index, reduction, eps,
                                          x->dtype, lse->dtype, gm_num_threads),
                    cuda_cross_entropy_forward(data(loss), data(lse), &wsum, data(xc), (const int64_t *)data(tc),
                                               (const double *)data(wd), N, C, inner, ignore_index, reduction, eps,
                                               x->dtype, lse->dtype, scratch, bad, ctx)) < 0 ||
        check_bad_record(name, bad, C, ignore_index) < 0)
        goto done;
    PyObject *ws = float_or_nan(wsum, x);
    if (ws) res = Py_BuildValue("(OON)", (PyObject *)loss, (PyObject *)lse, ws);
done:
    Py_XDECREF(loss);
    Py_XDECREF(lse);
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(wd);
    return res;
}

static PyObject *py_cross_entropy_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
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
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(lc);
    Py_XDECREF(wd);
    return (PyObject *)dx;
}

static PyObject *py_nll_loss(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "target", "weight", "ignore_index", "reduction", NULL};
    const char *name = "nll_loss";
    PyObject *xo, *to, *wo = Py_None;
    long long ignore_index = -100;
    int reduction = LOSS_MEAN;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OLi:nll_loss", kwlist, &xo, &to, &wo, &ignore_index,
                                     &reduction))
        return NULL;
    GMTensor *x = gm_tensor_arg(xo, name, "input"), *t = x ? gm_tensor_arg(to, name, "target") : NULL;
    int64_t N, C, inner;
    if (!t || check_float(name, "input", x) < 0 || reduction_arg(name, reduction) < 0 ||
        check_devices(name, x, &t, 1) < 0 || class_geometry(name, x->ndim, x->shape, t, &N, &C, &inner) < 0 ||
        check_targets(name, t, C, ignore_index) < 0)
        return NULL;
    int ok;
    GMTensor *wd = class_weight(name, wo, x, C, &ok);
    if (!ok) return NULL;
    GMTensor *xc = contig(x), *tc = contig(t), *loss = NULL;
    PyObject *res = NULL;
    double wsum = 0.0;
    if (!xc || !tc || !(loss = loss_out(reduction, t, x->dtype))) goto done;
    int64_t bad[2] = {-1, 0}; /* the CUDA kernel checks the targets (the CPU's are checked above) */
    if (LOSS_KERNEL(name, x->device, LOSS_SCRATCH_N, LOSS_WAITS,
                    nll_loss_forward(data(loss), &wsum, data(xc), (const int64_t *)data(tc), (const double *)data(wd),
                                     N, C, inner, ignore_index, reduction, x->dtype, gm_num_threads),
                    cuda_nll_loss_forward(data(loss), &wsum, data(xc), (const int64_t *)data(tc),
                                          (const double *)data(wd), N, C, inner, ignore_index, reduction, x->dtype,
                                          scratch, bad, ctx)) < 0 ||
        check_bad_record(name, bad, C, ignore_index) < 0)
        goto done;
    PyObject *ws = float_or_nan(wsum, x);
    if (ws) res = Py_BuildValue("(ON)", (PyObject *)loss, ws);
done:
    Py_XDECREF(loss);
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(wd);
    return res;
}

/* Backward of nll_loss takes the input's shape and dtype, not the input: its gradient does not depend on the
 * values, so the forward keeps nothing input-sized alive. */
static PyObject *py_nll_loss_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
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
    Py_XDECREF(gc);
    Py_XDECREF(tc);
    Py_XDECREF(wd);
    return (PyObject *)dx;
}

/* ---- pointwise losses: mse, l1 ---------------------------------------------------------------------------- */

static const char *const pw_names[2] = {"mse_loss", "l1_loss"};

static int pw_op_arg(int op) {
    if (op == LOSS_MSE || op == LOSS_L1) return 0;
    PyErr_Format(PyExc_ValueError, "pointwise_loss: unknown op %d; expected MSE=0 L1=1", op);
    return -1;
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

/* The mse/l1/bce forwards' scratch (kernels/cuda/loss.h): their kernels reduce across blocks for MEAN and SUM only. */
static int64_t reduced_scratch_n(int reduction) { return reduction != LOSS_NONE ? LOSS_SCRATCH_N : 0; }

static PyObject *py_pointwise_loss(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "x", "target", "reduction", NULL};
    int op, reduction = LOSS_MEAN;
    PyObject *xo, *to;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOO|i:pointwise_loss", kwlist, &op, &xo, &to, &reduction))
        return NULL;
    if (pw_op_arg(op) < 0) return NULL;
    const char *name = pw_names[op];
    GMTensor *x = gm_tensor_arg(xo, name, "input"), *t = x ? gm_tensor_arg(to, name, "target") : NULL;
    if (!t || reduction_arg(name, reduction) < 0 || check_pair(name, x, t) < 0) return NULL;
    GMTensor *xc = contig(x), *tc = contig(t), *loss = NULL;
    if (!xc || !tc || !(loss = loss_out(reduction, x, x->dtype))) goto done;
    if (LOSS_KERNEL(name, x->device, reduced_scratch_n(reduction), LOSS_QUEUES,
                    pointwise_loss_forward(data(loss), data(xc), data(tc), gm_numel(x), op, reduction, x->dtype,
                                           gm_num_threads),
                    cuda_pointwise_loss_forward(data(loss), data(xc), data(tc), gm_numel(x), op, reduction, x->dtype,
                                                scratch, ctx)) < 0)
        Py_CLEAR(loss);
done:
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    return (PyObject *)loss;
}

static PyObject *py_pointwise_loss_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"op", "grad", "x", "target", "reduction", "need_x", "need_target", NULL};
    int op, reduction, need_x, need_t;
    PyObject *go, *xo, *to;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOOOipp:pointwise_loss_backward", kwlist, &op, &go, &xo, &to,
                                     &reduction, &need_x, &need_t))
        return NULL;
    if (pw_op_arg(op) < 0) return NULL;
    const char *name = pw_names[op];
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *x = g ? gm_tensor_arg(xo, name, "input") : NULL;
    GMTensor *t = x ? gm_tensor_arg(to, name, "target") : NULL;
    if (!t || reduction_arg(name, reduction) < 0 || check_pair(name, x, t) < 0 ||
        check_devices(name, x, &g, 1) < 0 || check_loss_grad(name, g, reduction, x, x->dtype) < 0)
        return NULL;
    GMTensor *gc = contig(g), *xc = contig(x), *tc = contig(t), *dx = NULL, *dtg = NULL;
    PyObject *res = NULL;
    if (!gc || !xc || !tc || (need_x && !(dx = gm_empty(x->ndim, x->shape, x->dtype, x->device))) ||
        (need_t && !(dtg = gm_empty(x->ndim, x->shape, x->dtype, x->device))))
        goto done;
    if (GM_KERNEL(name, x->device,
                  pointwise_loss_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), gm_numel(x), op,
                                          reduction, x->dtype, gm_num_threads),
                  cuda_pointwise_loss_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), gm_numel(x), op,
                                               reduction, x->dtype, ctx)) < 0)
        goto done;
    res = Py_BuildValue("(OO)", dx ? (PyObject *)dx : Py_None, dtg ? (PyObject *)dtg : Py_None);
done:
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(dx);
    Py_XDECREF(dtg);
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

static PyObject *py_bce_with_logits(PyObject *self, PyObject *args, PyObject *kwargs) {
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
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(wc);
    Py_XDECREF(pwc);
    return (PyObject *)loss;
}

static PyObject *py_bce_with_logits_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
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
    if (!gc || !xc || !tc || (need_x && !(dx = gm_empty(x->ndim, x->shape, x->dtype, x->device))) ||
        (need_t && !(dtg = gm_empty(x->ndim, x->shape, x->dtype, x->device))))
        goto done;
    if (GM_KERNEL(name, x->device,
                  bce_logits_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), data(wc), wp, data(pwc), pwp,
                                      gm_numel(x), reduction, x->dtype, gm_num_threads),
                  cuda_bce_logits_backward(data(dx), data(dtg), data(gc), data(xc), data(tc), data(wc), wp, data(pwc),
                                           pwp, gm_numel(x), reduction, x->dtype, ctx)) < 0)
        goto done;
    res = Py_BuildValue("(OO)", dx ? (PyObject *)dx : Py_None, dtg ? (PyObject *)dtg : Py_None);
done:
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(tc);
    Py_XDECREF(dx);
    Py_XDECREF(dtg);
    Py_XDECREF(wc);
    Py_XDECREF(pwc);
    return res;
}

/* ---- method table ------------------------------------------------------------------------------------------- */

#define KW(fn) (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS

PyMethodDef gm_nnops_methods[] = {
    {"_set_meta_target", (PyCFunction)(void (*)(void))gm_py_set_meta_target, METH_VARARGS | METH_KEYWORDS,
     "_set_meta_target(target, sm_count=0) -> previous (target, sm_count): what ops on meta allocate for on this "
     "thread, 'cpu' (default) or 'cuda' (the CUDA kernels' scratch; convolutions without cuDNN workspace)."},
    {"_get_meta_target", gm_py_get_meta_target, METH_NOARGS, "_get_meta_target() -> (target, sm_count)."},
    {"activation", KW(py_activation), "activation(op, x, alpha=0.0, out=None): relu/leaky_relu/sigmoid/tanh/gelu."},
    {"activation_backward", KW(py_activation_backward),
     "activation_backward(op, grad, saved, alpha=0.0, into_grad=False)."},
    {"dropout", KW(py_dropout), "dropout(x, p, channelwise=False, inplace=False) -> (out, bool mask)."},
    {"dropout_backward", py_dropout_backward, METH_VARARGS, "dropout_backward(grad, mask, p, into_grad=False)."},
    {"batch_norm", KW(py_batch_norm),
     "batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) -> (out, mean, invstd)."},
    {"batch_norm_backward", KW(py_batch_norm_backward),
     "batch_norm_backward(grad, x, weight, mean, invstd, training, need_input, need_weight, need_bias, "
     "param_dtype=None, into_grad=False) -> (dx, dweight, dbias)."},
    {"softmax", KW(py_softmax), "softmax(x, dim, log=False)."},
    {"softmax_backward", KW(py_softmax_backward), "softmax_backward(grad, out, dim, log=False, into_grad=False)."},
    {"cross_entropy", KW(py_cross_entropy),
     "cross_entropy(x, target, weight=None, ignore_index=-100, reduction=1, label_smoothing=0.0) -> "
     "(loss, lse, wsum)."},
    {"cross_entropy_backward", KW(py_cross_entropy_backward),
     "cross_entropy_backward(grad, x, target, weight, lse, ignore_index, reduction, label_smoothing, wsum)."},
    {"nll_loss", KW(py_nll_loss), "nll_loss(x, target, weight=None, ignore_index=-100, reduction=1) -> (loss, wsum)."},
    {"nll_loss_backward", KW(py_nll_loss_backward),
     "nll_loss_backward(grad, target, weight, ignore_index, reduction, wsum, shape, dtype)."},
    {"pointwise_loss", KW(py_pointwise_loss), "pointwise_loss(op, x, target, reduction=1): MSE=0, L1=1."},
    {"pointwise_loss_backward", KW(py_pointwise_loss_backward),
     "pointwise_loss_backward(op, grad, x, target, reduction, need_x, need_target) -> (dx, dtarget)."},
    {"bce_with_logits", KW(py_bce_with_logits),
     "bce_with_logits(x, target, weight=None, pos_weight=None, reduction=1)."},
    {"bce_with_logits_backward", KW(py_bce_with_logits_backward),
     "bce_with_logits_backward(grad, x, target, weight, pos_weight, reduction, need_x, need_target) -> (dx, dtarget)."},
    {NULL, NULL, 0, NULL},
};
