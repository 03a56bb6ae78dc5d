"""What PyTorch's Adam would need: a meta-only optimizer for estimate(optimizer=TorchStyleAdam).

Story 000 ran out of memory inside torch.optim.Adam.step, at `denom = (exp_avg_sq.sqrt() / ...)`, asking for
2.18 GiB: fc1.weight's size. PyTorch's single-tensor Adam of that time (1.5-1.7; the line is in the story's
traceback) allocates, per parameter, inside its loop:

    grad = p.grad
    state: exp_avg = zeros_like(p), exp_avg_sq = zeros_like(p)        (first step: optimizer state)
    if weight_decay != 0: grad = grad.add(p, alpha=weight_decay)       a parameter-sized copy
    exp_avg.mul_(beta1).add_(grad, ...); exp_avg_sq.mul_(beta2).addcmul_(grad, grad, ...)   in place
    denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
                                         the sqrt temporary and the quotient: two more, the first freed at once
    p.addcdiv_(exp_avg, denom, value=-step_size)                      in place

and Python frees `grad`'s copy and `denom` only when the next iteration rebinds the names. gpumemnet's fused Adam
allocates none of these temporaries. This class replays exactly those allocations and frees, in that order, on
meta tensors (no arithmetic: meta has no data), so that estimate() can put the two side by side."""
from .. import _C
from .._core.scope import category, scope

__all__ = ["TorchStyleAdam"]


class TorchStyleAdam:
    """Meta only. params: meta Parameters (estimate's copy passes them). weight_decay != 0 adds the gradient copy.
    lr, betas, eps are accepted for the signature's sake: they change no allocation."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = list(params)
        for i, p in enumerate(self.params):
            if not isinstance(p, _C.TensorBase) or p._device != "meta":
                where = p._device if isinstance(p, _C.TensorBase) else type(p).__name__
                raise ValueError(f"TorchStyleAdam: parameter {i} is on {where}: this optimizer only replays "
                                 f"PyTorch's allocations on meta (use it through gm.memory.estimate)")
        if not weight_decay >= 0.0:
            raise ValueError(f"TorchStyleAdam: invalid weight_decay {weight_decay!r}: expected a value >= 0")
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.state = {}

    def _like(self, p):
        return _C.empty(tuple(p.shape), p._dtype, "meta")

    def step(self):
        with scope("TorchStyleAdam.step"):
            grad = denom = None
            for p in self.params:
                if p.grad is None:
                    continue
                grad = p.grad  # the previous iteration's weight-decay copy dies here
                st = self.state.get(id(p))
                if st is None:
                    with category("optimizer"):
                        st = self.state[id(p)] = (self._like(p), self._like(p))  # exp_avg, exp_avg_sq
                if self.weight_decay != 0:
                    grad = self._like(p)  # grad.add(p, alpha=weight_decay)
                root = self._like(p)      # exp_avg_sq.sqrt()
                quotient = self._like(p)  # ... / math.sqrt(bias_correction2)
                del root                  # the sqrt temporary dies with the expression
                denom = quotient          # the previous iteration's denom dies here
                del quotient
            del grad, denom

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None
