"""nn ops: activations and dropout (csrc/ops_activation.c, csrc/ops_dropout.c, kernels/cpu/{activation,dropout}.c,
nn/_functional_nn.py).

Each op is checked against a NumPy formula (the independent reference), in float64 and float32 (float16/bfloat16
where the kernels accept them), its float64 gradient against finite differences (tests/gradcheck.py), its error
paths, and its behaviour on meta (shapes, allocations, no data). Memory claims in exact allocator bytes: what an
activation's backward keeps, in-place relu, dropout's mask one byte per element."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import _functional_nn as F
from gradcheck import assert_close, gradcheck, to_numpy
from nnops_util import FLOAT_TYPES, NZ, TOL, R, T, allocated, rounded, stored


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
    assert out is y and y.grad_fn is not None and y.grad_fn.name() == "ReluBackward0"
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
    F.relu_(y[1:])  # a view of a tensor in a graph: recorded on y, as PyTorch's CopySlices (test_view_writes.py)
    assert (y.detach().numpy()[1:] >= 0).all() and y.grad_fn is not None
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
    # integers: relu / relu6 / hardtanh clamp them as PyTorch's do; silu refuses them, as PyTorch's does
    with pytest.raises(TypeError, match="silu: input must be a floating point tensor"):
        F.silu(gm.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="must be a Tensor"):
        F.sigmoid([1.0, 2.0])
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        F.gelu(T(R(3)), approximate="fast")
    with pytest.raises(ValueError, match=r"grad shape \(3,\) does not match saved tensor shape \(4,\)"):
        _C.activation_backward(0, T(R(3)), T(R(4)))
    with pytest.raises(ValueError, match="unknown op 99"):
        _C.activation(99, T(R(3)))


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
    assert gm.get_rng_state().equal(after)  # advanced exactly as the float32 rand of the same count
    offset = lambda st: int(st.numpy().view("<u8")[1])  # noqa: E731  (the state's second word: the offset)
    assert offset(after) - offset(state) == math.ceil(42 / 4)
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
    assert gm.get_rng_state().equal(state)  # the identity draws nothing
    a = T(R(3, 4), requires_grad=True)
    z = F.dropout(a, 1.0)
    assert_close(z.detach(), np.zeros((3, 4)), 0, 0)
    assert gm.get_rng_state().equal(state)  # p = 1 drops everything without drawing
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
    # 3-D is (N, C, L) as PyTorch reads it (with a warning), and gradients through the same channel mask
    a = T(R(4, 3, 3) + 10.0, requires_grad=True)
    state = gm.get_rng_state()
    with pytest.warns(UserWarning, match="interpreted as shape \\(N, C, L\\)"):
        F.dropout2d(a, 0.5).sum().backward()
    gm.set_rng_state(state)
    keep = rand_keep((4, 3), 0.5)
    assert_close(a.grad, np.broadcast_to((keep / 0.5)[:, :, None], (4, 3, 3)), 0, 0)
    with pytest.raises(ValueError, match=r"dropout probability has to be between 0 and 1"):
        F.dropout2d(T(R(4, 5, 6)), 1.5)


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
    assert gm.get_rng_state().equal(cpu_after)
    assert tuple(out.shape) == (10, 10) and tuple(mask.shape) == (10, 10) and mask.dtype == gm.bool_
    assert _C.memory_allocated("meta") - before == rounded(400) + rounded(100)
    out, mask = _C.dropout(gm.empty(2, 3, 4, 4, device="meta"), 0.5, True)
    assert tuple(mask.shape) == (2, 3)
