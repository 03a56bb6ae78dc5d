/* csrc/ops_nn_internal.h — private to the nn op family (ops_nnops.c and the files it lists): the argument
 * checks and layout helpers that its activation, dropout, norm and loss files share, and the entry points its
 * method table (ops_nnops.c) registers. Nothing outside the family includes it. */
#ifndef GM_OPS_NN_INTERNAL_H
#define GM_OPS_NN_INTERNAL_H

#include "gm.h"
#include "ops_util.h"

#include <stdio.h>

/* ---- arguments ---------------------------------------------------------------------------------------------- */

/* None -> *out = NULL; a tensor -> *out = it; else TypeError. */
static inline int opt_tensor_arg(PyObject *o, const char *op, const char *argname, GMTensor **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    return (*out = gm_tensor_arg(o, op, argname)) ? 0 : -1;
}

static inline int check_float(const char *op, const char *argname, GMTensor *t) {
    if (gm_dtype_is_float(t->dtype)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s must be a floating point tensor (float32, float64, float16, bfloat16), "
                 "got %s", op, argname, gm_dtype_name(t->dtype));
    return -1;
}

/* The first tensor decides the device: every other must match it. */
static inline int check_devices(const char *op, GMTensor *first, GMTensor *const *others, int n) {
    for (int i = 0; i < n; i++)
        if (others[i] && gm_check_same_device(op, first, others[i]) < 0) return -1;
    return 0;
}

static inline int same_shape(const char *op, const char *an, GMTensor *a, const char *bn, GMTensor *b) {
    if (a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim)) return 0;
    char sa[GM_SHAPE_BUF], sb[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: %s shape %s does not match %s shape %s", op, an,
                 gm_shape_str(a->ndim, a->shape, sa), bn, gm_shape_str(b->ndim, b->shape, sb));
    return -1;
}

static inline int same_dtype(const char *op, const char *an, GMTensor *a, const char *bn, GMTensor *b) {
    if (a->dtype == b->dtype) return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s dtype %s does not match %s dtype %s", op, an, gm_dtype_name(a->dtype), bn,
                 gm_dtype_name(b->dtype));
    return -1;
}

/* ValueError "op: <rule> <v>" unless 0 <= v <= 1 (formatted here: PyErr_Format has no %g). */
static inline int unit_interval_arg(const char *op, double v, const char *rule) {
    if (v >= 0.0 && v <= 1.0) return 0;
    char msg[200];
    snprintf(msg, sizeof msg, "%s: %s %g", op, rule, v);
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* ---- devices and data ------------------------------------------------------------------------------------- */

static inline int on_cpu(const GMTensor *t) { return t->device.type == GM_DEV_CPU; }
static inline int on_cuda(const GMTensor *t) { return t->device.type == GM_DEV_CUDA; }
static inline void *data(GMTensor *t) { return data_or_null(t); }

/* (a | None, b | None) as a new tuple, the two slots of a backward's optional gradients. */
static inline PyObject *pair_or_none(GMTensor *a, GMTensor *b) {
    return Py_BuildValue("(OO)", a ? (PyObject *)a : Py_None, b ? (PyObject *)b : Py_None);
}

/* On meta standing for CUDA (meta_target.h): the scratch the CUDA kernel would take (n float64s, 0: none),
 * allocated as workspace and freed at once, where the CUDA op holds it (after the outputs, freed before the op
 * returns). Same dtype and count as on CUDA, so the allocator sees the same request. */
static inline int meta_scratch(gm_device dev, int64_t n) {
    if (n <= 0) return 0;
    GMTensor *ws = gm_empty_workspace(1, &n, GM_F64, dev);
    Py_XDECREF(ws);
    return ws ? 0 : -1;
}

/* Statistics saved per channel/position: float64 for float64 data, float32 otherwise (as PyTorch keeps them). */
static inline gm_dtype stats_dtype(gm_dtype dt) { return dt == GM_F64 ? GM_F64 : GM_F32; }

/* t itself (new reference) when contiguous, else a contiguous workspace copy in dtype dt (filled except on meta).
 * The kernels of this family take contiguous arrays: activations coming out of conv/linear already are. */
static inline GMTensor *contig_as(GMTensor *t, gm_dtype dt) {
    if (gm_is_contiguous(t) && t->dtype == dt) return (GMTensor *)Py_NewRef(t);
    GMTensor *c = gm_empty_workspace(t->ndim, t->shape, dt, t->device);
    if (!c) return NULL;
    if (t->device.type != GM_DEV_META && gm_copy_into(c, t) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return c;
}
static inline GMTensor *contig(GMTensor *t) { return t ? contig_as(t, t->dtype) : NULL; }

/* Where a backward writes its same-shaped input gradient: over grad itself when the engine handed it over
 * (into_grad) and nothing else holds its storage, else a new tensor. */
static inline GMTensor *grad_result(GMTensor *g, int into_grad) {
    if (into_grad && gm_is_contiguous(g) && g->storage->refcount == 1) return (GMTensor *)Py_NewRef(g);
    return gm_empty(g->ndim, g->shape, g->dtype, g->device);
}

/* The end of an in-place form (out=x) whose kernel ran on xc, x itself or its contiguous copy: the copy's values
 * go back into x (on meta too, which copies no value but checks x can be written: an expanded view cannot), and x's version moves on. 0, or -1 + exception. */
static inline int inplace_writeback(GMTensor *x, GMTensor *xc) {
    if (xc != x && gm_copy_into(x, xc) < 0) return -1;
    gm_bump_version(x);
    return 0;
}

/* ---- the entry points (registered in ops_nnops.c) ------------------------------------------------------ */

/* ops_activation.c */
GM_PY_KW_DECL(activation);
GM_PY_KW_DECL(activation_backward);
GM_PY_KW_DECL(softmax);
GM_PY_KW_DECL(softmax_backward);
GM_PY_KW_DECL(prelu);
GM_PY_KW_DECL(prelu_backward);
GM_PY_KW_DECL(relu_mask);
GM_PY_KW_DECL(relu_mask_backward);
/* ops_dropout.c */
GM_PY_KW_DECL(dropout);
PyObject *gm_py_dropout_backward(PyObject *self, PyObject *args);
/* ops_norm.c */
GM_PY_KW_DECL(batch_norm);
GM_PY_KW_DECL(batch_norm_backward);
GM_PY_KW_DECL(group_norm);
GM_PY_KW_DECL(group_norm_backward);
/* ops_loss.c */
GM_PY_KW_DECL(cross_entropy);
GM_PY_KW_DECL(cross_entropy_backward);
GM_PY_KW_DECL(nll_loss);
GM_PY_KW_DECL(nll_loss_backward);
GM_PY_KW_DECL(pointwise_loss);
GM_PY_KW_DECL(pointwise_loss_backward);
GM_PY_KW_DECL(bce_with_logits);
GM_PY_KW_DECL(bce_with_logits_backward);
/* ops_ctc.c */
GM_PY_KW_DECL(ctc_loss);
GM_PY_KW_DECL(ctc_loss_backward);
/* ops_rnn_cell.c */
GM_PY_KW_DECL(lstm_cell);
GM_PY_KW_DECL(lstm_cell_backward);
GM_PY_KW_DECL(gru_cell);
GM_PY_KW_DECL(gru_cell_backward);

#endif
