"""Adam and AdamW: PyTorch's updates (bias corrections from each parameter's step count; L2 weight decay added
to the gradient for Adam, decoupled param *= 1 - lr*weight_decay for AdamW; AMSGrad keeps max_exp_avg_sq;
maximize), one fused in-place C call per parameter group (csrc/ops_optim.c).

The fused call is the point (seed 000): PyTorch's unfused Adam computes `exp_avg_sq.sqrt()` and a weight-decay
copy of the gradient as temporaries the size of the largest parameter — 2.18 GiB for that model's fc1 — and
that is what ran out of memory. Here a step allocates nothing; the first step allocates exactly the state
(exp_avg, exp_avg_sq, and max_exp_avg_sq with amsgrad), tagged "optimizer".

offload="cpu": fp32 master weights and the state in pinned host memory, the update on the CPU (optim/_offload.py).
"""
from .. import _C
from ._offload import OffloadMixin
from .optimizer import Optimizer, Step

__all__ = ["Adam", "AdamW"]


class Adam(OffloadMixin, Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None, offload=None,
                 decoupled_weight_decay=None):
        # foreach / fused / capturable: accepted for drop-in compatibility; every step here is fused.
        # decoupled_weight_decay=True: AdamW's decay (PyTorch 2.6+'s Adam option); AdamW's own default is True.
        if differentiable:
            raise ValueError(f"{type(self).__name__}: differentiable=True is not supported (the step is a fused "
                             f"in-place kernel)")
        decoupled = bool(self._decoupled if decoupled_weight_decay is None else decoupled_weight_decay)
        if hasattr(betas, "__getitem__") and not isinstance(betas, (str, tuple)):
            try:  # a tuple whatever sequence came (hydra's ListConfig: weights_only loading refuses it), as PyTorch's
                betas = (betas[0], betas[1])
            except (IndexError, KeyError, TypeError):
                pass  # the step's check names what is wrong
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled)  # PyTorch's keys, in its order
        self._init_offload(offload)
        super().__init__(params, defaults)

    def _decoupled_in(self, group):
        """AdamW's decay in this group: its decoupled_weight_decay (a group loaded from an older state_dict may
        lack it: the class decides)."""
        return bool(group.get("decoupled_weight_decay", self._decoupled))

    def _validate_group(self, group):
        name = type(self).__name__
        lr, eps, wd, betas = group["lr"], group["eps"], group["weight_decay"], group["betas"]
        if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not lr >= 0.0:
            raise ValueError(f"{name}: invalid lr {lr!r}: expected a number >= 0")
        if not eps >= 0.0:
            raise ValueError(f"{name}: invalid eps {eps!r}: expected a value >= 0")
        try:
            b1, b2 = betas
        except (TypeError, ValueError):
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}") from None
        for i, b in enumerate((b1, b2)):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{name}: invalid betas[{i}] {b!r}: expected a value in [0, 1)")
        if not wd >= 0.0:
            raise ValueError(f"{name}: invalid weight_decay {wd!r}: expected a value >= 0")

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        if not params:
            return False
        amsgrad = bool(group["amsgrad"])
        keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
        if self._offloads(params):
            self._offloaded(params, grads, lambda p: self._host_state_of(p, keys),
                            lambda p, master, g: self._host_update(group, p, master, g),
                            lambda p, master, stage: self._host_update_mixed(group, p, master, stage))
            return True
        exp_avgs, exp_avg_sqs, max_sqs, steps = [], [], [] if amsgrad else None, []
        for p in params:
            st = self.state.setdefault(p, {})
            st.setdefault("step", Step(0))
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq"):
                if key not in st:
                    st[key] = self._new_state(p, key)
            exp_avgs.append(st["exp_avg"])
            exp_avg_sqs.append(st["exp_avg_sq"])
            if amsgrad:
                max_sqs.append(st["max_exp_avg_sq"])
            steps.append(st["step"] + 1)
        beta1, beta2 = group["betas"]
        _C.adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, float(group["lr"]), float(beta1),
                      float(beta2), float(group["eps"]), float(group["weight_decay"]), self._decoupled_in(group),
                      amsgrad, bool(group["maximize"]))
        # Counted after the kernel succeeded: a rejected step leaves the bias corrections where they were.
        for p, s in zip(params, steps):
            self.state[p]["step"] = Step(s)
        return True

    def _host_state_of(self, p, keys):
        st = self.state.setdefault(p, {})
        st.setdefault("step", Step(0))
        for key in keys:
            if key not in st:
                st[key] = self._host_state(p, key)
        return st

    def _host_update(self, group, p, master, g):
        """One parameter's step on the host: the fp32 master and state, with the host gradient g."""
        st = self.state[p]
        beta1, beta2 = group["betas"]
        amsgrad = bool(group["amsgrad"])
        _C.adam_step_([master], [g], [st["exp_avg"]], [st["exp_avg_sq"]],
                      [st["max_exp_avg_sq"]] if amsgrad else None, [st["step"] + 1], float(group["lr"]),
                      float(beta1), float(beta2), float(group["eps"]), float(group["weight_decay"]),
                      self._decoupled_in(group), amsgrad, bool(group["maximize"]))
        st["step"] += 1


    def _host_update_mixed(self, group, p, master, stage):
        """One half parameter's step on the host in one pass: stage holds its gradient (p's dtype) and receives
        its updated value; the fp32 master and state are updated as _host_update would on the widened gradient."""
        st = self.state[p]
        beta1, beta2 = group["betas"]
        amsgrad = bool(group["amsgrad"])
        _C.adam_step_mixed_(stage, master, st["exp_avg"], st["exp_avg_sq"],
                            st["max_exp_avg_sq"] if amsgrad else None, st["step"] + 1, float(group["lr"]),
                            float(beta1), float(beta2), float(group["eps"]), float(group["weight_decay"]),
                            self._decoupled_in(group), amsgrad, bool(group["maximize"]))
        st["step"] += 1


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): param *= 1 - lr*weight_decay before the Adam
    update, instead of adding weight_decay*param to the gradient. Default weight_decay=1e-2, as in PyTorch."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None, offload=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, foreach=foreach,
                         capturable=capturable, differentiable=differentiable, fused=fused, offload=offload)
