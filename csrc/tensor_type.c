/* csrc/tensor_type.c — the Python face of the Tensor: the TensorBase type (lifetime, attributes, the autograd
 * slots Python reads, item()), the creation functions that run no kernel (empty, arange) and the registration of
 * the Python subclass. The object underneath (storage, gm_empty, gm_view) is tensor.c; views are tensor_views.c;
 * numpy() is numpy.c. This file sits above them all (and above transfer.c: item() and arange() on CUDA go
 * through the host), which is why it, not tensor.c, makes the type. */
#include "gm.h"
#include "../kernels/elementwise_ops.h" /* gm_cast_any: arange into a storage-only integer dtype */
#include <math.h>
#include <structmember.h>

static int tensor_traverse(GMTensor *self, visitproc visit, void *arg) {
    Py_VISIT(self->grad);
    Py_VISIT(self->grad_fn);
    Py_VISIT(self->hooks);
    Py_VISIT(self->post_acc_hooks);
    Py_VISIT(self->name);
    Py_VISIT(self->grad_acc);
    Py_VISIT(self->base_ref);
    return 0;
}

static int tensor_clear(GMTensor *self) {
    Py_CLEAR(self->grad);
    Py_CLEAR(self->grad_fn);
    Py_CLEAR(self->hooks);
    Py_CLEAR(self->post_acc_hooks);
    Py_CLEAR(self->name);
    Py_CLEAR(self->grad_acc);
    Py_CLEAR(self->base_ref);
    return 0;
}

static void tensor_dealloc(GMTensor *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist) PyObject_ClearWeakRefs((PyObject *)self);
    tensor_clear(self);
    gm_storage_decref(self->storage);
    self->storage = NULL;
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free((PyObject *)self);
}

static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyErr_SetString(PyExc_TypeError, "create tensors with gpumemnet.tensor(...), zeros, empty, ... "
                    "rather than calling the class");
    return NULL;
}

/* ---- Size: the type of shape ------------------------------------------------------------------------- */
/* x.shape is a gpumemnet.Size (torch.Size), a tuple subclass, in two halves. The public class is Python's
 * (_core/size.py: the constructor's checks and PyTorch's errors, numel, repr, pickling), registered by
 * _set_size_class; it derives from SizeBase, made here, which holds what internals use on every shape and must
 * stay about as fast as a tuple's: indexing (a slice is a Size), `+` and `*` (Sizes too). A Python __getitem__
 * would put a Python call in every `x.shape[0]`. C makes the instances of the registered class itself, as
 * CPython's own tuple-subclass constructor does (tp_alloc of n items, then PyTuple_SET_ITEM): x.shape calls no
 * Python code. (Defining the whole class in C would need its constructor, repr and pickling there too, for no
 * speed: instances cost the same either way once the class's dealloc is the tuple's, see _set_size_class.)
 * Before registration (never, once gpumemnet is imported) C makes SizeBase instances. */
static PyTypeObject SizeBaseType;
static PyTypeObject *size_class = &SizeBaseType;

static PyObject *size_of(int ndim, const int64_t *dims) {
    PyObject *t = size_class->tp_alloc(size_class, ndim);
    for (int i = 0; t && i < ndim; i++) {
        PyObject *v = PyLong_FromLongLong(dims[i]);
        if (!v) Py_CLEAR(t); /* the items not set yet are NULL, which the tuple's dealloc skips */
        else PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* Whether every item of a tuple is an int in int64's range, as in every Size (the class converts or refuses the
 * rest); a Size's are not looked at. */
static int size_items_ok(PyObject *t) {
    if (Py_TYPE(t) == size_class) return 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        PyObject *v = PyTuple_GET_ITEM(t, i);
        int overflow = 1;
        if (PyLong_CheckExact(v)) PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) return 0;
    }
    return 1;
}

/* The Size of a's items then b's (b may be NULL), both tuples whose items are ints (size_items_ok). */
static PyObject *size_join(PyObject *a, PyObject *b) {
    const Py_ssize_t na = PyTuple_GET_SIZE(a), nb = b ? PyTuple_GET_SIZE(b) : 0;
    PyObject *t = size_class->tp_alloc(size_class, na + nb);
    for (Py_ssize_t i = 0; t && i < na; i++) PyTuple_SET_ITEM(t, i, Py_NewRef(PyTuple_GET_ITEM(a, i)));
    for (Py_ssize_t i = 0; t && i < nb; i++) PyTuple_SET_ITEM(t, na + i, Py_NewRef(PyTuple_GET_ITEM(b, i)));
    return t;
}

static PyObject *size_subscript(PyObject *self, PyObject *key) {
    if (!PySlice_Check(key)) return PyTuple_Type.tp_as_mapping->mp_subscript(self, key); /* an item */
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
    const Py_ssize_t n = PySlice_AdjustIndices(PyTuple_GET_SIZE(self), &start, &stop, step);
    PyObject *t = size_class->tp_alloc(size_class, n);
    for (Py_ssize_t i = 0; t && i < n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(PyTuple_GET_ITEM(self, start + i * step)));
    return t;
}

static PyObject *size_repeat(PyObject *self, Py_ssize_t n) {
    PyObject *items = PyTuple_Type.tp_as_sequence->sq_repeat(self, n); /* a tuple: its checks and errors */
    PyObject *t = items ? size_join(items, NULL) : NULL;
    Py_XDECREF(items);
    return t;
}

/* size + tuple and tuple + size (torch.Size's __radd__) are Sizes, made by the class where an item is not an int
 * (it converts one, or raises PyTorch's error). size + x for any other x is x's __radd__'s result, or PyTorch's
 * error where it has none (raised here: the Python class has no tuple concatenation slot to fall back on, its
 * __add__ being this one); x + size is x's __add__'s (a list's says it concatenates lists only). */
static PyObject *size_add(PyObject *a, PyObject *b) {
    if (!PyTuple_Check(a)) Py_RETURN_NOTIMPLEMENTED;
    if (!PyTuple_Check(b)) {
        binaryfunc radd = Py_TYPE(b)->tp_as_number ? Py_TYPE(b)->tp_as_number->nb_add : NULL;
        PyObject *r = radd ? radd(a, b) : Py_NewRef(Py_NotImplemented);
        if (r != Py_NotImplemented) return r;
        Py_DECREF(r);
        return PyErr_Format(PyExc_TypeError, "can only concatenate tuple (not %.200s) to gpumemnet.Size",
                            Py_TYPE(b)->tp_name);
    }
    if (size_items_ok(a) && size_items_ok(b)) return size_join(a, b);
    PyObject *items = PyTuple_Type.tp_as_sequence->sq_concat(a, b);
    PyObject *t = items ? PyObject_CallOneArg((PyObject *)size_class, items) : NULL;
    Py_XDECREF(items);
    return t;
}

static PyMappingMethods size_mapping = {.mp_subscript = size_subscript};
static PySequenceMethods size_sequence = {.sq_repeat = size_repeat};
static PyNumberMethods size_number = {.nb_add = size_add};

static PyTypeObject SizeBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpumemnet._C.SizeBase",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C part of gpumemnet.Size: a tuple whose slices, + and * are Sizes.",
    .tp_as_mapping = &size_mapping,
    .tp_as_sequence = &size_sequence,
    .tp_as_number = &size_number,
    /* tp_base (tuple) is set at init; the size, dealloc, hash, comparison and the rest are inherited from it */
};

/* The registered class's dealloc: the tuple's, then the reference to the class (a heap type) its instances
 * hold. The class statement gave it the generic one of Python classes (subtype_dealloc), whose work (finalizer,
 * __dict__, weakrefs, slots) a Size has none of, and which cost about 10 ns of x.shape's 50 (CPython 3.11,
 * measured); a Size class that could have them is refused. A subclass's subtype_dealloc would call this one and
 * then release the class a second time, so the class is made final, as torch.Size is ("not an acceptable base
 * type"). */
static void size_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyTuple_Type.tp_dealloc(self);
    Py_DECREF(tp);
}

static PyObject *py_set_size_class(PyObject *self, PyObject *cls) {
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (!PyType_Check(cls) || !PyType_IsSubtype(tp, &SizeBaseType) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        tp->tp_basicsize != SizeBaseType.tp_basicsize || tp->tp_dictoffset || tp->tp_weaklistoffset ||
        tp->tp_finalize || tp->tp_del || tp->tp_base != &SizeBaseType) {
        PyErr_SetString(PyExc_TypeError, "_set_size_class: expected a class deriving directly from SizeBase, "
                        "declaring __slots__ = () and no __del__");
        return NULL;
    }
    tp->tp_dealloc = size_dealloc;
    tp->tp_flags &= ~Py_TPFLAGS_BASETYPE;
    Py_INCREF(cls); /* a class registered before (a reload) lives on in its instances, which keep it */
    Py_XDECREF(size_class == &SizeBaseType ? NULL : (PyObject *)size_class);
    size_class = tp;
    Py_RETURN_NONE;
}

/* ---- attributes ----------------------------------------------------------------------------------------- */
static PyObject *get_shape(GMTensor *self, void *c) { return size_of(self->ndim, self->shape); }

static PyObject *get_strides(GMTensor *self, void *c) {
    PyObject *t = PyTuple_New(self->ndim);
    for (int i = 0; t && i < self->ndim; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->strides[i]));
    return t;
}

static PyObject *get_dtype(GMTensor *self, void *c) { return PyLong_FromLong(self->dtype); }
static PyObject *get_device(GMTensor *self, void *c) {
    char buf[16];
    return PyUnicode_FromString(gm_device_str(self->device, buf));
}
static PyObject *get_ndim(GMTensor *self, void *c) { return PyLong_FromLong(self->ndim); }
static PyObject *get_offset(GMTensor *self, void *c) { return PyLong_FromLongLong(self->offset); }
static PyObject *get_version(GMTensor *self, void *c) { return PyLong_FromLongLong(self->storage->version); }
static PyObject *get_storage_id(GMTensor *self, void *c) { return PyLong_FromVoidPtr(self->storage); }
static PyObject *get_storage_nbytes(GMTensor *self, void *c) { return PyLong_FromSize_t(self->storage->nbytes); }
static PyObject *get_storage_refs(GMTensor *self, void *c) { return PyLong_FromLongLong((long long)self->storage->refcount); }
static PyObject *get_saved_refs(GMTensor *self, void *c) {
    return PyLong_FromLongLong((long long)self->storage->saved);
}
static PyObject *get_borrowed(GMTensor *self, void *c) { return PyBool_FromLong(self->storage->borrowed != NULL); }
static PyObject *get_data_ptr(GMTensor *self, void *c) { return PyLong_FromVoidPtr(gm_tensor_data(self)); }
static PyObject *get_alloc_serial(GMTensor *self, void *c) {
    return PyLong_FromLongLong(gm_block_serial(self->storage->block));
}
static PyObject *get_is_meta(GMTensor *self, void *c) { return PyBool_FromLong(self->device.type == GM_DEV_META); }
static PyObject *get_is_pinned(GMTensor *self, void *c) {
    return PyBool_FromLong(gm_block_is_pinned(self->storage->block));
}

static PyObject *get_category(GMTensor *self, void *c) {
    return PyUnicode_FromString(gm_category_names[gm_block_category(self->storage->block)]);
}

static int set_category(GMTensor *self, PyObject *value, void *c) {
    const char *name = value && PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : NULL;
    for (int i = 0; name && i < GM_NCAT; i++) {
        if (strcmp(name, gm_category_names[i]) == 0) {
            gm_block_set_category(self->storage->block, i);
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "_category: expected one of parameter, gradient, optimizer, activation, "
                 "workspace, input, other; got %R", value);
    return -1;
}

static PyObject *get_name(GMTensor *self, void *c) { return Py_NewRef(self->name ? self->name : Py_None); }

/* The name also labels the storage's block, so an out-of-memory report can list "fc1.weight 2.17 GiB". */
static int set_name(GMTensor *self, PyObject *value, void *c) {
    if (value && value != Py_None) {
        if (!PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError, "_name: expected a str or None, got %.100s", Py_TYPE(value)->tp_name);
            return -1;
        }
        const char *label = gm_intern(value);
        if (!label) return -1;
        gm_block_set_label(self->storage->block, label);
    }
    PyObject *old = self->name;
    self->name = (value && value != Py_None) ? Py_NewRef(value) : NULL;
    Py_XDECREF(old);
    return 0;
}

static PyObject *get_requires_grad(GMTensor *self, void *c) { return PyBool_FromLong(self->requires_grad); }

static int set_requires_grad(GMTensor *self, PyObject *value, void *c) {
    int v = value ? PyObject_IsTrue(value) : 0;
    if (v < 0) return -1;
    if (v && !gm_dtype_is_float(self->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "requires_grad: only tensors of floating point dtype can require "
                     "gradients, this one is %s", gm_dtype_name(self->dtype));
        return -1;
    }
    self->requires_grad = v;
    return 0;
}

static PyObject *get_grad(GMTensor *self, void *c) {
    if (!self->grad && self->grad_fn && self->grad_fn != Py_None && !self->retains_grad &&
        PyErr_WarnEx(PyExc_UserWarning,  /* PyTorch's words: a non-leaf's .grad is never filled by backward */
                     "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                     "won't be populated during autograd.backward(). If you indeed want the .grad field to be "
                     "populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the "
                     "non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
                     "github.com/pytorch/pytorch/pull/30531 for more informations.", 1) < 0)
        return NULL;
    return Py_NewRef(self->grad ? self->grad : Py_None);
}

static int set_grad(GMTensor *self, PyObject *value, void *c) {
    if (value && value != Py_None) {
        if (!gm_is_tensor(value)) {
            PyErr_Format(PyExc_TypeError, "grad: expected a Tensor or None, got %.100s", Py_TYPE(value)->tp_name);
            return -1;
        }
        GMTensor *g = (GMTensor *)value;
        int same = g->ndim == self->ndim && g->dtype == self->dtype && gm_device_eq(g->device, self->device);
        for (int i = 0; same && i < self->ndim; i++) same = g->shape[i] == self->shape[i];
        if (!same) {
            char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "grad: assigned gradient of shape %s and dtype %s does not match the "
                         "tensor's shape %s and dtype %s", gm_shape_str(g->ndim, g->shape, a),
                         gm_dtype_name(g->dtype), gm_shape_str(self->ndim, self->shape, b),
                         gm_dtype_name(self->dtype));
            return -1;
        }
    }
    PyObject *old = self->grad;
    self->grad = (value && value != Py_None) ? Py_NewRef(value) : NULL;
    Py_XDECREF(old);
    return 0;
}

/* Tensor._base: the tensor this one is a view of while it lives (PyTorch keeps it alive; here a view does not),
 * else None. Setting None forgets it (detach() and .data make views that PyTorch does not count as views). */
static PyObject *get_base(GMTensor *self, void *closure) {
    PyObject *b = self->base_ref ? PyWeakref_GET_OBJECT(self->base_ref) : Py_None;
    return Py_NewRef(b);
}

static int set_base(GMTensor *self, PyObject *value, void *closure) {
    if (value != Py_None) {
        PyErr_SetString(PyExc_AttributeError, "_base: only None can be set (it forgets the base)");
        return -1;
    }
    Py_CLEAR(self->base_ref);
    return 0;
}

/* Whether this tensor was made as a view (its base alive or not): not a root, nor an alias whose base was
 * forgotten (detach(), .data). */
static PyObject *get_has_base(GMTensor *self, void *closure) { return PyBool_FromLong(self->base_ref != NULL); }

static PyGetSetDef tensor_getset[] = {
    {"_base", (getter)get_base, (setter)set_base, "The tensor this is a view of (alive), else None.", NULL},
    {"_has_base", (getter)get_has_base, NULL, "Made as a view (its base alive or not), not forgotten.", NULL},
    {"shape", (getter)get_shape, NULL, "The size of each dimension, as a gpumemnet.Size.", NULL},
    {"_strides", (getter)get_strides, NULL, "Strides in elements.", NULL},
    {"_dtype", (getter)get_dtype, NULL, "dtype code.", NULL},
    {"_device", (getter)get_device, NULL, "Device string.", NULL},
    {"ndim", (getter)get_ndim, NULL, "Number of dimensions.", NULL},
    {"_offset", (getter)get_offset, NULL, "Offset into the storage, in elements.", NULL},
    {"_version", (getter)get_version, NULL, "In-place write counter of the storage.", NULL},
    {"_storage_id", (getter)get_storage_id, NULL, "Identity of the storage (equal for views).", NULL},
    {"_storage_nbytes", (getter)get_storage_nbytes, NULL, "Bytes of the storage.", NULL},
    {"_storage_refs", (getter)get_storage_refs, NULL, "Tensors (views, saved aliases) sharing the storage.", NULL},
    {"_saved_refs", (getter)get_saved_refs, NULL, "Of _storage_refs, the aliases autograd keeps for a backward.",
     NULL},
    {"_borrowed", (getter)get_borrowed, NULL, "True when the memory is a NumPy array's (from_numpy), which that "
     "array still reads and writes.", NULL},
    {"_data_ptr", (getter)get_data_ptr, NULL, "Address of the first element.", NULL},
    {"_alloc_serial", (getter)get_alloc_serial, NULL, "When the storage's block was allocated (1, 2, ... per "
     "device): the order tensors were made in.", NULL},
    {"is_meta", (getter)get_is_meta, NULL, "True for meta (shape-only) tensors.", NULL},
    {"_is_pinned", (getter)get_is_pinned, NULL, "True when the storage is pinned host memory (pin_memory).", NULL},
    {"_category", (getter)get_category, (setter)set_category, "Memory category of the storage.", NULL},
    {"requires_grad", (getter)get_requires_grad, (setter)set_requires_grad, "Whether autograd records ops.", NULL},
    {"grad", (getter)get_grad, (setter)set_grad, "Accumulated gradient, or None.", NULL},
    {"_name", (getter)get_name, (setter)set_name, "Name used in memory reports (labels the storage).", NULL},
    {"_graph_view", (getter)gm_get_graph_view, (setter)gm_set_graph_view,
     "Made by a recorded view of a tensor in a graph (listed on its storage when its root is not a leaf).", NULL},
    {"_graph_views", (getter)gm_get_graph_views, NULL,
     "The live views listed on this tensor's storage (recorded ones of a non-leaf root, any of a plain root).",
     NULL},
    {"_root_has_views", (getter)gm_get_root_has_views, NULL,
     "Whether this tensor is a root (no view) whose storage lists views.", NULL},
    {NULL},
};

static PyMemberDef tensor_members[] = {
    {"grad_fn", T_OBJECT, offsetof(GMTensor, grad_fn), 0, "The autograd node that made this tensor."},
    {"_hooks", T_OBJECT, offsetof(GMTensor, hooks), 0, "Gradient hooks."},
    {"_post_acc_hooks", T_OBJECT, offsetof(GMTensor, post_acc_hooks), 0, "Hooks run after .grad was written."},
    {"_grad_acc", T_OBJECT, offsetof(GMTensor, grad_acc), 0, "A leaf's gradient accumulator node."},
    {"_retains_grad", T_BOOL, offsetof(GMTensor, retains_grad), 0, "Whether a non-leaf keeps .grad."},
    {"_is_param", T_BOOL, offsetof(GMTensor, is_param), 0, "Whether this tensor is an nn.Parameter."},
    {"_unversioned", T_BOOL, offsetof(GMTensor, unversioned), 0, "Writes leave the version alone (t.data)."},
    {"_output_nr", T_INT, offsetof(GMTensor, output_nr), 0, "Which output of grad_fn this is."},
    {NULL},
};

static PyObject *tensor_item(GMTensor *self, PyObject *unused) {
    if (gm_numel(self) != 1) {
        char a[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "item: only a tensor with one element can be converted to a Python "
                     "number, this one has shape %s", gm_shape_str(self->ndim, self->shape, a));
        return NULL;
    }
    if (self->device.type == GM_DEV_CUDA) { /* one element to the host (waits for the kernels that write it) */
        GMTensor *host = gm_to_device(self, (gm_device){GM_DEV_CPU, 0});
        if (!host) return NULL;
        PyObject *v = tensor_item(host, NULL);
        Py_DECREF(host);
        return v;
    }
    if (self->device.type != GM_DEV_CPU) {
        PyErr_SetString(PyExc_RuntimeError, "item: a meta tensor has no data (it only has a shape)");
        return NULL;
    }
    const char *p = gm_tensor_data(self);
    if (self->dtype == GM_I64) { int64_t v; memcpy(&v, p, 8); return PyLong_FromLongLong(v); }
    if (self->dtype == GM_BOOL) return PyBool_FromLong(*p != 0);
    if (!gm_dtype_is_float(self->dtype)) return PyLong_FromLongLong((long long)gm_load_f64(p, self->dtype)); /* exact */
    return PyFloat_FromDouble(gm_load_f64(p, self->dtype));
}

extern PyObject *gm_tensor_numpy(GMTensor *self, PyObject *unused); /* numpy.c */

static PyObject *tensor_is_inference(GMTensor *self, PyObject *unused) {
    return PyBool_FromLong(self->storage->inference);
}

/* The method table is gathered from the files that define the methods (views in tensor_views.c, numpy() in
 * numpy.c), so that each stays with its concern and the type, which names them all, sits above them. */
static PyMethodDef tensor_methods[32];

static int gather_methods(void) {
    const PyMethodDef own[] = {
        {"item", (PyCFunction)tensor_item, METH_NOARGS, "The value of a one-element tensor as a Python number."},
        {"numpy", (PyCFunction)gm_tensor_numpy, METH_NOARGS, "A NumPy array sharing this CPU tensor's memory."},
        {"is_inference", (PyCFunction)tensor_is_inference, METH_NOARGS,
         "Whether this is an inference tensor: made under inference_mode(), or a view of one (as PyTorch's). "
         "gpumemnet records the flag only: it does not refuse what PyTorch refuses such tensors outside "
         "inference mode (saving one for backward, writing one in place)."},
    };
    size_t n = 0, cap = sizeof tensor_methods / sizeof tensor_methods[0] - 1; /* keep the NULL sentinel */
    for (const PyMethodDef *m = gm_tensor_view_methods; m->ml_name; m++) {
        if (n == cap) return -1;
        tensor_methods[n++] = *m;
    }
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        if (n == cap) return -1;
        tensor_methods[n++] = own[i];
    }
    return 0;
}

PyNumberMethods gm_tensor_number_methods; /* filled by autograd_node.c before the type is made ready */

static PyTypeObject TensorBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpumemnet._C.TensorBase",
    .tp_basicsize = sizeof(GMTensor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C part of gpumemnet.Tensor: storage, geometry, dtype, device.",
    .tp_new = tensor_new,
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_traverse = (traverseproc)tensor_traverse,
    .tp_clear = (inquiry)tensor_clear,
    .tp_weaklistoffset = offsetof(GMTensor, weakreflist),
    .tp_methods = tensor_methods,
    .tp_members = tensor_members,
    .tp_getset = tensor_getset,
    .tp_as_number = &gm_tensor_number_methods,
};

/* ---- creation ---------------------------------------------------------------------------------------- */
static PyObject *py_set_tensor_class(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, GMTensor_Base)) {
        PyErr_SetString(PyExc_TypeError, "_set_tensor_class: expected a subclass of TensorBase");
        return NULL;
    }
    if (((PyTypeObject *)cls)->tp_basicsize != GMTensor_Base->tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "_set_tensor_class: the subclass must declare __slots__ = ()");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XDECREF(GMTensor_Class == GMTensor_Base ? NULL : (PyObject *)GMTensor_Class);
    GMTensor_Class = (PyTypeObject *)cls;
    Py_RETURN_NONE;
}

static PyObject *py_set_inference_var(PyObject *self, PyObject *var) {
    if (!PyContextVar_CheckExact(var)) {
        PyErr_SetString(PyExc_TypeError, "_set_inference_var: expected a ContextVar");
        return NULL;
    }
    Py_XSETREF(gm_inference_var, Py_NewRef(var));
    Py_RETURN_NONE;
}

static PyObject *py_empty(PyObject *self, PyObject *args) {
    PyObject *shp, *dto, *devo;
    int ndim, pin = 0;
    int64_t shape[GM_MAX_DIMS];
    gm_dtype dt;
    gm_device dev;
    if (!PyArg_ParseTuple(args, "OOO|p:empty", &shp, &dto, &devo, &pin)) return NULL;
    if (gm_parse_shape(shp, &ndim, shape, "size") < 0 || gm_parse_dtype(dto, &dt, "dtype") < 0 ||
        gm_parse_device(devo, &dev, "device") < 0)
        return NULL;
    if (!pin) return (PyObject *)gm_empty(ndim, shape, dt, dev);
    /* on meta: the host memory of a simulated run (offloaded state, activations saved on the CPU) */
    if (dev.type == GM_DEV_META) return (PyObject *)gm_empty_meta_host(ndim, shape, dt);
    if (dev.type != GM_DEV_CPU) {
        char dn[16];
        return PyErr_Format(PyExc_RuntimeError, "empty: pin_memory=True needs device='cpu' (pinned memory is host "
                            "memory), got device='%s'", gm_device_str(dev, dn));
    }
    return (PyObject *)gm_empty_pinned(ndim, shape, dt);
}

static PyObject *py_arange(PyObject *self, PyObject *args) {
    double start, end, step;
    PyObject *dto, *devo;
    gm_dtype dt;
    gm_device dev;
    if (!PyArg_ParseTuple(args, "dddOO:arange", &start, &end, &step, &dto, &devo)) return NULL;
    if (gm_parse_dtype(dto, &dt, "dtype") < 0 || gm_parse_device(devo, &dev, "device") < 0) return NULL;
    if (step == 0 || step != step || start != start || end != end) {
        gm_errorf(PyExc_ValueError, "arange: step must be non-zero and bounds finite (start=%g, end=%g, "
                     "step=%g)", start, end, step);
        return NULL;
    }
    if ((end - start) / step < 0) {
        gm_errorf(PyExc_ValueError, "arange: the bounds start=%g, end=%g are inconsistent with step=%g",
                     start, end, step);
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count > 9.0e18) {
        gm_errorf(PyExc_ValueError, "arange: %g elements are too many", count);
        return NULL;
    }
    int64_t n = (int64_t)count;
    if (dev.type == GM_DEV_CUDA) { /* made on the host and uploaded: arange is never hot */
        PyObject *a = Py_BuildValue("dddOs", start, end, step, dto, "cpu");
        int prev = gm_swap_category(GM_CAT_WORKSPACE);
        GMTensor *host = a ? (GMTensor *)py_arange(self, a) : NULL;
        gm_swap_category(prev);
        Py_XDECREF(a);
        if (!host) return NULL;
        GMTensor *t = gm_to_device(host, dev);
        Py_DECREF(host);
        return (PyObject *)t;
    }
    GMTensor *t = gm_empty(1, &n, dt, dev);
    if (!t || dev.type != GM_DEV_CPU) return (PyObject *)t;
    char *p = gm_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i * step;
        switch (dt) {
        case GM_F32: ((float *)p)[i] = (float)v; break;
        case GM_F64: ((double *)p)[i] = v; break;
        case GM_F16: ((uint16_t *)p)[i] = gm_float_to_half((float)v); break;
        case GM_BF16: ((uint16_t *)p)[i] = gm_float_to_bf16((float)v); break;
        case GM_I64: ((int64_t *)p)[i] = (int64_t)v; break;
        case GM_BOOL: ((uint8_t *)p)[i] = v != 0; break;
        default: { /* a storage-only integer: through int64, keeping the low bits as a cast does */
            const int64_t w = (int64_t)v;
            gm_cast_any(p + i * (int64_t)gm_dtype_size(dt), dt, (const char *)&w, GM_I64);
        }
        }
    }
    return (PyObject *)t;
}

extern PyObject *gm_py_from_numpy(PyObject *self, PyObject *args, PyObject *kwargs); /* numpy.c */
extern PyObject *gm_py_from_numpy_shared(PyObject *self, PyObject *obj);                /* numpy.c */

/* _grads_free(list) -> tuple of bools: which gradients the autograd engine may hand over to a backward to write
 * its result into. A gradient is free when the list holds the only reference to it (no hook, no retained .grad,
 * no capture, no NumPy array, no second consumer holds it: each would hold a reference) and no other tensor
 * shares its storage (no view of it is alive). Only reference counts can tell this, hence C. */
PyObject *gm_grads_free(PyObject *list) {
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "_grads_free: expected a list, got %s", Py_TYPE(list)->tp_name);
        return NULL;
    }
    const Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *res = PyTuple_New(n);
    if (!res) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(list, i); /* borrowed: the list's reference is the one counted */
        int free_ = 0;
        if (PyObject_TypeCheck(o, GMTensor_Base)) {
            GMTensor *t = (GMTensor *)o;
            free_ = Py_REFCNT(o) == 1 && t->storage->refcount == 1 && !t->requires_grad &&
                    (!t->grad_fn || t->grad_fn == Py_None);
        }
        PyTuple_SET_ITEM(res, i, Py_NewRef(free_ ? Py_True : Py_False));
    }
    return res;
}

static PyObject *py_grads_free(PyObject *self, PyObject *list) { return gm_grads_free(list); }

/* label_unnamed(tensor, label): name the tensor's block in memory reports ("activation saved by features.3
 * (Conv2d)") unless it has a name already (a parameter's "fc1.weight" stays). Autograd calls it when it keeps a
 * tensor for backward; the label goes with the block, so reusing the block (gm_alloc) forgets it. */
static PyObject *py_label_unnamed(PyObject *self, PyObject *args) {
    PyObject *t, *label;
    if (!PyArg_ParseTuple(args, "OU:label_unnamed", &t, &label)) return NULL;
    if (!gm_is_tensor(t)) {
        PyErr_Format(PyExc_TypeError, "label_unnamed: expected a Tensor, got %.100s", Py_TYPE(t)->tp_name);
        return NULL;
    }
    gm_storage *st = ((GMTensor *)t)->storage;
    if (st && st->block) {
        const char *s = gm_intern(label);
        if (!s) return NULL;
        gm_block_label_unnamed(st->block, s);
    }
    Py_RETURN_NONE;
}

/* _C._increment_version(t): torch.autograd.graph.increment_version, for a write autograd did not see (a kernel of
 * the user's through data_ptr): a node that saved t then refuses to use it. */
static PyObject *py_increment_version(PyObject *self, PyObject *t) {
    if (!gm_is_tensor(t)) {
        PyErr_Format(PyExc_TypeError, "increment_version: expected a Tensor, got %.100s", Py_TYPE(t)->tp_name);
        return NULL;
    }
    gm_bump_version((GMTensor *)t);
    Py_RETURN_NONE;
}

/* _C._live_of_types(types): the objects the garbage collector tracks whose exact type is in the set `types`, in one
 * C call. gc.get_objects()'s list gives every object one more reference while it is alive; a tuple another thread is
 * building from a generator (`tuple(f(t) for t in ts)` resizes it, which needs its only reference) then fails with
 * "SystemError: bad argument to internal function" (a trainer thread crashed so beside an estimate in another). Here
 * the list lives only inside this call, which runs no Python code, so no other thread runs meanwhile. */
static PyObject *py_live_of_types(PyObject *self, PyObject *types) {
    if (!PyAnySet_Check(types)) {
        PyErr_Format(PyExc_TypeError, "_live_of_types: expected a set of types, got %.100s", Py_TYPE(types)->tp_name);
        return NULL;
    }
    PyObject *gc = PyImport_ImportModule("gc");
    if (!gc) return NULL;
    PyObject *all = PyObject_CallMethod(gc, "get_objects", NULL);
    Py_DECREF(gc);
    if (!all) return NULL;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(all); i++) {
        PyObject *o = PyList_GET_ITEM(all, i);
        int in = PySet_Contains(types, (PyObject *)Py_TYPE(o));
        if (in < 0 || (in && PyList_Append(out, o) < 0)) Py_CLEAR(out);
    }
    Py_DECREF(all);
    return out;
}

PyMethodDef gm_tensor_module_methods[] = {
    {"_set_tensor_class", py_set_tensor_class, METH_O, "Register the Python Tensor class C creates."},
    {"_set_size_class", py_set_size_class, METH_O, "Register the Python Size class shape returns (_core/size.py)."},
    {"_set_inference_var", py_set_inference_var, METH_O,
     "Register inference_mode's ContextVar (_core/state.py): storages made while it is True are inference ones."},
    {"empty", py_empty, METH_VARARGS, "empty(shape, dtype, device, pin_memory=False): uninitialised tensor (pin_memory on meta: counted as "
     "'meta-host', the host memory of a meta run)."},
    {"arange", py_arange, METH_VARARGS, "arange(start, end, step, dtype, device)."},
    {"from_numpy_shared", gm_py_from_numpy_shared, METH_O,
     "from_numpy_shared(array): a CPU tensor over the array's memory, or None where it cannot share it."},
    {"from_numpy", (PyCFunction)(void (*)(void))gm_py_from_numpy, METH_VARARGS | METH_KEYWORDS,
     "from_numpy(array, dtype=None, device='cpu'): copy an ndarray into tracked storage."},
    {"_grads_free", py_grads_free, METH_O, "Which gradients in a list nothing else references (autograd)."},
    {"_increment_version", py_increment_version, METH_O, "Count a write autograd did not see into t's version."},
    {"_live_of_types", py_live_of_types, METH_O,
     "The tracked objects whose exact type is in a set (memory/_live_objects.py)."},
    {"label_unnamed", py_label_unnamed, METH_VARARGS,
     "label_unnamed(tensor, label): name the tensor's block in memory reports unless it is named already."},
    {NULL},
};

int gm_tensor_type_init(PyObject *module) {
    if (gather_methods() < 0) {
        PyErr_SetString(PyExc_SystemError, "gpumemnet: the Tensor method table is too small");
        return -1;
    }
    if (PyType_Ready(&TensorBaseType) < 0) return -1;
    GMTensor_Base = &TensorBaseType;
    GMTensor_Class = &TensorBaseType;
    Py_INCREF(&TensorBaseType);
    if (PyModule_AddObject(module, "TensorBase", (PyObject *)&TensorBaseType) < 0) return -1;
    SizeBaseType.tp_base = &PyTuple_Type;
    if (PyType_Ready(&SizeBaseType) < 0) return -1;
    Py_INCREF(&SizeBaseType);
    if (PyModule_AddObject(module, "SizeBase", (PyObject *)&SizeBaseType) < 0) return -1;
    return 0;
}
