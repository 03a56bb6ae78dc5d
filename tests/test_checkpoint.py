"""Activation checkpointing, proven in allocator bytes: what it saves, that gradients are bit-identical, that
dropout masks and autocast replay, that BatchNorm's running statistics are updated again by the recomputation (as PyTorch's), and its errors.

Every test but the error and meta ones runs once per device (the `device` fixture of cuda_util.py: "cpu", and
"cuda" when present, a GPU or the emulator). Checkpointing is the same on CUDA: the same activations are kept
and dropped, and the recomputation runs the same kernels on the same device, so gradients stay bit-identical.
What CUDA adds (batch norm's per-block partial sums, cuDNN's convolution workspace) is workspace, freed before
each op returns: the activation counts below do not see it."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import nn
from gpumemnet.utils.checkpoint import checkpoint, checkpoint_sequential

from cuda_util import device, to_np  # noqa: F401  (device: the per-device fixture)


def _net(blocks=16, channels=8, seed=0, device="cpu"):
    """Conv-BN-ReLU blocks: each keeps two activations for backward (the conv output for BN, the ReLU
    output), and a checkpoint boundary keeps one."""
    gm.manual_seed(seed)
    return nn.Sequential(*[nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels),
                                         nn.ReLU()) for _ in range(blocks)]).to(device)


def _activation_peak_and_grads(net, x, segments=None, amp_dtype=None):
    """The activation peak of a forward (under autocast when amp_dtype is given) and a backward (outside it, as
    in story 002's loop), and the gradients."""
    dev = x.device
    for p in net.parameters():
        p.grad = None
    gc.collect()
    gm.memory.reset_peak_memory_stats(dev)
    base = gm.memory.memory_stats(dev)["by_category"]["activation"]["current"]
    with gm.autocast(dev.type, dtype=amp_dtype or gm.float16, enabled=amp_dtype is not None):
        out = checkpoint_sequential(net, segments, x, use_reentrant=False) if segments else net(x)
        loss = out.float().sum()
    loss.backward()
    peak = gm.memory.memory_stats(dev)["by_category"]["activation"]["peak"] - base
    return peak, [to_np(p.grad) for p in net.parameters()]


def test_checkpoint_sequential_16_blocks_4_segments_keeps_at_most_35_percent(device):
    net = _net(device=device)
    x = gm.randn(4, 8, 16, 16).to(device)
    block = 4 * 8 * 16 * 16 * 4  # one activation: 32 KiB
    base_peak, base_grads = _activation_peak_and_grads(net, x)
    ck_peak, ck_grads = _activation_peak_and_grads(net, x, segments=4)
    bn_stats = 2 * 512  # each BatchNorm also keeps its per-channel mean and 1/std: one 512 B block each
    assert base_peak == 16 * (2 * block + bn_stats)
    # 3 segment boundaries + the last segment, run normally (4 blocks): 11 of 32 activations
    assert ck_peak == 3 * block + 4 * (2 * block + bn_stats)
    assert ck_peak <= 0.35 * base_peak
    for a, b in zip(base_grads, ck_grads):
        np.testing.assert_array_equal(a, b)  # bit-identical: the same kernels recompute the same values


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16])
def test_checkpoint_sequential_under_autocast_halves_and_stays_bit_identical(device, dtype):
    # story 002's combination: checkpoint inside autocast. The recomputation replays autocast (new low-precision
    # copies of the weights, the same values), so the gradients are the plain autocast run's, bit for bit; the
    # kept activations are the float32 run's in half the bytes: a conv output for BN and the ReLU output per
    # block (low precision) and BN's float32 per-channel mean and 1/std (one 512-byte block each). The
    # low-precision weight copies are not kept: each convolution keeps its float32 weight and casts it again in
    # backward (README "Choices"), and autocast's cache lets go of a copy once a convolution has used it.
    net = _net(blocks=8, device=device)
    x = gm.randn(4, 8, 16, 16).to(device)
    base_peak, base_grads = _activation_peak_and_grads(net, x, amp_dtype=dtype)
    ck_peak, ck_grads = _activation_peak_and_grads(net, x, segments=4, amp_dtype=dtype)
    block = 4 * 8 * 16 * 16 * 2
    per_block = 2 * block + 2 * 512
    assert base_peak == 8 * per_block
    # 3 boundaries (the segments' outputs) + the last segment's 2 blocks, kept as without checkpointing
    assert ck_peak == 3 * block + 2 * per_block
    assert ck_peak < 0.5 * base_peak
    assert all(g.dtype == np.float64 for g in ck_grads) and all(np.isfinite(g).all() for g in ck_grads)
    for a, b in zip(base_grads, ck_grads):
        np.testing.assert_array_equal(a, b)


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
        checkpoint_sequential(net, 2, x, use_reentrant=False).sum().backward()
        peaks[dev] = gm.memory.max_memory_allocated(dev) - start
        del net, x
    assert peaks["cpu"] == peaks["meta"]


def test_dropout_masks_replay_exactly(device):
    gm.manual_seed(3)
    w = gm.randn(32, 32).to(device).requires_grad_()
    x = gm.randn(8, 32).to(device)

    def seg(x):
        return nn.functional.dropout(x @ w, p=0.5, training=True).exp()

    state = gm.get_rng_state()
    out = checkpoint(seg, x, use_reentrant=False)
    out.sum().backward()
    g_ck = to_np(w.grad)
    after = gm.get_rng_state()
    w.grad = None
    gm.set_rng_state(state)
    out2 = seg(x)
    out2.sum().backward()
    np.testing.assert_array_equal(to_np(out), to_np(out2))
    np.testing.assert_array_equal(g_ck, to_np(w.grad))
    assert gm.get_rng_state().equal(after)  # recomputation put the generator back where it was


def test_batchnorm_running_stats_are_updated_again_when_recomputed(device):
    """PyTorch's checkpoint replays BatchNorm's forward in backward, which moves the running statistics and the
    batch count a second time; scripts that compare with PyTorch or resume its checkpoints rely on the same
    buffers. Reference: the same batch through a plain BatchNorm twice."""
    gm.manual_seed(0)
    bn = nn.BatchNorm2d(3).to(device)
    conv = nn.Conv2d(3, 3, 1).to(device)
    x = gm.randn(4, 3, 5, 5).to(device)
    seq = nn.Sequential(conv, bn, nn.ReLU())
    checkpoint_sequential(nn.Sequential(seq, nn.Identity()), 2, x, use_reentrant=False).sum().backward()
    mean_ck, var_ck = to_np(bn.running_mean), to_np(bn.running_var)
    n_ck = int(bn.num_batches_tracked.item())
    bn2 = nn.BatchNorm2d(3).to(device)
    with gm.no_grad():
        for _ in range(2):
            nn.Sequential(conv, bn2)(x)
    np.testing.assert_allclose(mean_ck, to_np(bn2.running_mean), rtol=1e-6)
    np.testing.assert_allclose(var_ck, to_np(bn2.running_var), rtol=1e-6)
    assert n_ck == 2


@pytest.mark.parametrize("reentrant", [True, False])
def test_batchnorm_buffers_under_checkpoint_match_pytorch(reentrant):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5, 5))
    params = [rng.uniform(-1, 1, s) for s in [(4, 3, 3, 3), (4,), (4,), (4,)]]
    bufs = []
    for lib, ckpt in ((torch, torch.utils.checkpoint.checkpoint), (gm, checkpoint)):
        m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4, momentum=None), lib.nn.ReLU()).double()
        with lib.no_grad():
            for p, v in zip(m.parameters(), params):
                p.copy_(lib.tensor(v))
        xt = lib.tensor(x, requires_grad=True)
        ckpt(m, xt, use_reentrant=reentrant).sum().backward()
        bufs.append([b.detach().numpy() if lib is torch else to_np(b) for b in m.buffers()])
    for ours, ref in zip(bufs[1], bufs[0]):
        np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16])
def test_autocast_state_is_replayed(device, dtype):
    w = gm.randn(16, 16).to(device).requires_grad_()
    x = gm.randn(4, 16).to(device)
    with gm.autocast(device, dtype=dtype):
        out = checkpoint(lambda t: (t @ w).relu(), x, use_reentrant=False)
    assert out.dtype == dtype
    out.float().sum().backward()  # the recomputation runs outside autocast but replays it
    g = to_np(w.grad)
    w.grad = None
    with gm.autocast(device, dtype=dtype):
        out2 = (x @ w).relu()
    out2.float().sum().backward()
    np.testing.assert_array_equal(g, to_np(w.grad))


def test_no_input_requires_grad_nested_args_and_autograd_grad(device):
    w = gm.randn(6, 6).to(device).requires_grad_()

    def seg(pair, scale=1.0):
        a, b = pair
        return ((a @ w) * b).exp() * scale

    a, b = gm.randn(3, 6).to(device), gm.randn(3, 6).to(device)
    out = checkpoint(seg, (a, b), scale=2.0, use_reentrant=False)
    (gw,) = gm.autograd.grad(out.sum(), [w])
    ref = seg((a, b), scale=2.0)
    (gw_ref,) = gm.autograd.grad(ref.sum(), [w])
    assert gw.device == w.device
    np.testing.assert_array_equal(to_np(gw), to_np(gw_ref))
    assert w.grad is None
    # gm.utils.checkpoint itself is callable, as in DESIGN.md
    out3 = gm.utils.checkpoint(seg, (a, b), scale=2.0, use_reentrant=False)
    np.testing.assert_array_equal(to_np(out3), to_np(ref))


def test_checkpoint_errors():
    with pytest.raises(TypeError, match="not a tensor"):
        checkpoint(lambda x: 3, gm.ones(2, requires_grad=True), use_reentrant=False)
    with pytest.raises(TypeError, match="callable"):
        checkpoint(5, gm.ones(2), use_reentrant=False)
    seq = nn.Sequential(nn.ReLU(), nn.ReLU())
    for bad in (0, 3, -1):
        with pytest.raises(ValueError, match="between 1 and the number of modules"):
            checkpoint_sequential(seq, bad, gm.ones(2), use_reentrant=False)
    with pytest.raises(TypeError):
        checkpoint_sequential(seq, 1.5, gm.ones(2), use_reentrant=False)
