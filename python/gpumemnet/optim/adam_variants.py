"""Adamax, NAdam and RAdam: PyTorch's updates (its single-tensor formulas, L2 or decoupled weight decay,
maximize), written with in-place tensor ops per parameter. Unlike Adam's fused kernel, a step makes a few
parameter-sized temporaries (as PyTorch's own steps do); the state (exp_avg and exp_avg_sq or exp_inf, NAdam's
mu_product) is created on a parameter's first step, tagged "optimizer"."""
import math

from .. import _C
from .optimizer import Optimizer, Step
from .rmsprop import _nonneg
from .rprop import _round_scalar

__all__ = ["Adamax", "NAdam", "RAdam"]


class _AdamLike(Optimizer):
    _pytorch_flags = {"foreach": None, "capturable": False, "differentiable": False}
    keys = ("exp_avg", "exp_avg_sq")

    def _validate_group(self, group):
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay"):
            _nonneg(name, key, group[key])
        b1, b2 = group["betas"]
        for i, b in enumerate((b1, b2)):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")

    def _state(self, p):
        st = self.state.setdefault(p, {})
        st.setdefault("step", Step(0))
        for key in self.keys:
            if key not in st:
                st[key] = self._new_state(p, key)
        return st

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        for p, g in zip(params, grads):
            st = self._state(p)
            st["step"] += 1
            g = -g if group["maximize"] else g
            wd = group["weight_decay"]
            if wd and group.get("decoupled_weight_decay"):
                p.mul_(1 - group["lr"] * wd)
            elif wd:
                g = g + p * wd
            self._update(p, g, st, group)
        return bool(params)


class Adamax(_AdamLike):
    """Adam with the infinity norm: exp_inf = max(beta2 * exp_inf, |g| + eps)."""
    keys = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _update(self, p, g, st, group):
        b1, b2 = group["betas"]
        st["exp_avg"].lerp_(g, 1 - b1)
        _C.copy_(st["exp_inf"], (st["exp_inf"] * b2).maximum(g.abs() + group["eps"]))
        p.addcdiv_(st["exp_avg"], st["exp_inf"], value=-group["lr"] / (1 - b1 ** st["step"]))


class NAdam(_AdamLike):
    """Adam with Nesterov momentum and Dozat's momentum decay (mu_t = beta1 (1 - 0.5 * 0.96^(t psi)))."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _nonneg("NAdam", "momentum_decay", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _update(self, p, g, st, group):
        b1, b2 = group["betas"]
        t, psi = st["step"], group["momentum_decay"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        st["mu_product"] = _round_scalar(st.get("mu_product", 1.0) * _round_scalar(mu))  # (a float32 tensor there)
        st["exp_avg"].lerp_(g, 1 - b1)
        st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (st["exp_avg_sq"] / (1 - b2 ** t)).sqrt() + group["eps"]
        lr = group["lr"]
        p.addcdiv_(g, denom, value=-lr * (1 - mu) / (1 - st["mu_product"]))
        p.addcdiv_(st["exp_avg"], denom, value=-lr * mu_next / (1 - st["mu_product"] * mu_next))


class RAdam(_AdamLike):
    """Adam whose adaptive step is turned on only once the variance of its estimate is tractable (rho_t > 5),
    with Liu et al.'s rectification; plain momentum SGD before."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

    def _update(self, p, g, st, group):
        b1, b2 = group["betas"]
        t = st["step"]
        st["exp_avg"].lerp_(g, 1 - b1)
        st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        m_hat = st["exp_avg"] / bc1
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * t * (b2 ** t) / bc2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive = math.sqrt(bc2) / (st["exp_avg_sq"].sqrt() + group["eps"])
            p.sub_(m_hat * group["lr"] * adaptive * rect)
        else:
            p.sub_(m_hat * group["lr"])
