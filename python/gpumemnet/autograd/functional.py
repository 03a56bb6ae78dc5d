"""torch.autograd.functional's first-order functions: jacobian and vjp, built on autograd.grad (reverse mode,
one backward per output element for a Jacobian). Their second-order siblings (hessian, hvp, vhp, jvp) and
create_graph=True need gradients of gradients, which gpumemnet's engine does not record: they are not here."""
from .._core.autograd import enable_grad, grad
from .._core.creation import stack, zeros
from .._core.tensor import Tensor

__all__ = ["jacobian", "vjp"]


def _as_tuple(x, what, fn):
    """(tuple of tensors, whether x was one tensor), with PyTorch's TypeError for anything else."""
    if isinstance(x, Tensor):
        return (x,), True
    if isinstance(x, tuple) and all(isinstance(t, Tensor) for t in x):
        return x, False
    raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors but the given {what} "
                    f"has type {type(x)}.")


def _no_graph_of_grads(create_graph, fn):
    if create_graph:
        raise NotImplementedError(f"{fn}(create_graph=True) needs gradients of gradients, which gpumemnet does not "
                                  f"record; compute the first-order result with create_graph=False")


def _run(func, inputs, fn):
    """Inputs as fresh leaves requiring grad, and func's outputs on them."""
    tupled, single_in = _as_tuple(inputs, "inputs", fn)
    leaves = tuple(t.detach().requires_grad_(True) for t in tupled)
    with enable_grad():
        out = func(*leaves)
    outs, single_out = _as_tuple(out, "outputs of the user-provided function", fn)
    return leaves, single_in, outs, single_out


def _grads(out, leaves, g, strict, i):
    """d(out . g)/d(leaves), zeros where out does not depend on a leaf (an error in strict mode)."""
    if not out.requires_grad:
        if strict:
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               f"must be computed in a differentiable manner from the input when running in strict "
                               f"mode.")
        return [None] * len(leaves)
    got = grad(out, leaves, g, retain_graph=True, allow_unused=True)
    if strict:
        for j, r in enumerate(got):
            if r is None:
                raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}. This is "
                                   f"not allowed in strict mode.")
    return list(got)


def _zeros_like(t):
    return zeros(tuple(t.shape), dtype=t.dtype, device=t.device)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at inputs: for output i and input j, a tensor of shape out_i.shape + in_j.shape.
    Nested as PyTorch nests it: a tensor for one input and one output, a tuple over the side that is a tuple.
    vectorize and strategy change how PyTorch computes it, not the result; here it is always one reverse-mode
    backward per output element."""
    _no_graph_of_grads(create_graph, "jacobian")
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise ValueError("torch.autograd.functional.jacobian: `strategy=\"forward-mode\"` is only supported with "
                         "`vectorize=True`.")
    leaves, single_in, outs, single_out = _run(func, inputs, "jacobian")
    result = []
    for i, out in enumerate(outs):
        rows = [[] for _ in leaves]  # per input, one gradient per output element
        for k in range(out.numel()):
            g = _zeros_like(out).reshape(-1)
            g[k] = 1.0
            got = _grads(out, leaves, g.reshape(out.shape), strict, i)
            for j, r in enumerate(got):
                rows[j].append(_zeros_like(leaves[j]) if r is None else r)
        per_input = tuple((stack(r) if r else _zeros_like(leaves[j]).reshape(0, *leaves[j].shape))
                          .reshape(*out.shape, *leaves[j].shape).detach() for j, r in enumerate(rows))
        result.append(per_input[0] if single_in else per_input)
    return result[0] if single_out else tuple(result)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the outputs (detached) and the vector-Jacobian product for each input. v may be
    left out only when func returns one tensor of one element."""
    _no_graph_of_grads(create_graph, "vjp")
    leaves, single_in, outs, single_out = _run(func, inputs, "vjp")
    if v is None:
        if not (single_out and outs[0].numel() == 1):
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                               "with a single element.")
        vs = (None,)
    else:
        vs, _ = _as_tuple(v, "v", "vjp")
        if len(vs) != len(outs):
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(outs)} but got {len(vs)}.")
        for i, (a, b) in enumerate(zip(vs, outs)):
            if tuple(a.shape) != tuple(b.shape):
                raise RuntimeError(f"Mismatch in shape: v[{i}] has a shape of {tuple(a.shape)} and output[{i}] has "
                                   f"a shape of {tuple(b.shape)}.")
    total = [None] * len(leaves)
    for i, (out, g) in enumerate(zip(outs, vs)):
        for j, r in enumerate(_grads(out, leaves, g, strict, i)):
            if r is not None:
                total[j] = r if total[j] is None else total[j] + r
    res = tuple((_zeros_like(x) if r is None else r).detach() for x, r in zip(leaves, total))
    detached = tuple(o.detach() for o in outs)
    return (detached[0] if single_out else detached), (res[0] if single_in else res)
