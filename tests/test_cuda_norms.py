"""Group norm on CUDA against the CPU (kernels/cuda/group_norm.cu, csrc/ops_norm.c), and the layer, instance and
batch norm functions and modules built on it, forward and backward, in every float dtype; allocator bytes equal
to the CPU's (the CUDA kernels take no scratch). Tolerances: the sums run in another order. Runs on a GPU or on
the emulator build (tests/cuda_util.py)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda


def _tol(dtype):
    return {} if dtype in (gm.float16, gm.bfloat16) else dict(rtol=1e-5 if dtype == gm.float32 else 1e-10,
                                                               atol=1e-5 if dtype == gm.float32 else 1e-12)


def _both(a, dtype):
    c = gm.tensor(np.asarray(a), dtype=dtype)
    return c, c.cuda()


def _delta_bytes(device, fn):
    gm.memory.reset_peak_memory_stats(device)
    start = gm.memory.memory_allocated(device)
    keep = fn()
    now, peak = gm.memory.memory_allocated(device), gm.memory.max_memory_allocated(device)
    del keep
    return now - start, peak - start


# (shape, groups): one group, one per channel, rows shorter and longer than a block, HW = 1 (layer norm's form)
GN_CASES = [((2, 6, 5), 3), ((3, 4, 3, 5), 1), ((2, 6, 2, 3, 2), 6), ((5, 8), 4), ((2, 4, 20, 17), 2),
            ((300, 7), 1), ((4, 3, 1), 3)]


@pytest.mark.parametrize("dtype,pdtype", [(gm.float32, gm.float32), (gm.float64, gm.float64),
                                          (gm.float16, gm.float32), (gm.bfloat16, gm.float32),
                                          (gm.float16, gm.float16)], ids=str)
@pytest.mark.parametrize("shape,groups", GN_CASES, ids=str)
def test_group_norm_forward_backward(shape, groups, dtype, pdtype):
    r = np.random.default_rng(len(shape) + groups)
    C = shape[1]
    xc, xd = _both(r.standard_normal(shape) * 2 + 1, dtype)
    wc, wd = _both(r.uniform(0.5, 1.5, C), pdtype)
    bc, bd = _both(r.standard_normal(C), pdtype)
    rc = _C.group_norm(xc, groups, wc, bc, 1e-5)
    rd = _C.group_norm(xd, groups, wd, bd, 1e-5)
    for d, c in zip(rd, rc):
        assert d.device.type == "cuda" and d.dtype == c.dtype
        assert_close(d, c, **_tol(dtype))
    gc, gd = _both(r.standard_normal(shape), dtype)
    for need in ((True, True, True), (True, False, False), (False, True, True), (False, False, True)):
        bc_ = _C.group_norm_backward(gc, xc, wc, rc[1], rc[2], groups, *need)
        bd_ = _C.group_norm_backward(gd, xd, wd, rd[1], rd[2], groups, *need)
        for d, c in zip(bd_, bc_):
            assert (d is None) == (c is None)
            if c is not None:
                assert_close(d, c, **_tol(dtype))
    # without weight and bias; and the input gradient written over the incoming one
    nc, nd = _C.group_norm(xc, groups), _C.group_norm(xd, groups)
    assert_close(nd[0], nc[0], **_tol(dtype))
    gd2 = gd.clone()
    dx = _C.group_norm_backward(gd2, xd, None, nd[1], nd[2], groups, True, False, False, into_grad=True)[0]
    assert dx is gd2
    assert_close(dx, _C.group_norm_backward(gc, xc, None, nc[1], nc[2], groups, True, False, False)[0],
                 **_tol(dtype))


def test_group_norm_empty_and_bytes():
    xc, xd = _both(np.zeros((0, 4, 3)), gm.float32)
    assert tuple(_C.group_norm(xd, 2)[0].shape) == (0, 4, 3)
    xc, xd = _both(np.random.default_rng(3).standard_normal((4, 6, 9, 9)), gm.float32)
    wc, wd = _both(np.ones(6), gm.float32)
    assert _delta_bytes("cuda", lambda: _C.group_norm(xd, 3, wd, wd)) == \
        _delta_bytes("cpu", lambda: _C.group_norm(xc, 3, wc, wc))
    fc, fd = _C.group_norm(xc, 3, wc, wc), _C.group_norm(xd, 3, wd, wd)
    assert _delta_bytes("cuda", lambda: _C.group_norm_backward(xd, xd, wd, fd[1], fd[2], 3, True, True, True)) == \
        _delta_bytes("cpu", lambda: _C.group_norm_backward(xc, xc, wc, fc[1], fc[2], 3, True, True, True))


def _train_step(device, build, shape, seed):
    """Forward + backward of a freshly built module on device: (output, input grad, parameter grads, buffers)."""
    gm.manual_seed(seed)
    m = build().to(device)
    x = gm.tensor(np.random.default_rng(seed).standard_normal(shape) * 2 + 0.5, dtype=gm.float32)
    x = x.to(device).requires_grad_()
    y = m(x)
    w = gm.tensor(np.random.default_rng(seed + 1).standard_normal(tuple(y.shape)), dtype=gm.float32).to(device)
    (y * w).sum().backward()
    return [y, x.grad] + [p.grad for p in m.parameters()] + [b for b in m.buffers() if b.dtype != gm.int64]


@pytest.mark.parametrize("name,build,shape", [
    ("GroupNorm", lambda: nn.GroupNorm(2, 6), (3, 6, 5, 4)),
    ("LayerNorm", lambda: nn.LayerNorm((5, 4)), (3, 6, 5, 4)),
    ("InstanceNorm2d", lambda: nn.InstanceNorm2d(6, affine=True, track_running_stats=True), (3, 6, 5, 4)),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(6), (8, 6, 7)),
    ("BatchNorm3d", lambda: nn.BatchNorm3d(6), (2, 6, 3, 4, 2)),
])
def test_modules_cpu_vs_cuda(name, build, shape):
    cpu = _train_step("cpu", build, shape, 5)
    dev = _train_step("cuda", build, shape, 5)
    assert len(cpu) == len(dev)
    for d, c in zip(dev, cpu):
        assert_close(d, c, rtol=1e-5, atol=1e-5)


def test_layer_norm_channels_last_on_cuda():
    x = np.random.default_rng(7).standard_normal((2, 6, 5, 4))
    res = []
    for dev in ("cpu", "cuda"):
        t = gm.tensor(x, dtype=gm.float32).to(dev).requires_grad_()
        w = gm.tensor(np.linspace(0.5, 1.5, 6), dtype=gm.float32).to(dev).requires_grad_()
        y = F.layer_norm(t.permute(0, 2, 3, 1), (6,), w, None, 1e-6).permute(0, 3, 1, 2)
        (y * y).sum().backward()
        res.append((y, t.grad, w.grad))
    for d, c in zip(res[1], res[0]):
        assert_close(d, c, rtol=1e-5, atol=1e-5)


def test_meta_standing_for_cuda_allocates_what_cuda_does():
    """No scratch on CUDA: an estimate for CUDA (meta target 'cuda') sees exactly the CUDA run's bytes, which are
    the CPU's."""
    def run(device):
        def fn():
            x = gm.zeros(4, 6, 9, 9, device=device)
            w = gm.ones(6, device=device)
            out, mean, rstd = _C.group_norm(x, 3, w, w)
            return _C.group_norm_backward(out, x, w, mean, rstd, 3, True, True, True), out
        return fn
    prev = _C._set_meta_target("cuda", 0)
    try:
        meta = _delta_bytes("meta", run("meta"))
    finally:
        _C._set_meta_target(*prev)
    assert meta == _delta_bytes("cuda", run("cuda")) == _delta_bytes("cpu", run("cpu"))
    assert meta[1] > 0
