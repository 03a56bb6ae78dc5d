"""Tensor.uniform_ / normal_ / bernoulli_ / bernoulli and gm.bernoulli (the global Philox generator), and
torchvision's StochasticDepth run unmodified (torch.empty(size).bernoulli_(q), Tensor.div_)."""
import numpy as np
import pytest

import gpumemnet as gm


def test_bernoulli_values_and_replay():
    gm.manual_seed(5)
    state = gm.get_rng_state()
    x = gm.empty(20000).bernoulli_(0.3)
    v = x.numpy()
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert abs(v.mean() - 0.3) < 0.02
    gm.set_rng_state(state)
    np.testing.assert_array_equal(gm.empty(20000).bernoulli_(0.3).numpy(), v)  # replayable
    gm.set_rng_state(state)
    u = gm.empty(20000).uniform_().numpy()
    np.testing.assert_array_equal(v, (u < np.float32(0.3)).astype(np.float32))  # u < p of the same stream
    assert np.all(gm.empty(100).bernoulli_(1.0).numpy() == 1) and np.all(gm.empty(100).bernoulli_(0).numpy() == 0)


def test_bernoulli_tensor_p_int_dtype_and_function():
    p = gm.tensor(np.array([0.0, 1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(gm.bernoulli(p).numpy(), [0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(p.bernoulli().numpy(), [0.0, 1.0, 0.0, 1.0])
    i = gm.zeros(50, dtype=gm.int64).bernoulli_(0.5)
    assert i.dtype == gm.int64 and set(np.unique(i.numpy())) <= {0, 1}


def test_uniform_normal():
    gm.manual_seed(1)
    u = gm.empty(10000, dtype=gm.float64).uniform_(-2, 3).numpy()
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    n = gm.empty(10000).normal_(1.0, 2.0).numpy()
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 2.0) < 0.1


def test_errors():
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=1.5"):
        gm.empty(3).bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="expected a floating-point tensor"):
        gm.zeros(3, dtype=gm.int64).uniform_()
    with pytest.raises(TypeError, match="generator: expected a gpumemnet.Generator, got object"):
        gm.empty(3).normal_(generator=object())
    with pytest.raises(RuntimeError):
        gm.zeros(3, requires_grad=True).bernoulli_(0.5)


def test_torchvision_stochastic_depth_runs():
    """torchvision.ops.stochastic_depth's body, with gm in place of torch."""
    x = gm.ones(8, 3, 2, 2, requires_grad=True)
    p, survival = 0.4, 0.6
    gm.manual_seed(2)
    noise = gm.empty([8, 1, 1, 1], dtype=x.dtype, device=x.device)
    noise = noise.bernoulli_(survival)
    noise.div_(survival)
    out = x * noise
    out.sum().backward()
    keep = noise.numpy().reshape(8)
    assert np.all((keep == 0) | np.isclose(keep, 1 / 0.6)) and 0 < (keep == 0).sum() < 8
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(noise.numpy(), (8, 3, 2, 2)), rtol=1e-6)
    assert p + survival == 1.0
