"""SGD with momentum, dampening, Nesterov, weight decay and maximize: PyTorch's update, one fused in-place C call
per parameter group (csrc/ops_optim.c). The momentum buffer is created on a parameter's first step and starts
as its (decayed) gradient, as in PyTorch. offload="cpu": fp32 master weights and the momentum buffers in pinned
host memory, the update on the CPU (optim/_offload.py)."""
from .. import _C
from ._offload import OffloadMixin
from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(OffloadMixin, Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None, offload=None):
        # foreach / fused / differentiable: accepted for drop-in compatibility; every step here is fused.
        if differentiable:
            raise ValueError("SGD: differentiable=True is not supported (the step is a fused in-place kernel)")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)  # PyTorch's keys, in its order
        self._init_offload(offload)
        self._fresh = set()  # offload: parameters whose host momentum buffer is new (it starts as the gradient)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not lr >= 0.0:
            raise ValueError(f"SGD: invalid lr {lr!r}: expected a number >= 0")
        if not momentum >= 0.0:
            raise ValueError(f"SGD: invalid momentum {momentum!r}: expected a value >= 0")
        if not wd >= 0.0:
            raise ValueError(f"SGD: invalid weight_decay {wd!r}: expected a value >= 0")
        if group["nesterov"] and (momentum <= 0 or group["dampening"] != 0):
            raise ValueError(f"SGD: nesterov momentum requires a momentum > 0 and zero dampening, got "
                             f"momentum={momentum!r}, dampening={group['dampening']!r}")

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        if not params:
            return False
        momentum = float(group["momentum"])
        if self._offloads(params):
            self._offloaded(params, grads, lambda p: self._host_prepare(group, p),
                            lambda p, master, g: self._host_update(group, p, master, g))
            return True
        bufs = fresh = None
        if momentum != 0.0:
            bufs, fresh = [], []
            for p in params:
                st = self.state.setdefault(p, {})
                buf = st.get("momentum_buffer")
                fresh.append(buf is None)
                if buf is None:
                    buf = st["momentum_buffer"] = self._new_state(p, "momentum_buffer", zero=False)
                bufs.append(buf)
        _C.sgd_step_(params, grads, bufs, fresh, float(group["lr"]), momentum, float(group["dampening"]),
                     float(group["weight_decay"]), bool(group["nesterov"]), bool(group["maximize"]))
        return True

    def _host_prepare(self, group, p):
        """p's momentum buffer on the host (when momentum != 0), made before the group's first update."""
        if float(group["momentum"]) != 0.0:
            st = self.state.setdefault(p, {})
            if "momentum_buffer" not in st:
                st["momentum_buffer"] = self._host_state(p, "momentum_buffer", zero=False)
                self._fresh.add(p)

    def _host_update(self, group, p, master, g):
        """One parameter's step on the host: the fp32 master and momentum buffer, with the host gradient g."""
        momentum = float(group["momentum"])
        buf = [self.state[p]["momentum_buffer"]] if momentum != 0.0 else None
        fresh = p in self._fresh
        self._fresh.discard(p)
        _C.sgd_step_([master], [g], buf, None if buf is None else [fresh], float(group["lr"]), momentum,
                     float(group["dampening"]), float(group["weight_decay"]), bool(group["nesterov"]),
                     bool(group["maximize"]))
