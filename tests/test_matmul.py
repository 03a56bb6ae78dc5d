"""_C.matmul against NumPy: vector/matrix combinations, batched broadcast, transposed and strided operands,
zero-size dims, every dtype (float16/bfloat16 with a loose tolerance), meta, and the error paths.
Tested through gpumemnet._C directly so that the suite does not depend on the Python Tensor API."""
import ctypes

import numpy as np
import pytest

from gpumemnet import _C

F32, F64, F16, BF16, I64, BOOL = range(6)
DT_NAMES = {F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I64: "int64"}


def bf16_round(x):
    """Round float32 values to bfloat16 (nearest even), returned as float32: what from_numpy(dtype=bf16) stores."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32).reshape(np.shape(x))


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


def check(got, ref, atol=0.0, rtol=0.0, what=""):
    """|got - ref| <= atol + rtol*|ref| elementwise; on failure, the first mismatches with their index."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != expected {ref.shape}"
    if got.dtype == np.int64:
        bad = got != ref
    else:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        bad = ~(np.abs(g - r) <= atol + rtol * np.abs(r))
    if bad.any():
        idx = np.argwhere(bad)[:5] if bad.ndim else [()]
        lines = [f"  at {tuple(int(v) for v in i)}: got {got[tuple(i)]!r}, expected {ref[tuple(i)]!r}" for i in idx]
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} mismatch (atol={atol}, rtol={rtol})\n" + "\n".join(lines))


@pytest.mark.parametrize("dt", [F32, F64], ids=DT_NAMES.get)
def test_matmul_many_small_products_one_per_thread(dt):
    """A batch of products each too small for OpenBLAS's own threads (attention's heads) runs one product per
    OpenMP thread on single-threaded BLAS: against NumPy, with a broadcast (stride-0) and a transposed operand,
    and bit for bit what one thread gives (each product is the same call)."""
    a, b, c = rand((64, 20, 30), dt, 13), rand((30, 25), dt, 14), rand((64, 25, 30), dt, 15)
    old = _C.get_num_threads()
    got = {}
    try:
        for n in (1, 2, 3):
            _C.set_num_threads(n)
            run_case(stored(a, dt), stored(b, dt), make(a, dt), make(b, dt), dt, f"broadcast b, threads={n}")
            bt = make(c, dt)._transpose(1, 2)
            run_case(stored(a, dt), stored(c, dt).swapaxes(1, 2), make(a, dt), bt, dt, f"transposed b, threads={n}")
            got[n] = to_np(_C.matmul(make(a, dt), bt))
    finally:
        _C.set_num_threads(old)
    for n in (2, 3):
        np.testing.assert_array_equal(got[n].view(np.uint8), got[1].view(np.uint8))


def stored(x, dt):
    """The values a tensor of dtype dt built from x holds, in float64 (int64 stays int64) for the reference."""
    if dt == I64:
        return x.astype(np.int64)
    if dt == BF16:
        return bf16_round(x.astype(np.float32)).astype(np.float64)
    return x.astype({F32: np.float32, F64: np.float64, F16: np.float16}[dt]).astype(np.float64)


def make(x, dt):
    return _C.from_numpy(x.astype(np.float32) if dt == BF16 else x.astype(
        {F32: np.float32, F64: np.float64, F16: np.float16, I64: np.int64}[dt]), dtype=dt)


def tol(dt, K):
    """float32: rounding grows with the length K of each dot product; halves: one output rounding dominates."""
    s = max(1.0, np.sqrt(K))
    return {F64: (1e-12 * s, 1e-12), F32: (1e-5 * s, 1e-5), F16: (2e-3 * s, 2e-3), BF16: (1.6e-2 * s, 8e-3),
            I64: (0, 0)}[dt]


def rand(shape, dt, seed):
    rng = np.random.default_rng(seed)
    if dt == I64:
        return rng.integers(-20, 20, size=shape)
    return rng.standard_normal(shape)


def run_case(a_np, b_np, ta, tb, dt, what):
    """a_np/b_np: the operands' stored values (float64 or int64) in the geometry ta/tb have."""
    out = _C.matmul(ta, tb)
    ref = np.matmul(a_np, b_np)
    assert out._dtype == dt, what
    assert tuple(out.shape) == ref.shape, f"{what}: shape {tuple(out.shape)} != {ref.shape}"
    K = a_np.shape[-1]
    if dt in (F16, BF16):  # the output is rounded to the half type
        ref = bf16_round(ref.astype(np.float32)) if dt == BF16 else ref.astype(np.float16)
    atol, rtol = tol(dt, K)
    check(to_np(out), ref, atol, rtol, what)


SHAPES = [
    ((5,), (5,)),                # dot: 0-d result
    ((4, 5), (5,)),              # matrix @ vector
    ((5,), (5, 3)),              # vector @ matrix
    ((4, 5), (5, 3)),
    ((2, 1, 3, 4), (5, 4, 2)),   # batched with broadcast batch dims
    ((7, 3, 4), (4, 2)),         # a batch against one matrix (one folded gemm)
    ((4,), (2, 4, 3)),           # vector against a batch
    ((2, 3, 4), (4,)),           # a batch against a vector
    ((3, 1, 4), (1, 4, 6)),
    ((1, 1, 1), (1, 1)),
    ((2, 3, 37, 65), (65, 19)),  # large enough for the OpenMP/BLAS blocking paths
]


@pytest.mark.parametrize("dt", [F64, F32, F16, BF16, I64], ids=DT_NAMES.get)
@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_matmul_shapes(sa, sb, dt):
    a, b = rand(sa, dt, 1), rand(sb, dt, 2)
    run_case(stored(a, dt), stored(b, dt), make(a, dt), make(b, dt), dt, f"{DT_NAMES[dt]} {sa} @ {sb}")


# Operand views: (name, numpy view of the stored array, tensor view). All keep the values of the view.
VIEWS = [
    ("contiguous", lambda x: x, lambda t: t),
    ("transposed", lambda x: np.swapaxes(x, -1, -2), lambda t: t._transpose(-1, -2)),  # column-contiguous
    ("col-strided", lambda x: x[..., ::2], lambda t: t._slice(-1, None, None, 2)),      # rows strided: copy
    ("row-sliced", lambda x: x[..., 1:, :], lambda t: t._slice(-2, 1, None, 1)),        # ld > cols
    ("transposed+sliced", lambda x: np.swapaxes(x, -1, -2)[..., ::3, :],
     lambda t: t._transpose(-1, -2)._slice(-2, None, None, 3)),
    ("batch-permuted", lambda x: np.swapaxes(x, 0, 1), lambda t: t._transpose(0, 1)),
]


@pytest.mark.parametrize("dt", [F64, F32, F16, BF16, I64], ids=DT_NAMES.get)
@pytest.mark.parametrize("va", range(len(VIEWS)), ids=lambda i: "a:" + VIEWS[i][0])
@pytest.mark.parametrize("vb", range(len(VIEWS)), ids=lambda i: "b:" + VIEWS[i][0])
def test_matmul_views(va, vb, dt):
    """Operands made by views (transposes go to BLAS as flags; other layouts are copied into a temporary).
    The bases are (6, 6, 6) so that every view of both operands still multiplies."""
    base_a, base_b = rand((6, 6, 6), dt, 3), rand((6, 6, 6), dt, 4)
    na, fa, ta = VIEWS[va]
    nb, fb, tb = VIEWS[vb]
    a_np, b_np = fa(stored(base_a, dt)), fb(stored(base_b, dt))
    a_t, b_t = ta(make(base_a, dt)), tb(make(base_b, dt))
    K = min(a_np.shape[-1], b_np.shape[-2])  # trim to matching inner dims with one more slice
    a_np, b_np = a_np[..., :K], b_np[..., :K, :]
    a_t, b_t = a_t._slice(-1, 0, K, 1), b_t._slice(-2, 0, K, 1)
    run_case(a_np, b_np, a_t, b_t, dt, f"{DT_NAMES[dt]} a:{na} @ b:{nb}")


@pytest.mark.parametrize("dt", [F64, F32, F16, I64], ids=DT_NAMES.get)
def test_matmul_expanded_batch_and_vectors(dt):
    """Stride-0 operands: a batch made by expand (no copy), and a vector of one repeated element."""
    a, b = rand((1, 3, 4), dt, 5), rand((4, 2), dt, 6)
    a_t = make(a, dt)._expand((5, 3, 4))
    b_t = make(b, dt)._unsqueeze(0)._expand((5, 4, 2))
    run_case(np.broadcast_to(stored(a, dt), (5, 3, 4)), np.broadcast_to(stored(b, dt), (5, 4, 2)), a_t, b_t, dt,
             "expanded batches")
    v = rand((1,), dt, 7)
    v_t = make(v, dt)._expand((4,))
    run_case(stored(a, dt)[0], np.broadcast_to(stored(v, dt), (4,)), make(a, dt)._select(0, 0), v_t, dt,
             "matrix @ expanded vector")
    run_case(np.broadcast_to(stored(v, dt), (3,)), stored(a, dt)[0], make(v, dt)._expand((3,)),
             make(a, dt)._select(0, 0), dt, "expanded vector @ matrix")


@pytest.mark.parametrize("dt", [F64, F32, I64], ids=DT_NAMES.get)
def test_matmul_batch_against_one_matrix(dt):
    """(batch..., M, K) @ (K, N) runs as one gemm only when a's batch and rows lie at one row stride; these
    views must not be folded (permuted or strided batches, M = 1 rows, a broadcast batch in b)."""
    base, w = rand((4, 6, 5), dt, 8), rand((5, 3), dt, 9)
    A, W = stored(base, dt), stored(w, dt)
    cases = [
        ("contiguous", A, make(base, dt)),
        ("batch-permuted", A.swapaxes(0, 1), make(base, dt)._transpose(0, 1)),
        ("batch-strided", A[::2], make(base, dt)._slice(0, None, None, 2)),
        ("rows-strided", A[:, ::2], make(base, dt)._slice(1, None, None, 2)),
        ("one row", A[:, 2:3], make(base, dt)._slice(1, 2, 3, 1)),
        ("4-d", A.reshape(2, 2, 6, 5), make(base, dt)._view((2, 2, 6, 5))),
    ]
    for name, a_np, a_t in cases:
        run_case(a_np, W, a_t, make(w, dt), dt, f"{DT_NAMES[dt]} {name} @ matrix")
        run_case(a_np, np.broadcast_to(W, (a_np.shape[0], 5, 3)), a_t,
                 make(w, dt)._unsqueeze(0)._expand((a_np.shape[0], 5, 3)), dt, f"{DT_NAMES[dt]} {name} @ expanded")


@pytest.mark.parametrize("dt", [F64, F32, F16, BF16, I64], ids=DT_NAMES.get)
@pytest.mark.parametrize("sa,sb", [((3, 0), (0, 4)), ((0,), (0,)), ((2, 3, 0), (0, 5)), ((0, 4), (4, 3)),
                                   ((3, 4), (4, 0)), ((0, 3, 4), (4, 2)), ((2, 0, 4), (4,))], ids=str)
def test_matmul_zero_size(sa, sb, dt):
    """K = 0 is an empty sum: zeros. Other zero dims give empty results."""
    a, b = np.zeros(sa), np.zeros(sb)
    a_t, b_t = make(a, dt), make(b, dt)
    if dt != I64:  # poison the output's would-be memory: K = 0 must write zeros, not leave garbage
        _C.matmul(make(np.full(sa[:-1] + (max(sa[-1], 1),), np.nan), dt), make(np.full((max(sb[0], 1),) + sb[1:]
                  if len(sb) == 1 else sb[:-2] + (max(sb[-2], 1), sb[-1]), np.nan), dt))
    run_case(stored(a, dt), stored(b, dt), a_t, b_t, dt, f"{DT_NAMES[dt]} zero-size {sa} @ {sb}")


@pytest.mark.parametrize("nthreads", [1, 4])
@pytest.mark.parametrize("dt", [F32, F16, I64], ids=DT_NAMES.get)
def test_matmul_threads(dt, nthreads):
    """Sizes above the threading grain, with our OpenMP loops (int64 rows, half conversions) on and off."""
    a, b = rand((3, 70, 90), dt, 10), rand((90, 50), dt, 11)
    old = _C.get_num_threads()
    _C.set_num_threads(nthreads)
    try:
        run_case(stored(a, dt), stored(b, dt), make(a, dt), make(b, dt), dt, f"{DT_NAMES[dt]} threads={nthreads}")
        c = rand((50, 70), dt, 12)
        run_case(stored(a, dt).swapaxes(1, 2), stored(c, dt).T, make(a, dt)._transpose(1, 2),
                 make(c, dt)._transpose(0, 1), dt, f"{DT_NAMES[dt]} transposed threads={nthreads}")
    finally:
        _C.set_num_threads(old)


def test_int64_exact_and_wrapping():
    a = np.array([[2**40, 3], [-(2**40), 1]], np.int64)
    b = np.array([[2**20, 1], [5, -7]], np.int64)
    check(to_np(_C.matmul(_C.from_numpy(a), _C.from_numpy(b))), a @ b, 0, 0, "int64 beyond 2^53")
    big = np.array([[2**62, 2**62]], np.int64)
    one = np.array([[2], [2]], np.int64)
    with np.errstate(over="ignore"):
        ref = big @ one  # wraps like PyTorch's int64
    check(to_np(_C.matmul(_C.from_numpy(big), _C.from_numpy(one))), ref, 0, 0, "int64 wrap")


def test_float16_accumulates_in_float32():
    """2048 + 1 + 1 ... : a float16 accumulator would stall at 2048; sgemm accumulates in float32."""
    a = np.ones((1, 4096), np.float16)
    b = np.ones((4096, 1), np.float16)
    assert to_np(_C.matmul(_C.from_numpy(a), _C.from_numpy(b)))[0, 0] == 4096.0


def test_result_does_not_alias_inputs():
    a = _C.from_numpy(np.eye(3, dtype=np.float32))
    out = _C.matmul(a, a)
    assert out._storage_id != a._storage_id and out._is_contiguous()


# ---- meta: shapes and allocations, no data ----------------------------------------------------------------
def test_meta_shapes():
    a = _C.empty((2, 1, 3, 4), F32, "meta")
    b = _C.empty((5, 4, 2), F32, "meta")
    before = _C.memory_allocated("meta")
    out = _C.matmul(a, b)
    assert out._device == "meta" and tuple(out.shape) == (2, 5, 3, 2)
    assert _C.memory_allocated("meta") - before >= 2 * 5 * 3 * 2 * 4
    assert tuple(_C.matmul(_C.empty((4,), F16, "meta"), _C.empty((4,), F16, "meta")).shape) == ()
    # a layout BLAS cannot read: the temporary is allocated (and freed) on meta too, with no data touched
    c = _C.empty((6, 8), F32, "meta")._slice(1, None, None, 2)
    assert tuple(_C.matmul(c, _C.empty((4, 3), F32, "meta")).shape) == (6, 3)
    with pytest.raises(ValueError, match="inner dimensions 4 and 3 differ"):
        _C.matmul(a, _C.empty((3, 2), F32, "meta"))


# ---- errors ---------------------------------------------------------------------------------------------------
def f32(*shape):
    return _C.from_numpy(np.zeros(shape, np.float32))


def test_error_inner_dimensions():
    with pytest.raises(ValueError) as e:
        _C.matmul(f32(2, 3), f32(4, 5))
    assert str(e.value) == "matmul: shapes (2, 3) and (4, 5): inner dimensions 3 and 4 differ"
    with pytest.raises(ValueError, match=r"shapes \(3,\) and \(4,\): inner dimensions 3 and 4 differ"):
        _C.matmul(f32(3), f32(4))
    with pytest.raises(ValueError, match=r"\(2, 3, 4\) and \(5,\)"):
        _C.matmul(f32(2, 3, 4), f32(5))


def test_error_batch_broadcast():
    with pytest.raises(ValueError, match=r"batch dimensions \(2,\) and \(3,\) cannot be broadcast"):
        _C.matmul(f32(2, 3, 4), f32(3, 4, 5))


def test_error_dtypes():
    with pytest.raises(TypeError, match="float32 and float64"):
        _C.matmul(f32(2, 2), _C.from_numpy(np.zeros((2, 2))))
    with pytest.raises(TypeError, match="int64 and float32"):
        _C.matmul(_C.from_numpy(np.zeros((2, 2), np.int64)), f32(2, 2))
    b = _C.from_numpy(np.zeros((2, 2), np.bool_))
    with pytest.raises(TypeError, match="bool"):
        _C.matmul(b, b)


def test_error_zero_dim_and_non_tensor():
    with pytest.raises(ValueError, match=r"at least 1 dimension.*\(\) and \(3,\)"):
        _C.matmul(f32(), f32(3))
    with pytest.raises(ValueError, match=r"\(3,\) and \(\)"):
        _C.matmul(f32(3), f32())
    with pytest.raises(TypeError, match="expected two Tensors"):
        _C.matmul(f32(3), np.zeros(3))


def test_error_mixed_devices():
    with pytest.raises(RuntimeError, match="same device.*cpu.*meta"):
        _C.matmul(f32(2, 3), _C.empty((3, 2), F32, "meta"))
