"""Reductions on CUDA against the CPU (kernels/cuda/reduce.cu vs kernels/cpu/reduce.c).

Inputs are built once on the CPU and moved byte for byte to CUDA. Sums, means, products and variances may add in
another order on the GPU (both accumulate in double, so the difference is far below the output's precision);
integer results, extremes and arg indices are exact. Every dim combination, keepdim, dtype arguments,
non-contiguous inputs, shapes that take each of the kernel's work splits (one block per output, many outputs
per block), ties and NaN for the arg reductions, var's correction, empty extents, errors, memory, autograd."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import assert_close, requires_cuda, to_np

pytestmark = [requires_cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

C = gm._C
F32, F64, F16, BF16, I64, BOOL = range(6)
SUM, MEAN, AMAX, AMIN, PROD = range(5)
NAMES = {F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I64: "int64", BOOL: "bool"}
ALL_DT = [F32, F64, F16, BF16, I64, BOOL]
FLOAT_DT = [F32, F64, F16, BF16]
# Outputs of 16-bit type round the same double sum; a different summation order can only flip a rounding tie.
TOL = {F32: (1e-6, 1e-7), F64: (1e-13, 1e-300), F16: (1e-3, 1e-7), BF16: (8e-3, 1e-30)}


def pair(arr, dt):
    arr = np.asarray(arr)
    if dt == BF16:
        arr = arr.astype(np.float32)
    t = C.from_numpy(arr, dt, "cpu")
    return t, t.cuda()


def rand(dt, shape, rng):
    if dt == BOOL:
        return rng.random(shape) < 0.5
    if dt == I64:
        return rng.integers(-5, 6, size=shape).astype(np.int64)
    return rng.uniform(-2, 2, size=shape)


def check(got, ref, what="", exact=False, scale=None):
    """scale: the size of the summed terms (sum of |x|), for long sums whose result cancels: the summation order
    then moves the result by about eps * scale, not eps * |result|."""
    assert got.device.type == "cuda" and ref.device.type == "cpu", what
    assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape), what
    a, b = to_np(got), to_np(ref)
    if exact or a.dtype.kind != "f":
        np.testing.assert_array_equal(a, b, err_msg=what)
    else:
        r, t = TOL[ref._dtype]
        np.testing.assert_allclose(a, b, rtol=r, atol=t if scale is None else max(t, r * scale), equal_nan=True,
                                   err_msg=what)


def dim_sets(nd):
    """None, every single dim (also negative), every combination, and ()."""
    out = [None, ()]
    for k in range(1, nd + 1):
        out += list(itertools.combinations(range(nd), k))
    return out + [-1, (-1, 0)]


# ---- sum, mean, prod, amax, amin -------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ALL_DT, ids=NAMES.get)
@pytest.mark.parametrize("op", [SUM, MEAN, AMAX, AMIN, PROD], ids=["sum", "mean", "amax", "amin", "prod"])
def test_every_dim_combination(op, dt):
    rng = np.random.default_rng(op * 10 + dt)
    x = rand(dt, (3, 4, 5), rng)
    if op == PROD and dt in FLOAT_DT:
        x = rng.uniform(0.5, 1.5, (3, 4, 5))
    a, ga = pair(x, dt)
    kw = {"dtype": F32} if op == MEAN and dt in (I64, BOOL) else {}
    for dims, keepdim in itertools.product(dim_sets(3), [False, True]):
        ref = C.reduce(op, a, dims, keepdim, **kw)
        got = C.reduce(op, ga, dims, keepdim, **kw)
        check(got, ref, f"op {op} {NAMES[dt]} dims={dims} keepdim={keepdim}", exact=op in (AMAX, AMIN))
        # the same over a non-contiguous view (permuted and sliced with a step)
        v, gv = a._permute((2, 0, 1))._slice(0, 0, 5, 2), ga._permute((2, 0, 1))._slice(0, 0, 5, 2)
        check(C.reduce(op, gv, dims, keepdim, **kw), C.reduce(op, v, dims, keepdim, **kw),
              f"strided op {op} {NAMES[dt]} dims={dims}", exact=op in (AMAX, AMIN))


@pytest.mark.parametrize("shape,dims", [
    ((3, 1000), 1),          # long contiguous rows: one block per output
    ((1000, 3), 0),          # a column reduction with few outputs: the reduced extent split across threads
    ((700, 40), 0),          # many neighbouring outputs per block
    ((40, 700), 0),
    ((6, 50, 7), (0, 2)),    # reduced dims that do not merge: 32-bit index arithmetic per element
    ((2, 3, 33, 17), (0, 2, 3)),
    ((5000,), None),         # one output over more elements than the block has threads
    ((300, 7), 1),           # short rows: several outputs per block
])
def test_work_splits(shape, dims):
    rng = np.random.default_rng(len(shape) * 100 + sum(shape))
    for dt in (F32, F16, I64):
        a, ga = pair(rand(dt, shape, rng), dt)
        for op in (SUM, MEAN, AMAX, AMIN):
            kw = {"dtype": F64} if op == MEAN and dt == I64 else {}
            check(C.reduce(op, ga, dims, False, **kw), C.reduce(op, a, dims, False, **kw),
                  f"op {op} {NAMES[dt]} {shape} over {dims}", exact=op in (AMAX, AMIN))
        for is_max in (True, False):
            fn = C.argmax if is_max else C.argmin
            d = dims if isinstance(dims, int) or dims is None else None
            check(fn(ga, d), fn(a, d), f"arg {NAMES[dt]} {shape} {d}")
        if dt != I64:
            check(C.var(ga, dims), C.var(a, dims), f"var {NAMES[dt]} {shape} over {dims}")
    # transposed input: the reduced dim becomes the strided one
    a, ga = pair(rng.standard_normal(shape), F32)
    nd = len(shape)
    perm = tuple(reversed(range(nd)))
    check(C.reduce(SUM, ga._permute(perm), dims), C.reduce(SUM, a._permute(perm), dims), "transposed sum")


def test_dtype_arguments():
    rng = np.random.default_rng(5)
    for dt, out in [(I64, F64), (BOOL, F32), (F16, F32), (BF16, F64), (F32, F64), (BOOL, I64), (I64, F16),
                    (F16, F16)]:
        a, ga = pair(rand(dt, (6, 7), rng), dt)
        for op in (SUM, PROD, MEAN):
            if op == MEAN and out == I64:
                continue
            for dims in (None, 0, 1):
                check(C.reduce(op, ga, dims, dtype=out), C.reduce(op, a, dims, dtype=out),
                      f"op {op} {NAMES[dt]} -> {NAMES[out]}")
    # sum/prod of integers and bools default to int64, and int64 arithmetic wraps
    big, gbig = pair(np.array([2**62, 2**62, 2**62, 3], np.int64), I64)
    for op in (SUM, PROD):
        check(C.reduce(op, gbig), C.reduce(op, big), "int64 wrap-around")
    b, gb = pair(rng.random((9, 4)) < 0.5, BOOL)
    check(C.reduce(SUM, gb, 0), C.reduce(SUM, b, 0), "count of trues")


def test_nan_and_inf():
    x = np.array([[1.0, np.nan, 3.0, -np.inf], [np.inf, 2.0, -1.0, 0.5], [np.nan, np.nan, 0.0, -0.0]])
    for dt in FLOAT_DT:
        a, ga = pair(x, dt)
        for op, dims in itertools.product([SUM, MEAN, AMAX, AMIN, PROD], [None, 0, 1]):
            check(C.reduce(op, ga, dims), C.reduce(op, a, dims), f"op {op} {NAMES[dt]} {dims}")


# ---- arg reductions -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ALL_DT, ids=NAMES.get)
def test_arg_reductions_first_index_and_nan(dt):
    rng = np.random.default_rng(40 + dt)
    x = rng.integers(0, 3, size=(4, 6, 5)).astype(np.float64)  # many ties
    if dt == BOOL:
        x = x > 1
    if dt in FLOAT_DT:
        x[1, 3, 2] = np.nan
        x[1, 4, 2] = np.nan
        x[2, :, 0] = np.nan
        x[3, 2, 1] = -0.0
    a, ga = pair(x, dt)
    for is_max in (True, False):
        fn = C.argmax if is_max else C.argmin
        mm = C.max_dim if is_max else C.min_dim
        for dim, keepdim in itertools.product([None, 0, 1, 2, -1], [False, True]):
            check(fn(ga, dim, keepdim), fn(a, dim, keepdim), f"arg{'max' if is_max else 'min'} dim={dim}")
            if dim is not None:
                (gv, gi), (v, i) = mm(ga, dim, keepdim), mm(a, dim, keepdim)
                check(gv, v, "values", exact=True)
                check(gi, i, "indices")
        v, gv = a._transpose(0, 2)._slice(1, 0, 6, 2), ga._transpose(0, 2)._slice(1, 0, 6, 2)
        for dim in (None, 0, 1, 2):
            check(fn(gv, dim), fn(v, dim), f"strided arg dim={dim}")


def test_arg_ties_across_threads():
    """Equal maxima far apart (in different threads' strides) and at the very end: the first index wins."""
    x = np.zeros((3, 2000))
    x[0, [5, 700, 1999]] = 4.0
    x[1, [1999]] = 1.0
    x[2, [1000, 3]] = np.nan
    for dt in (F32, F64, I64):
        y = np.nan_to_num(x, nan=-1.0) if dt == I64 else x
        a, ga = pair(y, dt)
        for fn in (C.argmax, C.argmin):
            check(fn(ga, 1), fn(a, 1), f"{NAMES[dt]} ties")
            check(fn(ga._transpose(0, 1), 0), fn(a._transpose(0, 1), 0), f"{NAMES[dt]} ties, transposed")
            check(fn(ga), fn(a), f"{NAMES[dt]} flattened")


# ---- long extents split across blocks (csrc/ops_reduce.c: split_parts) ------------------------------------------
SPLIT_MIN = 65536
LONG = 3 * SPLIT_MIN + 77       # 3 pieces of the extent


@pytest.mark.parametrize("dt", [F32, F64, F16, I64, BOOL], ids=NAMES.get)
def test_long_extent_split_across_blocks(dt):
    rng = np.random.default_rng(90 + dt)
    x = rand(dt, (LONG,), rng)
    a, ga = pair(x, dt)
    scale = 2.0 * LONG  # |x| <= 2
    ops = [SUM, MEAN, AMAX, AMIN] if dt not in (I64, BOOL) else [SUM, AMAX, AMIN, PROD]
    for op in ops:
        check(C.reduce(op, ga, None), C.reduce(op, a, None), f"op {op} all", scale=scale / (LONG if op == MEAN else 1))
    b, gb = pair(rand(dt, (2, LONG), rng), dt)      # two outputs, each split
    check(C.reduce(SUM, gb, 1), C.reduce(SUM, b, 1), "rows", scale=scale)
    check(C.reduce(SUM, gb._transpose(0, 1), 0), C.reduce(SUM, b._transpose(0, 1), 0), "strided rows", scale=scale)
    c, gc = pair(rand(dt, (LONG, 3), rng), dt)       # a column sum: outputs adjacent, extent strided
    check(C.reduce(SUM, gc, 0, dtype=F64), C.reduce(SUM, c, 0, dtype=F64), "columns", scale=scale)


def test_long_prod_and_arg_across_pieces():
    x = np.ones(LONG)
    x[[10, 2 * SPLIT_MIN + 5]] = 2.0               # the product's factors lie in two pieces
    a, ga = pair(x, F64)
    check(C.reduce(PROD, ga, None), C.reduce(PROD, a, None), "prod")
    y = np.zeros((2, LONG))
    y[0, [3 * SPLIT_MIN, 5, SPLIT_MIN + 1]] = 7.0  # ties in three pieces: the first index wins
    y[1, [2 * SPLIT_MIN + 9, LONG - 1]] = np.nan   # the first NaN wins, from a later piece
    for dt in (F32, F64):
        b, gb = pair(y, dt)
        for fn in (C.argmax, C.argmin):
            check(fn(gb, 1), fn(b, 1), f"{fn.__name__} {NAMES[dt]}")
        (gv, gi), (v, i) = C.max_dim(gb, 1), C.max_dim(b, 1)
        check(gv, v, "values", exact=True)
        check(gi, i, "indices")
        assert to_np(gi).tolist() == [5, 2 * SPLIT_MIN + 9]
        check(C.argmax(gb), C.argmax(b), "flattened")


def test_long_extent_scratch_is_allocated_alike_everywhere():
    """The partials' scratch (16 bytes per output and piece, tagged workspace) is allocated on cpu, meta and cuda
    alike, so estimates made on meta or the CPU stay exact for CUDA."""
    rng = np.random.default_rng(91)
    x = rng.standard_normal((2, LONG)).astype(np.float32)
    results = {}
    for dev in ("cpu", "meta", "cuda"):
        t = C.from_numpy(x, F32, "cpu")
        t = t if dev == "cpu" else t.to(dev) if dev == "cuda" else gm.empty(2, LONG, device="meta")
        gm.memory.reset_peak_memory_stats(dev)
        st0 = gm.memory.memory_stats(dev)
        out = C.reduce(SUM, t, 1)
        st = gm.memory.memory_stats(dev)
        results[dev] = (st["by_category"]["workspace"]["peak"] - st0["by_category"]["workspace"]["current"],
                        st["num_allocs"] - st0["num_allocs"], st["allocated"]["current"] - st0["allocated"]["current"])
        del out
    assert results["cpu"] == results["meta"] == results["cuda"] == (512, 2, 512)   # 2 x 3 x 16 = 96 B -> 512 B
    # short extents are not split: no scratch
    gm.memory.reset_peak_memory_stats("cpu")
    w0 = gm.memory.memory_stats("cpu")["num_allocs"]
    C.reduce(SUM, C.from_numpy(x[:, :2 * SPLIT_MIN - 1], F32, "cpu"), 1)
    assert gm.memory.memory_stats("cpu")["num_allocs"] - w0 == 2   # the input copy and the output


# ---- var / std ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOAT_DT, ids=NAMES.get)
def test_var_every_dim_and_correction(dt):
    rng = np.random.default_rng(60 + dt)
    a, ga = pair(rng.standard_normal((4, 3, 5)) * 3 + 1000.0 * (dt == F64), dt)  # a big mean: two passes matter
    for dims, corr, keepdim in itertools.product(dim_sets(3), [0.0, 1.0, 2.0, 4.0, 20.0], [False, True]):
        check(C.var(ga, dims, corr, keepdim), C.var(a, dims, corr, keepdim), f"var {dims} corr={corr}")
    g = gm.tensor(rng.standard_normal((6, 7)), dtype=NAMES[dt])
    for kw in ({}, {"dim": 0}, {"dim": 1, "unbiased": False}, {"dim": (0, 1), "correction": 0, "keepdim": True}):
        assert_close(g.cuda().std(**kw), g.std(**kw), rtol=TOL[dt][0] * 2, atol=TOL[dt][1])


# ---- empty, errors, memory --------------------------------------------------------------------------------------
def test_empty_extents_and_outputs():
    a, ga = pair(np.zeros((3, 0, 4), np.float32), F32)
    for op in (SUM, MEAN, PROD):
        for dims in (None, 1, (0, 1), 0, 2, ()):
            check(C.reduce(op, ga, dims), C.reduce(op, a, dims), f"empty op {op} {dims}")
    check(C.var(ga, 1), C.var(a, 1), "var over an empty extent")
    check(C.reduce(AMAX, ga, 0), C.reduce(AMAX, a, 0), "amax with no outputs")  # (0, 4): nothing to compute
    check(C.argmin(ga, 2), C.argmin(a, 2), "argmin with no outputs")
    for fn in (lambda t: C.reduce(AMAX, t), lambda t: C.argmax(t, 1), lambda t: C.max_dim(t, 1)):
        with pytest.raises(ValueError) as e1:
            fn(a)
        with pytest.raises(ValueError) as e2:
            fn(ga)
        assert str(e1.value) == str(e2.value)
    i, gi = pair(np.zeros((0,), np.int64), I64)
    check(C.reduce(SUM, gi), C.reduce(SUM, i), "sum of no ints")
    check(C.reduce(PROD, gi), C.reduce(PROD, i), "product of no ints")


def test_errors_are_the_same_on_both_devices():
    a, ga = pair(np.ones((2, 3)), I64)
    for fn in (lambda t: C.reduce(MEAN, t), lambda t: C.var(t), lambda t: C.reduce(SUM, t, 5),
               lambda t: C.reduce(SUM, t, (0, 0)), lambda t: C.reduce(AMAX, t, dtype=F32)):
        with pytest.raises(Exception) as e1:
            fn(a)
        with pytest.raises(Exception) as e2:
            fn(ga)
        assert type(e1.value) is type(e2.value) and str(e1.value) == str(e2.value)


def test_allocations_are_the_same_on_cpu_and_cuda():
    rng = np.random.default_rng(70)
    a, ga = pair(rng.standard_normal((33, 17)), F16)
    for f in (lambda t: C.reduce(SUM, t, 0), lambda t: C.reduce(MEAN, t, None, True, dtype=F32),
              lambda t: C.max_dim(t, 1), lambda t: C.argmin(t), lambda t: C.var(t, (0, 1))):
        deltas = []
        for dev, t in (("cpu", a), ("cuda", ga)):
            before = gm.memory.memory_allocated(dev)
            gm.memory.reset_peak_memory_stats(dev)
            keep = f(t)
            deltas.append((gm.memory.max_memory_allocated(dev) - before, gm.memory.memory_allocated(dev) - before))
            del keep
        assert deltas[0] == deltas[1]


# ---- autograd -------------------------------------------------------------------------------------------------
def test_backward_through_reductions():
    rng = np.random.default_rng(80)
    x_np = rng.standard_normal((4, 6, 5))
    x_np[0, 1, 2] = x_np[0, 1, 3] = 9.0  # a tie for amax: the gradient is shared like on the CPU

    def run(device, dtype):
        x = gm.tensor(x_np, dtype=dtype, device=device).requires_grad_()
        y = (x.sum(1, keepdim=True) * x).mean(2) + x.amax((0, 2)).sum() + x.var(0).sum()
        vals, idx = x.max(2)
        z = y.sum() + vals.sum() * 0.5 + x.std() + x.mean()
        z.backward()
        return z, x.grad, idx

    for dtype in ("float32", "float64"):
        (gz, gg, gi), (z, g, i) = run("cuda", dtype), run("cpu", dtype)
        assert_close(gz, z, rtol=1e-5 if dtype == "float32" else 1e-12)
        assert_close(gg, g, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6 if dtype == "float32" else 1e-12)
        assert_close(gi, i)
