"""nn ops (csrc/ops_nnops.c, kernels/cpu/{activation,dropout,norm,softmax,loss}.c, nn/_functional_nn.py):
activations, dropout, batch norm, softmax and losses.

Each op is checked against a NumPy formula written here (direct loops for the losses, the independent
reference), in float64 and float32 (float16/bfloat16 where the kernels accept them), its float64 gradient
against finite differences (tests/gradcheck.py), its error paths, and its behaviour on meta (shapes,
allocations, no data). Memory claims are tested in exact allocator bytes: what a backward keeps, and that
dropout's mask is one byte per element. PyTorch comparisons run only where torch is importable."""
import itertools
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import _functional_nn as F
from gradcheck import assert_close, gradcheck, to_numpy

rng = np.random.default_rng(1234)


def R(*shape):
    return rng.standard_normal(shape)


def NZ(*shape):
    """Away from 0 on both sides: relu/leaky_relu are not differentiable at 0."""
    return rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def T(a, dtype=None, requires_grad=False):
    return gm.tensor(np.asarray(a), dtype=dtype, requires_grad=requires_grad)


def allocated():
    return _C.memory_allocated("cpu")


def rounded(nbytes):
    """What the allocator reserves for a request (512-byte granules)."""
    return max(512, (nbytes + 511) // 512 * 512)


TOL = {gm.float64: (1e-12, 1e-10), gm.float32: (1e-6, 1e-5), gm.float16: (2e-3, 2e-3), gm.bfloat16: (1.6e-2, 1.6e-2)}
FLOAT_TYPES = [gm.float64, gm.float32, gm.float16, gm.bfloat16]


def stored(a, dtype):
    """a rounded to dtype, as float64 (the reference then sees exactly the tensor's values)."""
    return to_numpy(gm.tensor(a, dtype=dtype)).astype(np.float64)


# ---- activations ---------------------------------------------------------------------------------------------
_erf = np.vectorize(math.erf)
ACTS = {
    "relu": (lambda x: F.relu(x), lambda x: np.maximum(x, 0.0)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    "leaky_relu_neg": (lambda x: F.leaky_relu(x, -0.3), lambda x: np.where(x > 0, x, -0.3 * x)),
    "sigmoid": (F.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x))),
    "tanh": (F.tanh, np.tanh),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))),
}


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("name", ACTS)
def test_activation_forward(name, dtype):
    fn, ref = ACTS[name]
    x = R(3, 5, 4) * 3
    got = fn(T(x, dtype))
    assert got.dtype == dtype and tuple(got.shape) == (3, 5, 4)
    atol, rtol = TOL[dtype]
    assert_close(to_numpy(got).astype(np.float64), ref(stored(x, dtype)), atol, rtol, what=name)


@pytest.mark.parametrize("name", ACTS)
def test_activation_gradcheck(name):
    fn, _ = ACTS[name]
    gradcheck(fn, [T(NZ(3, 4), requires_grad=True)], what=name)


@pytest.mark.parametrize("name", ACTS)
def test_activation_noncontiguous(name):
    fn, ref = ACTS[name]
    x = R(4, 6)
    t = T(x).transpose(0, 1)
    assert not t.is_contiguous()
    assert_close(fn(t), ref(x.T), 1e-12, 1e-10, what=name)


def test_activation_special_values():
    x = T(np.array([np.nan, np.inf, -np.inf, -0.0, 80.0, -800.0]))
    np.testing.assert_array_equal(to_numpy(F.relu(x)), [np.nan, np.inf, 0, 0, 80, 0])  # NaN passes, as PyTorch
    np.testing.assert_allclose(to_numpy(F.sigmoid(x)), [np.nan, 1, 0, 0.5, 1, 0], atol=1e-15, rtol=0)
    np.testing.assert_array_equal(to_numpy(F.tanh(x)), [np.nan, 1, -1, 0, 1, -1])


def test_activation_backward_memory():
    """relu/sigmoid/tanh keep their output (shared with whoever uses it next), so the temporary input goes away;
    gelu keeps its input."""
    x = gm.randn(128, 128, requires_grad=True)
    nbytes = 128 * 128 * 4
    for fn, extra in ((F.relu, 0), (F.sigmoid, 0), (F.tanh, 0), (lambda t: F.leaky_relu(t, 0.2), 0),
                      (F.gelu, nbytes), (lambda t: F.leaky_relu(t, -0.2), nbytes)):
        before = allocated()
        y = fn(x * 2.0)  # x * 2.0 is a temporary: only the activation's backward could keep it
        assert allocated() - before == nbytes + extra
        del y


def test_relu_inplace_plain():
    x = T(np.array([-1.0, 2.0, -3.0]))
    v = x._version
    out = F.relu_(x)
    assert out is x and x._version > v
    assert_close(x, np.array([0.0, 2.0, 0.0]), 0, 0)
    y = T(np.array([-1.0, 2.0]))
    assert F.relu(y, inplace=True) is y
    # non-contiguous: written back through the strided view
    base = T(R(3, 4))
    ref = np.maximum(to_numpy(base).T, 0)
    view = base.transpose(0, 1)
    F.relu_(view)
    assert_close(view, ref, 0, 0)


def test_relu_inplace_in_graph():
    a = T(NZ(3, 4), requires_grad=True)
    y = a * 3.0
    out = F.relu_(y)
    assert out is y and y.grad_fn is not None and y.grad_fn.name() == "ReluBackward"
    (y * T(np.arange(12.0).reshape(3, 4))).sum().backward()
    ref = 3.0 * (to_numpy(a.detach()) > 0) * np.arange(12.0).reshape(3, 4)
    assert_close(a.grad, ref, 1e-12, 0)
    gradcheck(lambda t: F.relu_(t * 1.0), [T(NZ(2, 3), requires_grad=True)], what="relu_")
    gradcheck(lambda t: F.leaky_relu(t * 1.0, 0.2, inplace=True), [T(NZ(2, 3), requires_grad=True)],
              what="leaky_relu_")


def test_relu_inplace_refusals():
    leaf = T(R(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        F.relu_(leaf)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        F.relu(leaf, inplace=True)
    y = leaf * 2.0
    with pytest.raises(RuntimeError, match="view of another tensor"):
        F.relu_(y[1:])
    with pytest.raises(RuntimeError, match="negative_slope"):
        F.leaky_relu(leaf * 1.0, -0.5, inplace=True)
    with gm.no_grad():  # allowed without grad mode, as PyTorch
        F.relu_(leaf)
    # the saved output of an earlier op is protected by the version counter
    z = leaf * 1.0
    s = F.sigmoid(z)
    F.relu_(s)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        s.sum().backward()


def test_activation_errors():
    with pytest.raises(TypeError, match="relu: input must be a floating point tensor"):
        F.relu(gm.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="must be a Tensor"):
        F.sigmoid([1.0, 2.0])
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        F.gelu(T(R(3)), approximate="fast")
    with pytest.raises(ValueError, match=r"grad shape \(3,\) does not match saved tensor shape \(4,\)"):
        _C.activation_backward(0, T(R(3)), T(R(4)))
    with pytest.raises(ValueError, match="unknown op 9"):
        _C.activation(9, T(R(3)))


def test_activation_meta():
    x = gm.empty(4, 5, device="meta")
    before = _C.memory_allocated("meta")
    y = F.gelu(x)
    assert y._device == "meta" and tuple(y.shape) == (4, 5) and y.dtype == gm.float32
    assert _C.memory_allocated("meta") - before == rounded(80)
    assert F.relu_(x) is x


# ---- dropout ------------------------------------------------------------------------------------------------------
def rand_keep(shape, p):
    """The documented mask: float32 uniforms of the current stream, keep where u < 1 - p (advances the state)."""
    return to_numpy(gm.rand(*shape)).astype(np.float64) < 1.0 - p


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
def test_dropout_mask_definition_and_scaling(dtype):
    x = R(6, 7) + 3.0
    gm.manual_seed(7)
    state = gm.get_rng_state()
    keep = rand_keep((6, 7), 0.4)
    after = gm.get_rng_state()
    gm.set_rng_state(state)
    out = F.dropout(T(x, dtype), 0.4)
    assert gm.get_rng_state() == after  # advanced exactly as the float32 rand of the same count
    assert after[1] - state[1] == math.ceil(42 / 4)
    atol, rtol = TOL[dtype]
    assert_close(to_numpy(out).astype(np.float64), np.where(keep, stored(x, dtype) / 0.6, 0.0), atol, rtol)


def test_dropout_statistics():
    gm.manual_seed(0)
    out = to_numpy(F.dropout(gm.ones(200, 200), 0.3))
    zeros = np.mean(out == 0)
    assert abs(zeros - 0.3) < 0.012  # 5 sigma of a binomial(40000, 0.3) fraction
    assert np.allclose(out[out != 0], 1 / 0.7, rtol=1e-6)
    assert abs(out.mean() - 1.0) < 0.02  # the expectation is preserved


def test_dropout_replay_and_backward_uses_same_mask():
    x = T(R(5, 8) + 5.0, requires_grad=True)
    state = gm.get_rng_state()
    y1 = F.dropout(x, 0.5)
    gm.set_rng_state(state)
    y2 = F.dropout(x, 0.5)
    assert_close(y1, to_numpy(y2.detach()), 0, 0)
    y1.backward(gm.ones(5, 8, dtype=gm.float64))
    kept = to_numpy(y1.detach()) != 0
    assert_close(x.grad, kept / 0.5, 0, 0)
    state = gm.get_rng_state()
    gradcheck(lambda t: (gm.set_rng_state(state), F.dropout(t, 0.3))[1], [T(R(4, 5), requires_grad=True)],
              what="dropout")


def test_dropout_edge_cases():
    x = T(R(3, 4))
    state = gm.get_rng_state()
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 0.7, training=False) is x
    assert F.dropout2d(x, 0.5, training=False) is x
    assert gm.get_rng_state() == state  # the identity draws nothing
    a = T(R(3, 4), requires_grad=True)
    z = F.dropout(a, 1.0)
    assert_close(z.detach(), np.zeros((3, 4)), 0, 0)
    assert gm.get_rng_state() == state  # p = 1 drops everything without drawing
    z.sum().backward()
    assert_close(a.grad, np.zeros((3, 4)), 0, 0)
    assert_close(F.dropout(T(np.array([np.inf, 1.0])), 1.0), np.zeros(2), 0, 0)
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            F.dropout(x, p)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout2d(T(R(1, 2, 2, 2)), 2.0)
    with pytest.raises(TypeError, match="p must be a number"):
        F.dropout(x, "0.5")
    with pytest.raises(TypeError, match="floating point"):
        F.dropout(gm.tensor([1, 2]), 0.5)


def test_dropout_inplace():
    x = T(R(4, 4) + 5.0)
    ref = to_numpy(x)
    state = gm.get_rng_state()
    out = F.dropout(x, 0.25, inplace=True)
    assert out is x
    gm.set_rng_state(state)
    keep = rand_keep((4, 4), 0.25)
    assert_close(x, np.where(keep, ref / 0.75, 0), 1e-12, 1e-12)
    a = T(R(3, 5) + 5.0, requires_grad=True)
    y = a * 1.0
    state = gm.get_rng_state()
    assert F.dropout(y, 0.5, inplace=True) is y
    y.sum().backward()
    gm.set_rng_state(state)
    assert_close(a.grad, rand_keep((3, 5), 0.5) / 0.5, 0, 0)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        F.dropout(a, 0.5, inplace=True)


def test_dropout2d_channels():
    x = R(3, 4, 5, 6) + 10.0
    state = gm.get_rng_state()
    out = to_numpy(F.dropout2d(T(x), 0.5))
    gm.set_rng_state(state)
    keep = rand_keep((3, 4), 0.5)  # one draw per (n, c)
    assert_close(out, np.where(keep[:, :, None, None], x / 0.5, 0.0), 1e-12, 1e-12)
    # unbatched (C, H, W), and gradients through the same channel mask
    a = T(R(4, 3, 3) + 10.0, requires_grad=True)
    state = gm.get_rng_state()
    F.dropout2d(a, 0.5).sum().backward()
    gm.set_rng_state(state)
    keep = rand_keep((4,), 0.5)
    assert_close(a.grad, np.broadcast_to((keep / 0.5)[:, None, None], (4, 3, 3)), 0, 0)
    with pytest.raises(ValueError, match=r"expected a 3-D \(C, H, W\) or 4-D \(N, C, H, W\) input, got shape \(4, 5\)"):
        F.dropout2d(T(R(4, 5)))


def test_dropout_mask_is_one_byte_per_element():
    x = gm.randn(64, 64, requires_grad=True)
    before = allocated()
    y = F.dropout(x * 1.0, 0.5)  # the temporary input is not kept: only the output and a bool mask
    assert allocated() - before == 64 * 64 * 4 + 64 * 64 * 1
    y.sum().backward()
    del y
    assert allocated() == before + 64 * 64 * 4  # x.grad; the mask was freed with the graph


def test_dropout_meta_advances_rng_like_cpu():
    state = gm.get_rng_state()
    F.dropout(gm.empty(10, 10), 0.5)
    cpu_after = gm.get_rng_state()
    gm.set_rng_state(state)
    before = _C.memory_allocated("meta")
    out, mask = _C.dropout(gm.empty(10, 10, device="meta"), 0.5)
    assert gm.get_rng_state() == cpu_after
    assert tuple(out.shape) == (10, 10) and tuple(mask.shape) == (10, 10) and mask.dtype == gm.bool_
    assert _C.memory_allocated("meta") - before == rounded(400) + rounded(100)
    out, mask = _C.dropout(gm.empty(2, 3, 4, 4, device="meta"), 0.5, True)
    assert tuple(mask.shape) == (2, 3)


# ---- batch norm -------------------------------------------------------------------------------------------------
def bn_ref(x, rm, rv, w, b, training, momentum, eps):
    """Direct per-channel formula. Returns out, new running mean, new running var."""
    C = x.shape[1]
    axes = tuple(d for d in range(x.ndim) if d != 1)
    shape = [1] * x.ndim
    shape[1] = C
    if training:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        n = x.size // C
        rm = None if rm is None else (1 - momentum) * rm + momentum * mean
        rv = None if rv is None else (1 - momentum) * rv + momentum * var * n / (n - 1)
    else:
        mean, var = rm, rv
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out, rm, rv


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


def test_batch_norm_running_stats_updated_once_under_checkpoint():
    """A checkpointed segment re-runs its forward in backward: the running statistics must not move twice."""
    from gpumemnet.utils.checkpoint import checkpoint
    x = R(4, 3, 2, 2)
    a = T(x, requires_grad=True)
    rm, rv = T(np.zeros(3)), T(np.ones(3))
    out = checkpoint(lambda t: F.relu(F.batch_norm(t * 1.0, rm, rv, training=True)), a)
    out.sum().backward()
    _, rm_ref, rv_ref = bn_ref(x, np.zeros(3), np.ones(3), None, None, True, 0.1, 1e-5)
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
    with pytest.raises(ValueError, match=r"more than 1 value per channel when training, got input shape \(1, 3\)"):
        F.batch_norm(T(R(1, 3)), None, None, training=True)
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
def softmax_ref(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


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


# ---- cross_entropy and nll_loss ---------------------------------------------------------------------------------
def class_loss_ref(x, t, w, ignore_index, reduction, eps, from_logits):
    """Direct loops over positions: the independent reference for cross_entropy (from_logits) and nll_loss."""
    C = x.shape[0] if x.ndim == 1 else x.shape[1]
    xs = x.reshape(1, C) if x.ndim == 1 else np.moveaxis(x, 1, -1).reshape(-1, C)
    ts = np.asarray(t).reshape(-1)
    w = np.ones(C) if w is None else w
    losses, wsum = np.zeros(len(ts)), 0.0
    for i, (row, c) in enumerate(zip(xs, ts)):
        if c == ignore_index:
            continue
        if from_logits:
            m = row.max()
            logp = row - (m + math.log(sum(math.exp(v - m) for v in row)))
        else:
            logp = row
        nll = -w[c] * logp[c]
        smooth = -sum(w[k] * logp[k] for k in range(C))
        losses[i] = (1 - eps) * nll + eps / C * smooth
        wsum += w[c]
    if reduction == "none":
        return losses.reshape(np.shape(t))
    return losses.sum() / wsum if reduction == "mean" else losses.sum()


CE_SHAPES = {"NC": ((5, 4), (5,)), "NCHW": ((2, 3, 2, 3), (2, 2, 3)), "C": ((4,), ())}


def ce_case(shape_name, ignore):
    xs, ts = CE_SHAPES[shape_name]
    C = xs[0] if len(xs) == 1 else xs[1]
    x = R(*xs) * 2
    t = rng.integers(0, C, ts)
    if ignore is not None and t.size > 1:
        t.flat[1] = ignore  # one ignored position
    elif t.size == 1 and t == ignore:
        t = np.zeros_like(t)  # a lone target is never ignored (the mean would be 0/0)
    return x, np.asarray(t, np.int64), C


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, -100, 1])
@pytest.mark.parametrize("shape_name", CE_SHAPES)
def test_cross_entropy(shape_name, ignore, weighted, smoothing, reduction):
    x, t, C = ce_case(shape_name, ignore)
    w = rng.uniform(0.5, 2.0, C) if weighted else None
    ii = -100 if ignore is None else ignore
    kw = dict(weight=None if w is None else T(w), ignore_index=ii, reduction=reduction, label_smoothing=smoothing)
    got = F.cross_entropy(T(x), T(t), **kw)
    ref = class_loss_ref(x, t, w, ii, reduction, smoothing, True)
    assert_close(got, np.asarray(ref), 1e-12, 1e-10, what="cross_entropy float64")
    got32 = F.cross_entropy(T(x, gm.float32), T(t), **kw)
    assert got32.dtype == gm.float32
    assert_close(got32, np.asarray(ref).astype(np.float32), 1e-5, 1e-5, what="cross_entropy float32")
    gradcheck(lambda a: F.cross_entropy(a, T(t), **kw), [T(x, requires_grad=True)], what="cross_entropy")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape_name", CE_SHAPES)
def test_nll_loss(shape_name, weighted, reduction):
    x, t, C = ce_case(shape_name, -100)
    w = rng.uniform(0.5, 2.0, C) if weighted else None
    kw = dict(weight=None if w is None else T(w), reduction=reduction)
    ref = class_loss_ref(x, t, w, -100, reduction, 0.0, False)
    assert_close(F.nll_loss(T(x), T(t), **kw), np.asarray(ref), 1e-12, 1e-10, what="nll_loss")
    gradcheck(lambda a: F.nll_loss(a, T(t), **kw), [T(x, requires_grad=True)], what="nll_loss")
    # nll_loss(log_softmax(x)) is cross_entropy(x)
    assert_close(F.nll_loss(F.log_softmax(T(x), 0 if x.ndim == 1 else 1), T(t), **kw),
                 to_numpy(F.cross_entropy(T(x), T(t), **kw)), 1e-12, 1e-10)


def test_cross_entropy_large_segmentation_tile():
    """Positions beyond one 256-wide tile, float16 and bfloat16 logits."""
    x = R(2, 3, 20, 17) * 4
    t = rng.integers(0, 3, (2, 20, 17))
    ref = class_loss_ref(x, t, None, -100, "mean", 0.1, True)
    assert_close(F.cross_entropy(T(x), T(t), label_smoothing=0.1), np.asarray(ref), 1e-12, 1e-10)
    for dt in (gm.float16, gm.bfloat16):
        ref = class_loss_ref(stored(x, dt), t, None, -100, "none", 0.0, True)
        got = F.cross_entropy(T(x, dt), T(t), reduction="none")
        assert got.dtype == dt
        assert_close(to_numpy(got).astype(np.float64), ref, 1e-2, 1e-2)


def test_cross_entropy_all_ignored_and_extremes():
    x = T(R(3, 4))
    t = T(np.array([-100, -100, -100]))
    assert np.isnan(to_numpy(F.cross_entropy(x, t)))  # 0 / 0, as PyTorch
    assert_close(F.cross_entropy(x, t, reduction="sum"), np.array(0.0), 0, 0)
    a = T(R(3, 4), requires_grad=True)
    F.cross_entropy(a, t).backward()
    assert_close(a.grad, np.zeros((3, 4)), 0, 0)
    big = np.array([[1000.0, -1000.0, 0.0], [-1e4, 1e4, 5.0]])
    ref = class_loss_ref(big, np.array([1, 1]), None, -100, "none", 0.0, True)
    assert_close(F.cross_entropy(T(big), T(np.array([1, 1])), reduction="none"), ref, 1e-9, 1e-12)


def test_cross_entropy_saves_logits_not_probabilities():
    """Backward keeps the logits (alive anyway) and one log-sum-exp per position: no (N, C) probability copy."""
    N, C = 64, 100
    x = gm.randn(N, C, requires_grad=True)
    t = gm.tensor(rng.integers(0, C, N))
    logits = x * 1.0
    before = allocated()
    loss = F.cross_entropy(logits, t)
    assert allocated() - before == rounded(4) + rounded(N * 4)  # the 0-d loss and lse (N,)
    loss.backward()


def test_class_loss_errors():
    x = T(R(4, 3))
    t = T(np.array([0, 1, 2, 1]))
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, T(np.array([0, 3, 1, 1])))
    with pytest.raises(IndexError, match="target -1 is out of bounds for 3 classes"):
        F.nll_loss(x, T(np.array([0, -1, 1, 1])))
    with pytest.raises(IndexError, match="target -100 is out of bounds"):
        F.cross_entropy(x, T(np.array([0, -100, 1, 1])), ignore_index=2)
    with pytest.raises(TypeError, match="target must be an int64 tensor of class indices, got float64"):
        F.cross_entropy(x, T(np.zeros(4)))
    with pytest.raises(ValueError, match=r"target shape \(3,\) does not match input shape \(4, 3\)"):
        F.cross_entropy(x, T(np.array([0, 1, 2])))
    with pytest.raises(ValueError, match=r"target shape \(2, 4\) does not match input shape \(2, 3, 4, 5\)"):
        F.cross_entropy(T(R(2, 3, 4, 5)), T(np.zeros((2, 4), np.int64)))
    with pytest.raises(ValueError, match=r"weight should have shape \(3,\)"):
        F.cross_entropy(x, t, weight=T(np.ones(4)))
    with pytest.raises(ValueError, match="reduction must be 'none', 'mean' or 'sum'"):
        F.cross_entropy(x, t, reduction="avg")
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\]"):
        F.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="gradients with respect to weight are not supported"):
        F.cross_entropy(x, t, weight=T(np.ones(3), requires_grad=True))
    with pytest.raises(TypeError, match="must be a floating point tensor"):
        F.nll_loss(gm.tensor([[1, 2]]), gm.tensor([0]))
    with pytest.raises(TypeError, match="target must be a Tensor"):
        F.cross_entropy(x, [0, 1, 2, 1])


def test_class_loss_meta():
    x = gm.empty(8, 5, 3, 3, device="meta")
    t = gm.empty(8, 3, 3, dtype=gm.int64, device="meta")
    before = _C.memory_allocated("meta")
    loss, lse, wsum = _C.cross_entropy(x, t, None, -100, 0, 0.0)
    assert tuple(loss.shape) == (8, 3, 3) and tuple(lse.shape) == (8, 3, 3) and math.isnan(wsum)
    assert _C.memory_allocated("meta") - before == 2 * rounded(72 * 4)
    assert tuple(F.cross_entropy(x, t).shape) == ()
    assert tuple(F.nll_loss(x, t, reduction="none").shape) == (8, 3, 3)


# ---- mse, l1, bce with logits -------------------------------------------------------------------------------------
def reduce_ref(v, reduction):
    return v if reduction == "none" else (v.mean() if reduction == "mean" else v.sum())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("which", ["mse", "l1"])
def test_mse_l1(which, reduction):
    fn, ref = (F.mse_loss, lambda d: d * d) if which == "mse" else (F.l1_loss, np.abs)
    x, y = R(3, 4, 2), R(3, 4, 2)
    for dt, (atol, rtol) in ((gm.float64, (1e-12, 1e-10)), (gm.float32, (1e-5, 1e-5))):
        got = fn(T(x, dt), T(y, dt), reduction=reduction)
        assert_close(got, np.asarray(reduce_ref(ref(x - y), reduction)), atol, rtol, what=which)
    gradcheck(lambda a, b: fn(a, b, reduction=reduction), [T(x, requires_grad=True), T(y, requires_grad=True)],
              what=which)
    # l1 at zero difference: subgradient 0, as PyTorch
    a = T(np.array([1.0, 2.0]), requires_grad=True)
    F.l1_loss(a, T(np.array([1.0, 0.0])), reduction="sum").backward()
    assert_close(a.grad, np.array([0.0, 1.0]), 0, 0)


def bce_ref(x, t, w, pw):
    sp = np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)  # softplus(-x)
    lw = 1 + (pw - 1) * t if pw is not None else 1
    loss = (1 - t) * x + lw * sp
    return loss * w if w is not None else loss


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weights", ["none", "class", "full", "channel"])
def test_bce_with_logits(weights, reduction):
    x, t = R(3, 4, 2, 2) * 3, rng.uniform(0, 1, (3, 4, 2, 2))
    w = pw = None
    if weights == "class":  # (C,) of the last dim, the usual multi-label case
        w, pw = rng.uniform(0.5, 2, 2), rng.uniform(0.5, 3, 2)
    elif weights == "full":
        w, pw = rng.uniform(0.5, 2, (3, 4, 2, 2)), rng.uniform(0.5, 3, (4, 2, 2))
    elif weights == "channel":  # (C, 1, 1) against NCHW, and a leading 1
        w, pw = rng.uniform(0.5, 2, (1, 4, 1, 1)), rng.uniform(0.5, 3, (4, 1, 1))
    ref = reduce_ref(bce_ref(x, t, w, pw), reduction)
    kw = dict(weight=None if w is None else T(w), pos_weight=None if pw is None else T(pw), reduction=reduction)
    assert_close(F.binary_cross_entropy_with_logits(T(x), T(t), **kw), np.asarray(ref), 1e-12, 1e-10)
    kw32 = {k: (v.float() if isinstance(v, gm.Tensor) else v) for k, v in kw.items()}
    assert_close(F.binary_cross_entropy_with_logits(T(x, gm.float32), T(t, gm.float32), **kw32),
                 np.asarray(ref), 1e-5, 1e-5)
    gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, **kw),
              [T(x, requires_grad=True), T(t, requires_grad=True)], what="bce_with_logits")


def test_bce_with_logits_stable():
    x = np.array([-800.0, -30.0, 0.0, 30.0, 800.0])
    t = np.array([1.0, 0.0, 0.5, 1.0, 0.0])
    got = F.binary_cross_entropy_with_logits(T(x), T(t), reduction="none")
    assert_close(got, np.array([800.0, 9.357622968839299e-14, math.log(2), 9.357622968839299e-14, 800.0]),
                 1e-15, 1e-12)
    a = T(x, requires_grad=True)
    F.binary_cross_entropy_with_logits(a, T(t), reduction="sum").backward()
    assert np.isfinite(to_numpy(a.grad)).all()


def test_pointwise_loss_errors_and_meta():
    x = T(R(3, 4))
    with pytest.raises(ValueError, match=r"target shape \(3, 1\) does not match input shape \(3, 4\)"):
        F.mse_loss(x, T(R(3, 1)))
    with pytest.raises(TypeError, match="target dtype float32 does not match input dtype float64"):
        F.l1_loss(x, T(R(3, 4), gm.float32))
    with pytest.raises(ValueError, match="reduction must be"):
        F.mse_loss(x, x, reduction=None)
    with pytest.raises(ValueError, match=r"target shape \(4,\) does not match input shape \(3, 4\)"):
        F.binary_cross_entropy_with_logits(x, T(R(4)))
    with pytest.raises(ValueError, match=r"pos_weight shape \(3,\) cannot be broadcast to input shape \(3, 4\)"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=T(np.ones(3)))
    with pytest.raises(RuntimeError, match="pos_weight requires grad"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=T(np.ones(4), requires_grad=True))
    m = gm.empty(5, 6, device="meta")
    assert tuple(F.mse_loss(m, m).shape) == () and tuple(F.l1_loss(m, m, reduction="none").shape) == (5, 6)
    assert tuple(F.binary_cross_entropy_with_logits(m, m, pos_weight=gm.ones(6, device="meta")).shape) == ()


def test_noncontiguous_inputs():
    x = R(6, 4, 3)
    xt = T(x).transpose(0, 1)  # (4, 6, 3), strided
    rm, rv = T(np.zeros(6)), T(np.ones(6))
    assert_close(F.batch_norm(xt, rm, rv, training=True), bn_ref(x.transpose(1, 0, 2), None, None, None, None, True,
                                                                 0.1, 1e-5)[0], 1e-12, 1e-10)
    # running statistics given as strided views are updated through them
    buf = T(np.zeros((6, 2)))
    F.batch_norm(xt, buf[:, 0], buf[:, 1], training=True, momentum=1.0)
    assert_close(buf[:, 0], x.transpose(1, 0, 2).mean(axis=(0, 2)), 1e-12, 1e-10)
    t = rng.integers(0, 6, 4)
    logits = T(R(6, 4)).transpose(0, 1)
    assert_close(F.cross_entropy(logits, T(t), reduction="none"),
                 class_loss_ref(to_numpy(logits), t, None, -100, "none", 0.0, True), 1e-12, 1e-10)
    gradcheck(lambda a: F.cross_entropy(a.transpose(0, 1), T(t)), [T(R(6, 4), requires_grad=True)],
              what="cross_entropy strided")
    gradcheck(lambda a: F.batch_norm(a.transpose(0, 1), None, None, training=True), [T(R(3, 4, 2), requires_grad=True)],
              what="batch_norm strided")


def test_noncontiguous_inputs_use_workspace():
    """A transposed input is copied once into a workspace-tagged temporary, freed before the op returns."""
    x = gm.randn(64, 32).transpose(0, 1)
    _C.reset_peak_memory_stats("cpu")
    F.softmax(x, 1)
    ws = _C.memory_stats("cpu")["by_category"]["workspace"]
    assert ws["current"] == 0 and ws["peak"] == 64 * 32 * 4


# ---- sizes that take the OpenMP paths; reference counts and leaks ---------------------------------------------------
def test_large_inputs_thread_invariant():
    """Above the parallel grain (32768 elements) every kernel splits work across threads: the results match
    NumPy and do not depend on the thread count (sums are per channel / per position, never split)."""
    x = R(4, 8, 32, 40)
    t = rng.integers(0, 8, (4, 32, 40))
    prev = gm.get_num_threads()
    results = []
    try:
        for n in (1, 2):
            gm.set_num_threads(n)
            rm, rv = T(np.zeros(8)), T(np.ones(8))
            outs = [F.gelu(T(x)), F.softmax(T(x), 1), F.batch_norm(T(x), rm, rv, training=True), rv,
                    F.cross_entropy(T(x), T(t), reduction="none")]
            gm.manual_seed(3)
            outs += [F.dropout(T(x), 0.5), F.dropout2d(T(x), 0.5)]
            results.append([to_numpy(o) for o in outs])
    finally:
        gm.set_num_threads(prev)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    gelu, sm, bn, rv, ce = results[0][:5]
    assert_close(sm, softmax_ref(x, 1), 1e-14, 1e-12)
    assert_close(bn, bn_ref(x, None, None, None, None, True, 0.1, 1e-5)[0], 1e-10, 1e-10)
    assert_close(ce, class_loss_ref(x, t, None, -100, "none", 0.0, True), 1e-12, 1e-10)


def test_no_leaks():
    """Every op and its backward leave no allocation and no reference behind."""
    import sys
    x = T(R(4, 3, 2, 2), requires_grad=True)
    w, b = T(R(3), requires_grad=True), T(R(3), requires_grad=True)
    t = T(rng.integers(0, 3, (4, 2, 2)))
    y = T(R(4, 3, 2, 2))

    def step():
        loss = (F.relu(x * 1.0).sum() + F.gelu(x).sum() + F.dropout(x, 0.3).sum() + F.dropout2d(x, 0.3).sum()
                + F.batch_norm(x, None, None, w, b, training=True).sum() + F.log_softmax(x, 1).sum()
                + F.cross_entropy(x, t, weight=T(np.ones(3)), label_smoothing=0.1) + F.nll_loss(x, t)
                + F.mse_loss(x, y) + F.l1_loss(x, y)
                + F.binary_cross_entropy_with_logits(x, y, pos_weight=T(np.ones(2))))
        F.relu_(x * 1.0)
        loss.backward()
    step()
    x.grad = w.grad = b.grad = None
    before, refs = allocated(), (sys.getrefcount(x), sys.getrefcount(t), sys.getrefcount(y))
    for _ in range(3):
        step()
        x.grad = w.grad = b.grad = None
    assert allocated() == before
    assert (sys.getrefcount(x), sys.getrefcount(t), sys.getrefcount(y)) == refs


# ---- PyTorch, where installed -------------------------------------------------------------------------------------
def test_against_torch():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    from gradcheck import check_against_torch
    check_against_torch(lambda a: F.gelu(a, approximate="tanh"), lambda a: tF.gelu(a, approximate="tanh"), [R(3, 4)])
    check_against_torch(lambda a: F.log_softmax(a, 1), lambda a: tF.log_softmax(a, 1), [R(3, 4, 2)])
    check_against_torch(lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True),
                        lambda a, w, b: tF.batch_norm(a, None, None, w, b, training=True), [R(4, 3, 2, 2), R(3), R(3)])
    t = rng.integers(0, 3, (4, 2, 2))
    t[0, 0, 0] = -100
    w = rng.uniform(0.5, 2, 3)
    for red, eps in itertools.product(("mean", "sum", "none"), (0.0, 0.3)):
        check_against_torch(
            lambda a: F.cross_entropy(a, gm.tensor(t), weight=gm.tensor(w), reduction=red, label_smoothing=eps),
            lambda a: tF.cross_entropy(a, torch.tensor(t), weight=torch.tensor(w), reduction=red, label_smoothing=eps),
            [R(4, 3, 2, 2)])
    check_against_torch(lambda a: F.nll_loss(a, gm.tensor(t), weight=gm.tensor(w)),
                        lambda a: tF.nll_loss(a, torch.tensor(t), weight=torch.tensor(w)), [R(4, 3, 2, 2)])
    check_against_torch(lambda a: F.cross_entropy(a, gm.tensor(np.array(2))),
                        lambda a: tF.cross_entropy(a, torch.tensor(2)), [R(3)])
    x = R(5, 3, 4)
    rm, rv = gm.zeros(3, dtype=gm.float64), gm.ones(3, dtype=gm.float64)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    F.batch_norm(gm.tensor(x), rm, rv, training=True, momentum=0.2)
    tF.batch_norm(torch.tensor(x), trm, trv, training=True, momentum=0.2)
    assert_close(rm, trm.numpy(), 1e-14, 1e-12)
    assert_close(rv, trv.numpy(), 1e-14, 1e-12)
    pw = rng.uniform(0.5, 2, 4)
    check_against_torch(lambda a: F.binary_cross_entropy_with_logits(a, gm.tensor(np.full((3, 4), 0.3)),
                                                                     pos_weight=gm.tensor(pw)),
                        lambda a: tF.binary_cross_entropy_with_logits(a, torch.tensor(np.full((3, 4), 0.3)),
                                                                      pos_weight=torch.tensor(pw)), [R(3, 4)])
