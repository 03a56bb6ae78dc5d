"""SparseAdam: Adam that updates only the rows an embedding's gradient touches ("lazy" Adam), as torch.optim.SparseAdam
does for the sparse gradients of nn.Embedding(sparse=True). gpumemnet's embedding gradients are dense, so the rows
stepped are those the Embedding(sparse=True) lookups behind .grad used (recorded at their backward, see
nn/_functional_layers.py: a looked-up row with an exactly zero gradient is stepped too, as PyTorch's sparse gradient
lists it); for a gradient from elsewhere (set by hand), the rows whose gradient is not all zero. The moments of the
other rows, and the rows themselves, stay."""
from .._core.creation import where
from ..nn._functional_layers import sparse_grad_rows
from .optimizer import Optimizer, Step

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    def _step_group(self, group):
        params, grads = self._with_grad(group)
        beta1, beta2 = group["betas"]
        for p, g in zip(params, grads):
            st = self.state[p]
            if not st:
                st["step"] = Step(0)
                st["exp_avg"] = self._new_state(p, "exp_avg")
                st["exp_avg_sq"] = self._new_state(p, "exp_avg_sq")
            st["step"] += 1
            g = -g if group["maximize"] else g
            looked_up = sparse_grad_rows(p) if g.ndim else None
            if looked_up is not None:
                rows = looked_up.reshape((-1,) + (1,) * (g.ndim - 1))
            else:
                rows = g.ne(0).reshape(g.shape[0], -1).any(1).reshape((-1,) + (1,) * (g.ndim - 1)) if g.ndim \
                    else g.ne(0)
            m, v = st["exp_avg"], st["exp_avg_sq"]
            # PyTorch's arithmetic: m + (g - m)(1 - beta1), v + (g^2 - v)(1 - beta2)
            m.copy_(where(rows, m + (g - m) * (1 - beta1), m))
            v.copy_(where(rows, v + (g * g - v) * (1 - beta2), v))
            step_size = group["lr"] * (1 - beta2 ** st["step"]) ** 0.5 / (1 - beta1 ** st["step"])
            p.sub_(where(rows, m / (v.sqrt() + group["eps"]) * step_size, 0.0))
        return bool(params)
