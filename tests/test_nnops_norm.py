"""nn ops: batch norm and softmax (csrc/ops_norm.c, csrc/ops_activation.c, kernels/cpu/{norm,softmax}.c,
nn/_functional_nn.py).

Each op is checked against a NumPy formula (the independent reference), in float64 and float32 (float16/bfloat16
where the kernels accept them), its float64 gradient against finite differences (tests/gradcheck.py), its error
paths, and its behaviour on meta (shapes, allocations, no data). Memory claims in exact allocator bytes: what batch
norm saves, softmax saving its output only."""

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import _functional_nn as F
from gradcheck import assert_close, gradcheck, to_numpy
from nnops_util import FLOAT_TYPES, TOL, R, T, allocated, bn_ref, rng, rounded, softmax_ref, stored


# ---- batch norm -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gm.float64, gm.float32], ids=str)
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (8, 5), (2, 3, 7)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training(shape, dtype, affine):
    C = shape[1]
    x = R(*shape) * 2 + 1
    rm, rv = R(C), rng.uniform(0.5, 2, C)
    w, b = (R(C), R(C)) if affine else (None, None)
    trm, trv = T(rm, dtype), T(rv, dtype)
    out = F.batch_norm(T(x, dtype), trm, trv, None if w is None else T(w, dtype), None if b is None else T(b, dtype),
                       training=True, momentum=0.3, eps=1e-3)
    ref, rm2, rv2 = bn_ref(x, rm, rv, w, b, True, 0.3, 1e-3)
    atol, rtol = (1e-12, 1e-10) if dtype == gm.float64 else (2e-5, 2e-5)
    assert_close(out, ref, atol, rtol, what="out")
    assert_close(trm, rm2, atol, rtol, what="running_mean")
    assert_close(trv, rv2, atol, rtol, what="running_var")


def test_batch_norm_eval_and_momentum():
    x = R(4, 3, 2, 2)
    rm, rv = R(3), rng.uniform(0.5, 2, 3)
    trm, trv = T(rm), T(rv)
    v = trm._version
    out = F.batch_norm(T(x), trm, trv, T(np.ones(3)), T(np.zeros(3)))  # training=False by default
    assert_close(out, bn_ref(x, rm, rv, None, None, False, 0.1, 1e-5)[0], 1e-12, 1e-10)
    assert_close(trm, rm, 0, 0) and trm._version == v  # eval reads, never writes
    # running stats converge to the data's statistics; the default momentum is 0.1
    trm, trv = T(np.zeros(3)), T(np.ones(3))
    for step in range(3):
        F.batch_norm(T(x), trm, trv, training=True)
    m, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3), ddof=1)
    assert_close(trm, m * (1 - 0.9 ** 3), 1e-12, 1e-10)
    assert_close(trv, 0.9 ** 3 + var * (1 - 0.9 ** 3), 1e-12, 1e-10)
    assert trm._version > v
    # training without running statistics: batch statistics only
    assert_close(F.batch_norm(T(x), None, None, training=True), bn_ref(x, None, None, None, None, True, 0, 1e-5)[0],
                 1e-12, 1e-10)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(3, 2, 2, 3), (5, 3)])
def test_batch_norm_gradcheck(training, shape):
    C = shape[1]
    rm, rv = T(R(C)), T(rng.uniform(0.5, 2, C))

    def fn(x, w, b):
        # running stats only matter in eval mode; training uses fresh copies so repeated calls agree
        return F.batch_norm(x, rm if not training else None, rv if not training else None, w, b, training=training,
                            eps=1e-3)
    gradcheck(fn, [T(R(*shape), requires_grad=True), T(R(C), requires_grad=True), T(R(C), requires_grad=True)],
              what="batch_norm")
    gradcheck(lambda x: F.batch_norm(x, rm, rv, training=training), [T(R(*shape), requires_grad=True)],
              what="batch_norm no affine")


def test_batch_norm_running_stats_updated_again_under_checkpoint():
    """A checkpointed segment re-runs its forward in backward, and (as in PyTorch) the running statistics move a
    second time, by the same batch statistics."""
    from gpumemnet.utils.checkpoint import checkpoint
    x = R(4, 3, 2, 2)
    a = T(x, requires_grad=True)
    rm, rv = T(np.zeros(3)), T(np.ones(3))
    out = checkpoint(lambda t: F.relu(F.batch_norm(t * 1.0, rm, rv, training=True)), a)
    out.sum().backward()
    _, rm_ref, rv_ref = bn_ref(x, np.zeros(3), np.ones(3), None, None, True, 0.1, 1e-5)
    _, rm_ref, rv_ref = bn_ref(x, rm_ref, rv_ref, None, None, True, 0.1, 1e-5)
    assert_close(rm, rm_ref, 1e-12, 1e-10)
    assert_close(rv, rv_ref, 1e-12, 1e-10)
    b = T(x, requires_grad=True)
    F.relu(F.batch_norm(b, None, None, training=True)).sum().backward()
    assert_close(a.grad, to_numpy(b.grad), 1e-12, 1e-10)


def test_batch_norm_saved_memory():
    """Eval mode with only the input's gradient: dx = g * w * invstd, the input is not kept."""
    C = 8
    rm, rv = gm.zeros(C), gm.ones(C)
    w = gm.ones(C)
    x = gm.randn(16, C, 8, 8, requires_grad=True)
    nbytes = 16 * C * 64 * 4
    stats = 2 * rounded(C * 4)  # mean and invstd, float32, one per channel
    before = allocated()
    y = F.batch_norm(x * 1.0, rm, rv, w, training=False)
    assert allocated() - before == nbytes + stats
    del y
    before = allocated()
    y = F.batch_norm(x * 1.0, rm, rv, w, training=True)  # training: the input is needed (and kept), not x_hat
    assert allocated() - before == 2 * nbytes + stats
    y.sum().backward()


def test_batch_norm_half_input_float32_params():
    """Under autocast the input is float16 while weights and running statistics stay float32."""
    x = R(4, 3, 4, 4)
    for dt in (gm.float16, gm.bfloat16):
        trm, trv = gm.zeros(3), gm.ones(3)
        out = F.batch_norm(T(x, dt), trm, trv, gm.ones(3), gm.zeros(3), training=True)
        assert out.dtype == dt
        ref, rm2, _ = bn_ref(stored(x, dt), np.zeros(3), np.ones(3), None, None, True, 0.1, 1e-5)
        assert_close(to_numpy(out).astype(np.float64), ref, *TOL[dt])
        assert trm.dtype == gm.float32
        assert_close(trm, rm2, 1e-6, 1e-5)
    xg = T(x, gm.float16, requires_grad=True)
    wg = gm.ones(3, requires_grad=True)
    F.batch_norm(xg, None, None, wg, gm.zeros(3), training=True).sum().backward()
    assert xg.grad.dtype == gm.float16 and wg.grad.dtype == gm.float32


def test_batch_norm_errors():
    x = T(R(4, 3, 2, 2))
    with pytest.raises(ValueError, match=r"running_mean should have shape \(3,\).*got shape \(4,\)"):
        F.batch_norm(x, gm.zeros(4, dtype=gm.float64), gm.ones(3, dtype=gm.float64))
    with pytest.raises(ValueError, match=r"weight should have shape \(3,\)"):
        F.batch_norm(x, None, None, T(R(2)), training=True)
    with pytest.raises(ValueError, match="required in eval mode"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got input size "
                                         r"\[1, 3\]"):  # PyTorch's words (F.batch_norm checks before C does)
        F.batch_norm(T(R(1, 3)), None, None, training=True)
    with pytest.raises(ValueError, match=r"more than 1 value per channel when training, got input shape \(1, 3\)"):
        _C.batch_norm(T(R(1, 3)), None, None, None, None, True, 0.1, 1e-5)  # the C op's own check
    with pytest.raises(ValueError, match="at least 2 dims"):
        F.batch_norm(T(R(3)), None, None, training=True)
    with pytest.raises(TypeError, match="floating point"):
        F.batch_norm(gm.tensor([[1, 2], [3, 4]]), None, None, training=True)
    with pytest.raises(ValueError, match="momentum=None"):
        F.batch_norm(x, None, None, training=True, momentum=None)


def test_batch_norm_meta():
    x = gm.empty(4, 3, 5, 5, device="meta")
    rm, rv = gm.zeros(3, device="meta"), gm.ones(3, device="meta")
    before = _C.memory_allocated("meta")
    out, mean, invstd = _C.batch_norm(x, rm, rv, None, None, True, 0.1, 1e-5)
    assert tuple(out.shape) == (4, 3, 5, 5) and tuple(mean.shape) == (3,) and invstd.dtype == gm.float32
    assert _C.memory_allocated("meta") - before == rounded(300 * 4) + 2 * rounded(12)


# ---- softmax ------------------------------------------------------------------------------------------------------


def log_softmax_ref(x, dim):
    m = x.max(axis=dim, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=dim, keepdims=True))


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward(dim, log, dtype):
    x = R(3, 4, 300) * 3  # inner 300 > one tile of 256 positions for dim 0 and 1
    fn = F.log_softmax if log else F.softmax
    ref = (log_softmax_ref if log else softmax_ref)(stored(x, dtype), dim)
    atol, rtol = TOL[dtype]
    assert_close(to_numpy(fn(T(x, dtype), dim)).astype(np.float64), ref, atol * (10 if log else 1), rtol)


def test_softmax_stability_and_special_values():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0], [-np.inf, 0.0, -np.inf]])
    assert_close(F.softmax(T(x), 1), softmax_ref(np.array([[0, 1, 2], [0, -1, -2], [-np.inf, 0, -np.inf]]), 1),
                 1e-15, 1e-12)
    np.testing.assert_allclose(to_numpy(F.log_softmax(T(x, gm.float32), -1)), log_softmax_ref(x, -1), atol=1e-4)
    allinf = F.softmax(T(np.full((1, 3), -np.inf)), 1)
    assert np.isnan(to_numpy(allinf)).all()  # as PyTorch
    assert np.isnan(to_numpy(F.softmax(T(np.array([1.0, np.nan])), 0))).all()


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_softmax_gradcheck(log, dim):
    fn = F.log_softmax if log else F.softmax
    gradcheck(lambda t: fn(t, dim), [T(R(2, 3, 4), requires_grad=True)], what=f"softmax log={log} dim={dim}")


def test_softmax_misc():
    x = R(4, 5)
    t = T(x).transpose(0, 1)
    assert_close(F.softmax(t, 1), softmax_ref(x.T, 1), 1e-14, 1e-12)
    assert_close(F.softmax(T(np.array(2.0)), 0), np.array(1.0), 0, 0)  # 0-d: one element
    out = F.softmax(T(x, gm.float32), 1, dtype=gm.float64)
    assert out.dtype == gm.float64
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        assert_close(F.softmax(T(x)), softmax_ref(x, 1), 1e-14, 1e-12)
    with pytest.raises(IndexError, match="dimension 2 is out of range"):
        F.softmax(T(x), 2)
    with pytest.raises(TypeError, match="dim must be an int"):
        F.log_softmax(T(x), 1.0)
    y = gm.empty(3, 7, device="meta")
    assert tuple(F.log_softmax(y, 1).shape) == (3, 7)


def test_softmax_saves_output_only():
    x = gm.randn(64, 64, requires_grad=True)
    before = allocated()
    y = F.softmax(x * 1.0, 1)
    assert allocated() - before == 64 * 64 * 4
