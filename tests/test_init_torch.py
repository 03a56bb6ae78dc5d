"""gpumemnet.nn.init against torch.nn.init: gains, the std / bound each initialiser targets (measured on large
tensors), exact structure (orthogonality, truncation bounds, eye, dirac, sparsity), meta tensors, deprecated
aliases, and the same errors."""
import math
import warnings

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.nn import init

torch = pytest.importorskip("torch")

NONLINEARITIES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"]


@pytest.mark.parametrize("name", NONLINEARITIES)
def test_calculate_gain_matches_torch(name):
    assert init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    if name == "leaky_relu":
        for slope in (0, 0.2, 1, 3):
            assert init.calculate_gain(name, slope) == torch.nn.init.calculate_gain(name, slope)


def test_calculate_gain_errors_like_torch():
    for args in (("swish",), ("leaky_relu", True), ("leaky_relu", "0.1")):
        with pytest.raises(ValueError) as t:
            torch.nn.init.calculate_gain(*args)
        with pytest.raises(ValueError) as g:
            init.calculate_gain(*args)
        assert str(g.value) == str(t.value)


def _std_case(fn, shape, **kw):
    """(gm values, torch values) of the same initialiser on tensors of `shape`."""
    t = torch.empty(shape)
    getattr(torch.nn.init, fn)(t, **kw)
    g = gm.empty(*shape)
    assert getattr(init, fn)(g, **kw) is g
    return g.numpy().ravel(), t.numpy().ravel()


@pytest.mark.parametrize("fn,shape,kw", [
    ("xavier_uniform_", (256, 128, 3, 3), {}),
    ("xavier_uniform_", (400, 300), {"gain": 2.5}),
    ("xavier_normal_", (256, 128, 3, 3), {"gain": 0.5}),
    ("kaiming_uniform_", (128, 64, 3, 3), {}),
    ("kaiming_uniform_", (128, 64, 3, 3), {"a": math.sqrt(5)}),
    ("kaiming_uniform_", (64, 128, 3, 3), {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_normal_", (128, 64, 3, 3), {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_normal_", (300, 500), {"a": 0.2, "nonlinearity": "leaky_relu"}),
    ("kaiming_normal_", (300, 500), {"nonlinearity": "tanh"}),
    ("trunc_normal_", (200000,), {"std": 0.02}),
    ("trunc_normal_", (200000,), {"mean": 1.0, "std": 2.0, "a": -1.0, "b": 2.0}),
    ("trunc_normal_", (200000,), {"mean": 0.0, "std": 1.0, "a": 0.5, "b": 3.0}),
    ("normal_", (200000,), {"mean": 3.0, "std": 0.5}),
    ("uniform_", (200000,), {"a": -2.0, "b": 5.0}),
])
def test_distribution_matches_torch(fn, shape, kw):
    g, t = _std_case(fn, shape, **kw)
    n = g.size
    scale = t.std()
    # Mean and std within a few standard errors of torch's; the bounds (support) the same.
    assert abs(g.mean() - t.mean()) < 6 * scale / math.sqrt(n) + 1e-7
    assert g.std() == pytest.approx(t.std(), rel=0.02)
    if fn.endswith("uniform_"):  # bounded: the same support
        assert float(g.min()) == pytest.approx(float(t.min()), abs=0.01 * float(scale))
        assert float(g.max()) == pytest.approx(float(t.max()), abs=0.01 * float(scale))


def test_trunc_normal_bounds_are_exact():
    g = gm.empty(100000)
    init.trunc_normal_(g, mean=0.0, std=1.0, a=-0.3, b=0.2)
    a = g.numpy()
    assert a.min() >= -0.3 and a.max() <= 0.2
    assert a.min() < -0.29 and a.max() > 0.19  # the whole interval is used
    with pytest.warns(UserWarning, match="more than 2 std"):
        init.trunc_normal_(gm.empty(10), mean=5.0, std=1.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("shape,gain", [((50, 50), 1.0), ((30, 80), 2.0), ((80, 30), 0.5), ((16, 8, 3, 3), 1.0),
                                        ((4, 100, 5), 1.0)])
def test_orthogonal(shape, gain):
    g = gm.empty(*shape)
    assert init.orthogonal_(g, gain=gain) is g
    rows = shape[0]
    m = g.numpy().reshape(rows, -1).astype(np.float64)
    k = min(m.shape)
    gram = m @ m.T if rows <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(k), atol=1e-5 * max(1.0, gain ** 2))
    t = torch.empty(shape)
    torch.nn.init.orthogonal_(t, gain=gain)  # the same norms as torch's (the values are a different draw)
    assert np.linalg.norm(m) == pytest.approx(float(t.norm()), rel=1e-5)


def test_orthogonal_is_random_and_seeded():
    gm.manual_seed(3)
    a = init.orthogonal_(gm.empty(6, 6)).numpy()
    gm.manual_seed(3)
    b = init.orthogonal_(gm.empty(6, 6)).numpy()
    c = init.orthogonal_(gm.empty(6, 6)).numpy()
    assert (a == b).all() and not np.allclose(a, c)


def test_eye_dirac_constant_like_torch():
    for shape in ((3, 5), (5, 3), (4, 4)):
        t, g = torch.empty(shape), gm.empty(*shape)
        np.testing.assert_array_equal(init.eye_(g).numpy(), torch.nn.init.eye_(t).numpy())
    for shape, groups in (((4, 2, 3), 1), ((6, 4, 3, 3), 2), ((6, 3, 5, 5), 3), ((2, 2, 3, 3, 3), 1),
                          ((8, 2, 2, 4), 4)):
        t, g = torch.empty(shape), gm.empty(*shape)
        np.testing.assert_array_equal(init.dirac_(g, groups).numpy(), torch.nn.init.dirac_(t, groups).numpy())
    for fn, args in (("constant_", (0.25,)), ("zeros_", ()), ("ones_", ())):
        t, g = torch.empty(3, 4), gm.empty(3, 4)
        np.testing.assert_array_equal(getattr(init, fn)(g, *args).numpy(),
                                      getattr(torch.nn.init, fn)(t, *args).numpy())


def test_sparse():
    g = gm.empty(40, 30)
    init.sparse_(g, sparsity=0.25, std=0.5)
    a = g.numpy()
    assert ((a == 0).sum(axis=0) == math.ceil(0.25 * 40)).all()
    patterns = {tuple(np.flatnonzero(a[:, j] == 0)) for j in range(30)}
    assert len(patterns) > 20  # each column has its own random rows
    assert a[a != 0].std() == pytest.approx(0.5, rel=0.1)


def test_meta_tensors_draw_nothing_but_keep_shape():
    for fn, shape, args in (("orthogonal_", (8, 4), ()), ("trunc_normal_", (5,), ()), ("eye_", (3, 3), ()),
                            ("dirac_", (2, 2, 3, 3), ()), ("sparse_", (4, 4), (0.5,)),
                            ("kaiming_normal_", (4, 4), ())):
        m = gm.empty(*shape, device="meta")
        assert getattr(init, fn)(m, *args) is m and tuple(m.shape) == shape


def test_generator_advances_the_same_on_meta():
    gm.manual_seed(7)
    init.trunc_normal_(gm.empty(100, device="meta"))
    init.orthogonal_(gm.empty(10, 10, device="meta"))
    after_meta = gm.rand(3).numpy()
    gm.manual_seed(7)
    init.trunc_normal_(gm.empty(100))
    init.orthogonal_(gm.empty(10, 10))
    np.testing.assert_array_equal(gm.rand(3).numpy(), after_meta)


def test_other_dtypes():
    for dt in (gm.float64, gm.float16, gm.bfloat16):
        g = init.orthogonal_(gm.empty(8, 8, dtype=dt))
        assert g.dtype == dt
        m = (g.numpy() if dt == gm.float64 else g.float().numpy()).astype(np.float64)
        np.testing.assert_allclose(m @ m.T, np.eye(8), atol=1e-12 if dt == gm.float64 else 3e-2)
        a = init.trunc_normal_(gm.empty(1000, dtype=dt), std=0.02).float().numpy()
        assert np.abs(a).max() <= 2.0 and 0.01 < a.std() < 0.03


def test_deprecated_aliases_warn_like_torch():
    for name in ("uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
                 "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"):
        assert hasattr(torch.nn.init, name)
        assert getattr(init, name).__name__ == name
    with pytest.warns(FutureWarning, match="nn.init.xavier_uniform_"):
        init.xavier_uniform(gm.empty(3, 4))


@pytest.mark.parametrize("fn,shape,args", [
    ("orthogonal_", (5,), ()), ("eye_", (3, 3, 3), ()), ("dirac_", (3, 3), ()), ("dirac_", (3, 2, 3, 3), (2,)),
    ("sparse_", (3,), (0.5,)), ("xavier_uniform_", (5,), ()), ("kaiming_normal_", (4, 4), (0, "fan_avg")),
])
def test_argument_errors_like_torch(fn, shape, args):
    with pytest.raises(ValueError) as t:
        getattr(torch.nn.init, fn)(torch.empty(shape), *args)
    with pytest.raises(ValueError) as g:
        getattr(init, fn)(gm.empty(*shape), *args)
    assert str(g.value) == str(t.value)


def test_zero_element_kaiming_warns_like_torch():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.nn.init.kaiming_uniform_(torch.empty(0, 3))
    assert w
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(gm.empty(0, 3))


def test_inverse_normal_cdf_matches_torch():
    from gpumemnet.nn.init import _ndtri
    p = np.concatenate([[0.0, 1.0, 1e-300, 1e-12, 0.02425, 1 - 0.02425], np.linspace(1e-6, 1 - 1e-6, 2001)])
    want = torch.special.ndtri(torch.tensor(p, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(_ndtri(p), want, rtol=2e-9, atol=1e-12)
