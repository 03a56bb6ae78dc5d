"""GradScaler's fused unscale on the CPU (kernels/cpu/amp.c: the whole list in one parallel pass): bit-identical to
PyTorch's torch._amp_foreach_non_finite_check_and_unscale_ for every float dtype (1/scale rounded to float32,
products in float32, float64 in float64), on lists long and large enough that the threads' shares of the
elements start and end inside tensors; inf and nan found wherever they are, overflow of a 16-bit result counted;
versions bumped, nothing allocated; errors before anything is written."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

F32, F64, F16, BF16 = range(4)
rng = np.random.default_rng(11)


def make(a, dt):
    if dt == BF16:
        t = _C.from_numpy(np.asarray(a, np.float32))
        out = _C.empty(t.shape, BF16, "cpu")
        _C.copy_(out, t)
        return out
    return _C.from_numpy(np.asarray(a, {F32: np.float32, F64: np.float64, F16: np.float16}[dt]))


def values(t):
    if t._dtype == BF16:
        f = _C.empty(t.shape, F32, "cpu")
        _C.copy_(f, t)
        return np.array(f.numpy())
    return np.array(t.numpy())


def torch_unscale(arrays, dts, inv_scale):
    torch = pytest.importorskip("torch")
    tdt = {F32: torch.float32, F64: torch.float64, F16: torch.float16, BF16: torch.bfloat16}
    ts = [torch.from_numpy(np.asarray(a, np.float64)).to(tdt[d]) for a, d in zip(arrays, dts)]
    found = torch.zeros(1)
    inv = torch.full((1,), 1.0 / (1.0 / inv_scale), dtype=torch.float64).float()
    torch._amp_foreach_non_finite_check_and_unscale_(ts, found, inv)
    return [t.double().numpy() for t in ts], bool(found.item())


SIZES = [5, 0, 1000, 70001, 1, 33333, 250000, 3]


@pytest.mark.parametrize("dt", [F32, F64, F16, BF16])
@pytest.mark.parametrize("inv_scale", [1.0 / 65536, 1.0 / 3.0, 3.0])
def test_unscale_matches_pytorch_bit_for_bit(dt, inv_scale):
    arrays = [rng.standard_normal(n) * 1000 for n in SIZES]
    gs = [make(a, dt) for a in arrays]
    found = _C.amp_unscale_(gs, inv_scale)
    expected, t_found = torch_unscale([values(g0) for g0 in (make(a, dt) for a in arrays)], [dt] * len(SIZES),
                                      inv_scale)
    assert found is t_found is False
    for g, e in zip(gs, expected):
        np.testing.assert_array_equal(values(g).astype(np.float64), e)


def test_mixed_dtypes_in_one_list():
    dts = [F32, BF16, F16, F64, F32, BF16]
    arrays = [rng.standard_normal(n) for n in (100000, 5, 40000, 7, 1, 90000)]
    gs = [make(a, d) for a, d in zip(arrays, dts)]
    before = [values(g) for g in gs]
    assert _C.amp_unscale_(gs, 0.125) is False
    for g, b in zip(gs, before):
        np.testing.assert_array_equal(values(g), b * 0.125)  # a power of two: exact in every dtype


@pytest.mark.parametrize("dt", [F32, F64, F16, BF16])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("where", [(0, 0), (3, 70000), (6, 124999), (6, 125000), (7, 2)])
def test_unscale_finds_inf_and_nan_anywhere(dt, bad, where):
    arrays = [rng.standard_normal(n) for n in SIZES]
    arrays[where[0]][where[1]] = bad
    gs = [make(a, dt) for a in arrays]
    assert _C.amp_unscale_(gs, 0.5) is True
    v = values(gs[where[0]])[where[1]]
    assert np.isnan(v) if np.isnan(bad) else v == bad


def test_16_bit_overflow_by_the_scale_counts():
    g = make([60000.0, 1.0], F16)
    assert _C.amp_unscale_([g], 4.0) is True
    g = make([1e38, 1.0], BF16)
    assert _C.amp_unscale_([g], 16.0) is True
    g = make([1e38, 1.0], F32)
    assert _C.amp_unscale_([g], 16.0) is True


def test_unscale_bumps_versions_and_allocates_nothing():
    gs = [gm.ones(300000), gm.ones(7, dtype=gm.bfloat16)]
    v = [g._version for g in gs]
    before = gm.memory.memory_stats()["num_allocs"]
    assert _C.amp_unscale_(gs, 0.5) is False
    assert gm.memory.memory_stats()["num_allocs"] == before
    assert [g._version for g in gs] == [x + 1 for x in v]


def test_errors_leave_every_gradient_untouched():
    good = gm.ones(10)
    with pytest.raises(TypeError, match=r"grads\[1\] has dtype int64"):
        _C.amp_unscale_([good, gm.ones(3, dtype=gm.int64)], 0.5)
    with pytest.raises(ValueError, match=r"grads\[1\] is not contiguous"):
        _C.amp_unscale_([good, gm.ones(3, 4)._transpose(0, 1)], 0.5)
    with pytest.raises(TypeError, match=r"grads\[0\] is int, not a Tensor"):
        _C.amp_unscale_([3, good], 0.5)
    np.testing.assert_array_equal(good.numpy(), np.ones(10, np.float32))
    assert _C.amp_unscale_([], 0.5) is False


def test_meta_gradients_are_left_alone():
    g = gm.ones(100000, device="meta")
    assert _C.amp_unscale_([g, gm.ones(4)], 0.5) is False
