"""gm.cuda.Event and Stream (gpumemnet/cuda/_streams.py): events on the device's compute stream time a stretch of
work, and code written for side streams (the data-prefetcher pattern of ImageNet scripts) gives the same results.
On the emulator where there is no GPU; the refusals without CUDA run on every build."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda

torch = pytest.importorskip("torch")


@requires_cuda
def test_event_times_queued_work():
    start, end = gm.cuda.Event(enable_timing=True), gm.cuda.Event(enable_timing=True)
    x = gm.randn(64, 64, device="cuda")
    start.record()
    for _ in range(3):
        x = x @ x.T / 64.0
    end.record()
    end.synchronize()
    assert end.query() and start.query()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0


@requires_cuda
def test_event_is_recorded_on_the_compute_stream():
    compute = gm._C._cuda_streams(0)[0]
    gm._C._emu_stream_log(True)
    ev = gm.cuda.Event()
    ev.record()
    ev.synchronize()
    log = gm._C._emu_stream_log(False)
    records = [line for line in log.splitlines() if line.startswith("record")]
    assert records and records[-1].split()[1] == compute, log
    assert any(line.startswith("sync event") for line in log.splitlines()), log
    assert gm.cuda.current_stream().cuda_stream == int(compute, 16)


@requires_cuda
def test_elapsed_time_needs_timing_events():
    a, b = gm.cuda.Event(), gm.cuda.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        a.elapsed_time(b)


def test_elapsed_time_needs_recorded_events_as_in_pytorch():
    for lib in (gm, torch):
        with pytest.raises(ValueError, match="Both events must be recorded"):
            lib.cuda.Event(enable_timing=True).elapsed_time(lib.cuda.Event(enable_timing=True))


def test_an_event_never_recorded_has_passed():
    ev = gm.cuda.Event()
    assert ev.query()
    ev.synchronize()  # nothing to wait for


@pytest.mark.skipif(gm.cuda.is_available(), reason="the refusals of a machine without CUDA")
def test_without_cuda_record_and_streams_raise_runtime_error():
    with pytest.raises(RuntimeError, match="CUDA"):
        gm.cuda.Event().record()
    with pytest.raises(RuntimeError, match="CUDA"):
        gm.cuda.Stream()
    with pytest.raises(RuntimeError, match="CUDA"):
        gm.cuda.current_stream()


class _Prefetcher:
    """The data prefetcher of NVIDIA's ImageNet examples, as users copy it (side stream, wait_stream,
    record_stream)."""

    def __init__(self, lib, batches):
        self.lib, self.batches, self.stream = lib, iter(batches), lib.cuda.Stream()
        self.preload()

    def preload(self):
        try:
            x, y = next(self.batches)
        except StopIteration:
            self.x = self.y = None
            return
        with self.lib.cuda.stream(self.stream):
            self.x = x.cuda(non_blocking=True).float().sub_(0.5).div_(0.25)
            self.y = y.cuda(non_blocking=True)

    def next(self):
        self.lib.cuda.current_stream().wait_stream(self.stream)
        x, y = self.x, self.y
        if x is not None:
            x.record_stream(self.lib.cuda.current_stream())
            y.record_stream(self.lib.cuda.current_stream())
        self.preload()
        return x, y


@requires_cuda
def test_data_prefetcher_pattern_gives_the_batches():
    r = np.random.RandomState(0)
    data = [(r.rand(2, 3).astype(np.float32), r.randint(0, 5, 2)) for _ in range(4)]
    pre = _Prefetcher(gm, [(gm.tensor(x).pin_memory(), gm.tensor(y).pin_memory()) for x, y in data])
    seen = []
    x, y = pre.next()
    while x is not None:
        assert x.device.type == "cuda"
        seen.append((x.cpu().numpy(), y.cpu().numpy()))
        x, y = pre.next()
    assert len(seen) == len(data)
    for (x, y), (ex, ey) in zip(seen, data):
        np.testing.assert_allclose(x, (ex - 0.5) / 0.25, rtol=1e-6)
        np.testing.assert_array_equal(y, ey)


@requires_cuda
def test_stream_context_sets_the_streams_device_and_restores_it():
    s = gm.cuda.Stream(device=0)
    assert s == gm.cuda.current_stream() and s.device == gm.device("cuda:0")
    with gm.cuda.stream(s) as entered:
        assert entered is s and gm.cuda.current_device() == 0
        y = gm.ones(3, device="cuda") * 2.0
    s.synchronize()
    assert s.query() and y.tolist() == [2.0, 2.0, 2.0]
    with gm.cuda.stream(None):
        pass
    with pytest.raises(TypeError, match="Stream"):
        gm.cuda.stream("x")
