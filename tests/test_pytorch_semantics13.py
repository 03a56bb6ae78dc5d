"""PyTorch semantics, round 22 of the hunts: each test runs the same code under PyTorch and under gpumemnet."""
import collections

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


# ---- pinning a batch: PyTorch's containers -----------------------------------------------------------------------
class _Batch:
    """A custom batch type as PyTorch's docs write it: it pins itself."""
    def __init__(self, x):
        self.x = x

    def pin_memory(self):
        return ("pinned", self.x)


class _Tagged(dict):
    pass


def test_pin_memory_follows_pytorchs_containers():
    """torch.utils.data._utils.pin_memory.pin_memory (used by speechbrain and custom loaders) keeps named tuples,
    dict subclasses with their attributes, tuples, ranges, and lets an object with pin_memory() pin itself."""
    Pair = collections.namedtuple("Pair", "a b")

    def run(L):
        from_lib = __import__(L.__name__ + ".utils.data._utils.pin_memory", fromlist=["pin_memory"]).pin_memory
        tagged = _Tagged(k=_Batch(1))
        tagged.note = "kept"
        out = from_lib([Pair(_Batch(2), "s"), tagged, (_Batch(3), b"b"), range(3), 7])
        pair, d, tup, rng, seven = out
        return (type(out).__name__, type(pair).__name__, pair, type(d).__name__, d, getattr(d, "note", None),
                type(tup).__name__, tup, rng, seven)

    want, got = _both(run)
    assert got == want


def test_dataloader_pins_named_tuples_and_custom_batches(monkeypatch):
    """pin_memory=True pins the tensors inside a named tuple batch (they came back unpinned) and calls a custom
    batch's own pin_memory(), as PyTorch's loader does on a machine with an accelerator (one is pretended here:
    without one both loaders leave batches unpinned, and this CPU build cannot pin: a pinned tensor is marked)."""
    from gpumemnet.utils.data import dataloader
    monkeypatch.setattr(dataloader._C, "_cuda_device_count", lambda: 1)
    monkeypatch.setattr(gm.Tensor, "pin_memory", lambda t: t + 100)
    Pair = collections.namedtuple("Pair", "x y")
    data = gm.utils.data.TensorDataset(gm.tensor(np.arange(8.0).reshape(4, 2)), gm.arange(4))

    def as_pair(samples):
        x, y = gm.utils.data.default_collate(samples)
        return Pair(x, y)

    batch = next(iter(gm.utils.data.DataLoader(data, batch_size=2, collate_fn=as_pair, pin_memory=True)))
    assert type(batch) is Pair and batch.x.tolist() == [[100, 101], [102, 103]] and batch.y.tolist() == [100, 101]
    custom = next(iter(gm.utils.data.DataLoader(data, batch_size=2, collate_fn=_Batch, pin_memory=True)))
    assert custom[0] == "pinned"
