"""Memory statistics and limits (layer 3, memory).

Byte counts come from gpumemnet's own caching allocator and are exact: block sizes are the requested size
rounded up to 512 bytes, as in PyTorch's CUDA allocator (see csrc/allocator.c for the whole policy).

Besides the devices ("cpu", "cuda:N", "meta"), the functions below take "cpu-pinned": the allocator of pinned
host memory (Tensor.pin_memory, DataLoader(pin_memory=True)). Pinned tensors are CPU tensors, but their bytes are
counted there and not under "cpu", with a limit and a cache of their own (PyTorch keeps them apart too:
torch.cuda.host_memory_stats). And "meta-host": the host memory of a run on meta (an estimate of a step that
offloads to the host: optimizer offload, save_on_cpu), counted apart from the meta device's, with the same policy
as the host's allocator."""
import numbers

from .. import _C
from .._core.dtype import device_str

PINNED = "cpu-pinned"
META_HOST = "meta-host"


def _dev(device):
    """The allocator a memory function addresses: a device, the pinned host memory ("cpu-pinned"), or a meta run's
    host memory ("meta-host")."""
    return device if isinstance(device, str) and device in (PINNED, META_HOST) else device_str(device)


# Every block is tagged with one of these (csrc/gm.h's gm_category, in its order). The one definition of each:
CATEGORY_DOCS = {
    "parameter": "weights and buffers of a model (nn.Parameter, register_buffer)",
    "gradient": "the .grad of parameters (and other leaves), accumulated in backward",
    "optimizer": "optimizer state (momentum buffers, Adam's two moments)",
    "activation": "tensors the forward keeps for backward, until backward has used them",
    "activation_grad": "gradients of activations flowing through backward, and the temporaries that make them",
    "workspace": "kernel scratch (im2col columns, cuDNN workspace, reduction partials), freed when the op returns",
    "input": "the data given to a model (gm.memory.estimate's batch and target)",
    "communication": "buffers of gpumemnet.distributed's collectives: host staging of CUDA tensors, gathered and "
                     "scattered scratch, pickled objects",
    "other": "everything else: tensors made outside a model and not kept for backward",
}
CATEGORIES = tuple(CATEGORY_DOCS)


def format_bytes(n):
    """'512 B', '1.50 KiB', '2.00 MiB', '5.50 GiB': the one unit of every memory figure gpumemnet shows (binary
    prefixes, as the OutOfMemoryError's text in csrc/alloc_report.c; never "MB" for 2**20 bytes)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise TypeError(f"format_bytes: n must be a number of bytes, got {type(n).__name__} {n!r}")
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{sign}{n:.0f} B" if unit == "B" else f"{sign}{n:.2f} {unit}"
        n /= 1024


def memory_allocated(device="cpu"):
    """Bytes held by live tensors on device."""
    return _C.memory_allocated(_dev(device))


def max_memory_allocated(device="cpu"):
    """Peak of memory_allocated since start or the last reset_peak_memory_stats."""
    return _C.max_memory_allocated(_dev(device))


def memory_reserved(device="cpu"):
    """Bytes held by the allocator: live blocks plus the cache."""
    return _C.memory_reserved(_dev(device))


def max_memory_reserved(device="cpu"):
    """Peak of memory_reserved since start or the last reset_peak_memory_stats (memory_stats' reserved peak)."""
    return _C.memory_stats(_dev(device))["reserved"]["peak"]


def reset_peak_memory_stats(device="cpu"):
    _C.reset_peak_memory_stats(_dev(device))


def empty_cache(device="cpu"):
    """Return cached, unused segments to the system; returns the bytes released."""
    return _C.empty_cache(_dev(device))


def memory_stats(device="cpu"):
    """A dict: allocated/reserved/requested (current, peak), by_category (current, peak per category),
    counts (num_allocs, num_frees, num_segment_allocs/frees, num_retries, num_ooms), cached_free,
    largest_free_block, limit (0: none), capacity, allocator ("caching" or "expandable": set_allocator) and
    by_location: {"device": allocated, reserved, by_category} plus, where a fallback is or was used (set_fallback),
    "host" or "file" with the same figures for the blocks that live there. The top-level figures are the device's
    own; the fallback's bytes are not in them (nor in memory_allocated), as they are not on the device."""
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
