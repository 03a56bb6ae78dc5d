"""Property tests over random calls (hypothesis): every call either matches a NumPy reference or raises a clean
Python exception (ValueError, TypeError, IndexError, RuntimeError) — never a crash, another exception type, or a
wrong answer — and meta raises exactly when and what the CPU raises. Valid arguments must never be refused: the
reference decides which calls are valid.

The bounded run here takes well under a minute. The long run is the same tests with more examples:

    GPUMEMNET_FUZZ_EXAMPLES=20000 python -m pytest -q tests/test_fuzz_ops.py

(add tools/sanitize.sh in front to run it under AddressSanitizer + UndefinedBehaviorSanitizer)."""
import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gpumemnet as gm  # noqa: E402
import gpumemnet.nn.functional as F  # noqa: E402
from conv_util import ref_conv2d  # noqa: E402

EXAMPLES = int(os.environ.get("GPUMEMNET_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CLEAN = (ValueError, TypeError, IndexError, RuntimeError)

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
DTYPES = [("float32", gm.float32, np.float32), ("float64", gm.float64, np.float64), ("int64", gm.int64, np.int64)]


def _outcome(fn):
    """('ok', value) or ('raised', exception type); anything but a clean exception fails the test."""
    try:
        return "ok", fn()
    except CLEAN as e:
        return "raised", type(e)


def _array(shape, np_dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 3
    return a.astype(np_dtype) if np_dtype != np.int64 else np.round(a).astype(np.int64)


def _check(gm_fn, np_fn, rtol=1e-5, atol=1e-6):
    """gm_fn(dev) on cpu and meta against np_fn(): same validity, same exception type, and the CPU values."""
    try:
        ref = np_fn()
    except (ValueError, IndexError, TypeError):
        ref = None
    kind, got = _outcome(lambda: gm_fn("cpu"))
    meta_kind, meta_got = _outcome(lambda: gm_fn("meta"))
    assert kind == meta_kind, f"cpu {kind} {got!r} but meta {meta_kind} {meta_got!r}"
    if kind == "raised":
        assert got == meta_got, f"cpu raised {got.__name__}, meta raised {meta_got.__name__}"
        assert ref is None, f"refused a call NumPy accepts ({got.__name__}); reference shape {np.shape(ref)}"
        return
    assert ref is not None, f"accepted a call NumPy refuses: got shape {tuple(got.shape)}"
    assert tuple(got.shape) == np.shape(ref) == tuple(meta_got.shape)
    np.testing.assert_allclose(got.numpy().astype(np.float64), np.asarray(ref, dtype=np.float64), rtol=rtol,
                               atol=atol)


BINARY = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
          "mul": (lambda a, b: a * b, np.multiply), "maximum": (gm.maximum, np.maximum)}


@FUZZ
@given(op=st.sampled_from(sorted(BINARY)), sa=shapes, sb=shapes, dt=st.sampled_from(DTYPES), seed=st.integers(0, 99))
def test_binary_broadcast(op, sa, sb, dt, seed):
    gm_op, np_op = BINARY[op]
    a, b = _array(sa, dt[2], seed), _array(sb, dt[2], seed + 1)
    _check(lambda d: gm_op(gm.tensor(a, device=d), gm.tensor(b, device=d)), lambda: np_op(a, b))


REDUCTIONS = {"sum": (lambda t, dim, k: t.sum(dim=dim, keepdim=k), lambda a, dim, k: a.sum(axis=dim, keepdims=k)),
              "mean": (lambda t, dim, k: t.mean(dim=dim, keepdim=k), lambda a, dim, k: a.mean(axis=dim, keepdims=k)),
              "amax": (lambda t, dim, k: t.amax(dim=dim, keepdim=k), lambda a, dim, k: a.max(axis=dim, keepdims=k))}


@FUZZ
@given(op=st.sampled_from(sorted(REDUCTIONS)), shape=shapes, dim=st.integers(-5, 4), keep=st.booleans(),
       seed=st.integers(0, 99))
def test_reduction(op, shape, dim, keep, seed):
    gm_op, np_op = REDUCTIONS[op]
    a = _array(shape, np.float64, seed)

    def ref():
        if not shape:
            raise IndexError("0-d")  # PyTorch accepts dim 0/-1 on a 0-d tensor; NumPy does not: skip the call
        if op == "amax" and a.shape[dim] == 0:
            raise ValueError("empty amax")  # a max over no element has no identity: PyTorch and NumPy refuse
        if op == "mean" and a.shape[dim] == 0:
            raise ValueError("empty mean")  # NaN in both; compared separately below
        return np_op(a, dim, keep)

    if not shape:
        return
    if op == "mean" and -len(shape) <= dim < len(shape) and shape[dim] == 0:
        got = gm_op(gm.tensor(a), dim, keep)
        assert np.isnan(got.numpy()).all()  # 0/0, as PyTorch and NumPy give
        return
    _check(lambda d: gm_op(gm.tensor(a, device=d), dim, keep), ref, rtol=1e-12, atol=1e-12)


@FUZZ
@given(sa=shapes, sb=shapes, seed=st.integers(0, 99))
def test_matmul(sa, sb, seed):
    a, b = _array(sa, np.float64, seed), _array(sb, np.float64, seed + 1)

    def ref():
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("0-d")  # refused by PyTorch and NumPy alike
        return np.matmul(a, b)

    _check(lambda d: gm.tensor(a, device=d) @ gm.tensor(b, device=d), ref, rtol=1e-12, atol=1e-12)


@FUZZ
@given(n=st.integers(0, 2), c=st.integers(1, 4), h=st.integers(0, 6), w=st.integers(0, 6), k=st.integers(-1, 5),
       kh=st.integers(1, 4), kw=st.integers(1, 4), stride=st.integers(-1, 3), pad=st.integers(-1, 3),
       dil=st.integers(-1, 3), groups=st.integers(0, 3), seed=st.integers(0, 99))
def test_conv2d(n, c, h, w, k, kh, kw, stride, pad, dil, groups, seed):
    x = _array((n, c, h, w), np.float64, seed)
    wt = _array((max(k, 0), c // max(groups, 1), kh, kw), np.float64, seed + 1)

    def ref():
        ok = (k >= 1 and h >= 1 and w >= 1 and stride >= 1 and pad >= 0 and dil >= 1 and groups >= 1 and c % groups == 0
              and k % groups == 0 and h + 2 * pad >= dil * (kh - 1) + 1 and w + 2 * pad >= dil * (kw - 1) + 1
              and (c // groups) >= 1)
        if not ok:
            raise ValueError("invalid conv")  # as PyTorch: no empty weight, no empty image even if padded
        return ref_conv2d(x, wt, None, stride, pad, dil, groups)

    _check(lambda d: F.conv2d(gm.tensor(x, device=d), gm.tensor(wt, device=d), stride=stride, padding=pad,
                              dilation=dil, groups=groups), ref, rtol=1e-10, atol=1e-10)


def _ref_max_pool(x, k, s, p):
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 2 * p, w + 2 * p), -np.inf)
    xp[:, :, p:p + h, p:p + w] = x
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = xp[:, :, i * s:i * s + k, j * s:j * s + k].max(axis=(2, 3))
    return out


@FUZZ
@given(n=st.integers(0, 2), c=st.integers(0, 3), h=st.integers(0, 6), w=st.integers(0, 6), k=st.integers(-1, 4),
       stride=st.integers(-1, 3), pad=st.integers(-1, 3), seed=st.integers(0, 99))
def test_max_pool2d(n, c, h, w, k, stride, pad, seed):
    x = _array((n, c, h, w), np.float64, seed)

    def ref():
        # PyTorch: kernel and stride positive, padding at most half the kernel, and a non-empty output
        if k < 1 or stride < 1 or pad < 0 or 2 * pad > k or h + 2 * pad < k or w + 2 * pad < k:
            raise ValueError("invalid pool")
        if c == 0 or h == 0 or w == 0:
            raise ValueError("empty spatial input")  # PyTorch refuses non-batch dims of size 0
        return _ref_max_pool(x, k, stride, pad)

    _check(lambda d: F.max_pool2d(gm.tensor(x, device=d), k, stride, pad), ref, rtol=0, atol=0)


@FUZZ
@given(shape=shapes, new=st.lists(st.integers(-2, 5), min_size=0, max_size=4).map(tuple), seed=st.integers(0, 99))
def test_reshape(shape, new, seed):
    a = _array(shape, np.float64, seed)

    def ref():
        if new.count(-1) > 1 or any(s < -1 for s in new):
            raise ValueError("invalid shape")
        return a.reshape(new)

    _check(lambda d: gm.tensor(a, device=d).reshape(new), ref, rtol=0, atol=0)
