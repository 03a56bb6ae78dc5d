/* csrc/ops_rnn_cell.c — the fused LSTM and GRU cells (kernels/rnn_cell.h), forward and backward: argument checks,
 * outputs, and the kernels of kernels/cpu/rnn_cell.c and kernels/cuda/rnn_cell.cu. Part of the nn op family
 * (ops_nnops.c has its interface and method table; ops_nn_internal.h the helpers it shares). The only caller is
 * python/gpumemnet/nn/_rnn_fused.py. */
#include "ops_nn_internal.h"

#include "cpu/rnn_cell.h"

#ifdef GM_WITH_CUDA
#include "../kernels/cuda/rnn_cell.h"
#endif

/* t must be (rows, cols), of the float dtype and on the device of `like`, the state. */
static int rnn_arg(const char *op, const char *name, GMTensor *t, GMTensor *like, int64_t rows, int64_t cols) {
    if (check_float(op, name, t) < 0 || check_devices(op, like, &t, 1) < 0 ||
        same_dtype(op, name, t, "the state", like) < 0)
        return -1;
    if (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols) return 0;
    char b[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: %s must have shape (%lld, %lld), got %s", op, name, (long long)rows,
                 (long long)cols, gm_shape_str(t->ndim, t->shape, b));
    return -1;
}

/* A state (N, H): 2-D, float. */
static int rnn_state_arg(const char *op, const char *name, GMTensor *s) {
    if (check_float(op, name, s) < 0) return -1;
    if (s->ndim == 2) return 0;
    char b[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: %s must be 2-D (batch, hidden), got shape %s", op, name,
                 gm_shape_str(s->ndim, s->shape, b));
    return -1;
}

/* The state s (N, H) and the projections gi, gh (N, gates * H). */
static int rnn_cell_args(const char *op, int gates, GMTensor *gi, GMTensor *gh, GMTensor *s, const char *sname) {
    if (rnn_state_arg(op, sname, s) < 0) return -1;
    const int64_t N = s->shape[0], G = gates * s->shape[1];
    return rnn_arg(op, "gi", gi, s, N, G) < 0 || rnn_arg(op, "gh", gh, s, N, G) < 0 ? -1 : 0;
}

/* New references to contiguous copies (or the tensors themselves) of n arguments; -1 with none held. */
static int contig_all(GMTensor **in, GMTensor **out, int n) {
    for (int i = 0; i < n; i++)
        if (!(out[i] = contig(in[i]))) {
            while (i--) Py_DECREF(out[i]);
            return -1;
        }
    return 0;
}

static void release_all(GMTensor **ts, int n) {
    for (int i = 0; i < n; i++) Py_XDECREF(ts[i]);
}

static GMTensor *empty_like_rows(GMTensor *s, int64_t cols) {
    const int64_t shape[2] = {s->shape[0], cols};
    return gm_empty(2, shape, s->dtype, s->device);
}

/* lstm_cell(gi, gh, c) -> (h, c_new, act) */
PyObject *gm_py_lstm_cell(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"gi", "gh", "c", NULL};
    const char *op = "lstm_cell";
    PyObject *o[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:lstm_cell", kwlist, &o[0], &o[1], &o[2])) return NULL;
    GMTensor *a[3], *k[3], *h = NULL, *c_new = NULL, *act = NULL;
    for (int i = 0; i < 3; i++)
        if (!(a[i] = gm_tensor_arg(o[i], op, kwlist[i]))) return NULL;
    if (rnn_cell_args(op, 4, a[0], a[1], a[2], "c") < 0 || contig_all(a, k, 3) < 0) return NULL;
    const int64_t N = a[2]->shape[0], H = a[2]->shape[1];
    PyObject *res = NULL;
    if ((h = empty_like_rows(a[2], H)) && (c_new = empty_like_rows(a[2], H)) && (act = empty_like_rows(a[2], 4 * H)) &&
        GM_KERNEL(op, a[2]->device,
                  lstm_cell_forward(data(h), data(c_new), data(act), data(k[0]), data(k[1]), data(k[2]), N, H,
                                    a[2]->dtype, gm_num_threads),
                  cuda_lstm_cell_forward(data(h), data(c_new), data(act), data(k[0]), data(k[1]), data(k[2]), N, H,
                                         a[2]->dtype, ctx)) == 0)
        res = Py_BuildValue("(OOO)", h, c_new, act);
    Py_XDECREF(h);
    Py_XDECREF(c_new);
    Py_XDECREF(act);
    release_all(k, 3);
    return res;
}

/* lstm_cell_backward(dh, dc, act, c, c_new) -> (d_gates, dc_prev) */
PyObject *gm_py_lstm_cell_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"dh", "dc", "act", "c", "c_new", NULL};
    const char *op = "lstm_cell_backward";
    PyObject *o[5];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO:lstm_cell_backward", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4]))
        return NULL;
    GMTensor *a[5], *k[5], *d_gates = NULL, *dc_prev = NULL;
    for (int i = 0; i < 5; i++)
        if (!(a[i] = gm_tensor_arg(o[i], op, kwlist[i]))) return NULL;
    GMTensor *c = a[3];
    if (rnn_state_arg(op, "c", c) < 0) return NULL;
    const int64_t N = c->shape[0], H = c->shape[1];
    if (rnn_arg(op, "dh", a[0], c, N, H) < 0 || rnn_arg(op, "dc", a[1], c, N, H) < 0 ||
        rnn_arg(op, "act", a[2], c, N, 4 * H) < 0 || rnn_arg(op, "c_new", a[4], c, N, H) < 0 ||
        contig_all(a, k, 5) < 0)
        return NULL;
    PyObject *res = NULL;
    if ((d_gates = empty_like_rows(c, 4 * H)) && (dc_prev = empty_like_rows(c, H)) &&
        GM_KERNEL(op, c->device,
                  lstm_cell_backward(data(d_gates), data(dc_prev), data(k[0]), data(k[1]), data(k[2]), data(k[3]),
                                     data(k[4]), N, H, c->dtype, gm_num_threads),
                  cuda_lstm_cell_backward(data(d_gates), data(dc_prev), data(k[0]), data(k[1]), data(k[2]),
                                          data(k[3]), data(k[4]), N, H, c->dtype, ctx)) == 0)
        res = Py_BuildValue("(OO)", d_gates, dc_prev);
    Py_XDECREF(d_gates);
    Py_XDECREF(dc_prev);
    release_all(k, 5);
    return res;
}

/* gru_cell(gi, gh, h) -> (h_new, ws) */
PyObject *gm_py_gru_cell(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"gi", "gh", "h", NULL};
    const char *op = "gru_cell";
    PyObject *o[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:gru_cell", kwlist, &o[0], &o[1], &o[2])) return NULL;
    GMTensor *a[3], *k[3], *h_new = NULL, *ws = NULL;
    for (int i = 0; i < 3; i++)
        if (!(a[i] = gm_tensor_arg(o[i], op, kwlist[i]))) return NULL;
    if (rnn_cell_args(op, 3, a[0], a[1], a[2], "h") < 0 || contig_all(a, k, 3) < 0) return NULL;
    const int64_t N = a[2]->shape[0], H = a[2]->shape[1];
    PyObject *res = NULL;
    if ((h_new = empty_like_rows(a[2], H)) && (ws = empty_like_rows(a[2], 4 * H)) &&
        GM_KERNEL(op, a[2]->device,
                  gru_cell_forward(data(h_new), data(ws), data(k[0]), data(k[1]), data(k[2]), N, H, a[2]->dtype,
                                   gm_num_threads),
                  cuda_gru_cell_forward(data(h_new), data(ws), data(k[0]), data(k[1]), data(k[2]), N, H, a[2]->dtype,
                                        ctx)) == 0)
        res = Py_BuildValue("(OO)", h_new, ws);
    Py_XDECREF(h_new);
    Py_XDECREF(ws);
    release_all(k, 3);
    return res;
}

/* gru_cell_backward(dh, ws, h) -> (d_gi, d_gh, dh_prev) */
PyObject *gm_py_gru_cell_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"dh", "ws", "h", NULL};
    const char *op = "gru_cell_backward";
    PyObject *o[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:gru_cell_backward", kwlist, &o[0], &o[1], &o[2]))
        return NULL;
    GMTensor *a[3], *k[3], *d_gi = NULL, *d_gh = NULL, *dh_prev = NULL;
    for (int i = 0; i < 3; i++)
        if (!(a[i] = gm_tensor_arg(o[i], op, kwlist[i]))) return NULL;
    GMTensor *h = a[2];
    if (rnn_state_arg(op, "h", h) < 0) return NULL;
    const int64_t N = h->shape[0], H = h->shape[1];
    if (rnn_arg(op, "dh", a[0], h, N, H) < 0 || rnn_arg(op, "ws", a[1], h, N, 4 * H) < 0 || contig_all(a, k, 3) < 0)
        return NULL;
    PyObject *res = NULL;
    if ((d_gi = empty_like_rows(h, 3 * H)) && (d_gh = empty_like_rows(h, 3 * H)) && (dh_prev = empty_like_rows(h, H)) &&
        GM_KERNEL(op, h->device,
                  gru_cell_backward(data(d_gi), data(d_gh), data(dh_prev), data(k[0]), data(k[1]), data(k[2]), N, H,
                                    h->dtype, gm_num_threads),
                  cuda_gru_cell_backward(data(d_gi), data(d_gh), data(dh_prev), data(k[0]), data(k[1]), data(k[2]), N,
                                         H, h->dtype, ctx)) == 0)
        res = Py_BuildValue("(OOO)", d_gi, d_gh, dh_prev);
    Py_XDECREF(d_gi);
    Py_XDECREF(d_gh);
    Py_XDECREF(dh_prev);
    release_all(k, 3);
    return res;
}
