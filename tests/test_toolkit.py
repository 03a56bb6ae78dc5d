"""The memory-saving toolkit proven in allocator bytes (CPU, and meta where it says so):
  (a) gradient accumulation: k micro-batches keep 1/k of the full batch's activations and give its gradients;
  (b) evaluation: under no_grad / inference_mode a CNN's forward holds only a layer's input and output at a time;
      Module.eval() makes dropout the identity and batch norm use its running statistics (NumPy reference);
  (c) autocast (bfloat16 and float16) on the CPU: the tensors conv/linear save for backward take half the bytes;
  (d) story 002's UNet under checkpoint: what the forward keeps is exactly the blocks' outputs, the gradients are
      bit-identical to the plain run's, the meta estimate equals the CPU run, and a float64 gradient check passes.
Checkpoint_sequential's own byte counts are in test_checkpoint.py; autocast's policy and GradScaler in test_amp.py.
"""
import gc
import os
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
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


def _data(shape, classes, seed=0):
    rng = np.random.default_rng(seed)
    return (gm.from_numpy(rng.standard_normal(shape).astype(np.float32)),
            gm.from_numpy(rng.integers(0, classes, shape[0]).astype(np.int64)))


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
def _plain_cnn(seed=0):
    """No BatchNorm: with it, micro-batch statistics would differ from the full batch's and so would gradients."""
    gm.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.ReLU(), nn.GlobalAvgPool2d(), nn.Linear(16, 5))


def _accumulate(model, x, y, k):
    """k micro-batches of len(x)/k, reduction "sum" so that the accumulated gradient is the full batch's.
    Returns (activation peak, activation bytes the first micro-batch's forward saved, the gradients)."""
    model.zero_grad()
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    base = category("activation")["current"]
    m = x.shape[0] // k
    expected = None
    for i in range(k):
        xb, yb = x[i * m:(i + 1) * m], y[i * m:(i + 1) * m]
        loss, saved = _saved_activation_bytes(lambda: F.cross_entropy(model(xb), yb, reduction="sum"))
        kept = category("activation")["current"] - base
        assert kept == saved, f"micro-batch {i}: the allocator holds {kept} activation bytes, the saved tensors {saved}"
        expected = saved if expected is None else expected
        assert saved == expected  # every micro-batch keeps the same bytes
        loss.backward()
        del loss
    peak = category("activation")["peak"] - base
    return peak, expected, [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("k", [2, 4])
def test_accumulation_keeps_one_kth_of_the_activations_and_the_full_batch_gradients(k):
    model = _plain_cnn()
    x, y = _data((16, 1, 16, 16), 5)
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


def test_accumulation_with_a_mean_loss_divided_by_k_matches_the_full_mean():
    # the story-002 spelling: loss / accumulation_steps with reduction "mean"
    model = _plain_cnn(1)
    x, y = _data((8, 1, 8, 8), 5, seed=1)
    F.cross_entropy(model(x), y).backward()
    full = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    for i in range(4):
        (F.cross_entropy(model(x[2 * i:2 * i + 2]), y[2 * i:2 * i + 2]) / 4).backward()
    for a, p in zip(full, model.parameters()):
        assert_close(p.grad, a, atol=1e-6, rtol=1e-5)


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
def test_eval_forward_holds_at_most_two_activations(mode, one_thread):
    model = _eval_cnn().eval()
    x = gm.randn(8, 1, 16, 16)
    outputs = []
    handle = nn.register_module_forward_hook(
        lambda m, a, o: outputs.append(rounded(o.nbytes)) if not m._modules else None)
    try:
        gc.collect()
        gm.memory.reset_peak_memory_stats("cpu")
        resident = gm.memory.memory_allocated("cpu")  # parameters, buffers, the input
        with getattr(gm, mode)():
            out = model(x)
        peak = gm.memory.max_memory_allocated("cpu")
    finally:
        handle.remove()
    params = sum(rounded(t.nbytes) for t in list(model.parameters()) + list(model.buffers()))
    assert resident >= params + rounded(x.nbytes)
    two = sum(sorted(outputs)[-2:])  # conv1's output and batch norm's (out of place) beside it: 2 x 128 KiB
    assert two == 2 * 8 * 16 * 16 * 16 * 4
    # exactly: while bn1 writes its output, conv1's is still its input; the kernel also returns the per-channel
    # mean and 1/std (two 512-byte blocks). ReLU is in place, every other layer is smaller, nothing is kept.
    assert two <= peak - resident <= two + 2 * BLOCK
    assert peak <= resident + two + 2 * BLOCK  # i.e. parameters + input + the two largest activations
    assert category("activation")["peak"] == 0
    # with grad enabled the same forward keeps what backward would need
    gm.memory.reset_peak_memory_stats("cpu")
    out2 = model(x)
    assert gm.memory.max_memory_allocated("cpu") - resident > 1.8 * two
    np.testing.assert_array_equal(out.numpy(), out2.detach().numpy())
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


def test_eval_uses_running_statistics_and_no_dropout():
    gm.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.5),
                          nn.Dropout2d(0.5))
    x = gm.randn(3, 2, 5, 5)
    for _ in range(3):  # move the running statistics away from (0, 1), and set an affine transform
        model(gm.randn(3, 2, 5, 5) * 2.0 + 1.0)
    bn = model[1]
    with gm.no_grad():
        bn.weight.copy_(gm.tensor([0.5, -1.0, 2.0, 1.5]))
        bn.bias.copy_(gm.tensor([0.1, 0.2, -0.3, 0.0]))
    assert bn.num_batches_tracked.item() == 3
    model.eval()
    got = model(x).detach().numpy()
    p = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}
    h = _np_conv(x.numpy().astype(np.float64), p["0.weight"], p["0.bias"])
    h = (h - p["1.running_mean"][None, :, None, None]) / np.sqrt(p["1.running_var"][None, :, None, None] + 1e-5)
    ref = np.maximum(h * p["1.weight"][None, :, None, None] + p["1.bias"][None, :, None, None], 0.0)
    assert_close(got, ref, atol=1e-5, rtol=1e-5, what="eval forward")
    np.testing.assert_array_equal(model(x).detach().numpy(), got)  # deterministic: no dropout
    running = bn.running_mean.numpy().copy()
    model(x)
    np.testing.assert_array_equal(bn.running_mean.numpy(), running)  # eval leaves the statistics alone
    model.train()
    assert not np.allclose(model(x).detach().numpy(), got)  # batch statistics and dropout again


# ---- (c) autocast -----------------------------------------------------------------------------------------------
def _amp_cnn():
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.ReLU(), nn.GlobalAvgPool2d(), nn.Linear(16, 4))


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

    hooks = [nn.register_module_forward_pre_hook(pre), nn.register_module_forward_hook(post)]
    gc.collect()
    base = category("activation")["current"]
    try:
        with gm.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                gm.autocast("cpu", dtype=amp_dtype or gm.bfloat16, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(x), y)
    finally:
        for h in hooks:
            h.remove()
    held = category("activation")["current"] - base
    acts = {t._storage_id: t for t in saved if t._category == "activation"}
    assert held == sum(rounded(t._storage_nbytes) for t in acts.values())  # the allocator's count, exactly
    # floating tensors only: integer ones (max pooling's argmax) are the same in both runs
    held_float = sum(rounded(t._storage_nbytes) for t in acts.values() if t.is_floating_point())
    return loss, layer_saves, held_float


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16])
def test_autocast_halves_what_conv_and_linear_save(dtype):
    model = _amp_cnn()
    x, y = _data((8, 3, 16, 16), 4)
    loss32, saves32, held32 = _saved_by_layers(model, x, y, None)
    loss16, saves16, held16 = _saved_by_layers(model, x, y, dtype)
    # conv1 saves its input (the weight gradient needs it; x itself needs no gradient), conv2 and fc their input
    # and weight, as in float32, each the same shape at half the bytes
    assert [tuple(t.shape) for t in saves16] == [tuple(t.shape) for t in saves32]
    assert len(saves32) == 5
    assert all(t.dtype == gm.float32 for t in saves32) and all(t.dtype == dtype for t in saves16)
    bytes32 = sum(t.nbytes for t in saves32)
    assert sum(t.nbytes for t in saves16) * 2 == bytes32
    # in the allocator: every saved feature map halves (ReLU and pooling follow their low-precision inputs); the
    # low-precision weight copies are new activations (in float32 the weights themselves are saved); the loss's
    # logits and log-sum-exp stay float32, and small tensors round up to a whole block
    weights16 = [t for t in saves16 if tuple(t.shape) in [tuple(p.shape) for p in model.parameters()]]
    assert len(weights16) == 2 and all(t._category == "activation" for t in weights16)
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
    outputs + logits that are among them, activation peak, total peak, the gradients)."""
    gm.manual_seed(0)
    model = UNet(3, 3, width, depth, checkpointing=checkpointing, device=dev)
    if dev == "cpu":
        xi, yi = make_shapes(n, size, seed=0)
        x, y = gm.from_numpy(xi), gm.from_numpy(yi)
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
    grads = [p.grad.numpy().copy() for p in model.parameters()] if dev == "cpu" else None
    del model, x, y
    return held, outputs[:len(blocks)], act_peak, peak, grads


def test_unet_checkpoint_keeps_only_block_outputs_and_gives_identical_gradients():
    held, outs, act_peak, peak, grads = _unet_run(False)
    held_ck, outs_ck, act_peak_ck, peak_ck, grads_ck = _unet_run(True)
    assert outs == outs_ck
    n, size = 4, 16
    # kept by the checkpointed forward: each block's output (the next block's and the skips' inputs, the logits
    # for the loss), the loss's log-sum-exp per pixel, and the scalar loss; nothing from inside a block
    assert held_ck == sum(outs_ck) + rounded(n * size * size * 4) + BLOCK
    assert held_ck < 0.25 * held
    assert act_peak_ck < 0.5 * act_peak and peak_ck < 0.6 * peak
    for a, b in zip(grads, grads_ck):
        np.testing.assert_array_equal(a, b)  # the recomputation is the same arithmetic: bit-identical


def test_unet_checkpoint_estimate_on_meta_is_exact(meta):
    cpu = _unet_run(True)[:4]
    est = _unet_run(True, dev=meta)[:4]
    assert est == cpu


def test_unet_checkpoint_gradcheck_float64():
    gm.manual_seed(0)
    model = UNet(2, 2, 2, 1, checkpointing=True).double()
    x = gm.tensor(np.random.default_rng(0).standard_normal((2, 2, 4, 4)), dtype=gm.float64, requires_grad=True)
    gradcheck(model, [x], what="checkpointed UNet")


def test_unet_checkpoint_only_while_training():
    model = UNet(3, 3, 4, 2, checkpointing=True).eval()
    x = gm.from_numpy(make_shapes(2, 16)[0])
    with gm.no_grad():
        out = model(x)
    assert tuple(out.shape) == (2, 3, 16, 16)
    assert category("activation")["current"] == 0
