"""gm.distributions against torch.distributions: log_prob, cdf, icdf, entropy, the moments, the probs/logits
conversions and kl_divergence, values and gradients (float64), on the same parameters and values; shapes and
dtypes of the results; expand. Sampling is checked statistically in test_distributions_sampling.py."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
LOC = R.randn(3, 4)
SCALE4 = R.uniform(0.5, 2.0, 4)
X = R.randn(3, 4) * 2
P = R.uniform(0.05, 0.95, (3, 4))
BIN = R.randint(0, 2, (3, 4)).astype(np.float64)
PK = R.uniform(0.1, 2.0, (3, 5))          # unnormalized category weights
LK = R.randn(3, 5)
IDX = R.randint(0, 5, (2, 3))             # broadcast against batch (3,)
LOW = R.uniform(-2, 0, (3, 4))
HIGH = LOW + R.uniform(0.5, 3, (3, 4))
INSIDE = LOW + (HIGH - LOW) * R.uniform(0.05, 0.95, (3, 4))
POSX = R.uniform(0.2, 4.0, (3, 4))
RATE = R.uniform(0.5, 3.0, (3, 4))
A = R.randn(2, 3, 3)
COV = A @ A.transpose(0, 2, 1) + 0.5 * np.eye(3)
TRIL = np.linalg.cholesky(COV)
MLOC = R.randn(4, 1, 3)                   # batch (4, 1) broadcasts with the matrices' (2,)
MX = R.randn(4, 2, 3)
ONEHOT = np.eye(5)[R.randint(0, 5, (3,))]
COUNTS = R.randint(0, 7, (3, 4)).astype(np.float64)
TOTAL = np.full((3, 4), 8.0)
CONC = R.uniform(0.3, 4.0, (3, 4))
CONC_K = R.uniform(0.3, 4.0, (2, 5))
SIMPLEX = R.dirichlet(np.ones(5), (4, 2))        # sample (4,) of batch (2,)
UNIT = R.uniform(0.02, 0.98, (3, 4))
COUNTS5 = np.array([[1, 0, 2, 3, 0], [6, 0, 0, 0, 0], [1, 1, 1, 1, 2]], dtype=np.float64)
SIMPLEX5 = R.dirichlet(np.ones(5), (3,))
CB_P = np.concatenate([P[:, :3], np.array([[0.4995], [0.5], [0.5007]])], 1)  # the Taylor region too
LR_W = R.randn(2, 3, 2)
GP_C = np.array([-0.3, 0.0, 0.2, 0.7])    # bounded, exponential, heavy tails, no variance


def _unit_rows(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


# Cholesky factors of correlation matrices (lower triangular, rows of unit norm, positive diagonal)
LKJ_X = _unit_rows(np.tril(R.randn(2, 3, 4, 4)) * (1 - np.eye(4)) + np.eye(4) * R.uniform(0.3, 1, (2, 3, 4, 1)))
LKJ_X3 = _unit_rows(np.tril(R.randn(5, 3, 3)) * (1 - np.eye(3)) + np.eye(3) * R.uniform(0.3, 1, (5, 3, 1)))


def _t(lib, a, dev, grad):
    if not isinstance(a, np.ndarray):
        return a
    if a.dtype.kind in "iu":
        return lib.tensor(a, dtype=lib.int64, device=dev)
    return lib.tensor(np.ascontiguousarray(a), dtype=lib.float64, device=dev, requires_grad=grad)


# name -> (constructor(D, *params), params, [(label, fn(dist, value) -> tensor, value or None)])
def _std(value, icdf=True, cdf=True):
    out = [("log_prob", lambda d, v: d.log_prob(v), value), ("entropy", lambda d, v: d.entropy(), None),
           ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None),
           ("stddev", lambda d, v: d.stddev, None)]
    if cdf:
        out.append(("cdf", lambda d, v: d.cdf(v), value))
    if icdf:
        out.append(("icdf", lambda d, v: d.icdf(v), P))
    return out


CASES = {
    "Normal": (lambda D, a, b: D.Normal(a, b), [LOC, SCALE4], _std(X) + [("mode", lambda d, v: d.mode, None)]),
    "Normal numbers": (lambda D: D.Normal(0.5, 2.0), [], _std(X)),
    "Bernoulli probs": (lambda D, p: D.Bernoulli(probs=p), [P],
                        _std(BIN, icdf=False, cdf=False) + [("logits", lambda d, v: d.logits, None)]),
    "Bernoulli logits": (lambda D, p: D.Bernoulli(logits=p), [X],
                         _std(BIN, icdf=False, cdf=False) + [("probs", lambda d, v: d.probs, None)]),
    "Categorical probs": (lambda D, p: D.Categorical(probs=p), [PK],
                          [("log_prob", lambda d, v: d.log_prob(v), IDX), ("entropy", lambda d, v: d.entropy(), None),
                           ("probs", lambda d, v: d.probs, None), ("logits", lambda d, v: d.logits, None),
                           ("mode", lambda d, v: d.mode, None), ("mean", lambda d, v: d.mean, None),
                           ("enumerate_support", lambda d, v: d.enumerate_support(), None),
                           ("enumerate_support no expand", lambda d, v: d.enumerate_support(False), None)]),
    "Categorical logits": (lambda D, p: D.Categorical(logits=p), [LK],
                           [("log_prob", lambda d, v: d.log_prob(v), IDX), ("entropy", lambda d, v: d.entropy(), None),
                            ("probs", lambda d, v: d.probs, None), ("logits", lambda d, v: d.logits, None)]),
    "Categorical 1-D": (lambda D, p: D.Categorical(probs=p), [PK[0]],
                        [("log_prob", lambda d, v: d.log_prob(v), IDX), ("entropy", lambda d, v: d.entropy(), None)]),
    "Uniform": (lambda D, a, b: D.Uniform(a, b), [LOW, HIGH], _std(INSIDE, icdf=False)
                + [("icdf", lambda d, v: d.icdf(v), P)]),
    "Uniform outside": (lambda D, a, b: D.Uniform(a, b, validate_args=False), [LOW, HIGH],
                        [("log_prob", lambda d, v: d.log_prob(v), X), ("cdf", lambda d, v: d.cdf(v), X)]),
    "Independent Normal": (lambda D, a, b: D.Independent(D.Normal(a, b), 1), [LOC, SCALE4],
                           [("log_prob", lambda d, v: d.log_prob(v), X), ("entropy", lambda d, v: d.entropy(), None),
                            ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None)]),
    "Independent 2": (lambda D, a, b: D.Independent(D.Normal(a, b), 2), [LOC, SCALE4],
                      [("log_prob", lambda d, v: d.log_prob(v), X), ("entropy", lambda d, v: d.entropy(), None)]),
    "OneHotCategorical": (lambda D, p: D.OneHotCategorical(probs=p), [PK],
                          [("log_prob", lambda d, v: d.log_prob(v), ONEHOT),
                           ("entropy", lambda d, v: d.entropy(), None),
                           ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None),
                           ("mode", lambda d, v: d.mode, None),
                           ("enumerate_support", lambda d, v: d.enumerate_support(), None)]),
    "Laplace": (lambda D, a, b: D.Laplace(a, b), [LOC, SCALE4], _std(X) + [("mode", lambda d, v: d.mode, None)]),
    "Exponential": (lambda D, r: D.Exponential(r), [RATE], _std(POSX) + [("mode", lambda d, v: d.mode, None)]),
    "LogNormal": (lambda D, a, b: D.LogNormal(a, b), [LOC, SCALE4], _std(POSX) + [("mode", lambda d, v: d.mode, None)]),
    "MultivariateNormal cov": (lambda D, m, c: D.MultivariateNormal(m, covariance_matrix=c), [MLOC, COV],
                               [("log_prob", lambda d, v: d.log_prob(v), MX),
                                ("entropy", lambda d, v: d.entropy(), None),
                                ("variance", lambda d, v: d.variance, None), ("mean", lambda d, v: d.mean, None),
                                ("scale_tril", lambda d, v: d.scale_tril, None),
                                ("precision_matrix", lambda d, v: d.precision_matrix, None)]),
    "MultivariateNormal precision": (lambda D, m, c: D.MultivariateNormal(m, precision_matrix=c), [MLOC, COV],
                                     [("log_prob", lambda d, v: d.log_prob(v), MX),
                                      ("entropy", lambda d, v: d.entropy(), None),
                                      ("covariance_matrix", lambda d, v: d.covariance_matrix, None)]),
    "MultivariateNormal scale_tril": (lambda D, m, c: D.MultivariateNormal(m, scale_tril=c), [MLOC[0, 0], TRIL],
                                      [("log_prob", lambda d, v: d.log_prob(v), MX),
                                       ("entropy", lambda d, v: d.entropy(), None),
                                       ("covariance_matrix", lambda d, v: d.covariance_matrix, None)]),
    "Poisson": (lambda D, r: D.Poisson(r), [RATE],
                [("log_prob", lambda d, v: d.log_prob(v), COUNTS), ("mean", lambda d, v: d.mean, None),
                 ("variance", lambda d, v: d.variance, None), ("mode", lambda d, v: d.mode, None)]),
    "Poisson zero rate": (lambda D, r: D.Poisson(r), [np.array([0.0, 1.0])],
                          [("log_prob", lambda d, v: d.log_prob(v), np.array([0.0, 2.0]))]),
    "Geometric probs": (lambda D, p: D.Geometric(probs=p), [P], _std(COUNTS, icdf=False, cdf=False)
                        + [("logits", lambda d, v: d.logits, None)]),
    "Geometric logits": (lambda D, p: D.Geometric(logits=p), [X], _std(COUNTS, icdf=False, cdf=False)),
    "Geometric probs 1": (lambda D, p: D.Geometric(probs=p), [np.array([1.0, 1.0, 0.5])],
                          [("log_prob", lambda d, v: d.log_prob(v), np.array([0.0, 2.0, 1.0]))]),
    "Binomial probs": (lambda D, n, p: D.Binomial(n, probs=p), [TOTAL, P], _std(COUNTS, icdf=False, cdf=False)
                       + [("mode", lambda d, v: d.mode, None),
                          ("enumerate_support", lambda d, v: d.enumerate_support(), None)]),
    "Binomial logits number count": (lambda D, p: D.Binomial(10, logits=p), [X],
                                     _std(COUNTS, icdf=False, cdf=False)),
    "Gamma": (lambda D, a, b: D.Gamma(a, b), [CONC, RATE], _std(POSX, icdf=False, cdf=False)
              + [("mode", lambda d, v: d.mode, None)]),
    # (the concentration is a number: PyTorch's gammainc has no derivative in it)
    "Gamma cdf": (lambda D, b: D.Gamma(2.5, b), [RATE], [("cdf", lambda d, v: d.cdf(v), POSX)]),
    "Chi2 cdf": (lambda D: D.Chi2(3.0), [], [("cdf", lambda d, v: d.cdf(v), POSX)]),
    "Beta": (lambda D, a, b: D.Beta(a, b), [CONC, RATE], _std(UNIT, icdf=False, cdf=False)
             + [("mode", lambda d, v: d.mode, None)]),
    "Beta numbers": (lambda D: D.Beta(0.5, 2.0), [], _std(UNIT, icdf=False, cdf=False)),
    "Dirichlet": (lambda D, a: D.Dirichlet(a), [CONC_K],
                  [("log_prob", lambda d, v: d.log_prob(v), SIMPLEX), ("entropy", lambda d, v: d.entropy(), None),
                   ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None),
                   ("mode", lambda d, v: d.mode, None)]),
    "Dirichlet small concentration": (lambda D, a: D.Dirichlet(a), [CONC_K * 0.2],
                                      [("mode", lambda d, v: d.mode, None)]),
    "Cauchy": (lambda D, a, b: D.Cauchy(a, b), [LOC, SCALE4], _std(X) + [("mode", lambda d, v: d.mode, None)]),
    "HalfNormal": (lambda D, b: D.HalfNormal(b), [SCALE4], _std(POSX) + [("mode", lambda d, v: d.mode, None)]),
    "HalfNormal negative value": (lambda D, b: D.HalfNormal(b, validate_args=False), [SCALE4],
                                  [("log_prob", lambda d, v: d.log_prob(v), X)]),
    "HalfCauchy": (lambda D, b: D.HalfCauchy(b), [SCALE4], _std(POSX) + [("mode", lambda d, v: d.mode, None)]),
    # (the cdf of values far in the left tail is refused: exp(-exp(...)) underflows below the base's support)
    "Gumbel": (lambda D, a, b: D.Gumbel(a, b), [LOC, SCALE4], _std(LOC + 0.5) + [("mode", lambda d, v: d.mode, None)]),
    "Gumbel numbers": (lambda D: D.Gumbel(0.5, 2.0), [], [("log_prob", lambda d, v: d.log_prob(v), X),
                                                         ("cdf", lambda d, v: d.cdf(v), X * 0.5)]),
    "Chi2": (lambda D, a: D.Chi2(a), [CONC], _std(POSX, icdf=False, cdf=False)
             + [("df", lambda d, v: d.df, None)]),
    "StudentT": (lambda D, a, b, c: D.StudentT(a, b, c), [CONC, LOC, SCALE4], _std(X, icdf=False, cdf=False)
                 + [("mode", lambda d, v: d.mode, None)]),
    "Multinomial": (lambda D, p: D.Multinomial(6, probs=p), [PK],
                    [("log_prob", lambda d, v: d.log_prob(v), COUNTS5), ("entropy", lambda d, v: d.entropy(), None),
                     ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None)]),
    "Multinomial logits": (lambda D, p: D.Multinomial(6, logits=p), [LK],
                           [("log_prob", lambda d, v: d.log_prob(v), COUNTS5)]),
    "MixtureSameFamily Normal": (
        lambda D, w, a, b: D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(a, b)), [LK[:, :4], LOC, SCALE4],
        [("log_prob", lambda d, v: d.log_prob(v), X[:, 0]), ("cdf", lambda d, v: d.cdf(v), X[:, 0]),
         ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None)]),
    "MixtureSameFamily MultivariateNormal": (
        lambda D, w, m, c: D.MixtureSameFamily(D.Categorical(probs=w), D.MultivariateNormal(m, c)),
        [PK[0, :2], MLOC[:2, 0], COV], [("log_prob", lambda d, v: d.log_prob(v), MX[:, 0]),
                                        ("mean", lambda d, v: d.mean, None),
                                        ("variance", lambda d, v: d.variance, None)]),
    "MixtureSameFamily Independent": (
        lambda D, w, a, b: D.MixtureSameFamily(D.Categorical(logits=w), D.Independent(D.Normal(a, b), 1)),
        [LK[0, :3], LOC, SCALE4], [("log_prob", lambda d, v: d.log_prob(v), X),
                                   ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None)]),
    "NegativeBinomial probs": (lambda D, n, p: D.NegativeBinomial(n, probs=p), [CONC, P],
                               [("log_prob", lambda d, v: d.log_prob(v), COUNTS), ("mean", lambda d, v: d.mean, None),
                                ("variance", lambda d, v: d.variance, None), ("mode", lambda d, v: d.mode, None)]),
    "NegativeBinomial logits": (lambda D, n, p: D.NegativeBinomial(n, logits=p), [CONC, X],
                                [("log_prob", lambda d, v: d.log_prob(v), COUNTS)]),
    "RelaxedBernoulli": (lambda D, t, p: D.RelaxedBernoulli(t, probs=p), [np.array(0.7), P],
                         [("log_prob", lambda d, v: d.log_prob(v), UNIT), ("probs", lambda d, v: d.probs, None),
                          ("logits", lambda d, v: d.logits, None)]),
    "LogitRelaxedBernoulli": (lambda D, t, p: D.relaxed_bernoulli.LogitRelaxedBernoulli(t, logits=p),
                              [np.array(0.7), X],
                              [("log_prob", lambda d, v: d.log_prob(v), LOC)]),
    "RelaxedOneHotCategorical": (lambda D, t, p: D.RelaxedOneHotCategorical(t, logits=p), [np.array(1.3), LK],
                                 [("log_prob", lambda d, v: d.log_prob(v), SIMPLEX5)]),
    "ExpRelaxedCategorical": (lambda D, t, p: D.relaxed_categorical.ExpRelaxedCategorical(t, probs=p),
                              [np.array(0.5), PK],
                              [("log_prob", lambda d, v: d.log_prob(v), np.log(SIMPLEX5))]),
    "Pareto": (lambda D, a, b: D.Pareto(a, b), [SCALE4, CONC], _std(POSX + 2.0, icdf=True, cdf=True)
               + [("mode", lambda d, v: d.mode, None)]),
    "Weibull": (lambda D, a, b: D.Weibull(a, b), [SCALE4, CONC], _std(POSX) + [("mode", lambda d, v: d.mode, None)]),
    "Kumaraswamy": (lambda D, a, b: D.Kumaraswamy(a, b), [CONC, RATE],
                    _std(UNIT) + [("mode", lambda d, v: d.mode, None)]),
    "InverseGamma": (lambda D, a, b: D.InverseGamma(a, b), [CONC + 1.5, RATE], _std(POSX, icdf=False, cdf=False)
                     + [("mode", lambda d, v: d.mode, None)]),
    "InverseGamma small": (lambda D, a, b: D.InverseGamma(a, b), [CONC * 0.5, RATE],
                           [("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None)]),
    "LogisticNormal": (lambda D, a, b: D.LogisticNormal(a, b), [LOC[:, :4], SCALE4],
                       [("log_prob", lambda d, v: d.log_prob(v), SIMPLEX5)]),
    "FisherSnedecor": (lambda D, a, b: D.FisherSnedecor(a, b), [CONC * 2, POSX * 3],
                       [("log_prob", lambda d, v: d.log_prob(v), POSX), ("mean", lambda d, v: d.mean, None),
                        ("variance", lambda d, v: d.variance, None), ("mode", lambda d, v: d.mode, None)]),
    "ContinuousBernoulli probs": (lambda D, p: D.ContinuousBernoulli(probs=p), [CB_P],
                                  _std(UNIT) + [("logits", lambda d, v: d.logits, None)]),
    "ContinuousBernoulli logits": (lambda D, p: D.ContinuousBernoulli(logits=p), [X], _std(UNIT)),
    "LowRankMultivariateNormal": (lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d), [MLOC, LR_W, RATE[:2, :3]],
                                  [("log_prob", lambda d, v: d.log_prob(v), MX),
                                   ("entropy", lambda d, v: d.entropy(), None),
                                   ("variance", lambda d, v: d.variance, None),
                                   ("scale_tril", lambda d, v: d.scale_tril, None),
                                   ("covariance_matrix", lambda d, v: d.covariance_matrix, None),
                                   ("precision_matrix", lambda d, v: d.precision_matrix, None)]),
    "VonMises": (lambda D, a, b: D.VonMises(a, b), [LOC, np.concatenate([RATE[:, :3], [[5.0], [0.1], [10.0]]], 1)],
                 [("log_prob", lambda d, v: d.log_prob(v), X), ("mean", lambda d, v: d.mean, None),
                  ("variance", lambda d, v: d.variance, None), ("mode", lambda d, v: d.mode, None)]),
    "GeneralizedPareto": (lambda D, a, b, c: D.GeneralizedPareto(a, b, c), [LOC, SCALE4, GP_C],
                          [("icdf", lambda d, v: d.icdf(v), P),
                           ("entropy", lambda d, v: d.entropy(), None), ("mean", lambda d, v: d.mean, None),
                           ("variance", lambda d, v: d.variance, None), ("mode", lambda d, v: d.mode, None)]),
    "LKJCholesky": (lambda D, c: D.LKJCholesky(4, c), [np.array([0.5, 1.0, 3.0])],
                    [("log_prob", lambda d, v: d.log_prob(v), LKJ_X)]),
    "LKJCholesky number": (lambda D: D.LKJCholesky(3, 2.0), [], [("log_prob", lambda d, v: d.log_prob(v), LKJ_X3)]),
    "Wishart cov": (lambda D, df, c: D.Wishart(df, covariance_matrix=c), [np.array([4.0, 6.5]), COV],
                    [("log_prob", lambda d, v: d.log_prob(v), COV[::-1] * 0.7),
                     ("entropy", lambda d, v: d.entropy(), None),
                     ("mean", lambda d, v: d.mean, None), ("variance", lambda d, v: d.variance, None),
                     ("mode", lambda d, v: d.mode, None), ("precision_matrix", lambda d, v: d.precision_matrix, None)]),
    "Wishart scale_tril number df": (lambda D, c: D.Wishart(3.5, scale_tril=c), [TRIL],
                                     [("log_prob", lambda d, v: d.log_prob(v), COV),
                                      ("entropy", lambda d, v: d.entropy(), None),
                                      ("covariance_matrix", lambda d, v: d.covariance_matrix, None)]),
    "Wishart precision": (lambda D, df, c: D.Wishart(df, precision_matrix=c), [np.array(5.0), COV],
                          [("log_prob", lambda d, v: d.log_prob(v), COV), ("mean", lambda d, v: d.mean, None)]),
    "TransformedDistribution affine": (
        lambda D, a, b: D.TransformedDistribution(D.Normal(a, b), [D.AffineTransform(1.5, -2.0),
                                                                   D.ExpTransform().inv.inv]),
        [LOC, SCALE4], [("log_prob", lambda d, v: d.log_prob(v), POSX), ("cdf", lambda d, v: d.cdf(v), POSX),
                        ("icdf", lambda d, v: d.icdf(v), P)]),
    "TransformedDistribution sigmoid tanh": (
        lambda D, a, b: D.TransformedDistribution(D.Normal(a, b), [D.TanhTransform(), D.SigmoidTransform()]),
        [LOC, SCALE4], [("log_prob", lambda d, v: d.log_prob(v), P * 0.4 + 0.3)]),
    "TransformedDistribution affine event_dim": (
        lambda D, a, b: D.TransformedDistribution(D.Normal(a, b), D.AffineTransform(0.5, b, event_dim=1)),
        [LOC, SCALE4], [("log_prob", lambda d, v: d.log_prob(v), X)]),
}


def _pair(case, dev, value):
    """(gm dist, torch dist, gm value, torch value, gm params, torch params)."""
    ctor, params, _ = CASES[case]
    gp = [_t(gm, a, dev, True) for a in params]
    tp = [_t(torch, a, "cpu", True) for a in params]
    gv = _t(gm, value, dev, value is not None and value.dtype.kind == "f")
    tv = _t(torch, value, "cpu", value is not None and value.dtype.kind == "f")
    return ctor(gm.distributions, *gp), ctor(torch.distributions, *tp), gv, tv, gp, tp


def _check(g, t, what):
    assert tuple(g.shape) == tuple(t.shape), f"{what}: shape {tuple(g.shape)} vs torch {tuple(t.shape)}"
    assert str(g.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"{what}: dtype {g.dtype} vs {t.dtype}"
    tol = 1e-9 if t.dtype == torch.float64 else 2e-6
    np.testing.assert_allclose(to_np(g), t.detach().numpy().astype(to_np(g).dtype), rtol=tol, atol=tol / 10,
                               err_msg=what)


ALL = [(c, i) for c in CASES for i in range(len(CASES[c][2]))]
CPU_PARAMETERS_ON_CUDA_VALUES = ("Beta numbers", "LKJCholesky number")


@pytest.mark.parametrize("case,i", ALL, ids=[f"{c}-{CASES[c][2][i][0]}" for c, i in ALL])
def test_values_and_gradients_match_pytorch(device, case, i):
    label, fn, value = CASES[case][2][i]
    gd, td, gv, tv, gp, tp = _pair(case, device, value)
    assert tuple(gd.batch_shape) == tuple(td.batch_shape) and tuple(gd.event_shape) == tuple(td.event_shape)
    if device == "cuda" and case in CPU_PARAMETERS_ON_CUDA_VALUES and label == "log_prob":
        # numbers become CPU tensors of one or more dims (stacked concentrations, an arange of orders) that meet
        # the CUDA value: PyTorch on CUDA raises here, so must gpumemnet
        with pytest.raises(RuntimeError, match="device"):
            fn(gd, gv)
        return
    g, t = fn(gd, gv), fn(td, tv)
    _check(g, t, f"{case} {label}")
    if not t.requires_grad:
        return
    w = np.random.RandomState(1).uniform(0.5, 1.5, tuple(t.shape))
    (t * torch.tensor(w)).sum().backward()
    (g * gm.tensor(w, dtype=gm.float64, device=device)).sum().backward()
    for k, (a, b) in enumerate(list(zip(gp, tp)) + [(gv, tv)]):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            if b.grad is None:
                assert a.grad is None or not to_np(a.grad).any(), f"{case} {label}: gradient {k} should be none"
                continue
            assert a.grad is not None, f"{case} {label}: no gradient for argument {k}"
            np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-8, atol=1e-10,
                                       err_msg=f"{case} {label} gradient {k}")


def test_float32_results_stay_float32(device):
    d = gm.distributions.Normal(gm.zeros(3, device=device), gm.ones(3, device=device))
    x = gm.tensor([0.5, -1.0, 2.0], device=device)
    for r in (d.log_prob(x), d.cdf(x), d.entropy(), d.icdf(gm.tensor([0.1, 0.5, 0.9], device=device)),
              d.sample((2,)), d.rsample()):
        assert r.dtype == gm.float32 and r.device.type == device
    c = gm.distributions.Categorical(logits=gm.zeros(2, 3, device=device))
    assert c.sample().dtype == gm.int64 and c.log_prob(gm.tensor([0, 2], device=device)).dtype == gm.float32
    b = gm.distributions.Bernoulli(probs=gm.full((2,), 0.5, dtype=gm.float64, device=device))
    assert b.sample().dtype == gm.float64 and b.entropy().dtype == gm.float64


KL = {
    "Normal": (lambda D, a, b, c, e: (D.Normal(a, b), D.Normal(c, e)), [LOC, SCALE4, X, RATE]),
    "Bernoulli": (lambda D, a, b: (D.Bernoulli(probs=a), D.Bernoulli(logits=b)), [P, X]),
    "Bernoulli edge probs": (lambda D, a, b: (D.Bernoulli(probs=a), D.Bernoulli(probs=b)),
                             [np.array([0.0, 1.0, 0.3, 0.0, 1.0]), np.array([0.5, 0.2, 0.0, 0.0, 1.0])]),
    "Categorical": (lambda D, a, b: (D.Categorical(probs=a), D.Categorical(logits=b)), [PK, LK]),
    "Categorical zero probs": (lambda D, a, b: (D.Categorical(probs=a), D.Categorical(probs=b)),
                               [np.array([[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]),
                                np.array([[0.3, 0.0, 0.7], [0.1, 0.1, 0.8]])]),
    "OneHotCategorical": (lambda D, a, b: (D.OneHotCategorical(probs=a), D.OneHotCategorical(logits=b)), [PK, LK]),
    "Uniform": (lambda D, a, b, c, e: (D.Uniform(a, b), D.Uniform(c, e)), [LOW, HIGH, LOW - 0.5, HIGH + 0.1]),
    "Uniform not covering": (lambda D, a, b, c, e: (D.Uniform(a, b), D.Uniform(c, e)), [LOW, HIGH, LOW + 0.1, HIGH]),
    "Independent": (lambda D, a, b, c, e: (D.Independent(D.Normal(a, b), 1), D.Independent(D.Normal(c, e), 1)),
                    [LOC, SCALE4, X, RATE]),
    "Laplace": (lambda D, a, b, c, e: (D.Laplace(a, b), D.Laplace(c, e)), [LOC, SCALE4, X, RATE]),
    "Exponential": (lambda D, a, b: (D.Exponential(a), D.Exponential(b)), [RATE, POSX]),
    "Normal Laplace": (lambda D, a, b, c, e: (D.Normal(a, b), D.Laplace(c, e)), [LOC, SCALE4, X, RATE]),
    "LogNormal": (lambda D, a, b, c, e: (D.LogNormal(a, b), D.LogNormal(c, e)), [LOC, SCALE4, X, RATE]),
    "Poisson": (lambda D, a, b: (D.Poisson(a), D.Poisson(b)), [RATE, POSX]),
    "Geometric": (lambda D, a, b: (D.Geometric(probs=a), D.Geometric(logits=b)), [P, X]),
    "Binomial": (lambda D, a, b, c: (D.Binomial(a, probs=b), D.Binomial(a, logits=c)), [TOTAL, P, X]),
    "Binomial wider p": (lambda D, b, c: (D.Binomial(9, probs=b), D.Binomial(8, logits=c)), [P, X]),
    "Gamma": (lambda D, a, b, c, e: (D.Gamma(a, b), D.Gamma(c, e)), [CONC, RATE, POSX, SCALE4]),
    "Exponential Gamma": (lambda D, a, c, e: (D.Exponential(a), D.Gamma(c, e)), [RATE, POSX, SCALE4]),
    "Beta": (lambda D, a, b, c, e: (D.Beta(a, b), D.Beta(c, e)), [CONC, RATE, POSX, UNIT]),
    "Dirichlet": (lambda D, a, b: (D.Dirichlet(a), D.Dirichlet(b)), [CONC_K, CONC_K[::-1] + 0.5]),
    "LowRankMultivariateNormal": (lambda D, a, b, c, e, f, g: (D.LowRankMultivariateNormal(a, b, c),
                                                               D.LowRankMultivariateNormal(e, f, g)),
                                  [MLOC, LR_W, RATE[:2, :3], MX, LR_W[::-1] * 0.5, SCALE4[:3]]),
    "MultivariateNormal LowRank": (lambda D, a, b, e, f, g: (D.MultivariateNormal(a, b),
                                                             D.LowRankMultivariateNormal(e, f, g)),
                                   [MLOC, COV, MX, LR_W, SCALE4[:3]]),
    "LowRank MultivariateNormal": (lambda D, a, b, c, e, f: (D.LowRankMultivariateNormal(a, b, c),
                                                             D.MultivariateNormal(e, scale_tril=f)),
                                   [MLOC, LR_W, RATE[:2, :3], MX, TRIL]),
    "ContinuousBernoulli": (lambda D, a, b: (D.ContinuousBernoulli(probs=a), D.ContinuousBernoulli(logits=b)),
                            [CB_P, X]),
    "Wishart (the exponential-family Bregman divergence)": (
        lambda D, a, b, c, e: (D.Wishart(a, covariance_matrix=b), D.Wishart(c, scale_tril=e)),
        [np.array([4.0, 6.5]), COV, np.array(3.5), TRIL]),
    "MultivariateNormal": (lambda D, a, b, c, e: (D.MultivariateNormal(a, covariance_matrix=b),
                                                  D.MultivariateNormal(c, scale_tril=e)), [MLOC, COV, MX, TRIL[::-1]]),
}


@pytest.mark.parametrize("case", list(KL))
def test_kl_divergence_matches_pytorch(device, case):
    ctor, params = KL[case]
    gp = [_t(gm, a, device, True) for a in params]
    tp = [_t(torch, a, "cpu", True) for a in params]
    g = gm.distributions.kl_divergence(*ctor(gm.distributions, *gp))
    t = torch.distributions.kl_divergence(*ctor(torch.distributions, *tp))
    _check(g, t, f"KL {case}")
    if not np.isfinite(t.detach().numpy()).all():
        return
    t.sum().backward()
    g.sum().backward()
    for k, (a, b) in enumerate(zip(gp, tp)):
        if b.grad is None:  # (the exponential-family KL detaches p's parameters)
            assert a.grad is None, f"KL {case} {k}: PyTorch gives no gradient"
            continue
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=f"KL {case} {k}")


def test_register_kl_dispatches_to_the_most_specific_pair():
    D = gm.distributions

    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    np.testing.assert_allclose(to_np(D.kl_divergence(p, q)), to_np(D.kl_divergence(D.Normal(0.0, 1.0), q)))

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return gm.tensor(123.0)
    assert float(D.kl_divergence(p, q)) == 123.0
    assert float(D.kl_divergence(q, MyNormal(0.0, 1.0))) != 123.0  # (Normal, MyNormal) still the generic one
    with pytest.raises(NotImplementedError, match=r"No KL\(p \|\| q\) is implemented for p type Normal and q type "
                                                  r"Categorical"):
        D.kl_divergence(q, D.Categorical(logits=gm.zeros(3)))


@pytest.mark.filterwarnings("ignore:Singular sample detected")  # PyTorch's Wishart warns on every rsample
@pytest.mark.parametrize("make", [
    lambda D, l: D.Normal(l.zeros(3, 1), l.ones(4)),
    lambda D, l: D.Bernoulli(logits=l.zeros(3, 1)),
    lambda D, l: D.Categorical(probs=l.ones(3, 1, 4)),
    lambda D, l: D.Uniform(l.zeros(3, 1), 2.0),
    lambda D, l: D.Independent(D.Normal(l.zeros(3, 2), 1.0), 1),
    lambda D, l: D.OneHotCategorical(logits=l.zeros(1, 4)),
    lambda D, l: D.Laplace(l.zeros(1), 1.0),
    lambda D, l: D.Exponential(l.ones(1, 1)),
    lambda D, l: D.LogNormal(l.zeros(1), 1.0),
    lambda D, l: D.MultivariateNormal(l.zeros(1, 2), l.eye(2)),
    lambda D, l: D.TransformedDistribution(D.Normal(l.zeros(1), 1.0), D.AffineTransform(0.0, l.ones(2, 1))),
    lambda D, l: D.Poisson(l.ones(3, 1)),
    lambda D, l: D.Geometric(logits=l.zeros(1)),
    lambda D, l: D.Binomial(5, probs=l.full((1, 3), 0.3)),
    lambda D, l: D.Gamma(l.ones(3, 1), 2.0),
    lambda D, l: D.Beta(l.ones(1), 2.0),
    lambda D, l: D.Dirichlet(l.ones(1, 4)),
    lambda D, l: D.Cauchy(l.zeros(1), 1.0),
    lambda D, l: D.HalfNormal(l.ones(3, 1)),
    lambda D, l: D.HalfCauchy(l.ones(1)),
    lambda D, l: D.Gumbel(l.zeros(1), 2.0),
    lambda D, l: D.Chi2(l.ones(3, 1)),
    lambda D, l: D.StudentT(l.ones(1), 0.0, 2.0),
    lambda D, l: D.Multinomial(4, probs=l.ones(1, 3)),
    lambda D, l: D.MixtureSameFamily(D.Categorical(logits=l.zeros(1, 3)), D.Normal(l.zeros(1, 3), 1.0)),
    lambda D, l: D.NegativeBinomial(l.full((1,), 3.0), logits=l.zeros(1)),
    lambda D, l: D.RelaxedBernoulli(l.tensor(0.5), logits=l.zeros(1)),
    lambda D, l: D.RelaxedOneHotCategorical(l.tensor(0.5), logits=l.zeros(1, 3)),
    lambda D, l: D.Pareto(l.ones(1), 3.0),
    lambda D, l: D.Weibull(l.ones(3, 1), 2.0),
    lambda D, l: D.Kumaraswamy(l.ones(1), 2.0),
    lambda D, l: D.InverseGamma(l.full((1,), 3.0), 2.0),
    lambda D, l: D.LogisticNormal(l.zeros(1, 3), 1.0),
    lambda D, l: D.FisherSnedecor(l.full((1,), 3.0), 5.0),
    lambda D, l: D.ContinuousBernoulli(logits=l.zeros(1)),
    lambda D, l: D.LowRankMultivariateNormal(l.zeros(1, 3), l.ones(3, 2), l.ones(3)),
    lambda D, l: D.VonMises(l.zeros(1), 2.0),
    lambda D, l: D.GeneralizedPareto(l.zeros(1), 2.0, 0.1),
    lambda D, l: D.LKJCholesky(3, l.ones(1)),
    lambda D, l: D.Wishart(l.full((1,), 4.0), l.eye(3)),
], ids=["Normal", "Bernoulli", "Categorical", "Uniform", "Independent", "OneHotCategorical", "Laplace",
        "Exponential", "LogNormal", "MultivariateNormal", "TransformedDistribution", "Poisson", "Geometric",
        "Binomial", "Gamma", "Beta", "Dirichlet", "Cauchy", "HalfNormal", "HalfCauchy", "Gumbel", "Chi2", "StudentT",
        "Multinomial", "MixtureSameFamily", "NegativeBinomial", "RelaxedBernoulli", "RelaxedOneHotCategorical",
        "Pareto", "Weibull", "Kumaraswamy", "InverseGamma", "LogisticNormal", "FisherSnedecor",
        "ContinuousBernoulli", "LowRankMultivariateNormal", "VonMises", "GeneralizedPareto", "LKJCholesky",
        "Wishart"])
def test_shapes_and_expand_match_pytorch(make):
    g, t = make(gm.distributions, gm), make(torch.distributions, torch)
    assert (tuple(g.batch_shape), tuple(g.event_shape)) == (tuple(t.batch_shape), tuple(t.event_shape))
    assert isinstance(g.batch_shape, gm.Size)
    for sample_shape in [(), (2,), (0, 3)]:
        try:
            ts = t.sample(sample_shape)
        except RuntimeError:  # the categoricals refuse to draw no sample
            with pytest.raises(RuntimeError, match="n_sample <= 0"):
                g.sample(sample_shape)
            continue
        assert tuple(g.sample(sample_shape).shape) == tuple(ts.shape)
    batch = (5,) + tuple(t.batch_shape[:-1]) + (t.batch_shape[-1] if t.batch_shape[-1] != 1 else 2,) \
        if len(t.batch_shape) else (5,)
    ge, te = g.expand(batch), t.expand(batch)
    assert type(ge) is type(g)
    assert (tuple(ge.batch_shape), tuple(ge.event_shape)) == (tuple(te.batch_shape), tuple(te.event_shape))
    x = te.sample((2,))
    gx = gm.tensor(x.numpy())
    np.testing.assert_allclose(to_np(ge.log_prob(gx)), te.log_prob(x).numpy(), rtol=1e-5, atol=1e-6)
    assert g.has_rsample == t.has_rsample and g.has_enumerate_support == t.has_enumerate_support
    assert repr(g.support) == repr(t.support)
    assert sorted(g.arg_constraints) == sorted(t.arg_constraints)


TRANSFORMS = {
    "Exp": lambda D, l, p: D.ExpTransform(),
    "Affine numbers": lambda D, l, p: D.AffineTransform(0.5, -3.0),
    "Affine tensors": lambda D, l, p: D.AffineTransform(p, p * 2 + 1),
    "Affine event_dim": lambda D, l, p: D.AffineTransform(p, p * 2 + 1, event_dim=1),
    "Sigmoid": lambda D, l, p: D.SigmoidTransform(),
    "Tanh": lambda D, l, p: D.TanhTransform(),
    "Softplus": lambda D, l, p: D.SoftplusTransform(),
    "Power": lambda D, l, p: D.PowerTransform(p.abs() + 0.5),
    "Compose": lambda D, l, p: D.ComposeTransform([D.AffineTransform(p, 0.5), D.ExpTransform(),
                                                   D.PowerTransform(1.5)]),
    "Inverse Sigmoid": lambda D, l, p: D.SigmoidTransform().inv,
    "Independent": lambda D, l, p: D.IndependentTransform(D.AffineTransform(p, 2.0), 1),
    "Reshape": lambda D, l, p: D.ReshapeTransform((4,), (2, 2)),
    "Softmax": lambda D, l, p: D.SoftmaxTransform(),
    "StickBreaking": lambda D, l, p: D.StickBreakingTransform(),
    "LowerCholesky": lambda D, l, p: D.LowerCholeskyTransform(),
    "PositiveDefinite": lambda D, l, p: D.PositiveDefiniteTransform(),
    "CorrCholesky": lambda D, l, p: D.CorrCholeskyTransform(),
    "CumulativeDistribution": lambda D, l, p: D.CumulativeDistributionTransform(D.Normal(p, 2.0)),
    "Cat": lambda D, l, p: D.CatTransform([D.ExpTransform(), D.AffineTransform(p[:2], 3.0)], dim=1, lengths=[2, 2]),
    "Cat event_dim": lambda D, l, p: D.CatTransform([D.IndependentTransform(D.ExpTransform(), 1),
                                                     D.IndependentTransform(D.AffineTransform(0.5, 2.0), 1)],
                                                    dim=-1, lengths=[2, 2]),
    "Stack": lambda D, l, p: D.StackTransform([D.ExpTransform(), D.AffineTransform(p[0], 2.0), D.TanhTransform(),
                                               D.SigmoidTransform()], dim=-1),
}
TRANSFORM_INPUT = {"Inverse Sigmoid": P * 0.8 + 0.1, "Power": POSX, "LowerCholesky": A[0], "PositiveDefinite": A,
                   "CorrCholesky": R.randn(3, 6)}
CORR_X = R.randn(3, 6)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transforms_match_pytorch(device, name):
    base = TRANSFORM_INPUT.get(name, X * 0.5)
    outs = []
    for lib, dev in ((gm, device), (torch, "cpu")):
        p = _t(lib, LOC[0], dev, True)
        x = _t(lib, base, dev, True)
        t = TRANSFORMS[name](lib.distributions, lib, p)
        y = t(x)
        try:
            lad = t.log_abs_det_jacobian(x, y)
        except NotImplementedError:  # PyTorch has none for the non-bijective matrix transforms
            lad = None
        back = t.inv(y)
        (y.sum() + (lad.sum() * 0.5 if lad is not None else 0) + back.sum() * 0.25).backward()
        outs.append((y, lad, back, x.grad, p.grad, t))
    (gy, gl, gb, gxg, gpg, gt), (ty, tl, tb, txg, tpg, tt) = outs
    _check(gy, ty, f"{name} forward")
    assert (gl is None) == (tl is None), f"{name}: log_abs_det_jacobian exists in one library only"
    if tl is not None:
        _check(gl, tl, f"{name} log_abs_det_jacobian")
    shape = tuple(x.shape)
    assert tuple(gt.forward_shape(shape)) == tuple(tt.forward_shape(shape)) == tuple(ty.shape)
    assert tuple(gt.inverse_shape(tuple(ty.shape))) == tuple(tt.inverse_shape(tuple(ty.shape)))
    _check(gb, tb, f"{name} inverse")
    np.testing.assert_allclose(to_np(gxg), txg.numpy(), rtol=1e-8, atol=1e-10, err_msg=f"{name} x gradient")
    if tpg is not None:
        np.testing.assert_allclose(to_np(gpg), tpg.numpy(), rtol=1e-8, atol=1e-10, err_msg=f"{name} p gradient")
    assert (gt.domain.event_dim, gt.codomain.event_dim) == (tt.domain.event_dim, tt.codomain.event_dim)
    assert gt.bijective == tt.bijective
    assert repr(gt.codomain) == repr(tt.codomain)



# one member of each family, for KL between families (PyTorch returns inf where p's support leaves q's)
FAMILIES = {
    "Normal": (lambda D, a, b: D.Normal(a, b), [LOC, SCALE4]),
    "Laplace": (lambda D, a, b: D.Laplace(a, b), [X, RATE]),
    "Exponential": (lambda D, a: D.Exponential(a), [RATE]),
    "Gamma": (lambda D, a, b: D.Gamma(a, b), [CONC, RATE]),
    "Chi2": (lambda D, a: D.Chi2(a), [POSX]),
    "Beta": (lambda D, a, b: D.Beta(a, b), [CONC, RATE]),
    "Uniform": (lambda D, a, b: D.Uniform(a, b), [LOW, HIGH]),
    "Uniform unit": (lambda D, a, b: D.Uniform(a, b), [UNIT * 0.5, UNIT * 0.5 + 0.4]),
    "Gumbel": (lambda D, a, b: D.Gumbel(a, b), [LOC, SCALE4]),
    "Cauchy": (lambda D, a, b: D.Cauchy(a, b), [X, RATE]),
    "HalfNormal": (lambda D, b: D.HalfNormal(b), [RATE]),
    "Poisson": (lambda D, a: D.Poisson(a), [RATE]),
    "Bernoulli": (lambda D, a: D.Bernoulli(probs=a), [P]),
    "Binomial": (lambda D, a: D.Binomial(5, probs=a), [P]),
    "LogNormal": (lambda D, a, b: D.LogNormal(a, b), [LOC, SCALE4]),
    "Pareto": (lambda D, a, b: D.Pareto(a, b), [POSX, RATE]),
    "Pareto heavy": (lambda D, a, b: D.Pareto(a, b), [RATE, CONC]),
    "ContinuousBernoulli": (lambda D, a: D.ContinuousBernoulli(probs=a), [CB_P]),
}
PAIRS = [(a, b) for a in FAMILIES for b in FAMILIES]


@pytest.mark.parametrize("pq", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_kl_between_families_matches_pytorch(pq):
    outs = []
    for lib in (gm, torch):
        ps = [[_t(lib, a, "cpu", True) for a in FAMILIES[name][1]] for name in pq]
        dists = [FAMILIES[name][0](lib.distributions, *p) for name, p in zip(pq, ps)]
        try:
            kl = lib.distributions.kl_divergence(*dists)
        except NotImplementedError:
            outs.append(None)
            continue
        if kl.requires_grad and np.isfinite(kl.detach().numpy()).all():
            kl.sum().backward()
        outs.append((kl, [a.grad for p in ps for a in p]))
    if outs[1] is None:
        assert outs[0] is None, f"PyTorch has no KL for {pq}, gpumemnet has one"
        return
    assert outs[0] is not None, f"PyTorch has a KL for {pq}, gpumemnet has none"
    _check(outs[0][0], outs[1][0], f"KL {pq}")
    for k, (a, b) in enumerate(zip(outs[0][1], outs[1][1])):
        if b is not None:
            np.testing.assert_allclose(to_np(a), b.numpy(), rtol=1e-7, atol=1e-10, err_msg=f"KL {pq} gradient {k}")



REGISTRY = {
    "real": lambda c, l: c.real, "positive": lambda c, l: c.positive, "nonnegative": lambda c, l: c.nonnegative,
    "greater_than": lambda c, l: c.greater_than(1.5), "greater_than_eq": lambda c, l: c.greater_than_eq(-2.0),
    "less_than": lambda c, l: c.less_than(3.0), "unit_interval": lambda c, l: c.unit_interval,
    "interval": lambda c, l: c.interval(-1.0, 4.0), "half_open_interval": lambda c, l: c.half_open_interval(0.0, 2.0),
    "interval of tensors": lambda c, l: c.interval(l.tensor([0.0, 1.0, 2.0, 3.0], dtype=l.float64),
                                                   l.tensor([1.0, 3.0, 5.0, 7.0], dtype=l.float64)),
    "simplex": lambda c, l: c.simplex, "real_vector": lambda c, l: c.real_vector,
    "independent positive": lambda c, l: c.independent(c.positive, 1),
    "lower_cholesky": lambda c, l: c.lower_cholesky, "positive_definite": lambda c, l: c.positive_definite,
    "corr_cholesky": lambda c, l: c.corr_cholesky,
    "cat": lambda c, l: c.cat([c.positive, c.interval(0.0, 1.0)], dim=-1, lengths=[1, 3]),
    "stack": lambda c, l: c.stack([c.real, c.positive, c.unit_interval, c.greater_than(2.0)], dim=-1),
}


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name", list(REGISTRY))
def test_constraint_registry_matches_pytorch(registry, name):
    got = []
    for lib in (gm, torch):
        D = lib.distributions
        con = REGISTRY[name](D.constraints, lib)
        try:
            t = getattr(D, registry)(con)
        except NotImplementedError:
            got.append(None)
            continue
        x = lib.tensor(CORR_X if name == "corr_cholesky" else
                       (A if name in ("lower_cholesky", "positive_definite") else X * 0.5), dtype=lib.float64)
        y = t(x)
        got.append((type(t).__name__, y, con.check(y)))
    if got[1] is None:
        assert got[0] is None, f"PyTorch has no {registry} for {name}"
        return
    assert got[0] is not None and got[0][0] == got[1][0]
    _check(got[0][1], got[1][1], f"{registry}({name})")
    assert bool(got[0][2].all())



@pytest.mark.parametrize("method", ["log_prob", "cdf", "log_survival_function", "log_cdf"])
def test_generalized_pareto_float32_matches_pytorch(device, method):
    """(PyTorch's GeneralizedPareto compares concentration with a float32 zero: these methods fail on float64
    parameters there. gpumemnet's work in both dtypes; float32 is compared here.)"""
    outs = []
    for lib, dev in ((gm, device), (torch, "cpu")):
        ps = [lib.tensor(a, dtype=lib.float32, device=dev, requires_grad=True) for a in (LOC, SCALE4, GP_C)]
        v = lib.tensor(LOC + POSX * 0.1, dtype=lib.float32, device=dev, requires_grad=True)
        r = getattr(lib.distributions.GeneralizedPareto(*ps), method)(v)
        r.sum().backward()
        outs.append((r, [p.grad for p in ps] + [v.grad]))
    _check(outs[0][0], outs[1][0], method)
    for a, b in zip(outs[0][1], outs[1][1]):
        np.testing.assert_allclose(to_np(a), b.numpy(), rtol=2e-5, atol=2e-6)
