"""torch.distributions.Wishart."""
import math
import warnings
from numbers import Number

from . import _ops as T
from . import constraints
from .chi2 import Chi2
from .distribution import _all_true, _size
from .exp_family import ExponentialFamily
from .lkj_cholesky import _mvlgamma
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property
from ..linalg import cholesky, slogdet

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """The multivariate digamma function: sum_i digamma(x - i / 2), for x > (p - 1) / 2."""
    if not _all_true(x > (p - 1) / 2):
        raise AssertionError(f"Wrong domain for multivariate digamma function: every value must exceed {(p - 1) / 2}")
    offsets = T.arange(p, dtype=x.dtype, device=x.device) / 2
    return T.digamma(x.unsqueeze(-1) - offsets.expand(tuple(x.shape) + (-1,))).sum(-1)


def _clamp_above_eps(x):
    return x.clamp(min=T.finfo(x.dtype).eps)


class Wishart(ExponentialFamily):
    """The Wishart distribution of df degrees of freedom (> p - 1) and a p x p positive-definite scale matrix,
    given as exactly one of covariance_matrix, precision_matrix or scale_tril. rsample is Bartlett's
    decomposition; a sample that comes out singular (possible for p - 1 < df < p) is drawn again, up to
    max_try_correction times."""
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                 "specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = T.tensor(df, dtype=param.dtype, device=param.device)
        else:
            batch_shape = tuple(T.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(batch_shape)
        event_shape = tuple(param.shape[-2:])
        p = event_shape[-1]
        if self.df.device.type != "meta" and bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        if scale_tril is not None:
            self.scale_tril = param.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(batch_shape + (-1, -1))
        else:
            self.precision_matrix = param.expand(batch_shape + (-1, -1))
        if self.df.device.type != "meta" and bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < "
                          "ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(self.df, batch_shape)

    def _chi2(self, df, batch_shape):
        """The Chi2(df - i) of Bartlett's decomposition's diagonal, i = 0 .. p - 1."""
        L = self._unbroadcasted_scale_tril
        offsets = T.arange(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return Chi2(df=df.unsqueeze(-1) - offsets.expand(tuple(batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        new._event_shape = self._event_shape
        new._dist_chi2 = new._chi2(new.df, batch_shape)
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return L.matmul(L.transpose(-2, -1)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        identity = T.eye(self._event_shape[-1], device=L.device, dtype=L.dtype)
        return T.cholesky_solve(identity, L).expand(self._matrix_shape())

    def _df_matrix(self, df):
        return df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = T.where(factor <= 0, T.full_like(factor, math.nan), factor)
        return self._df_matrix(factor) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix(self.df) * (V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=()):
        p = self._event_shape[-1]
        diag = _clamp_above_eps(self._dist_chi2.rsample(sample_shape).sqrt())
        shape = tuple(_size(sample_shape)) + tuple(self._batch_shape) + (p, p)
        below = T.randn(shape, dtype=diag.dtype, device=diag.device).tril(-1)  # standard normals below the diagonal
        noise = below + diag.diag_embed(dim1=-2, dim2=-1)
        chol = self._unbroadcasted_scale_tril.matmul(noise)
        return chol.matmul(chol.transpose(-2, -1))

    def rsample(self, sample_shape=(), max_try_correction=None):
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = _size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        if sample.device.type == "meta":
            return sample
        is_singular = ~self.support.check(sample)
        for _ in range(max_try_correction):
            if not bool(is_singular.any()):
                break
            # (PyTorch warns on every call here, singular or not: its flag is the check inverted)
            warnings.warn("Singular sample detected.", stacklevel=2)
            sample_new = self._bartlett_sampling(sample_shape)
            sample = T.where(is_singular.unsqueeze(-1).unsqueeze(-1), sample_new, sample)
            is_singular = ~self.support.check(sample)
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        return (-nu * (p * _LOG_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1)) - _mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * slogdet(value).logabsdet
                - T.cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1) / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        return ((p + 1) * (p * _LOG_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1)) + _mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        nu = self.df
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-slogdet(-2 * x).logabsdet + _LOG_2 * p) + _mvlgamma(y + (p + 1) / 2, p)
