"""The fused LSTM and GRU cells (_C.lstm_cell, _C.gru_cell and their backwards; kernels/rnn_cell.h) against NumPy:
the forward against the cells' equations in float64, the backward against float64 central differences of the same
NumPy forward, the half types against float64 within their rounding; their argument checks; and the bytes a
training forward of nn.LSTM / nn.GRU keeps. No PyTorch needed, so that the sanitizer stage runs the C code too
(tests/test_nn_rnn.py compares whole layers with PyTorch)."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

R = np.random.default_rng(0)
N, H = 3, 5


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm_ref(gi, gh, c):
    """(h, c') of one LSTM step, gates i, f, g, o."""
    i, f, g, o = np.split(gi + gh, 4, axis=1)
    c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c_new), c_new


def gru_ref(gi, gh, h):
    """h' of one GRU step, gates r, z, n."""
    (ri, zi, ni), (rh, zh, nh) = np.split(gi, 3, axis=1), np.split(gh, 3, axis=1)
    r, z = _sigmoid(ri + rh), _sigmoid(zi + zh)
    n = np.tanh(ni + r * nh)
    return n + z * (h - n)


def numeric_grad(f, x, eps=1e-6):
    """d f(x) / dx for a scalar f, by central differences."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        x0 = x[idx]
        x[idx] = x0 + eps
        up = f(x)
        x[idx] = x0 - eps
        down = f(x)
        x[idx] = x0
        g[idx] = (up - down) / (2 * eps)
    return g


def t(a, dtype=gm.float64):
    return gm.tensor(a, dtype=dtype)


def test_lstm_cell_forward_and_backward():
    gi, gh, c = R.standard_normal((N, 4 * H)), R.standard_normal((N, 4 * H)), R.standard_normal((N, H))
    h, c_new, act = _C.lstm_cell(t(gi), t(gh), t(c))
    ref_h, ref_c = lstm_ref(gi, gh, c)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(c_new.numpy(), ref_c, rtol=1e-13, atol=1e-15)
    dh, dc = R.standard_normal((N, H)), R.standard_normal((N, H))
    d_gates, dc_prev = _C.lstm_cell_backward(t(dh), t(dc), act, t(c), c_new)

    def loss(gates=gi, c=c):
        h, c_new = lstm_ref(gates, gh, c)
        return np.sum(dh * h + dc * c_new)
    np.testing.assert_allclose(d_gates.numpy(), numeric_grad(lambda x: loss(gates=x), gi.copy()), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dc_prev.numpy(), numeric_grad(lambda x: loss(c=x), c.copy()), rtol=1e-6, atol=1e-8)


def test_gru_cell_forward_and_backward():
    gi, gh, h = R.standard_normal((N, 3 * H)), R.standard_normal((N, 3 * H)), R.standard_normal((N, H))
    h_new, ws = _C.gru_cell(t(gi), t(gh), t(h))
    np.testing.assert_allclose(h_new.numpy(), gru_ref(gi, gh, h), rtol=1e-13, atol=1e-15)
    dh = R.standard_normal((N, H))
    d_gi, d_gh, dh_prev = _C.gru_cell_backward(t(dh), ws, t(h))

    def loss(gi=gi, gh=gh, h=h):
        return np.sum(dh * gru_ref(gi, gh, h))
    np.testing.assert_allclose(d_gi.numpy(), numeric_grad(lambda x: loss(gi=x), gi.copy()), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(d_gh.numpy(), numeric_grad(lambda x: loss(gh=x), gh.copy()), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dh_prev.numpy(), numeric_grad(lambda x: loss(h=x), h.copy()), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype, tol", [(gm.float32, 1e-6), (gm.bfloat16, 1e-2), (gm.float16, 2e-3)])
def test_narrow_dtypes_round_once(dtype, tol):
    """float32 (on the vector functions; 37 units: a vector body and a remainder) and the half types: the float64
    equations within the format's rounding."""
    h_units = 37
    gi, gh = R.standard_normal((4, 4 * h_units)), R.standard_normal((4, 4 * h_units))
    c = R.standard_normal((4, h_units))
    gi, gh, c = (t(a, dtype).double().numpy() for a in (gi, gh, c))  # values the narrow type holds exactly
    h, c_new, _ = _C.lstm_cell(t(gi, dtype), t(gh, dtype), t(c, dtype))
    ref_h, ref_c = lstm_ref(gi, gh, c)
    np.testing.assert_allclose(h.double().numpy(), ref_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(c_new.double().numpy(), ref_c, rtol=tol, atol=tol)
    h_new, _ = _C.gru_cell(t(gi[:, :3 * h_units], dtype), t(gh[:, :3 * h_units], dtype), t(c, dtype))
    np.testing.assert_allclose(h_new.double().numpy(), gru_ref(gi[:, :3 * h_units], gh[:, :3 * h_units], c),
                               rtol=tol, atol=tol)


def test_refused_arguments_name_the_argument():
    c = gm.zeros(3, 5)
    with pytest.raises(ValueError, match=r"lstm_cell: gh must have shape \(3, 20\), got \(3, 19\)"):
        _C.lstm_cell(gm.zeros(3, 20), gm.zeros(3, 19), c)
    with pytest.raises(TypeError, match="lstm_cell: gi dtype float64 does not match the state dtype float32"):
        _C.lstm_cell(gm.zeros(3, 20, dtype=gm.float64), gm.zeros(3, 20), c)
    with pytest.raises(ValueError, match=r"gru_cell: h must be 2-D \(batch, hidden\), got shape \(5,\)"):
        _C.gru_cell(gm.zeros(1, 15), gm.zeros(1, 15), gm.zeros(5))
    with pytest.raises(TypeError, match="gru_cell_backward: dh must be a floating point tensor"):
        _C.gru_cell_backward(gm.zeros(3, 5, dtype=gm.int64), gm.zeros(3, 20), c)
    with pytest.raises(ValueError, match=r"lstm_cell_backward: act must have shape \(3, 20\)"):
        _C.lstm_cell_backward(c, c, gm.zeros(3, 15), c, c)
    with pytest.raises(TypeError, match="lstm_cell: gi must be a Tensor, got list"):
        _C.lstm_cell([1.0], gm.zeros(3, 20), c)


@pytest.mark.parametrize("cls, kept_per_step", [("LSTM", 6), ("GRU", 5)])
def test_training_forward_keeps_exact_bytes(cls, kept_per_step):
    """What a training forward leaves allocated, in units of one (N, H) float32 state. Per step the LSTM (one node
    for the layer: nn/_rnn_layer.py) keeps its activated gates (4), its h for the hidden projection's backward (1)
    and its c (1), not tanh(c') (recomputed in backward); the GRU keeps r, z, n and a copy of the hidden
    projection's n part (4) and its h (1), not the whole hidden projection. Besides: the zero initial state(s), the
    output (T units), the final state(s)."""
    T, n, h = 10, 8, 32
    m = getattr(gm.nn, cls)(4, h)
    x = gm.randn(T, n, 4)
    gc.collect()  # an earlier test's cyclic garbage (a class defined in a test, its graph) must not go in between
    before = gm.memory.memory_allocated("cpu")
    out, states = m(x)
    kinds = 2 if cls == "LSTM" else 1
    units = kinds + T * kept_per_step - 1 + T + kinds  # the last h: read by no step, kept only in the output
    assert gm.memory.memory_allocated("cpu") - before == units * n * h * 4


def test_strided_arguments_give_the_contiguous_results():
    """Arguments that are views with strides (a column slice, a transpose) are copied, not misread."""
    wide, ct = R.standard_normal((N, 8 * H)), R.standard_normal((H, N))
    gi_view, c_view = t(wide)[:, ::2], t(ct).t()
    gi, c = gi_view.contiguous(), c_view.contiguous()
    gh = t(R.standard_normal((N, 4 * H)))
    for got, want in zip(_C.lstm_cell(gi_view, gh, c_view), _C.lstm_cell(gi, gh, c)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for got, want in zip(_C.gru_cell(gi_view[:, :3 * H], gh[:, :3 * H], c_view),
                         _C.gru_cell(gi[:, :3 * H].contiguous(), gh[:, :3 * H].contiguous(), c)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
