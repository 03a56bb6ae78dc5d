/* csrc/ops_norm.c — batch norm, forward (running statistics updated in place) and backward
 * (kernels/cpu/norm.c, kernels/cuda/norm.cu), and the CUDA kernels' per-channel scratch, which meta standing
 * for CUDA requests too; group norm, forward and backward (kernels/cpu/group_norm.c, kernels/cuda/group_norm.cu:
 * no scratch on any device), which nn/_functional_nn.py also runs layer norm and instance norm through. Part of
 * the nn op family (ops_nnops.c has its interface and method table;
 * ops_nn_internal.h the helpers it shares). */
#include "ops_nn_internal.h"

#include "cpu/group_norm.h"
#include "cpu/norm.h"
#include "cuda/scratch_sizes.h"
#include "meta_target.h"

#ifdef GM_WITH_CUDA
#include "../kernels/cuda/group_norm.h"
#include "../kernels/cuda/norm.h"
#endif

/* The CUDA kernels' per-channel partial sums (kernels/cuda/scratch_sizes.h) in float64 elements, for the meta
 * target's multiprocessor count. */
static int64_t bn_scratch_n(int64_t N, int64_t C, int64_t HW, int reduce) {
    return (int64_t)(cuda_batchnorm_workspace_bytes(N, C, HW, reduce, gm_meta_sm_count()) / sizeof(double));
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

PyObject *gm_py_batch_norm(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps",
                             "inplace", NULL};
    const char *name = "batch_norm";
    PyObject *xo, *rmo, *rvo, *wo, *bo;
    int training, inplace = 0;
    double momentum, eps;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOpdd|p:batch_norm", kwlist, &xo, &rmo, &rvo, &wo, &bo,
                                     &training, &momentum, &eps, &inplace))
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
    /* inplace (a Sequential under no_grad handing over an intermediate nothing else holds, nn/modules/
     * _donation.py): the eval kernels, CPU and CUDA, compute each element of the output from the same element of
     * the input alone, so the output may be the input. Not in training (the statistics are read in a first pass,
     * left to the kernels' own order) and not for a strided input (it is read through a contiguous copy). */
    if (inplace && !training && xc == x) {
        out = (GMTensor *)Py_NewRef((PyObject *)x);
        gm_bump_version(x);
    } else if (!(out = gm_empty(x->ndim, x->shape, x->dtype, x->device))) {
        goto done;
    }
    if (!(mean = gm_empty(1, cshape, sdt, x->device)) ||
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
    RELEASE(out, mean, invstd, xc, wc, bc, rmc, rvc);
    return res;
}

PyObject *gm_py_batch_norm_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
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
    RELEASE(dx, dw, db, gc, xc, wc, mc, ic);
    return res;
}

/* ---- group norm ---------------------------------------------------------------------------------------------- */

/* A per-channel argument of group norm: None, or a float tensor of shape (C,) on x's device. RuntimeError with
 * PyTorch's wording otherwise. */
static int gn_channel_arg(const char *op, const char *argname, PyObject *o, GMTensor *x, int64_t C,
                          GMTensor **out) {
    if (opt_tensor_arg(o, op, argname, out) < 0) return -1;
    GMTensor *t = *out;
    if (!t) return 0;
    if (check_float(op, argname, t) < 0 || gm_check_same_device(op, x, t) < 0) return -1;
    if (t->ndim != 1 || t->shape[0] != C) {
        char b[GM_SHAPE_BUF], xs[GM_SHAPE_BUF];
        PyErr_Format(PyExc_RuntimeError, "%s: expected %s to be a vector of size equal to the number of channels "
                     "in input (%lld), but got %s of shape %s and input of shape %s", op, argname, (long long)C,
                     argname, gm_shape_str(t->ndim, t->shape, b), gm_shape_str(x->ndim, x->shape, xs));
        return -1;
    }
    return 0;
}

/* x's (N, C, HW) and a valid group count: C divisible by G. */
static int gn_geometry(const char *op, GMTensor *x, int64_t G, int64_t *N, int64_t *C, int64_t *HW) {
    if (nc_geometry(op, x, N, C, HW) < 0) return -1;
    if (G < 1 || *C % G) {
        char xs[GM_SHAPE_BUF];
        PyErr_Format(G < 1 ? PyExc_ValueError : PyExc_RuntimeError, "%s: expected the number of channels in input "
                     "to be divisible by num_groups (a positive int), but got input of shape %s and num_groups=%lld",
                     op, gm_shape_str(x->ndim, x->shape, xs), (long long)G);
        return -1;
    }
    return 0;
}

PyObject *gm_py_group_norm(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "num_groups", "weight", "bias", "eps", NULL};
    const char *name = "group_norm";
    PyObject *xo, *wo = Py_None, *bo = Py_None;
    long long G;
    double eps = 1e-5;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OL|OOd:group_norm", kwlist, &xo, &G, &wo, &bo, &eps))
        return NULL;
    GMTensor *x = gm_tensor_arg(xo, name, "input"), *w, *b;
    int64_t N, C, HW;
    if (!x || check_float(name, "input", x) < 0 || gn_geometry(name, x, G, &N, &C, &HW) < 0 ||
        gn_channel_arg(name, "weight", wo, x, C, &w) < 0 || gn_channel_arg(name, "bias", bo, x, C, &b) < 0 ||
        (w && b && same_dtype(name, "weight", w, "bias", b) < 0))
        return NULL;
    const gm_dtype sdt = stats_dtype(x->dtype), wdt = w ? w->dtype : b ? b->dtype : x->dtype;
    const int64_t sshape[2] = {N, G};
    GMTensor *xc = contig(x), *wc = contig(w), *bc = contig(b), *out = NULL, *mean = NULL, *rstd = NULL;
    PyObject *res = NULL;
    if (!xc || (w && !wc) || (b && !bc)) goto done;
    if (!(out = gm_empty(x->ndim, x->shape, x->dtype, x->device)) || !(mean = gm_empty(2, sshape, sdt, x->device)) ||
        !(rstd = gm_empty(2, sshape, sdt, x->device)))
        goto done;
    if (GM_KERNEL(name, x->device,
                  groupnorm_forward(data(out), data(mean), data(rstd), data(xc), data(wc), data(bc), N, C, HW, G,
                                    x->dtype, wdt, sdt, eps, gm_num_threads),
                  cuda_groupnorm_forward(data(out), data(mean), data(rstd), data(xc), data(wc), data(bc), N, C, HW,
                                         G, x->dtype, wdt, sdt, eps, ctx)) < 0)
        goto done;
    res = PyTuple_Pack(3, (PyObject *)out, (PyObject *)mean, (PyObject *)rstd);
done:
    RELEASE(out, mean, rstd, xc, wc, bc);
    return res;
}

/* One of the forward's saved statistics: (N, G) in the statistics dtype of x. */
static int gn_stats_arg(const char *op, const char *argname, PyObject *o, GMTensor *x, int64_t N, int64_t G,
                        GMTensor **out) {
    if (!(*out = gm_tensor_arg(o, op, argname)) || gm_check_same_device(op, x, *out) < 0) return -1;
    GMTensor *t = *out;
    if (t->ndim == 2 && t->shape[0] == N && t->shape[1] == G && t->dtype == stats_dtype(x->dtype)) return 0;
    char b[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: %s should be the forward's (%lld, %lld) %s statistics, got shape %s of %s",
                 op, argname, (long long)N, (long long)G, gm_dtype_name(stats_dtype(x->dtype)),
                 gm_shape_str(t->ndim, t->shape, b), gm_dtype_name(t->dtype));
    return -1;
}

PyObject *gm_py_group_norm_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "x", "weight", "mean", "rstd", "num_groups", "need_input", "need_weight",
                             "need_bias", "param_dtype", "into_grad", NULL};
    const char *name = "group_norm_backward";
    PyObject *go, *xo, *wo, *mo, *ro, *pdo = Py_None;
    long long G;
    int need_x, need_w, need_b, into_grad = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOLppp|Op:group_norm_backward", kwlist, &go, &xo, &wo, &mo,
                                     &ro, &G, &need_x, &need_w, &need_b, &pdo, &into_grad))
        return NULL;
    GMTensor *g = gm_tensor_arg(go, name, "grad"), *x, *w, *m, *r;
    int64_t N, C, HW;
    if (!g || !(x = gm_tensor_arg(xo, name, "input")) || check_float(name, "grad", g) < 0 ||
        same_shape(name, "grad", g, "input", x) < 0 || same_dtype(name, "grad", g, "input", x) < 0 ||
        gm_check_same_device(name, g, x) < 0 || gn_geometry(name, g, G, &N, &C, &HW) < 0 ||
        gn_channel_arg(name, "weight", wo, g, C, &w) < 0 || gn_stats_arg(name, "mean", mo, g, N, G, &m) < 0 ||
        gn_stats_arg(name, "rstd", ro, g, N, G, &r) < 0)
        return NULL;
    gm_dtype wdt = w ? w->dtype : g->dtype;
    if (pdo != Py_None && gm_parse_dtype(pdo, &wdt, "param_dtype") < 0) return NULL;
    if (!gm_dtype_is_float(wdt)) {
        PyErr_Format(PyExc_TypeError, "%s: param_dtype must be a floating point dtype, got %s", name,
                     gm_dtype_name(wdt));
        return NULL;
    }
    const int64_t cshape[1] = {C};
    GMTensor *gc = contig(g), *xc = contig(x), *wc = contig(w), *mc = contig(m), *rc = contig(r);
    GMTensor *dx = NULL, *dw = NULL, *db = NULL;
    PyObject *res = NULL;
    if (!gc || !xc || (w && !wc) || !mc || !rc) goto done;
    if ((need_x && !(dx = grad_result(g, into_grad))) || (need_w && !(dw = gm_empty(1, cshape, wdt, g->device))) ||
        (need_b && !(db = gm_empty(1, cshape, wdt, g->device))))
        goto done;
    if (GM_KERNEL(name, g->device,
                  groupnorm_backward(data(dx), data(dw), data(db), data(gc), data(xc), data(wc), data(mc), data(rc),
                                     N, C, HW, G, g->dtype, wdt, m->dtype, gm_num_threads),
                  cuda_groupnorm_backward(data(dx), data(dw), data(db), data(gc), data(xc), data(wc), data(mc),
                                          data(rc), N, C, HW, G, g->dtype, wdt, m->dtype, ctx)) < 0)
        goto done;
    res = Py_BuildValue("(OOO)", dx ? (PyObject *)dx : Py_None, dw ? (PyObject *)dw : Py_None,
                        db ? (PyObject *)db : Py_None);
done:
    RELEASE(dx, dw, db, gc, xc, wc, mc, rc);
    return res;
}
