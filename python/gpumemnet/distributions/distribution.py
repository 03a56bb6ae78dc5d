"""torch.distributions.Distribution: the base class of every probability distribution."""
import warnings

from . import _ops as T
from . import constraints
from .constraints import _all_true  # noqa: F401  (the distributions import it from here)
from .utils import lazy_property

__all__ = ["Distribution"]


def _size(shape, name="sample_shape"):
    """shape as a Size, refusing what is not a sequence of ints (a bare int too, as torch.Size(3) does)."""
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints (a torch.Size), got {type(shape).__name__}") from None
    if not all(isinstance(s, int) or (isinstance(s, T.Tensor) and s.dim() == 0) for s in shape):
        raise TypeError(f"{name} must be a sequence of ints, got {shape}")
    return T.Size(int(s) for s in shape)


class Distribution:
    """Base class of the probability distributions.

    batch_shape: the shape over which parameters are batched; event_shape: the shape of one sample.
    validate_args: check the arguments (and the values given to log_prob) against arg_constraints / support;
    None follows set_default_validate_args (on by default, as Python's assert)."""
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turn argument validation on or off for distributions created without validate_args."""
        if value not in [True, False]:
            raise ValueError(f"set_default_validate_args: value must be True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = T.Size(batch_shape)
        self._event_shape = T.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                              "`arg_constraints = {}` or initialize the distribution with `validate_args=False` to "
                              "turn off validation.",
                              stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # cannot be checked on its own
                if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                    continue  # derived from another argument, which is checked
                value = getattr(self, param)
                if not _all_true(constraint.check(value)):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A distribution of the same parameters expanded (not copied) to batch_shape."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        """{argument name: Constraint} the arguments must satisfy."""
        raise NotImplementedError

    @property
    def support(self):
        """The Constraint the distribution's values satisfy."""
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A sample (or sample_shape samples) drawn without gradient."""
        with T.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterized sample: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning, stacklevel=2)
        return self.sample(T.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return T.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        """sample_shape + batch_shape + event_shape."""
        return T.Size(tuple(_size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """Refuse a value of the wrong type, a shape that does not broadcast, or values outside the support."""
        if not isinstance(value, T.Tensor):
            raise ValueError(f"The value argument to log_prob must be a Tensor, got {type(value).__name__}")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._event_shape)}.")
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs "
                                 f"{expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=2)
            return
        if not _all_true(support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {actual_shape}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        param_names = [k for k, _ in self.arg_constraints.items() if k in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
                         for p in param_names)  # PyTorch's: a Size (torch.Size([2]) under the alias)
        return self.__class__.__name__ + "(" + args + ")"
