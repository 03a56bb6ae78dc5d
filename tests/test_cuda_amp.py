"""CUDA GradScaler unscale (kernels/cuda/amp.cu: one fused pass per dtype over all gradients, one read-back of
the non-finite flag) against the CPU kernel from the same gradients: every float dtype, sizes across chunk
boundaries, more tensors than one launch's table, inf and nan injected, overflow by the scale itself, gradients
on several devices in one call, nothing allocated; then a GradScaler training step end to end."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda

F32, F64, F16, BF16 = range(4)
NP = {F32: np.float32, F64: np.float64, F16: np.float16, BF16: np.float32}
rng = np.random.default_rng(5)


def T(a, dtype, device):
    return _C.from_numpy(np.asarray(a, NP[dtype]), dtype=dtype, device=device)


def N(t):
    if t._dtype == BF16:
        f = _C.empty(t.shape, F32, "cpu")
        _C.copy_(f, t.cpu())
        return np.array(f.numpy())
    return np.array(t.cpu().numpy())


def grads(sizes, dtypes, poison=None):
    """The same gradients on cuda and cpu; poison = (tensor index, position, value) writes an inf or nan."""
    arrays = [rng.standard_normal(n) * 1000 for n in sizes]
    if poison:
        i, j, v = poison
        arrays[i][j] = v
    return ([T(a, dt, "cuda:0") for a, dt in zip(arrays, dtypes)], [T(a, dt, "cpu") for a, dt in zip(arrays, dtypes)])


SIZES = [5, 0, 1000, 2501, 1, 70000]
DTYPES = [F32, F16, BF16, F64, F32, F16]


def check(gg, gc, inv_scale):
    fg, fc = _C.amp_unscale_(gg, inv_scale), _C.amp_unscale_(gc, inv_scale)
    assert fg is fc
    for a, b in zip(gg, gc):
        np.testing.assert_array_equal(N(a), N(b))  # the same float32 multiply and rounding: bit-identical
    return fg


@pytest.mark.parametrize("inv_scale", [1.0 / 65536, 0.5, 3.0])
def test_unscale_matches_cpu_and_finds_nothing(inv_scale):
    assert check(*grads(SIZES, DTYPES), inv_scale) is False


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("where", [(0, 3), (2, 999), (3, 2500), (5, 69999)])
def test_unscale_finds_inf_and_nan_anywhere(bad, where):
    assert check(*grads(SIZES, DTYPES, poison=(where[0], where[1], bad)), 1.0 / 1024) is True


def test_overflow_by_the_scale_itself_is_flagged_as_on_the_cpu():
    # the flag looks at the result as stored: a half that overflows is an inf gradient, and the step is skipped
    # (PyTorch looks at the input only and would step with it)
    gg, gc = grads([4], [F16])
    assert check(gg, gc, 1e6) is True


def test_more_tensors_than_one_launch_and_every_dtype():
    n = 300  # the table holds 128 per launch
    sizes = [1 + i % 9 for i in range(n)]
    dtypes = [i % 4 for i in range(n)]
    assert check(*grads(sizes, dtypes), 0.25) is False
    assert check(*grads(sizes, dtypes, poison=(n - 1, 0, np.nan)), 0.25) is True


def test_cpu_and_cuda_gradients_in_one_call():
    gg, _ = grads([10, 20], [F32, F32])
    _, gc = grads([10, 20], [F32, F32], poison=(1, 5, np.inf))
    ref = [N(t) * 0.5 for t in gg]
    assert _C.amp_unscale_([gg[0], gc[0], gg[1], gc[1]], 0.5) is True
    for t, r in zip(gg, ref):
        np.testing.assert_array_equal(N(t), r.astype(np.float32))


def test_unscale_bumps_versions_and_allocates_nothing():
    gg, _ = grads(SIZES, DTYPES)
    versions = [t._version for t in gg]
    mem = gm.memory
    before = mem.memory_allocated("cuda:0")
    mem.reset_peak_memory_stats("cuda:0")
    _C.amp_unscale_(gg, 0.5)
    assert mem.max_memory_allocated("cuda:0") == before
    assert [t._version for t in gg] == [v + 1 for v in versions]


def test_unscale_rejects_what_the_cpu_rejects():
    g = T(np.zeros((3, 4)), F32, "cuda:0")
    with pytest.raises(ValueError, match="not contiguous"):
        _C.amp_unscale_([g._transpose(0, 1)], 0.5)
    with pytest.raises(TypeError, match="floating point"):
        _C.amp_unscale_([_C.from_numpy(np.zeros(3, np.int64), device="cuda:0")], 0.5)


# ---- GradScaler end to end ------------------------------------------------------------------------------------

@pytest.mark.parametrize("poison", [False, True])
def test_grad_scaler_step_matches_cpu(poison):
    x0 = rng.standard_normal((4, 3)).astype(np.float32)
    data = rng.standard_normal((5, 4)).astype(np.float32)
    out = {}
    for dev in ("cuda:0", "cpu"):
        w = gm.nn.Parameter(gm.tensor(x0).to(dev))
        opt = gm.optim.SGD([w], lr=0.1)
        scaler = gm.amp.GradScaler(init_scale=1024.0)
        loss = (gm.tensor(data).to(dev) @ w).sum()
        scaler.scale(loss).backward()
        if poison:
            w.grad = gm.tensor(np.full((4, 3), np.inf, np.float32)).to(dev)
        scaler.step(opt)
        scaler.update()
        out[dev] = (w, scaler.get_scale())
    assert out["cuda:0"][1] == out["cpu"][1] == (512.0 if poison else 1024.0)
    assert_close(out["cuda:0"][0], out["cpu"][0])
