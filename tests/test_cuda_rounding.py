"""round/floor/ceil (the unary ops ROUND, FLOOR, CEIL) on CUDA against the CPU, bit for bit (signed zeros
included), on every float dtype and on strided input; and the Tensor methods built on them."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda

pytestmark = [requires_cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

C = gm._C
ROUND, FLOOR, CEIL = 7, 8, 9
VALUES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e20, -3.7, 7.2, np.inf, -np.inf, np.nan, -0.0,
                   1e-30, 4097.5], np.float32)


def bits(t):
    a = t.float().numpy() if t.dtype == gm.bfloat16 else t.numpy()
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), np.uint8)


def assert_same_bits(got, ref):
    """Bit for bit (signed zeros included), but a NaN's payload: IEEE 754 leaves it open, and a real GPU returns its
    canonical NaN (0x7fffffff) where the CPU keeps the input's quiet NaN."""
    r = (ref.float() if ref.dtype == gm.bfloat16 else ref).numpy()
    g = (got.float() if got.dtype == gm.bfloat16 else got).numpy()
    nan = np.isnan(r)
    np.testing.assert_array_equal(np.isnan(g), nan)
    np.testing.assert_array_equal(bits(got).reshape(len(r), -1)[~nan], bits(ref).reshape(len(r), -1)[~nan])


@pytest.mark.parametrize("dt", [0, 1, 2, 3])
@pytest.mark.parametrize("op", [ROUND, FLOOR, CEIL])
def test_rounding_cuda_matches_cpu(op, dt):
    x = C.from_numpy(np.concatenate([VALUES, np.random.default_rng(0).standard_normal(300).astype(np.float32) * 50]),
                     dt, "cpu")
    got = C.unary(op, x.cuda()).cpu()
    ref = C.unary(op, x)
    assert got.dtype == ref.dtype
    assert_same_bits(got, ref)
    xs = x[::3]  # strided input
    assert_same_bits(C.unary(op, xs.cuda()).cpu(), C.unary(op, xs))


def test_rounding_of_int_is_refused_on_cuda():
    with pytest.raises(TypeError, match="expects a floating-point tensor, got int64"):
        C.unary(ROUND, gm.tensor([1, 2]).cuda())


def test_tensor_methods_on_cuda():
    x = gm.tensor(np.random.default_rng(1).standard_normal((4, 6)) * 10, dtype=gm.float32)
    xc = x.cuda()
    for fn in (lambda t: t.round(decimals=1), lambda t: t.div(3, rounding_mode="floor"),
               lambda t: t.trunc(), lambda t: t.repeat(2, 1).chunk(3, 1)[1], lambda t: t.isclose(t.round()),
               lambda t: t.prod(1), lambda t: t.norm(dim=0), lambda t: gm.eye(4, device=t.device),
               lambda t: t.topk(2, 1)[0], lambda t: t.topk(3, 0, largest=False)[1], lambda t: t.sort(0)[1],
               lambda t: t.argsort(1, descending=True)):
        np.testing.assert_array_equal(fn(xc).cpu().numpy(), fn(x).numpy())
    y = xc.detach().requires_grad_()
    (y.round() + y).sum().backward()
    assert np.all(y.grad.cpu().numpy() == 1)
