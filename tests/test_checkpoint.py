"""Activation checkpointing, proven in allocator bytes: what it saves, that gradients are bit-identical, that
dropout masks and autocast replay, that BatchNorm's running statistics are updated once, and its errors."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import nn
from gpumemnet.utils.checkpoint import checkpoint, checkpoint_sequential


def _net(blocks=16, channels=8, seed=0):
    """Conv-BN-ReLU blocks: each keeps two activations for backward (the conv output for BN, the ReLU
    output), and a checkpoint boundary keeps one."""
    gm.manual_seed(seed)
    return nn.Sequential(*[nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels),
                                         nn.ReLU()) for _ in range(blocks)])


def _activation_peak_and_grads(net, x, segments=None):
    for p in net.parameters():
        p.grad = None
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_stats("cpu")["by_category"]["activation"]["current"]
    out = checkpoint_sequential(net, segments, x) if segments else net(x)
    out.sum().backward()
    peak = gm.memory.memory_stats("cpu")["by_category"]["activation"]["peak"] - base
    return peak, [p.grad.numpy().copy() for p in net.parameters()]


def test_checkpoint_sequential_16_blocks_4_segments_keeps_at_most_35_percent():
    net = _net()
    x = gm.randn(4, 8, 16, 16)
    block = 4 * 8 * 16 * 16 * 4  # one activation: 32 KiB
    base_peak, base_grads = _activation_peak_and_grads(net, x)
    ck_peak, ck_grads = _activation_peak_and_grads(net, x, segments=4)
    bn_stats = 2 * 512  # each BatchNorm also keeps its per-channel mean and 1/std: one 512 B block each
    assert base_peak == 16 * (2 * block + bn_stats)
    # 3 segment boundaries + the last segment, run normally (4 blocks): 11 of 32 activations
    assert ck_peak == 3 * block + 4 * (2 * block + bn_stats)
    assert ck_peak <= 0.35 * base_peak
    for a, b in zip(base_grads, ck_grads):
        np.testing.assert_array_equal(a, b)  # bit-identical on the CPU


def test_checkpoint_sequential_on_meta_matches_cpu_bytes():
    # the allocator makes the same decisions on meta: the estimate of a checkpointed step is exact
    peaks = {}
    for dev in ("cpu", "meta"):
        gm.manual_seed(0)
        net = nn.Sequential(*[m for _ in range(4) for m in (nn.Conv2d(4, 4, 3, padding=1, device=dev), nn.ReLU())])
        x = gm.ones(2, 4, 8, 8, device=dev)
        gc.collect()
        gm.memory.reset_peak_memory_stats(dev)
        start = gm.memory.memory_allocated(dev)
        checkpoint_sequential(net, 2, x).sum().backward()
        peaks[dev] = gm.memory.max_memory_allocated(dev) - start
        del net, x
    assert peaks["cpu"] == peaks["meta"]


def test_dropout_masks_replay_exactly():
    gm.manual_seed(3)
    w = gm.randn(32, 32, requires_grad=True)
    x = gm.randn(8, 32)

    def seg(x):
        return nn.functional.dropout(x @ w, p=0.5, training=True).exp()

    state = gm.get_rng_state()
    out = checkpoint(seg, x)
    out.sum().backward()
    g_ck = w.grad.numpy().copy()
    after = gm.get_rng_state()
    w.grad = None
    gm.set_rng_state(state)
    out2 = seg(x)
    out2.sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), out2.detach().numpy())
    np.testing.assert_array_equal(g_ck, w.grad.numpy())
    assert gm.get_rng_state() == after  # recomputation put the generator back where it was


def test_batchnorm_running_stats_are_updated_once():
    gm.manual_seed(0)
    bn = nn.BatchNorm2d(3)
    conv = nn.Conv2d(3, 3, 1)
    x = gm.randn(4, 3, 5, 5)
    seq = nn.Sequential(conv, bn, nn.ReLU())
    checkpoint_sequential(nn.Sequential(seq, nn.Identity()), 2, x).sum().backward()
    mean_ck, var_ck = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    n_ck = int(bn.num_batches_tracked.item())
    bn2 = nn.BatchNorm2d(3)
    with gm.no_grad():
        nn.Sequential(conv, bn2)(x)
    np.testing.assert_allclose(mean_ck, bn2.running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(var_ck, bn2.running_var.numpy(), rtol=1e-6)
    assert n_ck == 1


def test_autocast_state_is_replayed():
    w = gm.randn(16, 16, requires_grad=True)
    x = gm.randn(4, 16)
    with gm.autocast("cpu", dtype=gm.bfloat16):
        out = checkpoint(lambda t: (t @ w).relu(), x)
    assert out.dtype == gm.bfloat16
    out.float().sum().backward()  # the recomputation runs outside autocast but replays it
    g = w.grad.numpy().copy()
    w.grad = None
    with gm.autocast("cpu", dtype=gm.bfloat16):
        out2 = (x @ w).relu()
    out2.float().sum().backward()
    np.testing.assert_array_equal(g, w.grad.numpy())


def test_no_input_requires_grad_nested_args_and_autograd_grad():
    w = gm.randn(6, 6, requires_grad=True)

    def seg(pair, scale=1.0):
        a, b = pair
        return ((a @ w) * b).exp() * scale

    a, b = gm.randn(3, 6), gm.randn(3, 6)
    out = checkpoint(seg, (a, b), scale=2.0)
    (gw,) = gm.autograd.grad(out.sum(), [w])
    ref = seg((a, b), scale=2.0)
    (gw_ref,) = gm.autograd.grad(ref.sum(), [w])
    np.testing.assert_array_equal(gw.numpy(), gw_ref.numpy())
    assert w.grad is None
    # gm.utils.checkpoint itself is callable, as in DESIGN.md
    out3 = gm.utils.checkpoint(seg, (a, b), scale=2.0)
    np.testing.assert_array_equal(out3.detach().numpy(), ref.detach().numpy())


def test_checkpoint_errors():
    with pytest.raises(TypeError, match="not a tensor"):
        checkpoint(lambda x: 3, gm.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match="callable"):
        checkpoint(5, gm.ones(2))
    seq = nn.Sequential(nn.ReLU(), nn.ReLU())
    for bad in (0, 3, -1):
        with pytest.raises(ValueError, match="between 1 and the number of modules"):
            checkpoint_sequential(seq, bad, gm.ones(2))
    with pytest.raises(TypeError):
        checkpoint_sequential(seq, 1.5, gm.ones(2))
