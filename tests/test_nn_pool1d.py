"""1-D pooling, adaptive max pooling and channel dropout of 1-D/3-D inputs (nn/_functional_pool1d.py,
nn/_functional_layers.py: compositions over the 2-D ops; adaptive_max_pool2d is a C op, csrc/ops_pool.c): values and float64 gradients against PyTorch and finite
differences, indices, errors, meta bytes against the CPU, and the dropout masks' channel structure."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet.nn import functional as F
from gradcheck import assert_close, check_against_torch, gradcheck
from nnops_util import R, T

POOL1D = [  # gm module, torch module name, args, kwargs
    ("MaxPool1d", (3,), {}), ("MaxPool1d", (3, 2), {"padding": 1, "dilation": 2}),
    ("MaxPool1d", (2,), {"ceil_mode": True}), ("AvgPool1d", (3, 2), {"padding": 1}),
    ("AvgPool1d", (4,), {"count_include_pad": False, "padding": 2}), ("AdaptiveAvgPool1d", (4,), {}),
    ("AdaptiveMaxPool1d", (3,), {}), ("AdaptiveMaxPool1d", (5,), {}), ("AdaptiveMaxPool2d", ((2, 3),), {}),
    ("AdaptiveMaxPool2d", (1,), {}), ("AdaptiveMaxPool2d", ((None, 2),), {}), ("AdaptiveMaxPool2d", ((4, 5),), {}),
    ("AdaptiveMaxPool2d", (7,), {}),  # uneven, overlapping and single-element windows
]


@pytest.mark.parametrize("name,args,kw", POOL1D)
def test_against_torch(name, args, kw):
    torch = pytest.importorskip("torch")
    x = R(2, 3, 6, 12) if "2d" in name else R(2, 3, 12)
    check_against_torch(getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw), [x],
                        atol=1e-12, rtol=1e-12, what=f"{name}{args}{kw}")
    gradcheck(getattr(nn, name)(*args, **kw), [T(x, requires_grad=True)], what=name)


def test_unbatched_and_indices_like_torch():
    torch = pytest.importorskip("torch")
    x = R(3, 11)
    got, idx = F.max_pool1d(T(x), 3, 2, return_indices=True)
    ref, ridx = torch.nn.functional.max_pool1d(torch.tensor(x), 3, 2, return_indices=True)
    assert_close(got, ref.numpy(), 0, 0, what="max_pool1d unbatched")
    np.testing.assert_array_equal(idx.numpy(), ridx.numpy())
    x4 = R(2, 2, 4, 6)
    for size in ((2, 3), (3, 4), (5, 7)):
        got, idx = F.adaptive_max_pool2d(T(x4), size, return_indices=True)
        ref, ridx = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x4), size, return_indices=True)
        np.testing.assert_array_equal(idx.numpy(), ridx.numpy())
        assert_close(got, ref.numpy(), 0, 0, what=f"adaptive_max_pool2d {size}")
    xn = x4.copy()
    xn[0, 0, 1, 1] = np.nan  # a NaN wins its windows, as in PyTorch
    got, idx = F.adaptive_max_pool2d(T(xn), (3, 4), return_indices=True)
    ref, ridx = torch.nn.functional.adaptive_max_pool2d(torch.tensor(xn), (3, 4), return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), ridx.numpy())
    assert_close(F.avg_pool1d(T(x), 2), torch.nn.functional.avg_pool1d(torch.tensor(x), 2).numpy(), 1e-15, 1e-15)


def test_errors():
    with pytest.raises(RuntimeError, match=r"expected a 2-D \(C, L\) or 3-D \(N, C, L\) input"):
        F.max_pool1d(gm.zeros(1, 2, 3, 4), 2)
    with pytest.raises(TypeError, match="kernel_size must be an int"):
        F.avg_pool1d(gm.zeros(1, 2, 8), (2, 2))
    with pytest.raises(ValueError, match="output_size must be non-negative"):
        F.adaptive_max_pool2d(gm.zeros(1, 2, 5, 4), -1)
    with pytest.raises(TypeError, match="output_size must be an int or a pair"):
        F.adaptive_max_pool2d(gm.zeros(1, 2, 5, 4), 1.5)
    with pytest.raises(RuntimeError, match="3-D"):
        F.adaptive_max_pool2d(gm.zeros(5, 4), 1)
    with pytest.raises(RuntimeError, match="Expected 2D or 3D input, but received a 4D input"):
        F.dropout1d(gm.zeros(1, 2, 3, 4))
    with pytest.warns(UserWarning, match="Received a 3-D input to dropout3d"):  # PyTorch's deprecated form runs
        F.dropout3d(gm.zeros(1, 2, 3))


@pytest.mark.parametrize("fn", [lambda x: F.max_pool1d(x, 3, 2), lambda x: F.avg_pool1d(x, 2),
                                lambda x: F.adaptive_avg_pool1d(x, 5), lambda x: F.adaptive_max_pool1d(x, 4),
                                lambda x: F.adaptive_max_pool1d(x, 7),
                                lambda x: F.adaptive_max_pool2d(x.reshape(4, 6, 5, 8), (3, 3))])
def test_meta_bytes_equal_cpu(fn):
    def run(device):
        a = gm.randn(4, 6, 40).to(device).requires_grad_()
        gm.memory.reset_peak_memory_stats(device)
        base = gm.memory.memory_allocated(device)
        out = fn(a)
        held = gm.memory.memory_allocated(device) - base
        out.sum().backward()
        return held, gm.memory.max_memory_allocated(device) - base, tuple(out.shape)
    assert run("cpu") == run("meta")


@pytest.mark.parametrize("shape,fn", [((4, 6, 9), F.dropout1d), ((6, 9), F.dropout1d), ((3, 5, 2, 3, 4), F.dropout3d),
                                      ((5, 2, 3, 4), F.dropout3d)])
def test_channel_dropout(shape, fn):
    x = gm.ones(*shape, dtype=gm.float64)
    gm.manual_seed(3)
    out = fn(x, 0.5).numpy()
    lead = 2 if fn is F.dropout1d and len(shape) == 3 or len(shape) == 5 else 1
    per_channel = out.reshape(int(np.prod(shape[:lead])), -1)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert all(len(set(row)) == 1 for row in per_channel)  # whole channels kept or dropped
    assert 0 < (per_channel[:, 0] == 0).sum() < per_channel.shape[0]
    a = gm.ones(*shape, dtype=gm.float64, requires_grad=True)
    gm.manual_seed(3)
    fn(a, 0.5).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), out)  # the gradient is the mask's scale
    assert fn(x, 0.5, training=False) is x
    assert isinstance(nn.Dropout1d(0.2), nn.Module) and repr(nn.Dropout3d(0.2)) == "Dropout3d(p=0.2, inplace=False)"


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout(feature):
    """Kept units x a + alpha' a p, dropped ones alpha' a (p - 1) (PyTorch's formula); the gradient is a on kept
    units and 0 on dropped ones; whole channels for the feature variant; the SELU fixed point's mean and
    variance are kept."""
    p, ap = 0.3, 1.7580993408473766
    a = 1.0 / ((ap ** 2 * p + 1) * (1 - p)) ** 0.5
    fn = F.feature_alpha_dropout if feature else F.alpha_dropout
    x = R(40, 8, 5)
    xg = T(x, requires_grad=True)
    gm.manual_seed(4)
    out = fn(xg, p, training=True)
    out.sum().backward()
    o, g = out.detach().numpy(), xg.grad.numpy()
    kept = np.isclose(g, a)
    assert np.all(kept | (g == 0)) and 0.2 < 1 - kept.mean() < 0.4
    np.testing.assert_allclose(o, np.where(kept, x * a + ap * a * p, ap * a * (p - 1)), rtol=1e-12, atol=1e-12)
    if feature:
        assert all(len(set(row)) == 1 for row in kept.reshape(40 * 8, 5))
    assert fn(xg, p) is xg  # the function's default is training=False, as PyTorch's
    np.testing.assert_array_equal(fn(T(x), 1.0, training=True).numpy(), np.zeros_like(x))
    gm.manual_seed(1)
    y = nn.AlphaDropout(0.2).train()(gm.randn(200000, dtype=gm.float64)).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.std() - 1) < 0.01
    with pytest.raises(ValueError, match="between 0 and 1"):
        fn(T(x), 1.5, training=True)
