"""Optimizer offload with overlapped gradient copies (optim/_offload.py overlap_grad_copies; issue 15 item 2): each
gradient goes down on the device's copy stream from its post-accumulate-grad hook, after the kernel that produced
it and before the rest of backward has run, and step() uses those copies. On the emulator the copies run at once,
so the test checks the results (equal to the copies made in step()) and, from the stream log, the structure a
GPU would overlap: each copy on the copy stream, after a wait for an event the compute stream recorded, issued
while backward's kernels were still being queued."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet import _C
from gpumemnet._core import offload as _off
from cuda_util import requires_cuda

EMU = "emulator" in str(_C._build_info().get("cuda"))


def _net(dtype=None):
    gm.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)).to("cuda")
    return m.to(dtype) if dtype is not None else m


def _batches(dtype=None):
    rng = np.random.default_rng(1)
    out = []
    for _ in range(6):
        x = gm.tensor(rng.standard_normal((5, 8)).astype(np.float32)).to("cuda")
        out.append(x.to(dtype) if dtype is not None else x)
    return out


@requires_cuda
@pytest.mark.parametrize("dtype", [None, gm.bfloat16])
@pytest.mark.parametrize("accumulate", [1, 2])
def test_overlapped_copies_give_the_same_steps(dtype, accumulate):
    runs = []
    for overlap in (False, True):
        m = _net(dtype)
        opt = gm.optim.Adam(m.parameters(), lr=1e-2, offload="cpu")
        if overlap:
            opt.overlap_grad_copies()
        data = iter(_batches(dtype))
        _off.reset_bytes_moved()
        for _ in range(3 // accumulate):
            opt.zero_grad()
            for _ in range(accumulate):
                (m(next(data)).float() ** 2).mean().backward()
            opt.step()
        runs.append(([p.detach().float().cpu().numpy() for p in m.parameters()], _off.bytes_moved()))
    for a, b in zip(runs[0][0], runs[1][0]):
        np.testing.assert_array_equal(a, b)
    grad_bytes = sum(p.numel() * p.element_size() for p in _net(dtype).parameters())
    steps = 3 // accumulate
    assert runs[0][1]["to_host"] == steps * grad_bytes
    assert runs[1][1]["to_host"] == steps * accumulate * grad_bytes  # once per micro-batch
    assert runs[0][1]["to_device"] == runs[1][1]["to_device"]


def _parse(text):
    return [tuple(line.split()) for line in text.splitlines() if line]


@requires_cuda
@pytest.mark.skipif(not EMU, reason="the stream log is the emulator's")
def test_gradient_copies_are_issued_on_the_copy_stream_during_backward():
    compute, copy = _C._cuda_streams(0)
    m = _net()
    opt = gm.optim.Adam(m.parameters(), lr=1e-2, offload="cpu")
    opt.overlap_grad_copies()
    x = _batches()[0]
    (m(x) ** 2).mean().backward()
    opt.step()  # the first step also makes the masters from the parameters (copies down, not gradients)
    opt.zero_grad()
    loss = (m(x) ** 2).mean()
    _C._emu_stream_log(True)
    loss.backward()
    log = _parse(_C._emu_stream_log(True))
    copies = [i for i, e in enumerate(log) if e[0] == "copy" and e[2] == "D2H"]
    nparams = len(list(m.parameters()))
    assert len(copies) == nparams
    assert all(log[i][1] == copy for i in copies)
    kernels = [i for i, e in enumerate(log) if e[0] == "kernel"]
    assert all(log[i][1] == compute for i in kernels)
    # the first gradient went down while backward was still being queued: kernels follow it, and between the
    # copies (the emulator's matrix products are host stand-ins that log nothing: only part of backward shows)
    assert sum(k > copies[0] for k in kernels) >= 3
    assert any(copies[0] < k < copies[-1] for k in kernels)
    for c in copies:  # each after a wait (copy stream) for an event the compute stream recorded after a kernel
        w = max(i for i in range(c) if log[i][0] == "wait")
        assert log[w][1] == copy
        r = max(i for i in range(w) if log[i][0] == "record" and log[i][2] == log[w][2])
        assert log[r][1] == compute
        assert any(log[i][0] == "kernel" for i in range(r))
    opt.step()
    during_step = _parse(_C._emu_stream_log(False))
    assert not [e for e in during_step if e[0] == "copy" and e[2] == "D2H"]  # step() used the early copies


@requires_cuda
@pytest.mark.skipif(not EMU, reason="the stream log is the emulator's")
def test_accumulating_into_a_gradient_waits_for_its_previous_copy():
    compute, copy = _C._cuda_streams(0)
    m = _net()
    opt = gm.optim.Adam(m.parameters(), lr=1e-2, offload="cpu")
    opt.overlap_grad_copies()
    xs = _batches()
    (m(xs[0]) ** 2).mean().backward()
    _C._emu_stream_log(True)
    (m(xs[1]) ** 2).mean().backward()
    log = _parse(_C._emu_stream_log(False))
    copy_events = {e[2] for e in log if e[0] == "record" and e[1] == copy}
    waits = [e for e in log if e[0] == "wait" and e[1] == compute]
    assert len(waits) == len(list(m.parameters()))  # one per gradient, before backward adds into it
    opt.overlap_grad_copies(False)
    assert not opt._early and not opt._overlap_handles
    del copy_events


def test_on_meta_nothing_moves_but_bytes_are_counted():
    gm.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("meta")
    opt = gm.optim.Adam(m.parameters(), offload="cpu")
    opt.overlap_grad_copies()
    _off.reset_bytes_moved()
    (m(gm.empty(5, 8, device="meta")) ** 2).mean().backward()
    assert _off.bytes_moved()["to_host"] == sum(p.numel() * 4 for p in m.parameters())
    opt.step()
    assert _off.bytes_moved()["to_host"] == sum(p.numel() * 4 for p in m.parameters())
