"""Tensor indexing: x[idx] and x[idx] = v. Basic indices (ints, slices, None, Ellipsis) become views; at most
one advanced index (an int64 tensor/list, or a bool mask over one or more dims) becomes a gather (_C.index) or
a scatter (_C.index_put_). Several advanced indices together are indexing_multi.py's (make_plan returns None)."""
import warnings
import weakref

import numpy as np

from .. import _C
from .autograd import _REBASE, Function, _keep_saved_output, check_inplace, is_graph_view, needs_grad
from . import functions as F
from .functions import reshape_nograd
from .dtype import SCALAR_TYPE_NAMES, fitting

_I64, _BOOL, _U8 = 4, 5, 6
_NARROW_INTS = (7, 8, 9)  # int8, int16, int32
_F32, _HALVES = 0, (2, 3)  # float32; float16, bfloat16


def _as_index_tensor(obj, device):
    if isinstance(obj, _C.TensorBase):
        t = obj
        if t._device == "cpu" and device.startswith("cuda"):  # PyTorch takes host indices for a CUDA tensor
            t = t.to(device)
    else:
        arr = np.asarray(obj)
        if arr.size == 0 and arr.dtype.kind == "f":  # range(0), []: no entries, positions (NumPy says float64)
            arr = arr.astype(np.int64)
        if arr.dtype == object or arr.dtype.kind not in "biu":
            raise IndexError(f"index: tensors used as indices must be integer or bool, got {arr.dtype}")
        # a NumPy uint8 array becomes a uint8 tensor, as in PyTorch: a mask (as_index_dtype)
        code = _BOOL if arr.dtype.kind == "b" else \
            _U8 if isinstance(obj, np.ndarray) and arr.dtype == np.uint8 else _I64
        t = _C.from_numpy(arr, dtype=code, device=device)
    return as_index_dtype(t)


def as_index_dtype(t):
    """An index tensor as int64 or bool, as PyTorch takes them: int8/16/32 positions widened, a uint8 one a mask
    (PyTorch's deprecated reading, with its warning); a float index is refused."""
    if t._dtype in (_I64, _BOOL):
        return t
    if t._dtype == _U8:
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
                      UserWarning, stacklevel=4)
        return t.bool()
    if t._dtype in _NARROW_INTS:
        return t.long()
    raise IndexError(f"index: tensors used as indices must be long, int, byte or bool tensors, got "
                     f"{str(t.dtype).split('.')[-1]}")


_PLAIN = (int, slice, bool, type(None), type(Ellipsis))


def _foreign(item):
    """Whether item is an array-like of another library (a pandas Index or boolean Series: X[df.index[mask]],
    X[df.fold == 1]), which indexes as its NumPy array does."""
    return type(item) not in _PLAIN and hasattr(item, "__array__") and \
        not isinstance(item, (_C.TensorBase, np.ndarray, np.generic, list, tuple, range))


def sequence_as_tuple(idx):
    """PyTorch's (and old NumPy's) reading of a list index: a list shorter than 32 holding a tensor, a sequence, a
    slice, ... or None is a tuple of indices (x[[rows, cols]] is x[rows, cols]), with PyTorch's deprecation warning;
    any other list is one index tensor. pytorch-metric-learning's HistogramLoss indexes with t.tolist() of (2, K).
    A pandas Index or Series (anywhere in the index) is taken as its NumPy array."""
    if type(idx) is tuple and any(_foreign(i) for i in idx):
        idx = tuple(np.asarray(i) if _foreign(i) else i for i in idx)
    elif _foreign(idx):
        idx = np.asarray(idx)
    if type(idx) is not list or len(idx) >= 32:
        return idx
    for item in idx:
        if item is None or item is Ellipsis or isinstance(item, (_C.TensorBase, np.ndarray, list, tuple, range, slice)):
            warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed "
                          "in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be "
                          "interpreted as tensor index, x[torch.tensor(seq)], which will result either in an error or "
                          "a different result", UserWarning, stacklevel=3)
            return tuple(idx)
    return idx


def make_plan(t, idx):
    """Turn a Python index into a list of steps: ('select', dim, i), ('slice', dim, start, stop, step),
    ('unsqueeze', dim), and at most one final ('index', dim, ndims_consumed, index_tensor); None when the index
    has several advanced indices (indexing_multi.py)."""
    if t.ndim and type(idx) is int:  # the commonest, planned without the general walk below
        return [("select", 0, idx)]
    if t.ndim and type(idx) is slice:
        return [("slice", 0, idx.start, idx.stop, 1 if idx.step is None else idx.step)]
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(type(i) is bool for i in idx):  # x[True] is x[None], x[False] an empty selection: 0-d masks
        idx = tuple(np.asarray(i) if type(i) is bool else i for i in idx)
    consumed = 0
    for item in idx:
        if item is None or item is Ellipsis:
            continue
        if isinstance(item, (_C.TensorBase, np.ndarray)) and _is_bool(item):
            consumed += item.ndim  # a 0-d mask consumes no dim: it adds one of size 1 or 0
        else:
            consumed += 1
    if sum(1 for i in idx if i is Ellipsis) > 1:
        raise IndexError("index: an index can only have a single ellipsis ('...')")
    if consumed > t.ndim:
        raise IndexError(f"index: too many indices for a tensor of {t.ndim} dimensions (shape {tuple(t.shape)})")
    # `dim` counts dims of the view built so far: a select removes its dim, so it does not advance.
    steps = []
    dim = 0
    adv = None
    for item in idx:
        if item is Ellipsis:
            dim += t.ndim - consumed
        elif item is None:
            steps.append(("unsqueeze", dim))
            dim += 1
        elif isinstance(item, (int, np.integer)) or (hasattr(item, "__index__") and not hasattr(item, "ndim")):
            steps.append(("select", dim, int(item)))  # a NumPy integer scalar too (np.bool_ is none: refused)
        elif isinstance(item, slice):
            steps.append(("slice", dim, item.start, item.stop, 1 if item.step is None else item.step))
            dim += 1
        elif _zero_d_integer(item):  # as an int, as PyTorch reads it: x[i] with i = argmax(...) is a view
            steps.append(("select", dim, int(item)))
        elif isinstance(item, (_C.TensorBase, np.ndarray, list, tuple, range)):  # a range: PyTorch's list of ints
            if adv is not None:  # several advanced indices: indexing_multi's, which builds no plan
                return None
            ti = _as_index_tensor(item, t._device)
            n = ti.ndim if ti._dtype == _BOOL else 1
            # integer positions given as host data are checked on the host on every device: meta (which has no
            # data to check a tensor's positions against) then refuses what the CPU refuses
            host = None if isinstance(item, _C.TensorBase) or ti._dtype == _BOOL else np.asarray(item)
            adv = ("index", dim, n, ti, host)
            dim += n
        else:
            raise IndexError(f"index: unsupported index of type {type(item).__name__}")
    if adv is not None:
        steps.append(adv)
    return steps


_INTEGER_CODES = (_I64, 7, 8, 9)  # int64, int8, int16, int32: not uint8, PyTorch's old mask type


def _zero_d_integer(x):
    """A 0-d integer tensor (not one on meta, which has no value to read) or NumPy array."""
    if isinstance(x, _C.TensorBase):
        return x.ndim == 0 and x._dtype in _INTEGER_CODES and x._device != "meta"
    return isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iu" and x.dtype != np.uint8


def _is_bool(x):
    return (x._dtype == _BOOL) if isinstance(x, _C.TensorBase) else x.dtype == np.bool_


def _basic(t, steps):
    for s in steps:
        if s[0] == "select":
            t = t._select(s[1], s[2])
        elif s[0] == "slice":
            t = t._slice(s[1], s[2], s[3], s[4])
        elif s[0] == "unsqueeze":
            t = t._unsqueeze(s[1])
    return t


def _flat_index(v, step):
    """For a bool mask over dims [d, d+n): flatten those dims and turn the mask into linear positions."""
    _, d, n, ti, host = step
    if ti._dtype != _BOOL:
        if host is not None and host.size:
            size = v.shape[d]
            bad = host[(host >= size) | (host < -size)]
            if bad.size:
                raise IndexError(f"index: index {int(bad.flat[0])} is out of bounds for dimension {d} with size "
                                 f"{size}")
        return v, d, ti
    if ti.ndim == 0:  # x[True] is x[None], x[False] an empty selection of it
        v = v._unsqueeze(d)
        ti = ti._view((1,))
        n = 1
    if tuple(v.shape[d:d + n]) != tuple(ti.shape):
        raise IndexError(f"index: the mask of shape {tuple(ti.shape)} does not match the indexed dims "
                         f"{tuple(v.shape[d:d + n])} of a tensor of shape {tuple(v.shape)}")
    flat = tuple(v.shape[:d]) + (-1,) + tuple(v.shape[d + n:])
    return v, d, (flat, _C.nonzero_flat(ti))


def apply_plan(t, steps):
    basic = [s for s in steps if s[0] != "index"]
    v = _basic(t, basic)
    adv = [s for s in steps if s[0] == "index"]
    if not adv:
        return t._view(tuple(t.shape)) if v is t else v  # x[...]: a new view, as PyTorch's (not x itself)
    v, d, ti = _flat_index(v, adv[0])
    if isinstance(ti, tuple):
        flat, ti = ti
        v = reshape_nograd(v, flat)
    return _C.index(v, d, ti)


def _without_leading_ones(values, ndim):
    """values with leading size-1 dims dropped down to ndim dims, as PyTorch's assignment broadcasts a (1, N) value
    into a row (cleanrl's GAE loop writes next_value.reshape(1, -1) into values[t])."""
    if isinstance(values, _C.TensorBase) and values.ndim > ndim:
        extra = values.ndim - ndim
        if all(n == 1 for n in values.shape[:extra]):
            values = values._view(tuple(values.shape[extra:]))
    return values


def check_put_dtypes(t, idx, value):
    """PyTorch refuses to write a tensor of another dtype through an advanced index (an index tensor, a list, a
    mask with more than one value) instead of casting it: 'Index put requires the source and destination dtypes
    match'. Basic indexing casts (a copy_), as does a 0-d value under a single bool mask (PyTorch's masked_fill)."""
    items = idx if isinstance(idx, tuple) else (idx,)
    advanced = [i for i in items if isinstance(i, (_C.TensorBase, list, np.ndarray)) and not _zero_d_integer(i)]
    if not isinstance(value, _C.TensorBase) or value._dtype == t._dtype:
        # a Python number that overflows the tensor's dtype: PyTorch's error (a float one only through an advanced
        # index or into float32: half[0] = 1e6 writes inf there)
        fitting(value, t._dtype, floats=bool(advanced) or t._dtype == 0)
        return
    if not advanced:
        return
    if value.ndim == 0 and len(items) == 1 and isinstance(items[0], _C.TensorBase) and items[0]._dtype == _BOOL:
        return
    raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                       f"{SCALAR_TYPE_NAMES.get(t._dtype, t.dtype)} for the destination and "
                       f"{SCALAR_TYPE_NAMES.get(value._dtype, value.dtype)} for the source.")


def index_put_into(out, d, index, values, accumulate, wide_halves=False):
    """_C.index_put_, with sums into the storage-only integer dtypes (uint8 ... int32: the kernels add in int64 and
    above) made in int64 and written back: torchvision's v2 equalize histograms uint8 images by scatter_add_,
    torchmetrics counts into int32 with index_put_(accumulate=True). wide_halves: sums into float16 / bfloat16 made
    in float32 and rounded once, as PyTorch's scatter_add / scatter_reduce do (its index_add and index_put_ add in
    the half type: 600 halves of 0.5 make 300 one way, 128 in bfloat16 the other)."""
    wide_dt = _I64 if out._dtype in (_U8,) + _NARROW_INTS else _F32 if wide_halves and out._dtype in _HALVES else None
    if accumulate and wide_dt is not None:
        wide = F.cast(out, wide_dt)
        _C.index_put_(wide, d, index, F.cast(values, wide_dt) if isinstance(values, _C.TensorBase) else values, True)
        _C.copy_(out, wide)
        return
    _C.index_put_(out, d, index, values, accumulate)


def put_plan(t, steps, values, accumulate=False):
    """t[plan] = values (or += with accumulate) in place."""
    basic = [s for s in steps if s[0] != "index"]
    v = _basic(t, basic)
    adv = [s for s in steps if s[0] == "index"]
    if not adv:
        values = _without_leading_ones(values, v.ndim)
        if accumulate:
            _C.binary(0, v, values, v)
        elif isinstance(values, _C.TensorBase):
            _C.copy_(v, values)
        else:
            _C.fill_(v, values)
        return
    v, d, ti = _flat_index(v, adv[0])
    target = v
    if isinstance(ti, tuple):
        flat, ti = ti
        # a mask over dims of a view that cannot be flattened in place (PointNet++'s group_idx[mask] = ..., on a
        # slice of a sorted tensor): written into a contiguous copy, which is then copied back
        v = v._view(flat) if v._can_view(flat) else F.contiguous(v)._view(flat)
    if not isinstance(values, _C.TensorBase):
        scalar = values
        values = _C.empty((), v._dtype, v._device)
        _C.fill_(values, scalar)
    index_put_into(v, d, ti, _without_leading_ones(values, v.ndim - 1 + ti.ndim), accumulate)
    if v._storage_id != target._storage_id:
        _C.copy_(target, v._view(tuple(target.shape)))


class IndexPutFn(Function):
    """a[plan] = value where `a` is in a graph or `value` requires grad: the node's output is `a` itself (its edges
    are taken before the write), as PyTorch's CopySlices for a tensor that is not a view. a's gradient is g with
    the assigned entries zeroed (their old values are gone); value's is g at those entries, summed to its shape.
    (An index that repeats an entry assigns it once, and PyTorch's value gradient counts it each time too.)"""

    @staticmethod
    def forward(ctx, a, value, plan):
        ctx.plan = plan
        ctx.value_meta = (tuple(value.shape), value._dtype) if isinstance(value, _C.TensorBase) else None
        put_plan(a, plan, value.detach() if ctx.value_meta else value)
        return a

    @staticmethod
    def backward(ctx, g):
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = _C.empty(tuple(g.shape), g._dtype, g._device)
            _C.copy_(ga, g)
            put_plan(ga, ctx.plan, 0.0)
        if ctx.value_meta is not None and ctx.needs_input_grad[1]:
            gv = F.sum_to(apply_plan(g, ctx.plan), *ctx.value_meta)
        return ga, gv, None


def write_graph_view(view, value_of):
    """An in-place write into `view`, a view of a tensor in a graph (Swin V2's qkv_bias[n:2n].zero_() on a clone
    of the parameter, x[:, 0] += b, Barlow Twins' torch.diagonal(c).add_(-1), (W * 2).t()[:, 0].copy_(p)):
    value_of(view) computes the new values out of place (recorded from the view's old ones), the write into the
    base is recorded on the base (IndexPutFn for a slice of it, _StridedPut for any other view), and the view is
    re-derived from the new base, as PyTorch's CopySlices does. False, with nothing done, when the view's base is
    not alive, not in a graph, a view shared with other tensors, or (for the strided form) not contiguous."""
    node = view.grad_fn
    _keep_saved_output(node, view)  # (the op that made the base may have saved it: pow, elu, leaky_relu ...)
    base = node.base() if isinstance(node, (IndexFn, SplitFn)) and node.base is not None else None
    # a base that is itself a view of a graph tensor takes the write when nothing else is left on the memory (the
    # root gone: `y = (x * 2).view(2, 4); y[:, :2].masked_fill_(m, 0)`, Performer's masks): no other tensor's
    # gradient could miss it
    if base is not None and (not base._graph_view or view._storage_refs == 2) and base.grad_fn is not None:
        plan = node.plan if isinstance(node, IndexFn) else node.plan_of(_C._edge_of(view)[1], base)
        IndexPutFn.apply(base, value_of(view), plan)
        view.grad_fn = IndexFn.apply(base, plan).grad_fn
        return True
    root = _root_base(view)
    if root is None:
        return _write_over_gone_root(view, value_of)
    if root.grad_fn is None or not root.is_contiguous() or root._storage_id != view._storage_id:
        return False
    geometry = (tuple(view.shape), tuple(view._strides), view._offset - root._offset)
    _StridedPut.apply(root, value_of(view), geometry)
    view.grad_fn = _StridedView.apply(root, geometry).grad_fn
    return True


def _write_over_gone_root(view, value_of):
    """write_graph_view where the root is gone (a view does not keep its base alive here) and other views of the
    memory are alive (d2l's masked_softmax: `scores = (f @ w.t()).squeeze(-1); X = scores.reshape(-1, n);
    X[~mask] = -1e6`, scores still held). A view alive that covers the whole memory, contiguous, stands for the root:
    the write is recorded on a whole-memory view of it, and every view alive is re-derived from that, as PyTorch's
    CopySlices on the base and its views' regenerated grad_fn. False, with nothing done, without such a view."""
    ref = getattr(view.grad_fn, "view_base", None)
    if ref is None or ref() is not None:
        return False
    views = view._graph_views
    whole = view._storage_nbytes // view.element_size()
    cover = next((v for v in views if v._offset == 0 and v.numel() == whole and v.is_contiguous()), None)
    if cover is None or not any(v is view for v in views) or \
            any(v._dtype != view._dtype or not v.requires_grad or v.grad_fn is None for v in views):
        return False
    root = cover.reshape(whole)  # recorded: its gradient goes back through cover's node to the gone root's
    _StridedPut.apply(root, value_of(view), _geometry(view, root))
    for v in views:
        v.grad_fn, v._output_nr = _StridedView.apply(root, _geometry(v, root)).grad_fn, 0
    return True


def write_plain_view(view, value_of):
    """A write of a value that requires grad into `view`, a view of a plain tensor (YOLO and RT-DETR losses:
    `loss = torch.zeros(3); loss[0] += box_loss`): recorded on the base, which takes the graph, and the view
    re-derived from it, as PyTorch's CopySlices. Only while nothing but the two shares the memory (another view
    would keep no graph, where PyTorch's would take one) and the base is contiguous; False, with nothing done,
    otherwise. value_of(view) computes the new values out of place."""
    base = view._base
    if base is None or base.requires_grad or view._storage_refs != 2 or not base.is_contiguous() or \
            base._storage_id != view._storage_id:
        return False
    geometry = (tuple(view.shape), tuple(view._strides), view._offset - base._offset)
    _StridedPut.apply(base, value_of(view), geometry)
    view.requires_grad = True
    view.grad_fn, view._output_nr, view._graph_view = _StridedView.apply(base, geometry).grad_fn, 0, True
    return True


def write_plain_shared(t, value_of):
    """A write of a value that requires grad into t, a plain tensor that shares its memory with its views
    (kornia's `axis_angle = zeros_like(q)[..., :3]; axis_angle[..., 0] += a`, a buffer filled row by row while a
    view of it is held): recorded on the root, which takes the graph, and every view of it re-derived from the new
    root (PyTorch's CopySlices, and its views' regenerated grad_fn). A root no longer alive (the zeros_like above:
    a view does not keep its base here) is stood for by the whole memory. Aliases that are no views (detach(),
    .data) share the memory but not the graph, as in PyTorch. False, with nothing done, where t is a root without
    views (the caller records the write on t alone), and where the views are not all of t's dtype, or the root is
    not the whole memory, contiguous. value_of(t) computes t's new values out of place."""
    root = t._base if t._has_base else t
    if root is not None and root._has_base:  # the first alive view of a root that is gone
        root = None
    if root is not None:
        views = [v for v in t._graph_views if v._base is root]
    else:  # the views of the memory whose base is gone too, or is one of them
        views = [v for v in t._graph_views if v._has_base and (v._base is None or v._base._has_base)]
    if (root is not None and root.requires_grad) or not views or (t is not root and not any(v is t for v in views)) \
            or any(v._dtype != t._dtype or v.requires_grad for v in views):
        return False
    whole = t._storage_nbytes // t.element_size()
    made = root is None
    if made:
        root = t._as_strided((whole,), (1,), 0)
    elif not (root.is_contiguous() and root._offset == 0 and root.numel() == whole):
        return False
    _StridedPut.apply(root, value_of(t), _geometry(t, root))
    for v in views:
        v.requires_grad = True
        v.grad_fn, v._output_nr, v._graph_view = _StridedView.apply(root, _geometry(v, root)).grad_fn, 0, True
        if made:  # the views keep the stand-in root alive, as PyTorch's keep their base: later writes into
            v._root_alive = root  # them are recorded on it (write_graph_view)
    return True


def _geometry(view, root):
    """(shape, strides, offset from root's start) of a view of the contiguous root: _StridedView's argument."""
    return tuple(view.shape), tuple(view._strides), view._offset - root._offset


def record_in_place(t, name, out_of_place):
    """t.<name>() (an in-place unary op: exp_, abs_, digamma_...) on a tensor in a graph, recorded as PyTorch
    records it: the out-of-place form computed from a copy of t (whose node may keep that copy), its values written
    into t, and t taking its node (a view of a graph tensor: written into its base, write_graph_view). True when
    done; False when t is in no graph (the caller writes in place itself). Raises as check_inplace does (a leaf
    that requires grad, a view that cannot be written)."""
    if is_graph_view(t) and write_graph_view(t, lambda v: out_of_place(v.clone())):
        return True
    if not check_inplace(t, name):
        return False
    out = out_of_place(t.clone())
    _C.copy_(t, out)
    if out.grad_fn is not None:  # (a result without a gradient, logical_and_'s: t keeps its node, as in PyTorch)
        t.grad_fn, t._output_nr = out.grad_fn, out._output_nr
        if t._root_has_views:
            rebase_views(t)
    return True


def assigned_copy(v, idx, value):
    """A copy of v with v[idx] = value, recorded: the out-of-place form of an assignment into a graph view."""
    out = v.clone()
    out[idx] = value
    return out


def graph_view_writable(view):
    """Whether an in-place write into `view`, a view of a tensor in a graph, can be recorded: write_graph_view's
    two forms, or the view alone on its memory (check_inplace lets that one through)."""
    node = view.grad_fn
    if isinstance(node, (IndexFn, SplitFn)) and node.base is not None:
        base = node.base()
        if base is not None and not base._graph_view and base.grad_fn is not None:
            return True
    root = _root_base(view)
    if root is not None and root.grad_fn is not None and root.is_contiguous() and \
            root._storage_id == view._storage_id:
        return True
    return view._storage_refs <= 1


def _root_base(view):
    """The tensor (not itself a view) that recorded view ops made `view` from (their ctx.view_base), or None."""
    ref = getattr(view.grad_fn, "view_base", None)
    t = ref() if ref is not None else None
    return None if t is None or t._graph_view else t


class _StridedView(Function):
    """The view of a contiguous base with (shape, strides, offset from the base's start): what a view written in
    place is re-derived as. Its gradient is the incoming one placed into zeros of the base's shape."""

    @staticmethod
    def forward(ctx, base, geometry):
        ctx.meta = (tuple(base.shape), base._dtype, base._device, geometry)
        ctx.view_base = F.root_ref(base)
        shape, strides, offset = geometry
        return base._as_strided(shape, strides, base._offset + offset)

    @staticmethod
    def backward(ctx, g):
        shape, dt, dev, (vshape, strides, offset) = ctx.meta
        out = _C.empty(shape, dt, dev)
        _C.fill_(out, 0.0)
        # a broadcast dim (stride 0: an expand() re-derived after a write) reads one element many times: its
        # gradient is the sum over that dim, placed once
        wide = tuple(d for d, st in enumerate(strides) if st == 0 and vshape[d] > 1)
        if wide:
            g = g.sum(wide, keepdim=True)
            vshape = tuple(1 if d in wide else n for d, n in enumerate(vshape))
        _C.copy_(out._as_strided(vshape, strides, offset), g)
        return out, None


def rebase_views(root):
    """root, a tensor that is no view, took a new node by an in-place write (b.mul_(q), b[:, 0] = v, a write
    through one of its views): its recorded views made before (v = b[:, :2]) still lead to its old node, and a
    gradient through them would miss the write. Each is re-derived from the new root, as PyTorch regenerates a
    view's grad_fn once its base's version moved. (Views of a root that is not contiguous are left as they are:
    _StridedView's geometry is over a contiguous root.)"""
    if not root.is_contiguous():
        return
    for v in root._graph_views:
        if v.requires_grad and v.grad_fn is not None:
            v.grad_fn, v._output_nr = _StridedView.apply(root, _geometry(v, root)).grad_fn, 0


_REBASE.append(rebase_views)


class _StridedPut(Function):
    """base[the view's elements] = value, for any view of a contiguous base in a graph: the node's output is base
    itself. base's gradient is g with those elements zeroed; value's is g at them, summed to its shape."""

    @staticmethod
    def forward(ctx, base, value, geometry):
        ctx.geometry = geometry
        ctx.value_meta = (tuple(value.shape), value._dtype) if isinstance(value, _C.TensorBase) else None
        shape, strides, offset = geometry
        region = base._as_strided(shape, strides, base._offset + offset)
        if ctx.value_meta:
            _C.copy_(region, value.detach())
        else:
            _C.fill_(region, value)
        return base

    @staticmethod
    def backward(ctx, g):
        shape, strides, offset = ctx.geometry
        full = _C.empty(tuple(g.shape), g._dtype, g._device)  # contiguous: the base's layout
        _C.copy_(full, g)
        region = full._as_strided(shape, strides, offset)
        gv = None
        if ctx.value_meta is not None and ctx.needs_input_grad[1]:
            gv = _C.empty(shape, g._dtype, g._device)
            _C.copy_(gv, region)
            gv = F.sum_to(gv, *ctx.value_meta)
        _C.fill_(region, 0.0)
        return full, gv, None


def write_recorded(self, name, operands, out_of_place):
    """An in-place op with no in-place node of its own (index_add_, scatter_, clamp_ with a tensor bound ...) where
    the graph must see it: self is in a graph, or an operand requires grad under grad mode. out_of_place(x) makes
    the new values from x (a copy of self's) with recorded ops; a recorded assignment writes them into self (into
    its base for a slice of a tensor in a graph), so self takes their graph, as PyTorch's in-place ops record.
    Returns False, having done nothing, when no graph is involved: the caller writes in place. A leaf that requires
    grad, and a view of a plain tensor given a value that requires grad, are refused with PyTorch's errors."""
    if is_graph_view(self) and write_graph_view(self, lambda v: out_of_place(v.clone())):
        return True
    if not check_inplace(self, name) and not needs_grad(*operands):
        return False
    self[...] = out_of_place(self.clone())
    return True


def _or_max(stop):
    return 2 ** 63 - 1 if stop is None else stop  # PyTorch's saved end of a slice to the end: INT64_MAX


class IndexFn(Function):
    """x[...] with basic and at most one advanced index; the plan is made by make_plan. Graph walkers see it as the
    node PyTorch records for the index's last step (SliceBackward0, SelectBackward0, IndexBackward0) and, when the
    index is one step (x[:, 2:6], x[:, 3]), read that step's saved arguments (torch-pruning's slices)."""

    def _steps(self):
        """The steps that do something (a slice of a whole dim does not)."""
        return [s for s in self.plan if not (s[0] == "slice" and s[2] in (None, 0) and s[3] is None and s[4] == 1)]

    def _one(self, kind=None):
        """The index's only step (of that kind): what PyTorch's node for it saves; AttributeError otherwise."""
        steps = self._steps()
        if len(steps) != 1 or kind not in (None, steps[0][0]):
            raise AttributeError(f"this {self.name()} node saved no such argument")
        return steps[0]

    def name(self):
        steps = self._steps()
        kind = steps[-1][0] if steps else "slice"
        return {"select": "SelectBackward0", "index": "IndexBackward0", "unsqueeze": "UnsqueezeBackward0"}.get(
            kind, "SliceBackward0")

    _saved_dim = property(lambda self: self._one()[1])
    _saved_start = property(lambda self: self._one("slice")[2] or 0)
    _saved_end = property(lambda self: _or_max(self._one("slice")[3]))
    _saved_step = property(lambda self: self._one("slice")[4])
    _saved_index = property(lambda self: self._one("select")[2])
    _saved_self_sym_sizes = property(lambda self: tuple(self.meta[0]))

    @staticmethod
    def forward(ctx, a, plan):
        ctx.plan = plan
        ctx.meta = (a.shape, a._dtype, a._device)
        # a view (no advanced index) remembers its base, weakly, so that writing into the view in place can be
        # recorded on the base (write_graph_view)
        view = not any(s[0] == "index" for s in plan)
        ctx.base = weakref.ref(a) if view else None
        ctx.view_base = F.root_ref(a) if view else None
        return apply_plan(a, plan)

    @staticmethod
    def backward(ctx, g):
        shape, dt, dev = ctx.meta
        grad = _C.empty(shape, dt, dev)
        _C.fill_(grad, 0.0)
        put_plan(grad, ctx.plan, g, accumulate=True)
        return grad, None


class SplitFn(Function):
    """x cut along dim into consecutive blocks of the given sizes (Tensor.split and chunk, a recurrent layer's
    steps): views through one node, whose backward is one cat, with zeros for the blocks no gradient reached, as
    PyTorch's SplitBackward. Through a node per view (IndexFn) every block's backward filled a zero gradient of
    the whole of x and added its block into it, and the engine summed those: attention's q, k, v cut from one
    projection cost three fills and three sums of the projection's size. Each view's place is kept, so that an
    in-place write into one is recorded on the base as for a slice (write_graph_view)."""

    @staticmethod
    def forward(ctx, x, sizes, dim=0):
        out, start = [], 0
        for n in sizes:
            out.append(x._slice(dim, start, start + n, 1))
            start += n
        if ctx.needs_input_grad:  # a node exists only then (the no-graph context takes no attributes)
            ctx.shapes, ctx.dim, ctx.sizes = [tuple(o.shape) for o in out], dim, tuple(sizes)
            ctx.base, ctx.view_base = weakref.ref(x), F.root_ref(x)
        return tuple(out)

    @staticmethod
    def parts(ctx, grads):
        """The pieces' gradients, zeros where a piece got none (the engine leaves out trailing outputs' Nones)."""
        grads = grads + (None,) * (len(ctx.shapes) - len(grads))
        ref = next(g for g in grads if g is not None)
        return [g if g is not None else _C.fill_(_C.empty(shape, ref._dtype, ref._device), 0.0)
                for g, shape in zip(grads, ctx.shapes)]

    @staticmethod
    def backward(ctx, *grads):
        return _C.cat(SplitFn.parts(ctx, grads), ctx.dim), None, None

    def plan_of(self, i, base):
        """The IndexFn plan of output i: its slice of base along dim."""
        start = sum(self.sizes[:i])
        return make_plan(base, (slice(None),) * self.dim + (slice(start, start + self.sizes[i]),))

    def name(self):
        return "SplitBackward0"

    _saved_dim = property(lambda self: self.dim)
    _saved_split_sizes = property(lambda self: self.sizes)
    _saved_self_sym_sizes = property(lambda self: tuple(
        sum(self.sizes) if d == self.dim else n for d, n in enumerate(self.shapes[0])))
