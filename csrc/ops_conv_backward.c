/* csrc/ops_conv_backward.c — the backward ops of conv2d and conv_transpose2d: their input, weight and bias
 * gradients (output_mask says which), from the saved input and weight or, where a gradient does not need one,
 * from its shape alone. Both are conv passes of one conv_geom (see ops_conv.c's header); this file decides which
 * pass gives which gradient and which operands need contiguous copies, and hands the passes to conv_run_passes
 * (ops_conv_workspace.c). */
#include "ops_conv_internal.h"
#ifdef GM_WITH_CUDA
#include "cuda/conv.h"
#endif

/* (n, k, l) element strides of a 4-D tensor whose (H, W) dims collapse into one; 0 if they do not. */
static int collapse_hw(GMTensor *t, int64_t ts[3]) {
    ts[0] = t->strides[0];
    ts[1] = t->strides[1];
    if (t->shape[2] == 1) ts[2] = t->strides[3];
    else if (t->shape[3] == 1) ts[2] = t->strides[2];
    else if (t->strides[2] == t->strides[3] * t->shape[3]) ts[2] = t->strides[3];
    else return 0;
    return 1;
}

/* db (K) = the sum of t (N, K, H, W) over N, H and W: t read through its strides when its (H, W) collapse, else
 * from a contiguous workspace copy (which meta allocates too). */
static int bias_backward(const char *op, GMTensor *t, GMTensor *db) {
    int64_t ts[3];
    GMTensor *tc = NULL;
    size_t unused = 0;
    if (!collapse_hw(t, ts)) {
        if (contiguous(t, &tc, &unused) < 0) return -1;
        collapse_hw(tc, ts);
    }
    GMTensor *src = tc ? tc : t;
    void *pdb = gm_tensor_data(db), *psrc = gm_tensor_data(src);
    const int64_t N = src->shape[0], K = src->shape[1], HW = src->shape[2] * src->shape[3];
    const int rc = GM_KERNEL(op, src->device, conv_bias_backward(pdb, psrc, N, K, HW, ts, src->dtype, gm_num_threads),
                             cuda_conv_bias_backward(pdb, psrc, N, K, HW, ts, src->dtype, ctx));
    Py_XDECREF(tc);
    return rc;
}

/* Backward of conv2d and conv_transpose2d: they differ in the plan and in which conv pass gives which
 * gradient. For conv2d the geometry's input is `input`; for conv_transpose2d it is grad_output. */
typedef struct {
    const char *op;
    int transposed;
    GMTensor *go, *x, *w;
    int64_t xshape[GM_MAX_DIMS], wshape[GM_MAX_DIMS];
    conv_geom g;
    int mask[3];
    int mixed; /* conv2d's only: a float32 weight under bfloat16 activations (conv_f32_weight) */
} conv_bwd;

static PyObject *conv_backward(conv_bwd *a) {
    const char *op = a->op;
    GMTensor *go = a->go, *x = a->x, *w = a->w;
    gm_dtype dt = go->dtype;
    gm_device dev = go->device;
    GMTensor *dx = NULL, *dw = NULL, *db = NULL, *gc = NULL, *wc = NULL, *xc = NULL;
    size_t used = 0;
    conv_geom *g = &a->g;
    conv_job jobs[2];
    int nj = 0;
    if (a->mask[0] && (!(dx = gm_empty(4, a->xshape, dt, dev)))) goto fail;
    if (a->mask[1] && (!(dw = gm_empty(4, a->wshape, dt, dev)))) goto fail;
    if (a->mask[2]) {
        int64_t nb = a->transposed ? a->wshape[1] * g->G : a->wshape[0];
        if (!(db = gm_empty(1, &nb, dt, dev))) goto fail;
    }
    if (!a->transposed) {
        /* dx = conv2d input-gradient of go (contiguous) with w; dw = weight-gradient of go (contiguous), x. */
        set_input_strides(g, x);
        if ((dx || dw) && contiguous(go, &gc, &used) < 0) goto fail;
        if (dx && contiguous(w, &wc, &used) < 0) goto fail;
        if (dx) jobs[nj++] = (conv_job){CONV_BACKWARD_DATA, dx, gc, wc, NULL};
        if (dw) jobs[nj++] = (conv_job){CONV_BACKWARD_WEIGHT, dw, gc, x, NULL};
    } else {
        /* dx = conv2d forward of go with w; dw = conv2d weight-gradient with dout = x (contiguous), input = go. */
        set_input_strides(g, go);
        if (dx && contiguous(w, &wc, &used) < 0) goto fail;
        if (dw && contiguous(x, &xc, &used) < 0) goto fail;
        if (dx) jobs[nj++] = (conv_job){CONV_FORWARD, dx, go, wc, NULL};
        if (dw) jobs[nj++] = (conv_job){CONV_BACKWARD_WEIGHT, dw, xc, go, NULL};
    }
    if (conv_run_passes(op, g, dt, dev, jobs, nj, used) < 0) goto fail;
    Py_CLEAR(gc);
    Py_CLEAR(wc);
    Py_CLEAR(xc);
    if (db && bias_backward(op, go, db) < 0) goto fail;
    return grads_tuple(dx, dw, db);
fail:
    RELEASE(gc, wc, xc, dx, dw, db);
    return NULL;
}

/* Parses (grad_output, input, weight) + shapes and runs the common checks of both backward ops. */
static int parse_backward(conv_bwd *a, PyObject *goo, PyObject *xo, PyObject *wo, PyObject *xshape,
                          PyObject *wshape, PyObject *masko, int64_t groups) {
    const char *op = a->op;
    int nd;
    if (backward_operands(op, goo, xo, wo, &a->go, &a->x, &a->w) < 0 || parse_mask(masko, a->mask) < 0) return -1;
    a->mixed = a->mixed && conv_f32_weight(a->go, a->w, NULL, groups) && (!a->x || a->x->dtype == GM_BF16);
    if (shape_of(a->x, xshape, op, "input", &nd, a->xshape) < 0 ||
        check_4d(op, "input", "(N, C, H, W)", nd, a->xshape) < 0)
        return -1;
    if (shape_of(a->w, wshape, op, "weight", &nd, a->wshape) < 0 ||
        check_4d(op, "weight", "(K, C/groups, kH, kW)", nd, a->wshape) < 0)
        return -1;
    GMTensor *ops[] = {a->go, a->x, a->w};
    const char *names[] = {"grad_output", "input", "weight"};
    if (conv_check_mixed(op, ops, names, 3, 2, a->mixed) < 0) return -1;
    return check_needed_operands(op, a->mask, a->x, a->w);
}

PyObject *gm_py_conv2d_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input", "weight", "stride", "padding", "dilation", "groups",
                             "output_mask", "input_shape", "weight_shape", NULL};
    PyObject *goo, *xo, *wo, *stride, *padding, *dilation, *masko, *xshape = Py_None, *wshape = Py_None;
    long long groups;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOLO|OO:conv2d_backward", kwlist, &goo, &xo, &wo, &stride,
                                     &padding, &dilation, &groups, &masko, &xshape, &wshape))
        return NULL;
    conv_bwd a = {.op = "conv2d_backward", .transposed = 0, .mixed = 1};
    int64_t oshape[4];
    if (parse_backward(&a, goo, xo, wo, xshape, wshape, masko, groups) < 0) return NULL;
    if (plan_conv2d(a.op, a.xshape, a.wshape, stride, padding, dilation, groups, &a.g, oshape) < 0) return NULL;
    a.g.wf32 = a.mixed;
    if (check_grad_output(a.op, a.go, 4, oshape) < 0) return NULL;
    return conv_backward(&a);
}

PyObject *gm_py_conv_transpose2d_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input", "weight", "stride", "padding", "output_padding", "groups",
                             "dilation", "output_mask", "input_shape", "weight_shape", NULL};
    PyObject *goo, *xo, *wo, *stride, *padding, *opad, *dilation, *masko, *xshape = Py_None, *wshape = Py_None;
    long long groups;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOLOO|OO:conv_transpose2d_backward", kwlist, &goo, &xo, &wo,
                                     &stride, &padding, &opad, &groups, &dilation, &masko, &xshape, &wshape))
        return NULL;
    conv_bwd a = {.op = "conv_transpose2d_backward", .transposed = 1};
    int64_t oshape[4];
    if (parse_backward(&a, goo, xo, wo, xshape, wshape, masko, groups) < 0) return NULL;
    if (plan_conv_transpose2d(a.op, a.xshape, a.wshape, stride, padding, opad, groups, dilation, &a.g, oshape) < 0)
        return NULL;
    if (check_grad_output(a.op, a.go, 4, oshape) < 0) return NULL;
    return conv_backward(&a);
}
