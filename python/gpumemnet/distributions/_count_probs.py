"""What Binomial and NegativeBinomial share: a total_count beside exactly one of probs and logits."""
from .distribution import Distribution, _size
from .utils import broadcast_all, expand_probs_or_logits


def set_count_and_probs_or_logits(dist, total_count, probs, logits):
    """__init__'s part shared by Binomial and NegativeBinomial: exactly one of probs and logits, broadcast with
    total_count (made of its dtype), and _param on it. Returns the batch shape."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        dist.total_count, dist.probs = broadcast_all(total_count, probs)
        dist._param = dist.probs
    else:
        dist.total_count, dist.logits = broadcast_all(total_count, logits)
        dist._param = dist.logits
    dist.total_count = dist.total_count.type_as(dist._param)
    return dist._param.shape


def expand_count_and_probs_or_logits(cls, dist, batch_shape, instance):
    """expand() of Binomial and NegativeBinomial: total_count and whichever of probs and logits dist holds."""
    new = dist._get_checked_instance(cls, instance)
    batch_shape = _size(batch_shape, "batch_shape")
    new.total_count = dist.total_count.expand(batch_shape)
    expand_probs_or_logits(new, dist, batch_shape)
    Distribution.__init__(new, batch_shape, validate_args=False)
    new._validate_args = dist._validate_args
    return new
