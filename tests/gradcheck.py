"""Shared test helpers: the float64 gradient check and the NumPy/PyTorch reference comparisons.

`gradcheck` compares autograd's gradient with central finite differences computed from fresh tensors made
of perturbed NumPy copies (never by writing into the inputs in place, so a bug in in-place writes or version
counters cannot hide a wrong gradient). The scalar differentiated is sum(out * W) with W drawn from a fixed
NumPy seed, so every output element (and its position) matters. Tolerances follow llm.c's
validate_result: |analytic - numeric| <= atol + rtol * |numeric|; a failure lists the first mismatches with
their index.

This file holds no tests (pytest collects only test_*.py); test files import it as `from gradcheck import ...`
(pytest puts tests/ on sys.path for them)."""
import numpy as np

import gpumemnet as gm

__all__ = ["gradcheck", "check_against_numpy", "check_against_torch", "assert_close", "to_numpy", "as_tuple"]

_FLOAT_NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16}


def to_numpy(t):
    """A tensor's values as a fresh ndarray (never sharing memory, grad mode or not)."""
    if t.dtype == gm.bfloat16:
        t = t.detach().float()
    return np.array(t.detach().numpy(), copy=True)


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _mismatches(got, ref, atol, rtol, limit=6):
    """Indices (first `limit`) and count where |got - ref| > atol + rtol*|ref| (NaN must match NaN)."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got - ref) <= atol + rtol * np.abs(ref))
    bad &= ~(np.isnan(got) & np.isnan(ref))
    idx = np.argwhere(bad)
    return [tuple(int(v) for v in i) for i in idx[:limit]], int(bad.sum())


def assert_close(got, ref, atol=1e-6, rtol=1e-5, what="", labels=("got", "ref")):
    """got/ref: ndarrays (or tensors). Shapes must match exactly; values within atol + rtol*|ref|."""
    if isinstance(got, gm.Tensor):
        got = to_numpy(got)
    if isinstance(ref, gm.Tensor):
        ref = to_numpy(ref)
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != expected {ref.shape}"
    first, n = _mismatches(got, ref, atol, rtol)
    if n:
        rows = "\n".join(f"  at {i}: {labels[0]}={got[i]!r} {labels[1]}={ref[i]!r}" for i in first)
        raise AssertionError(f"{what}: {n} of {got.size} elements differ by more than atol={atol} + "
                             f"rtol={rtol}*|{labels[1]}|; first ones:\n{rows}")


def _weights(outs, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, size=tuple(o.shape)) for o in outs]


def _differentiable(o):
    return isinstance(o, gm.Tensor) and o.dtype.is_floating_point


def _scalar_np(fn, args, weights):
    """sum(out * W) in float64 NumPy, from one no-grad forward."""
    with gm.no_grad():
        outs = [o for o in as_tuple(fn(*args)) if _differentiable(o)]
    return float(sum(np.sum(to_numpy(o).astype(np.float64) * w) for o, w in zip(outs, weights)))


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, seed=0, what=None):
    """Check d sum(fn(*inputs) * W) / d inputs against central finite differences.

    inputs: a sequence; gpumemnet tensors with requires_grad are differentiated (they are expected to be
    float64; a lower-precision input is allowed for casts, where the finite-difference step is the difference
    of the perturbed values as actually stored), anything else (numbers, index tensors, masks, tensors without
    requires_grad) is passed through unchanged. fn may return a tensor or a tuple; non-floating outputs (e.g.
    indices) are ignored. Returns the analytic gradients (ndarrays, None where an input is not differentiated).
    """
    what = what or getattr(fn, "__name__", "fn")
    inputs = list(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, gm.Tensor) and x.requires_grad]
    assert diff, f"{what}: gradcheck needs at least one input with requires_grad"
    base = {i: to_numpy(inputs[i]) for i in diff}
    np_dtype = {i: _FLOAT_NP[str(inputs[i].dtype).split(".")[-1]] for i in diff}

    # Analytic: fresh leaves (so earlier .grad values cannot leak in), one backward of sum(out * W).
    leaves = list(inputs)
    for i in diff:
        leaves[i] = gm.tensor(base[i], dtype=inputs[i].dtype, requires_grad=True)
    outs = [o for o in as_tuple(fn(*leaves)) if _differentiable(o)]
    assert outs, f"{what}: fn returned no floating-point tensor"
    assert all(o.requires_grad for o in outs), f"{what}: an output does not require grad: {outs}"
    weights = _weights(outs, seed)
    loss = None
    for o, w in zip(outs, weights):
        term = (o * gm.tensor(w, dtype=o.dtype)).sum()
        loss = term if loss is None else loss + term
    loss.backward()

    # The forward with grad mode on must agree with the one without (both feed the comparison below).
    with gm.no_grad():
        ref_outs = [o for o in as_tuple(fn(*[gm.tensor(base[i], dtype=inputs[i].dtype) if i in diff else x
                                           for i, x in enumerate(inputs)])) if _differentiable(o)]
    for k, (o, r) in enumerate(zip(outs, ref_outs)):
        assert_close(to_numpy(o), to_numpy(r), 0.0, 0.0, what=f"{what}: output {k}, grad mode vs no_grad forward")

    results = [None] * len(inputs)
    for i in diff:
        g = leaves[i].grad
        assert g is not None, f"{what}: input {i} got no gradient (.grad is None)"
        assert tuple(g.shape) == tuple(leaves[i].shape), \
            f"{what}: input {i}: grad shape {tuple(g.shape)} != input shape {tuple(leaves[i].shape)}"
        assert g.dtype == leaves[i].dtype, f"{what}: input {i}: grad dtype {g.dtype} != input dtype {leaves[i].dtype}"
        analytic = to_numpy(g).astype(np.float64)

        numeric = np.zeros(base[i].shape, np.float64)
        for j in np.ndindex(*base[i].shape):
            vals = []
            for sign in (1.0, -1.0):
                arr = base[i].copy()
                arr[j] = arr[j] + sign * eps
                vals.append((float(arr[j]), arr))
            args = list(inputs)
            args[i] = gm.tensor(vals[0][1].astype(np_dtype[i]), dtype=inputs[i].dtype)
            f_plus = _scalar_np(fn, args, weights)
            args[i] = gm.tensor(vals[1][1].astype(np_dtype[i]), dtype=inputs[i].dtype)
            f_minus = _scalar_np(fn, args, weights)
            step = float(np.float64(vals[0][1].astype(np_dtype[i])[j]) - np.float64(vals[1][1].astype(np_dtype[i])[j]))
            assert step > 0, f"{what}: eps={eps} is below the resolution of input {i}'s dtype at {j}"
            numeric[j] = (f_plus - f_minus) / step
        assert_close(analytic, numeric, atol, rtol, what=f"{what}: gradient of input {i} (shape {base[i].shape})",
                     labels=("analytic", "numeric"))
        results[i] = analytic
    return results


def check_against_numpy(fn_gm, fn_np, arrays, atol=1e-6, rtol=1e-5, dtype=None, what=None):
    """fn_gm(*tensors) vs fn_np(*arrays). Each array becomes a tensor of its own dtype (or `dtype`); arrays that
    are not ndarrays (numbers, lists used as indices) are passed as they are. Tuple outputs compare
    element-wise."""
    what = what or getattr(fn_gm, "__name__", "fn")
    tensors = [gm.tensor(a, dtype=dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else
               gm.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
    got = as_tuple(fn_gm(*tensors))
    ref = as_tuple(fn_np(*arrays))
    assert len(got) == len(ref), f"{what}: {len(got)} outputs, NumPy gives {len(ref)}"
    for k, (g, r) in enumerate(zip(got, ref)):
        assert_close(to_numpy(g), np.asarray(r), atol, rtol, what=f"{what}: output {k} vs NumPy")


def check_against_torch(fn_gm, fn_torch, arrays, atol=1e-7, rtol=1e-6, seed=0, what=None):
    """Values and gradients of fn_gm vs fn_torch on the same float64 data (the caller has imported torch).
    Float ndarrays become leaves requiring grad; everything else is passed as is (ndarrays as tensors)."""
    import torch
    what = what or getattr(fn_gm, "__name__", "fn")
    g_in = [gm.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in arrays]
    t_in = [torch.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in arrays]
    g_out = [o for o in as_tuple(fn_gm(*g_in)) if _differentiable(o)]
    t_out = [o for o in as_tuple(fn_torch(*t_in)) if o.is_floating_point()]
    weights = _weights(g_out, seed)
    for k, (g, t) in enumerate(zip(g_out, t_out)):
        assert_close(to_numpy(g), t.detach().numpy(), atol, rtol, what=f"{what}: output {k} vs torch")
    sum(((g * gm.tensor(w)).sum() for g, w in zip(g_out, weights)), gm.zeros((), dtype=gm.float64)).backward()
    sum((t * torch.tensor(w)).sum() for t, w in zip(t_out, weights)).backward()
    for k, (g, t) in enumerate(zip(g_in, t_in)):
        if isinstance(g, gm.Tensor) and g.requires_grad:
            assert_close(to_numpy(g.grad), t.grad.numpy(), atol, rtol, what=f"{what}: grad of input {k} vs torch")
