"""torch.cuda's events and streams (gm.cuda re-exports them).

gpumemnet queues all the work of a device on one compute stream (its offload copies have a stream of their own,
ordered behind it). So:
  - Event is a real CUDA event recorded on that compute stream: record, query, synchronize and elapsed_time time a
    stretch of a step as PyTorch's do. wait() has nothing to do: later work on the device is already queued behind
    the event.
  - Stream names the device's compute stream. Work inside `with gm.cuda.stream(s):` runs on it, in order with the
    rest, so code written for side streams (data prefetchers that copy the next batch on their own stream, then
    wait_stream and record_stream) computes the same results, without the overlap such a stream would give.
    wait_stream, wait_event and Tensor.record_stream have nothing to wait for or to keep alive.
"""
import contextlib

from .. import _C
from .._core.dtype import device as _device
from ._device import _index_of, current_device, device_count, require

__all__ = ["Event", "Stream", "current_stream", "default_stream", "stream", "set_stream", "StreamContext"]


def _device_index(device, what):
    """The CUDA device an event or stream belongs to: the current one for None, after checking one exists."""
    require(what)
    i = current_device() if device is None else _index_of(device, what)
    return require(what, i)


class Stream:
    """A device's stream (gpumemnet's one compute stream of it; see the module docstring)."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device_index = _device_index(device, "Stream")
        self.priority = priority

    @property
    def device(self):
        return _device(f"cuda:{self.device_index}")

    @property
    def cuda_stream(self):
        """The stream's handle as an int (cudaStream_t)."""
        return int(_C._cuda_streams(self.device_index)[0], 16)

    def synchronize(self):
        """Wait until the work queued on the stream has finished."""
        _C._cuda_synchronize(self.device_index)

    def query(self):
        """Whether all work queued on the stream has finished."""
        return self.record_event().query()

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event):
        """Later work waits for the event: it is on this same stream already, so nothing to do."""

    def wait_stream(self, stream):
        """Later work waits for `stream`'s: the same stream in gpumemnet, so nothing to do."""

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device_index == self.device_index

    def __hash__(self):
        return hash(("cuda stream", self.device_index))

    def __repr__(self):
        return f"<gpumemnet.cuda.Stream device=cuda:{self.device_index} (the device's compute stream)>"


class Event:
    """A CUDA event on a device's compute stream: record() marks a point in the queued work; elapsed_time() gives the
    milliseconds between two (enable_timing=True) events; synchronize() waits for it; query() asks if it passed."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise NotImplementedError("Event(interprocess=True): gpumemnet has no interprocess events")
        self.enable_timing = bool(enable_timing)
        self.blocking = blocking
        self._handle = None
        self._device = None
        self._recorded = False

    def record(self, stream=None):
        """Record the event after the work queued so far on the stream's device (the current device's by
        default)."""
        i = stream.device_index if stream is not None else _device_index(None, "Event.record")
        if self._handle is None:
            self._handle, self._device = _C._cuda_event_new(i, self.enable_timing), i
        elif i != self._device:
            raise RuntimeError(f"Event.record: the event belongs to cuda:{self._device}, the stream to cuda:{i} "
                               f"(an event is recorded on the device it was first recorded on)")
        _C._cuda_event_record(self._handle, i)
        self._recorded = True

    def wait(self, stream=None):
        """Make later work wait for the event: queued behind it on the same stream already (module docstring)."""

    def query(self):
        """Whether the work before the event has finished (True for an event never recorded)."""
        return True if self._handle is None else _C._cuda_event_query(self._handle)

    def synchronize(self):
        """Wait until the work before the event has finished (nothing to wait for if never recorded)."""
        if self._handle is not None:
            _C._cuda_event_synchronize(self._handle)

    def elapsed_time(self, end_event):
        """Milliseconds from this event to end_event (both recorded with enable_timing=True, and passed)."""
        if not isinstance(end_event, Event):  # PyTorch's error type for it
            raise RuntimeError(f"elapsed_time: expected end_event to be a gpumemnet.cuda.Event, got "
                               f"{type(end_event).__name__}")
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time: both events must be created with enable_timing=True")
        if not (self._recorded and end_event._recorded):
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        return _C._cuda_event_elapsed(self._handle, end_event._handle)

    def __repr__(self):
        state = "recorded" if self._recorded else "not recorded"
        return f"<gpumemnet.cuda.Event {state}{', timing' if self.enable_timing else ''}>"


def current_stream(device=None):
    """The stream work on the device is queued on (its compute stream)."""
    return Stream(device)


default_stream = current_stream


def set_stream(stream):
    """Accepted for PyTorch code: every stream of a device is its compute stream, already the current one."""
    if stream is not None and not isinstance(stream, Stream):
        raise TypeError(f"set_stream: expected a gpumemnet.cuda.Stream, got {type(stream).__name__}")


class StreamContext(contextlib.AbstractContextManager):
    """`with gm.cuda.stream(s):` — the work inside runs on s's device's compute stream (the module docstring)."""

    def __init__(self, stream):
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"stream: expected a gpumemnet.cuda.Stream or None, got {type(stream).__name__}")
        self.stream = stream
        self._prev = None

    def __enter__(self):
        if self.stream is not None and device_count() > 0:
            self._prev = current_device()
            _C._cuda_set_current_device(self.stream.device_index)  # as PyTorch, the stream's device is current
        return self.stream

    def __exit__(self, *exc):
        if self._prev is not None:
            _C._cuda_set_current_device(self._prev)
        return False


def stream(stream):
    return StreamContext(stream)
