"""x[i, j] with several advanced indices (NumPy's and PyTorch's rules): `logits[torch.arange(n), target]`,
`objectness[batch_idx, top_n_idx]` (torchvision's detection heads), `x[:, rows, cols]`, `x[mask, idx]`.

The indices broadcast to one shape B. The indexed dims are moved to the front and merged into one, and the
indices become one linear position into it, so the gather (or the scatter of an assignment) is the single-index
one of indexing.py. The result's B dims stand where the indexed dims stood when those were adjacent, and first
otherwise. Reading is made of recorded ops (permute, reshape, one index), so gradients flow as for any of them; so
is an assignment in a graph (setitem_recorded), out of place and then written back."""
import numpy as np

from .. import _C
from .autograd import _NO_CTX, Function, needs_grad
from .indexing import _HALVES, _as_index_tensor, _is_bool, index_put_into

_BOOL, _I64 = 5, 4


def _index_tensors(item, device):
    """An advanced index as a list of int64 tensors on `device`, one per dim it consumes (a mask: its nonzero)."""
    item = _as_index_tensor(item, device)
    if item._device != device:
        item = item.to(device)
    if item._dtype != _BOOL:
        return [item]
    if item.ndim == 0:
        raise IndexError("index: a 0-d bool index beside other tensor indices is not supported; index in two steps")
    return list(item.nonzero().unbind(1))


def _parse(t, idx):
    """(basic, adv): `basic` indexes t with every advanced index replaced by full slices; `adv` is a list of
    (dim of the basic view, int64 index tensor)."""
    consumed = sum(getattr(i, "ndim", 1) if _is_mask(i) else 1 for i in idx if i is not None and i is not Ellipsis)
    basic, adv, dim = [], [], 0
    for item in idx:
        if item is Ellipsis:
            n = t.ndim - consumed
            basic.extend([slice(None)] * n)
            dim += n
        elif item is None:
            basic.append(None)
            dim += 1
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            basic.append(item)
        elif isinstance(item, slice):
            basic.append(item)
            dim += 1
        else:
            for ti in _index_tensors(item, t._device):
                adv.append((dim, ti))
                basic.append(slice(None))
                dim += 1
    return tuple(basic), adv


def _is_mask(i):
    return isinstance(i, (_C.TensorBase, np.ndarray)) and _is_bool(i)


def _check_shapes(ts):
    """PyTorch's error for index tensors that do not broadcast together (the arithmetic below would say less)."""
    nd = max(t.ndim for t in ts)
    shape = [1] * nd
    for t in ts:
        for i, size in enumerate(t.shape):
            j = nd - t.ndim + i
            if size != 1 and shape[j] not in (1, size):
                raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                                 + ", ".join(str(list(u.shape)) for u in ts))
            shape[j] = size if size != 1 else shape[j]


def positions(v, adv):
    """Each index tensor bounds-checked, with negative positions counted from the end; not yet broadcast (they
    meet in the arithmetic that combines them, so a [K, 1, 1] and a [1, C, 1] index make no [K, C, 1] copies)."""
    _check_shapes([ti for _, ti in adv])
    out = []
    for d, ti in adv:
        size = v.shape[d]
        if ti._device != "meta" and ti.numel() and bool(((ti >= size) | (ti < -size)).any()):
            bad = int(ti[(ti >= size) | (ti < -size)][0])
            raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
        out.append(ti.remainder(size) if ti.numel() and bool((ti < 0).any()) else ti)
    return out


def _linear(v, dims, pos):
    """One int64 tensor of the indices' broadcast shape: the position in the indexed dims merged, row-major."""
    return _merged(pos, [v.shape[d] for d in dims])


def _muladd(a, k, b):
    """a * k + b with broadcasting; the sum is written into the product when that has the result's shape (index
    tensors are never in a graph, and the product is new)."""
    r = a * k
    fits = b.ndim <= r.ndim and all(bs in (1, rs) for bs, rs in zip(reversed(b.shape), reversed(r.shape)))
    if fits:
        r += b
        return r
    return r + b


def _front(v, dims):
    """v with the indexed dims first, merged into one: (the merged tensor, the other dims' sizes)."""
    rest = [d for d in range(v.ndim) if d not in dims]
    p = v.permute(*dims, *rest)
    return p, tuple(v.shape[d] for d in rest)


def _placed(dims):
    """Where the B dims go: at the first indexed dim when the indexed dims are adjacent, else first."""
    return dims[0] if dims == list(range(dims[0], dims[0] + len(dims))) else 0


class _Gather(Function):
    """flat[lin] for the merged position lin of several index tensors. lin has the indices' broadcast shape, so
    as an int64 tensor it can outweigh the values it reads (torchvision's pure-PyTorch roi_align indexes with four
    [K, 1, PH, 1, IY, 1]-like tensors: 8 bytes per output element, four times): it is made for the forward and
    again for the backward, and only the unbroadcast index tensors are kept in between."""

    @staticmethod
    def forward(ctx, flat, pos, sizes):
        lin = _merged(pos, sizes)
        if ctx.needs_input_grad:
            ctx.pos, ctx.sizes, ctx.meta = pos, sizes, (tuple(flat.shape), flat._dtype, flat._device)
        return _C.index(flat, 0, lin.reshape(-1)), tuple(lin.shape)

    @staticmethod
    def backward(ctx, g, _=None):
        shape, dt, dev = ctx.meta
        grad = _C.fill_(_C.empty(shape, dt, dev), 0.0)
        _C.index_put_(grad, 0, _merged(ctx.pos, ctx.sizes).reshape(-1), g, True)
        return grad, None, None


class _TakeWide(Function):
    """flat[pos] (both 1-D) of a float16 / bfloat16 flat, whose backward sums the gradients of repeated positions
    in float32 and rounds once, as PyTorch's gather backward (a scatter_add) does: take_along_dim and gather use
    it. x[idx]'s own backward adds in the half type, as PyTorch's index_put_ does."""

    @staticmethod
    def forward(ctx, flat, pos):
        ctx.pos, ctx.meta = pos, (tuple(flat.shape), flat._dtype, flat._device)
        return _C.index(flat, 0, pos)

    @staticmethod
    def backward(ctx, g):
        shape, dt, dev = ctx.meta
        grad = _C.fill_(_C.empty(shape, dt, dev), 0.0)
        index_put_into(grad, 0, ctx.pos, g, True, wide_halves=True)
        return grad, None


def take_flat(flat, pos):
    """flat[pos] for 1-D flat and int64 pos known in range, through _TakeWide where flat is a half type that
    needs a gradient."""
    if flat._dtype in _HALVES and needs_grad(flat):
        return _TakeWide.apply(flat, pos)
    return flat[pos]


def _merged(pos, sizes):
    lin = None
    for ti, size in zip(pos, sizes):
        lin = ti if lin is None else _muladd(lin, size, ti)
    return lin


def getitem(t, idx):
    basic, adv = _parse(t, idx)
    v = t[basic]
    dims = [d for d, _ in adv]
    pos, sizes = tuple(positions(v, adv)), tuple(v.shape[d] for d in dims)
    p, rest_shape = _front(v, dims)
    flat = p.reshape(-1, *rest_shape)
    if needs_grad(flat):
        out, b_shape = _Gather.apply(flat, pos, sizes)
    else:
        out, b_shape = _Gather.forward(_NO_CTX, flat, pos, sizes)
    out = out.reshape(*b_shape, *rest_shape)
    at = _placed(dims)
    if at:
        nb = len(b_shape)
        order = list(range(nb, nb + at)) + list(range(nb)) + list(range(nb + at, out.ndim))
        out = out.permute(*order).contiguous()  # PyTorch's result is contiguous (x[:, [0, 2], [1, 3]].view(-1))
    return out


def setitem(t, idx, value, accumulate=False):
    """t[idx] = value (or += with accumulate), in place, outside a graph."""
    basic, adv = _parse(t, idx)
    v = t[basic]
    dims = [d for d, _ in adv]
    pos = positions(v, adv)
    p, rest_shape = _front(v, dims)
    merged = (-1,) + rest_shape
    if p._can_view(merged):
        flat = p._view(merged)
        lin = _linear(v, dims, pos)
    else:  # indexed dims that do not merge: address rows by storage offset, through a view of stride 1 over them
        k = len(dims)
        strides = p._strides
        lin = None
        for d, ti in enumerate(pos):
            lin = ti * strides[d] if lin is None else _muladd(ti, strides[d], lin)
        extent = sum((p.shape[d] - 1) * strides[d] for d in range(k)) + 1
        flat = p._as_strided((extent,) + rest_shape, (1,) + tuple(strides[k:]), p._offset)
    b_shape = tuple(lin.shape)
    if isinstance(value, _C.TensorBase):
        at = _placed(dims)
        nb = len(b_shape)
        shape = rest_shape[:at] + b_shape + rest_shape[at:]
        value = value.to(t._dtype).expand(*shape) if value._dtype != t._dtype else value.expand(*shape)
        if at:  # back to (B..., rest...)
            value = value.permute(*range(at, at + nb), *range(at), *range(at + nb, len(shape)))
        value = value.reshape(-1, *rest_shape)
    else:
        scalar = value
        value = _C.empty((), t._dtype, t._device)
        _C.fill_(value, scalar)
    _C.index_put_(flat, 0, lin.reshape(-1), value, accumulate)


def setitem_recorded(t, idx, value, accumulate=False):
    """t[idx] = value (+= with accumulate) where t is in a graph or value requires grad (makemore's
    `dlogits[range(n), Yb] -= 1`, a GNN's index_put_): the new values made by a recorded index_copy (index_add) into
    t flattened, at the flat positions idx names, found by indexing an arange of t's size (8 bytes per element of t,
    for the time of the call); then a recorded whole assignment writes them into t, which takes their graph. As
    with index_copy, a position named twice gets one of its values."""
    pos = _C.arange(0, t.numel(), 1, _I64, t._device)._view(tuple(t.shape))[idx]
    if isinstance(value, _C.TensorBase):
        value = value.to(t.dtype) if value._dtype != t._dtype else value
        value = value.expand(*pos.shape).reshape(-1)
    else:
        value = _C.fill_(_C.empty((pos.numel(),), t._dtype, t._device), value)
    flat = t.reshape(-1)
    new = flat.index_add(0, pos.reshape(-1), value) if accumulate else flat.index_copy(0, pos.reshape(-1), value)
    del flat  # a view of t: the assignment refuses a plain t whose memory another tensor shares
    t[...] = new.reshape(tuple(t.shape))
