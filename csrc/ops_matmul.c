/* csrc/ops_matmul.c — _C.matmul with NumPy/PyTorch semantics: 1-D operands are promoted to a matrix and the
 * added dim removed again, batch dims broadcast (by 0 strides, never by copying). Validation and shapes are
 * shared by every device; the CPU kernel is kernels/cpu/matmul.c. Transposed operands reach BLAS as transpose
 * flags; only a matrix that is neither row- nor column-contiguous is copied into a temporary. On cuda the same
 * operands, geometry and workspace go to kernels/cuda/matmul.cu (cuBLAS). */
#include "gm.h"
#include "cpu/matmul.h"
#ifdef GM_WITH_CUDA
#include "../kernels/cuda/matmul.h"
#endif

/* Shapes of the product, independent of strides. */
typedef struct {
    int64_t M, N, K;
    int nbatch;
    int64_t batch_shape[GM_MAX_DIMS];
    int out_ndim;
    int64_t out_shape[GM_MAX_DIMS];
} mm_shape;

static int infer_shape(GMTensor *a, GMTensor *b, mm_shape *s) {
    char sa[GM_SHAPE_BUF], sb[GM_SHAPE_BUF], ba[GM_SHAPE_BUF], bb[GM_SHAPE_BUF];
    int an = a->ndim, bn = b->ndim;
    s->M = an >= 2 ? a->shape[an - 2] : 1;
    s->K = a->shape[an - 1];
    int64_t Kb = bn >= 2 ? b->shape[bn - 2] : b->shape[0];
    s->N = bn >= 2 ? b->shape[bn - 1] : 1;
    if (s->K != Kb) {
        PyErr_Format(PyExc_ValueError, "matmul: shapes %s and %s: inner dimensions %lld and %lld differ",
                     gm_shape_str(an, a->shape, sa), gm_shape_str(bn, b->shape, sb), (long long)s->K,
                     (long long)Kb);
        return -1;
    }
    int abn = an > 2 ? an - 2 : 0, bbn = bn > 2 ? bn - 2 : 0;
    s->nbatch = abn > bbn ? abn : bbn;
    for (int i = 0; i < s->nbatch; i++) { /* right-aligned, NumPy broadcasting */
        int ia = i - (s->nbatch - abn), ib = i - (s->nbatch - bbn);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            PyErr_Format(PyExc_ValueError, "matmul: shapes %s and %s: batch dimensions %s and %s cannot be "
                         "broadcast (%lld vs %lld)", gm_shape_str(an, a->shape, sa), gm_shape_str(bn, b->shape, sb),
                         gm_shape_str(abn, a->shape, ba),
                         gm_shape_str(bbn, b->shape, bb), (long long)da, (long long)db);
            return -1;
        }
        s->batch_shape[i] = da == 1 ? db : da;
    }
    s->out_ndim = 0;
    for (int i = 0; i < s->nbatch; i++) s->out_shape[s->out_ndim++] = s->batch_shape[i];
    if (an >= 2) s->out_shape[s->out_ndim++] = s->M;
    if (bn >= 2) s->out_shape[s->out_ndim++] = s->N;
    return 0;
}

/* Row/column byte strides of the matrix part of an operand (1-D: a row vector for a, a column for b). */
static void matrix_strides(GMTensor *t, int is_a, int64_t *rs, int64_t *cs) {
    int64_t es = (int64_t)gm_dtype_size(t->dtype);
    int n = t->ndim;
    if (n >= 2) {
        *rs = t->strides[n - 2] * es;
        *cs = t->strides[n - 1] * es;
    } else if (is_a) {
        *rs = 0;
        *cs = t->strides[0] * es;
    } else {
        *rs = t->strides[0] * es;
        *cs = 0;
    }
}

static void fill_geom(GMTensor *a, GMTensor *b, const mm_shape *s, matmul_geom *g) {
    int64_t es = (int64_t)gm_dtype_size(a->dtype);
    memset(g, 0, sizeof *g);
    g->M = s->M;
    g->N = s->N;
    g->K = s->K;
    g->nbatch = s->nbatch;
    int abn = a->ndim > 2 ? a->ndim - 2 : 0, bbn = b->ndim > 2 ? b->ndim - 2 : 0;
    for (int i = 0; i < s->nbatch; i++) {
        int ia = i - (s->nbatch - abn), ib = i - (s->nbatch - bbn);
        g->batch_shape[i] = s->batch_shape[i];
        /* a size-1 (or missing) batch dim broadcasts: stride 0 */
        g->a_bstrides[i] = ia >= 0 && a->shape[ia] != 1 ? a->strides[ia] * es : 0;
        g->b_bstrides[i] = ib >= 0 && b->shape[ib] != 1 ? b->strides[ib] * es : 0;
    }
    matrix_strides(a, 1, &g->a_rs, &g->a_cs);
    matrix_strides(b, 0, &g->b_rs, &g->b_cs);
}

/* When b is the same matrix for every batch (a weight) and a's batch dims and rows lie at one row stride
 * (a contiguous activation), the whole batch is one (batch*M, K) @ (K, N) gemm: BLAS is much faster on one
 * large product than on many small ones, and the contiguous output already has that layout. */
static void fold_batch(matmul_geom *g, int64_t es) {
    if (g->nbatch == 0) return;
    for (int i = 0; i < g->nbatch; i++)
        if (g->b_bstrides[i] != 0 && g->batch_shape[i] != 1) return;
    int64_t rows = g->M, rs = g->a_rs, expect = g->M == 1 ? 0 : g->a_rs * g->M;
    for (int i = g->nbatch - 1; i >= 0; i--) {
        int64_t n = g->batch_shape[i];
        if (n == 0) return; /* nothing to compute anyway */
        if (n == 1) continue;
        if (rows == 1) { /* no row stride yet: this batch dim supplies it */
            rs = g->a_bstrides[i];
        } else if (g->a_bstrides[i] != expect) {
            return;
        }
        rows *= n;
        expect = rs * rows;
    }
    int t;
    int64_t ld;
    if (!cpu_matmul_blas_layout(rows, g->K, rs, g->a_cs, (size_t)es, &t, &ld) || t != 0) return;
    g->M = rows;
    g->a_rs = rs;
    g->nbatch = 0;
}

/* A temporary contiguous copy of t (same shape): on meta only allocated, so that the estimate sees it. */
static GMTensor *contiguous_copy(GMTensor *t) {
    GMTensor *c = gm_empty_workspace(t->ndim, t->shape, t->dtype, t->device); /* freed after the product */
    if (!c) return NULL;
    if (t->device.type != GM_DEV_META && gm_copy_into(c, t) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return c;
}

static PyObject *py_matmul(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"a", "b", NULL};
    PyObject *ao, *bo;
    char sa[GM_SHAPE_BUF], sb[GM_SHAPE_BUF];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:matmul", kwlist, &ao, &bo)) return NULL;
    if (!gm_is_tensor(ao) || !gm_is_tensor(bo)) {
        PyErr_Format(PyExc_TypeError, "matmul: expected two Tensors, got %.100s and %.100s", Py_TYPE(ao)->tp_name,
                     Py_TYPE(bo)->tp_name);
        return NULL;
    }
    GMTensor *a = (GMTensor *)ao, *b = (GMTensor *)bo;
    if (gm_check_same_device("matmul", a, b) < 0) return NULL;
    if (a->ndim == 0 || b->ndim == 0) {
        PyErr_Format(PyExc_ValueError, "matmul: both arguments need at least 1 dimension, got shapes %s and %s "
                     "(use * to multiply by a scalar)", gm_shape_str(a->ndim, a->shape, sa),
                     gm_shape_str(b->ndim, b->shape, sb));
        return NULL;
    }
    if (a->dtype != b->dtype) {
        PyErr_Format(PyExc_TypeError, "matmul: dtypes differ: %s and %s; cast one operand first",
                     gm_dtype_name(a->dtype), gm_dtype_name(b->dtype));
        return NULL;
    }
    gm_dtype dt = a->dtype;
    if (gm_check_compute_dtype("matmul", "a", dt) < 0) return NULL;
    if (dt == GM_BOOL) {
        PyErr_SetString(PyExc_TypeError, "matmul: bool tensors are not supported; cast to int64 or a float dtype");
        return NULL;
    }
    mm_shape s;
    if (infer_shape(a, b, &s) < 0) return NULL;

    GMTensor *ta = NULL, *tb = NULL, *out = NULL, *ws = NULL;
    int64_t es = (int64_t)gm_dtype_size(dt);
    /* BLAS (cuBLAS too) reads a matrix only if it is row- or column-contiguous; other dtypes read any layout. */
    if (cpu_matmul_needs_blas_layout(dt)) {
        int t;
        int64_t ld, rs, cs;
        matrix_strides(a, 1, &rs, &cs);
        if (!cpu_matmul_blas_layout(s.M, s.K, rs, cs, (size_t)es, &t, &ld) && !(ta = contiguous_copy(a))) goto fail;
        matrix_strides(b, 0, &rs, &cs);
        if (!cpu_matmul_blas_layout(s.K, s.N, rs, cs, (size_t)es, &t, &ld) && !(tb = contiguous_copy(b))) goto fail;
    }
    matmul_geom g;
    fill_geom(ta ? ta : a, tb ? tb : b, &s, &g);
    /* Half operands are widened per batch in the workspace; folding would make it batch-sized. */
    if (cpu_matmul_needs_blas_layout(dt)) fold_batch(&g, es);
    if (!(out = gm_empty(s.out_ndim, s.out_shape, dt, a->device))) goto fail;
    /* The CPU path widens halves into a workspace. meta simulates the CPU's allocations (until a meta run can
     * name a CUDA target, whose cuBLAS multiplies halves directly), so it allocates the workspace too, and so does
     * cuda, whose allocations must be the ones meta predicts: it uses the workspace only to pack a 16-bit operand
     * that cuBLAS cannot read as it is. */
    size_t wsb = cpu_matmul_workspace_nbytes(dt, g.M, g.N, g.K);
    if (wsb) {
        int64_t n = (int64_t)(wsb / sizeof(float));
        if (!(ws = gm_empty_workspace(1, &n, GM_F32, a->device))) goto fail;
    }
    if (a->device.type == GM_DEV_CUDA) {
#ifdef GM_WITH_CUDA
        gm_cuda_ctx *ctx = gm_cuda_ctx_for(a->device);
        if (!ctx) goto fail;
        int st = cuda_matmul_forward(gm_tensor_data(out), gm_tensor_data(ta ? ta : a), gm_tensor_data(tb ? tb : b),
                                     dt, &g, ws ? gm_tensor_data(ws) : NULL, wsb, ctx);
        if (st == GM_ERR_UNSUPPORTED) {
            PyErr_Format(PyExc_RuntimeError, "matmul: shapes %s and %s: a size exceeds cuBLAS's 32-bit integers",
                         gm_shape_str(a->ndim, a->shape, sa), gm_shape_str(b->ndim, b->shape, sb));
            goto fail;
        }
        if (gm_cuda_kernel_status("matmul", st, ctx) < 0) goto fail;
#endif
    } else if (a->device.type == GM_DEV_CPU) {
        int st;
        const void *pa = gm_tensor_data(ta ? ta : a), *pb = gm_tensor_data(tb ? tb : b);
        void *po = gm_tensor_data(out), *pw = ws ? gm_tensor_data(ws) : NULL;
        Py_BEGIN_ALLOW_THREADS
        st = cpu_matmul_forward(po, pa, pb, dt, &g, pw, wsb, gm_num_threads);
        Py_END_ALLOW_THREADS
        if (st != GM_OK) {
            PyErr_Format(PyExc_RuntimeError, "matmul: the CPU kernel failed with status %d for shapes %s and %s%s",
                         st, gm_shape_str(a->ndim, a->shape, sa), gm_shape_str(b->ndim, b->shape, sb),
                         st == GM_ERR_UNSUPPORTED ? " (a size exceeds BLAS's 32-bit integers)" : "");
            goto fail;
        }
    }
    Py_XDECREF(ws);
    Py_XDECREF(ta);
    Py_XDECREF(tb);
    return (PyObject *)out;
fail:
    Py_XDECREF(ws);
    Py_XDECREF(ta);
    Py_XDECREF(tb);
    Py_XDECREF(out);
    return NULL;
}

PyMethodDef gm_matmul_methods[] = {
    {"matmul", (PyCFunction)(void (*)(void))py_matmul, METH_VARARGS | METH_KEYWORDS,
     "matmul(a, b): NumPy/PyTorch matrix product (1-D, 2-D, batched with broadcast batch dims)."},
    {NULL, NULL, 0, NULL},
};
