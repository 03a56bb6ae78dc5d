"""torch.autograd.gradcheck: a function's analytical gradients (its backward, through autograd.grad) against
central finite differences, element by element. Use float64 inputs: float32's rounding alone exceeds the default
tolerances. The Jacobians are laid out as PyTorch's message shows them: one row per input element, one column
per output element. Of PyTorch's extra checks (batched gradients, forward-mode AD) none exists here: asking for
one raises NotImplementedError rather than passing unchecked."""
import numpy as np

from .._core.autograd import grad, no_grad
from .._core.creation import tensor
from .._core.tensor import Tensor

__all__ = ["gradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical Jacobians differ."""


def _outputs(func, inputs):
    out = func(*inputs)
    outs = (out,) if isinstance(out, Tensor) else tuple(out)
    return [o for o in outs if isinstance(o, Tensor) and o.is_floating_point()]


def _numerical(func, inputs, i, n_out_elems, eps):
    """(input i's elements) x (outputs' elements) of (f(x + eps) - f(x - eps)) / 2 eps, in float64 NumPy."""
    x = inputs[i]
    base = x.detach().cpu().numpy().astype(np.float64)
    cols = []
    for k in range(base.size):
        vals = []
        for step in (eps, -eps):
            moved = base.copy()
            moved.reshape(-1)[k] += step
            args = list(inputs)
            args[i] = tensor(moved, dtype=x.dtype, device=x.device)
            with no_grad():
                vals.append(np.concatenate([o.detach().cpu().numpy().astype(np.float64).reshape(-1)
                                            for o in _outputs(func, args)] or [np.zeros(0)]))
        cols.append((vals[0] - vals[1]) / (2 * eps))
    return np.array(cols).reshape(base.size, n_out_elems)


def _analytical(outs, inputs, wrt):
    """For each input in wrt, (its elements) x (outputs' elements), one backward per output element."""
    sizes = [int(o.numel()) for o in outs]
    jac = {i: np.zeros((int(inputs[i].numel()), sum(sizes))) for i in wrt}
    col = 0
    for o, n in zip(outs, sizes):
        for k in range(n):
            if o.requires_grad:
                g = o.detach().new_zeros(tuple(o.shape)).reshape(-1)
                g[k] = 1.0
                got = grad(o, [inputs[i] for i in wrt], g.reshape(tuple(o.shape)), retain_graph=True,
                           allow_unused=True)
                for i, r in zip(wrt, got):
                    if r is not None:
                        jac[i][:, col] = r.detach().cpu().numpy().astype(np.float64).reshape(-1)
            col += 1
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """True when every input's analytical Jacobian matches the numerical one within atol + rtol * |numerical|;
    otherwise GradcheckError (or False with raise_exception=False). fast_mode is accepted and runs the full check
    (the same verdict, slower)."""
    for flag, name in ((check_batched_grad, "check_batched_grad"),
                       (check_batched_forward_grad, "check_batched_forward_grad"),
                       (check_forward_ad, "check_forward_ad")):
        if flag:
            raise NotImplementedError(f"gradcheck: {name}=True is not supported by gpumemnet (no batched or "
                                      f"forward-mode gradients); leave it False")
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")
    if not check_backward_ad:
        return True
    outs = _outputs(func, inputs)
    analytical = _analytical(outs, inputs, wrt)
    n_out = sum(int(o.numel()) for o in outs)
    for i in wrt:
        num = _numerical(func, inputs, i, n_out, eps)
        ana = analytical[i]
        if not np.all(np.abs(ana - num) <= atol + rtol * np.abs(num)):
            if not raise_exception:
                return False
            # which output the first mismatching column belongs to, as PyTorch names it
            bad = np.argwhere(np.abs(ana - num) > atol + rtol * np.abs(num))[0][1]
            out_index = int(np.searchsorted(np.cumsum([int(o.numel()) for o in outs]), bad, side="right"))
            raise GradcheckError(f"Jacobian mismatch for output {out_index} with respect to input {i},\n"
                                 f"numerical:{tensor(num)}\nanalytical:{tensor(ana)}\n")
    return True
