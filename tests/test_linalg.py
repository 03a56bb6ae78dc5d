"""gm.linalg's norms against torch.linalg's: values and gradients in float64 on the CPU and CUDA, and the
refusals (an integer input, a 1-D matrix, the SVD norms not here yet)."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

A = np.random.RandomState(0).randn(3, 4, 5)
CALLS = [("vector_norm", (), {}), ("vector_norm", (3,), {"dim": 1}), ("vector_norm", (math.inf,), {"dim": (0, 2)}),
         ("vector_norm", (-math.inf,), {}), ("vector_norm", (1,), {"dim": -1, "keepdim": True}),
         ("vector_norm", (0,), {"dim": 2}), ("matrix_norm", (), {}), ("matrix_norm", (1,), {}),
         ("matrix_norm", (-1,), {"keepdim": True}), ("matrix_norm", (math.inf,), {"dim": (0, 2)}),
         ("matrix_norm", (-math.inf,), {}), ("norm", (), {}), ("norm", (), {"dim": 1}),
         ("norm", ("fro",), {"dim": (1, 2)}), ("norm", (3,), {"dim": 0}), ("norm", (math.inf,), {"dim": (-2, -1)})]


@pytest.mark.parametrize("name,args,kw", CALLS, ids=[f"{c[0]}{c[1]}{sorted(c[2].items())}" for c in CALLS])
def test_matches_pytorch(name, args, kw, device):
    a = gm.tensor(A, device=device, requires_grad=True)
    b = torch.tensor(A, requires_grad=True)
    ya, yb = getattr(gm.linalg, name)(a, *args, **kw), getattr(torch.linalg, name)(b, *args, **kw)
    assert tuple(ya.shape) == tuple(yb.shape)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-12, atol=1e-12)
    if args != (0,):
        ya.sum().backward()
        yb.sum().backward()
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_matrix_norm_of_a_2d_input_and_norm_of_a_matrix():
    m = A[0]
    for ord_ in ("fro", 1, math.inf):
        np.testing.assert_allclose(gm.linalg.norm(gm.tensor(m), ord_).numpy(),
                                   torch.linalg.norm(torch.tensor(m), ord_).numpy(), rtol=1e-12)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda l: l.linalg.vector_norm(l.tensor([1, 2])), RuntimeError, "floating point"),
    (lambda l: l.linalg.matrix_norm(l.zeros(3)), RuntimeError, "at least 2 dimensions"),
    (lambda l: l.linalg.norm(l.zeros(2, 2, 2), 1), RuntimeError, "must be 1D or 2D"),
])
def test_refusals_match_pytorch(call, exc, pattern):
    for lib in (gm, torch):
        with pytest.raises(exc, match=pattern):
            call(lib)
