"""Memory statistics, limits, and the category/scope every allocation is tagged with.

Byte counts come from gpumemnet's own caching allocator and are exact: block sizes are the requested size
rounded up to 512 bytes, as in PyTorch's CUDA allocator (see csrc/allocator.c for the whole policy).

Besides the devices ("cpu", "cuda:N", "meta"), the functions below take "cpu-pinned": the allocator of pinned
host memory (Tensor.pin_memory, DataLoader(pin_memory=True)). Pinned tensors are CPU tensors, but their bytes are
counted there and not under "cpu", with a limit and a cache of their own (PyTorch keeps them apart too:
torch.cuda.host_memory_stats)."""
import contextlib

from . import _C
from ._dtype import device_str
from ._history import record_history, history, dump_history, plot_timeline, memory_summary  # noqa: F401

PINNED = "cpu-pinned"


def _dev(device):
    """The allocator a memory function addresses: a device, or the pinned host memory ("cpu-pinned")."""
    return PINNED if isinstance(device, str) and device == PINNED else device_str(device)


CATEGORIES = ("parameter", "gradient", "optimizer", "activation", "workspace", "input", "other")


def memory_allocated(device="cpu"):
    """Bytes held by live tensors on device."""
    return _C.memory_allocated(_dev(device))


def max_memory_allocated(device="cpu"):
    """Peak of memory_allocated since start or the last reset_peak_memory_stats."""
    return _C.max_memory_allocated(_dev(device))


def memory_reserved(device="cpu"):
    """Bytes held by the allocator: live blocks plus the cache."""
    return _C.memory_reserved(_dev(device))


def reset_peak_memory_stats(device="cpu"):
    _C.reset_peak_memory_stats(_dev(device))


def empty_cache(device="cpu"):
    """Return cached, unused segments to the system; returns the bytes released."""
    return _C.empty_cache(_dev(device))


def memory_stats(device="cpu"):
    """A dict: allocated/reserved/requested (current, peak), by_category (current, peak per category),
    counts (num_allocs, num_frees, num_segment_allocs/frees, num_retries, num_ooms), cached_free,
    largest_free_block, limit (0: none) and capacity."""
    return _C.memory_stats(_dev(device))


def set_limit(device, nbytes):
    """Cap the bytes the allocator may reserve on device (None removes the cap). Crossing it frees the cache,
    retries, then raises gpumemnet.OutOfMemoryError: how tests reproduce an OOM, and how to rehearse a small
    card on a large one.

    nbytes is a byte count (int), or a float in (0, 1]: that fraction of the device's capacity (PyTorch's
    torch.cuda.set_per_process_memory_fraction), e.g. set_limit("cuda", 0.5)."""
    if isinstance(nbytes, float):
        if not 0.0 < nbytes <= 1.0:
            raise ValueError(f"set_limit: a fraction of the capacity must be in (0, 1], got {nbytes}")
        nbytes = int(nbytes * capacity(device))
    elif nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int)):
        raise TypeError(f"set_limit: nbytes must be an int (bytes), a float (fraction of the capacity) or None, "
                        f"got {type(nbytes).__name__}")
    _C.set_limit(_dev(device), nbytes)


def get_limit(device="cpu"):
    return _C.get_limit(_dev(device))


def capacity(device="cpu"):
    return _C.memory_capacity(_dev(device))


@contextlib.contextmanager
def category(name):
    """Tag allocations made inside the block with a category (parameter, gradient, optimizer, activation,
    workspace, input, other)."""
    prev = _C.set_category(name)
    try:
        yield
    finally:
        _C.set_category(prev)


@contextlib.contextmanager
def scope(name):
    """Name the allocations made inside the block (e.g. 'features.3 forward') for reports and errors."""
    prev = _C.set_scope(name)
    try:
        yield
    finally:
        _C.set_scope(prev)


def __getattr__(name):
    # TorchStyleAdam lives with the estimator (it imports this module): bound on first use
    if name == "TorchStyleAdam":
        from ._torch_adam import TorchStyleAdam
        return TorchStyleAdam
    raise AttributeError(f"module 'gpumemnet.memory' has no attribute {name!r}")


def estimate(*args, **kwargs):
    """A first training step (forward, loss, backward, optimizer step) of a meta copy of the model: peak
    allocated bytes (exactly the CPU's), bytes per category at the peak, where it was reached, the inference
    peak and per-layer rows — before a single real byte is spent. See gpumemnet._estimate.estimate."""
    from ._estimate import estimate as _estimate
    return _estimate(*args, **kwargs)


def max_batch_size(*args, **kwargs):
    """The largest batch predicted to fit a budget, by search over meta estimates (no OOM is ever triggered).
    See gpumemnet._plan.max_batch_size."""
    from ._plan import max_batch_size as _max_batch_size
    return _max_batch_size(*args, **kwargs)


def plan(*args, **kwargs):
    """The fastest configuration (micro-batch, accumulation, checkpoint segments, autocast) predicted to fit a
    budget; plan.step(x, y, optimizer) runs one full-batch step with it. See gpumemnet._plan.plan."""
    from ._plan import plan as _plan
    return _plan(*args, **kwargs)
