"""torch.distributions.kl: kl_divergence(p, q) and register_kl, dispatching on the two distributions' types."""
import math
import warnings

from . import _ops as T
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .lowrank_multivariate_normal import (LowRankMultivariateNormal, _batch_lowrank_logdet,
                                          _batch_lowrank_mahalanobis)
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import _sum_rightmost, _xlogy, euler_constant as _EULER_GAMMA
from ..linalg import solve_triangular
from ..nn.functional import softplus

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}  # (type_p, type_q) -> fn(p, q)
_KL_MEMOIZE = {}   # the dispatch's answer per pair of concrete types


def register_kl(type_p, type_q):
    """Decorator registering fn(p, q) as KL(p || q) for p of type_p and q of type_q (and their subclasses,
    where no more specific registration exists)."""
    if not isinstance(type_p, type):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p!r}")
    if not isinstance(type_q, type):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q!r}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun

    return decorator


def _dispatch_kl(type_p, type_q):
    """The registered function of the most specific pair of base classes (p's first, then q's)."""
    matches = [(sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)]
    if not matches:
        return NotImplemented
    left = min(matches, key=lambda m: (type_p.__mro__.index(m[0]), type_q.__mro__.index(m[1])))
    right = min(matches, key=lambda m: (type_q.__mro__.index(m[1]), type_p.__mro__.index(m[0])))
    left_fun, right_fun = _KL_REGISTRY[left], _KL_REGISTRY[right]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl"
                      f"({left[0].__name__}, {right[1].__name__})", RuntimeWarning, stacklevel=2)
    return left_fun



def _infinite_like(t):
    return T.full_like(t, math.inf)


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], over the broadcast batch shapes of p and q."""
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = T.where(q.probs == 0, _infinite_like(t1), t1)
    t1 = T.where(p.probs == 0, T.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = T.where(q.probs == 1, _infinite_like(t2), t2)
    t2 = T.where(p.probs == 1, T.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = T.where((q.probs == 0).expand_as(t), _infinite_like(t), t)
    t = T.where((p.probs == 0).expand_as(t), T.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return T.where((q.low > p.low) | (q.high < p.high), _infinite_like(result), result)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(f"KL between Independent distributions of different reinterpreted_batch_ndims "
                                  f"({p.reinterpreted_batch_ndims} and {q.reinterpreted_batch_ndims})")
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions of different transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions of different event shapes")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * T.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    t1 = -rate_ratio.log()
    return t1 + rate_ratio - 1


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         f"computed: {tuple(p.event_shape)} and {tuple(q.event_shape)}")
    p_L, q_L = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = (q_L.diagonal(dim1=-2, dim2=-1).log().sum(-1) - p_L.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    batch = tuple(T.broadcast_shapes(tuple(q_L.shape[:-2]), tuple(p_L.shape[:-2])))
    n = p.event_shape[0]
    m = solve_triangular(q_L.expand(batch + (n, n)), p_L.expand(batch + (n, n)), upper=False)
    term2 = m.pow(2).sum((-2, -1))  # trace(M M^T)
    term3 = _batch_mahalanobis(q_L, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = T.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * T.exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * T.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - T.log1p(-q.probs) / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    # p's support beyond q's (p.total_count > q.total_count): infinite; the other way is not implemented
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return T.where(p.total_count > q.total_count, _infinite_like(kl), kl)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * T.log(p.rate / q.rate)
    t2 = T.lgamma(q.concentration) - T.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * T.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * T.log(ratio)
    return t1 + ratio + q.concentration.lgamma() + q.concentration * _EULER_GAMMA - (1 + _EULER_GAMMA)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * T.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * T.digamma(p.concentration0)
    t5 = (sum_q - sum_p) * T.digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log normalizer between the natural parameters (same family only). p's
    natural parameters are detached copies (as in PyTorch): the result's gradient reaches q's parameters only,
    so the gradient of p's log normalizer is a constant here."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  f"computed using Bregman divergences ({type(p).__name__}, {type(q).__name__})")
    p_nparams = [n.detach().requires_grad_() for n in p._natural_params]
    q_nparams = q._natural_params
    lg_normal = p._log_normalizer(*p_nparams)
    gradients = T.grad(lg_normal.sum(), p_nparams, retain_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        result = result - _sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _EULER_GAMMA
    t3 = T.exp(ct2 + (1 + ct1).lgamma() - ct3)
    return t1 + t2 + t3 - (1 + _EULER_GAMMA)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


# ---- pairs of different families: where p's support reaches beyond q's, KL is infinite ------------------------
def _infinite(attr):
    return lambda p, q: _infinite_like(getattr(p, attr))


_CB = ContinuousBernoulli
for _p, _qs, _attr in ((Beta, (Pareto,), "concentration1"), (_CB, (Pareto,), "probs"),
                       (Exponential, (Beta, _CB, Pareto, Uniform), "rate"),
                       (Gamma, (Beta, _CB, Pareto, Uniform), "concentration"),
                       (Gumbel, (Beta, _CB, Exponential, Gamma, Pareto, Uniform), "loc"),
                       (Laplace, (Beta, _CB, Exponential, Gamma, Pareto, Uniform), "loc"),
                       (Normal, (Beta, _CB, Exponential, Gamma, Pareto, Uniform), "loc"),
                       (Pareto, (Beta, _CB, Uniform), "scale"), (Poisson, (Bernoulli, Binomial), "rate")):
    for _q in _qs:
        register_kl(_p, _q)(_infinite(_attr))


def _x_log_x(t):
    return _xlogy(t, t)  # 0 at 0


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma())
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    E_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E_beta * (1 - E_beta) / (p.concentration1 + p.concentration0 + 1) + E_beta.pow(2)) * 0.5
    t4 = q.loc * E_beta
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return T.where((q.low > 0.0) | (q.high < 1.0), _infinite_like(result), result)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = T.exp(loc_scale_ratio) * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * T.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma() - p.concentration
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = T.exp(loc_scale_ratio) * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * T.log(beta_sqr * var_normal * 2 * math.pi) - p.concentration - p.concentration.lgamma()
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + t4) / var_normal


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER_GAMMA - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER_GAMMA + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * T.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = T.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    common_term = p.high - p.low
    t1 = T.log(common_term)
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term) / common_term
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    result = t3 + t4 - t1 - t2
    return T.where((p.high > 1.0) | (p.low < 0.0), _infinite_like(result), result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return T.where(p.low < 0.0, _infinite_like(result), result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    return T.where(p.low < 0.0, _infinite_like(result), result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (T.exp(-high_loc_diff) - T.exp(-low_loc_diff))
    return t1 - t2


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    return T.where(p.scale < q.scale, _infinite_like(result), result)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    result = t1 - t2 + t3 - 1
    return T.where(p.alpha <= 1, _infinite_like(result), result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    result = t1 + t2 + t3 + t4 - 1
    return T.where(p.alpha <= 1, _infinite_like(result), result)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    result = t1 - t2 + (t3 + t4) / var_normal - 1
    return T.where(p.alpha <= 2, _infinite_like(result), result)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * support_uniform).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - support_uniform) / support_uniform
    result = t2 * (q.alpha + 1) - t1
    return T.where(p.low < q.scale, _infinite_like(result), result)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + T.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - T.log1p(-q.probs)
    return t1 + t2 + t3


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - T.log1p(-q.probs) - q._cont_bern_log_norm()


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - T.log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).square()) + T.log(q.scale)
    t3 = (p.variance + p.mean.square() - 2.0 * q.loc * p.mean) / (2.0 * q.scale.square())
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return T.where((q.low >= 0.0) | (q.high <= 1.0), _infinite_like(result), result)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - T.log1p(-q.probs) - q._cont_bern_log_norm()
    return T.where((p.high >= 1.0) | (p.low <= 0.0), _infinite_like(result), result)


def _trace_XXT(m):
    return m.pow(2).sum((-2, -1))


def _same_event(p, q, what):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two {what} with different event shapes cannot be computed: "
                         f"{tuple(p.event_shape)} and {tuple(q.event_shape)}")


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    _same_event(p, q, "Low Rank Multivariate Normals")
    pW, pD, qW, qD = (p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_factor,
                      q._unbroadcasted_cov_diag)
    term1 = _batch_lowrank_logdet(qW, qD, q._capacitance_tril) - _batch_lowrank_logdet(pW, pD, p._capacitance_tril)
    term3 = _batch_lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    A = solve_triangular(q._capacitance_tril, qW.mT / qD.unsqueeze(-2), upper=False)
    # trace(q_cov^-1 p_cov), q_cov^-1 by Woodbury
    term2 = ((pD / qD).sum(-1) + _trace_XXT(pW * qD.rsqrt().unsqueeze(-1))
             - _trace_XXT(A * pD.sqrt().unsqueeze(-2)) - _trace_XXT(A.matmul(pW)))
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    _same_event(p, q, "(Low Rank) Multivariate Normals")
    qW, qD, pL = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, p._unbroadcasted_scale_tril
    term1 = (_batch_lowrank_logdet(qW, qD, q._capacitance_tril)
             - 2 * pL.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    term3 = _batch_lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    A = solve_triangular(q._capacitance_tril, qW.mT / qD.unsqueeze(-2), upper=False)
    term2 = _trace_XXT(pL * qD.rsqrt().unsqueeze(-1)) - _trace_XXT(A.matmul(pL))
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    _same_event(p, q, "(Low Rank) Multivariate Normals")
    pW, pD, qL = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_scale_tril
    term1 = 2 * qL.diagonal(dim1=-2, dim2=-1).log().sum(-1) - _batch_lowrank_logdet(pW, pD, p._capacitance_tril)
    term3 = _batch_mahalanobis(qL, q.loc - p.loc)
    batch = tuple(T.broadcast_shapes(tuple(qL.shape[:-2]), tuple(pW.shape[:-2])))
    n = p.event_shape[0]
    q_scale_tril = qL.expand(batch + (n, n))
    p_cov_factor = pW.expand(batch + (n, pW.shape[-1]))
    p_cov_diag = pD.sqrt().diag_embed().expand(batch + (n, n))
    term2 = (_trace_XXT(solve_triangular(q_scale_tril, p_cov_factor, upper=False))
             + _trace_XXT(solve_triangular(q_scale_tril, p_cov_diag, upper=False)))
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])
