"""The float32 activations with a transcendental function (sigmoid, tanh, GELU both forms, SiLU, Mish, ELU,
softplus), which run on glibc's vector math functions where the build links libmvec (kernels/cpu/vec_math.h).

Checked: every element's result is within a few float32 ulps of the float64 formula (NumPy); an element's result
does not depend on where it sits in the array or on the thread count (bit for bit: the block loops of
kernels/cpu/activation.c send every element through the same vector function); infinities, NaN and signed zeros
come out as PyTorch gives them."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet._core.activation import ELU, GELU, GELU_TANH, MISH, SIGMOID, SILU, SOFTPLUS, TANH

ERF = np.vectorize(math.erf)
GELU_BETA, GELU_KAPPA = math.sqrt(2 / math.pi), 0.044715


def _softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


# op -> (alpha, beta, float64 forward formula)
FORMULAS = {
    SIGMOID: (0.0, 0.0, lambda x: 1 / (1 + np.exp(-x))),
    TANH: (0.0, 0.0, np.tanh),
    GELU: (0.0, 0.0, lambda x: 0.5 * x * (1 + ERF(x / math.sqrt(2)))),
    GELU_TANH: (0.0, 0.0, lambda x: 0.5 * x * (1 + np.tanh(GELU_BETA * (x + GELU_KAPPA * x ** 3)))),
    SILU: (0.0, 0.0, lambda x: x / (1 + np.exp(-x))),
    MISH: (0.0, 0.0, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    ELU: (1.0, 0.0, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))),
    SOFTPLUS: (1.0, 20.0, _softplus),
}


def _data(n, seed=0):
    return (np.random.default_rng(seed).standard_normal(n) * 5).astype(np.float32)


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("op", list(FORMULAS))
def test_forward_within_a_few_ulps_of_float64(op):
    alpha, beta, f = FORMULAS[op]
    x = _data(4099)
    got = _C.activation(op, gm.from_numpy(x), alpha, None, beta).numpy().astype(np.float64)
    with np.errstate(over="ignore"):
        ref = f(x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    # 4 ulps of the result, plus 4 ulps of the input for the forms that cancel near 0 (gelu, silu, mish at -x)
    bound = 4 * ulp + 4 * np.spacing(np.abs(x)).astype(np.float64) * (op not in (SIGMOID, TANH))
    worst = np.max(np.abs(got - ref) - bound)
    assert worst <= 0, f"{worst} beyond 4 ulps"


@pytest.mark.parametrize("op", list(FORMULAS))
def test_result_does_not_depend_on_position_or_threads(op):
    alpha, beta, _ = FORMULAS[op]
    x, g = _data(70001, 1), _data(70001, 2)
    fwd = _bits(_C.activation(op, gm.from_numpy(x), alpha, None, beta).numpy())
    bwd = _bits(_C.activation_backward(op, gm.from_numpy(g), gm.from_numpy(x), alpha, False, beta).numpy())
    for off in (1, 5, 17, 63, 64, 69950):
        part = _C.activation(op, gm.from_numpy(x[off:].copy()), alpha, None, beta).numpy()
        np.testing.assert_array_equal(_bits(part), fwd[off:], err_msg=f"forward, offset {off}")
        part = _C.activation_backward(op, gm.from_numpy(g[off:].copy()), gm.from_numpy(x[off:].copy()), alpha,
                                      False, beta).numpy()
        np.testing.assert_array_equal(_bits(part), bwd[off:], err_msg=f"backward, offset {off}")
    threads = gm.get_num_threads()
    try:
        gm.set_num_threads(1)
        one = _bits(_C.activation(op, gm.from_numpy(x), alpha, None, beta).numpy())
    finally:
        gm.set_num_threads(threads)
    np.testing.assert_array_equal(one, fwd)


def test_special_values_as_pytorch():
    x = gm.tensor([np.inf, -np.inf, np.nan, -0.0, 0.0, 100.0, -100.0], dtype=gm.float32)
    sig = _C.activation(SIGMOID, x, 0.0, None, 0.0).numpy()
    np.testing.assert_array_equal(sig, np.array([1, 0, np.nan, 0.5, 0.5, 1, 0], np.float32))
    th = _C.activation(TANH, x, 0.0, None, 0.0).numpy()
    np.testing.assert_array_equal(th, np.array([1, -1, np.nan, -0.0, 0.0, 1, -1], np.float32))
    assert np.signbit(th[3]) and not np.signbit(th[4])
    silu = _C.activation(SILU, x, 0.0, None, 0.0).numpy()
    assert silu[0] == np.inf and np.isnan(silu[2]) and silu[6] == -0.0


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("D", [1, 50, 63, 64, 65, 1000])
def test_last_dim_softmax_within_a_few_ulps(D, log):
    """softmax / log_softmax over the last dim take their exps 64 at a time on the vector exp (kernels/cpu/softmax.c):
    within a few float32 ulps of float64 NumPy, for rows shorter than, equal to and longer than a block."""
    x = _data(7 * D, 3).reshape(7, D)
    x[1, :] = -np.inf if D > 1 else x[1, :]  # a row of -inf: NaN, as PyTorch
    got = _C.softmax(gm.from_numpy(x), -1, log).numpy().astype(np.float64)
    xd = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        shifted = xd - np.max(xd, axis=1, keepdims=True)
        ref = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True)) if log else \
            np.exp(shifted) / np.sum(np.exp(shifted), axis=1, keepdims=True)
    if D > 1:
        assert np.isnan(got[1]).all()
    rows = [r for r in range(7) if not (D > 1 and r == 1)]
    # a few ulps of the result, plus the float32 rounding of x - max, which exp turns into a relative error of
    # |x - max| * 2^-24 (the kernel takes exp in single precision, as it always did)
    ulps = 8 * np.spacing(np.abs(ref[rows]).astype(np.float32)).astype(np.float64)
    shift = 2.0 ** -23 * (np.abs(shifted[rows]) + 1) * (1 if log else np.abs(ref[rows]))
    assert np.all(np.abs(got[rows] - ref[rows]) <= ulps + shift + 1e-38)


def test_last_dim_softmax_rows_do_not_depend_on_their_neighbours_or_threads():
    x = _data(4 * 70, 4).reshape(4, 70)
    full = _bits(_C.softmax(gm.from_numpy(x), -1, False).numpy())
    for r in range(4):
        alone = _bits(_C.softmax(gm.from_numpy(x[r:r + 1].copy()), -1, False).numpy())
        np.testing.assert_array_equal(alone[0], full[r])
    big = _data(3000 * 50, 5).reshape(3000, 50)
    two = _bits(_C.softmax(gm.from_numpy(big), -1, False).numpy())
    threads = gm.get_num_threads()
    try:
        gm.set_num_threads(1)
        one = _bits(_C.softmax(gm.from_numpy(big), -1, False).numpy())
    finally:
        gm.set_num_threads(threads)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("D", [1, 50, 64, 131])
def test_last_dim_softmax_gradient(D, dtype, log):
    """The gradient over last-dim rows (softmax_rows_backward): y * (g - sum(g * y)) for softmax, g - exp(y) *
    sum(g) for log_softmax (its exps on the vector exp, 64 at a time), against float64 NumPy from the same y; the
    same bits at one thread and two, and for a row alone."""
    rng = np.random.default_rng(D)
    x = gm.from_numpy((rng.standard_normal((1000, D)) * 4).astype(dtype))
    g = (rng.standard_normal((1000, D))).astype(dtype)
    y = _C.softmax(x, -1, log)
    got = _C.softmax_backward(gm.from_numpy(g), y, -1, log).numpy()
    yd, gd = y.numpy().astype(np.float64), g.astype(np.float64)
    ref = gd - np.exp(yd) * gd.sum(axis=1, keepdims=True) if log else \
        yd * (gd - (gd * yd).sum(axis=1, keepdims=True))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(gd).sum(axis=1, keepdims=True).max())
    threads = gm.get_num_threads()
    try:
        gm.set_num_threads(1)
        one = _C.softmax_backward(gm.from_numpy(g), y, -1, log).numpy()
    finally:
        gm.set_num_threads(threads)
    np.testing.assert_array_equal(one.view(np.uint8), got.view(np.uint8))
    alone = _C.softmax_backward(gm.from_numpy(g[7:8].copy()), gm.from_numpy(y.numpy()[7:8].copy()), -1, log)
    np.testing.assert_array_equal(alone.numpy()[0].view(np.uint8), got[7].view(np.uint8))


@pytest.mark.parametrize("log", [False, True])
def test_last_dim_softmax_of_masked_scores(log):
    """Causal attention's scores: -inf above the diagonal. Masked entries give exactly 0 (log: -inf), the others
    those of the unmasked part alone; an exponent below -87 gives 0 in single precision (kernels/cpu/softmax.c
    EXP_FLOOR: its exp is at most a denormal), and so does the gradient's exp of such a log-probability."""
    L = 70
    x = _data(L * L, 6).reshape(L, L)
    x[np.triu_indices(L, 1)] = -np.inf
    x[10, 3] = x[10, :11].max() - 95.0  # exp(-95) = 5.5e-42: a float32 denormal, given as 0
    got = _C.softmax(gm.from_numpy(x), -1, log).numpy()
    for r in range(L):
        row = x[r, :r + 1].astype(np.float64)
        shifted = row - row.max()
        ref = shifted - np.log(np.exp(shifted).sum()) if log else np.exp(shifted) / np.exp(shifted).sum()
        if not log:
            ref[shifted < -87.0] = 0.0
        np.testing.assert_allclose(got[r, :r + 1], ref, rtol=1e-5, atol=1e-30 if not log else 1e-5)
        assert np.all(got[r, r + 1:] == (-np.inf if log else 0.0))
    g = np.ones((L, L), np.float32)
    dx = _C.softmax_backward(gm.from_numpy(g), gm.from_numpy(got), -1, log).numpy()
    assert np.all(np.isfinite(dx)) and np.all(dx[np.triu_indices(L, 1)] == (1.0 if log else 0.0))
