"""Reductions (_C.reduce, max_dim/min_dim, argmax/argmin, var) against NumPy: every dim combination, keepdim,
negative dims, non-contiguous views, all dtypes NumPy can check, NaN, empty tensors, meta, and every error path.
Tested through gpumemnet._C directly so that the suite does not depend on the Python Tensor API."""
import ctypes
import itertools

import numpy as np
import pytest

from gpumemnet import _C

# NumPy's references warn about exactly the cases tested on purpose (empty slices, ddof >= n).
pytestmark = [pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")]

F32, F64, F16, BF16, I64, BOOL = range(6)
SUM, MEAN, AMAX, AMIN, PROD = range(5)
DT_NAMES = {F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I64: "int64", BOOL: "bool"}
OP_NAMES = {SUM: "sum", MEAN: "mean", AMAX: "amax", AMIN: "amin", PROD: "prod"}
ALL_DT = [F32, F64, F16, BF16, I64, BOOL]
FLOAT_DT = [F32, F64, F16, BF16]


# ---- helpers ------------------------------------------------------------------------------------------------
def bf16_round(x):
    """Round float32 values to bfloat16 (nearest even), returned as float32: what from_numpy(dtype=bf16) stores."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def as_stored(x, dt):
    """The values a tensor of dtype dt made from x holds, as a NumPy array NumPy can compute with."""
    if dt == BF16:
        return bf16_round(np.asarray(x, np.float32))
    return np.asarray(x).astype({F32: np.float32, F64: np.float64, F16: np.float16, I64: np.int64,
                                 BOOL: np.bool_}[dt])


def to_np(t):
    """Tensor -> ndarray (a copy). NumPy has no bfloat16: read the bits of our (contiguous) output."""
    if t._dtype != BF16:
        return np.array(t.numpy(), copy=True)
    assert t._is_contiguous()
    n = t.numel()
    if n == 0:
        return np.zeros(t.shape, np.float32)
    bits = np.frombuffer((ctypes.c_uint16 * n).from_address(t._data_ptr), np.uint16).copy()
    return (bits.astype(np.uint32) << 16).view(np.float32).reshape(t.shape)


def make(x, dt):
    return _C.from_numpy(np.asarray(x, np.float32) if dt == BF16 else as_stored(x, dt), dtype=dt)


def check(got, ref, atol=0.0, rtol=0.0, what=""):
    """llm.c-style validation: |got - ref| <= atol + rtol*|ref|, NaN where ref is NaN; prints the first
    mismatches with their index."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != expected {ref.shape}"
    g = got.astype(np.float64) if got.dtype != np.bool_ else got.astype(np.int64)
    r = ref.astype(np.float64) if ref.dtype != np.bool_ else ref.astype(np.int64)
    if got.dtype == np.int64 and ref.dtype == np.int64:
        bad = got != ref
    else:
        with np.errstate(invalid="ignore"):
            same_inf = np.isinf(r) & (g == r)
            bad = ~((np.abs(g - r) <= atol + rtol * np.abs(r)) | (np.isnan(g) & np.isnan(r)) | same_inf)
    if bad.any():
        idx = np.argwhere(bad)[:5]
        lines = [f"  at {tuple(int(v) for v in i)}: got {got[tuple(i)]!r}, expected {ref[tuple(i)]!r}" for i in idx]
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} mismatch (atol={atol}, rtol={rtol})\n" + "\n".join(lines))


def all_dim_sets(ndim):
    """None, and every subset of the dims (including the empty one, which reduces nothing)."""
    yield None
    for k in range(ndim + 1):
        yield from itertools.combinations(range(ndim), k)


def negate(dims, ndim):
    return None if dims is None else tuple(d - ndim for d in dims)


def np_axis(dims):
    return None if dims is None else tuple(dims)


def data(shape, dt, seed=0, small=False):
    rng = np.random.default_rng(seed)
    if dt == BOOL:
        return rng.random(shape) < 0.5
    if dt == I64:
        return rng.integers(-3 if small else -50, 4 if small else 50, size=shape)
    x = rng.standard_normal(shape)
    if small:  # prod: keep the magnitude near 1 so no dtype overflows
        x = np.sign(x) * (0.75 + 0.5 * rng.random(shape))
    return x


# Views applied identically to a NumPy array and to a tensor: non-contiguous inputs without copies.
VIEWS = {
    "contiguous": (lambda a: a, lambda t: t),
    "transposed": (lambda a: a.swapaxes(0, -1), lambda t: t._transpose(0, -1)),
    "sliced": (lambda a: a[:, ::2], lambda t: t._slice(1, None, None, 2)),
    "permuted+sliced": (lambda a: a.transpose(2, 0, 1)[1:], lambda t: t._permute((2, 0, 1))._slice(0, 1, None, 1)),
    "expanded": (lambda a: np.broadcast_to(a[:, :1], (a.shape[0], 3) + a.shape[2:]),
                 lambda t: t._slice(1, 0, 1, 1)._expand((t.shape[0], 3) + tuple(t.shape[2:]))),
}


def tolerances(dt, op):
    """Our kernels accumulate in double and round once, so the error is about one rounding of the output."""
    if dt in (I64, BOOL) and op != MEAN:
        return 0.0, 0.0
    return {F32: (1e-6, 1e-6), F64: (1e-12, 1e-12), F16: (1e-3, 2e-3), BF16: (8e-3, 8e-3),
            I64: (1e-6, 1e-6), BOOL: (1e-6, 1e-6)}[dt]


def reference(op, x, dims, keepdim, out_np_dtype):
    """NumPy in float64 (int64 exactly), rounded to the output dtype like our single final rounding."""
    axis = np_axis(dims)
    exact = x.dtype in (np.int64, np.bool_) and out_np_dtype == np.int64
    xx = x.astype(np.int64) if exact else x.astype(np.float64)
    f = {SUM: np.sum, MEAN: np.mean, AMAX: np.max, AMIN: np.min, PROD: np.prod}[op]
    with np.errstate(invalid="ignore", divide="ignore"):
        r = f(xx, axis=axis, keepdims=keepdim)
    return np.asarray(r)


def out_dtype(op, dt):
    if op in (SUM, PROD) and dt in (I64, BOOL):
        return I64
    return dt


def np_dtype(dt):
    return {F32: np.float32, F64: np.float64, F16: np.float16, BF16: np.float32, I64: np.int64, BOOL: np.bool_}[dt]


def round_to(ref, dt):
    if dt == BF16:
        return bf16_round(ref.astype(np.float32))
    if dt == BOOL:
        return ref.astype(np.bool_)
    return ref.astype(np_dtype(dt))


# ---- reduce: values over every dim set ---------------------------------------------------------------------
# mean of integers is an error, tested on its own below: those pairs are not generated
OP_DT = [(op, dt) for op in (SUM, MEAN, AMAX, AMIN, PROD) for dt in ALL_DT if not (op == MEAN and dt in (I64, BOOL))]


@pytest.mark.parametrize("op,dt", OP_DT, ids=[f"{OP_NAMES[o]}-{DT_NAMES[d]}" for o, d in OP_DT])
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 5), (2, 1, 3, 4)], ids=str)
def test_reduce_all_dim_sets(op, dt, shape):
    x = as_stored(data(shape, dt, seed=len(shape), small=op == PROD), dt)
    t = make(x, dt)
    odt = out_dtype(op, dt)
    atol, rtol = tolerances(dt, op)
    nd = len(shape)
    for dims in all_dim_sets(nd):
        for keepdim in (False, True):
            ref = round_to(reference(op, x, dims, keepdim, np_dtype(odt)), odt)
            for dd in ([dims, negate(dims, nd)] if dims else [dims]):
                out = _C.reduce(op, t, dd, keepdim)
                assert out._dtype == odt
                check(to_np(out), ref, atol, rtol, f"{OP_NAMES[op]} {DT_NAMES[dt]} {shape} dims={dd} keepdim={keepdim}")


@pytest.mark.parametrize("view", list(VIEWS), ids=str)
@pytest.mark.parametrize("op,dt", [(o, d) for o, d in OP_DT if d != BOOL],
                         ids=[f"{OP_NAMES[o]}-{DT_NAMES[d]}" for o, d in OP_DT if d != BOOL])
def test_reduce_non_contiguous(op, dt, view):
    base = as_stored(data((4, 6, 5), dt, seed=3, small=op == PROD), dt)
    npv, tv = VIEWS[view]
    x = npv(base)
    t = tv(make(base, dt))
    assert tuple(t.shape) == x.shape
    odt = out_dtype(op, dt)
    atol, rtol = tolerances(dt, op)
    for dims in all_dim_sets(3):
        for keepdim in (False, True):
            ref = round_to(reference(op, x, dims, keepdim, np_dtype(odt)), odt)
            check(to_np(_C.reduce(op, t, dims, keepdim)), ref, atol, rtol,
                  f"{OP_NAMES[op]} {DT_NAMES[dt]} {view} dims={dims} keepdim={keepdim}")


@pytest.mark.parametrize("nthreads", [1, 4])
def test_reduce_large_parallel_paths(nthreads):
    """Big enough that the OpenMP path runs; both a long inner reduction and many outputs."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 517)).astype(np.float32)
    t = _C.from_numpy(x)
    old = _C.get_num_threads()
    _C.set_num_threads(nthreads)
    try:
        _check_large(x, t)
        v, i = _C.max_dim(t._transpose(0, 1), 1, False)
        check(to_np(i), x.T.argmax(1), 0, 0, "max_dim indices, many outputs")
        check(to_np(_C.argmin(t, 0)), x.argmin(0), 0, 0, "argmin dim 0")
    finally:
        _C.set_num_threads(old)


def _check_large(x, t):
    for dims in [(0,), (1,), None, (0, 1)]:
        check(to_np(_C.reduce(SUM, t, dims, False)), x.astype(np.float64).sum(axis=np_axis(dims)), 1e-4, 1e-6,
              f"sum dims={dims}")
        check(to_np(_C.reduce(AMAX, t._transpose(0, 1), dims, False)), x.T.max(axis=np_axis(dims)), 0, 0,
              f"amax transposed dims={dims}")
        check(to_np(_C.var(t, dims, 1.0, False)), x.astype(np.float64).var(axis=np_axis(dims), ddof=1), 1e-6, 1e-5,
              f"var dims={dims}")


def test_sum_dtype_argument_and_promotion():
    x = np.arange(12).reshape(3, 4)
    t = _C.from_numpy(x)
    out = _C.reduce(SUM, t, (1,), False, dtype="float64")
    assert out._dtype == F64
    check(to_np(out), x.sum(1).astype(np.float64), 0, 0, "int64 sum into float64")
    out = _C.reduce(MEAN, t, None, False, dtype=F32)
    assert out._dtype == F32
    check(to_np(out), np.float32(x.mean()), 1e-6, 1e-6, "int64 mean with dtype=float32")
    b = _C.from_numpy(x % 3 == 0)
    out = _C.reduce(SUM, b, (0,), False)
    assert out._dtype == I64
    check(to_np(out), (x % 3 == 0).sum(0), 0, 0, "bool sum counts into int64")
    f = _C.from_numpy(x.astype(np.float32))
    out = _C.reduce(SUM, f, None, False, dtype="float64")
    assert out._dtype == F64 and to_np(out) == 66.0


def test_int64_sum_is_exact_beyond_2_53():
    x = np.array([2**60, 1, 1, -(2**60) + 5], np.int64)
    check(to_np(_C.reduce(SUM, _C.from_numpy(x), None, False)), np.int64(x.sum()), 0, 0, "exact int64 sum")
    check(to_np(_C.reduce(AMAX, _C.from_numpy(x + 0), None, False)), np.int64(2**60), 0, 0, "exact int64 amax")


def test_float16_sum_accumulates_wide():
    """4096 ones in float16: a float16 accumulator would stop at 2048."""
    t = _C.from_numpy(np.ones(4096, np.float16))
    assert to_np(_C.reduce(SUM, t, None, False)) == 4096.0


# ---- NaN ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOAT_DT, ids=DT_NAMES.get)
def test_nan_propagates(dt):
    x = np.array([[1.0, np.nan, 3.0, 7.0], [4.0, 5.0, -2.0, 6.0], [np.nan, 0.0, np.nan, 1.0]])
    t = make(x, dt)
    xs = as_stored(x, dt).astype(np.float64)
    for op, f in [(SUM, np.sum), (MEAN, np.mean), (AMAX, np.max), (AMIN, np.min), (PROD, np.prod)]:
        for dims in [None, (0,), (1,)]:
            check(to_np(_C.reduce(op, t, dims, False)).astype(np.float64), f(xs, axis=np_axis(dims)), 1e-2, 1e-2,
                  f"{OP_NAMES[op]} with NaN dims={dims}")
    for dim in (0, 1):
        v, i = _C.max_dim(t, dim, False)
        check(to_np(i), np.argmax(xs, axis=dim), 0, 0, f"max_dim indices with NaN dim={dim}")  # first NaN wins
        check(to_np(v).astype(np.float64), np.max(xs, axis=dim), 0, 0, f"max_dim values with NaN dim={dim}")
        v, i = _C.min_dim(t, dim, False)
        check(to_np(i), np.argmin(xs, axis=dim), 0, 0, f"min_dim indices with NaN dim={dim}")
        check(to_np(v).astype(np.float64), np.min(xs, axis=dim), 0, 0, f"min_dim values with NaN dim={dim}")
    assert to_np(_C.argmax(t)) == 1 and to_np(_C.argmin(t)) == 1
    check(to_np(_C.var(t, (1,), 1.0, False)).astype(np.float64), np.var(xs, axis=1, ddof=1), 1e-2, 1e-2, "var NaN")


def test_infinities():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0]], np.float32)
    t = _C.from_numpy(x)
    check(to_np(_C.reduce(AMAX, t, (1,), False)), x.max(1), 0, 0, "amax of all -inf")
    v, i = _C.max_dim(t, 1, False)
    check(to_np(i), np.array([0, 0]), 0, 0, "max_dim first index among equal -inf")
    v, i = _C.min_dim(t, 0, False)
    check(to_np(i), np.array([0, 0]), 0, 0, "min_dim")


# ---- max_dim / min_dim / argmax / argmin ------------------------------------------------------------------
@pytest.mark.parametrize("dt", ALL_DT, ids=DT_NAMES.get)
@pytest.mark.parametrize("view", list(VIEWS), ids=str)
def test_max_min_dim(dt, view):
    base = as_stored(data((4, 6, 5), dt, seed=11, small=True), dt)  # small ints: many ties, first index matters
    npv, tv = VIEWS[view]
    x = npv(base)
    t = tv(make(base, dt))
    for dim in range(-3, 3):
        for keepdim in (False, True):
            for fn, npval, nparg in [(_C.max_dim, np.max, np.argmax), (_C.min_dim, np.min, np.argmin)]:
                v, i = fn(t, dim, keepdim)
                assert v._dtype == dt and i._dtype == I64
                rv = npval(x, axis=dim, keepdims=keepdim)
                ri = nparg(x, axis=dim, keepdims=keepdim) if keepdim else nparg(x, axis=dim)
                what = f"{fn.__name__} {DT_NAMES[dt]} {view} dim={dim} keepdim={keepdim}"
                check(to_np(v), rv, 0, 0, what + " values")
                check(to_np(i), ri, 0, 0, what + " indices")


@pytest.mark.parametrize("dt", ALL_DT, ids=DT_NAMES.get)
def test_argmax_argmin(dt):
    base = as_stored(data((3, 4, 5), dt, seed=5, small=True), dt)
    x = base.transpose(1, 0, 2)
    t = make(base, dt)._transpose(0, 1)
    for fn, ref in [(_C.argmax, np.argmax), (_C.argmin, np.argmin)]:
        check(to_np(fn(t)), np.asarray(ref(x)), 0, 0, f"{fn.__name__} flat")
        out = fn(t, None, True)
        assert tuple(out.shape) == (1, 1, 1)
        check(to_np(out).reshape(()), np.asarray(ref(x)), 0, 0, f"{fn.__name__} flat keepdim")
        for dim in (0, 1, 2, -1):
            check(to_np(fn(t, dim)), ref(x, axis=dim), 0, 0, f"{fn.__name__} dim={dim}")
            check(to_np(fn(t, dim=dim, keepdim=True)), ref(x, axis=dim, keepdims=True), 0, 0,
                  f"{fn.__name__} dim={dim} keepdim")


def test_zero_dim_tensor():
    t = _C.from_numpy(np.array(3.5, np.float32))
    for dims in [None, (0,), (-1,), ()]:
        assert to_np(_C.reduce(SUM, t, dims, False)) == 3.5
    v, i = _C.max_dim(t, 0, False)
    assert tuple(v.shape) == () and to_np(v) == 3.5 and to_np(i) == 0
    assert to_np(_C.argmin(t)) == 0


# ---- var ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOAT_DT, ids=DT_NAMES.get)
@pytest.mark.parametrize("view", ["contiguous", "transposed", "sliced", "expanded"])
def test_var(dt, view):
    base = as_stored(data((4, 6, 5), dt, seed=9) * 3 + 10, dt)  # an offset mean: two-pass matters
    npv, tv = VIEWS[view]
    x = npv(base).astype(np.float64)
    t = tv(make(base, dt))
    atol, rtol = {F32: (1e-5, 1e-5), F64: (1e-12, 1e-12), F16: (2e-2, 2e-3), BF16: (5e-2, 1e-2)}[dt]
    for dims in all_dim_sets(3):
        for correction in (0.0, 1.0, 2.5):
            for keepdim in (False, True):
                with np.errstate(invalid="ignore", divide="ignore"):
                    ref = np.var(x, axis=np_axis(dims), ddof=correction, keepdims=keepdim)
                ref = round_to(np.asarray(ref), dt)
                out = _C.var(t, dims, correction, keepdim)
                assert out._dtype == dt
                check(to_np(out), ref, atol, rtol, f"var {DT_NAMES[dt]} {view} dims={dims} corr={correction}")


def test_var_cancellation():
    """One-pass E[x^2]-E[x]^2 returns garbage here; two passes do not."""
    x = (1e8 + np.array([1.0, 2.0, 3.0, 4.0])).astype(np.float64)
    check(to_np(_C.var(_C.from_numpy(x), None, 1.0, False)), np.var(x, ddof=1), 1e-9, 1e-9, "var offset")


# ---- empty tensors -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dims", [((0,), None), ((0, 3), (0,)), ((0, 3), (1,)), ((3, 0, 2), (1,)),
                                        ((3, 0, 2), (0, 2)), ((3, 0, 2), None)], ids=str)
def test_empty_sum_mean_prod_var(shape, dims):
    x = np.zeros(shape, np.float32)
    t = _C.from_numpy(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        for op, f in [(SUM, np.sum), (MEAN, np.mean), (PROD, np.prod)]:
            for keepdim in (False, True):
                check(to_np(_C.reduce(op, t, dims, keepdim)), np.asarray(f(x, axis=np_axis(dims), keepdims=keepdim)),
                      0, 0, f"{OP_NAMES[op]} empty {shape} dims={dims}")
        check(to_np(_C.var(t, dims, 1.0, False)), np.asarray(np.var(x, axis=np_axis(dims), ddof=1)), 0, 0,
              "var empty")
    ti = _C.from_numpy(np.zeros(shape, np.int64))
    check(to_np(_C.reduce(SUM, ti, dims, False)), np.asarray(np.zeros(shape, np.int64).sum(axis=np_axis(dims))), 0, 0,
          "int sum empty")


def test_extremes_of_empty_extent_raise_with_shape():
    t = _C.from_numpy(np.zeros((0, 3), np.float32))
    for call in [lambda: _C.reduce(AMAX, t, (0,), False), lambda: _C.reduce(AMIN, t, None, False),
                 lambda: _C.max_dim(t, 0, False), lambda: _C.min_dim(t, 0, False), lambda: _C.argmax(t),
                 lambda: _C.argmin(t, 0)]:
        with pytest.raises(ValueError, match=r"\(0, 3\)"):
            call()
    # the reduced extent is not empty here: an empty result, no error (as in PyTorch)
    assert tuple(_C.reduce(AMAX, t, (1,), False).shape) == (0,)
    v, i = _C.max_dim(t, 1, True)
    assert tuple(v.shape) == (0, 1) and tuple(i.shape) == (0, 1)


# ---- errors ---------------------------------------------------------------------------------------------------
def test_error_dim_out_of_range():
    t = _C.from_numpy(np.zeros((2, 3), np.float32))
    for call in [lambda: _C.reduce(SUM, t, (2,), False), lambda: _C.reduce(SUM, t, (0, -3), False),
                 lambda: _C.max_dim(t, 5, False), lambda: _C.argmin(t, -3), lambda: _C.var(t, (7,), 1.0, False)]:
        with pytest.raises(IndexError, match=r"dim -?\d+ is out of range for a tensor with 2 dimensions"):
            call()


def test_error_duplicate_dims():
    t = _C.from_numpy(np.zeros((2, 3, 4), np.float32))
    for dims in [(1, 1), (0, -3), (2, 0, -1)]:
        with pytest.raises(ValueError, match="more than once"):
            _C.reduce(SUM, t, dims, False)
    with pytest.raises(ValueError, match="more than once"):
        _C.var(t, (1, -2), 1.0, False)


def test_error_mean_of_integers_asks_for_float():
    for x in [np.arange(4), np.arange(4) > 1]:
        with pytest.raises(TypeError, match="float"):
            _C.reduce(MEAN, _C.from_numpy(x), None, False)
    with pytest.raises(TypeError, match="float"):
        _C.reduce(MEAN, _C.from_numpy(np.arange(4)), None, False, dtype="int64")


def test_error_bad_arguments():
    t = _C.from_numpy(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="unknown op 9"):
        _C.reduce(9, t, None, False)
    with pytest.raises(TypeError, match="must be a Tensor"):
        _C.reduce(SUM, np.zeros(3), None, False)
    with pytest.raises(TypeError, match="dims"):
        _C.reduce(SUM, t, "0", False)
    with pytest.raises(TypeError, match="dims must be ints"):
        _C.reduce(SUM, t, (0.5,), False)
    with pytest.raises(TypeError, match="int64"):
        _C.reduce(SUM, t, None, False, dtype="int64")  # float into int: lossy, refused
    with pytest.raises(TypeError, match="bool"):
        _C.reduce(SUM, t, None, False, dtype="bool")
    with pytest.raises(TypeError, match="dtype"):
        _C.reduce(AMAX, t, None, False, dtype="float64")
    with pytest.raises(TypeError, match="unknown dtype"):
        _C.reduce(SUM, t, None, False, dtype="float8")
    with pytest.raises(TypeError, match="int64"):
        _C.var(_C.from_numpy(np.arange(3)), None, 1.0, False)
    with pytest.raises(ValueError, match="correction"):
        _C.var(t, None, -1.0, False)
    with pytest.raises(TypeError, match="dim must be an int"):
        _C.max_dim(t, None, False)
    with pytest.raises(TypeError, match="dim must be None or an int"):
        _C.argmax(t, (0,))


# ---- meta: shapes and allocations, no data ----------------------------------------------------------------
def test_meta_shapes_and_allocation():
    t = _C.empty((4, 5, 6), F32, "meta")
    before = _C.memory_allocated("meta")
    out = _C.reduce(SUM, t, (0, 2), True)
    assert out._device == "meta" and tuple(out.shape) == (1, 5, 1) and out._dtype == F32
    assert _C.memory_allocated("meta") > before
    v, i = _C.max_dim(t, -1, False)
    assert tuple(v.shape) == (4, 5) and i._dtype == I64 and i._device == "meta"
    assert tuple(_C.argmax(t).shape) == ()
    assert tuple(_C.var(t, (1,), 1.0, False).shape) == (4, 6)
    ti = _C.empty((3,), I64, "meta")
    assert _C.reduce(SUM, ti, None, False)._dtype == I64
    with pytest.raises(TypeError):
        _C.reduce(MEAN, ti, None, False)
    with pytest.raises(ValueError, match=r"\(0, 2\)"):
        _C.reduce(AMAX, _C.empty((0, 2), F32, "meta"), None, False)
