"""Adagrad: PyTorch's update (state_sum += g^2; lr decayed by each parameter's step count; L2 weight decay;
maximize), one fused in-place C call per parameter group (csrc/ops_optim.c). As in PyTorch, the state ("sum",
filled with initial_accumulator_value, and "step") is created when the optimizer is built, tagged "optimizer";
no step allocates (PyTorch's allocates sqrt(sum) for every parameter)."""
from .. import _C
from .optimizer import Optimizer, Step
from .rmsprop import _nonneg

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    _pytorch_flags = {"foreach": None, "fused": None, "differentiable": False}
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if differentiable:
            raise ValueError("Adagrad: differentiable=True is not supported (the step is a fused in-place kernel)")
        if not initial_accumulator_value >= 0.0:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)  # add_param_group creates each parameter's state

    def _init_state(self, p, group):
        st = self.state[p]
        st["step"] = Step(0)
        st["sum"] = s = self._new_state(p, "sum", zero=False)
        if p._device != "meta":
            # The constructor's value, not the group's: PyTorch fills every group's state from its argument.
            _C.fill_(s, float(self.defaults["initial_accumulator_value"]))

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for p in group["params"]:
            if "sum" not in self.state.get(p, {}):
                self._init_state(p, group)

    def _validate_group(self, group):
        for key in ("lr", "lr_decay", "weight_decay", "eps"):
            _nonneg("Adagrad", key, group[key])

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        if not params:
            return False
        sums, steps = [], []
        for p in params:
            st = self.state[p]
            if "sum" not in st:
                self._init_state(p, group)
            sums.append(st["sum"])
            steps.append(st["step"] + 1)
        _C.adagrad_step_(params, grads, sums, steps, float(group["lr"]), float(group["lr_decay"]),
                         float(group["weight_decay"]), float(group["eps"]), bool(group["maximize"]))
        for p, s in zip(params, steps):
            self.state[p]["step"] = Step(s)
        return True
