"""gm.distributions (layer 2): torch.distributions' probability distributions, their constraints and transforms,
and kl_divergence. Samples are drawn from gpumemnet's generator (gm.manual_seed), so the values differ from
PyTorch's streams; densities, entropies, cdfs, KLs and their gradients match PyTorch's."""
from . import constraint_registry, constraints, transforms  # noqa: F401
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .constraint_registry import biject_to, transform_to
from .continuous_bernoulli import ContinuousBernoulli
from .cauchy import Cauchy
from .chi2 import Chi2
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .fishersnedecor import FisherSnedecor
from .gamma import Gamma
from .generalized_pareto import GeneralizedPareto
from .geometric import Geometric
from .gumbel import Gumbel
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .independent import Independent
from .inverse_gamma import InverseGamma
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .lkj_cholesky import LKJCholesky
from .log_normal import LogNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .logistic_normal import LogisticNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .pareto import Pareto
from .poisson import Poisson
from .relaxed_bernoulli import RelaxedBernoulli
from .relaxed_categorical import RelaxedOneHotCategorical
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, CatTransform, ComposeTransform,  # noqa: F401
                         CorrCholeskyTransform, CumulativeDistributionTransform, ExpTransform, IndependentTransform,
                         LowerCholeskyTransform, PositiveDefiniteTransform, PowerTransform, ReshapeTransform,
                         SigmoidTransform, SoftmaxTransform, SoftplusTransform, StackTransform, StickBreakingTransform,
                         TanhTransform, Transform, identity_transform)
from .uniform import Uniform
from .von_mises import VonMises
from .wishart import Wishart
from .weibull import Weibull

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform", "Categorical",
           "Cauchy", "Chi2", "ComposeTransform", "ContinuousBernoulli", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "Dirichlet", "Distribution", "ExpTransform", "Exponential",
           "ExponentialFamily", "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy",
           "HalfNormal", "Independent", "IndependentTransform", "InverseGamma", "Kumaraswamy", "LKJCholesky",
           "Laplace", "LogNormal", "LogisticNormal", "LowRankMultivariateNormal", "LowerCholeskyTransform",
           "MixtureSameFamily", "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal",
           "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PositiveDefiniteTransform",
           "PowerTransform", "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform",
           "SoftmaxTransform", "SoftplusTransform", "StackTransform", "StickBreakingTransform", "StudentT",
           "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart",
           "biject_to", "identity_transform", "kl_divergence", "register_kl", "transform_to"]
# (PyTorch's list: the submodules constraints, transforms, constraint_registry are attributes, not in __all__; Pyro
# wraps every name of it as a distribution or transform)
