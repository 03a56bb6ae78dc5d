"""PyTorch names and semantics that libraries built on PyTorch reach (the fifth hunt: fastai, ignite, ultralytics,
open_clip, whisper, MONAI, normalizing flows, botorch, tianshou, pytorch-tabnet, optimizer collections, e3nn), each
checked against PyTorch itself: the same function run under both libraries and the results compared."""
import collections
import importlib

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _mod(lib, name):
    return importlib.import_module(lib.__name__ + name)


def _plain(x, lib):
    """x with tensors as (dtype name, values) and containers as (type name, items): comparable across libraries."""
    if isinstance(x, lib.Tensor):
        return ("tensor", str(x.dtype).split(".")[-1], x.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, [(k, _plain(v, lib)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v, lib) for v in x])
    return x


# ---- data loading -------------------------------------------------------------------------------------------
class _Box:
    def __init__(self, v):
        self.v = v


class _Attrs(dict):
    """A dict subclass that a collate keeps (transformers' BatchEncoding-like samples)."""


def test_default_collate_reads_the_registered_type_map_and_keeps_container_types():
    """default_collate is collate(batch, collate_fn_map=default_collate_fn_map) in PyTorch: a type a library
    registers there is batched by its function, also by the DataLoader; mappings keep their type, lists theirs."""
    def run(L):
        c = _mod(L, ".utils.data._utils.collate")
        c.default_collate_fn_map[_Box] = lambda batch, **kw: sum(b.v for b in batch)
        try:
            samples = [collections.OrderedDict(b=_Box(i), a=L.ones(2) * i, s=[i, 2.5, True], t=(np.int32(i), "x"))
                       for i in range(3)]
            out = [L.utils.data.default_collate(samples),
                   L.utils.data.default_collate([_Attrs(x=i, y=[i, i]) for i in range(2)]),
                   list(L.utils.data.DataLoader([_Box(i) for i in range(4)], batch_size=2)),
                   L.utils.data.default_collate([[True, False], [False, False]])]
        finally:
            del c.default_collate_fn_map[_Box]
        return _plain(out, L), type(out[0]).__name__, type(out[1]).__name__, \
            sorted(k.__name__ if isinstance(k, type) else "tuple" for k in c.default_collate_fn_map if k is not L.Tensor)
    ref, got = _both(run)
    assert got == ref


def test_default_collate_refusals_as_pytorch():
    def run(L):
        errors = []
        for batch in ([[1, 2], [1]], [L.zeros(2), L.zeros(3)], [object()], [np.array(["a"])]):
            with pytest.raises(Exception) as e:
                L.utils.data.default_collate(batch)
            errors.append(isinstance(e.value, RuntimeError) or type(e.value).__name__)
        return errors
    ref, got = _both(run)
    assert got == ref


# ---- tensors ------------------------------------------------------------------------------------------------
def test_ellipsis_and_empty_index_give_a_new_view():
    """x[...] / x[()] is a new view of x (PyTorch's alias), not x: setting its attributes leaves x alone."""
    def run(L):
        x = L.arange(6.0).reshape(2, 3)
        out = []
        for idx in (..., (...,), ()):
            y = x[idx]
            y.requires_grad_()
            out.append((y is x, x.requires_grad, y._base is x._base if x._base is not None else y._base is x,
                        y.data_ptr() == x.data_ptr(), tuple(y.shape)))
        y = x[...]
        y.add_(1)  # writes through to x
        out.append(x.tolist())
        return out
    ref, got = _both(run)
    assert got == ref
