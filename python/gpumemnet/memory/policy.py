"""Where a device's memory comes from (layer 3, memory): set_fallback and set_allocator.

set_fallback is the driver's "system memory fallback" of story 002 made explicit and counted: when a device is full
(its limit, gm.memory.set_limit, or its capacity), blocks of the categories allowed come from memory the device can
address without owning it, instead of raising OutOfMemoryError:
  - cuda:N -> "host": pinned host memory mapped into the GPU's address space (cudaHostAlloc with
    cudaHostAllocMapped); every kernel reads and writes it through the same pointer, over the bus;
  - cpu -> a directory: a file made there, unlinked at once and mapped (ZeRO-Infinity's NVMe tier, for machines
    short of RAM); the kernel pages it to the disk;
  - meta -> either, so that an estimate makes the same split, byte for byte.
The allocator decides block by block when the device is full; which categories may go is the user's choice
(optimizer state first: it is read once per step, by the optimizer; saved activations next: read once, in
backward). memory_stats(device)["by_location"] counts what lives where, the history marks each event's location,
memory_summary shows both, and the first block that falls back gives one warning with its size and the expected
slowdown.

set_allocator("expandable") switches a CUDA device (or meta, to simulate it) to expandable segments: csrc/
alloc_expand.c says how they remove the fragmentation the caching allocator can suffer."""
import os

from .. import _C
from .._core.dtype import device_str
from .calibration import cached_rates
from .stats import CATEGORIES, format_bytes

DEFAULT_CATEGORIES = ("optimizer", "activation")
# PyTorch-ish and DeepSpeed-ish spellings of the two categories worth moving.
_ALIASES = {"optimizer_state": "optimizer", "optimizer_states": "optimizer", "activations": "activation",
            "saved_activations": "activation"}
_order = {}  # device -> the categories as the user listed them (the mask in C has no order)

# The time model's default figures, for a machine that was not calibrated (bytes per second). A PCIe 4.0 x16 link
# moves about 25 GB/s each way; a data-centre GPU's memory 2-3 TB/s (an H100's HBM3 3.35 TB/s, a laptop 3060's GDDR6
# 0.36 TB/s); an NVMe drive 2-7 GB/s against DRAM's 20+ GB/s per socket.
DEFAULT_RATES = {"host_link": 25e9, "device_memory": 1.0e12, "disk": 3e9, "host_memory": 20e9}


def _rates():
    """The measured rates where gm.memory.calibrate() cached them for this machine, else DEFAULT_RATES."""
    rates = dict(DEFAULT_RATES)
    rates.update(cached_rates() or {})
    return rates


def slowdown(device, location="host"):
    """How many times slower a memory-bound operation runs on a block that fell back (the bandwidth the op gets
    there against on the device): the time model's one figure for a fallback, used by the warning (the planner
    orders a fallback by its own fixed factor, planner.FALLBACK_COST: what share of a step's accesses land on the
    fallback is not known before it runs)."""
    r = _rates()
    if str(device).startswith("cpu") or location not in ("host", None):
        return r["host_memory"] / r["disk"]
    return r["device_memory"] / r["host_link"]


def _note(dev, location):
    r = _rates()
    if dev.startswith("cpu"):
        return (f"expect the operations on them about {slowdown(dev, 'file'):.0f}x slower once the kernel pages them "
                f"out (disk {r['disk'] / 1e9:.0f} GB/s against memory {r['host_memory'] / 1e9:.0f} GB/s)")
    return (f"expect memory-bound operations on them about {slowdown(dev):.0f}x slower (the host link "
            f"{r['host_link'] / 1e9:.0f} GB/s against device memory {r['device_memory'] / 1e9:.0f} GB/s"
            f"{'' if dev.startswith('cuda') else ', figures for a real GPU'})")


def _categories(categories):
    if isinstance(categories, str):
        categories = (categories,)
    if not isinstance(categories, (list, tuple, set, frozenset)):
        raise TypeError(f"set_fallback: categories must be a category name or a list of them, got "
                        f"{type(categories).__name__} {categories!r}")
    out = []
    for c in categories:
        name = _ALIASES.get(c, c) if isinstance(c, str) else c
        if name not in CATEGORIES:
            raise ValueError(f"set_fallback: unknown category {c!r}; expected some of {', '.join(CATEGORIES)} "
                             f"(gm.memory.CATEGORY_DOCS)")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError("set_fallback: categories is empty; pass None as location to switch the fallback off")
    return tuple(out)


def set_fallback(device, location, categories=DEFAULT_CATEGORIES):
    """When `device` is full, take blocks of `categories` from `location` instead of raising OutOfMemoryError.

    device: "cuda"/"cuda:N" (location "host"), "cpu" (location: a directory for the spill files) or "meta" (either:
    simulates the split). categories: memory categories (gm.memory.CATEGORIES; "optimizer_state" is accepted for
    "optimizer"), by default optimizer state, then saved activations. location None switches it off: blocks that
    fell back stay where they are until freed."""
    dev = device_str(device)
    if location is None:
        _C.set_fallback(dev, None, 0, "")
        _order.pop(dev, None)
        return
    if not isinstance(location, (str, os.PathLike)):
        raise TypeError(f"set_fallback: location must be 'host', a directory or None, got {type(location).__name__}")
    location = os.fspath(location)
    cats = _categories(categories)
    if dev.startswith("cuda") and location != "host":
        raise ValueError(f"set_fallback: {dev} falls back to 'host' (pinned host memory the GPU can address), got "
                         f"{location!r}")
    if dev == "cpu":
        if location == "host":
            raise ValueError("set_fallback: the CPU falls back to files: pass a directory (e.g. on an NVMe drive)")
        if not os.path.isdir(location):
            raise NotADirectoryError(f"set_fallback: {location!r} is not a directory")
        location = os.path.abspath(location)
    mask = sum(1 << CATEGORIES.index(c) for c in cats)
    _C.set_fallback(dev, location, mask, _note(dev, location))
    _order[dev] = cats


def get_fallback(device="cuda"):
    """None, or {"location": "host" or "file", "categories": (...)} as set_fallback set it."""
    dev = device_str(device)
    got = _C.get_fallback(dev)
    if got is None:
        return None
    location, mask = got
    cats = _order.get(dev) or tuple(c for i, c in enumerate(CATEGORIES) if mask >> i & 1)
    return {"location": location, "categories": cats}


def set_allocator(mode, device="cuda"):
    """"expandable": one growing segment per pool, physical memory mapped by granules where blocks need it (the CUDA
    driver's virtual memory management; meta simulates it), so free space scattered between live blocks is never
    lost (PyTorch's PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True). "caching": cached segments (the default).
    Switch before the device holds a tensor (or after all are freed): blocks never move. A CUDA device also starts
    in expandable mode when PYTORCH_CUDA_ALLOC_CONF (or GPUMEMNET_CUDA_ALLOC_CONF) says expandable_segments:True."""
    if mode not in ("caching", "expandable"):
        raise ValueError(f"set_allocator: mode must be 'caching' or 'expandable', got {mode!r}")
    _C.set_allocator(device_str(device), mode == "expandable")


def get_allocator(device="cuda"):
    """'caching' or 'expandable'."""
    return _C.get_allocator(device_str(device))


def fragmentation(device="cuda"):
    """{"reserved_unallocated", "largest_free_block", "expandable_would_help"}: bytes the allocator holds that no
    tensor uses, the largest of them in one piece, and whether expandable segments would make them usable (caching
    mode, scattered free space: more than one free piece)."""
    s = _C.memory_stats(device_str(device))
    free, largest = s["cached_free"], s["largest_free_block"]
    dev = device_str(device)
    return {"reserved_unallocated": free, "largest_free_block": largest,
            "expandable_would_help": (s["allocator"] == "caching" and free > largest
                                      and (dev.startswith("cuda") or dev == "meta"))}


def describe(device):
    """memory_summary's lines about the fallback and fragmentation ([] when there is nothing to say)."""
    dev = device_str(device)
    s = _C.memory_stats(dev)
    lines = []
    for loc, f in s["by_location"].items():
        if loc == "device":
            continue
        cats = " · ".join(f"{c} {format_bytes(v['current'])}" for c, v in f["by_category"].items() if v["current"])
        lines.append(f" fallback ({loc}): {format_bytes(f['allocated']['current'])} allocated (peak "
                     f"{format_bytes(f['allocated']['peak'])}), reserved {format_bytes(f['reserved']['current'])}"
                     f"{': ' + cats if cats else ''}")
    fb = get_fallback(dev)
    if fb:
        lines.append(f" fallback on: {', '.join(fb['categories'])} -> {fb['location']} when {dev} is full")
    fr = fragmentation(dev)
    if fr["expandable_would_help"]:
        lines.append(f" fragmentation: {format_bytes(fr['reserved_unallocated'])} reserved but unallocated, the "
                     f"largest free block {format_bytes(fr['largest_free_block'])}: a request larger than it needs a "
                     f"new segment; set_allocator('expandable') would reuse the scattered space")
    if s["allocator"] == "expandable":
        lines.append(" allocator: expandable segments (reserved = mapped granules)")
    return lines
