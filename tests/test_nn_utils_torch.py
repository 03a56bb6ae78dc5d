"""gpumemnet.nn.utils against torch.nn.utils: clip_grad_norm_ (every norm order, several dtypes, error_if_nonfinite,
foreach, parameters without gradients, a single tensor), clip_grad_value_, parameters_to_vector and
vector_to_parameters; and that the 2-norm and inf-norm allocate no gradient-sized temporaries."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.nn import utils as U

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (2, 3, 3), (7, 1)]


def _pair(seed=0, dtype="float32", scale=3.0, shapes=SHAPES, none_at=None):
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal(s).astype(np.float64) for s in shapes]
    gs = [rng.standard_normal(s).astype(np.float64) * scale for s in shapes]
    gp, tp = [], []
    for i, (w, g) in enumerate(zip(ws, gs)):
        a = gm.tensor(w, dtype=getattr(gm, dtype), requires_grad=True)
        b = torch.tensor(w, dtype=getattr(torch, dtype), requires_grad=True)
        if i != none_at:
            a.grad = gm.tensor(g, dtype=getattr(gm, dtype))
            b.grad = torch.tensor(g, dtype=getattr(torch, dtype))
        gp.append(a)
        tp.append(b)
    return gp, tp


def _f(t):
    return t.float().numpy() if t.dtype in (gm.bfloat16,) else t.numpy()


@pytest.mark.parametrize("norm_type", [2.0, 2, 1, 0, 3.5, 0.5, math.inf, -math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    gp, tp = _pair(none_at=1)
    got = U.clip_grad_norm_(gp, max_norm, norm_type)
    want = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
    assert isinstance(got, gm.Tensor) and tuple(got.shape) == ()
    assert float(got.item()) == pytest.approx(float(want), rel=2e-6)
    assert gp[1].grad is None
    for a, b in zip(gp, tp):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=3e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_clip_grad_norm_dtypes(dtype):
    gp, tp = _pair(dtype=dtype)
    got = U.clip_grad_norm_(gp, 1.0, foreach=True)
    want = torch.nn.utils.clip_grad_norm_(tp, 1.0, foreach=True)
    assert got.dtype == getattr(gm, dtype)
    rel = 1e-12 if dtype == "float64" else 1e-2
    assert float(got.item()) == pytest.approx(float(want.double()), rel=rel)
    for a, b in zip(gp, tp):
        np.testing.assert_allclose(_f(a.grad), b.grad.double().numpy(), rtol=rel, atol=rel * 1e-2)


def test_single_tensor_and_no_gradients():
    gp, tp = _pair()
    got = U.clip_grad_norm_(gp[0], 0.1)
    want = torch.nn.utils.clip_grad_norm_(tp[0], 0.1)
    assert float(got.item()) == pytest.approx(float(want), rel=1e-6)
    np.testing.assert_allclose(gp[0].grad.numpy(), tp[0].grad.numpy(), rtol=1e-6)
    p = gm.zeros(3, requires_grad=True)
    assert float(U.clip_grad_norm_([p], 1.0).item()) == 0.0 == float(torch.nn.utils.clip_grad_norm_(
        [torch.zeros(3, requires_grad=True)], 1.0))
    assert float(U.clip_grad_norm_((q for q in [p]), 1.0).item()) == 0.0  # a generator is fine


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_error_if_nonfinite(bad):
    gp, tp = _pair()
    gp[0].grad = gm.full((3, 4), bad)
    tp[0].grad = torch.full((3, 4), bad)
    with pytest.raises(RuntimeError) as t:
        torch.nn.utils.clip_grad_norm_(tp, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as g:
        U.clip_grad_norm_(gp, 1.0, error_if_nonfinite=True)
    assert str(g.value).replace("order 2.0", "order 2") == str(t.value).replace("order 2.0", "order 2")
    got = U.clip_grad_norm_(gp, 1.0)  # without the flag: scaled by the non-finite norm, as torch does
    want = torch.nn.utils.clip_grad_norm_(tp, 1.0)
    assert math.isnan(float(got.item())) == math.isnan(float(want)) or math.isinf(float(want))
    np.testing.assert_array_equal(np.isnan(gp[2].grad.numpy()), np.isnan(tp[2].grad.numpy()))


def test_deprecated_clip_grad_norm():
    gp, _ = _pair()
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        U.clip_grad_norm(gp, 1.0)


@pytest.mark.parametrize("clip", [0.5, 2, 10.0])
def test_clip_grad_value_matches_torch(clip):
    gp, tp = _pair(none_at=2)
    assert U.clip_grad_value_(gp, clip, foreach=False) is None
    torch.nn.utils.clip_grad_value_(tp, clip)
    for a, b in zip(gp, tp):
        if b.grad is not None:
            np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    U.clip_grad_value_(gp[0], 0.1)
    assert np.abs(gp[0].grad.numpy()).max() <= 0.1 + 1e-7


def test_clip_allocates_no_gradient_sized_temporaries():
    g = gm.randn(1000, 1000)
    p = gm.zeros(1000, 1000, requires_grad=True)
    p.grad = g
    base = gm.memory.memory_allocated("cpu")
    gm.memory.reset_peak_memory_stats("cpu")
    for norm in (2.0, math.inf):
        U.clip_grad_norm_([p], 1.0, norm)
    peak = gm.memory.max_memory_allocated("cpu")
    assert peak - base < 4096, peak - base
    gm.memory.reset_peak_memory_stats("cpu")
    U.clip_grad_norm_([p], 1.0, 1.0)  # the test can fail: other orders do copy the gradient
    assert gm.memory.max_memory_allocated("cpu") - base >= 4 * 10 ** 6


def test_meta_parameters():
    p = gm.zeros(10, 10, device="meta", requires_grad=True)
    p.grad = gm.zeros(10, 10, device="meta")
    n = U.clip_grad_norm_([p], 1.0)
    assert n.device == p.device and tuple(n.shape) == ()


def test_parameters_to_vector_and_back():
    gp, tp = _pair()
    v = U.parameters_to_vector(gp)
    w = torch.nn.utils.parameters_to_vector(tp)
    np.testing.assert_array_equal(v.detach().numpy(), w.detach().numpy())
    assert v.grad_fn is not None  # differentiable, as torch's
    v.sum().backward()
    assert (gp[0].grad.numpy() != 0).all()
    new = np.arange(v.numel(), dtype=np.float32)
    U.vector_to_parameters(gm.tensor(new), gp)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tp)
    for a, b in zip(gp, tp):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        U.vector_to_parameters([1.0], gp)
