/* csrc/autograd_node.c — the autograd graph's node in C (_C.Node, the base of Python's autograd.Node) and the
 * recording fast path of the tensor operators `a + b`, `a - b`, `a * b`, `a / b`.
 *
 * A node keeps its input edges (next_functions), its saved tensors, its tensor hooks, the allocation scope its
 * forward ran in (backward allocates under "<scope> backward") and the shape, dtype or number of each input (its
 * backward reduces gradients to them). Python's autograd.Function (python/gpumemnet/_core/autograd.py) subclasses
 * it for every op, built-in or custom. The operators record their node here, with no Python frame: the tape of
 * a small op costs what PyTorch's does (issue 14, benchmarks/op_overhead.py). Whatever the fast path does not
 * cover (an operand that is not a tensor or a plain number, a reflected `-` or `/`)
 * goes to the Python functions registered by _autograd_setup, which are what the operators were before.
 *
 * Above tensor_type.c (it fills TensorBase's number slots before the type is made ready) and ops_elementwise.c
 * (gm_binary); below module.c, which calls gm_autograd_init. */
#include "gm.h"
#include "autograd.h"
#include "../kernels/elementwise_ops.h"
#include <structmember.h>

/* ---- the node ---------------------------------------------------------------------------------------------- */
static PyTypeObject NodeType;
PyTypeObject *GMNode_Type = &NodeType;

/* One counter for the process, as PyTorch's at::sequence_number is one per thread: the GIL serialises recording,
 * and a backward orders only the nodes of its own graph. */
static uint64_t sequence_nr;

uint64_t gm_next_sequence_nr(void) { return sequence_nr++; }

static PyObject *node_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    GMNode *n = (GMNode *)type->tp_alloc(type, 0);
    if (!n) return NULL;
    n->scope = gm_current_scope(); /* where the forward runs: its backward is named after it */
    int acc = gm_accumulate_cls && PyType_IsSubtype(type, (PyTypeObject *)gm_accumulate_cls);
    n->seq = acc ? GM_SEQ_ACCUMULATE : gm_next_sequence_nr();
    return (PyObject *)n;
}

static void node_clear_meta(GMNode *n) {
    for (int i = 0; i < n->n_meta; i++) Py_CLEAR(n->meta[i].number);
    n->n_meta = 0;
}

static int node_traverse(GMNode *n, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(n));
    Py_VISIT(n->next_functions);
    Py_VISIT(n->saved);
    Py_VISIT(n->pre_hooks);
    Py_VISIT(n->needs_input_grad);
    Py_VISIT(n->variable);
    for (int i = 0; i < n->n_meta; i++) Py_VISIT(n->meta[i].number);
    return 0;
}

static int node_clear(GMNode *n) {
    Py_CLEAR(n->next_functions);
    Py_CLEAR(n->saved);
    Py_CLEAR(n->pre_hooks);
    Py_CLEAR(n->needs_input_grad);
    Py_CLEAR(n->variable);
    node_clear_meta(n);
    return 0;
}

static void node_dealloc(GMNode *n) {
    PyObject_GC_UnTrack(n);
    if (n->weakreflist) PyObject_ClearWeakRefs((PyObject *)n);
    /* A long chain of nodes (an RNN-like loop of 10^5 ops) would recurse once per node here; the trashcan
     * turns that recursion into a loop. */
    Py_TRASHCAN_BEGIN(n, node_dealloc)
    node_clear(n);
    Py_TYPE(n)->tp_free((PyObject *)n);
    Py_TRASHCAN_END
}

static PyObject *node_get_scope(GMNode *n, void *c) { return PyUnicode_FromString(n->scope ? n->scope : ""); }

static int node_set_scope(GMNode *n, PyObject *v, void *c) {
    if (!v || !PyUnicode_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "_scope must be a str");
        return -1;
    }
    const char *s = gm_intern(v);
    if (!s) return -1;
    n->scope = s;
    return 0;
}

static PyObject *node_get_released(GMNode *n, void *c) { return PyBool_FromLong(n->released); }

static int node_set_released(GMNode *n, PyObject *v, void *c) {
    int b = v ? PyObject_IsTrue(v) : 0;
    if (b < 0) return -1;
    n->released = b;
    return 0;
}

static int meta_of(node_meta *m, PyObject *x) {
    Py_CLEAR(m->number);
    if (gm_is_tensor(x)) {
        GMTensor *t = (GMTensor *)x;
        m->kind = META_TENSOR;
        m->ndim = t->ndim;
        m->dtype = t->dtype;
        m->host_0d = t->ndim == 0 && t->device.type == GM_DEV_CPU;
        memcpy(m->shape, t->shape, sizeof(int64_t) * t->ndim);
    } else if (PyFloat_Check(x) || PyLong_Check(x) || PyComplex_Check(x)) {
        m->kind = META_NUMBER;
        Py_INCREF(x);
        m->number = x;
    } else {
        m->kind = META_NONE;
    }
    return 0;
}

/* node._record_inputs(*args): keep each input's shape and dtype (a tensor) or value (a number) for backward. */
static PyObject *node_record_inputs(GMNode *n, PyObject *args) {
    Py_ssize_t k = PyTuple_GET_SIZE(args);
    if (k > NODE_MAX_META) k = NODE_MAX_META;
    node_clear_meta(n);
    for (Py_ssize_t i = 0; i < k; i++) meta_of(&n->meta[i], PyTuple_GET_ITEM(args, i));
    n->n_meta = (int)k;
    Py_RETURN_NONE;
}

static int meta_index(GMNode *n, PyObject *arg) {
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return -1;
    if (i < 0 || i >= NODE_MAX_META) {
        PyErr_Format(PyExc_IndexError, "input index %ld out of range", i);
        return -1;
    }
    return (int)i;
}

/* node._input_meta(i): (shape, dtype code, whether it was a 0-d CPU tensor) of input i when it was a tensor, else
 * None. */
static PyObject *node_input_meta(GMNode *n, PyObject *arg) {
    int i = meta_index(n, arg);
    if (i < 0) return NULL;
    if (i >= n->n_meta || n->meta[i].kind != META_TENSOR) Py_RETURN_NONE;
    node_meta *m = &n->meta[i];
    PyObject *shape = PyTuple_New(m->ndim);
    if (!shape) return NULL;
    for (int d = 0; d < m->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(m->shape[d]);
        if (!v) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, d, v);
    }
    return Py_BuildValue("(NiO)", shape, (int)m->dtype, m->host_0d ? Py_True : Py_False);
}

/* node._input_number(i): input i when it was a number, else None. */
static PyObject *node_input_number(GMNode *n, PyObject *arg) {
    int i = meta_index(n, arg);
    if (i < 0) return NULL;
    if (i >= n->n_meta || n->meta[i].kind != META_NUMBER) Py_RETURN_NONE;
    Py_INCREF(n->meta[i].number);
    return n->meta[i].number;
}

/* node._sequence_nr(): PyTorch's grad_fn._sequence_nr(), the order nodes were made (AccumulateGrad: 2**64 - 1). */
static PyObject *node_sequence_nr(GMNode *n, PyObject *unused) { return PyLong_FromUnsignedLongLong(n->seq); }

static PyMethodDef node_methods[] = {
    {"_sequence_nr", (PyCFunction)node_sequence_nr, METH_NOARGS,
     "Creation order (PyTorch's sequence_nr); backward runs the latest ready node first."},
    {"_record_inputs", (PyCFunction)node_record_inputs, METH_VARARGS,
     "Keep each input's shape and dtype (tensors) or value (numbers) for backward."},
    {"_input_meta", (PyCFunction)node_input_meta, METH_O,
     "(shape, dtype code, 0-d on the CPU) of tensor input i, else None."},
    {"_input_number", (PyCFunction)node_input_number, METH_O, "Number input i, else None."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef node_members[] = {
    {"_edges", T_OBJECT, offsetof(GMNode, next_functions), 0,
     "(node, output_nr) per input, or None (Node.next_functions gives PyTorch's form)."},
    {"_saved", T_OBJECT, offsetof(GMNode, saved), 0, "Saved tensors (tuple of _SavedTensor), or None."},
    {"_pre_hooks", T_OBJECT, offsetof(GMNode, pre_hooks), 0,
     "Gradient hooks: {output_nr: [tensor hook], -1: [node pre-hook], -2: [node post-hook]} (autograd_hooks.py)."},
    {"needs_input_grad", T_OBJECT, offsetof(GMNode, needs_input_grad), 0, "Whether input i needs a gradient."},
    /* T_OBJECT_EX: other nodes have no `variable` at all (torchviz tells the accumulators by hasattr) */
    {"variable", T_OBJECT_EX, offsetof(GMNode, variable), 0, "AccumulateGrad: the leaf tensor."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef node_getset[] = {
    {"_scope", (getter)node_get_scope, (setter)node_set_scope, "Allocation scope of the forward.", NULL},
    {"_released", (getter)node_get_released, (setter)node_set_released, "Saved tensors freed by backward.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject NodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpumemnet._C.Node",
    .tp_basicsize = sizeof(GMNode),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A recorded op of the autograd graph (the C part of gpumemnet.autograd.Node).",
    .tp_new = node_new,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_traverse = (traverseproc)node_traverse,
    .tp_clear = (inquiry)node_clear,
    .tp_weaklistoffset = offsetof(GMNode, weakreflist),
    .tp_methods = node_methods,
    .tp_members = node_members,
    .tp_getset = node_getset,
};

/* ---- what Python registers (_autograd_setup) --------------------------------------------------------------- */
PyObject *gm_grad_mode;           /* the ContextVar of grad mode (_core/state.py) */
PyObject *gm_accumulate_cls;       /* autograd.AccumulateGrad */
static PyObject *thread_state;    /* state (its saved_tensors_hooks list) */
static PyObject *label_saved;     /* autograd._label_saved(t) */
static PyObject *fast_cls[GM_EW_NBINARY]; /* op code -> Function subclass recorded here (Add, Sub, Mul, Div) */
static int fast_saves[GM_EW_NBINARY];     /* 0: nothing, 1: a and b, 2: a, b and the output */
static PyObject *fallback_binary; /* tensor._binary_slot(op, a, b): the operator in Python */
static PyObject *fallback_rsub, *fallback_rdiv; /* tensor._rsub(self, o), tensor._rtruediv(self, o) */

/* ---- saved tensors ------------------------------------------------------------------------------------------ */
/* What a node keeps of a tensor for its backward: an alias sharing the storage but not the autograd metadata
 * (saving an op's own output would otherwise make a cycle output -> grad_fn -> saved output that only the GC
 * could free), the storage's version when it was saved (an in-place write since makes backward wrong: refused),
 * or, under saved_tensors_hooks, whatever the pack hook made of the alias (checkpointing, offload). */
typedef struct {
    PyObject_HEAD
    PyObject *packed;
    PyObject *unpack; /* None, or the unpack hook */
    void *storage;
    int64_t version;
} GMSaved;

static PyTypeObject SavedType;

static int saved_traverse(GMSaved *s, visitproc visit, void *arg) {
    Py_VISIT(s->packed);
    Py_VISIT(s->unpack);
    return 0;
}

static int saved_clear(GMSaved *s) {
    if (!s->unpack && s->packed) ((GMTensor *)s->packed)->storage->saved--; /* the alias is kept no more */
    Py_CLEAR(s->packed);
    Py_CLEAR(s->unpack);
    return 0;
}

static void saved_dealloc(GMSaved *s) {
    PyObject_GC_UnTrack(s);
    saved_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *saved_make(GMTensor *t) {
    GMSaved *s = PyObject_GC_New(GMSaved, &SavedType);
    if (!s) return NULL;
    s->packed = s->unpack = NULL;
    s->storage = t->storage;
    s->version = t->storage->version;
    PyObject_GC_Track(s);
    PyObject *alias = (PyObject *)gm_view(t, t->ndim, t->shape, t->strides, t->offset);
    if (!alias) goto fail;
    if (t->grad_fn && t->grad_fn != Py_None && gm_block_category(t->storage->block) == GM_CAT_OTHER) {
        /* an intermediate kept alive for backward: what checkpointing saves */
        gm_block_set_category(t->storage->block, GM_CAT_ACTIVATION);
        PyObject *r = label_saved ? PyObject_CallOneArg(label_saved, (PyObject *)t) : (Py_INCREF(Py_None), Py_None);
        if (!r) goto fail_alias;
        Py_DECREF(r);
    }
    PyObject *hooks = thread_state ? PyObject_GetAttrString(thread_state, "saved_tensors_hooks") : NULL;
    if (thread_state && !hooks) goto fail_alias;
    if (hooks && PyList_Check(hooks) && PyList_GET_SIZE(hooks) > 0) {
        PyObject *pair = PyList_GET_ITEM(hooks, PyList_GET_SIZE(hooks) - 1);
        PyObject *pack, *unpack;
        if (!PyArg_ParseTuple(pair, "OO:saved_tensors_hooks", &pack, &unpack)) {
            Py_DECREF(hooks);
            goto fail_alias;
        }
        Py_INCREF(unpack);
        s->unpack = unpack;
        s->packed = PyObject_CallOneArg(pack, alias);
        Py_DECREF(alias);
        Py_DECREF(hooks);
        if (!s->packed) goto fail;
    } else {
        Py_XDECREF(hooks);
        s->packed = alias;
        t->storage->saved++;
    }
    return (PyObject *)s;
fail_alias:
    Py_DECREF(alias);
fail:
    Py_DECREF(s);
    return NULL;
}

static PyObject *saved_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *t;
    if (!PyArg_ParseTuple(args, "O!:_SavedTensor", GMTensor_Base, &t)) return NULL;
    return saved_make((GMTensor *)t);
}

/* saved.get(op_name): the tensor for backward. */
static PyObject *saved_get(GMSaved *s, PyObject *op_name) {
    if (s->unpack && s->unpack != Py_None) {
        /* What an unpack hook makes (a checkpoint's recomputed forward, an offloaded tensor brought back) is
         * forward state, not a gradient: it is made under "other", as in the forward, and re-tagged "activation"
         * when saved, instead of under backward's "activation_grad". */
        int prev = gm_swap_category(GM_CAT_OTHER);
        PyObject *r = PyObject_CallOneArg(s->unpack, s->packed);
        gm_swap_category(prev);
        return r;
    }
    GMTensor *t = (GMTensor *)s->packed;
    if (t->storage->version != s->version) {
        return PyErr_Format(PyExc_RuntimeError,
                            "one of the tensors needed to compute the gradient of %S has been modified by an in-place "
                            "operation (its version is %lld, expected %lld); use the out-of-place form, or clone() "
                            "the tensor before modifying it",
                            op_name, (long long)t->storage->version, (long long)s->version);
    }
    Py_INCREF(t);
    return (PyObject *)t;
}

static PyObject *saved_get_storage(GMSaved *s, void *c) { return PyLong_FromVoidPtr(s->storage); }

static PyMethodDef saved_methods[] = {
    {"get", (PyCFunction)saved_get, METH_O, "The saved tensor (unpacked, version-checked) for op_name's backward."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef saved_members[] = {
    {"packed", T_OBJECT, offsetof(GMSaved, packed), READONLY, "The alias, or what the pack hook made of it."},
    {"unpack", T_OBJECT, offsetof(GMSaved, unpack), READONLY, "The unpack hook, or None."},
    {"version", T_LONGLONG, offsetof(GMSaved, version), READONLY, "The storage's version when saved."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef saved_getset[] = {
    {"storage", (getter)saved_get_storage, NULL, "Identity of the saved storage (Tensor._storage_id).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SavedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpumemnet._C.SavedTensor",
    .tp_basicsize = sizeof(GMSaved),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A tensor a node keeps for its backward (autograd._SavedTensor).",
    .tp_new = saved_new,
    .tp_dealloc = (destructor)saved_dealloc,
    .tp_traverse = (traverseproc)saved_traverse,
    .tp_clear = (inquiry)saved_clear,
    .tp_methods = saved_methods,
    .tp_members = saved_members,
    .tp_getset = saved_getset,
};

static int grad_enabled(void) {
    PyObject *v;
    if (!gm_grad_mode) return 1;
    if (PyContextVar_Get(gm_grad_mode, NULL, &v) < 0) return -1;
    int on = v == Py_True ? 1 : (v ? PyObject_IsTrue(v) : 1);
    Py_XDECREF(v);
    return on;
}

/* The edge to t's gradient: (grad_fn, output_nr), or (its AccumulateGrad, 0) for a leaf. The leaf holds its
 * accumulator weakly (the graph holds it strongly), as in PyTorch: a strong link both ways would be a cycle. */
static PyObject *edge_of(GMTensor *t) {
    if (t->grad_fn && t->grad_fn != Py_None) return Py_BuildValue("(Oi)", t->grad_fn, t->output_nr);
    PyObject *acc = NULL;
    if (t->grad_acc && PyWeakref_Check(t->grad_acc)) acc = PyWeakref_GetObject(t->grad_acc);
    if (acc && acc != Py_None) return Py_BuildValue("(Oi)", acc, 0);
    /* A new accumulator, made as AccumulateGrad.__init__ makes it (without its Python frame: a leaf in a graph
     * that is made and freed per op gets one each time, as in PyTorch) */
    PyTypeObject *cls = (PyTypeObject *)gm_accumulate_cls;
    if (!(acc = cls->tp_alloc(cls, 0))) return NULL;
    GMNode *an = (GMNode *)acc;
    an->scope = gm_current_scope();
    an->seq = GM_SEQ_ACCUMULATE;
    Py_INCREF(t);
    an->variable = (PyObject *)t;
    if (!(an->next_functions = PyTuple_New(0))) {
        Py_DECREF(acc);
        return NULL;
    }
    PyObject *ref = PyWeakref_NewRef(acc, NULL);
    if (!ref) {
        Py_DECREF(acc);
        return NULL;
    }
    Py_XSETREF(t->grad_acc, ref);
    PyObject *e = Py_BuildValue("(Oi)", acc, 0);
    Py_DECREF(acc);
    return e;
}

/* _C._edge_of(t): autograd._edge_of, the one place accumulators are made. */
static PyObject *py_edge_of(PyObject *self, PyObject *t) {
    if (!gm_is_tensor(t)) {
        PyErr_Format(PyExc_TypeError, "_edge_of: expected a Tensor, got %s", Py_TYPE(t)->tp_name);
        return NULL;
    }
    if (!gm_accumulate_cls) {
        PyErr_SetString(PyExc_RuntimeError, "_edge_of: autograd is not set up (_autograd_setup)");
        return NULL;
    }
    return edge_of((GMTensor *)t);
}

static PyObject *saved_of(PyObject *x) {
    if (!gm_is_tensor(x)) Py_RETURN_NONE;
    return saved_make((GMTensor *)x);
}

/* out = a op b recorded as a node of fast_cls[op] (the same node Function.apply would make; its Python
 * backward runs unchanged). */
static PyObject *record_binary(int op, PyObject *a, PyObject *b) {
    PyObject *out = gm_binary(op, a, b);
    if (!out) return NULL;
    if (!gm_is_tensor(out) || ((GMTensor *)out)->dtype > GM_BF16) return out; /* no float output: no node */
    PyTypeObject *cls = (PyTypeObject *)fast_cls[op];
    GMNode *n = (GMNode *)cls->tp_alloc(cls, 0);
    PyObject *edges = PyList_New(2), *needs = PyList_New(2);
    if (!n || !edges || !needs) goto fail;
    n->scope = gm_current_scope();
    n->seq = gm_next_sequence_nr();
    PyObject *in[2] = {a, b};
    int need[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        PyObject *e = Py_None;
        if (gm_is_tensor(in[i]) && ((GMTensor *)in[i])->requires_grad) {
            if (!(e = edge_of((GMTensor *)in[i]))) goto fail;
        } else {
            Py_INCREF(e);
        }
        PyList_SET_ITEM(edges, i, e);
        need[i] = e != Py_None;
        PyObject *nd = need[i] ? Py_True : Py_False;
        Py_INCREF(nd);
        PyList_SET_ITEM(needs, i, nd);
        meta_of(&n->meta[i], in[i]);
    }
    n->n_meta = 2;
    n->next_functions = edges;
    n->needs_input_grad = needs;
    edges = needs = NULL;
    /* What the backward reads, as PyTorch's MulBackward0 / DivBackward0 keep it: a product each operand only for
     * the other's gradient (x * mask keeps the mask, not x), a quotient its divisor, and its output only for the
     * divisor's gradient. functions.Binary.forward keeps the same. */
    int keep[3] = {1, 1, fast_saves[op] == 2};
    if (op == GM_EW_MUL) {
        keep[0] = need[1];
        keep[1] = need[0];
    } else if (op == GM_EW_DIV) {
        keep[0] = 0;
        keep[2] = need[1];
    }
    if (fast_saves[op]) {
        PyObject *s = PyTuple_New(3);
        if (!s) goto fail;
        n->saved = s;
        for (int i = 0; i < 3; i++) {
            PyObject *st = !keep[i] ? (Py_INCREF(Py_None), Py_None) : i < 2 ? saved_of(in[i]) : saved_of(out);
            if (!st) goto fail;
            PyTuple_SET_ITEM(s, i, st);
        }
    }
    GMTensor *o = (GMTensor *)out;
    o->requires_grad = 1;
    Py_XSETREF(o->grad_fn, (PyObject *)n);
    o->output_nr = 0;
    if (fast_saves[op] == 2 && keep[2] && gm_block_category(o->storage->block) == GM_CAT_OTHER) {
        /* the output its own backward keeps is an activation (as _mark_output tags it) */
        gm_block_set_category(o->storage->block, GM_CAT_ACTIVATION);
        PyObject *r = PyObject_CallOneArg(label_saved, out);
        if (!r) {
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(r);
    }
    return out;
fail:
    Py_XDECREF(edges);
    Py_XDECREF(needs);
    Py_XDECREF((PyObject *)n);
    Py_DECREF(out);
    return NULL;
}

static int is_plain_number(PyObject *x) { return PyFloat_CheckExact(x) || PyLong_CheckExact(x); }

/* self op o for a tensor self: the whole operator, in C when the operand is a tensor or a plain number. */
static PyObject *tensor_binary(int op, PyObject *self, PyObject *o) {
    int fast = gm_is_tensor(o) || is_plain_number(o);
    if (fast) {
        int on = grad_enabled();
        if (on < 0) return NULL;
        int need = on && (((GMTensor *)self)->requires_grad || (gm_is_tensor(o) && ((GMTensor *)o)->requires_grad));
        if (!need) return gm_binary(op, self, o);
        if (fast_cls[op]) return record_binary(op, self, o);
    }
    if (!fallback_binary) Py_RETURN_NOTIMPLEMENTED;
    PyObject *opo = PyLong_FromLong(op);
    if (!opo) return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(fallback_binary, opo, self, o, NULL);
    Py_DECREF(opo);
    return r;
}

static PyObject *reflected(PyObject *fn, PyObject *self, PyObject *o) {
    if (!fn) Py_RETURN_NOTIMPLEMENTED;
    return PyObject_CallFunctionObjArgs(fn, self, o, NULL);
}

/* Commutative: number + tensor is tensor + number (as __radd__ was). */
static PyObject *nb_add(PyObject *x, PyObject *y) {
    return gm_is_tensor(x) ? tensor_binary(GM_EW_ADD, x, y) : tensor_binary(GM_EW_ADD, y, x);
}

static PyObject *nb_mul(PyObject *x, PyObject *y) {
    return gm_is_tensor(x) ? tensor_binary(GM_EW_MUL, x, y) : tensor_binary(GM_EW_MUL, y, x);
}

static PyObject *nb_sub(PyObject *x, PyObject *y) {
    return gm_is_tensor(x) ? tensor_binary(GM_EW_SUB, x, y) : reflected(fallback_rsub, y, x);
}

static PyObject *nb_div(PyObject *x, PyObject *y) {
    return gm_is_tensor(x) ? tensor_binary(GM_EW_DIV, x, y) : reflected(fallback_rdiv, y, x);
}

/* _autograd_setup(grad_mode, AccumulateGrad, state, _label_saved, fast, binary, rsub, rtruediv):
 * fast is {op code: (Function subclass, saves)} with saves 0 (nothing), 1 (a, b) or 2 (a, b, output). */
static PyObject *py_autograd_setup(PyObject *self, PyObject *args) {
    PyObject *gmode, *acc, *st, *lab, *fast, *fb, *frs, *frd;
    if (!PyArg_ParseTuple(args, "OOOOO!OOO:_autograd_setup", &gmode, &acc, &st, &lab, &PyDict_Type, &fast,
                          &fb, &frs, &frd))
        return NULL;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(fast, &pos, &k, &v)) {
        long op = PyLong_AsLong(k);
        PyObject *cls;
        int saves;
        if (op < 0 || op >= GM_EW_NBINARY || !PyArg_ParseTuple(v, "Oi", &cls, &saves) || !PyType_Check(cls) ||
            !PyType_IsSubtype((PyTypeObject *)cls, &NodeType)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_autograd_setup: bad fast-path entry");
            return NULL;
        }
        Py_INCREF(cls);
        Py_XSETREF(fast_cls[op], cls);
        fast_saves[op] = saves;
    }
    if (!PyType_Check(acc) || !PyType_IsSubtype((PyTypeObject *)acc, &NodeType)) {
        PyErr_SetString(PyExc_TypeError, "_autograd_setup: AccumulateGrad must subclass _C.Node");
        return NULL;
    }
    PyObject **slots[] = {&gm_grad_mode, &gm_accumulate_cls, &thread_state, &label_saved, &fallback_binary,
                          &fallback_rsub, &fallback_rdiv};
    PyObject *vals[] = {gmode, acc, st, lab, fb, frs, frd};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        Py_INCREF(vals[i]);
        Py_XSETREF(*slots[i], vals[i]);
    }
    Py_RETURN_NONE;
}

PyMethodDef gm_autograd_node_methods[] = {
    {"_edge_of", py_edge_of, METH_O, "The edge to a tensor's gradient: (grad_fn, output_nr) or (AccumulateGrad, 0)."},
    {"_autograd_setup", py_autograd_setup, METH_VARARGS,
     "Register autograd's Python parts with the C recording path (called once by _core/tensor.py)."},
    {NULL, NULL, 0, NULL},
};

int gm_autograd_node_init(PyObject *module) {
    gm_tensor_number_methods.nb_add = nb_add;
    gm_tensor_number_methods.nb_subtract = nb_sub;
    gm_tensor_number_methods.nb_multiply = nb_mul;
    gm_tensor_number_methods.nb_true_divide = nb_div;
    if (PyType_Ready(&NodeType) < 0 || PyType_Ready(&SavedType) < 0) return -1;
    Py_INCREF(&SavedType);
    if (PyModule_AddObject(module, "SavedTensor", (PyObject *)&SavedType) < 0) return -1;
    Py_INCREF(&NodeType);
    if (PyModule_AddObject(module, "Node", (PyObject *)&NodeType) < 0) return -1;
    return 0;
}
