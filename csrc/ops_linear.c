/* csrc/ops_linear.c — the linear layer, forward and backward: out (..., out) = input (..., in) @ weight^T + bias
 * as one BLAS gemm (kernels/cpu/conv.c's linear_*) or cuBLAS call (kernels/cuda/linear.h), each operand read in
 * place where its strides make it a BLAS matrix and copied (workspace) where they do not. Part of the
 * convolution family (ops_conv.c has the method table; ops_conv_internal.h the helpers it shares). */
#include "ops_conv_internal.h"
#include "cpu/matmul.h"
#ifdef GM_WITH_CUDA
#include "cuda/linear.h"
#endif

/* t (..., cols) as a BLAS matrix (rows, cols): the leading dims must collapse into one row stride. 0 when t
 * needs a contiguous copy first. */
static int as_matrix(GMTensor *t, int64_t rows, int64_t cols, conv_mat *m) {
    int nd = t->ndim;
    int64_t es = (int64_t)gm_dtype_size(t->dtype), n = 1, rs = cols, expect = 0;
    for (int i = nd - 2; i >= 0; i--) {
        int64_t s = t->shape[i];
        if (s == 1) continue;
        if (s == 0) break; /* nothing is read */
        if (n == 1) rs = t->strides[i];
        else if (t->strides[i] != expect) return 0;
        n *= s;
        expect = rs * n;
    }
    int64_t cs = nd >= 1 ? t->strides[nd - 1] : 1;
    int64_t ld;
    if (!cpu_matmul_blas_layout(rows, cols, rs * es, cs * es, (size_t)es, &m->trans, &ld)) return 0;
    m->p = gm_tensor_data(t);
    m->ld = ld;
    return 1;
}

/* m describes t, or a contiguous workspace copy of it made into *copy (on meta the copy is only allocated). */
static int matrix_operand(GMTensor *t, int64_t rows, int64_t cols, conv_mat *m, GMTensor **copy) {
    *copy = NULL;
    if (as_matrix(t, rows, cols, m)) return 0;
    size_t unused = 0;
    if (contiguous(t, copy, &unused) < 0) return -1;
    as_matrix(*copy, rows, cols, m);
    return 0;
}

static int plan_linear(const char *op, int xnd, const int64_t *xs, int wnd, const int64_t *ws, int64_t *M,
                       int64_t *I, int64_t *O) {
    char sx[GM_SHAPE_BUF], sw[GM_SHAPE_BUF];
    if (wnd != 2) {
        PyErr_Format(PyExc_ValueError, "%s: expected a 2-D weight (out_features, in_features), got shape %s", op,
                     gm_shape_str(wnd, ws, sw));
        return -1;
    }
    if (xnd < 1) {
        PyErr_Format(PyExc_ValueError, "%s: expected an input with at least 1 dimension (..., in_features), got a "
                     "0-d tensor", op);
        return -1;
    }
    if (xs[xnd - 1] != ws[1]) {
        PyErr_Format(PyExc_ValueError, "%s: input %s has %lld features in its last dimension, but weight %s "
                     "(out_features, in_features) expects %lld", op, gm_shape_str(xnd, xs, sx),
                     (long long)xs[xnd - 1], gm_shape_str(2, ws, sw), (long long)ws[1]);
        return -1;
    }
    *M = 1;
    for (int i = 0; i < xnd - 1; i++) *M *= xs[i];
    *I = ws[1];
    *O = ws[0];
    return 0;
}

PyObject *gm_py_linear(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"input", "weight", "bias", NULL};
    const char *op = "linear";
    PyObject *xo, *wo, *bo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:linear", kwlist, &xo, &wo, &bo)) return NULL;
    GMTensor *x, *w, *b;
    if (forward_operands(op, xo, wo, bo, &x, &w, &b) < 0) return NULL;
    GMTensor *ops[] = {x, w, b};
    const char *names[] = {"input", "weight", "bias"};
    int64_t M, I, O;
    /* bfloat16 runs on the CPU (kernels/cpu/linear.c on gemm_bf16); float16 there is widened by the Python layer */
    if (conv_check_operands(op, ops, names, 3, x->dtype == GM_BF16) < 0 ||
        plan_linear(op, x->ndim, x->shape, w->ndim, w->shape, &M, &I, &O) < 0 ||
        check_bias(op, b, w->shape[0], "out_features") < 0)
        return NULL;
    int64_t oshape[GM_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof(int64_t) * x->ndim);
    oshape[x->ndim - 1] = O;
    GMTensor *xc = NULL, *wc = NULL, *bc = NULL, *out = NULL;
    conv_mat mx = {0}, mw = {0};
    size_t used = 0;
    int rc = -1;
    if (matrix_operand(x, M, I, &mx, &xc) == 0 && matrix_operand(w, O, I, &mw, &wc) == 0 &&
        contiguous(b, &bc, &used) == 0 && (out = gm_empty(x->ndim, oshape, x->dtype, x->device))) {
        void *po = gm_tensor_data(out), *pb = data_or_null(bc);
        rc = GM_KERNEL(op, x->device, linear_forward(po, mx, mw, pb, M, I, O, x->dtype, gm_num_threads),
                       cuda_linear_forward(po, mx, mw, pb, M, I, O, x->dtype, ctx));
    }
    return forward_result(rc, xc, wc, bc, out);
}

PyObject *gm_py_linear_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_output", "input", "weight", "output_mask", "input_shape", "weight_shape", NULL};
    const char *op = "linear_backward";
    PyObject *goo, *xo, *wo, *masko, *xshape_o = Py_None, *wshape_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|OO:linear_backward", kwlist, &goo, &xo, &wo, &masko,
                                     &xshape_o, &wshape_o))
        return NULL;
    int mask[3], xnd, wnd;
    int64_t xshape[GM_MAX_DIMS], wshape[GM_MAX_DIMS], M, I, O;
    GMTensor *go, *x, *w;
    if (backward_operands(op, goo, xo, wo, &go, &x, &w) < 0) return NULL;
    GMTensor *ops[] = {go, x, w};
    const char *names[] = {"grad_output", "input", "weight"};
    if (parse_mask(masko, mask) < 0 || shape_of(x, xshape_o, op, "input", &xnd, xshape) < 0 ||
        shape_of(w, wshape_o, op, "weight", &wnd, wshape) < 0 ||
        conv_check_operands(op, ops, names, 3, go->dtype == GM_BF16) < 0 ||
        plan_linear(op, xnd, xshape, wnd, wshape, &M, &I, &O) < 0)
        return NULL;
    if (check_needed_operands(op, mask, x, w) < 0) return NULL;
    int64_t oshape[GM_MAX_DIMS];
    memcpy(oshape, xshape, sizeof(int64_t) * xnd);
    oshape[xnd - 1] = O;
    if (check_grad_output(op, go, xnd, oshape) < 0) return NULL;
    GMTensor *gc = NULL, *xc = NULL, *wc = NULL, *dx = NULL, *dw = NULL, *db = NULL;
    conv_mat mg = {0}, mx = {0}, mw = {0};
    gm_device dev = go->device;
    if (matrix_operand(go, M, O, &mg, &gc) < 0) goto fail;
    if (mask[0] && matrix_operand(w, O, I, &mw, &wc) < 0) goto fail;
    if (mask[1] && matrix_operand(x, M, I, &mx, &xc) < 0) goto fail;
    if (mask[0] && !(dx = gm_empty(xnd, xshape, go->dtype, dev))) goto fail;
    if (mask[1] && !(dw = gm_empty(2, wshape, go->dtype, dev))) goto fail;
    if (mask[2] && !(db = gm_empty(1, &O, go->dtype, dev))) goto fail;
    void *pdx = data_or_null(dx), *pdw = data_or_null(dw), *pdb = data_or_null(db);
    if (GM_KERNEL(op, dev, linear_backward(pdx, pdw, pdb, mg, mx, mw, M, I, O, go->dtype, gm_num_threads),
                  cuda_linear_backward(pdx, pdw, pdb, mg, mx, mw, M, I, O, go->dtype, ctx)) < 0)
        goto fail;
    RELEASE(gc, xc, wc);
    return grads_tuple(dx, dw, db);
fail:
    RELEASE(gc, xc, wc, dx, dw, db);
    return NULL;
}