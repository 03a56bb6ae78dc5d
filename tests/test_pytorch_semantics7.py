"""PyTorch semantics that scripts written for PyTorch rely on (stop 42, round 9 of the hunts: torchvision's
detection / segmentation / video zoo, scientific ML, recommenders, time series and skorch, and what followed), each
checked against PyTorch itself: the same function run under both libraries and the results compared."""
import math

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_of_half_weights_counts_bags_past_the_half_range(dtype, mode):
    """Bag numbers are counted in int64 (a bfloat16 count stops at 256: entries landed in the wrong bags) and half
    weights' bags are summed in float32, as PyTorch's kernel does."""
    def run(L):
        F = L.nn.functional
        dt = getattr(L, dtype)
        w = L.arange(10, dtype=dt).view(10, 1).expand(10, 2).contiguous()
        idx = L.arange(3000) % 10
        out = [F.embedding_bag(idx, w, L.arange(3000), mode=mode).float().tolist()]
        out.append(F.embedding_bag(L.ones(400, dtype=L.long), L.ones(3, 2, dtype=dt), L.tensor([0]),
                                   mode=mode).float().tolist())
        return out
    ref, got = _both(run)
    assert got == ref


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_scatter_sums_in_float32_as_pytorch(dtype):
    """scatter_add, scatter_reduce (sum, mean), index_add of slices and gather's backward sum half values in float32
    and round once; index_add of single elements and x[idx]'s backward sum in the half type: each as PyTorch's."""
    def run(L):
        dt, n = getattr(L, dtype), 5000
        idx, src = L.zeros(n, dtype=L.long), L.full((n,), 0.5, dtype=dt)
        z = L.zeros(2, dtype=dt)
        out = [z.scatter_add(0, idx, src)[0].item(), z.scatter_reduce(0, idx, src, "sum")[0].item(),
               z.scatter_reduce(0, idx, src, "mean", include_self=False)[0].item(), z.index_add(0, idx, src)[0].item(),
               L.zeros(2, 3, dtype=dt).index_add(0, idx, src.view(n, 1).expand(n, 3).contiguous())[0, 0].item(),
               L.zeros(2, 3, dtype=dt).scatter_add(0, idx.view(n, 1).expand(n, 3),
                                                   src.view(n, 1).expand(n, 3).contiguous())[0, 0].item()]
        w = L.zeros(2, 1, dtype=dt, requires_grad=True)
        g, = L.autograd.grad((w.gather(0, idx.view(n, 1)) * 0.5).sum(), w)
        out.append(g[0, 0].item())
        w1 = L.zeros(2, dtype=dt, requires_grad=True)
        g, = L.autograd.grad((L.take_along_dim(w1, idx) * 0.5).sum(), w1)
        out.append(g[0].item())
        g, = L.autograd.grad((w1[idx] * 0.5).sum(), w1)
        out.append(g[0].item())
        return out
    ref, got = _both(run)
    assert got == ref


def test_float32_linspace_rounds_its_ends_first():
    """Python-float ends are rounded to float32 before the points are made, as PyTorch's: a symmetric grid keeps
    its exact 0 (it was 1 ulp off) and the points equal PyTorch's."""
    def run(L):
        return [L.linspace(-math.pi, math.pi, 5).tolist(), L.linspace(-0.1, 0.1, 3).tolist(),
                L.linspace(0.0, 2 * math.pi, 9).tolist(), L.linspace(-4 / 3, 4 / 3, 7).tolist(),
                L.linspace(-4 / 3, 4 / 3, 7, dtype=L.float64).tolist()]
    ref, got = _both(run)
    assert got == ref
    assert got[0][2] == 0.0


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool"])
def test_pad_fills_integer_tensors_with_the_value(dtype):
    """F.pad's constant of a narrow integer tensor is the value, truncated (it was value != 0, as for bool: a uint8
    mask padded with 255 got class 1); a value out of the dtype's range is refused with PyTorch's error."""
    def run(L):
        F, dt = L.nn.functional, getattr(L, dtype)
        x = L.zeros(1, 1, 2, 2, dtype=dt)
        out = [F.pad(x, [1, 1, 0, 0], value=7.0).tolist(), F.pad(x, [0, 1, 1, 0], value=2.7).tolist()]
        for v in (-1, 300, 70000, -3.9):
            try:
                out.append(F.pad(x, [1, 0], value=v).tolist())
            except RuntimeError as e:
                out.append(str(e))
        return out
    ref, got = _both(run)
    assert got == ref
