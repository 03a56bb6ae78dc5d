/* csrc/autograd_engine.c — the backward walk (_C._run_backward, called by autograd._run).
 *
 * PyTorch's engine, on one thread (torch/csrc/autograd/engine.cpp): from the root edges it finds every reachable
 * node and counts, for each, the edges that feed it a gradient (its dependencies). A node is ready when all of
 * them have delivered (its count is 0: its gradient is complete); among the ready nodes the one made last in the
 * forward (highest sequence number) runs first, and AccumulateGrad before any other, so a leaf's .grad is written
 * (and its post-accumulate hooks run: DDP launches a bucket's all-reduce from them) as soon as it is complete.
 * The ready queue is a binary heap with the sift rules of libstdc++'s std::priority_queue, which PyTorch's
 * ReadyQueue is, so even ties (several AccumulateGrad ready at once) are broken as PyTorch breaks them.
 *
 * Running a node: tensor hooks, capture for autograd.grad, the node's backward under the scope "<forward scope>
 * backward" and category activation_grad with grad mode off (on under create_graph: the nodes then record their
 * gradients, _core/graph_backward.py), then each input gradient handed to the node feeding
 * that input (summed in place into the gradient already there when nothing else reads it, as PyTorch's
 * InputBuffer does). A node's gradients are held only by the walk until it runs, and its saved tensors are dropped
 * as soon as its backward returns (unless retain_graph), so memory is freed at the earliest point. The nodes'
 * backwards stay Python (autograd.Function.backward; AccumulateGrad.apply_grads writes .grad); the bookkeeping
 * around them is here.
 *
 * Above autograd_node.c (the node type), category.c (scope, category), ops_elementwise.c (gm_binary_out) and
 * tensor_type.c (gm_grads_free). */
#include "gm.h"
#include "autograd.h"
#include "../kernels/elementwise_ops.h"

typedef struct {
    PyObject *node;   /* borrowed: the index dict holds it */
    PyObject *grads;  /* list indexed by output_nr (None where nothing arrived), or NULL */
    Py_ssize_t deps;  /* edges into this node from nodes that have not run yet (and from the roots) */
    uint64_t prio;    /* its sequence number */
    char captured;    /* autograd.grad: an input's edge points at this node */
    char needed;      /* autograd.grad: an edge leads from it to a captured node or to a needed one */
} walk_entry;

typedef struct {
    walk_entry *e;
    Py_ssize_t n, cap;
    PyObject *index;  /* dict node -> int index into e */
    Py_ssize_t *heap; /* the ready nodes, indices into e */
    Py_ssize_t nheap;
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
    walk_entry *e = &w->e[w->n];
    e->node = node;
    e->grads = NULL;
    e->deps = 0;
    e->captured = e->needed = 0;
    e->prio = PyObject_TypeCheck(node, GMNode_Type) ? ((GMNode *)node)->seq : 0;
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

/* Whether t (the walk's gradient, referenced only by the walk's list) may take another gradient in place: no one
 * else holds it or its storage, it is dense, and the sum has its shape and dtype (PyTorch's
 * can_accumulate_inplace). */
static int can_add_into(PyObject *prev, PyObject *g) {
    if (!gm_is_tensor(prev) || !gm_is_tensor(g) || Py_REFCNT(prev) != 1) return 0;
    GMTensor *p = (GMTensor *)prev, *q = (GMTensor *)g;
    if (p->storage->refcount != 1 || p->requires_grad || (p->grad_fn && p->grad_fn != Py_None)) return 0;
    if (q->requires_grad) return 0; /* create_graph: g's graph must reach the sum */
    if (p->dtype != q->dtype || !gm_device_eq(p->device, q->device) || p->ndim != q->ndim || !gm_is_contiguous(p)) return 0;
    for (int d = 0; d < p->ndim; d++)
        if (p->shape[d] != q->shape[d]) return 0;
    return p->storage != q->storage;
}

/* Whether prev and g are two bfloat16 gradients of a float32 leaf: ToDtype.backward hands autocast's weight
 * gradients on narrow (AccumulateGrad widens them), so two uses of one parameter meet here in bfloat16. */
static int narrow_leaf_sum(PyObject *node, PyObject *prev, PyObject *g) {
    if (!gm_accumulate_cls || !PyObject_TypeCheck(node, (PyTypeObject *)gm_accumulate_cls)) return 0;
    PyObject *var = ((GMNode *)node)->variable;
    return var && gm_is_tensor(var) && ((GMTensor *)var)->dtype == GM_F32 && gm_is_tensor(prev) && gm_is_tensor(g) &&
           ((GMTensor *)prev)->dtype == GM_BF16 && ((GMTensor *)g)->dtype == GM_BF16;
}

/* The gradient slot output_nr of entry e gets g (a new reference is taken): set, or summed with what is there. */
static int walk_accumulate(walk_entry *e, Py_ssize_t nr, PyObject *g) {
    if (!e->grads && !(e->grads = PyList_New(0))) return -1;
    while (PyList_GET_SIZE(e->grads) <= nr)
        if (PyList_Append(e->grads, Py_None) < 0) return -1;
    PyObject *prev = PyList_GET_ITEM(e->grads, nr);
    PyObject *v;
    if (prev == Py_None) {
        Py_INCREF(g);
        v = g;
    } else if (narrow_leaf_sum(e->node, prev, g)) {
        /* summed in float32, as the two float32 copies they stand for would be (no bfloat16 rounding of the sum) */
        PyObject *w = PyObject_CallMethod(prev, "float", NULL);
        if (!w) return -1;
        v = gm_binary_out(GM_EW_ADD, w, g, w);
        Py_DECREF(w);
        if (!v) return -1;
    } else if (can_add_into(prev, g)) {
        /* prev += g: no second buffer of this size while the sum is made */
        if (!(v = gm_binary_out(GM_EW_ADD, prev, g, prev))) return -1;
    } else if (!(v = PyNumber_Add(prev, g))) {
        return -1;
    }
    PyList_SetItem(e->grads, nr, v); /* steals v, drops prev */
    return 0;
}

/* ---- the ready queue: std::priority_queue's heap (libstdc++'s push_heap / pop_heap), max on prio --------------- */
static int heap_less(walk *w, Py_ssize_t a, Py_ssize_t b) { return w->e[a].prio < w->e[b].prio; }

static void heap_sift_up(walk *w, Py_ssize_t hole, Py_ssize_t top, Py_ssize_t v) {
    Py_ssize_t *h = w->heap, parent = (hole - 1) / 2;
    while (hole > top && heap_less(w, h[parent], v)) {
        h[hole] = h[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    h[hole] = v;
}

static void heap_push(walk *w, Py_ssize_t i) { /* the heap has room for every node: it is sized w->n */
    w->heap[w->nheap++] = i;
    heap_sift_up(w, w->nheap - 1, 0, i);
}

static Py_ssize_t heap_pop(walk *w) {
    Py_ssize_t *h = w->heap, top = h[0], len = --w->nheap;
    if (len == 0) return top;
    Py_ssize_t v = h[len], hole = 0, child = 0; /* __adjust_heap(first, 0, len, v) */
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (heap_less(w, h[child], h[child - 1])) child--;
        h[hole] = h[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hole = child - 1;
    }
    heap_sift_up(w, hole, 0, v);
    return top;
}

/* The edges of a node: its next_functions as a fast sequence of (node, output_nr) or None; NULL (no error) for a
 * node without edges. */
static PyObject *edges_of(PyObject *node) {
    PyObject *nf = PyObject_TypeCheck(node, GMNode_Type) ? ((GMNode *)node)->next_functions : NULL;
    if (!nf || nf == Py_None) return NULL;
    return PySequence_Fast(nf, "next_functions must be a sequence");
}

static PyObject *edge_target(PyObject *edge) {
    if (PyTuple_Check(edge) && PyTuple_GET_SIZE(edge) == 2) return PyTuple_GET_ITEM(edge, 0);
    PyErr_SetString(PyExc_TypeError, "next_functions: expected (node, output_nr) or None");
    return NULL;
}

/* Every node reachable from the roots, each edge between them counted in its target's deps (PyTorch's
 * compute_dependencies); the roots count one dependency per root edge, which the walk's start releases. */
static int collect(walk *w, PyObject *root_nodes) {
    Py_ssize_t cap = 64, top = 0;
    Py_ssize_t *stack = PyMem_Malloc(sizeof(Py_ssize_t) * cap);
    if (!stack) goto nomem;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(root_nodes) + 1; r++) {
        /* first the roots, then (r == number of roots) everything below them */
        if (r < PyList_GET_SIZE(root_nodes)) {
            PyObject *node = PyList_GET_ITEM(root_nodes, r);
            int seen = PyDict_Contains(w->index, node);
            if (seen < 0) goto fail;
            Py_ssize_t i = seen ? walk_find(w, node) : walk_add(w, node);
            if (i < 0) goto fail;
            w->e[i].deps++;
            if (seen) continue;
            if (top == cap && !(stack = PyMem_Realloc(stack, sizeof(Py_ssize_t) * (cap *= 2)))) goto nomem;
            stack[top++] = i;
            continue;
        }
        while (top > 0) {
            PyObject *seq = edges_of(w->e[stack[--top]].node);
            if (!seq) {
                if (PyErr_Occurred()) goto fail;
                continue;
            }
            for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
                PyObject *edge = PySequence_Fast_GET_ITEM(seq, k), *next;
                if (edge == Py_None) continue;
                if (!(next = edge_target(edge))) {
                    Py_DECREF(seq);
                    goto fail;
                }
                int seen = PyDict_Contains(w->index, next);
                Py_ssize_t j = seen < 0 ? -1 : seen ? walk_find(w, next) : walk_add(w, next);
                if (j < 0) {
                    Py_DECREF(seq);
                    goto fail;
                }
                w->e[j].deps++;
                if (seen) continue;
                if (top == cap && !(stack = PyMem_Realloc(stack, sizeof(Py_ssize_t) * (cap *= 2)))) {
                    Py_DECREF(seq);
                    goto nomem;
                }
                stack[top++] = j;
            }
            Py_DECREF(seq);
        }
    }
    PyMem_Free(stack);
    if (!(w->heap = PyMem_Malloc(sizeof(Py_ssize_t) * (w->n ? w->n : 1)))) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
nomem:
    PyErr_NoMemory();
fail:
    PyMem_Free(stack);
    return -1;
}

/* autograd.grad runs only the nodes on a path from the roots to an input (PyTorch's exec_info): the others' inputs'
 * gradients would reach nothing that is returned, and their backwards (and the leaves' hooks below them) must not
 * run. A node is needed when one of its edges leads to a captured node or to a needed one: marked here, children
 * before parents (an iterative depth-first walk: stack of (entry, next edge)). */
static int mark_needed(walk *w, PyObject *capture) {
    PyObject *key, *value;
    Py_ssize_t pos = 0, top = 0;
    while (PyDict_Next(capture, &pos, &key, &value)) {
        PyObject *idx = PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 2
                            ? PyDict_GetItemWithError(w->index, PyTuple_GET_ITEM(key, 0)) : NULL;
        if (idx) w->e[PyLong_AsSsize_t(idx)].captured = 1;
        else if (PyErr_Occurred()) return -1;
    }
    char *state = PyMem_Calloc(w->n ? w->n : 1, 1); /* 0 unvisited, 1 on the stack, 2 marked */
    Py_ssize_t *stack = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (w->n ? w->n : 1));
    if (!state || !stack) {
        PyMem_Free(state);
        PyMem_Free(stack);
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t r = 0; r < w->n && rc == 0; r++) {
        if (state[r]) continue;
        state[r] = 1;
        stack[top++] = r;
        stack[top++] = 0;
        while (top > 0 && rc == 0) {
            Py_ssize_t i = stack[top - 2], k = stack[top - 1];
            PyObject *seq = edges_of(w->e[i].node);
            if (!seq && PyErr_Occurred()) {
                rc = -1;
                break;
            }
            Py_ssize_t len = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
            if (k < len) { /* descend into edge k */
                stack[top - 1] = k + 1;
                PyObject *edge = PySequence_Fast_GET_ITEM(seq, k);
                Py_ssize_t j = edge == Py_None ? -2 : walk_find(w, PyTuple_GET_ITEM(edge, 0));
                if (j == -1) rc = -1;
                else if (j >= 0 && !state[j]) {
                    state[j] = 1;
                    stack[top++] = j;
                    stack[top++] = 0;
                }
                Py_DECREF(seq);
                continue;
            }
            for (Py_ssize_t q = 0; q < len; q++) { /* every child is marked: so is this node */
                PyObject *edge = PySequence_Fast_GET_ITEM(seq, q);
                if (edge == Py_None) continue;
                Py_ssize_t j = walk_find(w, PyTuple_GET_ITEM(edge, 0));
                if (j < 0) {
                    rc = -1;
                    break;
                }
                if (w->e[j].captured || w->e[j].needed) w->e[i].needed = 1;
            }
            Py_XDECREF(seq);
            state[i] = 2;
            top -= 2;
        }
    }
    PyMem_Free(state);
    PyMem_Free(stack);
    return rc;
}

/* node has run (or had nothing to run on): each node it feeds loses a dependency, in edge order, and is ready
 * when none is left (PyTorch's evaluate_function pushes in this order). */
static int release_edges(walk *w, PyObject *node) {
    PyObject *seq = edges_of(node);
    if (!seq) return PyErr_Occurred() ? -1 : 0;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
        PyObject *edge = PySequence_Fast_GET_ITEM(seq, k);
        if (edge == Py_None) continue;
        Py_ssize_t j = walk_find(w, PyTuple_GET_ITEM(edge, 0));
        if (j < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (--w->e[j].deps == 0) heap_push(w, j);
    }
    Py_DECREF(seq);
    return 0;
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

/* The node's own hooks (Node.register_prehook / register_hook) sit in its hook dict under these keys, beside the
 * tensors' hooks under their output_nr (autograd_hooks.py). */
#define NODE_PRE_HOOKS (-1)
#define NODE_POST_HOOKS (-2)

/* The node's hook list under key, or NULL (no error set) when it has none. Borrowed. */
static PyObject *node_hooks(GMNode *node, long key) {
    if (!node->pre_hooks || !PyDict_Check(node->pre_hooks)) return NULL;
    PyObject *k = PyLong_FromLong(key);
    if (!k) return NULL;
    PyObject *hooks = PyDict_GetItemWithError(node->pre_hooks, k);
    Py_DECREF(k);
    return hooks && PyList_Check(hooks) && PyList_GET_SIZE(hooks) ? hooks : NULL;
}

/* Calls hook(*args); a result other than None must hold `expected` values (PyTorch's check) and comes back as a new
 * tuple in *out (NULL for None). It may leave out trailing entries that are None in what the hook was given, down to
 * `least`: a node here has a slot for each argument of its op, PyTorch's one for each tensor (x.sum(1)'s hook is
 * given (g, None, None, None) where PyTorch gives (g,), and may answer (g * 3,)); those come back as None. */
static int call_node_hook(PyObject *hook, PyObject *args, Py_ssize_t expected, Py_ssize_t least, PyObject **out) {
    *out = NULL;
    PyObject *r = PyObject_CallObject(hook, args);
    if (!r) return -1;
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    PyObject *t = PySequence_Tuple(r);
    Py_DECREF(r);
    if (!t) return -1;
    Py_ssize_t got = PyTuple_GET_SIZE(t);
    if (got < expected && got >= least) { /* the left-out trailing Nones */
        PyObject *full = PyTuple_New(expected);
        if (!full) {
            Py_DECREF(t);
            return -1;
        }
        for (Py_ssize_t i = 0; i < expected; i++)
            PyTuple_SET_ITEM(full, i, Py_NewRef(i < got ? PyTuple_GET_ITEM(t, i) : Py_None));
        Py_SETREF(t, full);
    }
    if (PyTuple_GET_SIZE(t) != expected) {
        PyObject *name = PyObject_GetAttrString(hook, "__name__");
        if (!name) PyErr_Clear();
        PyErr_Format(PyExc_RuntimeError, "hook '%S' has returned an incorrect number of values (got %zd, but "
                     "expected %zd)", name ? name : Py_None, PyTuple_GET_SIZE(t), expected);
        Py_XDECREF(name);
        Py_DECREF(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* Each hook in hooks (a list; a hook may remove itself) called as hook(value) or hook(value, extra); a result
 * replaces value (a tuple). */
static int chain_node_hooks(PyObject *hooks, PyObject **value, PyObject *extra) {
    PyObject *copy = PySequence_List(hooks);
    if (!copy) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(copy); i++) {
        Py_ssize_t n = PyTuple_GET_SIZE(*value), least = n;
        while (least > 0 && PyTuple_GET_ITEM(*value, least - 1) == Py_None) least--;
        PyObject *args = extra ? PyTuple_Pack(2, *value, extra) : PyTuple_Pack(1, *value), *r;
        int bad = !args || call_node_hook(PyList_GET_ITEM(copy, i), args, n, least, &r) < 0;
        Py_XDECREF(args);
        if (bad) {
            Py_DECREF(copy);
            return -1;
        }
        if (r) Py_SETREF(*value, r);
    }
    Py_DECREF(copy);
    return 0;
}

/* The tensors' hooks (each on its own gradient), then the node's pre-hooks (on all of them): PyTorch's order. */
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
    PyObject *node_pre = node_hooks(node, NODE_PRE_HOOKS);
    if (!node_pre) return PyErr_Occurred() ? -1 : 0;
    PyObject *go = PyList_AsTuple(grads);
    if (!go || chain_node_hooks(node_pre, &go, NULL) < 0) {
        Py_XDECREF(go);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(go); i++) {
        PyObject *g = PyTuple_GET_ITEM(go, i);
        Py_INCREF(g);
        PyList_SetItem(grads, i, g);
    }
    Py_DECREF(go);
    return 0;
}

/* The node's post-hooks, hook(grad_inputs, grad_outputs) each, after it ran; a result replaces grad_inputs.
 * *in_grads (a sequence, or NULL for AccumulateGrad's none) becomes a tuple. */
static int post_hooks(PyObject *hooks, PyObject **in_grads, PyObject *grad_outputs) {
    PyObject *gi = *in_grads ? PySequence_Tuple(*in_grads) : PyTuple_New(0);
    if (!gi) return -1;
    Py_XSETREF(*in_grads, gi);
    return chain_node_hooks(hooks, in_grads, grad_outputs);
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

/* The leaf's post-accumulate hooks, hook(leaf) each, after its .grad was written (PyTorch's
 * tensor_post_acc_grad_hooks, run by AccumulateGrad::apply). */
static int post_accumulate_hooks(PyObject *var) {
    /* (they run for a leaf that stopped requiring grad after the forward too, its .grad untouched: PyTorch's) */
    PyObject *hooks = var && gm_is_tensor(var) ? ((GMTensor *)var)->post_acc_hooks : NULL;
    if (!hooks || hooks == Py_None || !PyList_Check(hooks) || PyList_GET_SIZE(hooks) == 0) return 0;
    PyObject *copy = PyList_GetSlice(hooks, 0, PyList_GET_SIZE(hooks)); /* a hook may remove itself */
    if (!copy) return -1;
    Py_INCREF(var); /* a hook may drop the last other reference to the leaf */
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(copy) && rc == 0; i++) {
        PyObject *r = PyObject_CallOneArg(PyList_GET_ITEM(copy, i), var);
        if (!r) rc = -1;
        Py_XDECREF(r);
    }
    Py_DECREF(var);
    Py_DECREF(copy);
    return rc;
}

/* One node: hooks, capture, its backward, the release of what it saved, its input gradients handed on. Steals
 * grads. */
static PyObject *str_apply_grads;

static int run_node(walk *w, PyObject *node, PyObject *grads, int retain, PyObject *capture, int needed) {
    int rc = -1, is_acc = gm_accumulate_cls && PyObject_TypeCheck(node, (PyTypeObject *)gm_accumulate_cls);
    PyObject *in_grads = NULL, *seq = NULL, *grad_outputs = NULL;
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
    /* Post-hooks see the gradients the node was given: kept before its backward may take them over. */
    PyObject *post = node_hooks(n, NODE_POST_HOOKS);
    if (!post && PyErr_Occurred()) goto done;
    if (post && !(grad_outputs = PyList_AsTuple(grads))) goto done;
    if (capture != Py_None) {
        int any = capture_grads(capture, node, grads);
        if (any < 0) goto done;
        if ((any && is_acc) || !needed) { /* nothing returned lies below it */
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
            /* The gradient is in .grad: the walk's reference goes before the post-accumulate hooks run, so a hook
             * that frees or replaces .grad (ZeRO-2 moves it into a bucket) has that memory back. */
            Py_CLEAR(grads);
            if (post_accumulate_hooks(n->variable) < 0) goto done;
            if (post && post_hooks(post, &in_grads, grad_outputs) < 0) goto done;
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
    if (post && post_hooks(post, &in_grads, grad_outputs) < 0) goto done;
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
    Py_XDECREF(grad_outputs);
    Py_XDECREF(seq);
    return rc;
}

/* ---- what runs next: _backward_next() (save_on_cpu's prefetch) -----------------------------------------------
 * The walk and the node running on this thread (a backward inside a node's backward, checkpointing's, nests). */
static _Thread_local walk *cur_walk;
static _Thread_local Py_ssize_t cur_node = -1;

/* Edges from node `from` into entry j. */
static Py_ssize_t edges_into(walk *w, PyObject *seq, Py_ssize_t j) {
    Py_ssize_t c = 0;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
        PyObject *edge = PySequence_Fast_GET_ITEM(seq, k);
        if (edge != Py_None && PyTuple_Check(edge) && PyTuple_GET_SIZE(edge) == 2 &&
            PyTuple_GET_ITEM(edge, 0) == w->e[j].node)
            c++;
    }
    return c;
}

/* _backward_next(): called from inside a node's backward (its unpack hooks), the node the walk pops after it: the
 * latest made among the ready ones and those the running node is the last dependency of; None outside backward
 * or when nothing is left. (It may get no gradient and be skipped: a guess good enough to prefetch for.) */
static PyObject *py_backward_next(PyObject *self, PyObject *noargs) {
    walk *w = cur_walk;
    if (!w || cur_node < 0) Py_RETURN_NONE;
    Py_ssize_t best = w->nheap > 0 ? w->heap[0] : -1;
    PyObject *seq = edges_of(w->e[cur_node].node);
    if (!seq && PyErr_Occurred()) return NULL;
    for (Py_ssize_t k = 0; seq && k < PySequence_Fast_GET_SIZE(seq); k++) {
        PyObject *edge = PySequence_Fast_GET_ITEM(seq, k);
        if (edge == Py_None || !PyTuple_Check(edge) || PyTuple_GET_SIZE(edge) != 2) continue;
        PyObject *key = PyTuple_GET_ITEM(edge, 0);
        PyObject *idx = PyDict_GetItemWithError(w->index, key);
        if (!idx) continue;
        Py_ssize_t j = PyLong_AsSsize_t(idx);
        if (j >= 0 && w->e[j].deps == edges_into(w, seq, j) && (best < 0 || w->e[j].prio > w->e[best].prio)) best = j;
    }
    Py_XDECREF(seq);
    if (PyErr_Occurred()) return NULL;
    return best >= 0 ? Py_NewRef(w->e[best].node) : Py_NewRef(Py_None);
}

/* _run_backward(root_edges, grads, retain_graph, capture[, create_graph]): see the top of this file. With
 * create_graph the walk keeps grad mode as it is (the nodes' formulas record their gradients, and two gradients
 * meeting at a node are summed by a recorded add). */
static PyObject *py_run_backward(PyObject *self, PyObject *args) {
    PyObject *edges, *grads, *capture;
    int retain, create_graph = 0;
    if (!PyArg_ParseTuple(args, "O!O!pO|p:_run_backward", &PyList_Type, &edges, &PyList_Type, &grads, &retain,
                          &capture, &create_graph))
        return NULL;
    if (PyList_GET_SIZE(edges) != PyList_GET_SIZE(grads)) {
        PyErr_SetString(PyExc_ValueError, "_run_backward: one gradient per root");
        return NULL;
    }
    walk w = {NULL, 0, 0, PyDict_New(), NULL, 0};
    PyObject *roots = PyList_New(0), *result = NULL, *token = NULL;
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
    if (collect(&w, roots) < 0) goto done;
    if (capture != Py_None && (!PyDict_Check(capture) || mark_needed(&w, capture) < 0)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_run_backward: capture must be a dict or None");
        goto done;
    }
    /* the roots' gradients, handed over as PyTorch's GraphRoot node hands them: in order, each root ready once
     * every edge into it has delivered (a root may also lie below another root) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(edges); i++) {
        PyObject *e = PyList_GET_ITEM(edges, i);
        Py_ssize_t j = walk_find(&w, PyTuple_GET_ITEM(e, 0));
        Py_ssize_t nr = j < 0 ? -1 : PyLong_AsSsize_t(PyTuple_GET_ITEM(e, 1));
        if (j < 0 || nr < 0 || walk_accumulate(&w.e[j], nr, PyList_GET_ITEM(grads, i)) < 0) goto done;
        if (--w.e[j].deps == 0) heap_push(&w, j);
    }
    /* everything backward makes is a gradient of an activation or a temporary (AccumulateGrad tags leaf
     * gradients "gradient", kernels their scratch "workspace"); no graph is recorded */
    if (gm_grad_mode && !create_graph && !(token = PyContextVar_Set(gm_grad_mode, Py_False))) goto done;
    while (w.nheap > 0) {
        walk_entry *e = &w.e[heap_pop(&w)];
        PyObject *node = e->node, *g = e->grads; /* from here the walk's only reference to each gradient is g's */
        e->grads = NULL;
        walk *outer_walk = cur_walk;
        Py_ssize_t outer_node = cur_node;
        cur_walk = &w;
        cur_node = e - w.e;
        int rc = g ? run_node(&w, node, g, retain, capture, e->needed) : 0; /* no gradient reached it: skipped */
        cur_walk = outer_walk;
        cur_node = outer_node;
        if (rc < 0) goto done;
        if (release_edges(&w, node) < 0) goto done;
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
    PyMem_Free(w.heap);
    Py_XDECREF(w.index);
    Py_XDECREF(roots);
    return result;
}

PyMethodDef gm_autograd_engine_methods[] = {
    {"_run_backward", py_run_backward, METH_VARARGS,
     "_run_backward(root_edges, grads, retain_graph, capture[, create_graph]): run backward from (node, output_nr) "
     "edges."},
    {"_backward_next", py_backward_next, METH_NOARGS,
     "_backward_next(): inside a node's backward, the node the walk runs next (or None)."},
    {NULL, NULL, 0, NULL},
};
