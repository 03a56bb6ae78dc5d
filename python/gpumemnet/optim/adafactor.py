"""Adafactor: PyTorch's (2.5+) update (Shazeer & Stern, as torch.optim.Adafactor): for a parameter of 2 or more
dims the second moment is kept factored, as a row factor (the mean of g^2 over the last dim) and a column factor
(over the next-to-last), whose outer product divided by the row factor's mean estimates it; a vector (or a
scalar) keeps the full second moment. beta2 is 1 - t^beta2_decay, the relative step size min(lr, 1/sqrt(t))
scaled by the parameter's RMS (at least eps[1]), the update clipped to RMS <= d. The state (row_var and col_var,
or variance) is created on a parameter's first step, tagged "optimizer": for an m x n weight it holds m + n
numbers, not m * n. The step reads two norms back from the device (as PyTorch's does); on meta they read as 1."""

from .. import _C
from .._core.dtype import finfo
from .._core.scope import category
from .. import linalg
from .optimizer import Optimizer, Step, _is_tensor

__all__ = ["Adafactor"]


def _read(t):
    """A 0-d tensor's value; 1.0 on the meta device, which has no values (a step there, as the memory estimator
    runs one, makes the same state and temporaries, which is all it is for)."""
    return 1.0 if t._device == "meta" else float(t)


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        # foreach: accepted as PyTorch's; every step here runs the same ops.
        if _is_tensor(lr) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    @staticmethod
    def _factor_shapes(p):
        """The shapes of row_var and col_var for a parameter of 2 or more dims, else None."""
        if p.ndim < 2:
            return None
        row, col = list(p.shape), list(p.shape)
        row[-1] = 1
        col[-2] = 1
        return tuple(row), tuple(col)

    def _state(self, p):
        st = self.state[p]
        if not st:
            st["step"] = Step(0)
            shapes = self._factor_shapes(p)
            if shapes is None:
                st["variance"] = self._new_state(p, "variance")
            else:
                with category("optimizer"):
                    st["row_var"] = p.new_zeros(shapes[0])
                    st["col_var"] = p.new_zeros(shapes[1])
        return st

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        lr = float(group["lr"]) if _is_tensor(group["lr"]) else group["lr"]
        eps1, eps2 = group["eps"]
        wd, d, decay = group["weight_decay"], group["d"], group["beta2_decay"]
        for p, g in zip(params, grads):
            st = self._state(p)
            g = -g if group["maximize"] else g
            if eps1 is None:  # as PyTorch: the first parameter's dtype sets it for the whole group
                eps1 = finfo(p.dtype).eps
            st["step"] += 1
            t = float(st["step"])
            one_minus_beta2 = t ** decay
            rho = min(lr, 1 / (t ** 0.5))
            alpha = max(eps2, _read(p.norm(2)) / (p.numel() ** 0.5)) * rho
            if wd != 0:
                p.mul_(1 - lr * wd)
            if g.ndim > 1:
                # the means of g^2 over the last dim and over the next-to-last, as squared norms
                row_mean = linalg.vector_norm(g, dim=-1, keepdim=True).square_().div_(g.shape[-1])
                st["row_var"].lerp_(row_mean, one_minus_beta2)
                col_mean = linalg.vector_norm(g, dim=-2, keepdim=True).square_().div_(g.shape[-2])
                st["col_var"].lerp_(col_mean, one_minus_beta2)
                var = st["row_var"].matmul(st["col_var"])
                var.div_(st["row_var"].mean(dim=-2, keepdim=True).clamp_(min=eps1))
            else:
                st["variance"].lerp_(g * g, one_minus_beta2)
                var = st["variance"].clone()
            update = var.clamp_(min=eps1 * eps1).rsqrt_()
            update.mul_(g)
            denom = max(1.0, _read(update.norm(2)) / ((update.numel() ** 0.5) * d))
            p.sub_(update * (alpha / denom))
        return bool(params)

    def load_state_dict(self, state_dict):
        """As Optimizer.load_state_dict; the factored row_var and col_var have their own shapes (checked here)."""
        factors = {}
        if isinstance(state_dict, dict) and isinstance(state_dict.get("state"), dict) and \
                isinstance(state_dict.get("param_groups"), list):
            ids = [i for g in state_dict["param_groups"] for i in g.get("params", ())]
            mine = [p for g in self.param_groups for p in g["params"]]
            index = dict(zip(ids, mine)) if len(ids) == len(mine) else {}
            stripped = {}
            for key, st in state_dict["state"].items():
                p = index.get(key)
                if p is not None and isinstance(st, dict) and ("row_var" in st or "col_var" in st):
                    shapes = self._factor_shapes(p)
                    for k, shape in zip(("row_var", "col_var"), shapes or ((), ())):
                        v = st.get(k)
                        if shapes is None or not _is_tensor(v) or tuple(v.shape) != shape:
                            got = tuple(v.shape) if _is_tensor(v) else type(v).__name__
                            raise ValueError(f"loaded state dict: state {k!r} of parameter {key} is {got}, but a "
                                             f"parameter of shape {tuple(p.shape)} has a {k} of shape "
                                             f"{shape if shapes else 'none (it keeps variance)'}")
                    factors[p] = (st["row_var"], st["col_var"])
                    st = {k: v for k, v in st.items() if k not in ("row_var", "col_var")}
                stripped[key] = st
            state_dict = dict(state_dict, state=stripped)
        super().load_state_dict(state_dict)
        for p, (row, col) in factors.items():
            st = self.state[p]
            for k, v in (("row_var", row), ("col_var", col)):
                with category("optimizer"):
                    st[k] = p.new_zeros(tuple(v.shape))
                _C.copy_(st[k], v.to(device=p.device, dtype=p.dtype))

