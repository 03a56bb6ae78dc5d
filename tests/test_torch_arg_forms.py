"""Argument forms PyTorch's parser accepts that real scripts use, against PyTorch: NumPy's axis= / keepdims=,
PyTorch's keyword names (dims=, size=, input=, dim0=...), NumPy integer scalars as indices and dims, a range as
an index (read, write and gradient), squeeze of a tuple of dims."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

_I = {}  # index tensors by library


def _x(lib):
    return lib.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5)


FORMS = {
    # NumPy's names: every native function with dim / keepdim takes axis / keepdims
    "sum axis": lambda L, x: x.sum(axis=1),
    "sum keepdims": lambda L, x: x.sum(1, keepdims=True),
    "sum axis tuple": lambda L, x: x.sum(axis=(0, 2), keepdims=True),
    "mean axis": lambda L, x: x.mean(axis=1, keepdims=True),
    "max axis": lambda L, x: x.max(axis=1, keepdims=True)[0],
    "min axis": lambda L, x: x.min(axis=1)[1],
    "amax axis": lambda L, x: x.amax(axis=1, keepdims=True),
    "amin axis": lambda L, x: x.amin(axis=(0, 1)),
    "std axis": lambda L, x: x.std(axis=1, keepdims=True),
    "var axis": lambda L, x: x.var(axis=1, correction=0),
    "argmax axis": lambda L, x: x.argmax(axis=1, keepdims=True),
    "argmin axis": lambda L, x: x.argmin(axis=1),
    "prod axis": lambda L, x: x.prod(axis=1, keepdims=True),
    "logsumexp axis": lambda L, x: x.logsumexp(axis=1, keepdims=True),
    "nansum axis": lambda L, x: x.nansum(axis=1, keepdims=True),
    "median axis": lambda L, x: x.median(axis=1, keepdims=True)[0],
    "any axis": lambda L, x: (x > 0).any(axis=1, keepdims=True),
    "all axis": lambda L, x: (x > 0).all(axis=1),
    "cumsum axis": lambda L, x: x.cumsum(axis=1),
    "softmax axis": lambda L, x: x.softmax(axis=1),
    "log_softmax axis": lambda L, x: x.log_softmax(axis=1),
    "squeeze axis": lambda L, x: x[:, :1].squeeze(axis=1),
    "unsqueeze axis": lambda L, x: x.unsqueeze(axis=1),
    "sort axis": lambda L, x: x.sort(axis=1)[0],
    "topk axis": lambda L, x: x.topk(2, axis=1)[0],
    "count_nonzero axis": lambda L, x: x.count_nonzero(axis=1),
    "gather axis": lambda L, x: x.gather(axis=2, index=L.zeros(2, 3, 1, dtype=L.int64)),
    "torch.cat axis": lambda L, x: L.cat([x, x], axis=1),
    "torch.stack axis": lambda L, x: L.stack([x, x], axis=1),
    "torch.concatenate axis": lambda L, x: L.concatenate([x, x], axis=2),
    "torch.sum axis": lambda L, x: L.sum(x, axis=1),
    "torch.mean axis tuple": lambda L, x: L.mean(x, axis=(0, 2)),
    "torch.max axis": lambda L, x: L.max(x, axis=1, keepdims=True)[0],
    "torch.softmax axis": lambda L, x: L.softmax(x, axis=1),
    "torch.log_softmax axis": lambda L, x: L.log_softmax(x, axis=1),
    "torch.std_mean axis": lambda L, x: L.std_mean(x, axis=1, keepdims=True)[0],
    "torch.chunk axis": lambda L, x: L.chunk(x, 2, axis=2)[1],
    # PyTorch's keyword names
    "flip dims": lambda L, x: x.flip(dims=[1]),
    "torch.flip dims": lambda L, x: L.flip(x, dims=(0,)),
    "permute dims": lambda L, x: x.permute(dims=(2, 0, 1)),
    "transpose dim0 dim1": lambda L, x: x.transpose(dim0=0, dim1=1),
    "expand size": lambda L, x: x[:1].expand(size=(2, 3, 4)),
    "reshape shape": lambda L, x: x.reshape(shape=(4, 6)),
    "view size": lambda L, x: x.view(size=(6, 4)),
    "torch.tile dims": lambda L, x: L.tile(x, dims=(1, 2, 1)),
    "new_zeros size": lambda L, x: x.new_zeros(size=(2,)),
    "new_ones size": lambda L, x: x.new_ones(size=(2, 1)),
    "mean dtype": lambda L, x: x.mean(1, dtype=L.float64),
    "int mean dtype": lambda L, x: x.long().mean(dtype=L.float64),
    "sum dtype": lambda L, x: x.sum(1, dtype=L.float64),
    "torch.max input": lambda L, x: L.max(input=x, dim=1)[0],
    "torch.sum input": lambda L, x: L.sum(input=x, dim=(0, 1)),
    "torch.gather input": lambda L, x: L.gather(input=x, dim=2, index=L.zeros(2, 3, 1, dtype=L.int64)),
    "torch.zeros_like input": lambda L, x: L.zeros_like(input=x),
    "torch.full_like input": lambda L, x: L.full_like(input=x, fill_value=2.0),
    "torch.exp input": lambda L, x: L.exp(input=x / 10),
    "torch.sin input": lambda L, x: L.sin(input=x),
    "torch.pow input": lambda L, x: L.pow(input=x, exponent=2),
    "torch.add input other": lambda L, x: L.add(input=x, other=x, alpha=2),
    "torch.mul input other": lambda L, x: L.mul(input=x, other=3.0),
    "torch.maximum input other": lambda L, x: L.maximum(input=x, other=-x),
    "torch.matmul input other": lambda L, x: L.matmul(input=x, other=x.transpose(1, 2)),
    "torch.transpose input": lambda L, x: L.transpose(input=x, dim0=0, dim1=2),
    "torch.narrow input": lambda L, x: L.narrow(input=x, dim=1, start=0, length=2),
    "torch.chunk input": lambda L, x: L.chunk(input=x, chunks=2)[0],
    "torch.split tensor": lambda L, x: L.split(tensor=x, split_size_or_sections=1)[1],
    "torch.numel input": lambda L, x: L.tensor(L.numel(input=x)),
    "squeeze tuple": lambda L, x: x[:1, :, :1].squeeze((0, 2)),
    "squeeze dim tuple": lambda L, x: x[:1, :, :1].squeeze(dim=(0, 2)),
    "squeeze list keeps non-1": lambda L, x: x[:1].squeeze([0, 1]),
    "squeeze empty tuple": lambda L, x: x[:1].squeeze(()),
    "torch.squeeze tuple": lambda L, x: L.squeeze(x[:, :1], (1, -1)),
    # NumPy integer scalars where an int goes
    "index np.int64": lambda L, x: x[np.int64(1)],
    "index np.int32 in tuple": lambda L, x: x[0, np.int32(2)],
    "index after ellipsis": lambda L, x: x[..., np.int64(0)],
    "index np.uint8": lambda L, x: x[np.uint8(1)],
    "index np slice": lambda L, x: x[np.int64(0):np.int64(1)],
    "index np.int64 beside a tensor": lambda L, x: x[np.int64(1), L.tensor([0, 2])],
    "index np.int64 beside a list": lambda L, x: x[[0, 1], np.int64(1)],
    "sum np dim": lambda L, x: x.sum(np.int64(1)),
    "sum np dims tuple": lambda L, x: x.sum((np.int64(0), np.int32(2))),
    "mean np dim": lambda L, x: x.mean(np.int64(-1), keepdim=True),
    "max np dim": lambda L, x: x.max(np.int64(1))[1],
    "argmax np dim": lambda L, x: x.argmax(np.int32(2)),
    "softmax np dim": lambda L, x: x.softmax(np.int64(1)),
    "cumsum np dim": lambda L, x: x.cumsum(np.int64(1)),
    "select np": lambda L, x: x.select(np.int64(1), np.int64(0)),
    "unsqueeze np dim": lambda L, x: x.unsqueeze(np.int64(1)),
    "torch.cat np dim": lambda L, x: L.cat([x, x], np.int64(1)),
    "zeros np sizes": lambda L, x: L.zeros(np.int64(3), np.int32(2)),
    "reshape np sizes": lambda L, x: x.reshape((np.int64(4), -1)),
    "new_zeros np size": lambda L, x: x.new_zeros(np.int64(3)),
    # a range is a list of ints: a tensor index
    "index range beside a tensor": lambda L, x: x[0][range(3), L.tensor([0, 1, 3])],
    "index range": lambda L, x: x[range(2)],
    "index range on dim 1": lambda L, x: x[:, range(1, 3)],
    "index two ranges": lambda L, x: x[range(2), range(1, 3)],
    "index empty range": lambda L, x: x[range(0)],
    "index np.int64 and range": lambda L, x: x[np.int64(1), range(2)],
}


def _setitem(idx, value=1.0):
    def fn(L, x):
        x = x.clone()
        x[idx(L) if callable(idx) else idx] = value
        return x
    return fn


FORMS.update({
    "setitem np.int64": _setitem(np.int64(1), 0.0),
    "setitem np.int32 in tuple": _setitem((0, np.int32(2)), 5.0),
    "setitem range beside a tensor": _setitem(lambda L: (0, range(3), L.tensor([0, 1, 3]))),
    "setitem range": _setitem(range(1, 2)),
    "setitem two ranges": _setitem((range(2), range(2))),
})


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach().numpy())


@pytest.mark.parametrize("name", list(FORMS))
def test_form_matches_pytorch(name):
    got, want = FORMS[name](gm, _x(gm)), FORMS[name](torch, _x(torch))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda L, x: x.sum(1, axis=1),  # both names of one argument
    lambda L, x: x.sum(axis=1, dim=1),
    lambda L, x: x.mean(keepdim=True, keepdims=True),
    lambda L, x: x.softmax(),  # Tensor.softmax's dim is required
    lambda L, x: x.unsqueeze(),
    lambda L, x: x.norm(axis=1),  # Python functions in PyTorch, which take no NumPy names
    lambda L, x: x.split(1, axis=1),
    lambda L, x: L.nn.functional.softmax(x, axis=1),
    lambda L, x: x.sum(np.float64(1)),  # a NumPy float is no dim
    lambda L, x: x[np.float64(1)],
    lambda L, x: x[np.bool_(True)],
])
def test_refused_as_pytorch_refuses(call):
    for L in (gm, torch):
        with pytest.raises((TypeError, IndexError)):
            call(L, _x(L))


def test_squeeze_tuple_errors():
    for L in (gm, torch):
        x = _x(L)[:1]
        with pytest.raises(RuntimeError, match="appears multiple times"):
            x.squeeze((0, 0))
        with pytest.raises(IndexError):
            x.squeeze((0, 3))


@pytest.mark.parametrize("index", [
    lambda L, y: (range(3), y),
    lambda L, y: (np.int64(1),),
    lambda L, y: (slice(None), np.int64(2)),
    lambda L, y: (range(1, 3),),
])
def test_gradient_through_the_indexed_read(index):
    grads = {}
    for L in (gm, torch):
        x = L.tensor(np.arange(12, dtype=np.float64).reshape(3, 4) / 7, requires_grad=True)
        y = L.tensor([0, 3, 1])
        out = x[index(L, y)]
        (out * out).sum().backward()
        grads[L] = _np(x.grad)
    np.testing.assert_allclose(grads[gm], grads[torch])


def test_range_assignment_in_a_graph_records():
    """z[range(n), y] = v on a tensor in a graph (makemore's dlogits[range(n), Yb] -= 1): the value's gradient
    and the input's (zero at the written entries) as PyTorch's."""
    grads = {}
    for L in (gm, torch):
        a = L.tensor(np.ones((3, 4)), requires_grad=True)
        v = L.tensor([1.0, 2.0, 3.0], dtype=L.float64, requires_grad=True)
        z = a * 2
        z[range(3), L.tensor([0, 3, 1])] = v
        (z * L.arange(12, dtype=L.float64).reshape(3, 4)).sum().backward()
        grads[L] = (_np(a.grad), _np(v.grad))
    for g, w in zip(grads[gm], grads[torch]):
        np.testing.assert_allclose(g, w)
