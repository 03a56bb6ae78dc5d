"""Class losses on CUDA without a host wait (issue 14 item 6: no host synchronisation inside a step). cross_entropy
and nll_loss need to know that every target is a class index in [0, C) or ignore_index, and (for the mean) how
many are not ignored. For targets that went up from the host whole (`y.to("cuda")`, `y.cuda()`), the host saw
their values on the way (csrc/transfer.c, gm_index_summary) and the losses read that instead of the device; a
write to the targets since, targets made on the device and class weights still take the device's check and its
wait. The emulator's stream log shows each point where a GPU would make the host wait ("sync" lines)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet import _C
from cuda_util import requires_cuda

EMU = gm.cuda.is_available() and "emulator" in str(_C._build_info().get("cuda"))
emu_only = pytest.mark.skipif(not EMU, reason="the stream log is the emulator's")


def _syncs(fn):
    """fn's result and the host waits its CUDA calls made (the emulator's "sync" log lines)."""
    _C._emu_stream_log(True)
    try:
        out = fn()
    finally:
        log = _C._emu_stream_log(False)
    return out, [line for line in log.splitlines() if line.startswith("sync")]


def _targets(rng, shape, C, ignored=0):
    t = rng.integers(0, C, size=shape)
    t.flat[:ignored] = -100
    return t


def _loss_and_grad(op, x_np, t_np, device, **kw):
    x = gm.tensor(x_np, device=device, requires_grad=True)
    t = gm.tensor(t_np).to(device)
    inp = F.log_softmax(x, 1) if op is F.nll_loss else x
    loss = op(inp, t, **kw)
    loss.sum().backward() if loss.ndim else loss.backward()
    return loss.detach().cpu().numpy(), x.grad.cpu().numpy()


@requires_cuda
@emu_only
@pytest.mark.parametrize("op", [F.cross_entropy, F.nll_loss], ids=["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignored", [0, 3])
def test_uploaded_targets_need_no_wait_and_give_the_cpus_values(op, reduction, ignored):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5, 3)).astype(np.float32)
    t = _targets(rng, (6, 3), 5, ignored)
    x_dev = gm.tensor(x, device="cuda", requires_grad=True)
    t_dev = gm.tensor(t).to("cuda")

    def step():
        inp = F.log_softmax(x_dev, 1) if op is F.nll_loss else x_dev
        loss = op(inp, t_dev, reduction=reduction)
        (loss.sum() if reduction == "none" else loss).backward()
        return loss

    loss, syncs = _syncs(step)
    assert syncs == []
    ref_loss, ref_grad = _loss_and_grad(op, x, t, "cpu", reduction=reduction)
    np.testing.assert_allclose(loss.detach().cpu().numpy(), ref_loss, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(x_dev.grad.cpu().numpy(), ref_grad, rtol=1e-6, atol=1e-7)


@requires_cuda
@emu_only
def test_an_ignore_index_outside_the_values_needs_no_wait():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    t = _targets(rng, (8,), 4)
    t_dev = gm.tensor(t).cuda()
    loss, grad, syncs = _grad_of(x, t_dev, ignore_index=7)
    assert syncs == []
    ref_loss, ref_grad = _loss_and_grad(F.cross_entropy, x, t, "cpu", ignore_index=7)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=1e-7)


def _grad_of(x_np, t_dev, **kw):
    """cross_entropy's forward and backward on CUDA with the host waits they made; then the loss and gradient."""
    x = gm.tensor(x_np, device="cuda", requires_grad=True)

    def run():
        loss = F.cross_entropy(x, t_dev, **kw)
        loss.backward()
        return loss

    loss, syncs = _syncs(run)
    return loss.detach().cpu().numpy(), x.grad.cpu().numpy(), syncs


@requires_cuda
@emu_only
@pytest.mark.parametrize("case", ["ignore_index among the values", "class weights", "made on the device",
                                  "a slice of the upload"])
def test_what_the_host_did_not_see_is_checked_and_counted_on_the_device(case):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    t = _targets(rng, (8,), 4)
    kw, t_dev, t_ref = {}, gm.tensor(t).cuda(), t
    if case == "ignore_index among the values":
        kw = {"ignore_index": int(t[0])}
    elif case == "class weights":
        kw = {"weight": gm.tensor([0.5, 1.0, 2.0, 1.5])}
    elif case == "made on the device":
        t_dev = t_dev + 0
    else:
        t_dev, t_ref, x = t_dev[2:], t[2:], x[2:]
    w_dev = {k: (v.cuda() if k == "weight" else v) for k, v in kw.items()}
    loss, grad, syncs = _grad_of(x, t_dev, **w_dev)
    assert syncs, "the device's check reads its result back"
    ref_loss, ref_grad = _loss_and_grad(F.cross_entropy, x, t_ref, "cpu", **kw)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=1e-7)


def _cpu_error(t, C):
    with pytest.raises(IndexError) as e:
        F.cross_entropy(gm.zeros((len(t), C)), gm.tensor(t))
    return str(e.value)


@requires_cuda
@pytest.mark.parametrize("bad", [4, -1, -100 + 1])
def test_a_bad_uploaded_target_raises_at_the_call_as_on_the_cpu(bad):
    t = np.array([0, 1, bad, 3, 2])
    with pytest.raises(IndexError) as e:
        F.cross_entropy(gm.zeros((5, 4), device="cuda"), gm.tensor(t).cuda())
    assert str(e.value) == _cpu_error(t, 4)


@requires_cuda
@pytest.mark.parametrize("write", ["setitem", "fill_", "copy_", "add_"])
def test_a_write_after_the_upload_is_checked_on_the_device(write):
    """The host's view of the values is dropped by any write since (the storage's version): a bad class written
    on the device raises, as on the CPU."""
    t = gm.tensor(np.array([0, 1, 2, 3])).cuda()
    F.cross_entropy(gm.zeros((4, 4), device="cuda"), t)  # valid as uploaded
    if write == "setitem":
        t[2] = 9
    elif write == "fill_":
        t[2:3].fill_(9)
    elif write == "copy_":
        t[2:3].copy_(gm.tensor([9]))
    else:
        t.add_(6)
    with pytest.raises(IndexError, match="out of bounds for 4 classes"):
        F.cross_entropy(gm.zeros((4, 4), device="cuda"), t)
    with pytest.raises(IndexError, match="out of bounds for 4 classes"):
        F.nll_loss(gm.zeros((4, 4), device="cuda"), t)


@requires_cuda
@emu_only
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_a_training_step_makes_no_host_wait(optimizer):
    """A small CNN's step (dropout, gradient clipping, SGD with momentum or Adam), the batch uploaded before: from
    zero_grad to optimizer.step, nothing makes the host wait for the device (loss.item() afterwards does; so does
    GradScaler's step, which must know whether to skip, as in PyTorch)."""
    gm.manual_seed(0)
    nn = gm.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Dropout(0.1), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 5)).cuda()
    opt = gm.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4) if optimizer == "SGD" \
        else gm.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(3)
    x = gm.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32)).cuda()
    y = gm.tensor(rng.integers(0, 5, size=4)).cuda()

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        gm.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    step()  # the first step makes the optimizer's state
    loss, syncs = _syncs(step)
    assert syncs == []
    assert np.isfinite(loss.item())
