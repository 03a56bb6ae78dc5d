"""Host offload's plumbing (layer 1): where a device tensor's host copy lives, the copies across, the count of
bytes they move, and save_on_cpu (gm.autograd.graph.save_on_cpu: saved activations in host memory).

Where the host copy lives. A CUDA tensor's goes to host memory: pinned ("cpu-pinned" in the statistics) when asked,
as an offloading optimizer always does, else pageable ("cpu"). A meta tensor's (a run on meta, an estimate) goes
to "meta-host": meta tensors whose bytes the allocator counts apart from the meta device's (csrc/allocator.c), so
that an estimate gives the device peak and the host peak separately, with the same policy and rounding as the
real host allocator. On meta both pinned and pageable copies are counted there: an estimate's host peak stands for
whichever host allocator the real run uses. A CPU tensor has no host copy to make: it already is one.

Every copy crosses as one contiguous run in the tensor's own dtype (csrc/transfer.c: no temporary on either
side); a dtype change happens on the host, on tensors that already exist, so a copy never takes memory that an
estimate would not see. Copies are synchronous, on the device's stream (DESIGN.md), except copy_to_host_async
and save_on_cpu's prefetch, which use its copy stream (csrc/cuda.c _copy_async). bytes_moved() counts them, per
thread, for estimates and the planner.

save_on_cpu: PyTorch's semantics (pack copies a saved tensor to the host, unpack copies it back to its device),
with one difference that saves work and memory: a saved *parameter* stays where it is (moving it frees nothing
on the device, since the model still holds it, and would cost its bytes on the host and on the bus each step;
PyTorch copies it too). prefetch=True (an extension) brings the next node's saved tensors back on the device's copy
stream while the current node's kernels run, at the cost of holding them on the device one node early."""
import threading
import weakref

from .. import _C
from .autograd import graph
from .autocast import _state as _amp_state

__all__ = ["host_device", "host_empty", "copy_to_host", "copy_to_host_async", "copy_to_device", "to_host", "to_device",
           "bytes_moved", "bytes_overlapped", "reset_bytes_moved", "save_on_cpu"]


class _Moved(threading.local):
    def __init__(self):
        self.to_host = 0
        self.to_device = 0
        self.async_to_host = 0    # the part of each that went on the copy stream (also counted above)
        self.async_to_device = 0


_moved = _Moved()


def bytes_moved():
    """{"to_host": bytes, "to_device": bytes} copied across by offload on this thread since the last reset."""
    return {"to_host": _moved.to_host, "to_device": _moved.to_device}


def bytes_overlapped():
    """The part of bytes_moved() copied on the device's copy stream, beside the compute stream's kernels
    (copy_to_host_async: an optimizer's overlapped gradient copies; save_on_cpu's prefetch): what a time model
    can hide behind backward. {"to_host": bytes, "to_device": bytes}."""
    return {"to_host": _moved.async_to_host, "to_device": _moved.async_to_device}


def reset_bytes_moved():
    _moved.to_host = _moved.to_device = _moved.async_to_host = _moved.async_to_device = 0


def host_device(device):
    """The device a host copy of a tensor on `device` is made on: "cpu" for CUDA, "meta" (counted as "meta-host")
    for meta, None for the CPU (nothing to offload), and for meta standing for the CPU in an estimate (whose
    offload then does nothing, as the CPU's does)."""
    kind = device.split(":")[0]
    if kind == "meta" and _amp_state.meta_stands_for == "cpu":
        return None
    return {"cuda": "cpu", "meta": "meta"}.get(kind)


def host_empty(shape, dtype, device, pin_memory=True):
    """An uninitialised host tensor for a tensor on `device` (CUDA or meta): pinned if asked; on meta counted as
    the run's host memory ("meta-host")."""
    host = host_device(device)
    if host == "meta":
        return _C.empty(tuple(shape), dtype, "meta", True)
    return _C.empty(tuple(shape), dtype, host, bool(pin_memory))


def _nbytes(t):
    return t.numel() * t.element_size()


def copy_to_host(dst, src):
    """dst.copy_(src), device -> host (same shape and dtype, both contiguous: one transfer, no temporary),
    counted in bytes_moved()."""
    _C.copy_(dst, src)
    _moved.to_host += _nbytes(src)


def copy_to_host_async(dst, src):
    """copy_to_host on the device's copy stream, returning at once (_C._copy_async): the host waits with
    _C._copy_wait(dst) before reading dst. Counted as copy_to_host."""
    _C._copy_async(dst, src)
    _moved.to_host += _nbytes(src)
    _moved.async_to_host += _nbytes(src)


def copy_to_device(dst, src):
    """dst.copy_(src), host -> device, as copy_to_host."""
    _C.copy_(dst, src)
    _moved.to_device += _nbytes(src)


def to_host(t, pin_memory=True):
    """A host copy of device tensor t (contiguous, t's dtype)."""
    h = host_empty(t.shape, t._dtype, t._device, pin_memory)
    _C.copy_(h, t)
    _moved.to_host += _nbytes(t)
    return h


def to_device(h, device):
    """A copy of host tensor h on device."""
    out = _C.empty(tuple(h.shape), h._dtype, device)
    _C.copy_(out, h)
    _moved.to_device += _nbytes(h)
    return out


class _Packed:
    """What save_on_cpu's pack makes of a saved tensor: its device (None: kept as it is, in `host`), the host copy,
    the shape, the save_on_cpu that made it, and the device copy a prefetch has started (or None)."""
    __slots__ = ("device", "host", "shape", "owner", "ahead")

    def __init__(self, device, host, shape, owner):
        self.device, self.host, self.shape, self.owner, self.ahead = device, host, shape, owner, None


def _cuda_index(device):
    return int(device.partition(":")[2] or 0) if device.startswith("cuda") else None


class save_on_cpu(graph.saved_tensors_hooks):
    """Within this context, tensors saved for backward are copied to host memory (pinned with pin_memory=True)
    and copied back to their device when backward needs them (torch.autograd.graph.save_on_cpu). Saved
    parameters and CPU tensors are kept as they are (see the module's docstring). A tensor saved by two ops (a
    ReLU's output, and the flattened view of it the next Linear saves) is copied to the host once: the second
    pack finds the first's host copy while it is alive (a weak map keyed by the storage and its block's allocation
    serial, which no later tensor in a reused block shares, offset, size and version);
    each unpack makes its own device copy.

    prefetch=True (not in PyTorch's signature): when backward unpacks a node's saved tensors, the saved tensors of
    the node the walk runs next (_C._backward_next) start coming back on the device's copy stream, beside this
    node's kernels; that node's unpack then only makes the compute stream wait for them. The device holds the next
    node's saved tensors one node early (its peak may rise by their bytes)."""

    def __init__(self, pin_memory=False, device_type="cuda", *, prefetch=False):
        self.pin_memory = bool(pin_memory)
        self.prefetch = bool(prefetch)
        copies = weakref.WeakValueDictionary()

        def pack(t):
            if host_device(t._device) is None or t._category == "parameter":
                return _Packed(None, t, None, self)
            if not t.is_contiguous():
                t = t.contiguous()
            # the same bytes under another shape (a flatten view) share one host copy
            key = (t._device, t._storage_id, t._alloc_serial, t._offset, t.numel(), t._version, t._dtype)
            h = copies.get(key)
            if h is None:
                h = to_host(t, self.pin_memory)
                h._category = "activation"
                copies[key] = h
            return _Packed(t._device, h, tuple(t.shape), self)

        def unpack(packed):
            if packed.device is None:
                return packed.host
            out, packed.ahead = packed.ahead, None
            if out is not None:
                i = _cuda_index(packed.device)
                if i is not None:
                    _C._copy_wait(out, i)  # the compute stream waits for the prefetch, the host does not
            else:
                out = to_device(packed.host, packed.device)
            if self.prefetch:
                self._prefetch_next()
            return out if tuple(out.shape) == packed.shape else out.view(packed.shape)

        super().__init__(pack, unpack)

    def _prefetch_next(self):
        node = _C._backward_next()
        for s in getattr(node, "_saved", None) or ():
            q = getattr(s, "packed", None)
            if type(q) is _Packed and q.owner is self and q.device is not None and q.ahead is None:
                h = q.host
                q.ahead = _C.empty(tuple(h.shape), h._dtype, q.device)
                _C._copy_async(q.ahead, h)
                _moved.to_device += _nbytes(h)
                _moved.async_to_device += _nbytes(h)
