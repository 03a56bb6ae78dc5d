"""The copy stream (csrc/cuda.c _copy_async/_copy_wait; issue 15 items 2-3): a copy between a CUDA tensor and a host
one queued on the device's second stream, after the compute stream's work so far, returning at once; and the
allocator's record_stream rule: a block the copy stream used is not handed out again, not even to the compute
stream, before that copy ran. The emulator runs everything at once, so what is checked is the issue order and the
stream of each call (its stream log) and, with _emu_hold_streams(True), the allocator's behaviour while the copy
would still be queued on a GPU."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from cuda_util import requires_cuda

EMU = gm.cuda.is_available() and "emulator" in str(_C._build_info().get("cuda"))
emu_only = pytest.mark.skipif(not EMU, reason="the stream log and held events are the emulator's")


def _log(lines):
    """[(what, stream, rest...)] of the emulator's stream log text."""
    return [tuple(line.split()) for line in lines.splitlines() if line]


@requires_cuda
@emu_only
def test_a_copy_down_waits_for_the_producing_kernel_on_the_copy_stream():
    compute, copy = _C._cuda_streams(0)
    assert compute != copy
    x = gm.arange(4096, dtype=gm.float32).to("cuda")
    host = gm.empty(4096, pin_memory=True)
    _C._emu_stream_log(True)
    y = x * 2  # the producing kernel, on the compute stream
    _C._copy_async(host, y)
    log = _log(_C._emu_stream_log(False))
    kinds = [e[0] for e in log]
    k = kinds.index("kernel")
    assert log[k][1] == compute
    rec = next(i for i, e in enumerate(log) if e[0] == "record" and i > k)
    assert log[rec][1] == compute                      # an event after the producing kernel ...
    wait = next(i for i, e in enumerate(log) if e[0] == "wait" and i > rec)
    assert log[wait][1:] == (copy, log[rec][2])        # ... that the copy stream waits for ...
    cp = next(i for i, e in enumerate(log) if e[0] == "copy" and i > wait)
    assert log[cp][1:3] == (copy, "D2H") and int(log[cp][3]) == 4096 * 4  # ... before the copy, on its stream
    assert any(e[0] == "record" and e[1] == copy for e in log[cp:])  # the blocks' event, on the copy stream
    _C._copy_wait(host)
    np.testing.assert_array_equal(host.numpy(), np.arange(4096, dtype=np.float32) * 2)


@requires_cuda
@emu_only
def test_a_copy_up_is_waited_for_by_the_compute_stream():
    compute, copy = _C._cuda_streams(0)
    h = gm.arange(1000, dtype=gm.float32).pin_memory()
    d = gm.empty(1000, device="cuda")
    _C._emu_stream_log(True)
    _C._copy_async(d, h)
    _C._copy_wait(d, 0)
    z = d + 1
    log = _log(_C._emu_stream_log(False))
    cp = next(i for i, e in enumerate(log) if e[0] == "copy")
    assert log[cp][1:3] == (copy, "H2D")
    ev = next(e[2] for e in log[cp:] if e[0] == "record" and e[1] == copy)
    w = next(i for i, e in enumerate(log) if e[0] == "wait" and e[1] == compute and e[2] == ev)
    k = next(i for i, e in enumerate(log) if e[0] == "kernel" and i > w)
    assert log[k][1] == compute
    np.testing.assert_array_equal(z.cpu().numpy(), np.arange(1000, dtype=np.float32) + 1)


@requires_cuda
@emu_only
def test_a_freed_block_the_copy_stream_reads_is_not_reused_before_the_copy_ran():
    n = 1 << 18  # 1 MiB: a block of the large pool
    host = gm.empty(n, pin_memory=True)
    src = gm.ones(n, device="cuda")
    base = gm.memory.memory_allocated("cuda")  # src included
    _C._emu_hold_streams(True)
    try:
        _C._copy_async(host, src)
        del src  # freed on the host side while the copy stream may still read it
        assert gm.memory.memory_allocated("cuda") == base  # still counted: parked, not free
        other = gm.empty(n, device="cuda")
        assert gm.memory.memory_allocated("cuda") == base + n * 4  # a block of its own: not src's
        del other
        gm.cuda.synchronize()  # the copy ran (each block has its own event: held ones pass together here)
        assert gm.memory.memory_allocated("cuda") == base  # still parked: the next allocation looks
        reserved = gm.memory.memory_reserved("cuda")
        again = gm.empty(n, device="cuda")
        assert gm.memory.memory_allocated("cuda") == base  # src's block was freed and again took it
        assert gm.memory.memory_reserved("cuda") == reserved
        del again
    finally:
        _C._emu_hold_streams(False)
    np.testing.assert_array_equal(host.numpy(), np.ones(n, dtype=np.float32))


def test_arguments_are_checked():
    a = gm.empty(4)
    with pytest.raises(ValueError, match="_copy_async: dst and src must be contiguous with the same dtype"):
        _C._copy_async(gm.empty(5), a)
    with pytest.raises(ValueError, match="same dtype"):
        _C._copy_async(gm.empty(4, dtype=gm.float16), a)
    with pytest.raises(ValueError, match="contiguous"):
        _C._copy_async(gm.empty(2, 2).t(), gm.empty(2, 2))
    with pytest.raises(TypeError):
        _C._copy_async(a, 3)
    with pytest.raises(TypeError):
        _C._copy_wait(3)


@requires_cuda
def test_copy_wait_takes_a_device_index():
    with pytest.raises(TypeError, match="device must be None or a CUDA device index"):
        _C._copy_wait(gm.empty(4, device="cuda"), "cuda")


def test_meta_and_host_copies_are_plain():
    m = gm.empty(8, device="meta")
    _C._copy_async(gm.empty(8, device="meta"), m)  # nothing moves
    a, b = gm.arange(8, dtype=gm.float32), gm.empty(8)
    _C._copy_async(b, a)
    _C._copy_wait(b)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
