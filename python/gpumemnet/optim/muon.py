"""Muon: PyTorch's (2.9+) torch.optim.Muon for 2-D parameters. A momentum buffer (lerp toward the gradient, a
Nesterov look-ahead by default), orthogonalised by a quintic Newton-Schulz iteration in bfloat16 (the update is
about U V^T of the buffer's SVD), decoupled weight decay, and a learning rate scaled by the parameter's shape
(adjust_lr_fn). The state is the momentum buffer, tagged "optimizer"; the iteration's temporaries are bfloat16 and
as big as the parameter."""
import math

from .._core.dtype import bfloat16
from .optimizer import Optimizer, _is_tensor

__all__ = ["Muon"]

_NS = (3.4445, -4.7750, 2.0315)  # PyTorch's quintic coefficients (DEFAULT_A, DEFAULT_B, DEFAULT_C)
_ADJUST = ("original", "match_rms_adamw", "spectral_unclamped")


def _orthogonalised(update, coefficients, steps, eps):
    """The Newton-Schulz iteration PyTorch's Muon runs: in bfloat16, on the wide orientation of the matrix."""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if update.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    x = update.to(dtype=bfloat16, copy=True)
    tall = update.shape[0] > update.shape[1]
    if tall:
        x = x.T
    x.div_(x.norm().clamp(min=eps))
    for _ in range(steps):
        gram = x @ x.T
        x = x.addmm(gram.addmm(gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def _adjusted_lr(lr, adjust_lr_fn, shape):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr * math.sqrt(rows / cols)  # spectral_unclamped


class Muon(Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True, ns_coefficients=_NS,
                 eps=1e-7, ns_steps=5, adjust_lr_fn=None):
        if _is_tensor(lr) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in _ADJUST:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                                      adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{p.size()}")

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        lr = float(group["lr"]) if _is_tensor(group["lr"]) else group["lr"]
        momentum = group["momentum"]
        for p, g in zip(params, grads):
            if g.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            st = self.state[p]
            if "momentum_buffer" not in st:
                st["momentum_buffer"] = self._new_state(p, "momentum_buffer")
            buf = st["momentum_buffer"]
            buf.lerp_(g, 1 - momentum)
            update = g.lerp(buf, momentum) if group["nesterov"] else buf
            update = _orthogonalised(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
            p.mul_(1 - lr * group["weight_decay"])
            p.add_(update, alpha=-_adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
        return bool(params)
