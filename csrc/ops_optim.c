/* csrc/ops_optim.c — fused optimizer steps: _C.sgd_step_, _C.adam_step_ (Adam and AdamW), _C.rmsprop_step_,
 * _C.adagrad_step_ and _C.adadelta_step_. One call updates a whole parameter group in place: parameters and
 * state tensors are written, gradients read, and nothing is allocated when every tensor is contiguous (always the
 * case for parameters, autograd's gradients and the state python/gpumemnet/optim creates). A non-contiguous
 * tensor goes through a workspace copy, written back after the kernel. On meta everything but the kernel runs.
 * The state tensors are created by Python (lazily, tagged "optimizer"); this file never allocates them. Kernels:
 * kernels/cpu/optim.c, kernels/cuda/optim.cu (which passes its pointer tables in the launch parameters, so a CUDA
 * step allocates nothing either). */
#include "gm.h"
#include "cpu/optim.h"
#ifdef GM_WITH_CUDA
#include "../kernels/cuda/optim.h"
#endif

#include <math.h>
#include <string.h>

#define MAX_ROLES 5

/* A group's tensors by role (params, grads, then state lists), validated against the parameters. */
typedef struct {
    const char *op;
    Py_ssize_t n;
    int nroles;
    const char *names[MAX_ROLES]; /* "params", "grads", "exp_avgs", ... for messages */
    int writes[MAX_ROLES];        /* the kernel writes this role (its version is bumped) */
    PyObject *seqs[MAX_ROLES];    /* owned PySequence_Fast results (NULL: role absent) */
    GMTensor **tmp[MAX_ROLES];    /* owned workspace contiguous copies, NULL where the tensor is contiguous */
    void **ptr[MAX_ROLES];
    int64_t *numel;
    gm_dtype *dt;
} group;

static GMTensor *item(const group *g, int r, Py_ssize_t i) {
    return (GMTensor *)PySequence_Fast_GET_ITEM(g->seqs[r], i);
}

static void group_free(group *g) {
    for (int r = 0; r < g->nroles; r++) {
        if (g->tmp[r])
            for (Py_ssize_t i = 0; i < g->n; i++) Py_XDECREF(g->tmp[r][i]);
        PyMem_Free(g->tmp[r]);
        PyMem_Free(g->ptr[r]);
        Py_XDECREF(g->seqs[r]);
    }
    PyMem_Free(g->numel);
    PyMem_Free(g->dt);
}

/* Add role r from obj (a sequence of tensors, or None when `optional`). */
static int add_role(group *g, int r, const char *name, PyObject *obj, int writes, int optional) {
    g->names[r] = name;
    g->writes[r] = writes;
    if (r >= g->nroles) g->nroles = r + 1;
    if (obj == Py_None) {
        if (optional) return 0;
        PyErr_Format(PyExc_TypeError, "%s: %s must be a sequence of Tensors, got None", g->op, name);
        return -1;
    }
    if (gm_is_tensor(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a sequence of Tensors, got a single Tensor", g->op, name);
        return -1;
    }
    g->seqs[r] = PySequence_Fast(obj, "");
    if (!g->seqs[r]) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a sequence of Tensors, got %.100s", g->op, name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(g->seqs[r]);
    if (r == 0) {
        if (len > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "%s: too many tensors in one group (%zd)", g->op, len);
            return -1;
        }
        g->n = len;
    } else if (len != g->n) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %zd entries but params has %zd; expected one per parameter",
                     g->op, name, len, g->n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(g->seqs[r], i);
        if (!gm_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "%s: %s[%zd] must be a Tensor, got %.100s", g->op, name, i,
                         Py_TYPE(o)->tp_name);
            return -1;
        }
    }
    return 0;
}

static int shares_storage(const GMTensor *a, const GMTensor *b) { return a->storage == b->storage; }

/* Every tensor must match its parameter (shape, dtype, device); written tensors must not share memory. The
 * parameters of one call share a device: one kernel call updates them all. */
static int validate(group *g) {
    char b1[GM_SHAPE_BUF], b2[GM_SHAPE_BUF], d1[16], d2[16];
    for (Py_ssize_t i = 0; i < g->n; i++) {
        GMTensor *p = item(g, 0, i);
        if (!gm_dtype_is_float(p->dtype)) {
            PyErr_Format(PyExc_TypeError, "%s: params[%zd] has dtype %s; only floating point parameters (float32, "
                         "float64, float16, bfloat16) can be optimized", g->op, i, gm_dtype_name(p->dtype));
            return -1;
        }
        GMTensor *p0 = item(g, 0, 0);
        if (!gm_device_eq(p->device, p0->device)) {
            PyErr_Format(PyExc_RuntimeError, "%s: params[%zd] is on %s but params[0] is on %s; one step updates the "
                         "parameters of one device (put them in separate parameter groups)", g->op, i,
                         gm_device_str(p->device, d1), gm_device_str(p0->device, d2));
            return -1;
        }
        for (int r = 1; r < g->nroles; r++) {
            if (!g->seqs[r]) continue;
            GMTensor *t = item(g, r, i);
            int same = t->ndim == p->ndim;
            for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
            if (!same) {
                PyErr_Format(PyExc_ValueError, "%s: %s[%zd] has shape %s but params[%zd] has shape %s; expected "
                             "the same shape", g->op, g->names[r], i, gm_shape_str(t->ndim, t->shape, b1), i,
                             gm_shape_str(p->ndim, p->shape, b2));
                return -1;
            }
            if (t->dtype != p->dtype) {
                PyErr_Format(PyExc_TypeError, "%s: %s[%zd] has dtype %s but params[%zd] has dtype %s; expected the "
                             "parameter's dtype", g->op, g->names[r], i, gm_dtype_name(t->dtype), i,
                             gm_dtype_name(p->dtype));
                return -1;
            }
            if (!gm_device_eq(t->device, p->device)) {
                PyErr_Format(PyExc_RuntimeError, "%s: %s[%zd] is on %s but params[%zd] is on %s; expected the "
                             "parameter's device", g->op, g->names[r], i, gm_device_str(t->device, d1), i,
                             gm_device_str(p->device, d2));
                return -1;
            }
        }
        for (int r = 0; r < g->nroles; r++) {
            if (!g->seqs[r]) continue;
            for (int q = r + 1; q < g->nroles; q++) {
                if (!g->seqs[q] || !(g->writes[r] || g->writes[q])) continue;
                if (shares_storage(item(g, r, i), item(g, q, i))) {
                    PyErr_Format(PyExc_ValueError, "%s: %s[%zd] and %s[%zd] share memory; the step writes one of "
                                 "them while reading the other (give each its own tensor)", g->op, g->names[r], i,
                                 g->names[q], i);
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* Fill pointer arrays; non-contiguous tensors get a contiguous workspace copy (allocated on meta too, so that
 * estimates see it). Notes the group's size for GM_KERNEL's GIL policy: the kernel walks every parameter. */
static int prepare(group *g) {
    size_t n = (size_t)(g->n > 0 ? g->n : 1);
    g->numel = PyMem_Calloc(n, sizeof(int64_t));
    g->dt = PyMem_Calloc(n, sizeof(gm_dtype));
    if (!g->numel || !g->dt) goto nomem;
    for (int r = 0; r < g->nroles; r++) {
        if (!g->seqs[r]) continue;
        g->ptr[r] = PyMem_Calloc(n, sizeof(void *));
        g->tmp[r] = PyMem_Calloc(n, sizeof(GMTensor *));
        if (!g->ptr[r] || !g->tmp[r]) goto nomem;
    }
    for (Py_ssize_t i = 0; i < g->n; i++) {
        GMTensor *p = item(g, 0, i);
        g->numel[i] = gm_numel(p);
        g->dt[i] = p->dtype;
        for (int r = 0; r < g->nroles; r++) {
            if (!g->seqs[r]) continue;
            GMTensor *t = item(g, r, i);
            if (!gm_is_contiguous(t)) {
                GMTensor *c = gm_empty_workspace(t->ndim, t->shape, t->dtype, t->device);
                if (!c) return -1;
                g->tmp[r][i] = c;
                if (t->device.type != GM_DEV_META && gm_copy_into(c, t) < 0) return -1;
                t = c;
            }
            g->ptr[r][i] = gm_tensor_data(t);
        }
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < g->n; i++) total += g->numel[i];
    gm_note_work(total);
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

/* After the kernel: write the copies back, free them right away, and bump the version of every written tensor
 * (autograd refuses a backward through a parameter that a step changed after it was saved). */
static int finish(group *g) {
    for (int r = 0; r < g->nroles; r++) {
        if (!g->seqs[r]) continue;
        for (Py_ssize_t i = 0; i < g->n; i++) {
            GMTensor *t = item(g, r, i), *c = g->tmp[r][i];
            if (c) {
                if (g->writes[r] && t->device.type != GM_DEV_META && gm_copy_into(t, c) < 0) return -1;
                g->tmp[r][i] = NULL;
                Py_DECREF(c);
            }
            if (g->writes[r]) gm_bump_version(t);
        }
    }
    return 0;
}


/* PyErr_Format has no %g: numbers in messages go through this (repr's shortest round-trip form). */
static const char *fmt_double(double v, char *buf) {
    char *s = PyOS_double_to_string(v, 'r', 0, 0, NULL);
    PyOS_snprintf(buf, 32, "%s", s ? s : "?");
    PyMem_Free(s);
    return buf;
}

/* The hyperparameters' ranges at step time. Not lr: PyTorch checks it where the optimizer is made, and steps with
 * whatever a schedule sets later (a warmup / decay that overshoots its end goes negative). */
static int check_range(const char *op, const char *name, double v, double lo, double hi, int hi_open) {
    if (v >= lo && (hi_open ? v < hi : v <= hi)) return 0;
    char a[32], b[32], c[32];
    if (isinf(hi))
        PyErr_Format(PyExc_ValueError, "%s: %s must be >= %s, got %s", op, name, fmt_double(lo, a),
                     fmt_double(v, c));
    else
        PyErr_Format(PyExc_ValueError, "%s: %s must be in [%s, %s%s, got %s", op, name, fmt_double(lo, a),
                     fmt_double(hi, b), hi_open ? ")" : "]", fmt_double(v, c));
    return -1;
}

/* A per-parameter sequence of Python ints (steps) or bools (fresh flags), into out[n]. */
static int parse_int_list(const group *g, PyObject *obj, const char *name, int64_t *out, int64_t min) {
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a sequence of ints, got %.100s", g->op, name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != g->n) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %zd entries but params has %zd; expected one per parameter",
                     g->op, name, PySequence_Fast_GET_SIZE(seq), g->n);
        goto done;
    }
    for (Py_ssize_t i = 0; i < g->n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(o)) {
            PyErr_Format(PyExc_TypeError, "%s: %s[%zd] must be an int, got %.100s", g->op, name, i,
                         Py_TYPE(o)->tp_name);
            goto done;
        }
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) goto done;
        if (v < min) {
            PyErr_Format(PyExc_ValueError, "%s: %s[%zd] must be >= %lld, got %lld", g->op, name, i,
                         (long long)min, v);
            goto done;
        }
        out[i] = v;
    }
    rc = 0;
done:
    Py_DECREF(seq);
    return rc;
}

static PyObject *py_sgd_step(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"params", "grads", "momentum_buffers", "fresh", "lr", "momentum", "dampening",
                             "weight_decay", "nesterov", "maximize", NULL};
    PyObject *po, *go, *bo = Py_None, *fo = Py_None;
    sgd_hparams h = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOd|dddpp:sgd_step_", kwlist, &po, &go, &bo, &fo, &h.lr,
                                     &h.momentum, &h.dampening, &h.weight_decay, &h.nesterov, &h.maximize))
        return NULL;
    const char *op = "sgd_step_";
    if (check_range(op, "momentum", h.momentum, 0.0,
        INFINITY, 0) < 0 || check_range(op, "weight_decay", h.weight_decay, 0.0, INFINITY, 0) < 0)
        return NULL;
    if (h.nesterov && (h.momentum <= 0.0 || h.dampening != 0.0)) {
        char a[32], b[32];
        PyErr_Format(PyExc_ValueError, "%s: nesterov needs momentum > 0 and dampening == 0, got momentum=%s, "
                     "dampening=%s", op, fmt_double(h.momentum, a), fmt_double(h.dampening, b));
        return NULL;
    }
    group g = {.op = op};
    uint8_t *fresh = NULL;
    int64_t *tmp = NULL;
    PyObject *res = NULL;
    int use_buf = h.momentum != 0.0;
    if (add_role(&g, 0, "params", po, 1, 0) < 0 || add_role(&g, 1, "grads", go, 0, 0) < 0) goto done;
    if (use_buf && bo == Py_None) {
        char a[32];
        PyErr_Format(PyExc_ValueError, "%s: momentum=%s needs momentum_buffers (one per parameter)", op,
                     fmt_double(h.momentum, a));
        goto done;
    }
    if (add_role(&g, 2, "momentum_buffers", use_buf ? bo : Py_None, 1, 1) < 0) goto done;
    if (validate(&g) < 0) goto done;
    if (fo != Py_None) {
        size_t n = (size_t)(g.n > 0 ? g.n : 1);
        fresh = PyMem_Calloc(n, 1);
        tmp = PyMem_Calloc(n, sizeof(int64_t));
        if (!fresh || !tmp) { PyErr_NoMemory(); goto done; }
        if (parse_int_list(&g, fo, "fresh", tmp, 0) < 0) goto done;
        for (Py_ssize_t i = 0; i < g.n; i++) fresh[i] = tmp[i] != 0;
    }
    if (prepare(&g) < 0) goto done;
    gm_device dev = g.n > 0 ? item(&g, 0, 0)->device : (gm_device){GM_DEV_META, 0};
    if (GM_KERNEL(op, dev,
                  sgd_step(g.ptr[0], (const void *const *)g.ptr[1], use_buf ? g.ptr[2] : NULL, fresh, g.numel, g.dt,
                           (int)g.n, &h, gm_num_threads),
                  cuda_sgd_step(g.ptr[0], (const void *const *)g.ptr[1], use_buf ? g.ptr[2] : NULL, fresh, g.numel,
                                g.dt, (int)g.n, &h, ctx)) < 0)
        goto done;
    if (finish(&g) < 0) goto done;
    res = Py_NewRef(Py_None);
done:
    PyMem_Free(fresh);
    PyMem_Free(tmp);
    group_free(&g);
    return res;
}

static PyObject *py_adam_step(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "steps", "lr",
                             "beta1", "beta2", "eps", "weight_decay", "decoupled", "amsgrad", "maximize", NULL};
    PyObject *po, *go, *mo, *vo, *xo, *so;
    adam_hparams h = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOddd|ddppp:adam_step_", kwlist, &po, &go, &mo, &vo, &xo,
                                     &so, &h.lr, &h.beta1, &h.beta2, &h.eps, &h.weight_decay, &h.decoupled,
                                     &h.amsgrad, &h.maximize))
        return NULL;
    const char *op = "adam_step_";
    if (check_range(op, "beta1", h.beta1, 0.0, 1.0, 1) < 0 ||
        check_range(op, "beta2", h.beta2, 0.0, 1.0, 1) < 0 || check_range(op, "eps", h.eps, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "weight_decay", h.weight_decay, 0.0, INFINITY, 0) < 0)
        return NULL;
    group g = {.op = op};
    int64_t *steps = NULL;
    PyObject *res = NULL;
    if (add_role(&g, 0, "params", po, 1, 0) < 0 || add_role(&g, 1, "grads", go, 0, 0) < 0 ||
        add_role(&g, 2, "exp_avgs", mo, 1, 0) < 0 || add_role(&g, 3, "exp_avg_sqs", vo, 1, 0) < 0)
        goto done;
    if (h.amsgrad && xo == Py_None) {
        PyErr_Format(PyExc_ValueError, "%s: amsgrad needs max_exp_avg_sqs (one per parameter)", op);
        goto done;
    }
    if (add_role(&g, 4, "max_exp_avg_sqs", h.amsgrad ? xo : Py_None, 1, 1) < 0) goto done;
    if (validate(&g) < 0) goto done;
    steps = PyMem_Calloc((size_t)(g.n > 0 ? g.n : 1), sizeof(int64_t));
    if (!steps) { PyErr_NoMemory(); goto done; }
    if (parse_int_list(&g, so, "steps", steps, 1) < 0) goto done;
    if (prepare(&g) < 0) goto done;
    gm_device dev = g.n > 0 ? item(&g, 0, 0)->device : (gm_device){GM_DEV_META, 0};
    if (GM_KERNEL(op, dev,
                  adam_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], g.ptr[3], h.amsgrad ? g.ptr[4] : NULL,
                            steps, g.numel, g.dt, (int)g.n, &h, gm_num_threads),
                  cuda_adam_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], g.ptr[3],
                                 h.amsgrad ? g.ptr[4] : NULL, steps, g.numel, g.dt, (int)g.n, &h, ctx)) < 0)
        goto done;
    if (finish(&g) < 0) goto done;
    res = Py_NewRef(Py_None);
done:
    PyMem_Free(steps);
    group_free(&g);
    return res;
}

/* adam_step_mixed_(grad_param, master, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, ...): one Adam step of an
 * fp32 master on the host (optimizer offload) whose model copy is float16/bfloat16/float32: grad_param holds the
 * gradient in the model's dtype and receives the updated parameter in it (kernels/cpu/optim.c adam_step_mixed).
 * Host tensors (cpu, pinned or not) or meta (an estimate: nothing runs); all contiguous, of one shape. */
static PyObject *py_adam_step_mixed(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"grad_param", "master", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step", "lr",
                             "beta1", "beta2", "eps", "weight_decay", "decoupled", "amsgrad", "maximize", NULL};
    PyObject *obj[5];
    long long step;
    adam_hparams h = {0};
    h.eps = 1e-8; /* the documented default (left 0, a zero gradient's update was 0/0) */
    const char *op = "adam_step_mixed_";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOLddd|ddppp:adam_step_mixed_", kwlist, &obj[0], &obj[1],
                                     &obj[2], &obj[3], &obj[4], &step, &h.lr, &h.beta1, &h.beta2, &h.eps,
                                     &h.weight_decay, &h.decoupled, &h.amsgrad, &h.maximize))
        return NULL;
    if (check_range(op, "beta1", h.beta1, 0.0, 1.0, 1) < 0 ||
        check_range(op, "beta2", h.beta2, 0.0, 1.0, 1) < 0 || check_range(op, "eps", h.eps, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "weight_decay", h.weight_decay, 0.0, INFINITY, 0) < 0)
        return NULL;
    if (step < 1) {
        PyErr_Format(PyExc_ValueError, "%s: step must be >= 1 (the count after this update), got %lld", op, step);
        return NULL;
    }
    static const char *names[5] = {"grad_param", "master", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    GMTensor *t[5] = {NULL};
    char b1[GM_SHAPE_BUF], b2[GM_SHAPE_BUF], d1[16];
    for (int r = 0; r < 5; r++) {
        if (r == 4 && !h.amsgrad) break;
        if (r == 4 && obj[4] == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: amsgrad needs max_exp_avg_sq", op);
            return NULL;
        }
        if (!(t[r] = gm_tensor_arg(obj[r], op, names[r]))) return NULL;
        if (t[r]->device.type == GM_DEV_CUDA) {
            PyErr_Format(PyExc_RuntimeError, "%s: %s is on %s; this step runs on the host (cpu or meta tensors)", op,
                         names[r], gm_device_str(t[r]->device, d1));
            return NULL;
        }
        if (!gm_is_contiguous(t[r])) {
            PyErr_Format(PyExc_ValueError, "%s: %s is not contiguous; expected a contiguous tensor", op, names[r]);
            return NULL;
        }
        if (r > 0 && t[r]->dtype != GM_F32) {
            PyErr_Format(PyExc_TypeError, "%s: %s has dtype %s; expected float32 (the master and its state)", op,
                         names[r], gm_dtype_name(t[r]->dtype));
            return NULL;
        }
        if (r > 0 && (t[r]->device.type != t[0]->device.type || gm_numel(t[r]) != gm_numel(t[0]) ||
                      t[r]->ndim != t[0]->ndim || memcmp(t[r]->shape, t[0]->shape, sizeof(int64_t) *
                                                                                     (size_t)t[0]->ndim))) {
            PyErr_Format(PyExc_ValueError, "%s: %s has shape %s on %s but grad_param has shape %s; expected the same "
                         "shape on the same device", op, names[r], gm_shape_str(t[r]->ndim, t[r]->shape, b1),
                         gm_device_str(t[r]->device, d1), gm_shape_str(t[0]->ndim, t[0]->shape, b2));
            return NULL;
        }
        for (int q = 0; q < r; q++)
            if (shares_storage(t[q], t[r])) {
                PyErr_Format(PyExc_ValueError, "%s: %s and %s share memory; expected separate tensors", op, names[q],
                             names[r]);
                return NULL;
            }
    }
    gm_dtype dt = t[0]->dtype;
    if (dt != GM_F16 && dt != GM_BF16 && dt != GM_F32) {
        PyErr_Format(PyExc_TypeError, "%s: grad_param has dtype %s; expected float16, bfloat16 or float32", op,
                     gm_dtype_name(dt));
        return NULL;
    }
    int64_t n = gm_numel(t[0]);
    gm_note_work(n);
    if (GM_KERNEL(op, t[0]->device,
                  adam_step_mixed(gm_tensor_data(t[0]), (float *)gm_tensor_data(t[1]), (float *)gm_tensor_data(t[2]),
                                  (float *)gm_tensor_data(t[3]), h.amsgrad ? (float *)gm_tensor_data(t[4]) : NULL,
                                  (int64_t)step, n, dt, &h, gm_num_threads),
                  GM_ERR_UNSUPPORTED) < 0)
        return NULL;
    for (int r = 0; r < 5; r++) /* every one is written */
        if (t[r]) gm_bump_version(t[r]);
    Py_RETURN_NONE;
}

static PyObject *py_rmsprop_step(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"params", "grads", "square_avgs", "momentum_buffers", "grad_avgs", "lr", "alpha", "eps",
                             "weight_decay", "momentum", "centered", "maximize", NULL};
    PyObject *po, *go, *so, *bo, *ao;
    rmsprop_hparams h = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOddd|ddpp:rmsprop_step_", kwlist, &po, &go, &so, &bo, &ao,
                                     &h.lr, &h.alpha, &h.eps, &h.weight_decay, &h.momentum, &h.centered,
                                     &h.maximize))
        return NULL;
    const char *op = "rmsprop_step_";
    if (check_range(op, "alpha", h.alpha, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "eps", h.eps, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "weight_decay", h.weight_decay, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "momentum", h.momentum, 0.0, INFINITY, 0) < 0)
        return NULL;
    group g = {.op = op};
    PyObject *res = NULL;
    const int has_buf = h.momentum > 0.0;
    if (add_role(&g, 0, "params", po, 1, 0) < 0 || add_role(&g, 1, "grads", go, 0, 0) < 0 ||
        add_role(&g, 2, "square_avgs", so, 1, 0) < 0 ||
        add_role(&g, 3, "momentum_buffers", has_buf ? bo : Py_None, 1, !has_buf) < 0 ||
        add_role(&g, 4, "grad_avgs", h.centered ? ao : Py_None, 1, !h.centered) < 0 || validate(&g) < 0 ||
        prepare(&g) < 0)
        goto done;
    gm_device dev = g.n > 0 ? item(&g, 0, 0)->device : (gm_device){GM_DEV_META, 0};
    if (GM_KERNEL(op, dev,
                  rmsprop_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], has_buf ? g.ptr[3] : NULL,
                               h.centered ? g.ptr[4] : NULL, g.numel, g.dt, (int)g.n, &h, gm_num_threads),
                  cuda_rmsprop_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], has_buf ? g.ptr[3] : NULL,
                                    h.centered ? g.ptr[4] : NULL, g.numel, g.dt, (int)g.n, &h, ctx)) < 0)
        goto done;
    if (finish(&g) < 0) goto done;
    res = Py_NewRef(Py_None);
done:
    group_free(&g);
    return res;
}

static PyObject *py_adagrad_step(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"params", "grads", "state_sums", "steps", "lr", "lr_decay", "weight_decay", "eps",
                             "maximize", NULL};
    PyObject *po, *go, *so, *to;
    adagrad_hparams h = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOdddd|p:adagrad_step_", kwlist, &po, &go, &so, &to, &h.lr,
                                     &h.lr_decay, &h.weight_decay, &h.eps, &h.maximize))
        return NULL;
    const char *op = "adagrad_step_";
    if (check_range(op, "lr_decay", h.lr_decay, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "weight_decay", h.weight_decay, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "eps", h.eps, 0.0, INFINITY, 0) < 0)
        return NULL;
    group g = {.op = op};
    int64_t *steps = NULL;
    PyObject *res = NULL;
    if (add_role(&g, 0, "params", po, 1, 0) < 0 || add_role(&g, 1, "grads", go, 0, 0) < 0 ||
        add_role(&g, 2, "state_sums", so, 1, 0) < 0 || validate(&g) < 0)
        goto done;
    steps = PyMem_Calloc((size_t)(g.n > 0 ? g.n : 1), sizeof(int64_t));
    if (!steps) { PyErr_NoMemory(); goto done; }
    if (parse_int_list(&g, to, "steps", steps, 1) < 0 || prepare(&g) < 0) goto done;
    gm_device dev = g.n > 0 ? item(&g, 0, 0)->device : (gm_device){GM_DEV_META, 0};
    if (GM_KERNEL(op, dev,
                  adagrad_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], steps, g.numel, g.dt, (int)g.n, &h,
                               gm_num_threads),
                  cuda_adagrad_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], steps, g.numel, g.dt,
                                    (int)g.n, &h, ctx)) < 0)
        goto done;
    if (finish(&g) < 0) goto done;
    res = Py_NewRef(Py_None);
done:
    PyMem_Free(steps);
    group_free(&g);
    return res;
}

static PyObject *py_adadelta_step(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"params", "grads", "square_avgs", "acc_deltas", "lr", "rho", "eps", "weight_decay",
                             "maximize", NULL};
    PyObject *po, *go, *so, *ao;
    adadelta_hparams h = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOdddd|p:adadelta_step_", kwlist, &po, &go, &so, &ao, &h.lr,
                                     &h.rho, &h.eps, &h.weight_decay, &h.maximize))
        return NULL;
    const char *op = "adadelta_step_";
    if (check_range(op, "rho", h.rho, 0.0, 1.0, 0) < 0 ||
        check_range(op, "eps", h.eps, 0.0, INFINITY, 0) < 0 ||
        check_range(op, "weight_decay", h.weight_decay, 0.0, INFINITY, 0) < 0)
        return NULL;
    group g = {.op = op};
    PyObject *res = NULL;
    if (add_role(&g, 0, "params", po, 1, 0) < 0 || add_role(&g, 1, "grads", go, 0, 0) < 0 ||
        add_role(&g, 2, "square_avgs", so, 1, 0) < 0 || add_role(&g, 3, "acc_deltas", ao, 1, 0) < 0 ||
        validate(&g) < 0 || prepare(&g) < 0)
        goto done;
    gm_device dev = g.n > 0 ? item(&g, 0, 0)->device : (gm_device){GM_DEV_META, 0};
    if (GM_KERNEL(op, dev,
                  adadelta_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], g.ptr[3], g.numel, g.dt, (int)g.n,
                                &h, gm_num_threads),
                  cuda_adadelta_step(g.ptr[0], (const void *const *)g.ptr[1], g.ptr[2], g.ptr[3], g.numel, g.dt,
                                     (int)g.n, &h, ctx)) < 0)
        goto done;
    if (finish(&g) < 0) goto done;
    res = Py_NewRef(Py_None);
done:
    group_free(&g);
    return res;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
PyMethodDef gm_optim_methods[] = {
    {"sgd_step_", KW(py_sgd_step),
     "sgd_step_(params, grads, momentum_buffers, fresh, lr, momentum=0, dampening=0, weight_decay=0, "
     "nesterov=False, maximize=False): one fused in-place SGD step over a group. momentum_buffers: None or one "
     "tensor per param (needed when momentum != 0); fresh: None or one bool per param (True: the buffer starts as "
     "the gradient, PyTorch's first step)."},
    {"adam_step_", KW(py_adam_step),
     "adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, eps=1e-8, "
     "weight_decay=0, decoupled=False, amsgrad=False, maximize=False): one fused in-place Adam (decoupled=True: "
     "AdamW) step over a group; steps[i] >= 1 is param i's step count after this update."},
    {"adam_step_mixed_", KW(py_adam_step_mixed),
     "adam_step_mixed_(grad_param, master, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps=1e-8, "
     "weight_decay=0, decoupled=False, amsgrad=False, maximize=False): one Adam step of a float32 master on the "
     "host; grad_param (float16, bfloat16 or float32) holds the gradient and receives the updated parameter."},
    {"rmsprop_step_", KW(py_rmsprop_step),
     "rmsprop_step_(params, grads, square_avgs, momentum_buffers, grad_avgs, lr, alpha, eps, weight_decay=0, "
     "momentum=0, centered=False, maximize=False): one fused in-place RMSprop step over a group. momentum_buffers: "
     "one zero-initialised tensor per param when momentum > 0 (else None); grad_avgs likewise when centered."},
    {"adagrad_step_", KW(py_adagrad_step),
     "adagrad_step_(params, grads, state_sums, steps, lr, lr_decay, weight_decay, eps, maximize=False): one fused "
     "in-place Adagrad step over a group; steps[i] >= 1 is param i's step count after this update."},
    {"adadelta_step_", KW(py_adadelta_step),
     "adadelta_step_(params, grads, square_avgs, acc_deltas, lr, rho, eps, weight_decay, maximize=False): one "
     "fused in-place Adadelta step over a group."},
    {NULL, NULL, 0, NULL},
};
