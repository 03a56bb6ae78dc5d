"""Helpers of the gpumemnet.nn tests (tests/test_nn_*.py): the `meta` fixture and a tiny CNN with every kind of
state (conv, batch norm, pool, linear)."""
import gc

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn

MiB = 1024 * 1024


@pytest.fixture
def meta():
    """Meta tensors made by a test are freed and the meta cache emptied afterwards: test_allocator checks that
    nothing is left on meta."""
    yield "meta"
    gm.memory.set_limit("meta", None)
    gc.collect()
    gm.memory.empty_cache("meta")


class Tiny(nn.Module):
    """Conv -> BN -> ReLU -> MaxPool -> Flatten -> Linear: every kind of state a CNN has."""

    def __init__(self, c=2, classes=3, dtype=None, device=None):
        super().__init__()
        kw = dict(dtype=dtype, device=device)
        self.features = nn.Sequential(nn.Conv2d(1, c, 3, **kw), nn.BatchNorm2d(c, **kw), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.fc = nn.Linear(c * 2 * 2, classes, **kw)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))
