/* csrc/ops_ctc.c — F.ctc_loss's kernels (kernels/cpu/ctc.c, kernels/cuda/ctc.cu), forward and backward: argument
 * checks, outputs, the backward's scratch (the same on every device, so meta's estimate is exact). Part of the nn
 * op family (ops_nnops.c has its interface and method table; ops_nn_internal.h the helpers it shares). The only
 * caller is python/gpumemnet/nn/_functional_ctc.py, which has checked the values (lengths, labels) with PyTorch's
 * messages; the CPU kernel checks them again and refuses, the CUDA one gives that sample NaN, rather than read out
 * of bounds. */
#include "ops_nn_internal.h"

#include "cpu/ctc.h"

#ifdef GM_WITH_CUDA
#include "../kernels/cuda/ctc.h"
#endif

/* The arguments shared by forward and backward: log_probs (T, N, C) float; targets (N, L), in_lens and tg_lens (N)
 * int64, all on log_probs's device. */
static int ctc_args(const char *op, GMTensor *lp, GMTensor *tg, GMTensor *in_lens, GMTensor *tg_lens) {
    GMTensor *others[3] = {tg, in_lens, tg_lens};
    char b[GM_SHAPE_BUF];
    if (check_float(op, "log_probs", lp) < 0 || check_devices(op, lp, others, 3) < 0) return -1;
    if (lp->ndim != 3) {
        PyErr_Format(PyExc_ValueError, "%s: log_probs must be (T, N, C), got shape %s", op,
                     gm_shape_str(lp->ndim, lp->shape, b));
        return -1;
    }
    const int64_t N = lp->shape[1];
    if (tg->dtype != GM_I64 || tg->ndim != 2 || tg->shape[0] != N) {
        PyErr_Format(PyExc_ValueError, "%s: targets must be int64 of shape (%lld, L), got %s of shape %s", op,
                     (long long)N, gm_dtype_name(tg->dtype), gm_shape_str(tg->ndim, tg->shape, b));
        return -1;
    }
    GMTensor *lens[2] = {in_lens, tg_lens};
    const char *names[2] = {"input_lengths", "target_lengths"};
    for (int i = 0; i < 2; i++)
        if (lens[i]->dtype != GM_I64 || lens[i]->ndim != 1 || lens[i]->shape[0] != N) {
            PyErr_Format(PyExc_ValueError, "%s: %s must be int64 of shape (%lld,), got %s of shape %s", op, names[i],
                         (long long)N, gm_dtype_name(lens[i]->dtype), gm_shape_str(lens[i]->ndim, lens[i]->shape, b));
            return -1;
        }
    return 0;
}

/* 0 when t has shape (shape[0], ..., shape[ndim - 1]), else -1 with a ValueError naming it. */
static int shape_is(const char *op, const char *name, GMTensor *t, int ndim, const int64_t *shape) {
    if (t->ndim == ndim && !memcmp(t->shape, shape, sizeof(int64_t) * ndim)) return 0;
    char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: %s must have shape %s, got %s", op, name, gm_shape_str(ndim, shape, a),
                 gm_shape_str(t->ndim, t->shape, b));
    return -1;
}

#define I64(t) ((const int64_t *)data(t))

/* ctc_loss(log_probs, targets, input_lengths, target_lengths, blank) -> (nll (N), log_alpha (N, T, 2L + 1)) */
PyObject *gm_py_ctc_loss(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"log_probs", "targets", "input_lengths", "target_lengths", "blank", NULL};
    const char *op = "ctc_loss";
    PyObject *o[4];
    long long blank;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOL:ctc_loss", kwlist, &o[0], &o[1], &o[2], &o[3], &blank))
        return NULL;
    GMTensor *a[4];
    char *names[4] = {"log_probs", "targets", "input_lengths", "target_lengths"};
    for (int i = 0; i < 4; i++)
        if (!(a[i] = gm_tensor_arg(o[i], op, names[i]))) return NULL;
    if (ctc_args(op, a[0], a[1], a[2], a[3]) < 0) return NULL;
    const int64_t T = a[0]->shape[0], N = a[0]->shape[1], C = a[0]->shape[2], L = a[1]->shape[1];
    const int64_t alpha_shape[3] = {N, T, 2 * L + 1};
    GMTensor *lp = contig(a[0]), *tg = contig(a[1]), *nll = NULL, *alpha = NULL;
    PyObject *res = NULL;
    if (!lp || !tg || !(nll = gm_empty(1, &N, lp->dtype, lp->device)) ||
        !(alpha = gm_empty(3, alpha_shape, lp->dtype, lp->device)))
        goto done;
    gm_note_work(T * N * (2 * L + 1));
    if (GM_KERNEL(op, lp->device,
                  ctc_loss_forward(data(nll), data(alpha), data(lp), I64(tg), I64(a[2]), I64(a[3]), T, N, C, L, blank,
                                   lp->dtype, gm_num_threads),
                  cuda_ctc_loss_forward(data(nll), data(alpha), data(lp), I64(tg), I64(a[2]), I64(a[3]), T, N, C, L,
                                        blank, lp->dtype, ctx)) < 0)
        goto done;
    res = Py_BuildValue("(OO)", (PyObject *)nll, (PyObject *)alpha);
done:
    RELEASE(lp, tg, nll, alpha);
    return res;
}

/* ctc_loss_backward(grad (N), log_probs, targets, input_lengths, target_lengths, log_alpha, nll, blank,
 *                   zero_infinity) -> d log_probs (T, N, C) */
PyObject *gm_py_ctc_loss_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad", "log_probs", "targets", "input_lengths", "target_lengths", "log_alpha", "nll",
                             "blank", "zero_infinity", NULL};
    const char *op = "ctc_loss_backward";
    PyObject *o[7];
    long long blank;
    int zero_infinity;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOLp:ctc_loss_backward", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &o[5], &o[6], &blank, &zero_infinity))
        return NULL;
    GMTensor *a[7];
    char *names[7] = {"grad", "log_probs", "targets", "input_lengths", "target_lengths", "log_alpha", "nll"};
    for (int i = 0; i < 7; i++)
        if (!(a[i] = gm_tensor_arg(o[i], op, names[i]))) return NULL;
    if (ctc_args(op, a[1], a[2], a[3], a[4]) < 0) return NULL;
    const int64_t T = a[1]->shape[0], N = a[1]->shape[1], C = a[1]->shape[2], L = a[2]->shape[1];
    const int64_t alpha_shape[3] = {N, T, 2 * L + 1};
    if (check_devices(op, a[1], (GMTensor *[]){a[0], a[5], a[6]}, 3) < 0 || shape_is(op, "grad", a[0], 1, &N) < 0 ||
        shape_is(op, "log_alpha", a[5], 3, alpha_shape) < 0 || shape_is(op, "nll", a[6], 1, &N) < 0 ||
        same_dtype(op, "grad", a[0], "log_probs", a[1]) < 0 ||
        same_dtype(op, "log_alpha", a[5], "log_probs", a[1]) < 0 || same_dtype(op, "nll", a[6], "log_probs", a[1]) < 0)
        return NULL;
    const int64_t scratch_n = N * (2 * (2 * L + 1) + C);
    GMTensor *g = contig(a[0]), *lp = contig(a[1]), *tg = contig(a[2]), *alpha = contig(a[5]), *nll = contig(a[6]);
    GMTensor *grad = NULL, *scratch = NULL;
    PyObject *res = NULL;
    if (!g || !lp || !tg || !alpha || !nll || !(grad = gm_empty(3, lp->shape, lp->dtype, lp->device)) ||
        !(scratch = gm_empty_workspace(1, &scratch_n, GM_F64, lp->device)))
        goto done;
    gm_note_work(T * N * C);
    if (GM_KERNEL(op, lp->device,
                  ctc_loss_backward(data(grad), data(g), data(lp), I64(tg), I64(a[3]), I64(a[4]), data(alpha),
                                    data(nll), T, N, C, L, blank, zero_infinity, (double *)data(scratch), lp->dtype,
                                    gm_num_threads),
                  cuda_ctc_loss_backward(data(grad), data(g), data(lp), I64(tg), I64(a[3]), I64(a[4]), data(alpha),
                                         data(nll), T, N, C, L, blank, zero_infinity, (double *)data(scratch),
                                         lp->dtype, ctx)) < 0)
        goto done;
    res = Py_NewRef((PyObject *)grad);
done:
    RELEASE(g, lp, tg, alpha, nll, grad, scratch);
    return res;
}
