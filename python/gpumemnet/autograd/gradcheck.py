"""torch.autograd.gradcheck: a function's analytical gradients (its backward, through autograd.grad) against
central finite differences, element by element; gradgradcheck: the same for the gradients of its gradients. Use
float64 inputs: float32's rounding alone exceeds the default tolerances. The Jacobians are laid out as PyTorch's
message shows them: one row per input element, one column per output element. Of PyTorch's extra checks (batched gradients, forward-mode AD) none exists here: asking for
one raises NotImplementedError rather than passing unchecked."""
import numpy as np

from .._core.autograd import enable_grad, grad, no_grad
from .._core.creation import tensor
from .._core.tensor import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


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


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """gradcheck of the function (inputs, grad_outputs) -> the vector-Jacobian products of func at inputs, taken
    with create_graph=True, as PyTorch builds it: second derivatives against finite differences of the first.
    grad_outputs default to fixed random values that require grad (so their own derivatives are checked too)."""
    if check_batched_grad or check_fwd_over_rev:
        raise NotImplementedError("gradgradcheck: batched and forward-over-reverse checks are not supported by "
                                  "gpumemnet (no batched or forward-mode gradients); leave them False")
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype, device=o.device,
                               requires_grad=True) for o in outs]
    grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    n_in = len(inputs)

    def first_gradients(*args):
        # the finite differences call this under no_grad with fresh copies: they need grad mode and inputs that
        # require grad to have first gradients at all
        xs = [x if i not in wrt or x.requires_grad else x.detach().requires_grad_() for i, x in enumerate(args[:n_in])]
        with enable_grad():
            pairs = [(o, g) for o, g in zip(_outputs(func, xs), args[n_in:]) if o.requires_grad]
            got = grad([o for o, _ in pairs], [xs[i] for i in wrt], [g for _, g in pairs], create_graph=True,
                       allow_unused=True)
        return tuple(g for g in got if g is not None)
    if not check_rev_over_rev:
        return True
    return gradcheck(first_gradients, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
