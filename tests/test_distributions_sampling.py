"""gm.distributions' sampling: shapes, dtypes and devices of sample / rsample, the samples' support, their
empirical mean and variance against the distribution's (many draws, fixed seed), reproducibility under
gm.manual_seed, the reparameterization gradients of rsample; argument validation on and off; the
torch.distributions names under gm.as_torch()."""
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

D = gm.distributions
N = 40000


def _f(values, dev, dtype=gm.float64, grad=False):
    return gm.tensor(values, dtype=dtype, device=dev, requires_grad=grad)


DISTS = {
    "Normal": lambda d: D.Normal(_f([0.0, 3.0], d), _f([1.0, 0.5], d)),
    "Bernoulli": lambda d: D.Bernoulli(probs=_f([0.2, 0.7], d)),
    "Bernoulli logits": lambda d: D.Bernoulli(logits=_f([-1.0, 2.0], d)),
    "Categorical": lambda d: D.Categorical(probs=_f([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], d)),
    "Uniform": lambda d: D.Uniform(_f([0.0, -2.0], d), _f([1.0, 3.0], d)),
    "Independent": lambda d: D.Independent(D.Normal(_f([[0.0, 1.0]], d), _f([2.0, 0.3], d)), 1),
    "OneHotCategorical": lambda d: D.OneHotCategorical(logits=_f([0.0, 1.0, -1.0], d)),
    "OneHotCategoricalStraightThrough": lambda d: D.OneHotCategoricalStraightThrough(probs=_f([0.3, 0.7], d)),
    "Laplace": lambda d: D.Laplace(_f([0.0, 2.0], d), _f([1.0, 0.5], d)),
    "Exponential": lambda d: D.Exponential(_f([0.5, 4.0], d)),
    "LogNormal": lambda d: D.LogNormal(_f([0.0, 0.5], d), _f([0.25, 0.5], d)),
    "MultivariateNormal": lambda d: D.MultivariateNormal(_f([1.0, -1.0], d), _f([[2.0, 0.8], [0.8, 1.0]], d)),
    "Poisson": lambda d: D.Poisson(_f([0.0, 0.7, 6.0, 25.0, 400.0], d)),
    "Geometric": lambda d: D.Geometric(probs=_f([0.1, 0.5, 1.0], d)),
    "Binomial": lambda d: D.Binomial(_f([0.0, 5.0, 30.0, 200.0, 1000.0], d), probs=_f([0.3, 0.9, 0.5, 0.7, 0.004], d)),
    "Gamma": lambda d: D.Gamma(_f([0.05, 0.6, 1.0, 4.0, 300.0], d), _f([1.0, 2.0, 0.5, 1.0, 3.0], d)),
    "Beta": lambda d: D.Beta(_f([0.3, 2.0, 5.0], d), _f([0.5, 2.0, 1.0], d)),
    "Dirichlet": lambda d: D.Dirichlet(_f([[0.2, 1.0, 3.0], [5.0, 5.0, 5.0]], d)),
    "HalfNormal": lambda d: D.HalfNormal(_f([0.5, 2.0], d)),
    "Gumbel": lambda d: D.Gumbel(_f([0.0, -2.0], d), _f([1.0, 0.3], d)),
    "Chi2": lambda d: D.Chi2(_f([0.5, 3.0, 20.0], d)),
    "StudentT": lambda d: D.StudentT(_f([5.0, 12.0], d), _f([1.0, -1.0], d), _f([0.5, 2.0], d)),
    "Multinomial": lambda d: D.Multinomial(7, probs=_f([[0.1, 0.3, 0.6], [0.5, 0.5, 0.0]], d)),
    "MixtureSameFamily": lambda d: D.MixtureSameFamily(D.Categorical(probs=_f([0.3, 0.7], d)),
                                                       D.Normal(_f([-2.0, 1.0], d), _f([0.5, 1.0], d))),
    "NegativeBinomial": lambda d: D.NegativeBinomial(_f([2.0, 0.5, 30.0], d), probs=_f([0.3, 0.8, 0.5], d)),
    "Pareto": lambda d: D.Pareto(_f([1.0, 0.5], d), _f([5.0, 9.0], d)),
    "Weibull": lambda d: D.Weibull(_f([1.0, 3.0], d), _f([0.8, 4.0], d)),
    "Kumaraswamy": lambda d: D.Kumaraswamy(_f([0.5, 2.0], d), _f([3.0, 0.7], d)),
    "InverseGamma": lambda d: D.InverseGamma(_f([6.0, 9.0], d), _f([1.0, 4.0], d)),
    "FisherSnedecor": lambda d: D.FisherSnedecor(_f([4.0, 12.0], d), _f([15.0, 30.0], d)),
    "LogisticNormal": lambda d: D.LogisticNormal(_f([0.0, 1.0], d), _f([1.0, 0.5], d)),
    "ContinuousBernoulli": lambda d: D.ContinuousBernoulli(probs=_f([0.1, 0.5, 0.8], d)),
    "LowRankMultivariateNormal": lambda d: D.LowRankMultivariateNormal(
        _f([1.0, -1.0, 0.0], d), _f([[1.0], [0.5], [-1.0]], d), _f([0.5, 1.0, 2.0], d)),
    "GeneralizedPareto": lambda d: D.GeneralizedPareto(_f([0.0, 1.0, -1.0], d), _f([1.0, 2.0, 0.5], d),
                                                       _f([-0.4, 0.0, 0.1], d)),
    "Wishart": lambda d: D.Wishart(_f([5.0, 9.0], d), _f([[2.0, 0.5], [0.5, 1.0]], d)),
    "TransformedDistribution": lambda d: D.TransformedDistribution(D.Uniform(_f([0.0], d), _f([1.0], d)),
                                                                   [D.AffineTransform(2.0, -3.0)]),
}


@pytest.mark.parametrize("name", list(DISTS))
def test_samples_have_the_distributions_shape_support_and_moments(device, name):
    dist = DISTS[name](device)
    gm.manual_seed(0)
    s = dist.sample((N,))
    assert tuple(s.shape) == (N,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
    assert s.device.type == device and not s.requires_grad
    expected_dtype = gm.int64 if name == "Categorical" else gm.float64
    if name == "Multinomial":
        assert (to_np(s).sum(-1) == 7).all()
    assert s.dtype == expected_dtype
    assert bool(dist.support.check(s).all()), f"{name}: a sample outside the support"
    x = to_np(s)
    if name == "TransformedDistribution":  # 2 - 3 U: mean 0.5, variance 9 / 12 (it has no .mean)
        mean, var = np.array([0.5]), np.array([0.75])
    elif name == "LogisticNormal":  # no closed-form moments: the support check above is the test
        return
    elif name == "StudentT":  # (variance df / (df - 2): heavy tails, a looser check below)
        mean, var = to_np(dist.mean), to_np(dist.variance)
        x = np.clip(x, -60, 60)
    elif name == "Categorical":
        mean = (to_np(dist.probs) * np.arange(3)).sum(-1)
        var = (to_np(dist.probs) * np.arange(3) ** 2).sum(-1) - mean ** 2
    else:
        mean, var = to_np(dist.mean), to_np(dist.variance)
    sem = np.sqrt(var / N)
    np.testing.assert_array_less(np.abs(x.mean(0) - mean), 5 * sem + 1e-12, err_msg=f"{name} mean")
    if name in ("StudentT", "NegativeBinomial", "Pareto", "InverseGamma", "FisherSnedecor", "GeneralizedPareto",
                "Wishart"):
        np.testing.assert_allclose(x.var(0), var, rtol=0.12, err_msg=f"{name} variance")
        return
    if name == "Gamma":  # shape 0.05: a heavy right tail, the sample variance converges slowly
        x, var = x[:, 1:], var[1:]
    np.testing.assert_allclose(x.var(0), var, rtol=0.06, atol=1e-12, err_msg=f"{name} variance")
    if name in ("MultivariateNormal", "LowRankMultivariateNormal"):
        np.testing.assert_allclose(np.cov(x.T), to_np(dist.covariance_matrix), atol=0.08)


@pytest.mark.parametrize("name", list(DISTS))
def test_manual_seed_reproduces_samples(name):
    dist = DISTS[name]("cpu")
    gm.manual_seed(123)
    a = to_np(dist.sample((5,)))
    gm.manual_seed(123)
    b = to_np(dist.sample((5,)))
    np.testing.assert_array_equal(a, b)
    assert tuple(dist.sample().shape) == tuple(dist.batch_shape) + tuple(dist.event_shape)


# rsample's gradient: d sample / d parameter, written from the sample itself (the reparameterization)
RSAMPLE = {
    "Normal": (lambda p: D.Normal(*p), [[0.5, -1.0], [1.0, 2.0]],
               lambda x, p: [np.ones_like(x), (x - p[0]) / p[1]]),
    "Laplace": (lambda p: D.Laplace(*p), [[0.5, -1.0], [1.0, 2.0]],
                lambda x, p: [np.ones_like(x), (x - p[0]) / p[1]]),
    "Exponential": (lambda p: D.Exponential(*p), [[0.5, 3.0]], lambda x, p: [-x / p[0]]),
    "Uniform": (lambda p: D.Uniform(*p), [[0.0, -1.0], [1.0, 3.0]],
                lambda x, p: [1 - (x - p[0]) / (p[1] - p[0]), (x - p[0]) / (p[1] - p[0])]),
    "LogNormal": (lambda p: D.LogNormal(*p), [[0.5, -1.0], [0.3, 0.7]],
                  lambda x, p: [x, x * (np.log(x) - p[0]) / p[1]]),
    "Independent": (lambda p: D.Independent(D.Normal(*p), 1), [[0.5, -1.0], [1.0, 2.0]],
                    lambda x, p: [np.ones_like(x), (x - p[0]) / p[1]]),
    "Cauchy": (lambda p: D.Cauchy(*p), [[0.5, -1.0], [1.0, 2.0]], lambda x, p: [np.ones_like(x), (x - p[0]) / p[1]]),
    "Gumbel": (lambda p: D.Gumbel(*p), [[0.5, -1.0], [1.0, 2.0]], lambda x, p: [np.ones_like(x), (x - p[0]) / p[1]]),
    "HalfNormal": (lambda p: D.HalfNormal(*p), [[1.0, 2.0]], lambda x, p: [x / p[0]]),
    "HalfCauchy": (lambda p: D.HalfCauchy(*p), [[1.0, 2.0]], lambda x, p: [x / p[0]]),
    "StudentT loc scale": (lambda p: D.StudentT(4.0, *p), [[0.5, -1.0], [1.0, 2.0]],
                           lambda x, p: [np.ones_like(x), (x - p[0]) / p[1]]),
    "Pareto": (lambda p: D.Pareto(p[0], 3.0), [[1.0, 2.0]], lambda x, p: [x / p[0]]),
    "Weibull": (lambda p: D.Weibull(p[0], 1.5), [[1.0, 2.0]], lambda x, p: [x / p[0]]),
    "InverseGamma rate": (lambda p: D.InverseGamma(2.0, p[0]), [[1.0, 2.0]], lambda x, p: [x / p[0]]),
    "RelaxedBernoulli": (lambda p: D.RelaxedBernoulli(gm.tensor(0.5, dtype=gm.float64), logits=p[0]),
                         [[0.3, -1.0]], lambda x, p: [x * (1 - x) / 0.5]),
}


@pytest.mark.parametrize("name", list(RSAMPLE))
def test_rsample_gradient_is_the_reparameterization(device, name):
    make, values, expected = RSAMPLE[name]
    params = [_f(v, device, grad=True) for v in values]
    dist = make(params)
    assert dist.has_rsample
    gm.manual_seed(1)
    x = dist.rsample((7,))
    assert x.requires_grad and tuple(x.shape) == (7, 2)
    x.sum().backward()
    xs = to_np(x)
    for p, want in zip(params, expected(xs, [np.array(v) for v in values])):
        np.testing.assert_allclose(to_np(p.grad), want.sum(0), rtol=1e-10, atol=1e-12)


def test_multivariate_normal_rsample_gradient(device):
    loc = _f([0.5, -1.0], device, grad=True)
    tril = _f([[1.0, 0.0], [0.5, 2.0]], device, grad=True)
    dist = D.MultivariateNormal(loc, scale_tril=tril)
    gm.manual_seed(2)
    x = dist.rsample((6,))
    w = np.arange(12.0).reshape(6, 2)
    (x * gm.tensor(w, dtype=gm.float64, device=device)).sum().backward()
    eps = np.linalg.solve(np.array([[1.0, 0.0], [0.5, 2.0]]), (to_np(x) - [0.5, -1.0]).T).T
    np.testing.assert_allclose(to_np(loc.grad), w.sum(0), rtol=1e-10)
    np.testing.assert_allclose(to_np(tril.grad), w.T @ eps, rtol=1e-10, atol=1e-12)  # L @ eps: all of L


def test_straight_through_gradient_is_the_probs(device):
    probs = _f([0.3, 0.7], device, grad=True)
    dist = D.OneHotCategoricalStraightThrough(probs=probs)
    x = dist.rsample((4,))
    (x * gm.tensor([1.0, 2.0], dtype=gm.float64, device=device)).sum().backward()
    # probs are normalized by their sum: d/dp_i of sum_j c_j p_j / sum p = (c_i - sum_j c_j p_j) / sum p
    np.testing.assert_allclose(to_np(probs.grad), 4 * (np.array([1.0, 2.0]) - (0.3 + 1.4)), rtol=1e-10)


def test_sample_has_no_gradient_and_bernoulli_has_no_rsample():
    p = _f([0.5], "cpu", grad=True)
    assert not D.Normal(p, 1.0).sample().requires_grad
    assert not D.Bernoulli(probs=p).has_rsample
    with pytest.raises(NotImplementedError):
        D.Bernoulli(probs=p).rsample()


def test_validation_can_be_turned_off():
    bad = gm.tensor([-1.0])
    with pytest.raises(ValueError, match="scale"):
        D.Normal(0.0, bad)
    d = D.Normal(0.0, bad, validate_args=False)
    assert math.isnan(float(d.log_prob(gm.tensor([0.0]))))
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, bad)
        D.Uniform(1.0, 0.0)
        assert D.Uniform(0.0, 1.0).log_prob(gm.tensor(2.0)).item() == -math.inf
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="Uniform is not defined"):
        D.Uniform(1.0, 0.0)
    assert D.Normal(0.0, 1.0, validate_args=True).expand((3,))._validate_args


def test_constraints_check():
    c = D.constraints
    x = gm.tensor([-1.0, 0.0, 0.5, 1.0, float("nan")])
    assert to_np(c.real.check(x)).tolist() == [True, True, True, True, False]
    assert to_np(c.positive.check(x)).tolist() == [False, False, True, True, False]
    assert to_np(c.nonnegative.check(x)).tolist() == [False, True, True, True, False]
    assert to_np(c.unit_interval.check(x)).tolist() == [False, True, True, True, False]
    assert to_np(c.half_open_interval(0.0, 1.0).check(x)).tolist() == [False, True, True, False, False]
    assert to_np(c.boolean.check(x)).tolist() == [False, True, False, True, False]
    assert to_np(c.nonnegative_integer.check(x)).tolist() == [False, True, False, True, False]
    assert to_np(c.integer_interval(-1, 0).check(x)).tolist() == [True, True, False, False, False]
    assert to_np(c.greater_than(0.5).check(x)).tolist() == [False, False, False, True, False]
    assert to_np(c.less_than(0.5).check(x)).tolist() == [True, True, False, False, False]
    assert to_np(c.simplex.check(gm.tensor([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]]))).tolist() == [True, False, False]
    assert to_np(c.one_hot.check(gm.tensor([[0.0, 1.0], [1.0, 1.0]]))).tolist() == [True, False]
    m = gm.tensor([[[2.0, 0.0], [1.0, 1.0]], [[2.0, 1.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, -1.0]]])
    assert to_np(c.lower_triangular.check(m)).tolist() == [True, False, True]
    assert to_np(c.lower_cholesky.check(m)).tolist() == [True, False, False]
    assert to_np(c.positive_definite.check(gm.tensor([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]]]))).tolist() \
        == [True, False]
    assert to_np(c.real_vector.check(gm.tensor([[0.0, float("nan")], [1.0, 2.0]]))).tolist() == [False, True]
    assert (c.real_vector.event_dim, c.simplex.event_dim, c.lower_cholesky.event_dim) == (1, 1, 2)
    assert c.is_dependent(c.dependent) and not c.is_dependent(c.real) and c.is_dependent(D.Uniform.support)
    assert repr(c.independent(c.real, 1)) == "IndependentConstraint(Real(), 1)"
    assert repr(c.interval(0.0, 1.0)) == "Interval(lower_bound=0.0, upper_bound=1.0)"


def test_pytorch_reprs_of_constraints():
    torch = pytest.importorskip("torch")
    for name in ("real", "positive", "nonnegative", "unit_interval", "simplex", "boolean", "one_hot",
                 "nonnegative_integer", "positive_integer", "real_vector", "lower_cholesky", "lower_triangular",
                 "positive_definite", "corr_cholesky", "square", "symmetric"):
        ours, theirs = getattr(D.constraints, name), getattr(torch.distributions.constraints, name)
        assert repr(ours) == repr(theirs), name
        assert (ours.event_dim, ours.is_discrete) == (theirs.event_dim, theirs.is_discrete), name


def test_transforms_invert_and_cache():
    x = gm.tensor([-1.0, 0.25, 2.0], dtype=gm.float64)
    for t in (D.ExpTransform(), D.AffineTransform(1.0, -2.0), D.SigmoidTransform(), D.TanhTransform(),
              D.SoftplusTransform(), D.ComposeTransform([D.ExpTransform(), D.PowerTransform(2.0)])):
        np.testing.assert_allclose(to_np(t.inv(t(x)) if not isinstance(t, D.ComposeTransform) else t.inv(t(x))),
                                   to_np(x) if not isinstance(t, D.ComposeTransform) else to_np(x), rtol=1e-12)
        assert t.inv.inv is t or isinstance(t, D.ComposeTransform)
    cached = D.ExpTransform().with_cache()
    y = cached(x)
    assert cached.inv(y) is x
    assert D.ExpTransform() == D.ExpTransform() and D.AffineTransform(1.0, 2.0) == D.AffineTransform(1.0, 2.0)
    assert D.AffineTransform(1.0, 2.0) != D.AffineTransform(1.0, 3.0)
    assert D.AffineTransform(0.0, -2.0).sign == -1


def test_torch_distributions_under_as_torch():
    code = textwrap.dedent("""
        import gpumemnet as gm
        torch = gm.as_torch()
        from torch.distributions.normal import Normal
        from torch.distributions import constraints, kl_divergence, Categorical
        from torch.distributions.kl import register_kl
        from torch.distributions.transforms import ExpTransform
        import torch.distributions.multivariate_normal as mvn
        assert Normal is gm.distributions.Normal and constraints.real is gm.distributions.constraints.real
        assert mvn.MultivariateNormal is gm.distributions.MultivariateNormal
        d = torch.distributions.Normal(torch.zeros(2), torch.ones(2))
        assert float(kl_divergence(d, d).sum()) == 0.0
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_gamma_rsample_gradient_is_the_implicit_reparameterization(device):
    """dx/dalpha at fixed cdf: -(dP(alpha, x)/dalpha) / pdf(x), P by SciPy's gammainc (a central difference)."""
    special = pytest.importorskip("scipy.special")
    alpha_np = np.array([0.05, 0.3, 1.0, 2.5, 40.0, 900.0])
    rate_np = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])
    alpha = _f(alpha_np, device, grad=True)
    rate = _f(rate_np, device, grad=True)
    gm.manual_seed(3)
    x = D.Gamma(alpha, rate).rsample()
    w = np.arange(1.0, 7.0)
    (x * gm.tensor(w, dtype=gm.float64, device=device)).sum().backward()
    z = to_np(x) * rate_np  # the standard gamma draw
    h = alpha_np * 1e-6
    dP = (special.gammainc(alpha_np + h, z) - special.gammainc(alpha_np - h, z)) / (2 * h)
    pdf = np.exp((alpha_np - 1) * np.log(z) - z - special.gammaln(alpha_np))
    np.testing.assert_allclose(to_np(alpha.grad), w * -dP / pdf / rate_np, rtol=1e-5)
    np.testing.assert_allclose(to_np(rate.grad), w * -z / rate_np ** 2, rtol=1e-12)
    torch = pytest.importorskip("torch")  # PyTorch's own approximation of the same derivative
    theirs = torch._standard_gamma_grad(torch.tensor(alpha_np), torch.tensor(z)).numpy()
    np.testing.assert_allclose(to_np(alpha.grad), w * theirs / rate_np, rtol=2e-3)


@pytest.mark.parametrize("family", ["Dirichlet", "Beta"])
def test_dirichlet_and_beta_rsample_gradients_are_unbiased(family):
    """The mean of d sample / d concentration over many draws is d mean / d concentration."""
    conc = _f([0.7, 2.0, 3.5], "cpu", grad=True)
    gm.manual_seed(4)
    if family == "Dirichlet":
        x = D.Dirichlet(conc).rsample((20000,))[:, 0]
        a = conc.detach().numpy()
        want = np.array([1 / a.sum() - a[0] / a.sum() ** 2, -a[0] / a.sum() ** 2, -a[0] / a.sum() ** 2])
    else:
        x = D.Beta(conc[:1], conc[1:2]).rsample((20000,))[:, 0]
        a, b = conc.detach().numpy()[:2]
        want = np.array([b / (a + b) ** 2, -a / (a + b) ** 2, 0.0])
    (x.sum() / 20000).backward()
    np.testing.assert_allclose(to_np(conc.grad), want, atol=4e-3)


def test_binomial_entropy_and_support_need_one_total_count():
    d = D.Binomial(gm.tensor([3.0, 4.0]), probs=gm.tensor([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count not supported by `entropy`"):
        d.entropy()


@pytest.mark.parametrize("name", list(DISTS))
def test_meta_tensors_give_the_shapes(name):
    """The memory estimator runs models on meta: sampling, rsample's graph and log_prob give the CPU's shapes."""
    cpu = DISTS[name]("cpu")
    meta = DISTS[name]("meta")
    s, s_cpu = meta.sample((3,)), cpu.sample((3,))
    assert s.device.type == "meta" and tuple(s.shape) == tuple(s_cpu.shape) and s.dtype == s_cpu.dtype
    assert tuple(meta.log_prob(s).shape) == tuple(cpu.log_prob(s_cpu).shape)
    if meta.has_rsample:
        assert tuple(meta.rsample((2,)).shape) == tuple(cpu.rsample((2,)).shape)



def test_heavy_tailed_samples_follow_the_cdf():
    """Cauchy and HalfCauchy have no moments: the empirical cdf at a few points matches cdf (Kolmogorov's bound)."""
    gm.manual_seed(5)
    for dist, points in ((D.Cauchy(_f([1.0], "cpu"), _f([2.0], "cpu")), [-5.0, 0.0, 1.0, 3.0, 20.0]),
                         (D.HalfCauchy(_f([1.5], "cpu")), [0.1, 1.0, 1.5, 10.0])):
        x = to_np(dist.sample((N,)))[:, 0]
        for v in points:
            want = float(dist.cdf(_f([v], "cpu"))[0])
            assert abs((x <= v).mean() - want) < 1.6 / math.sqrt(N), (type(dist).__name__, v)


def test_relaxed_distributions_round_to_their_discrete_ones():
    """P(RelaxedBernoulli > 1/2) = probs and argmax of RelaxedOneHotCategorical ~ Categorical(probs), exactly, at
    every temperature (the Gumbel-max trick)."""
    gm.manual_seed(6)
    t = gm.tensor(2.0, dtype=gm.float64)
    rb = D.RelaxedBernoulli(t, probs=_f([0.2, 0.9], "cpu"))
    x = to_np(rb.sample((N,)))
    assert ((x > 0) & (x < 1)).all()
    np.testing.assert_allclose((x > 0.5).mean(0), [0.2, 0.9], atol=0.01)
    rc = D.RelaxedOneHotCategorical(t, probs=_f([0.1, 0.3, 0.6], "cpu"))
    y = to_np(rc.rsample((N,)))
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.bincount(y.argmax(-1), minlength=3) / N, [0.1, 0.3, 0.6], atol=0.01)


def test_chi2_and_student_t_df_gradient(device):
    """Chi2(df) is 2 Gamma(df / 2): its df gradient is the gamma's implicit one at x / 2."""
    special = pytest.importorskip("scipy.special")
    df_np = np.array([0.8, 3.0, 25.0])
    df = _f(df_np, device, grad=True)
    gm.manual_seed(7)
    x = D.Chi2(df).rsample()
    x.sum().backward()
    z, a = to_np(x) / 2, df_np / 2
    h = a * 1e-6
    dP = (special.gammainc(a + h, z) - special.gammainc(a - h, z)) / (2 * h)
    pdf = np.exp((a - 1) * np.log(z) - z - special.gammaln(a))
    np.testing.assert_allclose(to_np(df.grad), -dP / pdf, rtol=1e-5)


def test_von_mises_samples_have_its_circular_moments():
    dist = D.VonMises(_f([0.5, 3.0, -2.0], "cpu"), _f([0.3, 4.0, 50.0], "cpu"))
    gm.manual_seed(8)
    x = to_np(dist.sample((N,)))
    assert ((x >= -math.pi) & (x < math.pi)).all()
    resultant = np.exp(1j * x).mean(0)
    np.testing.assert_allclose(np.angle(resultant[1:]), [3.0, -2.0], atol=0.02)
    np.testing.assert_allclose(1 - np.abs(resultant), to_np(dist.variance), atol=0.01)


def test_lkj_cholesky_samples_are_correlation_factors_with_its_marginals():
    """LKJ(eta) over d x d correlation matrices: the first correlation r_10 has (r + 1) / 2 ~
    Beta(eta - 1 + d / 2, eta - 1 + d / 2), variance 1 / (2 eta + d - 1). PyTorch's onion sampler gives the later
    rows' correlations wider spreads than that; ours is the same construction: every entry's spread is compared
    with PyTorch's samples."""
    torch = pytest.importorskip("torch")
    eta = [0.5, 2.0]
    dist = D.LKJCholesky(4, _f(eta, "cpu"))
    gm.manual_seed(9)
    L = dist.sample((N // 4,))
    assert tuple(L.shape) == (N // 4, 2, 4, 4)
    assert bool(dist.support.check(L).all())
    c = to_np(L) @ to_np(L).swapaxes(-1, -2)
    np.testing.assert_allclose(c[..., 1, 0].mean(0), [0.0, 0.0], atol=0.02)
    np.testing.assert_allclose(c[..., 1, 0].var(0), 1 / (2 * np.array(eta) + 3), rtol=0.06)
    torch.manual_seed(9)
    Lt = torch.distributions.LKJCholesky(4, torch.tensor(eta, dtype=torch.float64)).sample((N // 4,)).numpy()
    ct = Lt @ Lt.swapaxes(-1, -2)
    np.testing.assert_allclose(c.var(0), ct.var(0), rtol=0.08, atol=1e-12)


def test_wishart_warns_of_low_df_and_resamples_only_singular_draws():
    with pytest.warns(UserWarning, match="Low df values detected"):
        low = D.Wishart(_f([1.5], "cpu"), _f([[1.0, 0.0], [0.0, 1.0]], "cpu"))
    gm.manual_seed(10)
    assert bool(low.support.check(low.sample((50,))).all())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a regular df: no "Singular sample" warning (PyTorch's warns every time)
        D.Wishart(_f([6.0], "cpu"), _f([[1.0, 0.0], [0.0, 1.0]], "cpu")).rsample((20,))


def test_exponential_family_generic_entropy_matches_pytorch():
    """ExponentialFamily.entropy (the Bregman identity, used by subclasses that do not override it)."""
    torch = pytest.importorskip("torch")
    for make, args in ((lambda L: L.distributions.Normal, ([0.3, -1.0], [0.5, 2.0])),
                       (lambda L: L.distributions.Gamma, ([0.7, 3.0], [1.5, 0.2])),
                       (lambda L: L.distributions.Exponential, ([0.7, 3.0],)),
                       (lambda L: L.distributions.Bernoulli, ([0.2, 0.9],))):
        ours = make(gm)(*[gm.tensor(a, dtype=gm.float64) for a in args])
        theirs = make(torch)(*[torch.tensor(a, dtype=torch.float64) for a in args])
        np.testing.assert_allclose(to_np(D.ExponentialFamily.entropy(ours)),
                                   torch.distributions.ExponentialFamily.entropy(theirs).detach().numpy(),
                                   rtol=1e-10)


def test_invalid_parameters_with_validation_off_do_not_hang_the_samplers():
    """The rejection samplers skip entries whose parameters are NaN / infinite / out of range (each draw
    would be rejected forever): Gamma as PyTorch's (inf, or the smallest float), Poisson refuses as PyTorch's."""
    nan, inf = float("nan"), float("inf")
    g = to_np(D.Gamma(_f([nan, inf, 2.0], "cpu"), 1.0, validate_args=False).sample())
    assert g[0] == np.finfo(np.float64).tiny and g[1] == inf and 0 < g[2] < inf
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        D.Poisson(_f([nan, 1.0], "cpu"), validate_args=False).sample()
    assert to_np(D.Poisson(_f([inf], "cpu"), validate_args=False).sample())[0] == inf
    b = to_np(D.Binomial(_f([10.0, 10.0, 4.0], "cpu"), probs=_f([nan, 1.5, 1.0], "cpu"), validate_args=False).sample())
    assert np.isnan(b[:2]).all() and b[2] == 4.0
    v = to_np(D.VonMises(_f([0.0, 0.0], "cpu"), _f([nan, 1.0], "cpu"), validate_args=False).sample())
    assert np.isnan(v[0]) and -math.pi <= v[1] < math.pi
