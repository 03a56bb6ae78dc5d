"""torch.func's transforms on gpumemnet's autograd: grad, grad_and_value, vjp, jacrev, jacfwd, hessian and vmap,
with PyTorch's signatures and results (per-sample gradients, `vmap(grad(loss))`, ensembling, Hessians).

They are built from what gpumemnet has, not from functorch's batching rules: grad and vjp take autograd.grad on
aliases of the inputs (with create_graph when an input already requires grad, so that transforms nest: hessian is
jacrev of jacrev); jacrev and jacfwd take one reverse pass per output element (jacfwd too: gpumemnet has no
forward mode, and the Jacobian is the same); vmap calls the function once per batch entry and stacks the results
(the values are vmap's; the time is a loop's). jvp and linearize take the double-vjp trick of
autograd.functional.jvp: u -> J^T u is linear in u, and its gradient along the tangent is J v."""
import numbers

from . import _C
from ._core.autograd import enable_grad, grad as _autograd_grad, is_grad_enabled
from ._core.tensor import Tensor
from ._core.tensor_more import _stack
from ._core.creation import zeros_like
from .utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian", "vmap"]


def _argnums(argnums, n, fn):
    nums = (argnums,) if isinstance(argnums, numbers.Integral) else tuple(argnums)
    if not nums or any(not isinstance(i, numbers.Integral) or not -n <= i < n for i in nums):
        raise RuntimeError(f"{fn}: argnums {argnums!r} must be an int or a non-empty tuple of ints indexing the "
                           f"{n} positional arguments")
    return tuple(i % n for i in nums)


def _outer(tensors):
    """Whether a transform's results stay in the caller's graph: an input requires grad under grad mode (an outer
    transform differentiates through). Under no_grad they do not, as PyTorch's (curvlinops wraps its products in
    no_grad and passes the model's parameters)."""
    return is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in tensors)


def _tracked(t, outer=True):
    """An input the function is differentiated with respect to: an alias in the caller's graph when it has one
    and the results stay in that graph (outer), else a fresh leaf. Called under enable_grad."""
    if not isinstance(t, Tensor):
        return t
    if t.requires_grad and outer:
        return t.view_as(t)
    return t.detach().requires_grad_(True)


def _differentiate(fn, func, args, kwargs, argnums, has_aux):
    """(the gradients' tree for argnums, output, aux, the tracked inputs' flat list) of func(*args)."""
    nums = _argnums(argnums, len(args), fn)
    outer = _outer(t for a in args for t in tree_flatten(a)[0])
    with enable_grad():
        args = list(args)
        for i in nums:
            args[i] = tree_map(lambda t: _tracked(t, outer), args[i])
        out = func(*args, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError(f"{fn}(f, has_aux=True): f must return a (output, aux) tuple, got "
                                   f"{type(out).__name__}")
            out, aux = out
        return [args[i] for i in nums], out, aux, outer, nums


def _grads(outputs, inputs_tree, cotangents, create_graph):
    leaves, spec = tree_flatten(inputs_tree)
    tensors = [t for t in leaves if isinstance(t, Tensor)]
    got = iter(_autograd_grad(outputs, tensors, cotangents, create_graph=create_graph, allow_unused=True)
               if tensors else ())
    out = []
    for t in leaves:
        if isinstance(t, Tensor):
            g = next(got)
            out.append(g if g is not None else t.detach().new_zeros(tuple(t.shape)))
        else:
            out.append(None)
    return tree_unflatten(out, spec)


def grad_and_value(func, argnums=0, has_aux=False):
    """f's gradient with respect to argument argnums (an int or a tuple of them), and f's value: f returns one
    scalar tensor (with has_aux, (scalar, aux)). Returns (gradient, value) or (gradient, (value, aux))."""
    def wrapper(*args, **kwargs):
        inputs, out, aux, outer, nums = _differentiate("grad", func, args, kwargs, argnums, has_aux)
        if not isinstance(out, Tensor) or out.numel() != 1:
            got = f"a tensor of shape {tuple(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
            raise RuntimeError(f"grad(f)(*args): Expected f(*args) to return a scalar Tensor, got {got}")
        if not out.requires_grad:  # f does not depend on the inputs: zero gradients
            g = tree_map(lambda t: t.detach().new_zeros(tuple(t.shape)) if isinstance(t, Tensor) else None, inputs)
        else:
            g = _grads([out], inputs, None, outer)
        g = g[0] if isinstance(argnums, numbers.Integral) else tuple(g)
        value = out if outer else out.detach()
        return (g, (value, aux)) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """f's gradient with respect to argument argnums (with has_aux: (gradient, aux))."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """(f(*primals), vjp_fn[, aux]): vjp_fn(cotangents) gives the vector-Jacobian products, one per primal."""
    inputs, out, aux, outer, _ = _differentiate("vjp", func, primals, {}, tuple(range(len(primals))), has_aux)
    out_leaves, out_spec = tree_flatten(out)

    def vjp_fn(cotangents):
        cot = tree_flatten(cotangents)[0]
        if len(cot) != len(out_leaves):
            raise RuntimeError(f"vjp_fn: expected {len(out_leaves)} cotangents (one per output), got {len(cot)}")
        pairs = [(o, c) for o, c in zip(out_leaves, cot) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            return tuple(tree_map(lambda t: t.detach().new_zeros(tuple(t.shape)) if isinstance(t, Tensor) else None,
                                  inputs))
        # a graph where the caller's continues: an outer transform, or cotangents that need grad (the double-vjp)
        keep = outer or _outer(c for _, c in pairs)
        return tuple(_grads([o for o, _ in pairs], inputs, [c for _, c in pairs], keep))
    value = out if outer else tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, out)
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of f with respect to argument argnums: for an output of shape O and an input of shape I, a
    tensor of shape O + I (a tuple per input for a tuple argnums, a tree per output for several outputs)."""
    def wrapper(*args, **kwargs):
        inputs, out, aux, outer, _ = _differentiate("jacrev", func, args, kwargs, argnums, has_aux)
        in_leaves, in_spec = tree_flatten(inputs)
        in_t = [t for t in in_leaves if isinstance(t, Tensor)]
        out_leaves, out_spec = tree_flatten(out)
        jac_per_out = []
        for o in out_leaves:
            rows = []
            for k in range(o.numel()):
                if o.requires_grad:
                    cot = o.detach().new_zeros((o.numel(),))
                    cot[k] = 1.0
                    gs = _autograd_grad([o], in_t, [cot.reshape(tuple(o.shape))], retain_graph=True,
                                        create_graph=outer, allow_unused=True)
                else:
                    gs = [None] * len(in_t)
                rows.append([g if g is not None else t.detach().new_zeros(tuple(t.shape)) for g, t in zip(gs, in_t)])
            per_input = []
            for j, t in enumerate(in_t):
                stacked = _stack([r[j] for r in rows]) if rows else t.new_zeros((0,) + tuple(t.shape))
                j_t = stacked.reshape(tuple(o.shape) + tuple(t.shape))
                per_input.append(j_t if outer else j_t.detach())
            it = iter(per_input)
            jac_inputs = tree_unflatten([next(it) if isinstance(t, Tensor) else None for t in in_leaves], in_spec)
            jac_per_out.append(jac_inputs[0] if isinstance(argnums, numbers.Integral) else tuple(jac_inputs))
        jac = tree_unflatten(jac_per_out, out_spec)
        return (jac, aux) if has_aux else jac
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian as jacrev gives it (gpumemnet has no forward mode; the values are the same)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """The Hessian of a scalar f: jacrev of jacrev, shape I + I."""
    return jacrev(jacrev(func, argnums), argnums)


def _leaf_dims(a, d):
    """[(leaf, its in_dim)] of an argument whose in_dim is an int or None (every leaf), or a tree (dict, list,
    tuple) of them matching the argument's own structure (PyTorch's nested in_dims)."""
    if isinstance(d, dict):
        return [p for k in d for p in _leaf_dims(a[k], d[k])]
    if isinstance(d, (list, tuple)):
        if len(d) != len(a):
            raise ValueError(f"vmap: in_dims {d!r} does not match the structure of its argument (length {len(a)})")
        return [p for x, dx in zip(a, d) for p in _leaf_dims(x, dx)]
    return [(t, d) for t in tree_flatten(a)[0]]


def _select(a, d, b):
    """Element b of argument a along its in_dims d (an int, None or a tree of them)."""
    if d is None:
        return a
    if isinstance(d, dict):
        return {**a, **{k: _select(a[k], d[k], b) for k in d}}
    if isinstance(d, (list, tuple)):
        out = [_select(x, dx, b) for x, dx in zip(a, d)]
        return out if isinstance(a, list) else type(a)(*out) if hasattr(a, "_fields") else tuple(out)
    return tree_map(lambda t: t.select(d, b) if isinstance(t, Tensor) else t, a)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over a dim of its inputs (in_dims: an int or None for every argument, or one per positional
    argument, applied to every tensor inside it); the results stacked along out_dims. A loop over the batch.
    randomness: "error" (a random op inside raises, seen as the generator having moved), "different" (each entry
    draws its own numbers) or "same" (every entry draws the same numbers: the generator is set back before each)."""
    if not callable(func):  # PyTorch finds out at the first call; here at once
        raise TypeError(f"vmap: func must be callable, got {type(func).__name__}")
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got "
                           f"{randomness}")

    def wrapper(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap(f, in_dims={in_dims!r})(*args): in_dims must have one entry per positional "
                             f"argument ({len(args)}), got {len(dims)}")
        size = None
        for a, d in zip(args, dims):
            for t, d in _leaf_dims(a, d):
                if d is not None and isinstance(t, Tensor):
                    n = t.shape[d]
                    if size is not None and n != size:
                        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                                         f"dimension, got sizes {size} and {n} for the mapped dimension")
                    size = n
        if size is None:
            raise ValueError("vmap: at least one input must be a tensor mapped over a dim (in_dims not all None)")
        results = []
        start = _C.get_rng_state() if randomness != "different" else None
        for b in range(size):
            if randomness == "same":
                _C.set_rng_state(*start)
            call = [_select(a, d, b) for a, d in zip(args, dims)]
            results.append(func(*call, **kwargs))
            if randomness == "error" and _C.get_rng_state() != start:
                raise RuntimeError("vmap: called random operation while in randomness error mode. Please either "
                                   "use the 'same' or 'different' randomness flags on vmap or perform the "
                                   "randomness operation out of vmap")
        leaves0, spec = tree_flatten(results[0])
        per = [tree_flatten(r)[0] for r in results]
        odims = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(leaves0)
        out = []
        for i, leaf in enumerate(leaves0):
            if not isinstance(leaf, Tensor):
                out.append(leaf)
                continue
            col = [p[i] for p in per]
            d = odims[i] if i < len(odims) else 0
            stacked = _stack(col)
            out.append(stacked.movedim(0, d) if d else stacked)
        return tree_unflatten(out, spec)
    return wrapper


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J(primals) @ tangents), and func's aux third with has_aux. Tangents have the primals'
    structure: a tuple of tensors or of trees of them (a dict of parameters: NTK and Gauss-Newton code), output a
    tensor or a tree. (strict: PyTorch's flag of its old API, accepted.)"""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents) if isinstance(tangents, tuple) else (None, None)
    if t_leaves is None or len(t_leaves) != len(p_leaves) or str(t_spec) != str(p_spec):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, tangents also must be.")
    for p, t in zip(p_leaves, t_leaves):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor) or tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to be tensors of the same "
                               f"shapes, got {_shape_of(p)} and {_shape_of(t)}")
    aux = []

    def f(*leaves):
        out = func(*tree_unflatten(list(leaves), p_spec))
        if has_aux:
            if not isinstance(out, tuple) or len(out) != 2:
                raise RuntimeError("jvp(f, primals, tangents): output of function f should be a tuple: (output, "
                                   "aux) if has_aux is True")
            out, extra = out
            aux.append(extra)
        return out
    nested = _outer(p_leaves)  # inside an outer transform: stay differentiable
    with enable_grad():
        xs = tuple(_tracked(p, nested) for p in p_leaves)
        out = f(*xs)
        outs, o_spec = tree_flatten(out)
        jvs = [jacobian_vector(o, xs, t_leaves, create_graph=nested) for o in outs]
        jvs = [zeros_like(o) if jv is None else jv for o, jv in zip(outs, jvs)]  # (constant in the primals)
    if not nested:
        outs = [o.detach() for o in outs]
    out, jv = tree_unflatten(outs, o_spec), tree_unflatten(jvs, o_spec)
    return (out, jv, aux[0]) if has_aux else (out, jv)


def jacobian_vector(out, inputs, tangents, create_graph=False):
    """J @ tangents of out with respect to inputs, by the double-vjp trick: u -> J^T u is linear in u, and its
    gradient along the tangents is J v. None when out's graph reaches none of the inputs."""
    if not out.requires_grad:
        return None
    with enable_grad():
        u = zeros_like(out).requires_grad_(True)
        firsts = _autograd_grad(out, list(inputs), u, retain_graph=True, create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, t in zip(firsts, tangents) if g is not None and g.requires_grad]
        if not pairs:
            return None
        jv, = _autograd_grad([g for g, _ in pairs], u, [t for _, t in pairs], retain_graph=True,
                             create_graph=create_graph, allow_unused=True)
    return zeros_like(out) if jv is None else jv


def linearize(func, *primals):
    """(func(*primals), jvp_fn) where jvp_fn(*tangents) is the Jacobian-vector product at primals."""
    out = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]
    return out, jvp_fn


def _shape_of(x):
    return tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
