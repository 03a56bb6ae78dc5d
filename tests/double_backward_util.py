"""The comparison behind the create_graph tests: an op's first gradients (taken with create_graph=True) and the
gradients of a weighted square of them, in float64, against PyTorch's."""
import numpy as np

import gpumemnet as gm
from cuda_util import to_np

_W = np.random.RandomState(1)


def _tensors(lib, arrs, device, grad=True):
    dev = {} if lib.__name__ == "torch" else {"device": device}
    return [lib.tensor(a, dtype=lib.float64, requires_grad=grad, **dev) for a in arrs]


def _penalised(lib, fn, ts, weights):
    """fn's gradients with respect to ts (create_graph=True), and, after backward of a weighted square of them,
    the inputs' .grad: the second-order terms."""
    gs = lib.autograd.grad(fn(lib, *ts), ts, create_graph=True, allow_unused=True)
    pen = sum(((g * lib.tensor(w, dtype=g.dtype, device=g.device)) ** 2).sum()
              for g, w in zip(gs, weights) if g is not None)
    pen.backward()
    return gs, [t.grad for t in ts]


def check_second_order(torch, fn, arrs, device, rtol=1e-9):
    """fn(lib, *tensors) -> a scalar, on gpumemnet (on device) and on PyTorch, from the arrays arrs."""
    weights = [_W.rand(*np.shape(a)) + 0.5 for a in arrs]
    ga, sa = _penalised(gm, fn, _tensors(gm, arrs, device), weights)
    gb, sb = _penalised(torch, fn, _tensors(torch, arrs, None), weights)
    for i, (a, b) in enumerate(zip(ga, gb)):
        assert (a is None) == (b is None), f"gradient {i}"
        if b is not None:
            assert a.requires_grad, f"gradient {i} has no graph"
            np.testing.assert_allclose(to_np(a), b.detach().numpy(), rtol=rtol, atol=1e-12, err_msg=f"gradient {i}")
    for i, (a, b) in enumerate(zip(sa, sb)):
        if b is None:
            assert a is None or not to_np(a).any(), f"second-order gradient {i}"
        else:
            np.testing.assert_allclose(to_np(a), b.numpy(), rtol=rtol, atol=1e-12, err_msg=f"second-order {i}")
