"""Property tests over the error table's families (error_inputs_api.py), beyond test_fuzz_ops.py's arithmetic:
dims in and out of range for every dim-taking op, sizes of any sign for the creation ops, in-place writes
through expanded views, and NaN/Inf in every unary op. Each random call matches a NumPy reference or raises a
clean exception exactly when NumPy (or PyTorch's rule, where NumPy has none) refuses it, the same on cpu and meta.

The bounded run takes well under a minute; the long run is GPUMEMNET_FUZZ_EXAMPLES=20000 python -m pytest -q
tests/test_fuzz_api.py (tools/sanitize.sh in front for AddressSanitizer + UndefinedBehaviorSanitizer)."""
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gpumemnet as gm  # noqa: E402
import gpumemnet.nn.functional as F  # noqa: E402
from test_fuzz_ops import FUZZ, _array, _check, _outcome  # noqa: E402

nonempty = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def _softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# op: (gpumemnet call, NumPy reference); NumPy's axis checks raise AxisError (an IndexError) as ours raise IndexError
DIM_OPS = {
    "sum": (lambda t, d: t.sum(dim=d), lambda a, d: a.sum(axis=d)),
    "prod": (lambda t, d: t.prod(dim=d), lambda a, d: a.prod(axis=d)),
    "amin": (lambda t, d: t.amin(dim=d), lambda a, d: a.min(axis=d)),
    "argmax": (lambda t, d: t.argmax(dim=d), lambda a, d: a.argmax(axis=d)),
    "argmin": (lambda t, d: t.argmin(dim=d), lambda a, d: a.argmin(axis=d)),
    "std": (lambda t, d: t.std(dim=d), lambda a, d: a.std(axis=d, ddof=1)),
    "var": (lambda t, d: t.var(dim=d), lambda a, d: a.var(axis=d, ddof=1)),
    "softmax": (lambda t, d: F.softmax(t, dim=d), _softmax),
    "log_softmax": (lambda t, d: F.log_softmax(t, dim=d), lambda a, d: np.log(_softmax(a, d))),
    "unsqueeze": (lambda t, d: t.unsqueeze(d), lambda a, d: np.expand_dims(a, d)),  # NumPy: -ndim-1 <= d <= ndim
    "squeeze": (lambda t, d: t.squeeze(d), lambda a, d: a.squeeze(d) if a.shape[d] == 1 else a),  # PyTorch keeps a
    "transpose": (lambda t, d: t.transpose(0, d), lambda a, d: np.swapaxes(a, 0, d)),
    "movedim": (lambda t, d: t.movedim(d, 0), lambda a, d: np.moveaxis(a, d, 0)),
    "unbind": (lambda t, d: gm.stack(t.unbind(d)),
               lambda a, d: np.stack([a.take(i, axis=d) for i in range(a.shape[d])])),
}


@FUZZ
@given(op=st.sampled_from(sorted(DIM_OPS)), shape=nonempty, dim=st.integers(-6, 5), seed=st.integers(0, 99))
def test_dim_ops(op, shape, dim, seed):
    gm_op, np_op = DIM_OPS[op]
    a = _array(shape, np.float64, seed)
    def ref():
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # std of one element: NumPy warns and gives NaN, as PyTorch does
            return np_op(a, dim)

    _check(lambda d: gm_op(gm.tensor(a, device=d), dim), ref, rtol=1e-9, atol=1e-12)


CREATE = {"zeros": gm.zeros, "ones": gm.ones, "empty": gm.empty, "rand": gm.rand, "randn": gm.randn}


@FUZZ
@given(op=st.sampled_from(sorted(CREATE)), size=st.lists(st.integers(-3, 3), max_size=4).map(tuple))
def test_creation_sizes(op, size):
    def call(dev):
        return CREATE[op](*size, device=dev)

    kind, got = _outcome(lambda: call("cpu"))
    meta_kind, meta_got = _outcome(lambda: call("meta"))
    assert kind == meta_kind
    if any(s < 0 for s in size):
        assert kind == "raised" and issubclass(got, ValueError)
        return
    assert kind == "ok" and tuple(got.shape) == size == tuple(meta_got.shape)


INPLACE = {"add_": (lambda t: t.add_(1.0), lambda a: a + 1.0), "mul_": (lambda t: t.mul_(2.0), lambda a: a * 2.0),
           "clamp_": (lambda t: t.clamp_(-1.0, 1.0), lambda a: np.clip(a, -1.0, 1.0)),
           "relu_": (lambda t: F.relu_(t), lambda a: np.maximum(a, 0.0)),
           "sigmoid_": (lambda t: t.sigmoid_(), lambda a: 1 / (1 + np.exp(-a))),
           "copy_": (lambda t: t.copy_(gm.ones(tuple(t.shape), dtype=t.dtype, device=t.device)), np.ones_like)}


@FUZZ
@given(op=st.sampled_from(sorted(INPLACE)), base=st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3),
       grow=st.lists(st.sampled_from([1, 2, 3]), min_size=3, max_size=3), seed=st.integers(0, 99))
def test_inplace_through_expanded_views(op, base, grow, seed):
    """Writing through an expanded view (a dim of size > 1 with stride 0) is refused everywhere; any other view
    of the same storage is written as NumPy writes it."""
    gm_op, np_op = INPLACE[op]
    shape = tuple(base)
    target = tuple(g if b == 1 else b for b, g in zip(shape, grow))
    a = _array(shape, np.float64, seed)

    def call(dev):
        view = gm.tensor(a, device=dev).expand(*target)
        gm_op(view)
        return view

    aliased = any(b == 1 and g > 1 for b, g in zip(shape, target))
    kind, got = _outcome(lambda: call("cpu"))
    meta_kind, meta_got = _outcome(lambda: call("meta"))
    assert kind == meta_kind, f"cpu {kind} {got!r}, meta {meta_kind} {meta_got!r}"
    if aliased:
        assert kind == "raised" and issubclass(got, RuntimeError)
        return
    assert kind == "ok"
    np.testing.assert_allclose(got.numpy(), np_op(np.broadcast_to(a, target)), rtol=1e-12, atol=1e-12)


SPECIAL = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 1e300, -1e300, 1e-300, float("inf"),
                           float("-inf"), float("nan")])
UNARY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "neg": np.negative, "floor": np.floor,
         "ceil": np.ceil, "trunc": np.trunc, "round": np.round, "sign": lambda a: np.where(np.isnan(a), 0.0, np.sign(a)), "square": np.square,
         "rsqrt": lambda a: 1 / np.sqrt(a), "tanh": np.tanh, "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
         "relu": lambda a: np.where(np.isnan(a), a, np.maximum(a, 0.0))}


@FUZZ
@given(op=st.sampled_from(sorted(UNARY)), values=st.lists(SPECIAL | st.floats(-50, 50), min_size=0, max_size=6))
def test_unary_nan_inf(op, values):
    """NaN and Inf in, IEEE out: the values NumPy computes in float64, NaN where NaN; never an exception."""
    a = np.array(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        ref = UNARY[op](a)
    got = getattr(gm.tensor(a), op)().numpy()
    assert tuple(getattr(gm.tensor(a, device="meta"), op)().shape) == a.shape
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0, equal_nan=True)
