"""Autocast's bfloat16 weight gradients reaching float32 parameters: ToDtype.backward hands a bfloat16 gradient on as
it is to the leaf's AccumulateGrad, which widens it while it adds it into .grad (_C.binary's float32 + bfloat16:
one pass, csrc/ops_elementwise.c -> kernels/cpu/elementwise.c elementwise_add_widen_forward) or while it makes
.grad, instead of a float32 copy of the gradient and then the sum. The results must be the float32 sums of the
widened copies bit for bit (widening is exact), on every length and layout, with meta counting the bytes the CPU
allocates, and nothing that can see a gradient on its way (hooks, autograd.grad) may see a bfloat16 one."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C, nn
from gpumemnet._core import autograd as _ag
from gpumemnet._core import functions as _fn


def _bf16_values(n, seed):
    """float32 values that are exact bfloat16 (specials included), the float32 copy a bfloat16 tensor stands for."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 38, n)).astype(np.float32)
    pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.38e38, 1.0], np.float32)
    v[rng.integers(0, max(n, 1), n // 4)] = rng.choice(pool, n // 4)
    return (v.view(np.uint32) & 0xFFFF0000).view(np.float32)


def _f32_values(n, seed):
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 38, n)).astype(np.float32)
    v[rng.integers(0, max(n, 1), n // 8)] = np.array([np.inf, -np.inf, np.nan, 0.0, 1e-42], np.float32)[
        rng.integers(0, 5, n // 8)]
    return v


def _same_bits(got, want):
    """Equal bit for bit, except that any nan matches any nan (payloads follow the operand order of the hardware)."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("n", list(range(0, 40)) + [1000, 65537, 300001])
def test_f32_plus_bf16_is_the_sum_of_the_widened_copy(n):
    a, bw = _f32_values(n, n), _bf16_values(n, 1000 + n)
    b = gm.from_numpy(bw).to(gm.bfloat16)
    _same_bits(_C.binary(0, gm.from_numpy(a), b).numpy(), a + bw)
    g = gm.from_numpy(a.copy())
    out = _C.binary(0, g, b, g)  # in place, as AccumulateGrad adds
    assert out is g
    _same_bits(g.numpy(), a + bw)


def test_strided_and_broadcast_operands():
    a = _f32_values(6 * 35, 1).reshape(6, 35)
    bw = _bf16_values(35 * 6, 2).reshape(35, 6)
    b = gm.from_numpy(bw).to(gm.bfloat16)
    _same_bits(_C.binary(0, gm.from_numpy(a), b.t()).numpy(), a + bw.T)                   # strided b
    _same_bits(_C.binary(0, gm.from_numpy(a).t(), b).numpy(), a.T + bw)                   # strided a
    row = gm.from_numpy(bw[0, :].copy()).to(gm.bfloat16)                                   # b broadcast
    _same_bits(_C.binary(0, gm.from_numpy(a[:, :6].copy()), row).numpy(), a[:, :6] + bw[0])
    assert _C.binary(0, gm.from_numpy(a), b.t()).dtype == gm.float32


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    a, bw = _f32_values(5000, 3), _bf16_values(5000, 4)
    want = (torch.from_numpy(a) + torch.from_numpy(bw).to(torch.bfloat16)).numpy()
    _same_bits(_C.binary(0, gm.from_numpy(a), gm.from_numpy(bw).to(gm.bfloat16)).numpy(), want)


def test_meta_bytes_equal_cpu_bytes_and_no_float32_copy():
    peaks = {}
    for dev in ("cpu", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_stats(dev)["allocated"]["current"]
        g = gm.zeros(256, 1024, device=dev)
        b = gm.zeros(256, 1024, dtype=gm.bfloat16, device=dev)
        _C.binary(0, g, b, g)
        s = gm.memory.memory_stats(dev)
        peaks[dev] = (s["allocated"]["peak"] - base, s["by_category"]["workspace"]["peak"])
        del g, b
    assert peaks["cpu"] == peaks["meta"]
    assert peaks["cpu"][0] == 256 * 1024 * 6  # the two operands and nothing else: no widened copy of b


def _net():
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 5))


class _Twice(nn.Module):
    """One conv applied twice: two bfloat16 gradients of one weight meet in the engine."""

    def __init__(self):
        super().__init__()
        gm.manual_seed(1)
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.head = nn.Linear(3, 5)

    def forward(self, x):
        return self.head(self.conv(gm.relu(self.conv(x))).mean((2, 3)))


def _grads(make, widen, micro=2):
    rng = np.random.default_rng(0)
    x = gm.from_numpy(rng.standard_normal((4, 3, 12, 12)).astype(np.float32))
    y = gm.from_numpy(rng.integers(0, 5, 4))
    model = make()
    orig = _fn._widened_by_leaf
    _fn._widened_by_leaf = orig if widen else (lambda ctx, i=0: False)
    try:
        for i in range(micro):
            with gm.autocast("cpu", dtype=gm.bfloat16):
                loss = nn.functional.cross_entropy(model(x[2 * i:2 * i + 2]), y[2 * i:2 * i + 2])
            (loss * 1024.0).backward()
    finally:
        _fn._widened_by_leaf = orig
    return {k: p.grad for k, p in model.named_parameters()}


@pytest.mark.parametrize("make", [_net, _Twice], ids=["net", "weight_used_twice"])
def test_accumulated_autocast_gradients_are_unchanged_bit_for_bit(make, monkeypatch):
    seen = []
    apply = _ag.AccumulateGrad.apply_grads

    def spy(self, grads):
        seen.append(grads[0].dtype if grads[0] is not None else None)
        return apply(self, grads)

    monkeypatch.setattr(_ag.AccumulateGrad, "apply_grads", spy)
    got = _grads(make, True)
    assert gm.bfloat16 in seen  # the bfloat16 gradients did go to the leaves narrow (the path under test ran)
    seen.clear()
    want = _grads(make, False)
    assert gm.bfloat16 not in seen
    for k in want:
        assert got[k].dtype == gm.float32 and got[k].shape == want[k].shape, k
        np.testing.assert_array_equal(got[k].numpy().view(np.uint32), want[k].numpy().view(np.uint32), err_msg=k)


def test_hooks_and_autograd_grad_see_float32():
    model = _net()
    w = model[0].weight
    x = gm.from_numpy(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    seen = []
    h = w.register_hook(lambda g: seen.append(g.dtype))
    with gm.autocast("cpu", dtype=gm.bfloat16):
        loss = model(x).float().sum()
    loss.backward()
    h.remove()
    assert seen == [gm.float32] and w.grad.dtype == gm.float32
    with gm.autocast("cpu", dtype=gm.bfloat16):
        loss = model(x).float().sum()
    (gw,) = gm.autograd.grad(loss, [w])
    assert gw.dtype == gm.float32


def _two_casts_grad(widen):
    """A float32 leaf cast to bfloat16 twice (two ToDtype nodes): its two bfloat16 gradients meet in the engine
    (csrc/autograd_engine.c narrow_leaf_sum) and must be summed in float32, as their float32 copies were."""
    rng = np.random.default_rng(5)
    w = gm.from_numpy(rng.standard_normal(999).astype(np.float32)).requires_grad_()
    a, b = (gm.from_numpy(rng.standard_normal(999).astype(np.float32)).to(gm.bfloat16) for _ in range(2))
    orig = _fn._widened_by_leaf
    _fn._widened_by_leaf = orig if widen else (lambda ctx, i=0: False)
    try:
        for _ in range(2):
            ((w.to(gm.bfloat16) * a).float().sum() + (w.to(gm.bfloat16) * b).float().sum()).backward()
    finally:
        _fn._widened_by_leaf = orig
    return w.grad.numpy()


def test_two_bfloat16_gradients_of_one_leaf_are_summed_in_float32():
    got, want = _two_casts_grad(True), _two_casts_grad(False)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert (want.view(np.uint32) & 0xFFFF).any()  # the float32 sums are not all bfloat16 values: rounding would show
