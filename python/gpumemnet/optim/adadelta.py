"""Adadelta: PyTorch's update (square_avg and acc_delta, both zero-initialised; L2 weight decay; maximize), one
fused in-place C call per parameter group (csrc/ops_optim.c). The state is created on a parameter's first step,
tagged "optimizer"; later steps allocate nothing (PyTorch's allocates std and delta for every parameter)."""
from .. import _C
from .optimizer import Optimizer, Step
from .rmsprop import _nonneg

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    _pytorch_flags = {"foreach": None, "capturable": False, "differentiable": False}
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if differentiable:
            raise ValueError("Adadelta: differentiable=True is not supported (the step is a fused in-place kernel)")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        for key in ("lr", "eps", "weight_decay"):
            _nonneg("Adadelta", key, group[key])
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Adadelta: invalid rho {group['rho']!r}: expected a value in [0, 1]")

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        if not params:
            return False
        sq, acc = [], []
        for p in params:
            st = self.state.setdefault(p, {})
            st.setdefault("step", Step(0))
            for key in ("square_avg", "acc_delta"):
                if key not in st:
                    st[key] = self._new_state(p, key)
            sq.append(st["square_avg"])
            acc.append(st["acc_delta"])
        _C.adadelta_step_(params, grads, sq, acc, float(group["lr"]), float(group["rho"]), float(group["eps"]),
                          float(group["weight_decay"]), bool(group["maximize"]))
        for p in params:
            self.state[p]["step"] += 1
        return True
