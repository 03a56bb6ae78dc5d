/* csrc/autograd_engine.c — the backward walk (_C._run_backward, called by autograd._run).
 *
 * From the root edges it collects every reachable node (a depth-first search; nodes run in its reverse
 * post-order, a topological order: a node runs after every node that feeds it a gradient, so its gradient is
 * complete), then runs each node that received a gradient: tensor hooks, capture for autograd.grad, the node's
 * backward under the scope "<forward scope> backward" and category activation_grad with grad mode off, then
 * hands each input gradient to the node feeding that input (added in place of a second reference: `prev + g`).
 * A node's gradients are held only by the walk until it runs, and its saved tensors are dropped as soon as its
 * backward returns (unless retain_graph), so memory is freed at the earliest point. The nodes' backwards stay
 * Python (autograd.Function.backward; AccumulateGrad.apply_grads writes .grad); the bookkeeping around them
 * is here.
 *
 * Above autograd_node.c (the node type), category.c (scope, category) and tensor_type.c (gm_grads_free). */
#include "gm.h"
#include "autograd.h"

typedef struct {
    PyObject *node;  /* borrowed: the index dict holds it */
    PyObject *grads; /* list indexed by output_nr (None where nothing arrived), or NULL */
} walk_entry;

typedef struct {
    walk_entry *e;
    Py_ssize_t n, cap;
    PyObject *index; /* dict node -> int index into e */
} walk;

static Py_ssize_t walk_add(walk *w, PyObject *node) {
    if (w->n == w->cap) {
        Py_ssize_t cap = w->cap ? 2 * w->cap : 64;
        walk_entry *e = PyMem_Realloc(w->e, sizeof(walk_entry) * cap);
        if (!e) {
            PyErr_NoMemory();
            return -1;
        }
        w->e = e;
        w->cap = cap;
    }
    PyObject *i = PyLong_FromSsize_t(w->n);
    if (!i || PyDict_SetItem(w->index, node, i) < 0) {
        Py_XDECREF(i);
        return -1;
    }
    Py_DECREF(i);
    w->e[w->n].node = node;
    w->e[w->n].grads = NULL;
    return w->n++;
}

static Py_ssize_t walk_find(walk *w, PyObject *node) {
    PyObject *i = PyDict_GetItemWithError(w->index, node);
    if (!i) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "backward: a gradient reached a node outside the graph");
        return -1;
    }
    return PyLong_AsSsize_t(i);
}

/* The gradient slot output_nr of entry e gets g (a new reference is taken): set, or prev + g. */
static int walk_accumulate(walk_entry *e, Py_ssize_t nr, PyObject *g) {
    if (!e->grads && !(e->grads = PyList_New(0))) return -1;
    while (PyList_GET_SIZE(e->grads) <= nr)
        if (PyList_Append(e->grads, Py_None) < 0) return -1;
    PyObject *prev = PyList_GET_ITEM(e->grads, nr);
    PyObject *v;
    if (prev == Py_None) {
        Py_INCREF(g);
        v = g;
    } else if (!(v = PyNumber_Add(prev, g))) {
        return -1;
    }
    PyList_SetItem(e->grads, nr, v); /* steals v, drops prev */
    return 0;
}

/* The nodes reachable from roots in reverse post-order of a depth-first search (outputs before inputs), as
 * indices of w. The search visits edges in the order autograd._collect did in Python, so the order nodes run in
 * (and with it every peak of memory) is unchanged. */
static Py_ssize_t *collect(walk *w, PyObject *root_nodes, Py_ssize_t *n_order) {
    Py_ssize_t cap = 64, top = 0, n = 0, ocap = 64;
    struct frame { PyObject *node; int done; } *stack = PyMem_Malloc(sizeof(struct frame) * cap);
    Py_ssize_t *order = PyMem_Malloc(sizeof(Py_ssize_t) * ocap);
    if (!stack || !order) goto nomem;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(root_nodes); i++) {
        if (top == cap && !(stack = PyMem_Realloc(stack, sizeof(struct frame) * (cap *= 2)))) goto nomem;
        stack[top].node = PyList_GET_ITEM(root_nodes, i);
        stack[top++].done = 0;
    }
    while (top > 0) {
        struct frame f = stack[--top];
        if (f.done) {
            if (n == ocap && !(order = PyMem_Realloc(order, sizeof(Py_ssize_t) * (ocap *= 2)))) goto nomem;
            Py_ssize_t i = walk_find(w, f.node);
            if (i < 0) goto fail;
            order[n++] = i;
            continue;
        }
        int seen = PyDict_Contains(w->index, f.node);
        if (seen < 0) goto fail;
        if (seen) continue;
        if (walk_add(w, f.node) < 0) goto fail;
        if (top + 1 >= cap && !(stack = PyMem_Realloc(stack, sizeof(struct frame) * (cap *= 2)))) goto nomem;
        stack[top].node = f.node;
        stack[top++].done = 1;
        PyObject *nf = PyObject_TypeCheck(f.node, GMNode_Type) ? ((GMNode *)f.node)->next_functions : NULL;
        if (!nf || nf == Py_None) continue;
        PyObject *seq = PySequence_Fast(nf, "next_functions must be a sequence");
        if (!seq) goto fail;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
            PyObject *edge = PySequence_Fast_GET_ITEM(seq, k);
            if (edge == Py_None) continue;
            PyObject *next = PyTuple_Check(edge) && PyTuple_GET_SIZE(edge) == 2 ? PyTuple_GET_ITEM(edge, 0) : NULL;
            if (!next) {
                Py_DECREF(seq);
                PyErr_SetString(PyExc_TypeError, "next_functions: expected (node, output_nr) or None");
                goto fail;
            }
            int s2 = PyDict_Contains(w->index, next);
            if (s2 < 0) {
                Py_DECREF(seq);
                goto fail;
            }
            if (s2) continue;
            if (top == cap && !(stack = PyMem_Realloc(stack, sizeof(struct frame) * (cap *= 2)))) {
                Py_DECREF(seq);
                goto nomem;
            }
            stack[top].node = next;
            stack[top++].done = 0;
        }
        Py_DECREF(seq);
    }
    PyMem_Free(stack);
    for (Py_ssize_t i = 0; i < n / 2; i++) { /* post-order reversed: outputs first */
        Py_ssize_t t = order[i];
        order[i] = order[n - 1 - i];
        order[n - 1 - i] = t;
    }
    *n_order = n;
    return order;
nomem:
    PyErr_NoMemory();
fail:
    PyMem_Free(stack);
    PyMem_Free(order);
    return NULL;
}

/* "features.3 forward" -> "features.3 backward"; "x" -> "x backward"; "" -> "backward"; interned, remembered per
 * forward scope (scopes are interned, so their pointers are their identity). */
#define SCOPE_CACHE 512
static const char *scope_fwd[SCOPE_CACHE], *scope_bwd[SCOPE_CACHE];

static const char *backward_scope(const char *fwd) {
    if (!fwd) fwd = "";
    size_t h = ((uintptr_t)fwd >> 4) % SCOPE_CACHE;
    for (size_t k = 0; k < 8; k++) {
        size_t j = (h + k) % SCOPE_CACHE;
        if (scope_fwd[j] == fwd) return scope_bwd[j];
        if (!scope_fwd[j]) break;
    }
    size_t len = strlen(fwd);
    const char *suffix = " forward";
    size_t sl = strlen(suffix);
    /* the forward scope up to and with the space before "forward", or all of it and a space */
    int is_fwd = len >= sl && strcmp(fwd + len - sl, suffix) == 0;
    size_t keep = is_fwd ? len - sl + 1 : len;
    char *buf = PyMem_Malloc(keep + sizeof " backward");
    if (!buf) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(buf, fwd, keep);
    strcpy(buf + keep, is_fwd || keep == 0 ? "backward" : " backward");
    PyObject *s = PyUnicode_FromString(buf);
    PyMem_Free(buf);
    if (!s) return NULL;
    const char *bwd = gm_intern(s);
    Py_DECREF(s);
    if (!bwd) return NULL;
    for (size_t k = 0; k < 8; k++) {
        size_t j = (h + k) % SCOPE_CACHE;
        if (!scope_fwd[j]) {
            scope_fwd[j] = fwd;
            scope_bwd[j] = bwd;
            break;
        }
    }
    return bwd;
}

/* Each hook in hooks (a list) on grads[nr]: a hook returning a tensor replaces the gradient. */
static int run_hooks(PyObject *hooks, PyObject *grads, Py_ssize_t nr) {
    PyObject *copy = PySequence_List(hooks); /* a hook may remove itself */
    if (!copy) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(copy); i++) {
        PyObject *r = PyObject_CallOneArg(PyList_GET_ITEM(copy, i), PyList_GET_ITEM(grads, nr));
        if (!r) {
            Py_DECREF(copy);
            return -1;
        }
        if (r != Py_None) PyList_SetItem(grads, nr, r);
        else Py_DECREF(r);
    }
    Py_DECREF(copy);
    return 0;
}

static int pre_hooks(GMNode *node, PyObject *grads) {
    PyObject *k, *hooks;
    Py_ssize_t pos = 0;
    if (!PyDict_Check(node->pre_hooks)) return 0;
    while (PyDict_Next(node->pre_hooks, &pos, &k, &hooks)) {
        Py_ssize_t nr = PyLong_AsSsize_t(k);
        if (nr == -1 && PyErr_Occurred()) return -1;
        if (nr >= 0 && nr < PyList_GET_SIZE(grads) && PyList_GET_ITEM(grads, nr) != Py_None &&
            run_hooks(hooks, grads, nr) < 0)
            return -1;
    }
    return 0;
}

/* autograd.grad: the gradients reaching the edges in capture (a dict (node, output_nr) -> None or a tensor) are
 * summed there. Returns 1 when some edge of node is captured, 0 when none, -1 on error. */
static int capture_grads(PyObject *capture, PyObject *node, PyObject *grads) {
    int any = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(grads); i++) {
        PyObject *key = Py_BuildValue("(On)", node, i);
        if (!key) return -1;
        PyObject *prev = PyDict_GetItemWithError(capture, key);
        if (!prev) {
            Py_DECREF(key);
            if (PyErr_Occurred()) return -1;
            continue;
        }
        any = 1;
        PyObject *g = PyList_GET_ITEM(grads, i);
        if (g != Py_None) {
            PyObject *v = prev == Py_None ? (Py_INCREF(g), g) : PyNumber_Add(prev, g);
            if (!v || PyDict_SetItem(capture, key, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(key);
                return -1;
            }
            Py_DECREF(v);
        }
        Py_DECREF(key);
    }
    return any;
}

/* One node: hooks, capture, its backward, the release of what it saved, its input gradients handed on. Steals
 * grads. */
static PyObject *str_apply_grads;

static int run_node(walk *w, PyObject *node, PyObject *grads, int retain, PyObject *capture) {
    int rc = -1, is_acc = gm_accumulate_cls && PyObject_TypeCheck(node, (PyTypeObject *)gm_accumulate_cls);
    PyObject *in_grads = NULL, *seq = NULL;
    if (!PyObject_TypeCheck(node, GMNode_Type)) {
        PyErr_Format(PyExc_TypeError, "backward: %R in next_functions is not an autograd node", node);
        goto done;
    }
    if (!str_apply_grads && !(str_apply_grads = PyUnicode_InternFromString("apply_grads"))) goto done;
    if (is_acc && PyList_GET_ITEM(grads, 0) != Py_None) {
        PyObject *var = PyObject_GetAttrString(node, "variable");
        if (!var) goto done;
        PyObject *hooks = gm_is_tensor(var) ? ((GMTensor *)var)->hooks : NULL;
        int ok = !hooks || hooks == Py_None || PyObject_IsTrue(hooks) == 0 || run_hooks(hooks, grads, 0) == 0;
        Py_DECREF(var);
        if (!ok) goto done;
    }
    GMNode *n = (GMNode *)node;
    if (n->pre_hooks && n->pre_hooks != Py_None && pre_hooks(n, grads) < 0) goto done;
    if (capture != Py_None) {
        int any = capture_grads(capture, node, grads);
        if (any < 0) goto done;
        if (any && is_acc) {
            rc = 0;
            goto done;
        }
    }
    if (is_acc) {
        if (capture == Py_None) {
            const char *scope = backward_scope(NULL);
            if (!scope) goto done;
            gm_set_scope(scope);
            PyObject *r = PyObject_CallMethodOneArg(node, str_apply_grads, grads);
            if (!r) goto done;
            Py_DECREF(r);
        }
        rc = 0;
        goto done;
    }
    if (PyList_GET_SIZE(grads) == 1 && PyList_GET_ITEM(grads, 0) == Py_None) {
        rc = 0;
        goto done;
    }
    const char *scope = backward_scope(n->scope);
    if (!scope) goto done;
    gm_set_scope(scope);
    PyObject *reuses = PyObject_GetAttrString(node, "reuses_grad");
    if (!reuses) goto done;
    int reuse = PyObject_IsTrue(reuses);
    Py_DECREF(reuses);
    if (reuse < 0) goto done;
    if (reuse) {
        PyObject *free_ = gm_grads_free(grads);
        int bad = !free_ || PyObject_SetAttrString(node, "_free_grads", free_) < 0;
        Py_XDECREF(free_);
        if (bad) goto done;
    }
    in_grads = PyObject_CallMethodOneArg(node, str_apply_grads, grads);
    if (reuse && PyObject_SetAttrString(node, "_free_grads", Py_None) < 0) goto done;
    if (!in_grads) goto done;
    if (!retain) { /* Function.release: what it saved goes now */
        Py_CLEAR(n->saved);
        n->released = 1;
    }
    Py_CLEAR(grads); /* no stale reference may keep the next node's gradient from being free */
    PyObject *nf = n->next_functions;
    if (!nf || nf == Py_None) {
        rc = 0;
        goto done;
    }
    if (!(seq = PySequence_Fast(nf, "next_functions must be a sequence"))) goto done;
    PyObject *ig = PySequence_Fast(in_grads, "backward must return a tuple");
    if (!ig) goto done;
    Py_SETREF(in_grads, ig);
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq) < PySequence_Fast_GET_SIZE(in_grads)
                       ? PySequence_Fast_GET_SIZE(seq) : PySequence_Fast_GET_SIZE(in_grads);
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *edge = PySequence_Fast_GET_ITEM(seq, i), *g = PySequence_Fast_GET_ITEM(in_grads, i);
        if (edge == Py_None || g == Py_None) continue;
        Py_ssize_t j = walk_find(w, PyTuple_GET_ITEM(edge, 0));
        Py_ssize_t nr = j < 0 ? -1 : PyLong_AsSsize_t(PyTuple_GET_ITEM(edge, 1));
        if (j < 0 || nr < 0 || walk_accumulate(&w->e[j], nr, g) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "backward: bad edge");
            goto done;
        }
    }
    rc = 0;
done:
    Py_XDECREF(grads);
    Py_XDECREF(in_grads);
    Py_XDECREF(seq);
    return rc;
}

/* _run_backward(root_edges, grads, retain_graph, capture): see the top of this file. */
static PyObject *py_run_backward(PyObject *self, PyObject *args) {
    PyObject *edges, *grads, *capture;
    int retain;
    if (!PyArg_ParseTuple(args, "O!O!pO:_run_backward", &PyList_Type, &edges, &PyList_Type, &grads, &retain,
                          &capture))
        return NULL;
    if (PyList_GET_SIZE(edges) != PyList_GET_SIZE(grads)) {
        PyErr_SetString(PyExc_ValueError, "_run_backward: one gradient per root");
        return NULL;
    }
    walk w = {NULL, 0, 0, PyDict_New()};
    PyObject *roots = PyList_New(0), *result = NULL, *token = NULL;
    Py_ssize_t *order = NULL, n_order = 0;
    const char *outer_scope = gm_current_scope();
    int outer_category = gm_swap_category(GM_CAT_ACTIVATION_GRAD);
    if (!w.index || !roots) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(edges); i++) {
        PyObject *e = PyList_GET_ITEM(edges, i);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2 || !PyObject_TypeCheck(PyTuple_GET_ITEM(e, 0), GMNode_Type)) {
            PyErr_SetString(PyExc_TypeError, "_run_backward: root edges must be (node, output_nr)");
            goto done;
        }
        if (PyList_Append(roots, PyTuple_GET_ITEM(e, 0)) < 0) goto done;
    }
    if (!(order = collect(&w, roots, &n_order))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(edges); i++) {
        PyObject *e = PyList_GET_ITEM(edges, i);
        Py_ssize_t j = walk_find(&w, PyTuple_GET_ITEM(e, 0));
        Py_ssize_t nr = j < 0 ? -1 : PyLong_AsSsize_t(PyTuple_GET_ITEM(e, 1));
        if (j < 0 || nr < 0 || walk_accumulate(&w.e[j], nr, PyList_GET_ITEM(grads, i)) < 0) goto done;
    }
    /* everything backward makes is a gradient of an activation or a temporary (AccumulateGrad tags leaf
     * gradients "gradient", kernels their scratch "workspace"); no graph is recorded */
    if (gm_grad_mode && !(token = PyContextVar_Set(gm_grad_mode, Py_False))) goto done;
    for (Py_ssize_t k = 0; k < n_order; k++) {
        walk_entry *e = &w.e[order[k]];
        if (!e->grads) continue;
        PyObject *g = e->grads; /* from here the walk's only reference to each gradient is g's */
        e->grads = NULL;
        if (run_node(&w, e->node, g, retain, capture) < 0) goto done;
    }
    result = capture;
    Py_INCREF(result);
done:
    if (token) {
        PyObject *exc_t, *exc_v, *exc_tb;
        PyErr_Fetch(&exc_t, &exc_v, &exc_tb);
        if (PyContextVar_Reset(gm_grad_mode, token) < 0) PyErr_Clear();
        PyErr_Restore(exc_t, exc_v, exc_tb);
        Py_DECREF(token);
    }
    gm_set_scope(outer_scope);
    gm_swap_category(outer_category);
    for (Py_ssize_t i = 0; i < w.n; i++) Py_XDECREF(w.e[i].grads);
    PyMem_Free(w.e);
    PyMem_Free(order);
    Py_XDECREF(w.index);
    Py_XDECREF(roots);
    return result;
}

PyMethodDef gm_autograd_engine_methods[] = {
    {"_run_backward", py_run_backward, METH_VARARGS,
     "_run_backward(root_edges, grads, retain_graph, capture): run backward from (node, output_nr) edges."},
    {NULL, NULL, 0, NULL},
};
