"""CUDA indexing (kernels/cuda/index.cu) against the CPU kernels from the same inputs: index (gather), index_put_
(plain and accumulating: the per-column path, bit-identical to the CPU, and the atomic per-element path),
nonzero_flat, cat, bool-mask and integer indexing through the Tensor API with autograd, bounds and device errors,
and the allocator's bytes (the same on cuda as on cpu). Runs on a GPU or on the emulator (GPUMEMNET_CUDA=emu)."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda

F32, F64, F16, BF16, I64, BOOL = range(6)
ALL = [F32, F64, F16, BF16, I64, BOOL]
NP = {F32: np.float32, F64: np.float64, F16: np.float16, BF16: np.float32, I64: np.int64, BOOL: np.bool_}
rng = np.random.default_rng(1)


def T(a, dtype=None, device="cpu"):
    return _C.from_numpy(np.asarray(a), dtype=dtype, device=device)


def both(a, dtype=None):
    """The same values as a cpu and a cuda tensor."""
    return T(a, dtype), T(a, dtype, "cuda")


def both_strided(a, dtype):
    """The same values in a non-contiguous layout (reversed strides) on cpu and on cuda: made as the transposed
    contiguous array and viewed back, so that no device copy kernel is involved."""
    a = np.asarray(a)
    if a.ndim < 2:
        return both(a, dtype)
    perm = tuple(reversed(range(a.ndim)))
    t = np.ascontiguousarray(a.transpose(perm))
    return T(t, dtype)._permute(perm), T(t, dtype, "cuda")._permute(perm)


def N(t):
    """NumPy copy of any tensor (bfloat16 as float32). A permuted cuda view is read through its contiguous order
    (copying it to the host as it is would need a device copy kernel: another family's)."""
    if t._device != "cpu" and not t._is_contiguous():
        perm = sorted(range(t.ndim), key=lambda d: -t._strides[d])
        back = np.argsort(perm)
        return N(t._permute(tuple(perm))).transpose(back)
    t = t.cpu()
    if t._dtype == BF16:
        f = _C.empty(t.shape, F32, "cpu")
        _C.copy_(f, t)
        t = f
    return np.array(t.numpy())


def sample(shape, dtype):
    """Values exact in every dtype (small multiples of 1/4), so that sums in any order are exact too."""
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype == I64:
        return rng.integers(-1000, 1000, shape)
    return (rng.integers(-64, 64, shape) / 4.0).astype(NP[dtype])


def same(cuda_t, cpu_t):
    assert cuda_t._device.startswith("cuda") and cuda_t._dtype == cpu_t._dtype
    assert tuple(cuda_t.shape) == tuple(cpu_t.shape)
    np.testing.assert_array_equal(N(cuda_t), N(cpu_t))


# ---- index (gather) -------------------------------------------------------------------------------------------

CASES = [((5,), 0, (3,)), ((5,), -1, ()), ((4, 6), 0, (2, 3)), ((4, 6), 1, (7,)), ((3, 4, 5), 1, (2, 2)),
         ((3, 4, 5), 2, (6,)), ((3, 4, 5), -3, (1, 2, 1)), ((2, 3, 4, 5), 2, (0,)), ((2, 0, 3), 2, (4,)),
         ((3, 40, 2), 1, (50,)), ((6, 70), 0, (9,))]  # the last two: rows of >= 32 (one row per block)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,dim,ishape", CASES)
def test_index_matches_cpu(dtype, shape, dim, ishape):
    size = shape[dim]
    if size == 0 and np.prod(ishape) > 0:
        pytest.skip("nothing to index in an empty dim")
    a = sample(shape, dtype)
    idx = rng.integers(-size, size, ishape) if size else np.zeros(ishape, np.int64)
    ic, ig = both(idx)
    for ac, ag in (both(a, dtype), both_strided(a, dtype)):
        out = _C.index(ag, dim, ig)
        assert out._is_contiguous()
        same(out, _C.index(ac, dim, ic))


def test_index_expanded_sliced_and_zero_d_inputs():
    base_c, base_g = both(np.array([1.0, 2.0, 3.0], np.float32))
    same(_C.index(base_g._expand((4, 3)), 0, T([3, 0], device="cuda")), _C.index(base_c._expand((4, 3)), 0, T([3, 0])))
    m = sample((6, 8), F32)
    mc, mg = both(m)
    same(_C.index(mg._slice(1, 1, None, 2), 1, T([3, 0, -1], device="cuda")),
         _C.index(mc._slice(1, 1, None, 2), 1, T([3, 0, -1])))
    sc, sg = both(np.array(7.5))
    same(_C.index(sg, 0, T([0, -1, 0], device="cuda")), _C.index(sc, 0, T([0, -1, 0])))
    assert _C.index(sg, 0, T(np.array(0), device="cuda")).shape == ()


def test_index_large_rows():
    a = sample((300, 64), F32)
    idx = rng.integers(0, 300, 2000)
    (ac, ag), (ic, ig) = both(a), both(idx)
    same(_C.index(ag, 0, ig), _C.index(ac, 0, ic))
    same(_C.index(ag, 1, T(idx % 64, device="cuda")), _C.index(ac, 1, T(idx % 64)))


# ---- index_put_ ---------------------------------------------------------------------------------------------

PUT_CASES = [c for c in CASES if 0 not in c[0]]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,dim,ishape", PUT_CASES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_cpu(dtype, shape, dim, ishape, accumulate):
    # few indices per column: the per-column kernel, which has the CPU's order (the last duplicate wins; sums
    # in index order), so results are bit-identical even for inexact sums
    a = sample(shape, dtype)
    d = dim % len(shape)
    idx = rng.integers(-shape[d], shape[d], ishape)  # duplicates likely
    v = sample(shape[:d] + ishape + shape[d + 1:], dtype)
    (vc, vg), (ic, ig) = both(v, dtype), both(idx)
    for dc, dg in (both(a, dtype), both_strided(a, dtype)):
        assert _C.index_put_(dg, dim, ig, vg, accumulate) is dg
        _C.index_put_(dc, dim, ic, vc, accumulate)
        same(dg, dc)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_index_put_accumulate_per_column_is_bit_identical(dtype):
    # inexact sums (random floats, many duplicates): the per-column kernel adds in index order like the CPU
    a = rng.standard_normal((5, 3)).astype(np.float32)
    idx = rng.integers(0, 5, 60)
    v = rng.standard_normal((60, 3)).astype(np.float32)
    (dc, dg), (ic, ig), (vc, vg) = both(a, dtype), both(idx), both(v, dtype)
    _C.index_put_(dg, 0, ig, vg, True)
    _C.index_put_(dc, 0, ic, vc, True)
    same(dg, dc)


@pytest.mark.parametrize("dtype", ALL)
def test_index_put_accumulate_many_indices_few_columns(dtype):
    # many indices into few columns: the atomic per-element kernel. Values of 0/1 (or multiples of 1/4 for the
    # wide types) keep every partial sum exact, so any order gives the CPU's result exactly.
    n = 200
    idx = rng.integers(-8, 8, n)
    v = (rng.random((n, 2)) < 0.5) if dtype in (BOOL, F16, BF16) else sample((n, 2), dtype)
    a = np.zeros((8, 2), NP[dtype])
    (dc, dg), (ic, ig), (vc, vg) = both(a, dtype), both(idx), both(v, dtype)
    _C.index_put_(dg, 0, ig, vg, True)
    _C.index_put_(dc, 0, ic, vc, True)
    same(dg, dc)
    # 1-d, one column
    (dc, dg), (vc, vg) = both(np.zeros(8, NP[dtype]), dtype), both(v[:, 0], dtype)
    _C.index_put_(dg, 0, ig, vg, True)
    _C.index_put_(dc, 0, ic, vc, True)
    same(dg, dc)


def test_index_put_accumulate_embedding_gradient_inexact():
    # the backward of an embedding lookup with narrow rows: atomics, so only the rounding differs
    idx = rng.integers(0, 50, 30000)
    g = rng.standard_normal((30000, 16)).astype(np.float32)
    (dc, dg), (ic, ig), (vc, vg) = both(np.zeros((50, 16), np.float32)), both(idx), both(g)
    _C.index_put_(dg, 0, ig, vg, True)
    _C.index_put_(dc, 0, ic, vc, True)
    assert_close(dg, dc, rtol=1e-4, atol=1e-3)


def test_index_put_accumulate_many_columns_many_indices_is_bit_identical():
    # >= 4096 columns: the per-column kernel even with many indices, so inexact sums match the CPU exactly
    idx = rng.integers(0, 6, 100)
    v = rng.standard_normal((100, 4096)).astype(np.float32)
    (dc, dg), (ic, ig), (vc, vg) = both(np.zeros((6, 4096), np.float32)), both(idx), both(v)
    _C.index_put_(dg, 0, ig, vg, True)
    _C.index_put_(dc, 0, ic, vc, True)
    same(dg, dc)


@pytest.mark.parametrize("dtype", ALL)
def test_index_put_many_unique_indices(dtype):
    # a scatter of a permutation (what x[mask] = v produces): the per-element kernel, exact
    perm = rng.permutation(500)
    v = sample((500,), dtype)
    (dc, dg), (ic, ig), (vc, vg) = both(sample((500,), dtype), dtype), both(perm), both(v, dtype)
    _C.index_put_(dg, 0, ig, vg, False)
    _C.index_put_(dc, 0, ic, vc, False)
    same(dg, dc)


def test_index_put_many_duplicates_without_accumulate_keeps_one_of_them():
    # documented CUDA rule (as PyTorch's): with duplicates and many indices per column, one duplicate's value
    idx = rng.integers(0, 4, 300)
    v = np.arange(300, dtype=np.float64)
    dg = T(np.full(4, -1.0), device="cuda")
    _C.index_put_(dg, 0, T(idx, device="cuda"), T(v, device="cuda"), False)
    out = N(dg)
    for k in range(4):
        assert out[k] in v[idx == k]


def test_index_put_broadcast_values_and_numbers():
    a = sample((3, 5), F64)
    idx = np.array([[4, 0], [1, 4]])
    (dc, dg), (ic, ig) = both(a), both(idx)
    for vals in (np.array(2.5), np.array([10.0, 20.0]), np.array([[1.0], [2.0], [3.0]])[:, :, None]):
        vc, vg = both(vals)
        _C.index_put_(dg, 1, ig, vg, False)
        _C.index_put_(dc, 1, ic, vc, False)
        same(dg, dc)
    _C.index_put_(dg, 1, ig, 1.0, True)  # a Python number
    _C.index_put_(dc, 1, ic, 1.0, True)
    same(dg, dc)
    bc, bg = both(np.array([1, 2, 3]))
    _C.index_put_(bg, 0, T([2, 0], device="cuda"), 7, True)
    _C.index_put_(bc, 0, T([2, 0]), 7, True)
    same(bg, bc)


def test_index_put_with_values_aliasing_the_destination():
    ac, ag = both(np.arange(6.0))
    _C.index_put_(ag, 0, T([1, 2, 3], device="cuda"), ag._slice(0, 0, 3, 1), False)
    np.testing.assert_array_equal(N(ag), [0, 0, 1, 2, 4, 5])


def test_index_put_bumps_version_and_writes_through_views():
    base = T(np.zeros((3, 4), np.float32), device="cuda")
    col = base._select(1, 2)
    v = base._version
    _C.index_put_(col, 0, T([0, 2], device="cuda"), 1.0, True)
    assert base._version == v + 1
    expect = np.zeros((3, 4))
    expect[[0, 2], 2] = 1
    np.testing.assert_array_equal(N(base), expect)


def test_index_put_zero_d_destination_and_empty_index():
    s = T(np.array(1.0), device="cuda")
    _C.index_put_(s, 0, T([0, 0, -1], device="cuda"), 2.0, True)
    assert N(s) == 7.0
    a = sample((3,), F32)
    ag = T(a, device="cuda")
    _C.index_put_(ag, 0, T(np.zeros(0, np.int64), device="cuda"), T(np.zeros(0, np.float32), device="cuda"), True)
    np.testing.assert_array_equal(N(ag), a)


# ---- nonzero_flat ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (4, 0, 2), (2, 3, 4, 5), (300, 257)])
def test_nonzero_flat_matches_cpu(shape):
    m = np.asarray(rng.random(shape) < 0.4)
    for mc, mg in (both(m), both_strided(m, BOOL)):
        out = _C.nonzero_flat(mg)
        same(out, _C.nonzero_flat(mc))


@pytest.mark.parametrize("p", [0.0, 0.001, 0.5, 1.0])
def test_nonzero_flat_large(p):
    m = rng.random(300_007) < p
    out = _C.nonzero_flat(T(m, device="cuda"))
    assert out._device == "cuda:0"
    np.testing.assert_array_equal(N(out), np.flatnonzero(m))


# ---- cat --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F16, I64, BOOL])
def test_cat_matches_cpu(dtype):
    parts = [sample(s, dtype) for s in [(2, 3), (2, 1), (2, 5)]]
    pairs = [both(p, dtype) for p in parts]
    same(_C.cat([g for _, g in pairs], 1), _C.cat([c for c, _ in pairs], 1))


# ---- the Tensor API with autograd ---------------------------------------------------------------------------

def pair(a, requires_grad=True):
    c = gm.tensor(a)
    g = gm.tensor(a).cuda()
    if requires_grad:
        c.requires_grad_()
        g.requires_grad_()
    return c, g


@pytest.mark.parametrize("key", ["ints", "neg_ints", "mask", "mask2d", "slice_then_ints", "ints_dim1"])
def test_getitem_forward_and_backward(key):
    a = rng.standard_normal((6, 5)).astype(np.float32)
    keys = {
        "ints": lambda dev: gm.tensor(np.array([0, 3, 3, 5])).to(dev),
        "neg_ints": lambda dev: gm.tensor(np.array([-1, 0, -1])).to(dev),
        "mask": lambda dev: gm.tensor(np.array([True, False, True, True, False, True])).to(dev),
        "mask2d": lambda dev: gm.tensor(a > 0).to(dev),
        "slice_then_ints": lambda dev: (slice(1, None), gm.tensor(np.array([0, 0, 2])).to(dev)),
        "ints_dim1": lambda dev: (slice(None), gm.tensor(np.array([4, 1, 1])).to(dev)),
    }
    xc, xg = pair(a)
    yc, yg = xc[keys[key]("cpu")], xg[keys[key]("cuda")]
    assert_close(yg, yc, exact=True)
    g = rng.standard_normal(tuple(yc.shape)).astype(np.float32)
    yc.backward(gm.tensor(g))
    yg.backward(gm.tensor(g).cuda())
    assert_close(xg.grad, xc.grad)  # duplicates add up: exact here, tolerance in case of other orders


@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16, gm.float64])
def test_getitem_backward_other_float_dtypes(dtype):
    a = rng.standard_normal((5, 4))
    xc = gm.tensor(a).to(dtype).requires_grad_()
    xg = gm.tensor(a).to(dtype).cuda().requires_grad_()
    idx = np.array([1, 1, 4, 0])
    yc, yg = xc[gm.tensor(idx)], xg[gm.tensor(idx).cuda()]
    g = gm.tensor(rng.standard_normal((4, 4))).to(dtype)
    yc.backward(g)
    yg.backward(g.cuda())
    assert_close(yg, yc, exact=True)
    assert_close(xg.grad, xc.grad, exact=True)


def test_setitem_matches_cpu():
    a = rng.standard_normal((6, 5)).astype(np.float32)
    xc, xg = pair(a, requires_grad=False)
    mask = a > 0.5
    xc[gm.tensor(mask)] = 0.0
    xg[gm.tensor(mask).cuda()] = 0.0
    idx = np.array([0, 2])
    v = rng.standard_normal((2, 5)).astype(np.float32)
    xc[gm.tensor(idx)] = gm.tensor(v)
    xg[gm.tensor(idx).cuda()] = gm.tensor(v).cuda()
    assert_close(xg, xc, exact=True)


# ---- errors --------------------------------------------------------------------------------------------------

def test_out_of_bounds_index_raises_like_the_cpu_and_changes_nothing():
    a = sample((3, 5), F32)
    ag = T(a, device="cuda")
    with pytest.raises(IndexError, match=r"index: index 5 is out of bounds for dimension 1 with size 5"):
        _C.index(ag, 1, T([0, 5, 7], device="cuda"))
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 0 with size 3"):
        _C.index(ag, 0, T([[0], [-4]], device="cuda"))
    with pytest.raises(IndexError, match="index_put_: index 4 is out of bounds for dimension 0 with size 3"):
        _C.index_put_(ag, 0, T([0, 1, 4, -9], device="cuda"), 1.0, True)
    np.testing.assert_array_equal(N(ag), a)


def test_mixing_cpu_and_cuda_is_a_clear_error():
    ac, ag = both(sample((3, 4), F32))
    with pytest.raises(RuntimeError, match="same device"):
        _C.index(ag, 0, T([0]))
    with pytest.raises(RuntimeError, match="same device"):
        _C.index(ac, 0, T([0], device="cuda"))
    with pytest.raises(RuntimeError, match="same device"):
        _C.index_put_(ag, 0, T([0], device="cuda"), T(np.zeros((1, 4), np.float32)))
    with pytest.raises(RuntimeError, match="same device"):
        _C.cat([ac, ag], 0)


# ---- memory: the same allocations on cuda as on cpu ----------------------------------------------------------

def allocated_by(fn, device):
    mem = gm.memory
    base = mem.memory_allocated(device)
    mem.reset_peak_memory_stats(device)
    keep = fn()
    return mem.memory_allocated(device) - base, mem.max_memory_allocated(device) - base, keep


@pytest.mark.parametrize("op", ["index", "index_put_", "index_put_number", "nonzero_flat"])
def test_cuda_allocates_what_the_cpu_allocates(op):
    a = sample((40, 30), F32)
    idx = rng.integers(0, 40, 25)
    v = sample((25, 30), F32)
    m = rng.random((40, 30)) < 0.3

    def run(dev):
        at, it, vt, mt = T(a, device=dev), T(idx, device=dev), T(v, device=dev), T(m, device=dev)
        fns = {"index": lambda: _C.index(at, 0, it),
               "index_put_": lambda: _C.index_put_(at, 0, it, vt, True),
               "index_put_number": lambda: _C.index_put_(at, 0, it, 2.0, False),
               "nonzero_flat": lambda: _C.nonzero_flat(mt)}
        return allocated_by(fns[op], dev)[:2]

    assert run("cuda:0") == run("cpu")
