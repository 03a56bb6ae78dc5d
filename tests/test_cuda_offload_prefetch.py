"""save_on_cpu(prefetch=True) (_core/offload.py; issue 15 item 3): while backward runs a node, the saved tensors of
the node the walk runs next (_C._backward_next) come back on the device's copy stream; that node's unpack makes the
compute stream wait for them instead of copying. Same gradients and the same bytes across as without prefetch;
on the emulator the stream log shows the copies up on the copy stream, issued a node early, and the compute
stream's waits; on meta the device holds the prefetched tensors one node early, which an estimate sees."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet import _C
from gpumemnet._core import offload as _off
from cuda_util import requires_cuda

EMU = gm.cuda.is_available() and "emulator" in str(_C._build_info().get("cuda"))


def _net(device):
    gm.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)).to(device)


def _run(device, prefetch, log=False):
    m = _net(device)
    x = gm.tensor(np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)).to(device)
    _off.reset_bytes_moved()
    with gm.autograd.graph.save_on_cpu(pin_memory=device != "meta", prefetch=prefetch):
        loss = (m(x) ** 2).mean()
    gm.memory.reset_peak_memory_stats(device)
    if log:
        _C._emu_stream_log(True)
    loss.backward()
    text = _C._emu_stream_log(False) if log else ""
    grads = [p.grad for p in m.parameters()]
    return grads, _off.bytes_moved(), gm.memory.max_memory_allocated(device), text


def test_on_meta_the_same_bytes_move_and_the_device_holds_the_next_node_early():
    g0, moved0, peak0, _ = _run("meta", False)
    g1, moved1, peak1, _ = _run("meta", True)
    assert moved1 == moved0 and moved0["to_device"] > 0
    assert [tuple(g.shape) for g in g1] == [tuple(g.shape) for g in g0]
    assert peak1 >= peak0


@requires_cuda
def test_prefetched_backward_gives_the_same_gradients():
    g0, moved0, _, _ = _run("cuda", False)
    g1, moved1, _, _ = _run("cuda", True)
    for a, b in zip(g0, g1):
        np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    assert moved1 == moved0


@requires_cuda
@pytest.mark.skipif(not EMU, reason="the stream log is the emulator's")
def test_saved_tensors_come_up_on_the_copy_stream_and_the_compute_stream_waits():
    compute, copy = _C._cuda_streams(0)
    _, _, _, plain = _run("cuda", False, log=True)
    _, _, _, text = _run("cuda", True, log=True)
    log = [tuple(line.split()) for line in text.splitlines()]
    plain_log = [tuple(line.split()) for line in plain.splitlines()]
    assert not [e for e in plain_log if e[0] == "copy" and e[1] == copy]  # without prefetch: all on compute
    up = [i for i, e in enumerate(log) if e[0] == "copy" and e[2] == "H2D" and e[1] == copy]
    assert len(up) >= 2
    for i in up:  # each prefetch is waited for by the compute stream, on the event its copy's blocks recorded
        ev = next(e[2] for e in log[i:] if e[0] == "record" and e[1] == copy)
        w = [j for j, e in enumerate(log) if j > i and e[0] == "wait" and e[1] == compute and e[2] == ev]
        assert w
        # and a compute kernel of the running node was queued between the copy and that wait: the overlap
        assert any(log[k][0] == "kernel" and log[k][1] == compute for k in range(i, w[0]))
