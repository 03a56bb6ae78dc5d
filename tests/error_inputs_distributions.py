"""Error cases of this topic: B(...) is run against PyTorch too, E(...) names something PyTorch has not
(error_inputs.py explains both). EXEMPT: public callables with no bad input, each with its reason.

gm.distributions (torch.distributions): invalid parameters and values outside the support raise ValueError with
validation on (the default); the checks of values run where tensors have values (HOST), the shape checks on every
device."""
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401


def D(lib):
    return lib.L.distributions


def t(d, l, values, dtype="float32"):
    return l.L.tensor(values, dtype=getattr(l.L, dtype), device=d)


CASES = [
    B("Normal negative scale", lambda d, l: D(l).Normal(z(d, l, 2), t(d, l, [1.0, -1.0])), ValueError,
      r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution Normal.* to satisfy the constraint "
      r"GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Normal NaN loc", lambda d, l: D(l).Normal(t(d, l, [float("nan")]), 1.0), ValueError,
      r"Expected parameter loc .* constraint Real\(\)", devices=HOST),
    B("Normal non-number parameter", lambda d, l: D(l).Normal("0", 1.0), ValueError,
      r"Input arguments must all be instances of numbers.Number"),
    B("Normal log_prob of a value that does not broadcast", lambda d, l: D(l).Normal(z(d, l, 2), 1.0).log_prob(
      z(d, l, 3)), ValueError, r"Value is not broadcastable with batch_shape\+event_shape: \(3,\) vs \(2,\)"),
    B("Normal log_prob of a list", lambda d, l: D(l).Normal(z(d, l, 2), 1.0).log_prob([0.0, 1.0]), ValueError,
      r"The value argument to log_prob must be a Tensor"),
    B("Normal cdf of NaN", lambda d, l: D(l).Normal(z(d, l, 2), 1.0).cdf(t(d, l, [0.0, float("nan")])), ValueError,
      r"Expected value argument .* within the support \(Real\(\)\)", devices=HOST),
    B("Normal sample of an int shape", lambda d, l: D(l).Normal(z(d, l, 2), 1.0).sample(3), TypeError,
      r"sample_shape must be a sequence of ints"),
    B("Normal expand to a string", lambda d, l: D(l).Normal(z(d, l, 2), 1.0).expand("3"), TypeError,
      r"batch_shape must be a sequence of ints"),
    B("Bernoulli with probs and logits", lambda d, l: D(l).Bernoulli(probs=0.5, logits=0.0), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("Bernoulli with neither", lambda d, l: D(l).Bernoulli(), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("Bernoulli probs above 1", lambda d, l: D(l).Bernoulli(probs=t(d, l, [0.5, 1.5])), ValueError,
      r"Expected parameter probs .* Interval\(lower_bound=0.0, upper_bound=1.0\)", devices=HOST),
    B("Bernoulli log_prob of 0.5", lambda d, l: D(l).Bernoulli(probs=t(d, l, [0.5])).log_prob(t(d, l, [0.5])),
      ValueError, r"within the support \(Boolean\(\)\)", devices=HOST),
    B("Categorical 0-d probs", lambda d, l: D(l).Categorical(probs=t(d, l, 1.0)), ValueError,
      r"`probs` parameter must be at least one-dimensional"),
    B("Categorical 0-d logits", lambda d, l: D(l).Categorical(logits=t(d, l, 1.0)), ValueError,
      r"`logits` parameter must be at least one-dimensional"),
    B("Categorical with probs and logits", lambda d, l: D(l).Categorical(z(d, l, 3), z(d, l, 3)), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("Categorical negative probs", lambda d, l: D(l).Categorical(probs=t(d, l, [0.5, -0.5, 1.0])), ValueError,
      r"Expected parameter probs .* Simplex\(\)", devices=HOST),
    B("Categorical log_prob out of range", lambda d, l: D(l).Categorical(logits=z(d, l, 3)).log_prob(ix(d, l, 3)),
      ValueError, r"within the support \(IntegerInterval\(lower_bound=0, upper_bound=2\)\)", devices=HOST),
    B("Categorical sample of no draw", lambda d, l: D(l).Categorical(logits=z(d, l, 3)).sample((0,)), RuntimeError,
      r"cannot sample n_sample <= 0 samples"),
    B("Uniform low above high", lambda d, l: D(l).Uniform(t(d, l, [0.0, 2.0]), t(d, l, [1.0, 1.0])), ValueError,
      r"Uniform is not defined when low ?>= high", devices=HOST),
    B("Uniform log_prob outside", lambda d, l: D(l).Uniform(0.0, 1.0).log_prob(t(d, l, 2.0)), ValueError,
      r"within the support \(Interval\(lower_bound=0.0, upper_bound=1.0\)\)",
      devices=("cpu",)),  # number parameters are CPU tensors, and a 0-d CPU tensor does not mix with CUDA ones here
    B("Independent too many dims", lambda d, l: D(l).Independent(D(l).Normal(z(d, l, 3), 1.0), 2), ValueError,
      r"Expected reinterpreted_batch_ndims <= len\(base_distribution.batch_shape\), actual 2 vs 1"),
    B("Independent enumerate_support", lambda d, l: D(l).Independent(D(l).Bernoulli(logits=z(d, l, 3)),
      1).enumerate_support(), NotImplementedError, r"Enumeration over cartesian product is not implemented"),
    B("OneHotCategorical log_prob of a non-one-hot", lambda d, l: D(l).OneHotCategorical(logits=z(d, l, 3)).log_prob(
      t(d, l, [1.0, 1.0, 0.0])), ValueError, r"within the support \(OneHot\(\)\)", devices=HOST),
    B("OneHotCategorical log_prob of a wrong event", lambda d, l: D(l).OneHotCategorical(logits=z(d, l, 3)).log_prob(
      z(d, l, 4)), ValueError, r"The right-most size of value must match event_shape: \(4,\) vs \(3,\)"),
    B("Laplace zero scale", lambda d, l: D(l).Laplace(0.0, t(d, l, [0.0])), ValueError,
      r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Exponential negative rate", lambda d, l: D(l).Exponential(t(d, l, [-1.0])), ValueError,
      r"Expected parameter rate .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Exponential log_prob of a negative", lambda d, l: D(l).Exponential(1.0).log_prob(t(d, l, -1.0)), ValueError,
      r"within the support \(GreaterThanEq\(lower_bound=0.0\)\)", devices=HOST),
    B("LogNormal log_prob of a negative", lambda d, l: D(l).LogNormal(0.0, 1.0).log_prob(t(d, l, -1.0)), ValueError,
      r"within the support \(GreaterThan\(lower_bound=0.0\)\)", devices=HOST),
    B("MultivariateNormal 0-d loc", lambda d, l: D(l).MultivariateNormal(t(d, l, 0.0), l.L.eye(1, device=d)),
      ValueError, r"loc must be at least one-dimensional"),
    B("MultivariateNormal no matrix", lambda d, l: D(l).MultivariateNormal(z(d, l, 2)), ValueError,
      r"Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified"),
    B("MultivariateNormal two matrices", lambda d, l: D(l).MultivariateNormal(
      z(d, l, 2), l.L.eye(2, device=d), scale_tril=l.L.eye(2, device=d)), ValueError,
      r"Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified"),
    B("MultivariateNormal 1-D scale_tril", lambda d, l: D(l).MultivariateNormal(z(d, l, 2), scale_tril=z(d, l, 2)),
      ValueError, r"scale_tril matrix must be at least two-dimensional"),
    B("MultivariateNormal indefinite covariance", lambda d, l: D(l).MultivariateNormal(
      z(d, l, 2), t(d, l, [[1.0, 2.0], [2.0, 1.0]])), ValueError,
      r"Expected parameter covariance_matrix .* PositiveDefinite\(\)", devices=HOST),
    B("MultivariateNormal scale_tril with a negative diagonal", lambda d, l: D(l).MultivariateNormal(
      z(d, l, 2), scale_tril=t(d, l, [[1.0, 0.0], [0.5, -1.0]])), ValueError,
      r"Expected parameter scale_tril .* LowerCholesky\(\)", devices=HOST),
    B("MultivariateNormal log_prob of a wrong event", lambda d, l: D(l).MultivariateNormal(
      z(d, l, 2), l.L.eye(2, device=d)).log_prob(z(d, l, 3)), ValueError,
      r"The right-most size of value must match event_shape: \(3,\) vs \(2,\)"),
    B("Poisson negative rate", lambda d, l: D(l).Poisson(t(d, l, [1.0, -1.0])), ValueError,
      r"Expected parameter rate .* GreaterThanEq\(lower_bound=0.0\)", devices=HOST),
    B("Poisson log_prob of a fraction", lambda d, l: D(l).Poisson(1.0).log_prob(t(d, l, 0.5)), ValueError,
      r"within the support \(IntegerGreaterThan\(lower_bound=0\)\)", devices=HOST),
    B("Geometric zero probs", lambda d, l: D(l).Geometric(probs=t(d, l, [0.0, 0.5])), ValueError,
      r"Expected parameter probs .* to be positive but found invalid values", devices=HOST),
    B("Geometric with probs and logits", lambda d, l: D(l).Geometric(0.5, 0.0), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("Binomial fractional total_count", lambda d, l: D(l).Binomial(t(d, l, [2.5]), probs=t(d, l, [0.5])),
      ValueError, r"Expected parameter total_count .* IntegerGreaterThan\(lower_bound=0\)", devices=HOST),
    B("Binomial with neither probs nor logits", lambda d, l: D(l).Binomial(3), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("Binomial log_prob above total_count", lambda d, l: D(l).Binomial(3, probs=t(d, l, [0.5])).log_prob(
      t(d, l, [4.0])), ValueError, r"within the support \(IntegerInterval\(lower_bound=0", devices=HOST),
    B("Binomial entropy of mixed total counts", lambda d, l: D(l).Binomial(t(d, l, [3.0, 4.0]),
      probs=t(d, l, [0.5, 0.5])).entropy(), NotImplementedError, r"Inhomogeneous total count not supported by "
      r"`entropy`", devices=HOST),
    B("kl_divergence of Binomials with a larger q count", lambda d, l: D(l).kl_divergence(
      D(l).Binomial(3, probs=t(d, l, [0.5])), D(l).Binomial(4, probs=t(d, l, [0.5]))), NotImplementedError,
      r"KL between Binomials where q.total_count > p.total_count is not implemented", devices=HOST),
    B("Gamma negative concentration", lambda d, l: D(l).Gamma(t(d, l, [-1.0]), 1.0), ValueError,
      r"Expected parameter concentration .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Gamma log_prob of a negative", lambda d, l: D(l).Gamma(t(d, l, [1.0]), 1.0).log_prob(t(d, l, [-1.0])),
      ValueError, r"within the support \(GreaterThanEq\(lower_bound=0.0\)\)", devices=HOST),
    B("Beta zero concentration", lambda d, l: D(l).Beta(t(d, l, [1.0]), t(d, l, [0.0])), ValueError,
      r"Expected parameter concentration .* to satisfy the constraint", devices=HOST),
    B("Beta log_prob above 1", lambda d, l: D(l).Beta(t(d, l, [1.0]), t(d, l, [2.0])).log_prob(t(d, l, [1.5])),
      ValueError, r"within the support \(Interval\(lower_bound=0.0, upper_bound=1.0\)\)", devices=HOST),
    B("Dirichlet 0-d concentration", lambda d, l: D(l).Dirichlet(t(d, l, 1.0)), ValueError,
      r"`concentration` parameter must be at least one-dimensional"),
    B("Dirichlet negative concentration", lambda d, l: D(l).Dirichlet(t(d, l, [1.0, -1.0])), ValueError,
      r"Expected parameter concentration .* IndependentConstraint\(GreaterThan\(lower_bound=0.0\), 1\)",
      devices=HOST),
    B("Dirichlet log_prob off the simplex", lambda d, l: D(l).Dirichlet(t(d, l, [1.0, 1.0])).log_prob(
      t(d, l, [0.5, 0.6])), ValueError, r"within the support \(Simplex\(\)\)", devices=HOST),
    B("Cauchy negative scale", lambda d, l: D(l).Cauchy(0.0, t(d, l, [-1.0])), ValueError,
      r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("HalfNormal log_prob of a negative", lambda d, l: D(l).HalfNormal(t(d, l, [1.0])).log_prob(t(d, l, [-1.0])),
      ValueError, r"within the support \(GreaterThanEq\(lower_bound=0.0\)\)", devices=HOST),
    B("HalfCauchy zero scale", lambda d, l: D(l).HalfCauchy(t(d, l, [0.0])), ValueError,
      r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Gumbel negative scale", lambda d, l: D(l).Gumbel(t(d, l, [0.0]), t(d, l, [-2.0])), ValueError,
      r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Chi2 negative df", lambda d, l: D(l).Chi2(t(d, l, [-2.0])), ValueError,
      r"Expected parameter (df|concentration) .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("StudentT zero df", lambda d, l: D(l).StudentT(t(d, l, [0.0])), ValueError,
      r"Expected parameter (df|concentration) .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Multinomial tensor total_count", lambda d, l: D(l).Multinomial(t(d, l, [3.0]), probs=t(d, l, [0.5, 0.5])),
      NotImplementedError, r"inhomogeneous total_count is not supported"),
    B("Multinomial log_prob of a wrong event", lambda d, l: D(l).Multinomial(3, probs=t(d, l, [0.5, 0.5])).log_prob(
      t(d, l, [1.0, 1.0, 1.0])), ValueError, r"The right-most size of value must match event_shape"),
    B("Multinomial log_prob of negative counts", lambda d, l: D(l).Multinomial(3, probs=t(d, l, [0.5, 0.5])).log_prob(
      t(d, l, [-1.0, 4.0])), ValueError, r"within the support \(Multinomial\(\)\)", devices=HOST),
    B("MixtureSameFamily of a non-Categorical mixture", lambda d, l: D(l).MixtureSameFamily(
      D(l).Bernoulli(logits=z(d, l, 3)), D(l).Normal(z(d, l, 3), 1.0)), ValueError,
      r"The Mixture distribution needs to be an\s+instance of torch.distributions.Categorical"),
    B("MixtureSameFamily of a non-distribution component", lambda d, l: D(l).MixtureSameFamily(
      D(l).Categorical(logits=z(d, l, 3)), "normal"), ValueError,
      r"The Component distribution needs to be an instance of torch.distributions.Distribution"),
    B("MixtureSameFamily component count differs", lambda d, l: D(l).MixtureSameFamily(
      D(l).Categorical(logits=z(d, l, 3)), D(l).Normal(z(d, l, 4), 1.0)), ValueError,
      r"`mixture_distribution component` \(3\) does not equal `component_distribution.batch_shape\[-1\]` \(4\)"),
    B("MixtureSameFamily batch shapes differ", lambda d, l: D(l).MixtureSameFamily(
      D(l).Categorical(logits=z(d, l, 2, 3)), D(l).Normal(z(d, l, 5, 3), 1.0)), ValueError,
      r"`mixture_distribution.batch_shape` \(\(2,\)\) is not compatible with `component_distribution.batch_shape`"
      r"\(\(5,\)\)"),
    B("NegativeBinomial probs of 1", lambda d, l: D(l).NegativeBinomial(2.0, probs=t(d, l, [1.0])), ValueError,
      r"Expected parameter probs .* HalfOpenInterval\(lower_bound=0.0, upper_bound=1.0\)", devices=HOST),
    B("NegativeBinomial with probs and logits", lambda d, l: D(l).NegativeBinomial(2.0, 0.5, 0.0), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("RelaxedBernoulli with neither probs nor logits", lambda d, l: D(l).RelaxedBernoulli(t(d, l, 0.5)), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("RelaxedOneHotCategorical log_prob off the simplex", lambda d, l: D(l).RelaxedOneHotCategorical(
      t(d, l, 0.5), logits=z(d, l, 3)).log_prob(t(d, l, [0.5, 0.5, 0.5])), ValueError,
      r"within the support \(Simplex\(\)\)", devices=HOST),
    B("Pareto negative alpha", lambda d, l: D(l).Pareto(t(d, l, [1.0]), t(d, l, [-1.0])), ValueError,
      r"Expected parameter (alpha|rate) .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Pareto log_prob below scale", lambda d, l: D(l).Pareto(t(d, l, [2.0]), t(d, l, [1.0])).log_prob(
      t(d, l, [1.0])), ValueError, r"within the support \(GreaterThanEq\(lower_bound=", devices=HOST),
    B("Weibull negative concentration", lambda d, l: D(l).Weibull(t(d, l, [1.0]), t(d, l, [-1.0])), ValueError,
      r"Expected parameter concentration .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("Kumaraswamy zero concentration", lambda d, l: D(l).Kumaraswamy(t(d, l, [0.0]), t(d, l, [1.0])), ValueError,
      r"Expected parameter concentration1 .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("InverseGamma negative rate", lambda d, l: D(l).InverseGamma(t(d, l, [1.0]), t(d, l, [-1.0])), ValueError,
      r"Expected parameter rate .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("FisherSnedecor negative df2", lambda d, l: D(l).FisherSnedecor(t(d, l, [1.0]), t(d, l, [-1.0])), ValueError,
      r"Expected parameter (df2|concentration) .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("LogisticNormal log_prob off the simplex", lambda d, l: D(l).LogisticNormal(z(d, l, 2), 1.0).log_prob(
      t(d, l, [0.5, 0.5, 0.5])), ValueError, r"within the support \(Simplex\(\)\)", devices=HOST),
    B("ContinuousBernoulli probs above 1 with validate_args", lambda d, l: D(l).ContinuousBernoulli(
      probs=t(d, l, [1.5]), validate_args=True), ValueError, r"The parameter probs has invalid values", devices=HOST),
    B("ContinuousBernoulli with probs and logits", lambda d, l: D(l).ContinuousBernoulli(0.5, 0.0), ValueError,
      r"Either `probs` or `logits` must be specified, but not both"),
    B("LowRankMultivariateNormal 1-D cov_factor", lambda d, l: D(l).LowRankMultivariateNormal(
      z(d, l, 3), z(d, l, 3), l.L.ones(3, device=d)), ValueError, r"cov_factor must be at least two-dimensional"),
    B("LowRankMultivariateNormal cov_factor rows differ", lambda d, l: D(l).LowRankMultivariateNormal(
      z(d, l, 3), z(d, l, 4, 2), l.L.ones(3, device=d)), ValueError,
      r"cov_factor must be a batch of matrices with shape 3 x m"),
    B("LowRankMultivariateNormal cov_diag size differs", lambda d, l: D(l).LowRankMultivariateNormal(
      z(d, l, 3), z(d, l, 3, 2), l.L.ones(4, device=d)), ValueError,
      r"cov_diag must be a batch of vectors with shape \(3,\)"),
    B("LowRankMultivariateNormal batch shapes differ", lambda d, l: D(l).LowRankMultivariateNormal(
      z(d, l, 2, 3), z(d, l, 5, 3, 2), l.L.ones(3, device=d)), ValueError, r"Incompatible batch shapes"),
    B("LowRankMultivariateNormal zero cov_diag", lambda d, l: D(l).LowRankMultivariateNormal(
      z(d, l, 3), l.L.ones(3, 1, device=d), z(d, l, 3)), ValueError,
      r"Expected parameter cov_diag .* IndependentConstraint\(GreaterThan\(lower_bound=0.0\), 1\)", devices=HOST),
    B("VonMises zero concentration", lambda d, l: D(l).VonMises(t(d, l, [0.0]), t(d, l, [0.0])), ValueError,
      r"Expected parameter concentration .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("GeneralizedPareto negative scale", lambda d, l: D(l).GeneralizedPareto(0.0, t(d, l, [-1.0]), 0.1), ValueError,
      r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)", devices=HOST),
    B("GeneralizedPareto log_prob below loc", lambda d, l: D(l).GeneralizedPareto(
      t(d, l, [1.0]), t(d, l, [1.0]), t(d, l, [0.1])).log_prob(t(d, l, [0.0])), ValueError,
      r"within the support \(Interval\(lower_bound=", devices=HOST),
    B("LKJCholesky of dim 1", lambda d, l: D(l).LKJCholesky(1, t(d, l, [1.0])), ValueError,
      r"Expected dim to be an integer greater than or equal to 2. Found dim=1"),
    B("LKJCholesky negative concentration", lambda d, l: D(l).LKJCholesky(3, t(d, l, [-1.0])), ValueError,
      r"Expected parameter concentration .* of distribution Dirichlet", devices=HOST),  # (its Beta's, first)
    B("Wishart two matrices", lambda d, l: D(l).Wishart(4.0, l.L.eye(2, device=d), scale_tril=l.L.eye(2, device=d)),
      AssertionError, r"Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified"),
    B("Wishart 1-D matrix", lambda d, l: D(l).Wishart(4.0, z(d, l, 2)), ValueError,
      r"scale_tril must be at least two-dimensional"),
    B("Wishart df too small", lambda d, l: D(l).Wishart(t(d, l, [1.0]), l.L.eye(3, device=d)), ValueError,
      r"Value of df=.* expected to be greater than ndim - 1 = 2", devices=HOST),
    B("Wishart indefinite covariance", lambda d, l: D(l).Wishart(4.0, t(d, l, [[1.0, 2.0], [2.0, 1.0]])), ValueError,
      r"Expected parameter covariance_matrix .* PositiveDefinite\(\)", devices=HOST),
    B("TransformedDistribution of a non-transform", lambda d, l: D(l).TransformedDistribution(
      D(l).Normal(0.0, 1.0), "exp"), ValueError, r"transforms must be a Transform or list"),
    B("TransformedDistribution of a list holding a non-transform", lambda d, l: D(l).TransformedDistribution(
      D(l).Normal(0.0, 1.0), [D(l).ExpTransform(), 1]), ValueError, r"transforms must be a Transform or a list"),
    B("AffineTransform cache_size 2", lambda d, l: D(l).AffineTransform(0.0, 1.0, cache_size=2), ValueError,
      r"cache_size must be 0 or 1"),
    B("ReshapeTransform of different sizes", lambda d, l: D(l).ReshapeTransform((4,), (3,)), ValueError,
      r"in_shape, out_shape have different numbers of elements"),
    B("ReshapeTransform forward_shape mismatch", lambda d, l: D(l).ReshapeTransform((4,), (2, 2)).forward_shape((3, 5)),
      ValueError, r"Shape mismatch"),
    B("CatTransform lengths differ", lambda d, l: D(l).CatTransform([D(l).ExpTransform()], lengths=[1, 2]),
      AssertionError, r"lengths \(2\) must match transforms \(1\)"),
    B("CatTransform of a non-transform", lambda d, l: D(l).CatTransform(["exp"]), AssertionError,
      r"All elements of tseq must be Transform instances"),
    B("StackTransform of the wrong size", lambda d, l: D(l).StackTransform([D(l).ExpTransform()] * 2, dim=-1)(
      z(d, l, 2, 3)), AssertionError, r"size\(-1\) = 3 must equal len\(transforms\) 2"),
    B("CorrCholeskyTransform forward_shape of a non-triangular size", lambda d, l:
      D(l).CorrCholeskyTransform().forward_shape((5,)), ValueError, r"Input is not a flattened lower-diagonal number"),
    B("biject_to of an unregistered constraint", lambda d, l: D(l).biject_to(D(l).constraints.boolean),
      NotImplementedError, r"Cannot transform _Boolean constraints"),
    B("transform_to register of a non-constraint", lambda d, l: D(l).transform_to.register(int, lambda c: c),
      TypeError, r"Expected constraint to be either a Constraint subclass or instance"),
    B("vec_to_tril_matrix of a non-triangular size", lambda d, l: D(l).utils.vec_to_tril_matrix(z(d, l, 2)),
      ValueError, r"The size of last dimension is 2 which cannot be expressed as the lower triangular part"),
    B("constraints.cat of a non-constraint", lambda d, l: D(l).constraints.cat(["real"]), AssertionError,
      r"All elements of cseq must be Constraint instances"),
    B("kl_divergence of an unregistered pair", lambda d, l: D(l).kl_divergence(D(l).Normal(0.0, 1.0),
      D(l).Categorical(logits=z(d, l, 3))), NotImplementedError,
      r"No KL\(p \|\| q\) is implemented for p type Normal and q type Categorical"),
    B("kl_divergence of MultivariateNormals of different sizes", lambda d, l: D(l).kl_divergence(
      D(l).MultivariateNormal(z(d, l, 2), l.L.eye(2, device=d)),
      D(l).MultivariateNormal(z(d, l, 3), l.L.eye(3, device=d))), ValueError,
      r"KL-divergence between two Multivariate Normals with different event shapes cannot be computed"),
    B("register_kl of a non-type", lambda d, l: D(l).register_kl("Normal", D(l).Normal), TypeError,
      r"Expected type_p to be a Distribution subclass"),
    B("set_default_validate_args of a string", lambda d, l: D(l).Distribution.set_default_validate_args("yes"),
      ValueError, r"value must be True or False"),
    B("constraints.independent of a non-constraint", lambda d, l: D(l).constraints.independent("real", 1),
      AssertionError, r"base_constraint must be a Constraint"),
    B("dependent constraint check", lambda d, l: D(l).constraints.dependent.check(z(d, l, 2)), ValueError,
      r"Cannot determine validity of dependent constraint"),
]
EXEMPT = {}
