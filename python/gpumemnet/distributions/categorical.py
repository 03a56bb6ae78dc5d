"""torch.distributions.Categorical."""
from . import _ops as T
from . import constraints
from .distribution import Distribution, _size
from .utils import lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


def _check_param(name, value):
    if not isinstance(value, T.Tensor):
        raise AttributeError(f"Categorical: {name} must be a Tensor (it has no dim()), got {type(value).__name__}")
    if value.dim() < 1:
        raise ValueError(f"`{name}` parameter must be at least one-dimensional.")


class Categorical(Distribution):
    """An index in [0, K) drawn with the probabilities probs (normalized over the last dimension) or
    softmax(logits). Give exactly one of probs and logits; the last dimension indexes the K categories.
    sample draws with gm.multinomial (computed on the host)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            _check_param("probs", probs)
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            _check_param("logits", logits)
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)  # normalized
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = self._param.shape[:-1] if self._param.dim() > 1 else ()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = _size(batch_shape, "batch_shape")
        param_shape = tuple(batch_shape) + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return T.Size(self._param.shape)

    @property
    def mean(self):
        return T.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return T.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        sample_shape = _size(sample_shape)
        n = 1
        for s in sample_shape:
            n *= s
        if n <= 0:  # PyTorch's multinomial refuses to draw no sample
            raise RuntimeError(f"Categorical.sample: cannot sample n_sample <= 0 samples (sample_shape "
                               f"{tuple(sample_shape)} holds none)")
        shape = tuple(self._extended_shape(sample_shape))
        if self._param.device.type == "meta":  # multinomial needs values; the estimator needs only the shape
            return T.empty(shape, dtype=T.int64, device=self._param.device)
        probs_2d = self.probs.reshape(-1, self._num_events)
        with T.no_grad():
            samples_2d = T.multinomial(probs_2d, n, True).T
        return samples_2d.reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = T.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = T.finfo(self.logits.dtype).min
        logits = T.clamp(self.logits, min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = T.arange(self._num_events, dtype=T.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
