"""Elementwise ops on CUDA against the CPU (kernels/cuda/elementwise.cu vs kernels/cpu/elementwise.c).

Every case builds its inputs once on the CPU, moves the very same bytes to CUDA, runs the op on both devices and
compares. Elementwise results are bit-identical (signed zeros included, NaN payloads aside), except exp/log/pow of
floats, where CUDA's math library may differ from glibc's by an ulp or two. Ops go through gpumemnet._C (what the
Python layer calls) and, at the end, through the Tensor API with autograd."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import assert_close, requires_cuda, to_np

# NumPy warns about the overflowing casts and NaN comparisons made on purpose here
pytestmark = [requires_cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

C = gm._C
F32, F64, F16, BF16, I64, BOOL = range(6)
DTYPES = [F32, F64, F16, BF16, I64, BOOL]
FLOATS = [F32, F64, F16, BF16]
NAMES = {F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I64: "int64", BOOL: "bool"}
ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM, EQ, NE, LT, LE, GT, GE = range(13)
BINARY = list(range(13))
NEG, EXP, LOG, SQRT, ABS, SIGN, LOGICAL_NOT = range(7)
UNARY = list(range(7))
# CUDA's expf/logf/powf are within 2-4 ulp of glibc's; after rounding to a 16-bit type at most one ulp of it.
MATH_TOL = {F32: (2e-6, 1e-30), F64: (1e-14, 1e-300), F16: (1e-3, 1e-7), BF16: (8e-3, 1e-30)}


# ---- helpers ------------------------------------------------------------------------------------------------
def cpu(arr, dt):
    """A CPU tensor of dtype dt holding arr (bfloat16 from float32 values, rounded to nearest even)."""
    arr = np.asarray(arr)
    if dt == BF16:
        arr = arr.astype(np.float32)
    return C.from_numpy(arr, dt, "cpu")


def pair(arr, dt):
    """(cpu tensor, cuda tensor) with the same bytes."""
    t = cpu(arr, dt)
    return t, t.cuda()


def values(dt, shape, rng, special=True):
    """Random values of dtype dt, with the awkward ones (NaN, +-inf, +-0, subnormals, big) mixed in for floats and
    (0, -1, extremes) for int64."""
    n = int(np.prod(shape))
    if dt == BOOL:
        return rng.random(n).reshape(shape) < 0.5
    if dt == I64:
        v = rng.integers(-6, 7, size=n)
        if special and n >= 8:
            v[:8] = [0, -1, 1, 2**62, -(2**63), 2**63 - 1, 3, -7]
        return v.reshape(shape).astype(np.int64)
    v = rng.uniform(-3, 3, size=n)
    if special and n >= 10:
        v[:10] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40 if dt in (F32, BF16) else 3e-8, 65504.0, 1e30, -2.5, 1.0]
    return v.reshape(shape)


def bits_equal(got, ref, what=""):
    """got (CUDA) equals ref (CPU) exactly: same dtype and shape, same values, NaN where NaN, same signs of zero."""
    assert got.device.type == "cuda" and ref.device.type == "cpu", what
    assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape), what
    a, b = to_np(got), to_np(ref)
    if a.dtype.kind == "f":
        na, nb = np.isnan(a), np.isnan(b)
        np.testing.assert_array_equal(na, nb, err_msg=f"{what}: NaN positions differ")
        np.testing.assert_array_equal(a[~na], b[~nb], err_msg=what)
        np.testing.assert_array_equal(np.signbit(a[~na]), np.signbit(b[~nb]), err_msg=f"{what}: signs of zero")
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


def close(got, ref, dt, what=""):
    r, a = MATH_TOL[dt]
    x, y = to_np(got), to_np(ref)
    assert x.shape == y.shape and got.dtype == ref.dtype, what
    np.testing.assert_allclose(x, y, rtol=r, atol=a, equal_nan=True, err_msg=what)


def same_error(fn_cpu, fn_cuda):
    """Both devices raise the same exception type with the same message."""
    with pytest.raises(Exception) as e1:
        fn_cpu()
    with pytest.raises(Exception) as e2:
        fn_cuda()
    assert type(e1.value) is type(e2.value)
    assert str(e1.value) == str(e2.value).replace("cuda:0", "cpu")


# ---- binary ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("op", BINARY)
def test_binary_every_op_and_dtype(op, dt):
    rng = np.random.default_rng(op * 10 + dt)
    a_np, b_np = values(dt, (7, 5), rng), values(dt, (5,), rng)
    if op == POW and dt == I64:
        b_np = rng.integers(-3, 5, size=(5,))
        b_np[:2] = [-1, 63]
    (a, ga), (b, gb) = pair(a_np, dt), pair(b_np, dt)
    if op == SUB and dt == BOOL:
        same_error(lambda: C.binary(op, a, b), lambda: C.binary(op, ga, gb))
        return
    for x, y, gx, gy in [(a, b, ga, gb), (b, a, gb, ga)]:  # broadcast on either side
        ref, got = C.binary(op, x, y), C.binary(op, gx, gy)
        if op == POW and dt in FLOATS:
            close(got, ref, dt, f"pow {NAMES[dt]}")
        else:
            bits_equal(got, ref, f"op {op} {NAMES[dt]}")


@pytest.mark.parametrize("op", BINARY)
def test_binary_scalars_and_promotion(op):
    """Tensor-number pairs on both sides; the result dtype follows PyTorch's promotion on both devices."""
    rng = np.random.default_rng(100 + op)
    for dt, num in itertools.product(DTYPES, [2, -3, 2.5, True, 0, 1e10, 3 * 2**62]):
        if dt == BOOL and op == SUB and isinstance(num, bool):
            continue
        a, ga = pair(values(dt, (4, 3), rng), dt)
        for args, gargs in [((a, num), (ga, num)), ((num, a), (num, ga))]:
            try:
                ref = C.binary(op, *args)
            except Exception:
                same_error(lambda: C.binary(op, *args), lambda: C.binary(op, *gargs))
                continue
            got = C.binary(op, *gargs)
            what = f"op {op} {NAMES[dt]} with {num!r}"
            if op == POW and ref.dtype.is_floating_point:
                close(got, ref, ref._dtype, what)
            else:
                bits_equal(got, ref, what)
    # 0-d tensors of another dtype take part in promotion as in PyTorch
    a, ga = pair(values(F16, (3, 2), rng), F16)
    s, gs = pair(np.array(1.5), F64)
    bits_equal(C.binary(ADD, ga, gs), C.binary(ADD, a, s), "f16 + 0-d f64")
    i, gi = pair(values(I64, (3, 2), rng), I64)
    f, gf = pair(values(F32, (2,), rng), F32)
    bits_equal(C.binary(MUL, gi, gf), C.binary(MUL, i, f), "int64 * float32")


def strided_views(t):
    """Non-contiguous views of a (6, 8) tensor, all of shape (3, 4): transposed, sliced with steps, expanded."""
    return [
        t._slice(0, 0, 6, 2)._slice(1, 1, 8, 2),             # steps in both dims
        t._transpose(0, 1)._slice(0, 0, 3, 1)._slice(1, 0, 4, 1),  # transposed
        t._slice(0, 5, 6, 1)._expand((3, 8))._slice(1, 0, 8, 2),   # a 0-stride expand of one row
        t._slice(1, 3, 4, 1)._expand((6, 4))._slice(0, 0, 6, 2),   # a 0-stride expand of one column
    ]


@pytest.mark.parametrize("dt", DTYPES, ids=NAMES.get)
def test_binary_non_contiguous_inputs_and_outputs(dt):
    rng = np.random.default_rng(7 + dt)
    a, ga = pair(values(dt, (6, 8), rng, special=False), dt)
    b, gb = pair(values(dt, (8, 6), rng, special=False), dt)
    op = ADD if dt != BOOL else MUL
    for x, gx in zip(strided_views(a), strided_views(ga)):
        for y, gy in zip(strided_views(b._transpose(0, 1)), strided_views(gb._transpose(0, 1))):
            bits_equal(C.binary(op, gx, gy), C.binary(op, x, y), "strided inputs")
            # into a strided out= view of a bigger tensor (the rest must stay untouched)
            o, go = pair(np.zeros((8, 10)), dt)
            ov, gov = o._slice(0, 1, 7, 2)._slice(1, 0, 8, 2), go._slice(0, 1, 7, 2)._slice(1, 0, 8, 2)
            C.binary(op, x, y, out=ov)
            C.binary(op, gx, gy, out=gov)
            bits_equal(go, o, "strided out")


def test_binary_out_of_another_dtype_and_inplace():
    rng = np.random.default_rng(3)
    a, ga = pair(values(F32, (4, 5), rng), F32)
    b, gb = pair(values(F32, (5,), rng), F32)
    o, go = pair(np.zeros((4, 5)), F64)
    C.binary(MUL, a, b, out=o)
    C.binary(MUL, ga, gb, out=go)
    bits_equal(go, o, "float32 result into a float64 out")
    # in place, also through the operators: a += b; and an overlapping in-place op a[1:] += a[:-1]
    C.binary(ADD, a, b, out=a)
    C.binary(ADD, ga, gb, out=ga)
    bits_equal(ga, a, "a.add_(b)")
    x, gx = pair(values(I64, (9,), rng, special=False), I64)
    C.binary(ADD, x._slice(0, 1, 9, 1), x._slice(0, 0, 8, 1), out=x._slice(0, 1, 9, 1))
    C.binary(ADD, gx._slice(0, 1, 9, 1), gx._slice(0, 0, 8, 1), out=gx._slice(0, 1, 9, 1))
    bits_equal(gx, x, "overlapping in-place add")
    t = gm.tensor([1.0, 2.0, 3.0])
    g = t.cuda()
    t += 2
    g += 2
    t *= t
    g *= g
    bits_equal(g, t, "operators in place")
    # int64 tensor, float result: out must be float (the same TypeError on both devices)
    i, gi = pair(np.arange(3), I64)
    same_error(lambda: C.binary(DIV, i, i, out=i), lambda: C.binary(DIV, gi, gi, out=gi))


def test_integer_semantics():
    """Wrap-around, x/0 = 0 (int division is true division, so through _C with int out it is float32 anyway),
    INT64_MIN / -1, pow with negative exponents."""
    big = np.array([2**63 - 1, -(2**63), 5, -5, 0, 7], np.int64)
    a, ga = pair(big, I64)
    b, gb = pair(np.array([1, -1, 0, -2, 0, 3], np.int64), I64)
    for op in (ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM):
        bits_equal(C.binary(op, ga, gb), C.binary(op, a, b), f"int op {op}")
    e, ge = pair(np.array([-1, -2, -3, 0, 1, 62]), I64)
    base, gbase = pair(np.array([[1], [-1], [2], [-2], [0]]), I64)
    bits_equal(C.binary(POW, gbase, ge), C.binary(POW, base, e), "int pow table")


# ---- unary ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("op", UNARY)
def test_unary_every_op_and_dtype(op, dt):
    rng = np.random.default_rng(200 + op * 10 + dt)
    a, ga = pair(values(dt, (5, 9), rng), dt)
    if op == NEG and dt == BOOL:
        same_error(lambda: C.unary(op, a), lambda: C.unary(op, ga))
        return
    ref, got = C.unary(op, a), C.unary(op, ga)
    if op in (EXP, LOG) and ref._dtype in FLOATS:
        close(got, ref, ref._dtype, f"unary {op} {NAMES[dt]}")
    else:
        bits_equal(got, ref, f"unary {op} {NAMES[dt]}")
    # strided input, strided out
    v, gv = a._transpose(0, 1)._slice(0, 0, 9, 3), ga._transpose(0, 1)._slice(0, 0, 9, 3)
    ref, got = C.unary(op, v), C.unary(op, gv)
    if op in (EXP, LOG) and ref._dtype in FLOATS:
        close(got, ref, ref._dtype)
    else:
        bits_equal(got, ref, f"strided unary {op} {NAMES[dt]}")


# ---- clamp, where -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [F32, F64, F16, BF16, I64], ids=NAMES.get)
def test_clamp(dt):
    rng = np.random.default_rng(300 + dt)
    a, ga = pair(values(dt, (6, 4), rng), dt)
    lo, glo = pair(values(dt, (4,), rng, special=False) - 1, dt)
    hi, ghi = pair(values(dt, (6, 1), rng, special=False) + 1, dt)
    cases = [((lo, hi), (glo, ghi)), ((-1, 2), (-1, 2)), ((None, 1), (None, 1)), ((0, None), (0, None)),
             ((2, -1), (2, -1)), ((lo, 0.5), (glo, 0.5)), ((None, hi), (None, ghi))]
    if dt in FLOATS:
        cases.append(((float("nan"), 1.0), (float("nan"), 1.0)))
    for (l, h), (gl, gh) in cases:
        bits_equal(C.clamp(ga, gl, gh), C.clamp(a, l, h), f"clamp {NAMES[dt]} {l!r} {h!r}")
    o, go = pair(np.zeros((4, 6)), dt)
    C.clamp(a, -1, 1, out=o._transpose(0, 1))
    C.clamp(ga, -1, 1, out=go._transpose(0, 1))
    bits_equal(go, o, "clamp into a transposed out")


@pytest.mark.parametrize("dt", DTYPES, ids=NAMES.get)
def test_where(dt):
    rng = np.random.default_rng(400 + dt)
    c, gc = pair(rng.random((5, 1, 3)) < 0.5, BOOL)
    a, ga = pair(values(dt, (4, 3), rng), dt)
    b, gb = pair(values(dt, (5, 4, 1), rng), dt)
    for (x, y), (gx, gy) in [((a, b), (ga, gb)), ((a, 7), (ga, 7)), ((-0.0, b), (-0.0, gb)),
                             ((True, a), (True, ga)), ((a._transpose(0, 1)._transpose(0, 1), 2.5),
                                                       (ga._transpose(0, 1)._transpose(0, 1), 2.5))]:
        bits_equal(C.where(gc, gx, gy), C.where(c, x, y), f"where {NAMES[dt]}")
    if dt != BOOL:  # the condition must be bool on both devices
        same_error(lambda: C.where(a, a, b), lambda: C.where(ga, ga, gb))


# ---- casts, copies, fill ------------------------------------------------------------------------------------
CAST_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.7, -3.7, np.nan, np.inf, -np.inf, 65504.0, 65519.0, 65520.0,
               1e5, -1e5, 3e-8, 6e-8, 1e-40, 1e30, -1e30, 9.3e18, -9.3e18, 2.0**53 + 2, 1.0e-45, 255.5, 1.00390625]
CAST_INTS = [0, 1, -1, 2, 2**53 + 1, 2**63 - 1, -(2**63), 65519, 65520, 16777217, -16777217, 255]


@pytest.mark.parametrize("src", DTYPES, ids=NAMES.get)
def test_cast_every_pair_of_dtypes(src):
    """copy_ between every pair of dtypes with the special values: NaN, +-inf, -0.0, floats beyond int64 (they
    saturate), halves' overflow and subnormals, int64 beyond 2^53 (rounded once straight to float)."""
    if src == I64:
        data = np.array(CAST_INTS, np.int64)
    elif src == BOOL:
        data = np.array([True, False, True, True], bool)
    else:
        data = np.array(CAST_VALUES, np.float64)
        if src == F16:
            data = data.astype(np.float16)  # NumPy's rounding gives the float16 inputs (with inf where they overflow)
    s, gs = pair(data, src)
    for dst in DTYPES:
        d, gd = C.empty(s.shape, dst, "cpu"), C.empty(s.shape, dst, "cuda")
        C.copy_(d, s)
        C.copy_(gd, gs)
        bits_equal(gd, d, f"{NAMES[src]} -> {NAMES[dst]}")
        # strided source and destination, and a broadcast source
        n = s.shape[0] // 2
        d2, gd2 = C.empty((2, n), dst, "cpu"), C.empty((2, n), dst, "cuda")
        C.copy_(d2._transpose(0, 1), s._slice(0, 0, 2 * n, 1)._view((n, 2)))
        C.copy_(gd2._transpose(0, 1), gs._slice(0, 0, 2 * n, 1)._view((n, 2)))
        bits_equal(gd2, d2, f"strided {NAMES[src]} -> {NAMES[dst]}")
        d3, gd3 = C.empty((3, 2, n), dst, "cpu"), C.empty((3, 2, n), dst, "cuda")
        C.copy_(d3, s._slice(0, 0, n, 1))
        C.copy_(gd3, gs._slice(0, 0, n, 1))
        bits_equal(gd3, d3, f"broadcast {NAMES[src]} -> {NAMES[dst]}")


def test_half_subnormals_round_trip():
    """Every float16 bit pattern through float32 and back, on both devices."""
    bits = np.arange(65536, dtype=np.uint16)
    h, gh = pair(bits.view(np.float16), F16)
    for dst in (F32, F64, BF16, I64, BOOL):
        d, gd = C.empty(h.shape, dst, "cpu"), C.empty(h.shape, dst, "cuda")
        C.copy_(d, h)
        C.copy_(gd, gh)
        bits_equal(gd, d, f"float16 -> {NAMES[dst]}")
    f32 = np.random.default_rng(5).standard_normal(4096).astype(np.float32) * np.float32(1e-5)
    f, gf = pair(f32, F32)
    for dst in (F16, BF16):
        d, gd = C.empty(f.shape, dst, "cpu"), C.empty(f.shape, dst, "cuda")
        C.copy_(d, f)
        C.copy_(gd, gf)
        bits_equal(gd, d, f"small float32 -> {NAMES[dst]}")


def test_copy_same_device_overlap_and_views():
    rng = np.random.default_rng(9)
    x, gx = pair(values(F32, (10,), rng, special=False), F32)
    C.copy_(x._slice(0, 1, 10, 1), x._slice(0, 0, 9, 1))  # must read the old values
    C.copy_(gx._slice(0, 1, 10, 1), gx._slice(0, 0, 9, 1))
    bits_equal(gx, x, "overlapping copy")
    C.copy_(x, x)
    C.copy_(gx, gx)
    bits_equal(gx, x, "copy onto itself")
    m, gm_ = pair(values(BF16, (6, 8), rng), BF16)
    for v, gv in zip(strided_views(m), strided_views(gm_)):
        o, go = C.empty((3, 4), BF16, "cpu"), C.empty((3, 4), BF16, "cuda")
        C.copy_(o, v)
        C.copy_(go, gv)
        bits_equal(go, o, "bf16 strided copy")
    same_error(lambda: C.copy_(x._expand((3, 10)), x), lambda: C.copy_(gx._expand((3, 10)), gx))


def test_copy_across_devices():
    """copy_ between cpu and cuda in both directions: casting, broadcasting, strided destinations."""
    rng = np.random.default_rng(11)
    src = cpu(values(F32, (4, 1), rng), F32)
    dst = C.empty((3, 4, 5), F64, "cuda")
    C.copy_(dst, src)
    ref = C.empty((3, 4, 5), F64, "cpu")
    C.copy_(ref, src)
    bits_equal(dst, ref, "cpu -> cuda, cast and broadcast")
    back = C.empty((5, 4, 3), F16, "cpu")
    C.copy_(back._permute((2, 1, 0)), dst)
    ref2 = C.empty((5, 4, 3), F16, "cpu")
    C.copy_(ref2._permute((2, 1, 0)), ref)
    np.testing.assert_array_equal(to_np(back), to_np(ref2))
    # fill_ with a 0-d tensor value on another device
    t = C.empty((2, 3), I64, "cuda")
    C.fill_(t, cpu(np.array(7), I64))
    np.testing.assert_array_equal(to_np(t), np.full((2, 3), 7))
    meta = C.empty((2, 3), F32, "meta")
    with pytest.raises(RuntimeError, match="meta"):
        C.copy_(C.empty((2, 3), F32, "cuda"), meta)


@pytest.mark.parametrize("dt", DTYPES, ids=NAMES.get)
def test_fill(dt):
    for value in [0, 1, -3, 2.75, True, False, float("nan"), float("-inf"), -0.0, 1e10, 2**40 + 1]:
        if dt in (I64, BOOL) and isinstance(value, float) and value != value:
            continue
        t, g = C.empty((4, 6), dt, "cpu"), C.empty((4, 6), dt, "cuda")
        C.fill_(t, 0)
        C.fill_(g, 0)
        for a, b in [(t, g), (t._slice(1, 1, 6, 2), g._slice(1, 1, 6, 2)), (t._transpose(0, 1), g._transpose(0, 1))]:
            try:
                C.fill_(a, value)
            except Exception:
                same_error(lambda: C.fill_(a, value), lambda: C.fill_(b, value))
                continue
            C.fill_(b, value)
            bits_equal(g, t, f"fill {NAMES[dt]} {value!r}")
    # an expanded view: every aliased element gets the value
    t, g = C.empty((1, 5), dt, "cpu"), C.empty((1, 5), dt, "cuda")
    C.fill_(t._expand((3, 5)), 1)
    C.fill_(g._expand((3, 5)), 1)
    bits_equal(g, t, "fill an expanded view")
    # creation functions go through fill_ on CUDA too
    for make in (gm.zeros, gm.ones):
        bits_equal(make(3, 4, dtype=NAMES[dt], device="cuda"), make(3, 4, dtype=NAMES[dt]), make.__name__)
    bits_equal(gm.full((2, 3), 5, dtype=NAMES[dt], device="cuda"), gm.full((2, 3), 5, dtype=NAMES[dt]), "full")


# ---- big, empty, errors, memory -------------------------------------------------------------------------------
def test_large_tensors_cover_the_grid_stride_loops():
    """More elements than threads in the grid (the emulator runs 4 blocks), in each of the kernel's three index
    paths: one collapsed dim, several dims with 32-bit division."""
    rng = np.random.default_rng(13)
    a, ga = pair(rng.standard_normal((37, 111)), F32)
    b, gb = pair(rng.standard_normal((111,)), F32)
    bits_equal(C.binary(MUL, ga, gb), C.binary(MUL, a, b), "contiguous, broadcast row")
    bits_equal(C.binary(ADD, ga._transpose(0, 1), ga._transpose(0, 1)), C.binary(ADD, a._transpose(0, 1),
                                                                                a._transpose(0, 1)), "transposed")
    v, gv = a._slice(0, 0, 37, 2)._slice(1, 1, 111, 3), ga._slice(0, 0, 37, 2)._slice(1, 1, 111, 3)
    bits_equal(C.unary(SQRT, gv), C.unary(SQRT, v), "strided 2-d")
    c, gc = C.empty((111, 37), F16, "cpu"), C.empty((111, 37), F16, "cuda")
    C.copy_(c, a._transpose(0, 1))
    C.copy_(gc, ga._transpose(0, 1))
    bits_equal(gc, c, "cast of a transposed tensor")


def test_empty_tensors():
    for shape in [(0,), (3, 0), (0, 4, 2)]:
        a, ga = pair(np.zeros(shape, np.float32), F32)
        bits_equal(C.binary(ADD, ga, 1), C.binary(ADD, a, 1), "empty binary")
        bits_equal(C.unary(EXP, ga), C.unary(EXP, a), "empty unary")
        bits_equal(C.clamp(ga, 0, 1), C.clamp(a, 0, 1), "empty clamp")
        bits_equal(C.where(C.binary(GT, ga, 0), ga, 0), C.where(C.binary(GT, a, 0), a, 0), "empty where")
        C.fill_(ga, 3)
        d = C.empty(shape, I64, "cuda")
        C.copy_(d, ga)
        assert tuple(d.shape) == shape


def test_mixing_devices_is_a_clear_error():
    a = cpu(np.ones(3), F32)
    g = a.cuda()
    for fn in [lambda: C.binary(ADD, a, g), lambda: C.binary(ADD, g, a), lambda: C.clamp(g, a, 1),
               lambda: C.where(C.binary(GT, g, 0), a, g), lambda: C.binary(ADD, g, g, out=a), lambda: a + g]:
        with pytest.raises(RuntimeError, match="device"):
            fn()


def peak_delta(dev, fn):
    """Bytes the op adds to the device's peak (its temporaries and result), and the bytes it leaves allocated."""
    before = gm.memory.memory_allocated(dev)
    gm.memory.reset_peak_memory_stats(dev)
    keep = fn()
    return gm.memory.max_memory_allocated(dev) - before, gm.memory.memory_allocated(dev) - before, keep


def test_allocations_are_the_same_on_cpu_and_cuda():
    """The estimator runs on meta and assumes meta == cpu == cuda allocations: the same temporaries (casts of
    operands of another dtype, copies away from an overlapping out) and outputs on every device."""
    rng = np.random.default_rng(17)
    a, ga = pair(values(I64, (64, 33), rng), I64)
    b, gb = pair(values(F16, (33,), rng), F16)
    x, gx = pair(values(F32, (50,), rng), F32)
    cases = [
        (lambda: C.binary(MUL, a, b), lambda: C.binary(MUL, ga, gb)),            # casts both operands
        (lambda: C.unary(EXP, a), lambda: C.unary(EXP, ga)),                      # int -> float32 temporary
        (lambda: C.clamp(a, b, 2.5), lambda: C.clamp(ga, gb, 2.5)),
        (lambda: C.copy_(x._slice(0, 1, 50, 1), x._slice(0, 0, 49, 1)),          # an overlap temporary
         lambda: C.copy_(gx._slice(0, 1, 50, 1), gx._slice(0, 0, 49, 1))),
        (lambda: C.binary(ADD, x, 1, out=C.empty((50,), F64, "cpu")),            # result then cast into out
         lambda: C.binary(ADD, gx, 1, out=C.empty((50,), F64, "cuda"))),
    ]
    for f_cpu, f_cuda in cases:
        p1, k1, _ = peak_delta("cpu", f_cpu)
        p2, k2, _ = peak_delta("cuda", f_cuda)
        assert (p1, k1) == (p2, k2)


# ---- autograd through the Tensor API --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_backward_of_composite_expressions(dtype):
    rng = np.random.default_rng(19)
    a_np, b_np = rng.uniform(0.5, 2, (4, 5)), rng.uniform(-2, 2, (5,))

    def run(device):
        a = gm.tensor(a_np, dtype=dtype, device=device).requires_grad_()
        b = gm.tensor(b_np, dtype=dtype, device=device).requires_grad_()
        y = ((a * b + a.exp()).clamp(-1, 6) / (b.abs() + 1)) ** 2
        z = gm.where(a > 1, y, a.sqrt() - b).maximum(a.log() * 0.5) - b.neg()
        (z * z.sign()).sum().backward()
        return z, a.grad, b.grad

    for got, ref in zip(run("cuda"), run("cpu")):
        assert_close(got, ref, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6 if dtype == "float32" else 1e-12)


def test_backward_with_broadcasting_and_half():
    """Gradients of broadcast operands are summed back to their shapes (a reduction) on CUDA as on the CPU."""
    rng = np.random.default_rng(23)
    x_np, w_np = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 1))

    def run(device, dtype):
        x = gm.tensor(x_np, dtype=dtype, device=device).requires_grad_()
        w = gm.tensor(w_np, dtype=dtype, device=device).requires_grad_()
        y = (x - w) * (x + 2) / 3
        y.backward(gm.ones(*y.shape, dtype=dtype, device=device))
        return y, x.grad, w.grad

    for dtype in ["float32", "float16", "bfloat16"]:
        for got, ref in zip(run("cuda", dtype), run("cpu", dtype)):
            assert_close(got, ref)
