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

/* a[i] = the tensor o[i], argument names[i] (borrowed); -1 with a TypeError naming the first that is none. */
static int tensor_args(const char *op, char **names, PyObject **o, GMTensor **a, int n) {
    for (int i = 0; i < n; i++)
        if (!(a[i] = gm_tensor_arg(o[i], op, names[i]))) return -1;
    return 0;
}

/* outs[i] = a new (N, cols[i]) tensor of the state s's dtype and device; -1 with the ones made left for the caller's
 * release_all (outs starts as NULLs). */
static int empty_rows(GMTensor *s, const int64_t *cols, GMTensor **outs, int n) {
    for (int i = 0; i < n; i++) {
        const int64_t shape[2] = {s->shape[0], cols[i]};
        if (!(outs[i] = gm_empty(2, shape, s->dtype, s->device))) return -1;
    }
    return 0;
}

/* The n outputs as a new tuple (new references). */
static PyObject *tuple_of(GMTensor **ts, int n) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) PyTuple_SET_ITEM(t, i, Py_NewRef((PyObject *)ts[i]));
    return t;
}

/* lstm_cell(gi, gh, c) -> (h, c_new, act) */
PyObject *gm_py_lstm_cell(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"gi", "gh", "c", NULL};
    const char *op = "lstm_cell";
    PyObject *o[3];
    GMTensor *a[3], *k[3], *y[3] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:lstm_cell", kwlist, &o[0], &o[1], &o[2]) ||
        tensor_args(op, kwlist, o, a, 3) < 0 || rnn_cell_args(op, 4, a[0], a[1], a[2], "c") < 0 ||
        contig_all(a, k, 3) < 0)
        return NULL;
    const int64_t N = a[2]->shape[0], H = a[2]->shape[1], cols[3] = {H, H, 4 * H};
    PyObject *res = NULL;
    if (empty_rows(a[2], cols, y, 3) == 0 &&
        GM_KERNEL(op, a[2]->device,
                  lstm_cell_forward(data(y[0]), data(y[1]), data(y[2]), data(k[0]), data(k[1]), data(k[2]), N, H,
                                    a[2]->dtype, gm_num_threads),
                  cuda_lstm_cell_forward(data(y[0]), data(y[1]), data(y[2]), data(k[0]), data(k[1]), data(k[2]), N,
                                         H, a[2]->dtype, ctx)) == 0)
        res = tuple_of(y, 3);
    release_all(y, 3);
    release_all(k, 3);
    return res;
}

/* lstm_cell_backward(dh, dc, act, c, c_new) -> (d_gates, dc_prev) */
PyObject *gm_py_lstm_cell_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"dh", "dc", "act", "c", "c_new", NULL};
    const char *op = "lstm_cell_backward";
    PyObject *o[5];
    GMTensor *a[5], *k[5], *y[2] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO:lstm_cell_backward", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4]) ||
        tensor_args(op, kwlist, o, a, 5) < 0 || rnn_state_arg(op, "c", a[3]) < 0)
        return NULL;
    GMTensor *c = a[3];
    const int64_t N = c->shape[0], H = c->shape[1], cols[2] = {4 * H, H};
    if (rnn_arg(op, "dh", a[0], c, N, H) < 0 || rnn_arg(op, "dc", a[1], c, N, H) < 0 ||
        rnn_arg(op, "act", a[2], c, N, 4 * H) < 0 || rnn_arg(op, "c_new", a[4], c, N, H) < 0 ||
        contig_all(a, k, 5) < 0)
        return NULL;
    PyObject *res = NULL;
    if (empty_rows(c, cols, y, 2) == 0 &&
        GM_KERNEL(op, c->device,
                  lstm_cell_backward(data(y[0]), data(y[1]), data(k[0]), data(k[1]), data(k[2]), data(k[3]),
                                     data(k[4]), N, H, c->dtype, gm_num_threads),
                  cuda_lstm_cell_backward(data(y[0]), data(y[1]), data(k[0]), data(k[1]), data(k[2]), data(k[3]),
                                          data(k[4]), N, H, c->dtype, ctx)) == 0)
        res = tuple_of(y, 2);
    release_all(y, 2);
    release_all(k, 5);
    return res;
}

/* gru_cell(gi, gh, h) -> (h_new, ws) */
PyObject *gm_py_gru_cell(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"gi", "gh", "h", NULL};
    const char *op = "gru_cell";
    PyObject *o[3];
    GMTensor *a[3], *k[3], *y[2] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:gru_cell", kwlist, &o[0], &o[1], &o[2]) ||
        tensor_args(op, kwlist, o, a, 3) < 0 || rnn_cell_args(op, 3, a[0], a[1], a[2], "h") < 0 ||
        contig_all(a, k, 3) < 0)
        return NULL;
    const int64_t N = a[2]->shape[0], H = a[2]->shape[1], cols[2] = {H, 4 * H};
    PyObject *res = NULL;
    if (empty_rows(a[2], cols, y, 2) == 0 &&
        GM_KERNEL(op, a[2]->device,
                  gru_cell_forward(data(y[0]), data(y[1]), data(k[0]), data(k[1]), data(k[2]), N, H, a[2]->dtype,
                                   gm_num_threads),
                  cuda_gru_cell_forward(data(y[0]), data(y[1]), data(k[0]), data(k[1]), data(k[2]), N, H,
                                        a[2]->dtype, ctx)) == 0)
        res = tuple_of(y, 2);
    release_all(y, 2);
    release_all(k, 3);
    return res;
}

/* gru_cell_backward(dh, ws, h) -> (d_gi, d_gh, dh_prev) */
PyObject *gm_py_gru_cell_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"dh", "ws", "h", NULL};
    const char *op = "gru_cell_backward";
    PyObject *o[3];
    GMTensor *a[3], *k[3], *y[3] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:gru_cell_backward", kwlist, &o[0], &o[1], &o[2]) ||
        tensor_args(op, kwlist, o, a, 3) < 0 || rnn_state_arg(op, "h", a[2]) < 0)
        return NULL;
    GMTensor *h = a[2];
    const int64_t N = h->shape[0], H = h->shape[1], cols[3] = {3 * H, 3 * H, H};
    if (rnn_arg(op, "dh", a[0], h, N, H) < 0 || rnn_arg(op, "ws", a[1], h, N, 4 * H) < 0 || contig_all(a, k, 3) < 0)
        return NULL;
    PyObject *res = NULL;
    if (empty_rows(h, cols, y, 3) == 0 &&
        GM_KERNEL(op, h->device,
                  gru_cell_backward(data(y[0]), data(y[1]), data(y[2]), data(k[0]), data(k[1]), data(k[2]), N, H,
                                    h->dtype, gm_num_threads),
                  cuda_gru_cell_backward(data(y[0]), data(y[1]), data(y[2]), data(k[0]), data(k[1]), data(k[2]), N,
                                         H, h->dtype, ctx)) == 0)
        res = tuple_of(y, 3);
    release_all(y, 3);
    release_all(k, 3);
    return res;
}
