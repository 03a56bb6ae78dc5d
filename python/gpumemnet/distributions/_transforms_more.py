"""The structured transforms of torch.distributions.transforms (re-exported there): reinterpreting, reshaping,
onto the simplex, to Cholesky factors and positive-definite matrices, slicewise (Cat / Stack), and a
distribution's cdf."""
import math

from . import _ops as T
from . import constraints
from ._transforms_base import Transform, _clipped_sigmoid
from .utils import _sum_rightmost, tril_matrix_to_vec, vec_to_tril_matrix
from ..linalg import cholesky
from ..nn.functional import logsigmoid, pad, softplus

__all__ = ["CatTransform", "CorrCholeskyTransform", "CumulativeDistributionTransform", "IndependentTransform",
           "LowerCholeskyTransform", "PositiveDefiniteTransform", "ReshapeTransform", "SoftmaxTransform",
           "StackTransform", "StickBreakingTransform"]


class IndependentTransform(Transform):
    """base_transform with reinterpreted_batch_ndims more rightmost dimensions taken as the event (its
    log-Jacobian summed over them)."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError(f"Too few dimensions on input: {x.dim()}, the domain's event has {self.domain.event_dim}")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError(f"Too few dimensions on input: {y.dim()}, the codomain's event has "
                             f"{self.codomain.event_dim}")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class ReshapeTransform(Transform):
    """The rightmost dimensions in_shape reshaped to out_shape (same number of elements); log-Jacobian 0."""
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = T.Size(in_shape)
        self.out_shape = T.Size(out_shape)
        if _numel(self.in_shape) != _numel(self.out_shape):
            raise ValueError(f"in_shape, out_shape have different numbers of elements: {tuple(self.in_shape)} and "
                             f"{tuple(self.out_shape)}")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch_shape = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch_shape + tuple(self.out_shape))

    def _inverse(self, y):
        batch_shape = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch_shape + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return T.zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]), dtype=x.dtype, device=x.device)

    def _reshaped(self, shape, frm, to):
        shape = tuple(shape)
        if len(shape) < len(frm):
            raise ValueError(f"Too few dimensions on input: shape {shape}, expected at least {len(frm)}")
        cut = len(shape) - len(frm)
        if shape[cut:] != tuple(frm):
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {tuple(frm)}")
        return T.Size(shape[:cut] + tuple(to))

    def forward_shape(self, shape):
        return self._reshaped(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._reshaped(shape, self.out_shape, self.in_shape)


def _at_least_1d(shape):
    if len(shape) < 1:
        raise ValueError("Too few dimensions on input: the transform needs a vector dimension")


class SoftmaxTransform(Transform):
    """Unconstrained vectors onto the simplex by softmax (not bijective: the inverse is log)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _at_least_1d(shape)
        return shape

    def inverse_shape(self, shape):
        _at_least_1d(shape)
        return shape


class StickBreakingTransform(Transform):
    """R^(K-1) onto the K-simplex by stick breaking (bijective): each coordinate takes a sigmoid share of what
    the previous ones left."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    def _call(self, x):
        offset = x.shape[-1] + 1 - T.ones(x.shape[-1], dtype=x.dtype, device=x.device).cumsum(-1)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return pad(z, [0, 1], value=1) * pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - T.ones(y_crop.shape[-1], dtype=y.dtype, device=y.device).cumsum(-1)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=T.finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        offset = x.shape[-1] + 1 - T.ones(x.shape[-1], dtype=x.dtype, device=x.device).cumsum(-1)
        x = x - offset.log()
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        _at_least_1d(shape)
        return T.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        _at_least_1d(shape)
        return T.Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(Transform):
    """Square matrices onto lower-triangular ones with positive diagonal: the strict lower triangle kept, the
    diagonal exponentiated (not bijective: the upper triangle is dropped)."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Square matrices onto positive-definite ones: L L^T of their LowerCholeskyTransform."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x.matmul(x.mT)

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(cholesky(y))


class CorrCholeskyTransform(Transform):
    """Vectors of D (D - 1) / 2 reals onto Cholesky factors of D x D correlation matrices (rows of unit norm):
    tanh into (-1, 1), then stick breaking along each row."""
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        x = x.tanh()
        eps = T.finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        z = r ** 2
        z1m_cumprod_sqrt = (1 - z).sqrt().cumprod(-1)
        r = r + T.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = pad(y_cumsum[..., :-1], [1, 0], value=1)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        y1m_cumsum_tril = tril_matrix_to_vec(y1m_cumsum, diag=-2)
        stick_breaking_logdet = 0.5 * y1m_cumsum_tril.log().sum(-1)
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        _at_least_1d(shape)
        N = shape[-1]
        D = round((0.25 + 2 * N) ** 0.5 + 0.5)
        if D * (D - 1) // 2 != N:
            raise ValueError(f"Input is not a flattened lower-diagonal number: {N}")
        return T.Size(tuple(shape[:-1]) + (D, D))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input: the transform needs square matrices")
        if shape[-2] != shape[-1]:
            raise ValueError(f"Input is not square: {tuple(shape)}")
        D = shape[-1]
        return T.Size(tuple(shape[:-2]) + (D * (D - 1) // 2,))


class CumulativeDistributionTransform(Transform):
    """x -> distribution.cdf(x), onto the unit interval (log-Jacobian: distribution.log_prob(x))."""
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)


def _check_transforms(tseq):
    if not all(isinstance(t, Transform) for t in tseq):  # PyTorch asserts: AssertionError, as there
        raise AssertionError("All elements of tseq must be Transform instances, got "
                             + ", ".join(type(t).__name__ for t in tseq))


def _check_dim(what, t, dim, size, want):
    if not -t.dim() <= dim < t.dim():
        raise AssertionError(f"dim {dim} out of range for {what} with {t.dim()} dimensions")
    if t.shape[dim] != want:
        raise AssertionError(f"{what}.size({dim}) = {t.shape[dim]} must equal {size} {want}")


class CatTransform(Transform):
    """The transforms tseq applied to consecutive slices of lengths `lengths` (default 1 each) along dim."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        _check_transforms(tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _slices(self, t):
        start = 0
        for length in self.lengths:
            yield t.narrow(self.dim, start, length)
            start += length

    def _call(self, x):
        _check_dim("x", x, self.dim, "length", self.length)
        return T.cat([tr(s) for tr, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        _check_dim("y", y, self.dim, "length", self.length)
        return T.cat([tr.inv(s) for tr, s in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_dim("x", x, self.dim, "length", self.length)
        _check_dim("y", y, self.dim, "length", self.length)
        logdetjacs = []
        for tr, xs, ys in zip(self.transforms, self._slices(x), self._slices(y)):
            logdetjac = tr.log_abs_det_jacobian(xs, ys)
            if tr.event_dim < self.event_dim:
                logdetjac = _sum_rightmost(logdetjac, self.event_dim - tr.event_dim)
            logdetjacs.append(logdetjac)
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim = dim + self.event_dim
        if dim < 0:  # the concatenated dimension survives in the log-Jacobian
            return T.cat(logdetjacs, dim)
        return sum(logdetjacs)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """The transforms tseq applied to the consecutive entries along dim (one transform each)."""

    def __init__(self, tseq, dim=0, cache_size=0):
        _check_transforms(tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z):
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        _check_dim("x", x, self.dim, "len(transforms)", len(self.transforms))
        return T.stack([tr(s) for s, tr in zip(self._slice(x), self.transforms)], self.dim)

    def _inverse(self, y):
        _check_dim("y", y, self.dim, "len(transforms)", len(self.transforms))
        return T.stack([tr.inv(s) for s, tr in zip(self._slice(y), self.transforms)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_dim("x", x, self.dim, "len(transforms)", len(self.transforms))
        _check_dim("y", y, self.dim, "len(transforms)", len(self.transforms))
        return T.stack([tr.log_abs_det_jacobian(xs, ys)
                        for xs, ys, tr in zip(self._slice(x), self._slice(y), self.transforms)], self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)
