"""The time model's measured figures (layer 3, memory): gm.memory.calibrate() measures this machine once and caches
the result; set_fallback's warning (policy.py) reads it to say how much slower a fallback will be.

Measured, each the best of a few rounds (the least disturbed by other work):
  host_memory   bytes/s of a large host-to-host copy (memcpy bandwidth)
  cpu_adam      parameters/s of gm.optim.Adam's fused CPU step over 4M fp32 parameters
  per_op        seconds of one small CPU op (1 element): the fixed cost every call pays
  disk          bytes/s written to (and synced in) the cache directory: the CPU fallback's tier
  checkpoint_cost  a small CNN's training step with its forward run once more (checkpointing's recomputation)
                   against the plain step: the planner's factor for checkpointing (planner.py)
  halving_cost     the same step as two half-batch steps against one: the planner's factor per halving
and, on a machine with a CUDA device (cuda:0):
  host_link     bytes/s of pinned host-to-device copies
  device_memory bytes/s of a device-to-device copy (read + write counted)
The cache is a JSON file under $XDG_CACHE_HOME/gpumemnet (~/.cache/gpumemnet), one per machine: the file name
carries the host name and a digest of what was measured on (CPU model, CUDA device name), so a copied home directory
does not hand one machine's figures to another."""
import hashlib
import json
import os
import platform
import time

from .. import _C

VERSION = 1


def _cache_dir():
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                        "gpumemnet")


def _machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    gpu = ""
    try:
        if _C._cuda_device_count() > 0:
            gpu = str(_C._cuda_get_device_properties(0).get("name", ""))
    except Exception:  # a build without CUDA, or a device that cannot be queried: calibrate the CPU alone
        gpu = ""
    return {"host": platform.node(), "cpu": cpu, "gpu": gpu, "cores": os.cpu_count()}


def cache_path(machine=None):
    m = machine or _machine()
    digest = hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest()[:12]
    return os.path.join(_cache_dir(), f"calibration-{m['host'] or 'host'}-{digest}.json")


def cached_rates():
    """The cached figures of this machine (a dict as calibrate() returns), or None when it was not calibrated."""
    try:
        with open(cache_path(), encoding="utf8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc.get("rates") if doc.get("version") == VERSION else None


def _best(fn, rounds=3):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure(nbytes):
    import numpy as np
    from .. import _core
    from ..optim import Adam
    from ..nn.parameter import Parameter
    rates = {}
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.empty_like(a)
    rates["host_memory"] = 2 * nbytes / _best(lambda: np.copyto(b, a))  # read + write
    n = 1 << 22
    p = Parameter(_core.creation.zeros(n))
    p.grad = _core.creation.ones(n)
    opt = Adam([p], lr=1e-3)
    opt.step()  # the state is made here; time the steps after it
    rates["cpu_adam"] = n / _best(opt.step)
    x, y = _core.creation.ones(1), _core.creation.ones(1)
    reps = 2000
    rates["per_op"] = _best(lambda: [x + y for _ in range(reps)]) / reps
    path = os.path.join(_cache_dir(), f".disk-probe-{os.getpid()}")
    chunk = a[: min(a.size, (64 << 20) // 4)].tobytes()

    def write():
        with open(path, "wb") as f:
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    try:
        rates["disk"] = len(chunk) / _best(write, rounds=2)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    rates.update(_step_factors())
    try:
        has_cuda = _C._cuda_device_count() > 0
    except Exception:
        has_cuda = False
    if has_cuda:
        h = _core.creation.ones(nbytes // 4).pin_memory()
        d = h.to("cuda")
        sync = _C._cuda_synchronize

        def up():
            h.to("cuda", non_blocking=True)
            sync(0)
        rates["host_link"] = nbytes / _best(up)

        def clone():
            d.clone()
            sync(0)
        rates["device_memory"] = 2 * nbytes / _best(clone)
    return rates


def _step_factors():
    """checkpoint_cost and halving_cost of a small CNN on the CPU, each clamped to [1, 2] (noise on a busy machine
    must not make a remedy look free, nor absurd), and cpu_autocast_cost, its step under bfloat16 autocast against
    float32, clamped to [0.5, 3] (on the CPU bfloat16 may cost time or save it: measured, not assumed)."""
    from .._core import creation
    from .._core.autocast import autocast
    from .._core.autograd import no_grad
    from .._core.dtype import bfloat16
    from ..nn import Conv2d, GlobalAvgPool2d, Linear, MaxPool2d, ReLU, Sequential
    net = Sequential(Conv2d(3, 16, 3, padding=1), ReLU(), Conv2d(16, 32, 3, padding=1), ReLU(), MaxPool2d(2),
                     Conv2d(32, 32, 3, padding=1), ReLU(), GlobalAvgPool2d(), Linear(32, 10))
    x = creation.randn(16, 3, 32, 32)

    def step(xb):
        net(xb).sum().backward()

    def forward():
        with no_grad():
            net(x)
    step(x)  # warm-up: the allocator's cache, the BLAS threads
    t_step = _best(lambda: step(x))
    t_fwd = _best(forward)
    t_halves = _best(lambda: (step(x[:8]), step(x[8:])))

    def step_bf16():
        with autocast("cpu", dtype=bfloat16):
            step(x)
    step_bf16()  # warm-up of the bfloat16 paths
    t_bf16 = _best(step_bf16)
    clamp = lambda v, lo=1.0, hi=2.0: min(hi, max(lo, v))  # noqa: E731
    return {"checkpoint_cost": clamp(1.0 + t_fwd / t_step), "halving_cost": clamp(t_halves / t_step),
            "cpu_autocast_cost": clamp(t_bf16 / t_step, 0.5, 3.0)}


def calibrate(force=False, nbytes=256 << 20):
    """Measure this machine's rates once (about a second or two) and cache them; later calls read the cache unless
    force. Returns {"host_memory", "cpu_adam", "per_op", "disk", "checkpoint_cost", "halving_cost", and with a
    CUDA device "host_link", "device_memory"} (bytes/s, parameters/s, seconds, factors)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1 << 20:
        raise ValueError(f"calibrate: nbytes must be an int of at least 1 MiB (the buffer the rates are measured "
                         f"over), got {nbytes!r}")
    if not force:
        cached = cached_rates()
        if cached is not None:
            return cached
    machine = _machine()
    os.makedirs(_cache_dir(), exist_ok=True)
    rates = _measure(int(nbytes))
    doc = {"version": VERSION, "machine": machine, "measured_at": time.time(), "rates": rates}
    path = cache_path(machine)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf8") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)  # atomic: a reader never sees half a file
    return rates
