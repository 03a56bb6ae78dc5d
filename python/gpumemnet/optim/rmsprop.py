"""RMSprop: PyTorch's update (square_avg, optional grad_avg when centered, momentum_buffer when momentum > 0; L2
weight decay; maximize), one fused in-place C call per parameter group (csrc/ops_optim.c). The state is created
on a parameter's first step, zero-filled and tagged "optimizer", as PyTorch creates it; later steps allocate
nothing (PyTorch's step allocates the sqrt(square_avg) temporary of every parameter)."""
from .. import _C
from .optimizer import Optimizer, Step

__all__ = ["RMSprop"]


def _nonneg(cls, key, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0.0:
        raise ValueError(f"{cls}: invalid {key} {value!r}: expected a number >= 0")


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        # foreach / capturable: accepted for drop-in compatibility; every step here is fused.
        if differentiable:
            raise ValueError("RMSprop: differentiable=True is not supported (the step is a fused in-place kernel)")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)  # PyTorch's keys, in its order
        super().__init__(params, defaults)

    def _validate_group(self, group):
        for key in ("lr", "eps", "momentum", "weight_decay", "alpha"):
            _nonneg("RMSprop", key, group[key])

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        if not params:
            return False
        momentum, centered = float(group["momentum"]), bool(group["centered"])
        sq, bufs, gas = [], [] if momentum > 0 else None, [] if centered else None
        for p in params:
            st = self.state.setdefault(p, {})
            st.setdefault("step", Step(0))
            keys = ["square_avg"] + (["momentum_buffer"] if momentum > 0 else []) + (["grad_avg"] if centered else [])
            for key in keys:
                if key not in st:
                    st[key] = self._new_state(p, key)
            sq.append(st["square_avg"])
            if bufs is not None:
                bufs.append(st["momentum_buffer"])
            if gas is not None:
                gas.append(st["grad_avg"])
        _C.rmsprop_step_(params, grads, sq, bufs, gas, float(group["lr"]), float(group["alpha"]),
                         float(group["eps"]), float(group["weight_decay"]), momentum, centered,
                         bool(group["maximize"]))
        for p in params:
            self.state[p]["step"] += 1
        return True
