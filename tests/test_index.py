"""Indexing ops (csrc/ops_index.c, kernels/cpu/index.c) against NumPy: index ~ np.take, index_put_ ~ assignment
and np.add.at, nonzero_flat ~ np.flatnonzero, cat ~ np.concatenate; meta shapes; every error path.
Goes through gpumemnet._C so it does not depend on the Python API being there."""
import numpy as np
import pytest

from gpumemnet import _C

F32, F64, F16, BF16, I64, BOOL = range(6)
ALL = [F32, F64, F16, BF16, I64, BOOL]
NP = {F32: np.float32, F64: np.float64, F16: np.float16, I64: np.int64, BOOL: np.bool_}
rng = np.random.default_rng(0)


def T(a, dtype=None, device="cpu"):
    return _C.from_numpy(np.asarray(a), dtype=dtype, device=device)


def N(t):
    """NumPy copy; bfloat16 (no NumPy type) comes back as float32 values."""
    if t._dtype == BF16:
        f = _C.empty(t.shape, F32, "cpu")
        _C.copy_(f, t)
        t = f
    return np.array(t.numpy())


def bf16_round(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


def sample(shape, dtype):
    """Random values exactly representable in dtype, as (numpy array in the closest NumPy dtype, tensor)."""
    if dtype == BOOL:
        a = rng.random(shape) < 0.5
    elif dtype == I64:
        a = rng.integers(-1000, 1000, shape)
    else:
        a = rng.integers(-64, 64, shape) / 4.0  # small multiples of 1/4: exact in every float dtype
        if dtype != BF16:
            a = a.astype(NP[dtype])
        else:
            a = a.astype(np.float32)
    return a, T(a, dtype)


def strided(t):
    """A view with t's values and reversed strides (non-contiguous unless the shape is trivial)."""
    if t.ndim < 2:
        return t
    c = _C.empty(tuple(reversed(t.shape)), t._dtype, "cpu")
    perm = tuple(reversed(range(t.ndim)))
    v = c._permute(perm)
    _C.copy_(v, t)
    return v


def take_ref(a, dim, idx):
    return np.take(a, idx, axis=dim)


# ---- index --------------------------------------------------------------------------------------------------

CASES = [((5,), 0, (3,)), ((5,), -1, ()), ((4, 6), 0, (2, 3)), ((4, 6), 1, (7,)), ((3, 4, 5), 1, (2, 2)),
         ((3, 4, 5), 2, (6,)), ((3, 4, 5), -3, (1, 2, 1)), ((2, 3, 4, 5), 2, (0,)), ((2, 0, 3), 2, (4,))]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,dim,ishape", CASES)
def test_index_matches_take(dtype, shape, dim, ishape):
    a, ta = sample(shape, dtype)
    size = shape[dim]
    idx = rng.integers(-size, size, ishape) if size else np.zeros(ishape, np.int64)
    if size == 0 and np.prod(ishape) > 0:
        pytest.skip("nothing to index in an empty dim")
    ref = take_ref(a, dim, idx)
    for src in (ta, strided(ta)):
        out = _C.index(src, dim, T(idx))
        assert out.shape == ref.shape and out._dtype == dtype and out._is_contiguous()
        np.testing.assert_array_equal(N(out), ref)


def test_index_with_non_contiguous_index_and_slices():
    a, ta = sample((6, 8), F32)
    idx = rng.integers(-8, 8, (4, 5))
    tidx = strided(T(idx))
    np.testing.assert_array_equal(N(_C.index(ta, 1, tidx)), take_ref(a, 1, idx))
    sl = ta._slice(1, 1, None, 2)  # columns 1, 3, 5, 7
    np.testing.assert_array_equal(N(_C.index(sl, 1, T([3, 0, -1]))), a[:, 1::2][:, [3, 0, -1]])


def test_index_expanded_input_and_zero_d_input():
    ta = T(np.array([1.0, 2.0, 3.0], np.float32))._expand((4, 3))
    np.testing.assert_array_equal(N(_C.index(ta, 0, T([3, 0]))), np.ones((2, 1)) * [1, 2, 3])
    s = T(np.array(7.5))
    np.testing.assert_array_equal(N(_C.index(s, 0, T([0, -1, 0]))), [7.5, 7.5, 7.5])
    assert _C.index(s, 0, T(np.array(0))).shape == ()


def test_index_large_parallel():
    a, ta = sample((1000, 64), F32)
    idx = rng.integers(0, 1000, 20000)
    n = _C.get_num_threads()
    try:
        for threads in (1, 4):
            _C.set_num_threads(threads)
            np.testing.assert_array_equal(N(_C.index(ta, 0, T(idx))), a[idx])
            np.testing.assert_array_equal(N(_C.index(ta, 1, T(idx % 64))), a[:, idx % 64])
    finally:
        _C.set_num_threads(n)


# ---- index_put_ ----------------------------------------------------------------------------------------------

def put_ref(a, dim, idx, values, accumulate):
    r = a.copy()
    moved = np.moveaxis(r, dim, 0)  # a view: writes land in r
    ishape = a.shape[:dim] + np.shape(idx) + a.shape[dim + 1:]
    v = np.broadcast_to(values, ishape).reshape(a.shape[:dim] + (-1,) + a.shape[dim + 1:])
    v = np.moveaxis(v, dim, 0)
    flat = np.asarray(idx).reshape(-1)
    if accumulate:
        if a.dtype == np.bool_:
            for j, k in enumerate(flat):
                moved[k] |= v[j]
        else:
            np.add.at(moved, flat, v)
    else:
        for j, k in enumerate(flat):  # in order: the last duplicate wins
            moved[k] = v[j]
    return r


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,dim,ishape", [c for c in CASES if 0 not in c[0]])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_numpy(dtype, shape, dim, ishape, accumulate):
    a, ta = sample(shape, dtype)
    size = shape[dim]
    idx = rng.integers(-size, size, ishape)  # duplicates likely
    vshape = shape[:dim % len(shape)] + ishape + shape[dim % len(shape) + 1:]
    v, tv = sample(vshape, dtype)
    ref = put_ref(a, dim % len(shape), idx, v, accumulate)
    for dst in (ta, strided(ta)):
        dst_before = N(dst)
        assert _C.index_put_(dst, dim, T(idx), tv, accumulate) is dst
        np.testing.assert_array_equal(N(dst), ref)
        _C.copy_(dst, T(dst_before, dtype))


def test_index_put_accumulate_many_duplicates_is_exact_and_thread_independent():
    # the backward of an embedding lookup: many rows hit the same destination
    idx = rng.integers(0, 50, 30000)
    g, tg = sample((30000, 16), F32)
    ref = np.zeros((50, 16), np.float64)
    np.add.at(ref, idx, g)
    n = _C.get_num_threads()
    try:
        results = []
        for threads in (1, 3):
            _C.set_num_threads(threads)
            acc = T(np.zeros((50, 16), np.float32))
            _C.index_put_(acc, 0, T(idx), tg, True)
            results.append(N(acc))
    finally:
        _C.set_num_threads(n)
    np.testing.assert_array_equal(results[0], results[1])  # same summation order whatever the threads
    np.testing.assert_allclose(results[0], ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_index_put_accumulate_half_rounds_each_add_from_float(dtype):
    # each duplicate adds in float and rounds once to the dtype, in index order (as PyTorch's CPU kernel does)
    rnd = (lambda x: np.float32(np.float16(x))) if dtype == F16 else (lambda x: bf16_round(x)[()])
    vals = rng.integers(1, 200, 40) / 8.0
    acc = np.float32(300.0)
    for v in vals:
        acc = rnd(np.float32(acc) + np.float32(v))
    a = T(np.array([300.0, 0.0], np.float32), dtype)
    _C.index_put_(a, 0, T(np.zeros(40, np.int64)), T(vals, dtype), True)
    assert N(a)[0] == acc and N(a)[1] == 0


def test_index_put_broadcasts_values():
    a, ta = sample((3, 5), F64)
    idx = np.array([[4, 0], [1, 4]])
    _C.index_put_(ta, 1, T(idx), T(np.array(2.5)), False)
    np.testing.assert_array_equal(N(ta), put_ref(a, 1, idx, 2.5, False))
    _C.index_put_(ta, 1, T(idx), 1.0, True)  # a Python number
    np.testing.assert_array_equal(N(ta), put_ref(put_ref(a, 1, idx, 2.5, False), 1, idx, 1.0, True))
    row = np.array([10.0, 20.0])  # broadcast along the leading dims
    b, tb = sample((3, 5), F64)
    _C.index_put_(tb, 1, T(idx), T(row), False)
    np.testing.assert_array_equal(N(tb), put_ref(b, 1, idx, row, False))
    ci = T(np.array([[1.0], [2.0], [3.0]]))._view((3, 1, 1))
    c, tc = sample((3, 5), F64)
    _C.index_put_(tc, 1, T(idx), ci, True)
    np.testing.assert_array_equal(N(tc), put_ref(c, 1, idx, N(ci), True))


def test_index_put_casts_values_within_kind():
    a, ta = sample((4,), F32)
    _C.index_put_(ta, 0, T([1, 3]), T(np.array([0.5, 1.25]), F64), False)
    a[[1, 3]] = [0.5, 1.25]
    np.testing.assert_array_equal(N(ta), a)
    ints = T(np.zeros(3, np.int64))  # a float number is truncated into an integer tensor, as PyTorch's fills do
    _C.index_put_(ints, 0, T([0, 2]), -2.7)
    np.testing.assert_array_equal(N(ints), [-2, 0, -2])
    b, tb = sample((4,), F64)
    _C.index_put_(tb, 0, T([0]), T(np.array([7])), True)  # int into float: fine
    b[0] += 7
    np.testing.assert_array_equal(N(tb), b)
    c, tc = sample((4,), I64)
    _C.index_put_(tc, 0, T([2]), T(np.array([True])), True)  # bool into int: fine
    c[2] += 1
    np.testing.assert_array_equal(N(tc), c)


def test_index_put_with_values_aliasing_the_destination():
    a = np.arange(6.0)
    ta = T(a)
    src = ta._slice(0, 0, 3, 1)  # a[0:3], shares storage with the destination
    _C.index_put_(ta, 0, T([1, 2, 3]), src, False)
    np.testing.assert_array_equal(N(ta), [0, 0, 1, 2, 4, 5])  # read before written, like NumPy's a[[1,2,3]] = a[:3]


def test_index_put_with_index_aliasing_the_destination():
    ta = T(np.array([2, 0, 1, 3]))
    _C.index_put_(ta, 0, ta, T(np.array([9, 9, 9, 9])), False)  # positions read before any write
    np.testing.assert_array_equal(N(ta), [9, 9, 9, 9])
    tb = T(np.array([1, 1, 0]))
    _C.index_put_(tb, 0, tb, T(np.array([5, 6, 100])), False)  # positions 1, 1, 0: would go out of range if reread
    np.testing.assert_array_equal(N(tb), [100, 6, 0])


def test_index_put_bumps_version_and_writes_through_views():
    base = T(np.zeros((3, 4), np.float32))
    col = base._select(1, 2)  # column 2, stride 4
    v = base._version
    _C.index_put_(col, 0, T([0, 2]), 1.0, True)
    assert base._version == v + 1
    expect = np.zeros((3, 4))
    expect[[0, 2], 2] = 1
    np.testing.assert_array_equal(N(base), expect)


def test_index_put_zero_d_destination_and_empty_index():
    s = T(np.array(1.0))
    _C.index_put_(s, 0, T([0, 0, -1]), 2.0, True)
    assert N(s) == 7.0
    a, ta = sample((3,), F32)
    _C.index_put_(ta, 0, T(np.zeros(0, np.int64)), T(np.zeros(0, np.float32)), True)
    np.testing.assert_array_equal(N(ta), a)


# ---- nonzero_flat --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (4, 0, 2), (2, 3, 4, 5), (300, 257)])
def test_nonzero_flat_matches_numpy(shape):
    m = np.asarray(rng.random(shape) < 0.4)
    out = _C.nonzero_flat(T(m))
    assert out._dtype == I64 and out.ndim == 1
    np.testing.assert_array_equal(N(out), np.flatnonzero(m))
    tm = strided(T(m))
    np.testing.assert_array_equal(N(_C.nonzero_flat(tm)), np.flatnonzero(m))


def test_nonzero_flat_large_parallel_and_edges():
    n = _C.get_num_threads()
    try:
        for threads in (1, 4):
            _C.set_num_threads(threads)
            for p in (0.0, 0.001, 0.5, 1.0):
                m = rng.random(1_000_003) < p
                np.testing.assert_array_equal(N(_C.nonzero_flat(T(m))), np.flatnonzero(m))
    finally:
        _C.set_num_threads(n)


def test_nonzero_flat_errors():
    with pytest.raises(TypeError, match="bool"):
        _C.nonzero_flat(T(np.array([1, 0, 2])))
    with pytest.raises(TypeError):
        _C.nonzero_flat(np.array([True]))
    with pytest.raises(RuntimeError, match="depends on the mask's values"):
        _C.nonzero_flat(_C.empty((4,), BOOL, "meta"))


# ---- cat --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shapes,dim", [([(2,), (3,), (0,)], 0), ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 5)], 1),
                                        ([(2, 3, 4), (2, 3, 1)], -1), ([(1, 2, 2)], 1), ([(0, 3), (0, 3)], 0),
                                        ([(2, 0), (2, 3)], 1)])
def test_cat_matches_concatenate(dtype, shapes, dim):
    parts = [sample(s, dtype) for s in shapes]
    ref = np.concatenate([p[0] for p in parts], axis=dim)
    out = _C.cat([p[1] for p in parts], dim)
    assert out._dtype == dtype and out.shape == ref.shape
    np.testing.assert_array_equal(N(out), ref)
    out2 = _C.cat(tuple(strided(p[1]) for p in parts), dim)
    np.testing.assert_array_equal(N(out2), ref)


@pytest.mark.parametrize("dtypes,expect", [((F16, BF16), F32), ((F32, F64), F64), ((I64, F16), F16),
                                           ((BOOL, I64), I64), ((BOOL, BF16), BF16), ((F16, F16, F32), F32),
                                           ((BOOL, BOOL), BOOL)])
def test_cat_promotes_like_pytorch(dtypes, expect):
    tensors, values = [], []
    for i, dt in enumerate(dtypes):
        v = np.array([i % 2, 1]) if dt == BOOL else np.array([i + 1.0, 2.0])
        tensors.append(T(v, dt))
        values.append(v)
    out = _C.cat(tensors, 0)
    assert out._dtype == expect
    np.testing.assert_array_equal(N(out).astype(np.float64), np.concatenate(values).astype(np.float64))


def test_cat_errors():
    a = T(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="non-empty"):
        _C.cat([], 0)
    with pytest.raises(ValueError, match=r"position 2 has shape \(2, 4\).*position 0 has shape \(2, 3\).*dimension 0"):
        _C.cat([a, a, T(np.zeros((2, 4)))], 0)
    with pytest.raises(ValueError, match="position 1"):
        _C.cat([a, T(np.zeros(3))], 0)
    with pytest.raises(ValueError, match="0-d"):
        _C.cat([T(np.array(1.0))], 0)
    with pytest.raises(TypeError, match="position 1"):
        _C.cat([a, np.zeros((2, 3))], 0)
    with pytest.raises(TypeError):
        _C.cat(a, 0)
    with pytest.raises(IndexError):
        _C.cat([a, a], 2)
    with pytest.raises(RuntimeError, match="same device"):
        _C.cat([a, _C.empty((2, 3), F32, "meta")], 0)


# ---- meta --------------------------------------------------------------------------------------------------------

def test_meta_shapes_and_allocations():
    a = _C.empty((4, 5, 6), F16, "meta")
    idx = _C.empty((2, 3), I64, "meta")
    before = _C.memory_allocated("meta")
    out = _C.index(a, 1, idx)
    assert out._device == "meta" and out.shape == (4, 2, 3, 6) and out._dtype == F16
    assert _C.memory_allocated("meta") - before >= 4 * 2 * 3 * 6 * 2
    assert _C.index_put_(a, -1, idx, _C.empty((1, 3), F16, "meta"), True) is a
    c = _C.cat([a, _C.empty((4, 1, 6), F32, "meta")], 1)
    assert c.shape == (4, 6, 6) and c._dtype == F32 and c._device == "meta"
    with pytest.raises(ValueError, match="broadcast"):
        _C.index_put_(a, 1, idx, _C.empty((4, 2, 3, 5), F16, "meta"))


# ---- errors ------------------------------------------------------------------------------------------------------

def test_index_errors():
    a = T(np.zeros((3, 5), np.float32))
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for dimension 1 with size 5"):
        _C.index(a, 1, T([0, 5]))
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 0 with size 3"):
        _C.index(a, 0, T([[0], [-4]]))
    with pytest.raises(IndexError):
        _C.index(a, 2, T([0]))
    with pytest.raises(TypeError, match="int64"):
        _C.index(a, 0, T(np.array([0.0, 1.0])))
    with pytest.raises(TypeError, match="nonzero"):
        _C.index(a, 0, T(np.array([True, False, True])))
    with pytest.raises(TypeError):
        _C.index(a, 0, [0, 1])
    with pytest.raises(TypeError):
        _C.index(np.zeros(3), 0, T([0]))
    with pytest.raises(RuntimeError, match="same device"):
        _C.index(a, 0, _C.empty((2,), I64, "meta"))
    with pytest.raises(IndexError):
        _C.index(_C.empty((2, 3), I64, "cpu"), 0, T(np.array([2] * 3)))
    big = _C.empty((1,) * 16, F32, "meta")
    with pytest.raises(ValueError, match="dimensions"):
        _C.index(big, 0, _C.empty((1, 1), I64, "meta"))


def test_index_put_errors_leave_destination_unchanged():
    a, ta = sample((3, 4), F32)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        _C.index_put_(ta, 1, T([0, 1, 4]), 1.0, True)
    with pytest.raises(TypeError, match="int64"):
        _C.index_put_(ta, 1, T(np.array([1.0])), 1.0)
    with pytest.raises(ValueError, match=r"values of shape \(2,\) cannot be broadcast to the indexed shape \(3, 3\)"):
        _C.index_put_(ta, 1, T([0, 1, 2]), T(np.zeros(2, np.float32)))
    with pytest.raises(TypeError, match="float"):
        _C.index_put_(T(np.zeros(3, np.int64)), 0, T([0]), T(np.array([1.5])))
    with pytest.raises(TypeError):
        _C.index_put_(ta, 0, T([0]), "x")
    with pytest.raises(RuntimeError, match="same device"):
        _C.index_put_(ta, 0, T([0]), _C.empty((1, 4), F32, "meta"))
    np.testing.assert_array_equal(N(ta), a)
