"""The memory-saving toolkit proven in allocator bytes (on every device: the `device` fixture of cuda_util.py runs
each test on "cpu" and on "cuda" when present, a GPU or the emulator; and meta where it says so):
  (a) gradient accumulation: k micro-batches keep 1/k of the full batch's activations and give its gradients;
  (b) evaluation: under no_grad / inference_mode a CNN's forward holds only a layer's input and output at a time;
      Module.eval() makes dropout the identity and batch norm use its running statistics (NumPy reference);
  (c) autocast (bfloat16 and float16) on the CPU: the tensors conv/linear save for backward take half the bytes;
  (d) story 002's UNet under checkpoint: what the forward keeps is exactly the blocks' outputs, the gradients are
      bit-identical to the plain run's, the meta estimate equals the CPU run, and a float64 gradient check passes.
Checkpoint_sequential's own byte counts are in test_checkpoint.py; autocast's policy and GradScaler in test_amp.py.

On CUDA the activations are the CPU's to the byte (same outputs, same saved tensors). What differs is scratch,
category workspace, freed before each op returns: cuDNN's convolution workspace in place of the CPU's im2col
columns (cuDNN's own choice of algorithm; the emulator's stand-in needs none), batch norm's per-block partial sums
in training and the losses' 12,800-byte scratch (csrc/ops_nnops.c). Activation counts do not see them; the bounds
on a whole peak say where they enter.
"""
import gc
import os
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from cuda_util import device, is_cuda, to_np, workspace_peak  # noqa: F401  (device: the per-device fixture)
from gradcheck import assert_close, gradcheck

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from seed002_unet import UNet, make_shapes  # noqa: E402

BLOCK = 512  # the allocator rounds every request up to a multiple of 512 bytes


def rounded(nbytes):
    return -(-nbytes // BLOCK) * BLOCK


def category(name, dev="cpu"):
    return gm.memory.memory_stats(dev)["by_category"][name]


@pytest.fixture
def meta():
    """Meta tensors made by a test are freed and the meta cache emptied afterwards (test_allocator checks that
    nothing is left on meta)."""
    yield "meta"
    gc.collect()
    gm.memory.empty_cache("meta")


def _data(shape, classes, seed=0, device="cpu"):
    rng = np.random.default_rng(seed)
    return (gm.from_numpy(rng.standard_normal(shape).astype(np.float32), device=device),
            gm.from_numpy(rng.integers(0, classes, shape[0]).astype(np.int64), device=device))


def _saved_activation_bytes(fn):
    """Run fn() (a forward) recording every tensor saved for backward; return (fn's result, the bytes of the
    distinct storages among them that the allocator counts as activations, each rounded to its 512-byte block)."""
    saved = []

    def pack(t):
        saved.append(t)
        return t
    with gm.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    storages = {t._storage_id: t._storage_nbytes for t in saved if t._category == "activation"}
    return out, sum(rounded(n) for n in storages.values())


# ---- (a) gradient accumulation ----------------------------------------------------------------------------------
def _plain_cnn(seed=0, device="cpu"):
    """No BatchNorm: with it, micro-batch statistics would differ from the full batch's and so would gradients."""
    gm.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.ReLU(), nn.GlobalAvgPool2d(), nn.Linear(16, 5)).to(device)


def _accumulate(model, x, y, k):
    """k micro-batches of len(x)/k, reduction "sum" so that the accumulated gradient is the full batch's.
    Returns (activation peak, activation bytes the first micro-batch's forward saved, the gradients)."""
    dev = x.device
    model.zero_grad()
    gc.collect()
    gm.memory.reset_peak_memory_stats(dev)
    base = category("activation", dev)["current"]
    m = x.shape[0] // k
    expected = None
    for i in range(k):
        xb, yb = x[i * m:(i + 1) * m], y[i * m:(i + 1) * m]
        loss, saved = _saved_activation_bytes(lambda: F.cross_entropy(model(xb), yb, reduction="sum"))
        kept = category("activation", dev)["current"] - base
        assert kept == saved, f"micro-batch {i}: the allocator holds {kept} activation bytes, the saved tensors {saved}"
        expected = saved if expected is None else expected
        assert saved == expected  # every micro-batch keeps the same bytes
        loss.backward()
        del loss
    peak = category("activation", dev)["peak"] - base
    return peak, expected, [to_np(p.grad) for p in model.parameters()]


@pytest.mark.parametrize("k", [2, 4])
def test_accumulation_keeps_one_kth_of_the_activations_and_the_full_batch_gradients(device, k):
    model = _plain_cnn(device=device)
    x, y = _data((16, 1, 16, 16), 5, device=device)
    full_peak, full_saved, full_grads = _accumulate(model, x, y, 1)
    micro_peak, micro_saved, acc_grads = _accumulate(model, x, y, k)
    # backward only frees: the peak is what the forward saved, exactly
    assert full_peak == full_saved and micro_peak == micro_saved
    # activations scale with the batch; the slack is one micro-batch's input, more than the 512-byte rounding of
    # the few per-sample tensors (the loss's log-sum-exp, the logits) could ever add
    slack = rounded(x[: x.shape[0] // k].nbytes)
    assert micro_peak <= full_peak / k + slack
    assert micro_peak < full_peak / k * 1.1
    for (name, _), a, b in zip(model.named_parameters(), full_grads, acc_grads):
        assert_close(b, a, atol=1e-4, rtol=1e-5, what=f"accumulated grad of {name}")


def test_accumulation_with_a_mean_loss_divided_by_k_matches_the_full_mean(device):
    # the story-002 spelling: loss / accumulation_steps with reduction "mean"
    model = _plain_cnn(1, device)
    x, y = _data((8, 1, 8, 8), 5, seed=1, device=device)
    F.cross_entropy(model(x), y).backward()
    full = [to_np(p.grad) for p in model.parameters()]
    model.zero_grad()
    for i in range(4):
        (F.cross_entropy(model(x[2 * i:2 * i + 2]), y[2 * i:2 * i + 2]) / 4).backward()
    for a, p in zip(full, model.parameters()):
        assert_close(to_np(p.grad), a, atol=1e-6, rtol=1e-5)


# ---- (b) evaluation ---------------------------------------------------------------------------------------------
def _eval_cnn():
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                         nn.Dropout(0.3), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                         nn.MaxPool2d(2), nn.Dropout2d(0.3), nn.GlobalAvgPool2d(), nn.Linear(32, 10))


@pytest.fixture
def one_thread():
    """Convolution scratch (one im2col buffer per thread) grows with the thread count; at one thread it is below
    the activations, so that a bound on the peak is a bound on activations whatever the machine."""
    n = gm.get_num_threads()
    gm.set_num_threads(1)
    yield
    gm.set_num_threads(n)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_eval_forward_holds_at_most_two_activations(device, mode, one_thread):
    model = _eval_cnn().eval().to(device)
    x = gm.randn(8, 1, 16, 16).to(device)
    outputs = []
    handle = nn.register_module_forward_hook(
        lambda m, a, o: outputs.append(rounded(o.nbytes)) if not m._modules else None)
    try:
        gc.collect()
        gm.memory.reset_peak_memory_stats(device)
        resident = gm.memory.memory_allocated(device)  # parameters, buffers, the input
        with getattr(gm, mode)():
            out = model(x)
        peak = gm.memory.max_memory_allocated(device)
        ws = workspace_peak(device)
    finally:
        handle.remove()
    params = sum(rounded(t.nbytes) for t in list(model.parameters()) + list(model.buffers()))
    assert resident >= params + rounded(x.nbytes)
    two = sum(sorted(outputs)[-2:])  # conv1's output and batch norm's (out of place) beside it: 2 x 128 KiB
    assert two == 2 * 8 * 16 * 16 * 16 * 4
    # exactly: while bn1 writes its output, conv1's is still its input; the kernel also returns the per-channel
    # mean and 1/std (two 512-byte blocks). ReLU is in place, every other layer is smaller, nothing is kept.
    # On the CPU (one thread) a convolution's im2col columns are below that. On CUDA a convolution's workspace
    # is cuDNN's choice and may exceed it (while conv1 runs, beside only its input and output): the bound allows
    # for that workspace; eval batch norm, pooling and linear take none, and the emulator's stand-in needs none.
    if is_cuda(device) and gm.cuda.is_emulated():
        assert ws == 0
    extra = ws if is_cuda(device) else 0
    assert two <= peak - resident <= two + 2 * BLOCK + extra
    assert peak <= resident + two + 2 * BLOCK + extra  # i.e. parameters + input + the two largest activations
    assert category("activation", device)["peak"] == 0
    # with grad enabled the same forward keeps what backward would need: conv1's output (128 KiB) and the second
    # block's (64 KiB), which the batch norms read, and the first pool's output (32 KiB), the second conv's input;
    # of the ReLU outputs that only the max pools read, each ReLU keeps a bit mask (1/32) and each pool its int8
    # window taps (1 byte per output), not the output itself (README "Choices")
    gm.memory.reset_peak_memory_stats(device)
    out2 = model(x)
    kept = category("activation", device)["current"]
    compact = two // 2 // 32 + 8 * 16 * 8 * 8 + 64 * 1024 // 32 + 8 * 32 * 4 * 4
    assert two // 2 + 64 * 1024 + 32 * 1024 + compact <= kept < two + 2 * 64 * 1024 + 32 * 1024
    assert gm.memory.max_memory_allocated(device) - resident > two + 2 * BLOCK
    np.testing.assert_array_equal(to_np(out), to_np(out2))
    del out, out2


def _np_conv(x, w, b):
    """3x3, padding 1, stride 1: a sum over the nine taps."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out + b[None, :, None, None]


def test_eval_uses_running_statistics_and_no_dropout(device):
    gm.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.5),
                          nn.Dropout2d(0.5)).to(device)
    x = gm.randn(3, 2, 5, 5).to(device)
    for _ in range(3):  # move the running statistics away from (0, 1), and set an affine transform
        model(gm.randn(3, 2, 5, 5).to(device) * 2.0 + 1.0)
    bn = model[1]
    with gm.no_grad():
        bn.weight.copy_(gm.tensor([0.5, -1.0, 2.0, 1.5]).to(device))
        bn.bias.copy_(gm.tensor([0.1, 0.2, -0.3, 0.0]).to(device))
    assert bn.num_batches_tracked.item() == 3
    model.eval()
    got = to_np(model(x))
    p = {k: to_np(v) for k, v in model.state_dict().items()}
    h = _np_conv(to_np(x), p["0.weight"], p["0.bias"])
    h = (h - p["1.running_mean"][None, :, None, None]) / np.sqrt(p["1.running_var"][None, :, None, None] + 1e-5)
    ref = np.maximum(h * p["1.weight"][None, :, None, None] + p["1.bias"][None, :, None, None], 0.0)
    assert_close(got, ref, atol=1e-5, rtol=1e-5, what="eval forward")
    np.testing.assert_array_equal(to_np(model(x)), got)  # deterministic: no dropout
    running = to_np(bn.running_mean)
    model(x)
    np.testing.assert_array_equal(to_np(bn.running_mean), running)  # eval leaves the statistics alone
    model.train()
    assert not np.allclose(to_np(model(x)), got)  # batch statistics and dropout again


# ---- (c) autocast -----------------------------------------------------------------------------------------------
def _amp_cnn(device="cpu"):
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.ReLU(), nn.GlobalAvgPool2d(), nn.Linear(16, 4)).to(device)


def _saved_by_layers(model, x, y, amp_dtype):
    """The tensors Conv2d/Linear save (their input and weight), in call order, with the loss and the activation
    bytes the allocator holds after the forward."""
    layer_saves, saved, current = [], [], [None]

    def pack(t):
        saved.append(t)
        if current[0] is not None:
            layer_saves.append(t)
        return t

    def pre(m, args):
        current[0] = m if isinstance(m, (nn.Conv2d, nn.Linear)) else None

    def post(m, args, out):
        current[0] = None

    dev = x.device
    hooks = [nn.register_module_forward_pre_hook(pre), nn.register_module_forward_hook(post)]
    gc.collect()
    base = category("activation", dev)["current"]
    try:
        with gm.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                gm.autocast(dev.type, dtype=amp_dtype or gm.bfloat16, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(x), y)
    finally:
        for h in hooks:
            h.remove()
    held = category("activation", dev)["current"] - base
    acts = {t._storage_id: t for t in saved if t._category == "activation"}
    assert held == sum(rounded(t._storage_nbytes) for t in acts.values())  # the allocator's count, exactly
    # floating tensors only: integer ones (max pooling's argmax) are the same in both runs
    held_float = sum(rounded(t._storage_nbytes) for t in acts.values() if t.is_floating_point())
    return loss, layer_saves, held_float


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16])
def test_autocast_halves_what_conv_and_linear_save(device, dtype):
    model = _amp_cnn(device)
    x, y = _data((8, 3, 16, 16), 4, device=device)
    loss32, saves32, held32 = _saved_by_layers(model, x, y, None)
    loss16, saves16, held16 = _saved_by_layers(model, x, y, dtype)
    # conv1 saves its input (the weight gradient needs it; x itself needs no gradient), conv2 and fc their input
    # and weight, as in float32, each the same shape: the feature maps at half the bytes; conv2 keeps its float32
    # weight itself and casts it again in backward (README "Choices"), fc a low-precision copy, a new activation
    assert [tuple(t.shape) for t in saves16] == [tuple(t.shape) for t in saves32]
    assert len(saves32) == 5
    assert all(t.dtype == gm.float32 for t in saves32)
    assert all(t.device == x.device for t in saves32 + saves16)
    params = [tuple(p.shape) for p in model.parameters()]
    maps16 = [t for t in saves16 if tuple(t.shape) not in params]
    maps32 = [t for t in saves32 if tuple(t.shape) not in params]
    assert len(maps16) == 3 and all(t.dtype == dtype for t in maps16)
    assert sum(t.nbytes for t in maps16) * 2 == sum(t.nbytes for t in maps32)
    conv_w, fc_w = [t for t in saves16 if tuple(t.shape) in params]
    assert conv_w.dtype == gm.float32 and conv_w._storage_id == model[3].weight._storage_id
    assert fc_w.dtype == dtype and fc_w._category == "activation"
    # in the allocator: every saved feature map halves (ReLU and pooling follow their low-precision inputs); the
    # loss's logits and log-sum-exp stay float32, and small tensors round up to a whole block
    weights16 = [fc_w]
    assert held16 <= held32 / 2 + sum(rounded(t.nbytes) for t in weights16) + 2 * BLOCK
    assert held16 <= 0.55 * held32
    assert loss16.dtype == gm.float32  # losses run in float32
    assert abs(loss16.item() - loss32.item()) <= 1e-2 + 2e-2 * abs(loss32.item())
    del saves16, saves32, weights16
    loss16.backward()
    assert all(p.grad.dtype == gm.float32 for p in model.parameters())


# ---- (d) the UNet under checkpoint -----------------------------------------------------------------------------------
def _unet_run(checkpointing, dev="cpu", n=4, size=16, width=4, depth=2):
    """One forward + backward of story 002's UNet. Returns (bytes held after the forward, the bytes of the block
    outputs + logits that are among them, activation peak, total peak, the gradients, workspace peak)."""
    gm.manual_seed(0)
    model = UNet(3, 3, width, depth, checkpointing=checkpointing, device=dev)
    if dev != "meta":
        xi, yi = make_shapes(n, size, seed=0)
        x, y = gm.from_numpy(xi, device=dev), gm.from_numpy(yi, device=dev)
    else:
        x, y = gm.empty(n, 3, size, size, device=dev), gm.zeros(n, size, size, dtype=gm.int64, device=dev)
    blocks = [model.inc, *model.downs, *model.ups, model.outc]
    outputs = []
    handles = [b.register_forward_hook(lambda m, a, o: outputs.append(rounded(o.nbytes))) for b in blocks]
    gc.collect()
    gm.memory.reset_peak_memory_stats(dev)
    start, act0 = gm.memory.memory_allocated(dev), category("activation", dev)["current"]
    loss = F.cross_entropy(model(x), y)
    held = gm.memory.memory_allocated(dev) - start
    for h in handles:
        h.remove()
    loss.backward()
    del loss
    act_peak = category("activation", dev)["peak"] - act0
    peak = gm.memory.max_memory_allocated(dev) - start
    grads = [to_np(p.grad) for p in model.parameters()] if dev != "meta" else None
    del model, x, y
    return held, outputs[:len(blocks)], act_peak, peak, grads, workspace_peak(dev)


# kernels/cuda/loss.h CUDA_LOSS_SCRATCH_BYTES: the partial sums of a loss reduced over the whole input on CUDA
CUDA_LOSS_SCRATCH = 12800


def test_unet_checkpoint_keeps_only_block_outputs_and_gives_identical_gradients(device):
    held, outs, act_peak, peak, grads, ws = _unet_run(False, device)
    held_ck, outs_ck, act_peak_ck, peak_ck, grads_ck, ws_ck = _unet_run(True, device)
    assert outs == outs_ck
    n, size = 4, 16
    # kept by the checkpointed forward: each block's output (the next block's and the skips' inputs, the logits
    # for the loss), the loss's log-sum-exp per pixel, and the scalar loss; nothing from inside a block (on CUDA
    # too: the loss's scratch is workspace, freed before it returns)
    assert held_ck == sum(outs_ck) + rounded(n * size * size * 4) + BLOCK
    assert held_ck < 0.3 * held  # (the plain forward no longer holds the ReLU outputs only max pooling reads)
    assert act_peak_ck < 0.55 * act_peak
    if is_cuda(device):
        # The activations are the CPU's to the byte. The workspace is not: the largest CUDA scratch is the loss's
        # partial sums (batch norm's per-block sums are a few KiB), and cuDNN may add its convolution workspace
        # (none in the emulator); the CPU's im2col columns are not there.
        cpu = _unet_run(False)
        assert (held, outs, act_peak) == cpu[:3]
        assert ws == ws_ck >= CUDA_LOSS_SCRATCH
        if gm.cuda.is_emulated():
            assert ws == CUDA_LOSS_SCRATCH
    # checkpointing saves on the whole peak too; on a real GPU cuDNN's workspace (the same in both runs, sized by
    # cuDNN) enters both peaks and can only pull the ratio towards 1, by at most its own size
    cudnn_ws = ws if is_cuda(device) and not gm.cuda.is_emulated() else 0
    assert peak_ck < 0.65 * peak + 0.35 * cudnn_ws
    for a, b in zip(grads, grads_ck):
        np.testing.assert_array_equal(a, b)  # the recomputation is the same arithmetic: bit-identical


def test_unet_checkpoint_estimate_on_meta_is_exact(meta):
    # meta plans the CPU's allocations (im2col columns, no CUDA scratch): the estimate is exact for the CPU
    cpu = _unet_run(True)
    est = _unet_run(True, dev=meta)
    assert est[:4] == cpu[:4] and est[5] == cpu[5]  # workspace too: the same im2col columns


def test_unet_checkpoint_gradcheck_float64():
    gm.manual_seed(0)
    model = UNet(2, 2, 2, 1, checkpointing=True).double()
    x = gm.tensor(np.random.default_rng(0).standard_normal((2, 2, 4, 4)), dtype=gm.float64, requires_grad=True)
    gradcheck(model, [x], what="checkpointed UNet")


def test_unet_checkpoint_only_while_training(device):
    model = UNet(3, 3, 4, 2, checkpointing=True, device=device).eval()
    x = gm.from_numpy(make_shapes(2, 16)[0], device=device)
    with gm.no_grad():
        out = model(x)
    assert tuple(out.shape) == (2, 3, 16, 16) and out.device == x.device
    assert category("activation", device)["current"] == 0
