/* csrc/ops_dropout.c — dropout and dropout2d (channelwise), forward and backward, with a 1-byte mask drawn from
 * the Philox generator (kernels/cpu/dropout.c, kernels/cuda/dropout.cu). Part of the nn op family (ops_nnops.c
 * has its interface and method table; ops_nn_internal.h the helpers it shares). */
#include "ops_nn_internal.h"

#include "cpu/dropout.h"
#include "cpu/philox.h"

#ifdef GM_WITH_CUDA
#include "../kernels/cuda/dropout.h"
#endif

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
    return unit_interval_arg(op, p, "dropout probability has to be between 0 and 1, but got");
}

/* 1/(1-p) for kept elements; p = 1 keeps nothing, so the scale is never used. */
static double keep_scale(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

/* The forward's two kernels, the mask then the masked scaled copy, as one call (on the CPU one release of the
 * GIL; on CUDA the first failing status). p = 1 draws nothing: the CPU zeroes the mask, and the CUDA mask kernel
 * keeps nothing (u < 0 never holds) whatever (seed, offset). */
static int dropout_cpu(uint8_t *mask, void *out, const void *x, int64_t outer, int64_t inner, double p, uint64_t seed,
                       uint64_t offset, gm_dtype dt, int nthreads) {
    int st = GM_OK;
    if (p < 1.0) st = dropout_mask_forward(mask, outer, p, seed, offset, nthreads);
    else memset(mask, 0, (size_t)outer);
    return st == GM_OK ? dropout_apply_forward(out, x, mask, outer, inner, keep_scale(p), dt, nthreads) : st;
}

#ifdef GM_WITH_CUDA
static int dropout_cuda(uint8_t *mask, void *out, const void *x, int64_t outer, int64_t inner, double p,
                        uint64_t seed, uint64_t offset, gm_dtype dt, gm_cuda_ctx *ctx) {
    int st = cuda_dropout_mask_forward(mask, outer, p, seed, offset, ctx);
    return st == GM_OK ? cuda_dropout_apply_forward(out, x, mask, outer, inner, keep_scale(p), dt, ctx) : st;
}
#endif

PyObject *gm_py_dropout(PyObject *self, PyObject *args, PyObject *kwargs) {
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
    if (GM_KERNEL(name, x->device,
                  dropout_cpu((uint8_t *)data(mask), data(out), data(xc), outer, inner, p, seed, offset, x->dtype,
                              gm_num_threads),
                  dropout_cuda((uint8_t *)data(mask), data(out), data(xc), outer, inner, p, seed, offset, x->dtype,
                               ctx)) < 0 ||
        (inplace && inplace_writeback(x, xc) < 0))
        goto fail;
    Py_DECREF(xc);
    if (inplace) {
        Py_DECREF(out);
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

PyObject *gm_py_dropout_backward(PyObject *self, PyObject *args) {
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
    if (dx && GM_KERNEL(name, g->device,
                        dropout_apply_forward(data(dx), data(gc), (const uint8_t *)data(mc), gm_numel(m), inner,
                                              keep_scale(p), g->dtype, gm_num_threads),
                        cuda_dropout_apply_forward(data(dx), data(gc), (const uint8_t *)data(mc), gm_numel(m), inner,
                                                   keep_scale(p), g->dtype, ctx)) < 0)
        Py_CLEAR(dx);
done:
    Py_XDECREF(gc);
    Py_XDECREF(mc);
    return (PyObject *)dx;
}
