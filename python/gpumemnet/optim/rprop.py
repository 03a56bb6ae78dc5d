"""Rprop and ASGD: PyTorch's updates (its single-tensor formulas), written with tensor ops per parameter; the state
is created on a parameter's first step, tagged "optimizer".

Rprop keeps a step size per element, grown by etas[1] while the gradient keeps its sign and shrunk by etas[0] when
it flips (the flipped element then skips its update), clamped to step_sizes. ASGD decays the parameter by
1 - lambd * eta, steps by eta, and keeps the running average `ax` of the iterates from step t0 on; its scalars eta
and mu are kept as PyTorch keeps them, in its scalar dtype (float32 unless the default dtype is float64), so the
iterates agree with PyTorch's bit for bit in the rounding of those scalars."""
import struct

from .. import _C
from .._core.creation import where
from .._core.dtype import get_default_dtype
from .optimizer import Optimizer, Step, _is_tensor

__all__ = ["Rprop", "ASGD"]


def _lr_check(lr):
    if _is_tensor(lr) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _scalar(v):
    return float(v) if _is_tensor(v) else v


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller & Braun), as torch.optim.Rprop."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
                 foreach=None, maximize=False, differentiable=False):
        # capturable / foreach / differentiable: accepted as PyTorch's; every step here runs the same ops.
        _lr_check(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        eta_minus, eta_plus = group["etas"]
        lo, hi = group["step_sizes"]
        for p, g in zip(params, grads):
            st = self.state[p]
            if not st:
                st["step"] = Step(0)
                st["prev"] = self._new_state(p, "prev")
                st["step_size"] = self._new_state(p, "step_size", zero=False)
                if p._device != "meta":
                    _C.fill_(st["step_size"], float(_scalar(group["lr"])))
            st["step"] += 1
            g = -g if group["maximize"] else g
            # the factor of each element: eta_plus where the sign held, eta_minus where it flipped, 1 at a zero
            factor = (g * st["prev"]).sign()
            flipped = factor.lt(0)
            factor = where(factor.gt(0), eta_plus, factor)
            factor = where(flipped, eta_minus, factor)
            factor = where(factor.eq(0), 1.0, factor)
            st["step_size"].mul_(factor).clamp_(lo, hi)
            g = where(flipped, 0.0, g)  # a flipped element does not move this step
            p.addcmul_(g.sign(), st["step_size"], value=-1)
            _C.copy_(st["prev"], g)
        return bool(params)


def _round_scalar(x):
    """x in PyTorch's optimizer scalar dtype: float32 unless the default dtype is float64."""
    if get_default_dtype().itemsize == 8:
        return float(x)
    return struct.unpack("f", struct.pack("f", x))[0]


class ASGD(Optimizer):
    """Averaged stochastic gradient descent (Polyak & Juditsky), as torch.optim.ASGD; the average is state "ax"."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _lr_check(lr)
        if not 0.0 <= lambd:
            raise ValueError(f"Invalid lambd value: {lambd}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        lr, lambd, alpha, t0 = _scalar(group["lr"]), group["lambd"], group["alpha"], group["t0"]
        wd = group["weight_decay"]
        for p, g in zip(params, grads):
            st = self.state[p]
            if not st:
                st["step"] = Step(0)
                st["eta"] = _round_scalar(lr)
                st["mu"] = 1.0
                st["ax"] = self._new_state(p, "ax")
            st["step"] += 1
            g = -g if group["maximize"] else g
            if wd != 0:
                g = g + p * wd
            eta = st["eta"]
            p.mul_(1 - lambd * eta)
            p.sub_(g * eta)
            if st["mu"] != 1:
                st["ax"].add_((p - st["ax"]) * st["mu"])
            else:
                _C.copy_(st["ax"], p)
            step = st["step"]
            st["eta"] = _round_scalar(lr / ((1 + lambd * lr * step) ** alpha))
            st["mu"] = _round_scalar(1 / max(1, step - t0))
        return bool(params)

    def load_state_dict(self, state_dict):
        """As Optimizer.load_state_dict; PyTorch's 0-dim eta and mu tensors are read as numbers."""
        state = {k: {n: (float(v) if n in ("eta", "mu") and _is_tensor(v) else v) for n, v in st.items()}
                 for k, st in state_dict.get("state", {}).items()} if isinstance(state_dict, dict) else None
        if state is not None:
            state_dict = dict(state_dict, state=state)
        super().load_state_dict(state_dict)
