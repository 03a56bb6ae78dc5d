"""torch.autograd.functional: jacobian, vjp, and the ones built on gradients of gradients (hessian, vhp, hvp, jvp),
all on autograd.grad in reverse mode (one backward per output element for a Jacobian; jvp by the double-vjp trick).
Gradients of gradients pass through the ops that have a create_graph formula (_core/graph_backward.py). With
create_graph=True the results stay differentiable with respect to the inputs."""
from .._core.autograd import enable_grad, grad
from .._core.creation import stack, zeros
from .._core.tensor import Tensor

__all__ = ["jacobian", "vjp", "hessian", "vhp", "hvp", "jvp"]


def _as_tuple(x, what, fn):
    """(tuple of tensors, whether x was one tensor), with PyTorch's TypeError for anything else."""
    if isinstance(x, Tensor):
        return (x,), True
    if isinstance(x, tuple) and all(isinstance(t, Tensor) for t in x):
        return x, False
    raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors but the given {what} "
                    f"has type {type(x)}.")


def _run(func, inputs, fn, create_graph=False):
    """Inputs as tensors requiring grad (fresh leaves; with create_graph, views of the inputs that require grad,
    so results stay differentiable with respect to them, as PyTorch's), and func's outputs on them."""
    tupled, single_in = _as_tuple(inputs, "inputs", fn)
    leaves = tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(True)
                   for t in tupled)
    with enable_grad():
        out = func(*leaves)
    outs, single_out = _as_tuple(out, "outputs of the user-provided function", fn)
    return leaves, single_in, outs, single_out


def _finish(t, create_graph):
    return t if create_graph else t.detach()


def _grads(out, leaves, g, strict, i, create_graph=False):
    """d(out . g)/d(leaves), None where out does not depend on a leaf (an error in strict mode)."""
    if not out.requires_grad:
        if strict:
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               f"must be computed in a differentiable manner from the input when running in strict "
                               f"mode.")
        return [None] * len(leaves)
    got = grad(out, leaves, g, retain_graph=True, create_graph=create_graph, allow_unused=True)
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
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise ValueError("torch.autograd.functional.jacobian: `strategy=\"forward-mode\"` is only supported with "
                         "`vectorize=True`.")
    leaves, single_in, outs, single_out = _run(func, inputs, "jacobian", create_graph)
    result = []
    for i, out in enumerate(outs):
        rows = [[] for _ in leaves]  # per input, one gradient per output element
        for k in range(out.numel()):
            g = _zeros_like(out).reshape(-1)
            g[k] = 1.0
            got = _grads(out, leaves, g.reshape(out.shape), strict, i, create_graph)
            for j, r in enumerate(got):
                rows[j].append(_zeros_like(leaves[j]) if r is None else r)
        per_input = tuple((stack(r) if r else _zeros_like(leaves[j]).reshape(0, *leaves[j].shape))
                          .reshape(*out.shape, *leaves[j].shape) for j, r in enumerate(rows))
        per_input = tuple(_finish(t, create_graph) for t in per_input)
        result.append(per_input[0] if single_in else per_input)
    return result[0] if single_out else tuple(result)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the outputs (detached) and the vector-Jacobian product for each input. v may be
    left out only when func returns one tensor of one element."""
    leaves, single_in, outs, single_out = _run(func, inputs, "vjp", create_graph)
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
        for j, r in enumerate(_grads(out, leaves, g, strict, i, create_graph)):
            if r is not None:
                total[j] = r if total[j] is None else total[j] + r
    res = tuple(_finish(_zeros_like(x) if r is None else r, create_graph) for x, r in zip(leaves, total))
    detached = tuple(_finish(o, create_graph) for o in outs)
    return (detached[0] if single_out else detached), (res[0] if single_in else res)


def _scalar(outs, single_out, fn):
    if not single_out:
        raise RuntimeError(f"The function given to {fn} should return a single Tensor")
    if outs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn} should contain a single element")
    return outs[0]


def _vectors(v, like, fn, what="input"):
    """v as a tuple matching `like` in number and shapes; None only for one one-element tensor."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the {what} to the user-provided function is a "
                               f"single Tensor with a single element.")
        return (_zeros_like(like[0]) + 1.0,)
    vs, _ = _as_tuple(v, "v", fn)
    if len(vs) != len(like):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, like)):
        if tuple(a.shape) != tuple(b.shape):
            name = "input" if what == "input" else "output"
            raise RuntimeError(f"Mismatch in shape: v[{i}] has a shape of {tuple(a.shape)} and {name}[{i}] has a "
                               f"shape of {tuple(b.shape)}.")
    return vs


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): H the Hessian of the scalar func at inputs, by differentiating (grad . v)."""
    leaves, single_in, outs, single_out = _run(func, inputs, "vhp", create_graph)
    out = _scalar(outs, single_out, "vhp")
    vs = _vectors(v, leaves, "vhp")
    with enable_grad():
        first = _grads(out, leaves, None, strict, 0, create_graph=True)
        dot = sum((g * u).sum() for g, u in zip(first, vs) if g is not None)
        second = [None] * len(leaves)
        if isinstance(dot, Tensor) and dot.requires_grad:
            second = grad(dot, leaves, create_graph=create_graph, allow_unused=True)
    res = tuple(_finish(_zeros_like(x) if r is None else r, create_graph) for x, r in zip(leaves, second))
    return _finish(out, create_graph), (res[0] if single_in else res)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v). The Hessian of a twice-differentiable scalar function is symmetric, so H v is v^T H:
    computed as vhp (PyTorch computes it with one more backward; the values agree up to rounding)."""
    return vhp(func, inputs, v, create_graph, strict)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of the scalar func at inputs: the Jacobian of its gradient (nested per pair of inputs as
    PyTorch nests it). vectorize changes how PyTorch computes it, not the result."""
    _, single_in = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        outs, single_out = _as_tuple(func(*xs), "outputs of the user-provided function", "hessian")
        out = _scalar(outs, single_out, "hessian")
        got = _grads(out, xs, None, strict, 0, create_graph=True)
        got = tuple(_zeros_like(x) if g is None else g for x, g in zip(xs, got))
        return got[0] if single_in else got

    return jacobian(gradient, inputs, create_graph=create_graph, strict=strict)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), by the double-vjp trick: u -> J^T u is linear in u, and its gradient with respect to u
    along v is J v."""
    leaves, single_in, outs, single_out = _run(func, inputs, "jvp", create_graph)
    vs = _vectors(v, leaves, "jvp")
    res = []
    with enable_grad():
        for i, out in enumerate(outs):
            u = _zeros_like(out).requires_grad_(True)
            first = _grads(out, leaves, u, strict, i, create_graph=True)
            pairs = [(g, w) for g, w in zip(first, vs) if g is not None and g.requires_grad]
            if not pairs:
                res.append(_zeros_like(out))
                continue
            jv, = grad([g for g, _ in pairs], u, [w for _, w in pairs], create_graph=create_graph,
                       allow_unused=True)
            res.append(_zeros_like(out) if jv is None else jv)
    res = tuple(_finish(r, create_graph) for r in res)
    detached = tuple(_finish(o, create_graph) for o in outs)
    return (detached[0] if single_out else detached), (res[0] if single_out else res)
