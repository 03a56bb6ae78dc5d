"""bfloat16 activation and batch norm on AVX-512 (kernels/cpu/nn_bf16.c): they read and write bfloat16 directly.

Checked here: every activation, forward and backward, bit for bit against the float32 kernel's result rounded to
bfloat16 (what the generic bfloat16 loop computes) and against a float64 NumPy reference; every tail length of a
vector and the special values (signed zeros, infs, nans, subnormals); batch norm forward (training, eval) and
backward against float64 NumPy formulas; the fast and the generic path (GPUMEMNET_NN_BF16=portable, in a child
process) against each other; meta bytes against CPU bytes. On a CPU without AVX-512 both paths are the generic
one and these tests still hold."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet._core.activation import (RELU, LEAKY_RELU, SIGMOID, TANH, GELU, GELU_TANH, SILU, HARDSWISH,
                                        HARDSIGMOID, MISH, HARDTANH, ELU, SOFTPLUS)

HERE = os.path.dirname(os.path.abspath(__file__))
OPS = [(RELU, 0.0, 0.0), (LEAKY_RELU, 0.01, 0.0), (SIGMOID, 0.0, 0.0), (TANH, 0.0, 0.0), (GELU, 0.0, 0.0),
       (GELU_TANH, 0.0, 0.0), (SILU, 0.0, 0.0), (HARDSWISH, 0.0, 0.0), (HARDSIGMOID, 0.0, 0.0), (MISH, 0.0, 0.0),
       (HARDTANH, 0.0, 6.0), (HARDTANH, -1.0, 0.1), (ELU, 1.0, 0.0), (SOFTPLUS, 1.0, 20.0)]
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 6.0, -3.0, 3.0, 0.1, -1.0],
                   np.float32)


def bits(t):
    """The uint16 patterns of a bfloat16 tensor (bfloat16 -> float32 is exact)."""
    return (np.array(t.to(gm.float32).numpy()).view(np.uint32) >> 16).astype(np.uint16)


def data(n, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * 4).astype(np.float32)
    if n >= len(SPECIAL):
        a[rng.choice(n, len(SPECIAL), replace=False)] = SPECIAL
    return gm.from_numpy(a).to(gm.bfloat16)


def same_bits(got, want):
    g, w = bits(got), bits(want)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, f"{bad.size} of {g.size} differ, first at {bad[:5]}: got {g[bad[:5]]}, want {w[bad[:5]]}"


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 31, 32, 33, 511, 512, 513, 70001])
@pytest.mark.parametrize("op,alpha,beta", OPS)
def test_activation_forward_is_the_float32_kernel_rounded_once(op, alpha, beta, n):
    x = data(n, seed=n + 7 * op)
    want = _C.activation(op, x.to(gm.float32), alpha, None, beta).to(gm.bfloat16)
    same_bits(_C.activation(op, x, alpha, None, beta), want)
    y = x.clone()  # in place: out is inp
    _C.activation(op, y, alpha, y, beta)
    same_bits(y, want)


@pytest.mark.parametrize("n", [1, 17, 33, 513, 70001])
@pytest.mark.parametrize("op,alpha,beta", OPS)
def test_activation_backward_is_the_float32_kernel_rounded_once(op, alpha, beta, n):
    s, g = data(n, seed=n + op), data(n, seed=n + op + 100)
    want = _C.activation_backward(op, g.to(gm.float32), s.to(gm.float32), alpha, False, beta).to(gm.bfloat16)
    same_bits(_C.activation_backward(op, g, s, alpha, False, beta), want)


def f64(t):
    return np.array(t.to(gm.float64).numpy())


@pytest.mark.parametrize("n", [5, 64, 1000, 70001])
@np.errstate(invalid="ignore", over="ignore")  # the specials' references (inf * 0) are masked out
def test_relu_relu6_silu_against_float64_numpy(n):
    x = data(n, seed=3)
    xv = f64(x)
    finite = np.isfinite(xv)
    refs = {RELU: (np.where(xv <= 0, 0.0, xv), 0.0, 0.0),
            HARDTANH: (np.clip(xv, 0.0, 6.0), 0.0, 6.0),
            SILU: (xv * (0.5 + 0.5 * np.tanh(xv / 2)), 0.0, 0.0)}
    for op, (ref, a, b) in refs.items():
        got = f64(_C.activation(op, x, a, None, b))
        np.testing.assert_allclose(got[finite], ref[finite], rtol=2 ** -8, atol=1e-30)
        assert np.isnan(got[np.isnan(xv)]).all()
    # gradients, from the saved tensor each op keeps: relu/relu6 their output, silu its input
    g = data(n, seed=4)
    gv = f64(g)
    out_relu = _C.activation(RELU, x, 0.0, None, 0.0)
    np.testing.assert_array_equal(f64(_C.activation_backward(RELU, g, out_relu, 0.0, False, 0.0)),
                                  np.where(f64(out_relu) <= 0, 0.0, gv))  # a nan passes g
    out6 = _C.activation(HARDTANH, x, 0.0, None, 6.0)
    o6 = f64(out6)
    np.testing.assert_array_equal(f64(_C.activation_backward(HARDTANH, g, out6, 0.0, False, 6.0)),
                                  np.where((o6 <= 0) | (o6 >= 6), 0.0, gv))
    sg = 1.0 / (1.0 + np.exp(-xv))
    ref = gv * sg * (1.0 + xv * (1.0 - sg))
    got = f64(_C.activation_backward(SILU, g, x, 0.0, False, 0.0))
    ok = np.isfinite(ref) & np.isfinite(xv)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=2 ** -7, atol=1e-6 * np.abs(gv[ok]).max())


def bn_inputs(N, C, HW, seed):
    rng = np.random.default_rng(seed)
    x = gm.from_numpy((rng.standard_normal((N, C, HW)) * 3 + rng.standard_normal((1, C, 1)) * 5)
                      .astype(np.float32)).to(gm.bfloat16)
    w = gm.from_numpy(rng.standard_normal(C).astype(np.float32))
    b = gm.from_numpy(rng.standard_normal(C).astype(np.float32))
    rm = gm.from_numpy(rng.standard_normal(C).astype(np.float32))
    rv = gm.from_numpy((rng.random(C) + 0.5).astype(np.float32))
    return x, w, b, rm, rv


SHAPES = [(1, 1, 2), (2, 3, 1), (2, 3, 5), (4, 5, 16), (3, 2, 17), (2, 4, 33), (16, 3, 4096)]


@pytest.mark.parametrize("N,C,HW", SHAPES)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_forward_against_float64(N, C, HW, training):
    x, w, b, rm, rv = bn_inputs(N, C, HW, seed=N * C * HW)
    xv, rm0, rv0 = f64(x), f64(rm), f64(rv)
    out, mean, invstd = _C.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)
    assert out._dtype == x._dtype and mean._dtype == gm.float32.code
    mean_ref = xv.mean(axis=(0, 2)) if training else rm0
    var_ref = xv.var(axis=(0, 2)) if training else rv0
    ref = (xv - mean_ref[:, None]) / np.sqrt(var_ref[:, None] + 1e-5) * f64(w)[:, None] + f64(b)[:, None]
    # one bfloat16 rounding of the output (2^-9 relative) plus float32 sums
    np.testing.assert_allclose(f64(out), ref, rtol=2 ** -8, atol=2 ** -8 * np.abs(ref).max() * 1e-2 + 1e-6)
    np.testing.assert_allclose(f64(mean), mean_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(f64(invstd), 1 / np.sqrt(var_ref + 1e-5), rtol=1e-5)
    if training:
        n = N * HW
        np.testing.assert_allclose(f64(rm), 0.9 * rm0 + 0.1 * mean_ref, rtol=1e-5, atol=1e-6)
        if n > 1:
            np.testing.assert_allclose(f64(rv), 0.9 * rv0 + 0.1 * var_ref * n / (n - 1), rtol=1e-5)


@pytest.mark.parametrize("N,C,HW", SHAPES)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("need", [(True, True, True), (True, False, False), (False, True, True), (False, False, True)])
def test_batch_norm_backward_against_float64(N, C, HW, training, need):
    x, w, b, rm, rv = bn_inputs(N, C, HW, seed=1 + N * C * HW)
    g = gm.from_numpy(np.random.default_rng(5).standard_normal((N, C, HW)).astype(np.float32)).to(gm.bfloat16)
    _, mean, invstd = _C.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)
    keep_x = training or need[1]
    dx, dw, db = _C.batch_norm_backward(g, x if keep_x else None, w, mean, invstd, training, *need)
    xv, gv, mu, ist, wv = f64(x), f64(g), f64(mean)[:, None], f64(invstd)[:, None], f64(w)[:, None]
    xh = (xv - mu) * ist
    sg, sgx = gv.sum(axis=(0, 2)), (gv * xh).sum(axis=(0, 2))
    cnt = N * HW
    scale = np.abs(gv).max() * max(np.abs(f64(w)).max(), 1) * np.abs(f64(invstd)).max()
    if need[0]:
        ref = wv * ist * (gv - sg[:, None] / cnt - xh * sgx[:, None] / cnt) if training else gv * wv * ist
        np.testing.assert_allclose(f64(dx), ref, rtol=2 ** -7, atol=scale * 2 ** -7)
    else:
        assert dx is None
    if need[1]:
        np.testing.assert_allclose(f64(dw), sgx, rtol=1e-4, atol=1e-4 * np.abs(gv).sum(axis=(0, 2)).max())
    if need[2]:
        np.testing.assert_allclose(f64(db), sg, rtol=1e-4, atol=1e-4 * np.abs(gv).sum(axis=(0, 2)).max())


def test_batch_norm_bf16_gradcheck_like_float32():
    """The bfloat16 backward is the float32 one on the same values, to bfloat16's precision."""
    x, w, b, rm, rv = bn_inputs(4, 6, 37, seed=11)
    g = gm.from_numpy(np.random.default_rng(2).standard_normal((4, 6, 37)).astype(np.float32)).to(gm.bfloat16)
    _, m, s = _C.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
    dx = _C.batch_norm_backward(g, x, w, m, s, True, True, True, True)[0]
    _, m32, s32 = _C.batch_norm(x.to(gm.float32), None, None, w, b, True, 0.1, 1e-5)
    dx32 = _C.batch_norm_backward(g.to(gm.float32), x.to(gm.float32), w, m32, s32, True, True, True, True)[0]
    np.testing.assert_allclose(f64(dx), f64(dx32), rtol=2 ** -7, atol=2 ** -7 * np.abs(f64(dx32)).max())


CHILD = r"""
import sys, numpy as np
sys.path.insert(0, {here!r})
import gpumemnet as gm
from gpumemnet import _C
from test_nn_bf16 import data, bn_inputs, bits, OPS
out = []
for op, a, b in OPS:
    x, g = data(4099, op), data(4099, op + 50)
    out.append(bits(_C.activation(op, x, a, None, b)))
    out.append(bits(_C.activation_backward(op, g, x, a, False, b)))
x, w, b, rm, rv = bn_inputs(3, 4, 1000, 9)
y, m, s = _C.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
dx, dw, db = _C.batch_norm_backward(y, x, w, m, s, True, True, True, True)
out += [bits(y).ravel(), bits(dx).ravel()]
np.save(sys.argv[1], np.concatenate([o.astype(np.int64) for o in out] +
        [np.array(t.numpy()).astype(np.float64).view(np.int64) for t in (m, s, dw, db)]))
"""


def test_fast_and_generic_paths_agree(tmp_path):
    """Activations bit for bit; batch norm to one bfloat16 unit (float32 vs double arithmetic)."""
    res = {}
    for mode in ("fast", "portable"):
        env = dict(os.environ)
        env.pop("GPUMEMNET_NN_BF16", None)
        if mode == "portable":
            env["GPUMEMNET_NN_BF16"] = "portable"
        path = tmp_path / f"{mode}.npy"
        subprocess.run([sys.executable, "-c", CHILD.format(here=HERE), str(path)], env=env, check=True,
                       timeout=120)
        res[mode] = np.load(path)
    n_act = 2 * len(OPS) * 4099
    np.testing.assert_array_equal(res["fast"][:n_act], res["portable"][:n_act])
    bn_f, bn_p = res["fast"][n_act:n_act + 24000], res["portable"][n_act:n_act + 24000]
    as_f = lambda v: (v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
    np.testing.assert_allclose(as_f(bn_f), as_f(bn_p), rtol=2 ** -7, atol=2 ** -7 * np.abs(as_f(bn_p)).max())
    stats_f = res["fast"][n_act + 24000:].view(np.float64)
    stats_p = res["portable"][n_act + 24000:].view(np.float64)
    np.testing.assert_allclose(stats_f, stats_p, rtol=1e-4, atol=1e-3)


def test_meta_bytes_equal_cpu_bytes():
    def run(device):
        gm.memory.reset_peak_memory_stats(device)
        before = gm.memory.memory_stats(device)["allocated"]["current"]
        x = gm.zeros((4, 8, 9, 9), dtype=gm.bfloat16, device=device, requires_grad=True)
        bn = gm.nn.BatchNorm2d(8).to(device)
        y = gm.nn.functional.relu6(bn(x))
        y = gm.nn.functional.silu(y) + gm.nn.functional.relu(y)
        y.sum().backward()
        st = gm.memory.memory_stats(device)["allocated"]
        return st["current"] - before, st["peak"] - before
    assert run("meta") == run("cpu")
