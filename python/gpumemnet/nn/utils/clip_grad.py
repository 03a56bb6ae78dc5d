"""Gradient clipping as torch.nn.utils: clip_grad_norm_ scales every gradient in place by
min(1, max_norm / (total_norm + 1e-6)) and returns the total norm (a 0-d tensor, not synchronised); clip_grad_value_
clamps each gradient in place.

The norms avoid gradient-sized temporaries where they can, because clipping runs every step right at the peak
(all gradients alive): the 2-norm is sqrt(g . g) (one BLAS dot product over the flattened gradient), the
inf-norm max(amax(g), -amin(g)); only other orders, and the 2-norm of half types (accumulated in float32, as
PyTorch does), make one transient copy of a gradient at a time."""
import math
import warnings

from ... import _C
from ..._core import creation
from ..._core.autograd import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm"]


def _grads(parameters):
    if isinstance(parameters, _C.TensorBase):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _norm(g, norm_type):
    """The norm_type-norm of one tensor, a 0-d tensor of its dtype."""
    if norm_type == math.inf:
        return g.amax().maximum(g.amin().neg()) if g.numel() else creation.zeros((), dtype=g.dtype,
                                                                                 device=g.device)
    if norm_type == -math.inf:
        return g.abs().amin()
    flat = g.reshape(-1)
    if norm_type == 2.0:
        if g._dtype in (0, 1):  # float32 / float64: a dot product, no copy
            return creation.matmul(flat, flat).sqrt()
        f = flat.float()
        return creation.matmul(f, f).sqrt().to(g.dtype)
    if norm_type == 1.0:
        return flat.abs().sum()
    if norm_type == 0.0:
        return flat.ne(0).sum().to(g.dtype)
    return flat.abs().pow(norm_type).sum().pow(1.0 / norm_type)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (as if they were concatenated into one vector)."""
    if isinstance(tensors, _C.TensorBase):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return creation.tensor(0.0)
    with no_grad():
        norms = [_norm(t, norm_type) for t in tensors]
        first = tensors[0]
        norms = [n.to(first.device) if n.device != first.device else n for n in norms]
        total = _norm(creation.stack(norms), norm_type)
    if error_if_nonfinite and first._device != "meta":
        v = float(total.item())
        if math.isnan(v) or math.isinf(v):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               f"so it cannot be clipped. To disable this error and scale the gradients by the "
                               f"non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of `parameters` (a tensor or an iterable of tensors) in place so that their total
    norm is at most max_norm; returns the total norm before clipping. foreach: accepted (PyTorch's choice of
    kernel; the result is the same)."""
    if isinstance(parameters, _C.TensorBase):
        parameters = [parameters]
    grads = _grads(list(parameters))
    max_norm = float(max_norm)
    if not grads:
        return creation.tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    with no_grad():
        coef = _clip_coef(total, max_norm)
        for g in grads:
            g.mul_(coef.to(g.device) if coef.device != g.device else coef)
    return total


def _clip_coef(total, max_norm):
    """min(1, max_norm / (total + 1e-6)), as a 0-d tensor (no synchronisation)."""
    return (creation.full((), max_norm, dtype=total.dtype, device=total.device) / (total + 1e-6)).clamp(max=1.0)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of clip_grad_norm_ (as in PyTorch)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of `parameters` to [-clip_value, clip_value] in place."""
    if isinstance(parameters, _C.TensorBase):
        parameters = [parameters]
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(list(parameters)):
            g.clamp_(-clip_value, clip_value)
