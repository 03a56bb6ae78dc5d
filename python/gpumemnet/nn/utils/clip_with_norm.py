"""clip_grads_with_norm_ (PyTorch 2.6+): the scaling half of clip_grad_norm_, with a total norm computed
beforehand (by get_total_norm, e.g. across several parameter sets or ranks): every gradient is multiplied in place
by min(1, max_norm / (total_norm + 1e-6)), a 0-d tensor, so nothing waits for the device."""
from ... import _C
from ..._core.autograd import no_grad
from .clip_grad import _clip_coef

__all__ = ["clip_grads_with_norm_"]


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of `parameters` (a tensor or an iterable of tensors) in place by
    min(1, max_norm / (total_norm + 1e-6)). foreach: accepted (PyTorch's choice of kernel). Returns None."""
    if isinstance(parameters, _C.TensorBase):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return None
    if not isinstance(total_norm, _C.TensorBase):
        raise TypeError(f"clip_grads_with_norm_: total_norm must be a Tensor (the result of get_total_norm), got "
                        f"{type(total_norm).__name__}")
    with no_grad():
        coef = _clip_coef(total_norm, max_norm)
        for g in grads:
            g.mul_(coef.to(device=g.device, dtype=g.dtype) if (coef.device != g.device or coef.dtype != g.dtype)
                   else coef)
    return None
