"""Elementwise ops (csrc/ops_elementwise.c, kernels/cpu/elementwise.c) against NumPy.

Most cases go through gpumemnet._C directly (binary/unary/clamp/where/copy_/fill_), which is what the Python layer
calls; a few at the end check that the Python API (operators, gm.tensor) reaches them. Every dtype NumPy has is
compared with NumPy; bfloat16 is compared with float32 results rounded to bfloat16. Tolerances are
atol + rtol*|ref|, and a failure lists the first mismatches with their indices.
"""
import itertools

import gc

import numpy as np
import pytest

import gpumemnet as gm

C = gm._C

F32, F64, F16, BF16, I64, BOOL = range(6)
DTYPES = [F32, F64, F16, BF16, I64, BOOL]
FLOATS = [F32, F64, F16, BF16]
NAMES = {F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I64: "int64", BOOL: "bool"}
NP = {F32: np.float32, F64: np.float64, F16: np.float16, BF16: np.float32, I64: np.int64, BOOL: np.bool_}
TOL = {F32: (1e-6, 1e-5), F64: (1e-12, 1e-12), F16: (1e-3, 2e-3), BF16: (1e-2, 1e-2), I64: (0, 0), BOOL: (0, 0)}

ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM, EQ, NE, LT, LE, GT, GE = range(13)
NEG, EXP, LOG, SQRT, ABS, SIGN, LOGICAL_NOT = range(7)
COMPARISONS = [EQ, NE, LT, LE, GT, GE]
NP_BINARY = {ADD: np.add, SUB: np.subtract, MUL: np.multiply, DIV: np.true_divide, POW: np.power,
             MAXIMUM: np.maximum, MINIMUM: np.minimum, EQ: np.equal, NE: np.not_equal, LT: np.less,
             LE: np.less_equal, GT: np.greater, GE: np.greater_equal}
NP_UNARY = {NEG: np.negative, EXP: np.exp, LOG: np.log, SQRT: np.sqrt, ABS: np.abs,
            SIGN: lambda a: np.where(np.isnan(a), 0.0, np.sign(a)).astype(a.dtype),  # PyTorch's sign(nan) is 0
            LOGICAL_NOT: np.logical_not}


# ---- helpers ------------------------------------------------------------------------------------------------
def bf16_round(x):
    """float32 -> nearest bfloat16 (ties to even), kept as float32: what the kernels store."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    r = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, r).reshape(x.shape)


def as_dtype(arr, code):
    """The values a tensor of dtype `code` holds for `arr`, as the NumPy array that represents them."""
    if code == BF16:
        return bf16_round(np.asarray(arr, np.float32))
    return np.asarray(arr).astype(NP[code])


def T(arr, code=None, device="cpu"):
    arr = np.asarray(arr)
    return C.from_numpy(arr, code, device)


def N(t):
    """A tensor's values as a NumPy array (bfloat16 read back as float32)."""
    if t._dtype == BF16:
        f = C.empty(t.shape, F32, "cpu")
        C.copy_(f, t)
        return f.numpy().copy()
    return t.numpy().copy()


def rand(shape, code, rng, lo=-3.0, hi=3.0):
    if code == I64:
        return rng.integers(-6, 7, size=shape).astype(np.int64)
    if code == BOOL:
        return rng.random(shape) < 0.5
    return as_dtype(rng.uniform(lo, hi, size=shape), code)


def check(got, ref, atol=0.0, rtol=0.0, what=""):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != expected {ref.shape}"
    if ref.dtype == np.bool_ or np.issubdtype(ref.dtype, np.integer):
        bad = got.astype(ref.dtype) != ref
    else:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        with np.errstate(invalid="ignore"):
            close = (np.abs(g - r) <= atol + rtol * np.abs(r)) | (g == r) | (np.isnan(g) & np.isnan(r))
        bad = ~close
    if bad.any():
        idx = np.argwhere(bad)[:6]
        lines = [f"  at {tuple(int(j) for j in i)}: got {got[tuple(i)]!r}, expected {ref[tuple(i)]!r}" for i in idx]
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} elements differ (atol={atol}, rtol={rtol})\n"
                    + "\n".join(lines))


def promote(a, b):
    """PyTorch's promoteTypes on our dtypes, written out independently of the C code."""
    order = {BOOL: 0, I64: 1, F16: 2, BF16: 2, F32: 3, F64: 4}
    if a == b:
        return a
    if {a, b} == {F16, BF16}:
        return F32
    return a if order[a] >= order[b] else b


def promote_number(t, number):
    """A Python number only raises a tensor's dtype to its own kind's default dtype."""
    if isinstance(number, bool):
        return t
    if isinstance(number, int):
        return I64 if t == BOOL else t
    return t if t in FLOATS else F32


def ref_binary(op, a, b, code):
    """NumPy reference for compute dtype `code`; a, b already hold that dtype's values."""
    if code in (F16, BF16):  # like the kernel: compute in float32, round once
        r = NP_BINARY[op](np.asarray(a, np.float32), np.asarray(b, np.float32))
        return r if op in COMPARISONS else as_dtype(r, code)
    if code == BOOL and op in (ADD, MUL, MAXIMUM, MINIMUM, POW):
        r = {ADD: np.logical_or, MUL: np.logical_and, MAXIMUM: np.logical_or, MINIMUM: np.logical_and}.get(op)
        return r(a, b) if r else np.logical_or(a, np.logical_not(b))
    if code == I64 and op == POW:
        return np.vectorize(ipow, otypes=[np.int64])(a, b)
    return NP_BINARY[op](a, b)


def ipow(a, b):
    a, b = int(a), int(b)
    if b < 0:
        return 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
    r = pow(a, b, 1 << 64)
    return r - (1 << 64) if r >= 1 << 63 else r


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ---- binary ops, every dtype --------------------------------------------------------------------------------
BINARY_CASES = [(op, code) for code in DTYPES for op in range(13) if not (code == BOOL and op == SUB)]


@pytest.mark.parametrize("op,code", BINARY_CASES, ids=[f"op{op}-{NAMES[c]}" for op, c in BINARY_CASES])
def test_binary_matches_numpy(op, code, rng):
    a = rand((5, 7), code, rng)
    b = rand((5, 7), code, rng)
    if op == POW and code in FLOATS:
        a = as_dtype(np.abs(a) + 0.1, code)
        b = as_dtype(rng.uniform(-2, 2, size=(5, 7)), code)
    if op == POW and code == I64:
        b = rng.integers(-3, 5, size=(5, 7))
    if op == DIV and code in FLOATS:
        b = as_dtype(np.where(np.abs(b) < 0.25, 0.5, b), code)
    a[0, 0] = b[0, 0]  # one tie for the comparisons / maximum
    out = C.binary(op, T(a, code), T(b, code))
    expect_dt = BOOL if op in COMPARISONS else (F32 if op == DIV and code in (I64, BOOL) else code)
    assert out._dtype == expect_dt
    if op == DIV and code in (I64, BOOL):  # true division: ints become float32 first
        with np.errstate(divide="ignore", invalid="ignore"):
            ref = np.true_divide(a.astype(np.float32), b.astype(np.float32))
        check(N(out), ref, *TOL[F32], what=f"div {NAMES[code]}")
        return
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ref = ref_binary(op, a, b, code)
    atol, rtol = TOL[expect_dt] if op not in COMPARISONS else (0, 0)
    if op == POW and code == F32:
        atol, rtol = 1e-5, 1e-5
    check(N(out), ref, atol, rtol, what=f"binary op {op} {NAMES[code]}")


@pytest.mark.parametrize("code", DTYPES, ids=NAMES.values())
@pytest.mark.parametrize("number", [2, 2.5, True])
def test_binary_with_number_both_sides(code, number, rng):
    a = rand((4, 3), code, rng)
    ta = T(a, code)
    for op in (ADD, MUL, MAXIMUM, LT, GE):
        rdt = promote_number(code, number)
        av = as_dtype(a, rdt)
        nv = as_dtype(np.array(number), rdt)
        for flip in (False, True):
            out = C.binary(op, number, ta) if flip else C.binary(op, ta, number)
            assert out._dtype == (BOOL if op in COMPARISONS else rdt), (op, code, number)
            ref = ref_binary(op, nv, av, rdt) if flip else ref_binary(op, av, nv, rdt)
            atol, rtol = TOL[rdt] if op not in COMPARISONS else (0, 0)
            check(N(out), np.broadcast_to(ref, a.shape), atol, rtol, what=f"op {op} {NAMES[code]} {number!r} {flip}")


def test_number_minus_tensor_and_number_div(rng):
    a = rand((6,), F32, rng)
    check(N(C.binary(SUB, 1.5, T(a))), (np.float32(1.5) - a), *TOL[F32])
    b = np.array([1, 2, 4, -8])
    out = C.binary(DIV, 1, T(b))
    assert out._dtype == F32
    check(N(out), 1 / b.astype(np.float32), *TOL[F32])


def test_float16_scalar_is_not_rounded_to_half_first():
    # PyTorch computes f16 + python float in float32 with the scalar unrounded, then rounds once.
    a = np.array([1000.0], np.float16)
    out = C.binary(ADD, T(a), 0.3)
    assert out._dtype == F16
    check(N(out), np.array([np.float16(np.float32(1000.0) + np.float32(0.3))]))


# ---- type promotion -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("x,y", list(itertools.product(DTYPES, DTYPES)))
def test_promotion_table_tensor_tensor(x, y):
    a, b = T(np.ones((2,)), x), T(np.ones((2,)), y)
    expect = promote(x, y)
    if expect == BOOL:
        assert C.binary(ADD, a, b)._dtype == BOOL
    else:
        assert C.binary(MUL, a, b)._dtype == expect, (NAMES[x], NAMES[y])
    assert C.binary(EQ, a, b)._dtype == BOOL
    div = C.binary(DIV, a, b)._dtype
    assert div == (expect if expect in FLOATS else F32)


@pytest.mark.parametrize("x", DTYPES, ids=NAMES.values())
@pytest.mark.parametrize("number", [True, 3, -2.5])
def test_promotion_table_tensor_number(x, number):
    a = T(np.ones((3,)), x)
    assert C.binary(MUL, a, number)._dtype == promote_number(x, number)
    assert C.binary(MUL, number, a)._dtype == promote_number(x, number)


def test_promotion_zero_dim_tensors_act_like_numbers():
    # PyTorch: a 0-d tensor raises the result only when it is of a higher kind.
    h = T(np.ones((3,), np.float16))
    assert C.binary(MUL, h, T(np.array(2.0), F32))._dtype == F16
    i = T(np.ones((3,), np.int64))
    assert C.binary(ADD, i, T(np.array(2.0), F64))._dtype == F64
    assert C.binary(ADD, T(np.array(1.0), F16), T(np.array(1.0), F64))._dtype == F64  # all 0-d: plain promotion
    assert C.binary(ADD, T(np.array(True)), 1)._dtype == I64


def test_where_and_clamp_promotion():
    c = T(np.array([True, False]))
    assert C.where(c, 1.0, 0)._dtype == F32
    assert C.where(c, T(np.ones(2, np.float16)), 0.0)._dtype == F16
    assert C.where(c, T(np.ones(2, np.int64)), T(np.ones(2, np.float64)))._dtype == F64
    assert C.clamp(T(np.arange(3)), 0.5)._dtype == F32
    assert C.clamp(T(np.arange(3)), 1, 2)._dtype == I64


# ---- broadcasting -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", [((), (3, 4)), ((3, 1), (1, 4)), ((2, 1, 3), (4, 1)), ((5,), ()),
                                   ((0, 3), (3,)), ((2, 0), (1,)), ((3, 1), (1, 0)), ((1,), (2, 3, 1, 4)),
                                   ((2, 3, 4), (2, 3, 4))])
@pytest.mark.parametrize("code", [F32, F16, I64])
def test_broadcasting(sa, sb, code, rng):
    a, b = rand(sa, code, rng), rand(sb, code, rng)
    for op in (ADD, MAXIMUM, GT):
        out = C.binary(op, T(a, code), T(b, code))
        ref = ref_binary(op, a, b, code)
        assert out.shape == ref.shape
        check(N(out), ref, *(TOL[code] if op != GT else (0, 0)), what=f"{sa} op{op} {sb}")


def test_broadcast_shape_error_names_both_shapes():
    with pytest.raises(ValueError) as e:
        C.binary(ADD, T(np.ones((2, 3))), T(np.ones((4,))))
    msg = str(e.value)
    assert "(2, 3)" in msg and "(4,)" in msg and "binary(add)" in msg and "dim 1" in msg
    with pytest.raises(ValueError, match=r"\(2, 1, 3\).*\(4, 2\)"):
        C.binary(MUL, T(np.ones((2, 1, 3))), T(np.ones((4, 2))))
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        C.where(T(np.ones(2, bool)), T(np.ones(3)), 0.0)
    with pytest.raises(ValueError, match=r"\(5,\)"):
        C.clamp(T(np.ones((2, 3))), T(np.ones(5)))


# ---- non-contiguous inputs and large (multi-threaded) problems ------------------------------------------------
@pytest.mark.parametrize("code", DTYPES, ids=NAMES.values())
def test_noncontiguous_inputs(code, rng):
    base = rand((6, 8), code, rng)
    other = rand((8, 6), code, rng)
    ta, tb = T(base, code), T(other, code)
    at = ta._transpose(0, 1)                # (8, 6), strides (1, 8)
    sl = ta._slice(1, 1, None, 2)           # (6, 4), every other column
    sl2 = tb._slice(0, None, None, 2)       # (4, 6)
    op = ADD if code != BOOL else MUL
    check(N(C.binary(op, at, tb)), ref_binary(op, base.T, other, code), *TOL[code])
    check(N(C.binary(op, sl, sl2._transpose(0, 1))), ref_binary(op, base[:, 1::2], other[::2].T, code), *TOL[code])
    ex = T(rand((6, 1), code, rng), code)
    check(N(C.binary(MAXIMUM, ex._expand((6, 4)), sl)), ref_binary(MAXIMUM, np.broadcast_to(N(ex), (6, 4)),
                                                                    base[:, 1::2], code), *TOL[code])
    if code != BOOL:
        check(N(C.unary(NEG, at)), ref_unary(NEG, base.T, code), *TOL[code])
    check(N(C.unary(LOGICAL_NOT, sl)), np.logical_not(base[:, 1::2]))


@pytest.mark.parametrize("nthreads", [1, 4])
def test_large_strided_multithreaded(nthreads, rng):
    old = C.get_num_threads()
    C.set_num_threads(nthreads)
    try:
        a = rng.standard_normal((300, 257)).astype(np.float32)
        b = rng.standard_normal((257,)).astype(np.float32)
        ta = T(a)._transpose(0, 1)  # (257, 300) strided
        tb = T(b)._unsqueeze(1)     # (257, 1) broadcast along the inner dim
        check(N(C.binary(MUL, ta, tb)), a.T * b[:, None], *TOL[F32])
        check(N(C.binary(ADD, T(a), 1.0)), a + 1, *TOL[F32])
        check(N(C.clamp(T(a), -0.5, 0.5)), np.clip(a, -0.5, 0.5))
        h = T(a, F16)
        check(N(C.unary(EXP, h)), np.exp(a.astype(np.float16).astype(np.float32)).astype(np.float16), *TOL[F16])
        d = C.empty((300, 257), F64, "cpu")
        C.copy_(d, T(a))
        check(N(d), a.astype(np.float64))
        big = C.empty((70000,), I64, "cpu")
        C.fill_(big, 7)
        assert (N(big) == 7).all()
    finally:
        C.set_num_threads(old)


# ---- unary ----------------------------------------------------------------------------------------------------
def ref_unary(op, a, code):
    if code in (F16, BF16):
        r = NP_UNARY[op](np.asarray(a, np.float32))
        return r if op == LOGICAL_NOT else as_dtype(r, code)
    if code == BOOL and op in (ABS, SIGN):
        return a
    return NP_UNARY[op](a)


UNARY_CASES = [(op, c) for c in DTYPES for op in range(7) if not (c == BOOL and op == NEG)]


@pytest.mark.parametrize("op,code", UNARY_CASES, ids=[f"op{o}-{NAMES[c]}" for o, c in UNARY_CASES])
def test_unary_matches_numpy(op, code, rng):
    a = rand((4, 9), code, rng)
    if code in FLOATS:
        a[0, :3] = [0.0, -0.0, np.nan] if code != BF16 else [0.0, -0.0, np.nan]
    out = C.unary(op, T(a, code))
    if op in (EXP, LOG, SQRT) and code in (I64, BOOL):
        assert out._dtype == F32
        with np.errstate(divide="ignore", invalid="ignore"):
            check(N(out), NP_UNARY[op](a.astype(np.float32)), *TOL[F32])
        return
    assert out._dtype == (BOOL if op == LOGICAL_NOT else code)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = ref_unary(op, a, code)
    check(N(out), ref, *(TOL[code] if op != LOGICAL_NOT else (0, 0)), what=f"unary op {op} {NAMES[code]}")


# ---- clamp, where --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [F32, F64, F16, BF16, I64], ids=[NAMES[c] for c in (F32, F64, F16, BF16, I64)])
def test_clamp_numbers_and_tensors(code, rng):
    a = rand((5, 6), code, rng)
    ta = T(a, code)
    for lo, hi in [(-1, 1), (None, 0), (0, None), (2, -2)]:
        out = C.clamp(ta, lo, hi)
        assert out._dtype == code
        ref = a
        if lo is not None:
            ref = np.maximum(ref, as_dtype(lo, code))
        if hi is not None:
            ref = np.minimum(ref, as_dtype(hi, code))
        check(N(out), ref, *TOL[code], what=f"clamp {lo} {hi}")
    lo = rand((6,), code, rng)
    hi = as_dtype(lo + 2, code)
    out = C.clamp(ta, T(lo, code), max=T(hi, code))
    check(N(out), np.minimum(np.maximum(a, lo), hi), *TOL[code])


def test_clamp_nan_propagates():
    a = np.array([np.nan, -3.0, 0.5, 3.0], np.float32)
    check(N(C.clamp(T(a), -1.0, 1.0)), np.array([np.nan, -1, 0.5, 1], np.float32))
    check(N(C.clamp(T(a), np.nan, 1.0)), np.full(4, np.nan, np.float32))
    check(N(C.clamp(T(a), max=np.nan)), np.full(4, np.nan, np.float32))
    lo = T(np.array([0.0, np.nan, 0.0, 0.0], np.float32))
    check(N(C.clamp(T(a), lo)), np.array([np.nan, np.nan, 0.5, 3.0], np.float32))
    h = T(a, F16)
    check(N(C.clamp(h, -1.0, 1.0)), np.array([np.nan, -1, 0.5, 1], np.float16))


@pytest.mark.parametrize("code", DTYPES, ids=NAMES.values())
def test_where_matches_numpy(code, rng):
    cond = rng.random((3, 4)) < 0.5
    a, b = rand((3, 4), code, rng), rand((4,), code, rng)
    out = C.where(T(cond), T(a, code), T(b, code))
    assert out._dtype == code
    check(N(out), np.where(cond, a, b))
    out = C.where(T(cond[:, :1]), T(a, code), False if code == BOOL else 1)  # (3,1) cond broadcast, number
    check(N(out), np.where(cond[:, :1], a, as_dtype(np.array(False if code == BOOL else 1), code)))
    out = C.where(T(cond), 2.5, T(b, code))
    assert out._dtype == promote_number(code, 2.5)
    check(N(out), np.where(cond, as_dtype(2.5, out._dtype), as_dtype(b, out._dtype)))


# ---- NaN in maximum / minimum, int pow -------------------------------------------------------------------------
@pytest.mark.parametrize("code", FLOATS, ids=[NAMES[c] for c in FLOATS])
def test_maximum_minimum_propagate_nan(code):
    a = as_dtype(np.array([np.nan, 1.0, np.nan, -2.0, 5.0]), code)
    b = as_dtype(np.array([1.0, np.nan, np.nan, 3.0, 5.0]), code)
    for op, fn in ((MAXIMUM, np.maximum), (MINIMUM, np.minimum)):
        check(N(C.binary(op, T(a, code), T(b, code))), fn(a, b), what=f"op {op} {NAMES[code]}")
        check(N(C.binary(op, T(a, code), np.nan)), np.full(5, np.nan), what="nan scalar")


def test_int_pow_negative_exponent():
    base = np.repeat(np.arange(-3, 4), 7)
    exp = np.tile(np.arange(-3, 4), 7)
    out = C.binary(POW, T(base), T(exp))
    assert out._dtype == I64
    check(N(out), np.array([ipow(x, y) for x, y in zip(base, exp)], np.int64))
    check(N(C.binary(POW, T(np.array([-1, 1, 2, 0])), -3)), np.array([-1, 1, 0, 0]))
    check(N(C.binary(POW, T(np.array([2, 3])), 62)), np.array([ipow(2, 62), ipow(3, 62)]))  # wraps, no trap


def test_integer_ops_never_trap():
    big = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0], np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = big.astype(np.float32) / np.array([-1, 0, 0], np.float32)
    check(N(C.binary(DIV, T(big), T(np.array([-1, 0, 0])))), ref)
    check(N(C.unary(NEG, T(big))), np.array([big[0], -big[1], 0]))
    check(N(C.binary(ADD, T(big), 1)), np.array([big[0] + 1, big[0], 1]))


# ---- out= (in-place forms) -----------------------------------------------------------------------------------------
def test_out_in_place_and_version(rng):
    a, b = rand((3, 4), F32, rng), rand((4,), F32, rng)
    ta = T(a)
    v0 = ta._version
    r = C.binary(ADD, ta, T(b), out=ta)
    assert r is ta and ta._version > v0
    check(N(ta), a + b, *TOL[F32])
    r = C.unary(EXP, ta, out=ta)
    check(N(ta), np.exp(a + b), *TOL[F32])
    v1 = ta._version
    C.clamp(ta, 0.0, 1.0, out=ta)
    assert ta._version > v1
    check(N(ta), np.clip(np.exp(a + b), 0, 1), *TOL[F32])


def test_out_with_other_dtypes(rng):
    a, b = rand((3, 4), F16, rng), rand((3, 4), F16, rng)
    o64 = C.empty((3, 4), F64, "cpu")
    C.binary(MUL, T(a, F16), T(b, F16), out=o64)  # computed in float16, then widened (like PyTorch)
    check(N(o64), (a.astype(np.float32) * b.astype(np.float32)).astype(np.float16).astype(np.float64))
    of = C.empty((3, 4), F32, "cpu")
    C.binary(LT, T(a, F16), T(b, F16), out=of)
    check(N(of), (a < b).astype(np.float32))
    oi = C.empty((3, 4), I64, "cpu")
    C.binary(ADD, T(np.ones((3, 4), bool)), T(np.ones((3, 4), bool)), out=oi)  # bool result into int64
    check(N(oi), np.ones((3, 4), np.int64))


def test_out_errors():
    a = T(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="float32.*int64"):
        C.binary(ADD, a, a, out=C.empty((2, 3), I64, "cpu"))
    with pytest.raises(TypeError):
        C.binary(ADD, T(np.ones(3, np.int64)), 1, out=C.empty((3,), BOOL, "cpu"))
    with pytest.raises(TypeError):
        C.unary(SQRT, T(np.ones(3, np.int64)), out=C.empty((3,), I64, "cpu"))
    with pytest.raises(TypeError):
        C.clamp(a, 0.0, out=C.empty((2, 3), I64, "cpu"))
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        C.binary(ADD, a, a, out=C.empty((3, 2), F32, "cpu"))
    with pytest.raises(ValueError):  # in-place cannot broadcast the output
        C.binary(ADD, T(np.ones((3, 1))), T(np.ones((1, 4))), out=T(np.ones((3, 1))))
    with pytest.raises(RuntimeError, match="broadcast view"):
        C.binary(ADD, T(np.ones((2, 3))), 1.0, out=T(np.ones((1, 3)))._expand((2, 3)))
    with pytest.raises(TypeError, match="out"):
        C.binary(ADD, a, a, out=3)


def test_out_partially_overlapping_input():
    x = np.arange(10, dtype=np.float32)
    t = T(x)
    C.binary(ADD, t._slice(0, 0, 9, 1), 100.0, out=t._slice(0, 1, 10, 1))  # out[i] = in[i-1] + 100
    check(N(t), np.concatenate([[0], x[:9] + 100]))
    t = T(x.reshape(2, 5)[:, :4].copy().reshape(2, 4))
    m = N(t)
    C.binary(MUL, t._transpose(0, 1)._as_strided((2, 4), (4, 1), 0), 2.0, out=t)  # same shape, permuted reads
    check(N(t), m * 2)


# ---- copy_ / fill_ ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", list(itertools.product(DTYPES, DTYPES)))
def test_copy_casts_every_pair(src, dst, rng):
    a = rand((3, 5), src, rng, -300, 300) if src in FLOATS else rand((3, 5), src, rng)
    d = C.empty((3, 5), dst, "cpu")
    v0 = d._version
    assert C.copy_(d, T(a, src)) is d
    assert d._version > v0
    if dst == BOOL:
        ref = a != 0
    elif dst == I64:
        ref = np.trunc(a.astype(np.float64)).astype(np.int64) if src in FLOATS else a.astype(np.int64)
    else:
        ref = as_dtype(np.asarray(a, np.float64) if src != BF16 else a, dst)
    tol = TOL[dst] if dst in FLOATS else (0, 0)
    check(N(d), ref, *tol, what=f"copy {NAMES[src]} -> {NAMES[dst]}")


def test_copy_broadcast_strided_and_overlap(rng):
    d = T(np.zeros((4, 3), np.float64))
    C.copy_(d._transpose(0, 1), T(np.array([1.0, 2.0, 3.0, 4.0], np.float32)))  # (3,4) view <- (4,)
    check(N(d), np.repeat(np.array([[1.0], [2.0], [3.0], [4.0]]), 3, axis=1))
    x = np.arange(8, dtype=np.int64)
    t = T(x)
    C.copy_(t._slice(0, 1, None, 1), t._slice(0, 0, 7, 1))  # shift right by one: reads the old values
    check(N(t), np.concatenate([[0], x[:7]]))
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 4\)"):
        C.copy_(C.empty((2, 4), F32, "cpu"), T(np.ones(3)))
    with pytest.raises(RuntimeError, match="meta"):
        C.copy_(C.empty((2,), F32, "cpu"), C.empty((2,), F32, "meta"))
    with pytest.raises(TypeError):
        C.copy_(C.empty((2,), F32, "cpu"), 1.0)


def test_copy_float_to_int_saturates_without_ub():
    a = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, -2.7, 2.7], np.float64)
    d = C.empty((7,), I64, "cpu")
    C.copy_(d, T(a))
    i = np.iinfo(np.int64)
    check(N(d), np.array([0, i.max, i.min, i.max, i.min, -2, 2]))


@pytest.mark.parametrize("code", DTYPES, ids=NAMES.values())
def test_fill(code):
    t = T(np.zeros((3, 4)), code)
    v0 = t._version
    C.fill_(t._slice(1, 0, None, 2), 0.5 if code != I64 else 7)  # strided columns 0 and 2
    assert t._version > v0
    ref = np.zeros((3, 4))
    ref[:, ::2] = 0.5 if code != I64 else 7
    check(N(t), as_dtype(ref, code) if code != BOOL else ref != 0)
    C.fill_(t, T(np.array(2.0), F32))  # 0-d tensor value
    check(N(t), as_dtype(np.full((3, 4), 2.0), code))
    u = T(np.zeros(3), I64)
    C.fill_(u, 2.7)
    check(N(u), np.array([2, 2, 2]))
    with pytest.raises(ValueError):
        C.fill_(t, T(np.ones(2)))


# ---- argument errors -------------------------------------------------------------------------------------------------
def test_error_paths():
    a = T(np.ones((2, 3), np.float32))
    m = C.empty((2, 3), F32, "meta")
    with pytest.raises(RuntimeError) as e:
        C.binary(ADD, a, m)
    assert "cpu" in str(e.value) and "meta" in str(e.value)
    with pytest.raises(RuntimeError, match="meta"):
        C.where(T(np.ones((2, 3), bool)), a, m)
    with pytest.raises(RuntimeError, match="meta"):
        C.clamp(a, m)
    with pytest.raises(RuntimeError, match="meta"):
        C.binary(ADD, a, a, out=m)
    for x, y in ((T(np.ones(2, bool)), T(np.ones(2, bool))), (T(np.ones(2, bool)), True), (T(np.ones(2)), True),
                 (T(np.ones(2)), T(np.ones(2, bool))), (2, T(np.ones(2, bool)))):  # PyTorch refuses each
        with pytest.raises(NotImplementedError, match="with a bool tensor is not supported"):
            C.binary(SUB, x, y)
    with pytest.raises(TypeError, match="bool"):
        C.unary(NEG, T(np.ones(2, bool)))
    with pytest.raises(TypeError, match="Tensor"):
        C.binary(ADD, 1, 2)
    with pytest.raises(TypeError, match="str"):
        C.binary(ADD, a, "x")
    with pytest.raises(TypeError):
        C.binary(ADD, a, 1j)
    with pytest.raises(ValueError, match="op code"):
        C.binary(99, a, a)
    with pytest.raises(ValueError, match="op code"):
        C.unary(-1, a)
    with pytest.raises(TypeError, match="condition"):
        C.where(a, a, a)
    with pytest.raises(ValueError, match="min"):
        C.clamp(a)
    with pytest.raises(TypeError):
        C.clamp(T(np.ones(2, bool)), True, False)
    with pytest.raises(OverflowError):
        C.binary(ADD, T(np.ones(2, np.int64)), 2 ** 70)
    check(N(C.binary(ADD, a, 2 ** 70)), np.full((2, 3), np.float32(2.0 ** 70)))  # fine in float compute


# ---- meta: shapes, dtypes and allocations happen, kernels do not ----------------------------------------------------
def test_meta_shapes_dtypes_and_no_kernel():
    a = C.empty((2, 1, 3), F16, "meta")
    b = C.empty((4, 1), F32, "meta")
    out = C.binary(ADD, a, b)
    assert out.shape == (2, 4, 3) and out._dtype == F32 and out._device == "meta"
    assert C.binary(LT, a, 1)._dtype == BOOL
    assert C.binary(DIV, C.empty((5,), I64, "meta"), 2).shape == (5,)
    assert C.unary(SQRT, C.empty((3, 2), I64, "meta"))._dtype == F32
    assert C.clamp(a, 0.0, 1.0).shape == (2, 1, 3)
    assert C.where(C.empty((4, 1), BOOL, "meta"), a, 0.0).shape == (2, 4, 3)
    C.fill_(a, 1.0)
    C.copy_(a, C.empty((3,), F64, "meta"))
    C.copy_(a, T(np.ones(3)))  # cpu -> meta: shape-checked, no data moves
    with pytest.raises(ValueError):
        C.binary(ADD, a, C.empty((5,), F32, "meta"))


def test_meta_temporaries_are_allocated_and_freed():
    # float16 + float32 casts the float16 operand into a float32 temporary: on meta too, so estimates see it.
    n = 1 << 20
    a = C.empty((n,), F16, "meta")
    b = C.empty((n,), F32, "meta")
    base = C.memory_allocated("meta")
    C.reset_peak_memory_stats("meta")
    out = C.binary(ADD, a, b)
    after = C.memory_allocated("meta")
    assert after - base >= 4 * n  # the output stays
    assert after - base < 8 * n   # the temporary went
    assert C.max_memory_allocated("meta") - base >= 8 * n  # output and temporary were live together
    del out
    assert C.memory_allocated("meta") == base


def test_cpu_temporaries_are_freed():
    a = T(np.ones(1000, np.float16))
    b = T(np.ones(1000, np.float32))
    gc.collect()  # a collection between the two readings would free unrelated tensors left by other tests
    gc.disable()
    try:
        base = C.memory_allocated("cpu")
        out = C.binary(MUL, a, b)
        del out
        assert C.memory_allocated("cpu") == base
    finally:
        gc.enable()


# ---- through the Python API ------------------------------------------------------------------------------------------
def test_python_api_reaches_the_ops():
    x = gm.tensor([[1.0, -2.0, 3.0]])
    y = gm.tensor([[0.5], [2.0]])
    check((x + y).numpy(), np.array([[1.0, -2.0, 3.0]], np.float32) + np.array([[0.5], [2.0]], np.float32))
    check((x * 2).numpy(), np.array([[2.0, -4.0, 6.0]], np.float32))
    check((2 - x).numpy(), np.array([[1.0, 4.0, -1.0]], np.float32))
    check((x > 0).numpy(), np.array([[True, False, True]]))
    check(gm.maximum(x, gm.tensor(0.0)).numpy(), np.array([[1.0, 0.0, 3.0]], np.float32))
    check(gm.clamp(x, -1.0, 1.0).numpy(), np.array([[1.0, -1.0, 1.0]], np.float32))
    check(gm.where(x > 0, x, 0.0).numpy(), np.array([[1.0, 0.0, 3.0]], np.float32))
    z = gm.from_numpy(np.arange(3, dtype=np.float32))
    v0 = z._version
    z += 1
    assert z._version > v0
    check(z.numpy(), np.arange(1, 4, dtype=np.float32))
    i = gm.tensor([1, 2, 3])
    assert (i / 2).dtype == gm.float32
    assert (i + 2.5).dtype == gm.float32
