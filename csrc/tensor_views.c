/* csrc/tensor_views.c — the Tensor methods that make views (shared storage, new geometry: _view, _as_strided,
 * _transpose, _permute, _expand, _slice, _select, _unsqueeze, _squeeze), take another tensor's storage
 * (_set_data) or read the geometry (_is_contiguous, numel). No data moves here; tensor_type.c gathers the table. */
#include "gm.h"

static PyObject *shape_error(const char *op, GMTensor *self, int ndim, const int64_t *shape, const char *why) {
    char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
    PyErr_Format(PyExc_ValueError, "%s: cannot view a tensor of shape %s as %s: %s", op,
                 gm_shape_str(self->ndim, self->shape, a), gm_shape_str(ndim, shape, b), why);
    return NULL;
}

/* Resolve one -1 in shape against numel; -1 + ValueError otherwise. */
static int infer_size(const char *op, GMTensor *self, int ndim, int64_t *shape) {
    int64_t numel = gm_numel(self), known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) { PyErr_Format(PyExc_ValueError, "%s: only one dimension can be -1", op); return -1; }
            infer = i;
        } else if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: invalid size %lld in dimension %d", op, (long long)shape[i], i);
            return -1;
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            shape_error(op, self, ndim, shape, "the size overflows");
            return -1;
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            shape_error(op, self, ndim, shape, "the -1 dimension cannot be inferred");
            return -1;
        }
        shape[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        char why[96];
        snprintf(why, sizeof why, "%lld elements cannot hold %lld", (long long)numel, (long long)known);
        shape_error(op, self, ndim, shape, why);
        return -1;
    }
    return 0;
}

/* Strides for viewing self as newshape without copying (PyTorch's algorithm), or 0 when impossible. */
static int view_strides(GMTensor *self, int ndim, const int64_t *newshape, int64_t *newstrides) {
    if (gm_numel(self) == 0 || gm_is_contiguous(self)) {
        gm_contiguous_strides(ndim, newshape, newstrides);
        return 1;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = self->strides[self->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = self->ndim - 1; d >= 0; d--) {
        tensor_numel *= self->shape[d];
        if (d == 0 || (self->shape[d - 1] != 1 && self->strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
                newstrides[view_d] = view_numel * chunk_base;
                view_numel *= newshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return 0;
            if (d > 0) {
                chunk_base = self->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static int list_view(GMTensor *t);

/* v, made by one of the view methods below from self, remembers the tensor it is a view of (Tensor._base, which
 * PyTorch's code reads): self's own base when that is alive (the root of a chain of views), else self. A view of
 * a root that requires no grad is listed on the storage: a value that requires grad written into the root or one
 * of its views later gives them all the graph (indexing.write_plain_shared). */
static PyObject *view_of(GMTensor *v, GMTensor *self) {
    if (!v) return NULL;
    PyObject *ref = self->base_ref;
    if (ref && PyWeakref_GET_OBJECT(ref) != Py_None) {
        Py_INCREF(ref);
    } else if (!(ref = PyWeakref_NewRef((PyObject *)self, NULL))) {
        Py_DECREF(v);
        return NULL;
    }
    v->base_ref = ref;
    PyObject *root = PyWeakref_GET_OBJECT(ref);
    if (root != Py_None && !((GMTensor *)root)->requires_grad && list_view(v) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    return (PyObject *)v;
}

static PyObject *tensor_view(GMTensor *self, PyObject *arg) {
    int ndim;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &ndim, shape, "view") < 0) return NULL;
    if (infer_size("view", self, ndim, shape) < 0) return NULL;
    if (!view_strides(self, ndim, shape, strides))
        return shape_error("view", self, ndim, shape,
                           "the tensor's strides are not compatible (use reshape, which copies when needed)");
    return view_of(gm_view(self, ndim, shape, strides, self->offset), self);
}

static PyObject *tensor_can_view(GMTensor *self, PyObject *arg) {
    int ndim;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &ndim, shape, "reshape") < 0) return NULL;
    if (infer_size("reshape", self, ndim, shape) < 0) return NULL;
    return PyBool_FromLong(view_strides(self, ndim, shape, strides));
}

static PyObject *tensor_as_strided(GMTensor *self, PyObject *args) {
    PyObject *shp, *str;
    long long offset;
    int ndim, nstr;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "OOL:as_strided", &shp, &str, &offset)) return NULL;
    if (gm_parse_shape(shp, &ndim, shape, "as_strided(size)") < 0) return NULL;
    if (gm_parse_shape_any(str, &nstr, strides, "as_strided(stride)") < 0) return NULL;
    if (nstr != ndim) {
        PyErr_Format(PyExc_ValueError, "as_strided: size has %d dimensions but stride has %d", ndim, nstr);
        return NULL;
    }
    if (gm_checked_numel(ndim, shape, "as_strided(size)") < 0) return NULL;
    /* Every reachable element must lie inside the storage. */
    int64_t lo = offset, hi = offset, empty = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) empty = 1;
        if (strides[i] < 0) {
            PyErr_Format(PyExc_ValueError, "as_strided: negative strides are not supported (dimension %d)", i);
            return NULL;
        }
        hi += (shape[i] - 1) * strides[i];
    }
    int64_t cap = (int64_t)(self->storage->nbytes / gm_dtype_size(self->dtype));
    if (offset < 0 || (!empty && (lo < 0 || hi >= cap))) {
        PyErr_Format(PyExc_ValueError, "as_strided: the view reaches elements [%lld, %lld] outside the storage "
                     "of %lld elements", (long long)lo, (long long)hi, (long long)cap);
        return NULL;
    }
    return view_of(gm_view(self, ndim, shape, strides, offset), self);
}

/* t._view_dtype(code): the same bytes read as another dtype (PyTorch's Tensor.view(dtype)). A dtype of another size
 * rescales the last dimension, which must be contiguous (stride 1), as must its size in bytes and every other
 * stride and the offset divide by the new element size. */
static PyObject *tensor_view_dtype(GMTensor *self, PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    if (code < 0 || code >= GM_NDTYPES_ALL) {
        PyErr_Format(PyExc_ValueError, "view(dtype): unknown dtype code %ld", code);
        return NULL;
    }
    int64_t old = (int64_t)gm_dtype_size(self->dtype), new = (int64_t)gm_dtype_size((gm_dtype)code);
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS], offset = self->offset;
    int nd = self->ndim;
    memcpy(shape, self->shape, sizeof shape);
    memcpy(strides, self->strides, sizeof strides);
    if (old != new) {
        if (nd == 0) {
            PyErr_Format(PyExc_RuntimeError, "self.dim() cannot be 0 to view %s as %s (different element sizes)",
                         gm_dtype_name(self->dtype), gm_dtype_name((gm_dtype)code));
            return NULL;
        }
        if (strides[nd - 1] != 1 && shape[nd - 1] != 1) {
            PyErr_SetString(PyExc_RuntimeError, "self.stride(-1) must be 1 to view as a dtype of another size");
            return NULL;
        }
        if ((shape[nd - 1] * old) % new) {
            PyErr_Format(PyExc_RuntimeError, "self.size(-1) must be divisible by %lld to view %s as %s (different "
                         "element sizes), but got %lld", (long long)(new / old > 1 ? new / old : 1),
                         gm_dtype_name(self->dtype), gm_dtype_name((gm_dtype)code), (long long)shape[nd - 1]);
            return NULL;
        }
        for (int d = 0; d < nd - 1; d++)
            if ((strides[d] * old) % new) {
                PyErr_Format(PyExc_RuntimeError, "self.stride(%d) must be divisible by %lld to view %s as %s", d,
                             (long long)(new / old), gm_dtype_name(self->dtype), gm_dtype_name((gm_dtype)code));
                return NULL;
            }
        if ((offset * old) % new) {
            PyErr_Format(PyExc_RuntimeError, "self.storage_offset() must be divisible by %lld to view %s as %s",
                         (long long)(new / old), gm_dtype_name(self->dtype), gm_dtype_name((gm_dtype)code));
            return NULL;
        }
        for (int d = 0; d < nd - 1; d++) strides[d] = strides[d] * old / new;
        shape[nd - 1] = shape[nd - 1] * old / new;
        strides[nd - 1] = 1;
        offset = offset * old / new;
    }
    GMTensor *v = gm_view(self, nd, shape, strides, offset);
    if (v) v->dtype = (gm_dtype)code;
    return (PyObject *)v;
}

static PyObject *tensor_transpose(GMTensor *self, PyObject *args) {
    long long d0, d1;
    if (!PyArg_ParseTuple(args, "LL:transpose", &d0, &d1)) return NULL;
    int a = gm_wrap_dim(d0, self->ndim, "transpose(dim0)"), b = gm_wrap_dim(d1, self->ndim, "transpose(dim1)");
    if (a < 0 || b < 0) return NULL;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    memcpy(shape, self->shape, sizeof shape);
    memcpy(strides, self->strides, sizeof strides);
    if (self->ndim > 0) {
        shape[a] = self->shape[b]; shape[b] = self->shape[a];
        strides[a] = self->strides[b]; strides[b] = self->strides[a];
    }
    return view_of(gm_view(self, self->ndim, shape, strides, self->offset), self);
}

static PyObject *tensor_permute(GMTensor *self, PyObject *arg) {
    int n;
    int64_t dims[GM_MAX_DIMS], shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &n, dims, "permute(dims)") < 0) return NULL;
    if (n != self->ndim) {
        PyErr_Format(PyExc_ValueError, "permute(dims): the tensor has %d dimensions but %d dims were given",
                     self->ndim, n);
        return NULL;
    }
    int seen[GM_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int d = gm_wrap_dim(dims[i], n, "permute(dims)");
        if (d < 0) return NULL;
        if (seen[d]++) {
            PyErr_Format(PyExc_ValueError, "permute(dims): dimension %d appears more than once", d);
            return NULL;
        }
        shape[i] = self->shape[d];
        strides[i] = self->strides[d];
    }
    return view_of(gm_view(self, n, shape, strides, self->offset), self);
}

static PyObject *tensor_expand(GMTensor *self, PyObject *arg) {
    int n;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    if (gm_parse_shape_any(arg, &n, shape, "expand(size)") < 0) return NULL;
    if (n < self->ndim) {
        char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
        PyErr_Format(PyExc_ValueError, "expand: cannot expand shape %s to %s: fewer dimensions",
                     gm_shape_str(self->ndim, self->shape, a), gm_shape_str(n, shape, b));
        return NULL;
    }
    int lead = n - self->ndim;
    for (int i = n - 1; i >= 0; i--) {
        int j = i - lead;
        if (j < 0) {
            if (shape[i] < 0) {
                PyErr_Format(PyExc_ValueError, "expand: size -1 is not allowed in a new leading dimension %d", i);
                return NULL;
            }
            strides[i] = 0;
            continue;
        }
        if (shape[i] == -1) shape[i] = self->shape[j];
        if (shape[i] == self->shape[j]) strides[i] = self->strides[j];
        else if (self->shape[j] == 1 && shape[i] >= 0) strides[i] = 0;
        else {
            char a[GM_SHAPE_BUF], b[GM_SHAPE_BUF];
            PyErr_Format(PyExc_ValueError, "expand: cannot expand shape %s to %s: dimension %d has size %lld, "
                         "which is neither 1 nor %lld", gm_shape_str(self->ndim, self->shape, a),
                         gm_shape_str(n, shape, b), i, (long long)self->shape[j], (long long)shape[i]);
            return NULL;
        }
    }
    return view_of(gm_view(self, n, shape, strides, self->offset), self);
}

/* Python-style slice bounds for one dimension; step must be positive (as in PyTorch). */
static PyObject *tensor_slice(GMTensor *self, PyObject *args) {
    long long dim;
    PyObject *startobj, *stopobj;
    long long step;
    if (!PyArg_ParseTuple(args, "LOOL:slice", &dim, &startobj, &stopobj, &step)) return NULL;
    int d = gm_wrap_dim(dim, self->ndim, "slice(dim)");
    if (d < 0) return NULL;
    if (self->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "slice: a 0-d tensor cannot be sliced");
        return NULL;
    }
    if (step <= 0) {
        PyErr_Format(PyExc_ValueError, "slice: step must be positive, got %lld (negative steps are not supported;"
                     " flip by indexing with a reversed index tensor)", step);
        return NULL;
    }
    int64_t size = self->shape[d], start = 0, stop = size;
    if (startobj != Py_None) {
        start = PyLong_AsLongLong(startobj);
        if (start == -1 && PyErr_Occurred()) return NULL;
        if (start < 0) start += size;
        start = start < 0 ? 0 : start > size ? size : start;
    }
    if (stopobj != Py_None) {
        stop = PyLong_AsLongLong(stopobj);
        if (stop == -1 && PyErr_Occurred()) return NULL;
        if (stop < 0) stop += size;
        stop = stop < 0 ? 0 : stop > size ? size : stop;
    }
    int64_t len = stop > start ? (stop - start + step - 1) / step : 0;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    memcpy(shape, self->shape, sizeof shape);
    memcpy(strides, self->strides, sizeof strides);
    shape[d] = len;
    strides[d] = self->strides[d] * step;
    int64_t offset = self->offset + (len > 0 ? start * self->strides[d] : 0);
    return view_of(gm_view(self, self->ndim, shape, strides, offset), self);
}

static PyObject *tensor_select(GMTensor *self, PyObject *args) {
    long long dim, index;
    if (!PyArg_ParseTuple(args, "LL:select", &dim, &index)) return NULL;
    if (self->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "select: a 0-d tensor cannot be indexed");
        return NULL;
    }
    int d = gm_wrap_dim(dim, self->ndim, "select(dim)");
    if (d < 0) return NULL;
    int64_t size = self->shape[d];
    if (index < -size || index >= size) {
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld", index, d,
                     (long long)size);
        return NULL;
    }
    if (index < 0) index += size;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (i == d) continue;
        shape[n] = self->shape[i];
        strides[n++] = self->strides[i];
    }
    return view_of(gm_view(self, n, shape, strides, self->offset + index * self->strides[d]), self);
}

static PyObject *tensor_unsqueeze(GMTensor *self, PyObject *arg) {
    long long dim = PyLong_AsLongLong(arg);
    if (dim == -1 && PyErr_Occurred()) return NULL;
    if (self->ndim >= GM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "unsqueeze: at most %d dimensions are supported", GM_MAX_DIMS);
        return NULL;
    }
    int d = gm_wrap_dim(dim, self->ndim + 1, "unsqueeze(dim)");
    if (d < 0) return NULL;
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i <= self->ndim; i++) {
        if (i == d) {
            shape[n] = 1;
            strides[n++] = i < self->ndim ? self->shape[i] * self->strides[i] : 1;
        }
        if (i < self->ndim) {
            shape[n] = self->shape[i];
            strides[n++] = self->strides[i];
        }
    }
    return view_of(gm_view(self, self->ndim + 1, shape, strides, self->offset), self);
}

static PyObject *tensor_squeeze(GMTensor *self, PyObject *arg) {
    int d = -1;
    if (arg != Py_None) {
        long long dim = PyLong_AsLongLong(arg);
        if (dim == -1 && PyErr_Occurred()) return NULL;
        d = gm_wrap_dim(dim, self->ndim, "squeeze(dim)");
        if (d < 0) return NULL;
    }
    int64_t shape[GM_MAX_DIMS], strides[GM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < self->ndim; i++) {
        if (self->shape[i] == 1 && (d < 0 || i == d)) continue;
        shape[n] = self->shape[i];
        strides[n++] = self->strides[i];
    }
    return view_of(gm_view(self, n, shape, strides, self->offset), self);
}

/* self takes src's storage, geometry, dtype and device, keeping its identity (PyTorch's `param.data = src`):
 * Module.to moves a parameter this way, so an optimizer built before the move still holds the moved tensor. */
static PyObject *tensor_set_data(GMTensor *self, PyObject *arg) {
    GMTensor *src = gm_tensor_arg(arg, "_set_data", "src");
    if (!src) return NULL;
    if (src == self) Py_RETURN_NONE;
    src->storage->refcount++;
    gm_storage_decref(self->storage);
    self->storage = src->storage;
    self->ndim = src->ndim;
    self->dtype = src->dtype;
    self->device = src->device;
    self->offset = src->offset;
    memcpy(self->shape, src->shape, sizeof self->shape);
    memcpy(self->strides, src->strides, sizeof self->strides);
    Py_RETURN_NONE;
}

static PyObject *tensor_is_contiguous(GMTensor *self, PyObject *unused) {
    return PyBool_FromLong(gm_is_contiguous(self));
}

static PyObject *tensor_numel(GMTensor *self, PyObject *unused) { return PyLong_FromLongLong(gm_numel(self)); }

/* as_subclass(cls): this tensor as an instance of a Python subclass of Tensor (torchvision's tv_tensors.Image),
 * sharing its storage and geometry and, for a result of an op, its place in the graph (the same grad_fn output). */
static PyObject *tensor_as_subclass(GMTensor *self, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, GMTensor_Class)) {
        PyErr_Format(PyExc_TypeError, "as_subclass: creating a Tensor subclass from a class that does not inherit "
                     "from Tensor is not possible (got %R); make sure your class inherits from Tensor", cls);
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    GMTensor *t = (GMTensor *)tp->tp_alloc(tp, 0);
    if (!t) return NULL;
    t->storage = self->storage;
    t->storage->refcount++;
    t->ndim = self->ndim;
    t->dtype = self->dtype;
    t->device = self->device;
    t->offset = self->offset;
    memcpy(t->shape, self->shape, sizeof t->shape);
    memcpy(t->strides, self->strides, sizeof t->strides);
    t->requires_grad = self->requires_grad;
    t->grad_fn = Py_XNewRef(self->grad_fn);
    t->output_nr = self->output_nr;
    t->is_view = self->is_view;
    t->unversioned = self->unversioned;
    t->base_ref = Py_XNewRef(self->base_ref);
    return (PyObject *)t;
}

/* ---- the views a write into their memory re-derives (gm_storage.views) ------------------------------------------ */
/* Keep only the live entries of s->views (run when the list has doubled since the last sweep, and before it is
 * read, so that views made and dropped in a loop do not pile up). */
static int sweep_views(gm_storage *s) {
    PyObject *live = PyList_New(0);
    if (!live) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(s->views); i++) {
        PyObject *ref = PyList_GET_ITEM(s->views, i);
        if (PyWeakref_GET_OBJECT(ref) != Py_None && PyList_Append(live, ref) < 0) {
            Py_DECREF(live);
            return -1;
        }
    }
    Py_SETREF(s->views, live);
    s->views_live = PyList_GET_SIZE(live);
    return 0;
}

/* t on its storage's list (weakly), the dead entries swept once the list has doubled since the last sweep. */
static int list_view(GMTensor *t) {
    gm_storage *s = t->storage;
    if (!s->views && !(s->views = PyList_New(0))) return -1;
    if (PyList_GET_SIZE(s->views) >= 2 * s->views_live + 8 && sweep_views(s) < 0) return -1;
    PyObject *ref = PyWeakref_NewRef((PyObject *)t, NULL);
    if (!ref || PyList_Append(s->views, ref) < 0) {
        Py_XDECREF(ref);
        return -1;
    }
    Py_DECREF(ref);
    return 0;
}

PyObject *gm_get_graph_view(GMTensor *self, void *c) { return PyBool_FromLong(self->is_view); }

/* Autograd marks a recorded view (its outputs sharing an input's storage). One of a root that is no leaf (a
 * leaf's in-place writes are refused under grad) is listed on the storage. */
int gm_set_graph_view(GMTensor *self, PyObject *v, void *c) {
    int on = v ? PyObject_IsTrue(v) : -1;
    if (on < 0) {
        if (!v) PyErr_SetString(PyExc_TypeError, "_graph_view cannot be deleted");
        return -1;
    }
    PyObject *root = self->base_ref ? PyWeakref_GET_OBJECT(self->base_ref) : Py_None;
    if (on && !self->is_view && root != Py_None && ((GMTensor *)root)->grad_fn &&
            ((GMTensor *)root)->grad_fn != Py_None && list_view(self) < 0)
        return -1;
    self->is_view = on;
    return 0;
}

PyObject *gm_get_graph_views(GMTensor *self, void *c) {
    gm_storage *s = self->storage;
    if (!s->views) return PyList_New(0);
    if (sweep_views(s) < 0) return NULL;
    PyObject *out = PyList_New(PyList_GET_SIZE(s->views));
    for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(s->views); i++)
        PyList_SET_ITEM(out, i, Py_NewRef(PyWeakref_GET_OBJECT(PyList_GET_ITEM(s->views, i))));
    return out;
}

PyObject *gm_get_root_has_views(GMTensor *self, void *c) {
    return PyBool_FromLong(!self->base_ref && self->storage->views && PyList_GET_SIZE(self->storage->views) > 0);
}

PyMethodDef gm_tensor_view_methods[] = {
    {"as_subclass", (PyCFunction)tensor_as_subclass, METH_O, "This tensor as an instance of a Tensor subclass."},
    {"_view", (PyCFunction)tensor_view, METH_O, "View with a new shape (no copy)."},
    {"_can_view", (PyCFunction)tensor_can_view, METH_O, "Whether _view(shape) would succeed."},
    {"_as_strided", (PyCFunction)tensor_as_strided, METH_VARARGS, "View with explicit geometry."},
    {"_transpose", (PyCFunction)tensor_transpose, METH_VARARGS, "Swap two dimensions (view)."},
    {"_view_dtype", (PyCFunction)tensor_view_dtype, METH_O, "The same bytes read as another dtype (view)."},
    {"_permute", (PyCFunction)tensor_permute, METH_O, "Reorder dimensions (view)."},
    {"_expand", (PyCFunction)tensor_expand, METH_O, "Broadcast to a larger shape (view, stride 0)."},
    {"_slice", (PyCFunction)tensor_slice, METH_VARARGS, "start:stop:step along one dimension (view)."},
    {"_select", (PyCFunction)tensor_select, METH_VARARGS, "Index one dimension away (view)."},
    {"_unsqueeze", (PyCFunction)tensor_unsqueeze, METH_O, "Insert a dimension of size 1 (view)."},
    {"_squeeze", (PyCFunction)tensor_squeeze, METH_O, "Drop dimensions of size 1 (view)."},
    {"_is_contiguous", (PyCFunction)tensor_is_contiguous, METH_NOARGS, "Row-major contiguous?"},
    {"_set_data", (PyCFunction)tensor_set_data, METH_O, "Take another tensor's storage and geometry in place."},
    {"numel", (PyCFunction)tensor_numel, METH_NOARGS, "Number of elements."},
    {NULL},
};
