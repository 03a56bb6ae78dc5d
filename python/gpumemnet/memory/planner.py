"""Know before you run, part two: the largest batch that fits a budget, and a training plan (micro-batch,
gradient accumulation, activation checkpointing, autocast) that fits it — chosen from meta estimates only.

Every figure here is an `Estimate.total` (parameters + input + the peak of one first training step) from
gpumemnet.memory.estimator.estimate, which runs the step on a meta copy of the model: nothing is allocated on the
device and no OutOfMemoryError is ever provoked on it to find the answer. "Fits" means more than a total within
the budget: the budget caps reserved bytes (gm.memory.set_limit caps segments, as a card's size does), so a
candidate is also run on meta under the budget as a limit, and fits only if that run completes (see _fit).
For a CUDA device that is not in this process, the estimates leave cuDNN's convolution workspace out
(Estimate.conv_workspace_counted, estimator.CUDNN_NOTE): Plan says so (conv_workspace_counted, notes, its repr),
and max_batch_size warns (its answer is a number).

The cost model of `plan` (relative time of one optimizer step of the whole batch, fp32 without tricks = 1.0):
    x 1.35 when checkpointing: each checkpointed segment's forward runs again in backward (whatever the number
           of segments, every layer but the last segment's is recomputed once);
    x 1.1  per halving of the micro-batch (accumulation over k micro-batches costs 1.1 ** log2(k)): smaller
           calls use the cores and the BLAS less well, and every micro-batch pays the per-call overhead;
    x 1.0  for autocast: neither rewarded nor penalised without a measurement (on a GPU bfloat16 usually saves
           time, on a CPU it may cost some: once calibrate() has measured this CPU, a plan for the CPU uses the
           measured factor, cpu_autocast_cost);
    x 1.02 for ZeRO-2 and x 1.05 for ZeRO-1 (plan(..., world_size=N)): ZeRO-2's reduce-scatter and all-gather move
           the bytes of DDP's all-reduce, plus a copy of each gradient into its bucket; ZeRO-1 all-gathers after
           DDP's all-reduce, 1.5 times DDP's bytes (gm.distributed.optim.ZeroRedundancyOptimizer).
These are defaults: once gm.memory.calibrate() has measured this machine (a small CNN's step with its forward run
again, and as two half-batch steps: calibration.py), step_cost uses the measured factors instead.

Offload (planning for a CUDA device, device="cuda"): when nothing on the device fits, the remedies that move
bytes to the host are candidates too, each priced as "The remedies' time" below says:
    offload_optimizer   Adam/AdamW/SGD(offload="cpu"): fp32 masters and state in pinned host memory;
    param_dtype=bf16    with it, bfloat16 parameters on the device (fp32 masters stay on the host);
    save_on_cpu         activations saved for backward in host memory (gm.autograd.graph.save_on_cpu);
    overlap_grad_copies with offload_optimizer, the optimizer's overlap_grad_copies(): each gradient goes down
                        on the copy stream as backward produces it. Only when given in `candidates`: it costs the
                        gradients' bytes of host memory (each staged from its backward to the step), for which
                        plan has no budget, and under accumulation each micro-batch sends them again.
Fallback (any device with gm.memory.set_fallback set on it): each on-device configuration also with the blocks
past the budget in the fallback (fallback=True), estimated on meta under the budget as a limit with the device's
fallback, as the real step runs under gm.memory.set_limit(device, budget).

The remedies' time. With plan(..., step_seconds=) (the measured time of one plain fp32 step of the whole batch on
the device) and gm.memory.calibrate()'s figures for this machine (time_model(): host_link and cpu_adam for a CUDA
device; disk for the CPU, whose fallback is a mapped file), each offload or fallback candidate is priced from its own
estimate, in seconds added to its on-device part's time (base * step_seconds, base its factors above):
    offload     (synchronous bytes moved) / host_link + max(0, overlapped bytes / host_link - backward's seconds)
                + trainable parameters / cpu_adam (offload_cost; backward: BACKWARD_SHARE of the step);
    fallback    FALLBACK_ACCESSES (2) * Estimate.fallback_peak / bandwidth: each byte that fell back written once
                and read once per step across the link (Adam's moments read and written by the update, a saved
                activation written in forward and read in backward). An assumption: the kernels' accesses to mapped
                memory run at the bulk copy's bandwidth (on a GPU they may run slower), a byte touched more often
                (an activation read twice, each micro-batch's activations again) costs more, and on the CPU the disk's
                rate is the worst case, a file the kernel pages out (benchmarks/plan_time_model.py: with the file
                in the page cache a step measured 0.99x against 9.0x expected at the disk's rate, 1.45x at memory's);
                the device-memory time those accesses would have taken anyway is not subtracted.
Such a candidate waits in plan's queue at its on-device time (a lower bound) until estimated, so the choice is the
fastest by the measured model; Plan.remedy_time says how many times the on-device time the remedies are expected to
take, Plan.priced_by what priced them.
Without those figures, the fixed factors: OFFLOAD_OPTIMIZER_COST (1.8), SAVE_ON_CPU_COST (1.3), OFFLOAD_OVERLAP_COST
(1.6), FALLBACK_COST (2.0), multiplied in. A step whose optimizer runs on the CPU is dominated by the bus and the
CPU's Adam (ZeRO-Offload's own figures put it at 1.5-2x a GPU step for a model this size); activations moved to
the host and back cost less, since only the saved tensors cross; overlapped gradient copies hide the gradients'
half of the optimizer's traffic behind backward; a fallback comes after offload, since the kernels then read and
write those blocks across the bus at each access (Adam's moments: 16 bytes per parameter and step against
offload's 8 in bulk). So offload comes after every on-device remedy that fits, activations before the optimizer."""
import heapq
import math
import warnings

from .. import _C
from .._core.autocast import autocast as _autocast
from .._core.dtype import bfloat16, device_str
from ..nn.modules.container import Sequential
from ..nn.modules.module import Module
from ..optim import SGD, Adam, AdamW
from .._core.offload import save_on_cpu as _save_on_cpu
from ..utils.checkpoint import checkpoint_sequential
from .calibration import cached_rates
from .estimator import CUDNN_NOTE, _check_scalar_loss, _device_fallback, _fmt, estimate

__all__ = ["Plan", "max_batch_size", "plan", "step_cost", "offload_cost", "remedy_cost", "time_model"]

CHECKPOINT_COST = 1.35
HALVING_COST = 1.1
AUTOCAST_COST = 1.0
ZERO_COST = {0: 1.0, 1: 1.05, 2: 1.02}
OFFLOAD_OPTIMIZER_COST = 1.8
OFFLOAD_OVERLAP_COST = 1.6
SAVE_ON_CPU_COST = 1.3
BACKWARD_SHARE = 2 / 3  # backward's share of a step without a measurement: it computes two products per forward one
FALLBACK_COST = 2.0
FALLBACK_ACCESSES = 2  # the time model's bytes across per step for each fallen-back byte: written once, read once
PRICED_MEASURED = "calibrated time model"
PRICED_FIXED = ("fixed factors (not calibrated: run gm.memory.calibrate() on the machine with the device, and pass "
                "step_seconds=)")
OFFLOAD_KEYS = ("offload_optimizer", "save_on_cpu", "param_dtype", "overlap_grad_copies", "fallback")  # when used
_OFFLOADABLE = (Adam, AdamW, SGD)


def _positive_int(v, what, fn):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{fn}: {what} must be a positive int, got {v!r}")
    return v


def _budget(budget, fn):
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError(f"{fn}: budget must be a number of bytes, got {type(budget).__name__}")
    if not 0 < budget < float("inf"):
        raise ValueError(f"{fn}: budget must be a positive, finite number of bytes, got {budget}")
    return budget


def _sample_shape(input_shape):
    return (input_shape,) if isinstance(input_shape, int) else tuple(input_shape)


def _fit(budget, model, shape, fallback=False, **kw):
    """(Estimate or None, total bytes, fits) for one configuration. A budget caps what the device can reserve
    (segments), not only what live tensors hold: a step whose allocated total fits may still need one more
    segment than the budget allows when its free space is scattered. So a configuration whose total fits is run
    once more on meta under the budget as a limit, which frees the cache and retries exactly where the real
    device would, and fits only if that run completes. With fallback (the device's, gm.memory.set_fallback) only
    that run says: what does not fit goes to the fallback, and it fits unless even that runs out."""
    if fallback:
        try:
            est = estimate(model, shape, limit=budget, **kw)
        except _C.OutOfMemoryError:
            return None, math.inf, False
        return est, est.total, True
    try:
        est = estimate(model, shape, **kw)
    except _C.OutOfMemoryError:  # past even the meta device's capacity: certainly too large
        return None, math.inf, False
    if est.total > budget:
        return est, est.total, False
    try:  # the allocated figures are the same under the limit; the reserved ones are what the device sees
        return estimate(model, shape, limit=budget, **kw), est.total, True
    except _C.OutOfMemoryError:
        return est, est.total, False


# ---- max_batch_size ----------------------------------------------------------------------------------------------
def max_batch_size(model, input_shape, loss_fn=None, optimizer=None, target=None, budget=None, lo=1, hi=None,
                   autocast=None, checkpoint_segments=None, accumulation_steps=1, device="cpu", keep_outputs=False):
    """The largest batch whose predicted training step (Estimate.total: parameters + input + step peak) fits in
    `budget` bytes: doubling from `lo` until a batch does not fit (or `hi` is reached), then a binary search.

    The leading arguments are estimate()'s, in its order (model, input_shape, loss_fn, optimizer, target: the
    batch size is what is searched for); budget is required. input_shape: one sample's shape. target: a Tensor or
    shape whose first dim follows the batch. autocast, checkpoint_segments, accumulation_steps, device and
    keep_outputs (True for a loop that holds `out = model(x)` through backward) are estimate()'s; with accumulation_steps=k only multiples of k are considered. Raises ValueError when even `lo`
    does not fit, saying by how many bytes. The search assumes the total does not shrink as the batch grows.
    For a CUDA device not in this process a UserWarning says that cuDNN's convolution workspace was not counted
    (estimator.CUDNN_NOTE): the batch found may then not fit on the GPU.
    (The former order, max_batch_size(model, input_shape, budget, ...), still works, with a DeprecationWarning.)"""
    if loss_fn is not None and not callable(loss_fn) and isinstance(loss_fn, (int, float)) and budget is None:
        warnings.warn("max_batch_size(model, input_shape, budget, ...): budget is now a keyword after loss_fn, "
                      "optimizer and target, as in estimate(); pass budget=", DeprecationWarning, stacklevel=2)
        budget, loss_fn = loss_fn, None
    if budget is None:
        raise TypeError("max_batch_size() missing required argument: 'budget' (bytes)")
    estimate_kwargs = dict(autocast=autocast, checkpoint_segments=checkpoint_segments,
                           accumulation_steps=accumulation_steps, device=device, keep_outputs=keep_outputs)
    fn = "max_batch_size"
    _budget(budget, fn)
    _positive_int(lo, "lo", fn)
    if hi is not None and (_positive_int(hi, "hi", fn) < lo):
        raise ValueError(f"{fn}: hi ({hi}) must be at least lo ({lo})")
    k = _positive_int(accumulation_steps, "accumulation_steps", fn)
    shape = _sample_shape(input_shape)
    totals, warned = {}, []

    def total(units):  # the batch is units * k: every micro-batch the same size; inf when it does not fit
        if units not in totals:
            est, need, ok = _fit(budget, model, shape, loss_fn=loss_fn, optimizer=optimizer, target=target,
                                 batch_size=units * k, **estimate_kwargs)
            totals[units] = need if ok else math.inf
            if est is not None and not est.conv_workspace_counted and not warned:  # once per search
                warned.append(units)
                warnings.warn(f"{fn}: for {est.device}, {CUDNN_NOTE}", UserWarning, stacklevel=3)
        return totals[units]

    u_lo, u_hi = -(-lo // k), (hi // k if hi is not None else None)
    if u_hi is not None and u_hi < u_lo:
        raise ValueError(f"{fn}: no multiple of accumulation_steps={k} lies between lo={lo} and hi={hi}")
    if total(u_lo) > budget:
        _, need, _ = _fit(budget, model, shape, loss_fn=loss_fn, optimizer=optimizer, target=target,
                          batch_size=u_lo * k, **estimate_kwargs)
        if need <= budget:  # allocated bytes fit, the segments they need do not
            raise ValueError(f"{fn}: even a batch of {u_lo * k} does not fit: it needs {_fmt(need)} ({need} bytes) "
                             f"of live tensors, but the allocator's segments for them do not fit in the budget "
                             f"of {_fmt(budget)} ({budget} bytes)")
        raise ValueError(f"{fn}: even a batch of {u_lo * k} does not fit: it needs {_fmt(need)} ({need} bytes), "
                         f"{need - budget} bytes over the budget of {_fmt(budget)} ({budget} bytes)")
    good, bad = u_lo, None
    while u_hi is None or good < u_hi:
        nxt = good * 2 if u_hi is None else min(good * 2, u_hi)
        if total(nxt) <= budget:
            good = nxt
        else:
            bad = nxt
            break
    if bad is not None:
        while bad - good > 1:  # invariant: good fits, bad does not
            mid = (good + bad) // 2
            if total(mid) <= budget:
                good = mid
            else:
                bad = mid
    return good * k


# ---- plan --------------------------------------------------------------------------------------------------------
def cost_factors():
    """(checkpoint, halving): this machine's measured factors when gm.memory.calibrate() cached them, else the
    module's defaults."""
    r = cached_rates() or {}
    return r.get("checkpoint_cost", CHECKPOINT_COST), r.get("halving_cost", HALVING_COST)


def offload_cost(offload_optimizer=False, save_on_cpu=False, estimate=None, timing=None, overlap_grad_copies=False):
    """The slowdown factor of the offload remedies (1.0: none). With `timing` (a dict of measured figures:
    "bandwidth" host<->device bytes/s, "cpu_adam" parameters/s of the CPU optimizer, "step_seconds" of the step
    on the device without offload, optionally "backward_seconds" of its backward, default BACKWARD_SHARE of the
    step) and the configuration's `estimate` (bytes moved, overlapped bytes, parameters), it is
        1 + (synchronous bytes / bandwidth + max(0, overlapped bytes / bandwidth - backward_seconds)
             + parameters / cpu_adam) / step_seconds:
    the synchronous copies and the CPU update add to the step; the bytes that cross on the copy stream beside
    backward (Estimate.bytes_overlapped: overlap_grad_copies()'s gradients, save_on_cpu's prefetch) cost only
    what backward does not cover. Without them, the fixed factors of the module's docstring (overlap_grad_copies
    picks OFFLOAD_OVERLAP_COST for the optimizer)."""
    if not (offload_optimizer or save_on_cpu):
        return 1.0
    if timing is not None and estimate is not None:
        hidden = getattr(estimate, "bytes_overlapped", 0)  # an Estimate; a figure-only stand-in may lack it
        backward = timing.get("backward_seconds", BACKWARD_SHARE * timing["step_seconds"])
        extra = (estimate.bytes_moved - hidden) / timing["bandwidth"]
        extra += max(0.0, hidden / timing["bandwidth"] - backward)
        if offload_optimizer:
            extra += estimate.trainable / timing["cpu_adam"]
        return 1.0 + extra / timing["step_seconds"]
    cost = 1.0
    if offload_optimizer:
        cost *= OFFLOAD_OVERLAP_COST if overlap_grad_copies else OFFLOAD_OPTIMIZER_COST
    if save_on_cpu:
        cost *= SAVE_ON_CPU_COST
    return cost


def autocast_cost(device="cpu"):
    """The autocast factor of a step on device: for the CPU, this machine's measured one when gm.memory.calibrate()
    cached it; otherwise (and for a GPU, which calibrate does not time) the module's default."""
    if str(device).startswith("cpu"):
        return (cached_rates() or {}).get("cpu_autocast_cost", AUTOCAST_COST)
    return AUTOCAST_COST


def _base_cost(accumulation_steps=1, checkpoint_segments=None, autocast=None, zero=0, device="cpu", **_):
    """The relative time of a configuration's on-device part (fp32, no tricks = 1.0): its remedies left out."""
    checkpoint_cost, halving_cost = cost_factors()
    cost = halving_cost ** math.log2(accumulation_steps) * ZERO_COST[zero]
    if checkpoint_segments:
        cost *= checkpoint_cost
    if autocast is not None:
        cost *= autocast_cost(device)
    return cost


def time_model(device="cuda", step_seconds=None, offload=True, fallback=True):
    """The measured figures plan() prices the remedies by, or None where one is missing (then the fixed factors):
    step_seconds (the user's), and from gm.memory.calibrate()'s cache: for a CUDA device "bandwidth" = host_link
    and "cpu_adam" (when offload), "fallback_bandwidth" = host_link (when fallback: the pinned host memory the GPU
    maps); for the CPU, whose fallback is a mapped file, "fallback_bandwidth" = disk (the worst case, a RAM-short
    machine whose kernel pages the file out; while it stays in the page cache the fallback costs less)."""
    if step_seconds is None:
        return None
    r, dev = cached_rates() or {}, str(device)
    timing = {"step_seconds": float(step_seconds)}
    if dev.startswith("cuda"):
        need = {"bandwidth": "host_link", "cpu_adam": "cpu_adam"} if offload else {}
        need.update({"fallback_bandwidth": "host_link"} if fallback else {})
    elif dev.startswith("cpu") and not offload:
        need = {"fallback_bandwidth": "disk"} if fallback else {}
    else:  # meta stands for either tier, and the CPU has no host to offload to: no figure to price them by
        return None
    for key, rate in need.items():
        if not r.get(rate):
            return None
        timing[key] = r[rate]
    return timing


def remedy_cost(offload_optimizer=False, save_on_cpu=False, overlap_grad_copies=False, fallback=False, estimate=None,
                timing=None, base=1.0):
    """The slowdown factor of a configuration's remedies against the same configuration on the device (1.0: none).
    With `timing` (time_model()) and the configuration's `estimate`, measured: the seconds the remedies add over
    the configuration's own step (base * step_seconds; its backward the same share of it), as offload_cost() has
    them, plus for a fallback FALLBACK_ACCESSES * Estimate.fallback_peak / fallback_bandwidth. Without them, the
    fixed factors (offload_cost's, FALLBACK_COST)."""
    if timing is None or estimate is None:
        return offload_cost(offload_optimizer, save_on_cpu, overlap_grad_copies=overlap_grad_copies) * \
            (FALLBACK_COST if fallback else 1.0)
    t = dict(timing, step_seconds=base * timing["step_seconds"])
    if "backward_seconds" in timing:
        t["backward_seconds"] = base * timing["backward_seconds"]
    extra = (offload_cost(offload_optimizer, save_on_cpu, estimate, t) - 1.0) * t["step_seconds"]
    if fallback:
        extra += FALLBACK_ACCESSES * estimate.fallback_peak / timing["fallback_bandwidth"]
    return 1.0 + extra / t["step_seconds"]


def step_cost(accumulation_steps=1, checkpoint_segments=None, autocast=None, zero=0, offload_optimizer=False,
              save_on_cpu=False, param_dtype=None, overlap_grad_copies=False, fallback=False, device="cpu",
              estimate=None, timing=None):
    """The relative time of one optimizer step on device under the module's cost model (fp32, no tricks = 1.0):
    the on-device part's factors times remedy_cost() (measured with timing and the configuration's estimate)."""
    base = _base_cost(accumulation_steps, checkpoint_segments, autocast, zero, device)
    return base * remedy_cost(offload_optimizer, save_on_cpu, overlap_grad_copies, fallback, estimate, timing, base)


class Plan:
    """How to run one optimizer step of `batch_size` samples within `budget` bytes.

    micro_batch, accumulation_steps   batch_size = micro_batch * accumulation_steps
    checkpoint_segments               None or the segments of gm.utils.checkpoint_sequential (Sequential only)
    autocast                          None or the autocast dtype (gm.bfloat16)
    predicted_peak                    Estimate.total of the configuration: parameters + input + step peak
                                      (allocated bytes; a meta run under the budget as a limit completed too)
    predicted_reserved                the peak of segments reserved in that run (parameters, input, step)
    offload_optimizer, save_on_cpu, param_dtype, overlap_grad_copies   the offload remedies (module docstring);
                                      param_dtype: None or the dtype of the parameters on the device
                                      (prepare(model) converts them); overlap_grad_copies: optimizer() calls
                                      the optimizer's overlap_grad_copies()
    predicted_host_peak, predicted_bytes_moved   the host memory and bus traffic of the step (0 without offload);
    predicted_bytes_overlapped        the part of that traffic on the copy stream beside backward
    fallback, predicted_fallback_peak the blocks past the budget go to the device's fallback (gm.memory.
                                      set_fallback): run the steps under gm.memory.set_limit(device, budget) for the
                                      split planned; the peak bytes there (Estimate.fallback_peak)
    predicted_time                    relative step time under the cost model (see the module's docstring)
    remedy_time, priced_by            the offload and fallback remedies' share of it: how many times the same
                                      configuration's time on the device they are expected to take (1.0: none);
                                      and what priced them, the calibrated time model or the fixed factors
    estimate                          the Estimate behind predicted_peak
    conv_workspace_counted, notes     its Estimate's: False (and estimator.CUDNN_NOTE in notes, "cuDNN workspace
                                      not included" in the repr) when planning for a CUDA device that is not in
                                      this process, so that cuDNN's convolution workspace is not in the figures
    considered                        [(config dict, total bytes, time)] in the order they were estimated
    world_size, zero                  plan(..., world_size=N): every rank runs batch_size samples with the model in
                                      DistributedDataParallel (zero 0, 1) and the optimizer in
                                      ZeroRedundancyOptimizer(stage=zero) (zero 1, 2); the figures are the largest
                                      rank's. step() runs the local part: give it the wrapped model's optimizer."""
    world_size = None
    zero = 0

    def __init__(self, model, loss_fn, batch_size, budget, accumulation_steps, checkpoint_segments, autocast,
                 est, time, considered, offload_optimizer=False, save_on_cpu=False, param_dtype=None,
                 overlap_grad_copies=False, fallback=False, priced_by=None, remedy_time=1.0):
        self.priced_by, self.remedy_time = priced_by, remedy_time
        self.offload_optimizer, self.save_on_cpu, self.param_dtype = offload_optimizer, save_on_cpu, param_dtype
        self.overlap_grad_copies, self.fallback = overlap_grad_copies, fallback
        self.predicted_fallback_peak = getattr(est, "fallback_peak", 0) if fallback else 0
        self.predicted_host_peak = getattr(est, "host_peak", 0)
        self.predicted_bytes_moved = getattr(est, "bytes_to_host", 0) + getattr(est, "bytes_to_device", 0)
        self.predicted_bytes_overlapped = getattr(est, "bytes_overlapped", 0)
        self.model, self.loss_fn, self.batch_size, self.budget = model, loss_fn, batch_size, budget
        self.accumulation_steps = accumulation_steps
        self.micro_batch = batch_size // accumulation_steps
        self.checkpoint_segments, self.autocast = checkpoint_segments, autocast
        self.estimate, self.predicted_peak, self.predicted_time = est, est.total, time
        self.predicted_reserved = est.peak_reserved
        self.conv_workspace_counted, self.notes = est.conv_workspace_counted, list(est.notes)
        self.considered = considered

    def __repr__(self):
        amp = None if self.autocast is None else str(self.autocast)
        ranks = "" if self.world_size is None else f"world_size={self.world_size}, zero={self.zero}, "
        off = ""
        if self.offload_optimizer or self.save_on_cpu:
            off = (f"offload_optimizer={self.offload_optimizer}, save_on_cpu={self.save_on_cpu}, "
                   f"param_dtype={self.param_dtype}, "
                   + ("overlap_grad_copies=True, " if self.overlap_grad_copies else "")
                   + f"predicted_host_peak={_fmt(self.predicted_host_peak)}, ")
        if self.fallback:
            off += f"fallback=True, predicted_fallback_peak={_fmt(self.predicted_fallback_peak)}, "
        if off:
            off += (f"remedies expected {self.remedy_time:.2f}x the step's time on the device, priced by: "
                    f"{self.priced_by}, ")
        ws = "" if self.conv_workspace_counted else " (cuDNN workspace not included)"
        return (f"Plan({ranks}micro_batch={self.micro_batch}, accumulation_steps={self.accumulation_steps}, "
                f"checkpoint_segments={self.checkpoint_segments}, autocast={amp}, {off}"
                f"predicted_peak={_fmt(self.predicted_peak)}{ws} of {_fmt(self.budget)}, "
                f"predicted_time={self.predicted_time:.2f})")

    def prepare(self, model=None):
        """The model as planned: its floating parameters and buffers converted to param_dtype (when planned);
        returns it. Call before making the optimizer."""
        model = self.model if model is None else model
        return model.to(self.param_dtype) if self.param_dtype is not None else model

    def optimizer(self, params, cls=None, **kwargs):
        """The planned optimizer over params: cls (default gm.optim.Adam) with offload="cpu" when planned, and its
        gradient copies overlapped with backward (overlap_grad_copies()) when planned."""
        cls = Adam if cls is None else cls
        if self.offload_optimizer:
            kwargs["offload"] = "cpu"
        opt = cls(params, **kwargs)
        return opt.overlap_grad_copies() if self.overlap_grad_copies else opt

    def step(self, x, y, optimizer):
        """One optimizer step of the whole batch (x, y) as planned: k micro-batches, each under autocast and
        checkpointing as planned, each loss divided by k before its backward (the gradients sum to the
        full-batch gradient of a mean loss), then optimizer.step() and optimizer.zero_grad().
        Returns the full batch's loss (the sum of the scaled micro-batch losses) as a float."""

        if not isinstance(x, _C.TensorBase):
            raise TypeError(f"Plan.step: x must be a Tensor, got {type(x).__name__}")
        if x.dim() == 0 or x.shape[0] != self.batch_size:
            raise ValueError(f"Plan.step: x must hold the planned batch of {self.batch_size} samples in its "
                             f"first dim, got shape {tuple(x.shape)}")
        if y is not None and (not isinstance(y, _C.TensorBase) or y.dim() == 0 or y.shape[0] != self.batch_size):
            got = tuple(y.shape) if isinstance(y, _C.TensorBase) else type(y).__name__
            raise ValueError(f"Plan.step: y must be None or a Tensor of {self.batch_size} targets in its first "
                             f"dim, got {got}")
        k, m = self.accumulation_steps, self.micro_batch
        device_type = x._device.split(":")[0]
        if self.param_dtype is not None:  # inputs follow the parameters' dtype
            x = x.to(self.param_dtype) if x.dtype.is_floating_point else x
            y = y.to(self.param_dtype) if y is not None and y.dtype.is_floating_point else y
        total = 0.0
        for i in range(k):
            xi = x[i * m:(i + 1) * m] if k > 1 else x
            yi = (y[i * m:(i + 1) * m] if k > 1 else y) if y is not None else None
            with _autocast(device_type, dtype=self.autocast) if self.autocast is not None else _nullctx(), \
                    _save_on_cpu() if self.save_on_cpu else _nullctx():
                out = checkpoint_sequential(self.model, self.checkpoint_segments, xi, use_reentrant=False) \
                    if self.checkpoint_segments else self.model(xi)
                loss = self.loss_fn(out, yi)
            del out  # what backward needs is held by the graph; the output itself can go
            _check_scalar_loss(loss, "Plan.step")
            if k > 1:
                loss = loss / k
            loss.backward()
            total += float(loss.detach().item()) if loss._device != "meta" else math.nan  # meta: no data
            del loss
        optimizer.step()
        optimizer.zero_grad()
        return total


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _grid(model, batch_size, world_size=None, offload=False, fallback=False):
    """Every on-device configuration (with world_size, for each ZeRO stage); with offload (a CUDA device, an
    optimizer that can offload) also each of them with activations on the host, the optimizer on the host, both,
    and bf16 parameters with the optimizer on the host (not with autocast, which then has nothing left to cast);
    with fallback (the device has one set, one process), each on-device one with fallback=True."""
    ks, k = [], 1
    while k <= batch_size and batch_size % k == 0:
        ks.append(k)
        k *= 2
    segs = [None] + ([s for s in (2, 4) if s <= len(model)] if isinstance(model, Sequential) else [])
    zeros = (0, 1, 2) if world_size is not None else (None,)
    base = [dict(accumulation_steps=k, checkpoint_segments=s, autocast=a, **({} if z is None else {"zero": z}))
            for k in ks for s in segs for a in (None, bfloat16) for z in zeros]
    fell = [dict(c, fallback=True) for c in base] if fallback and world_size is None else []
    if not offload:
        return base + fell
    extra = [dict(save_on_cpu=True), dict(offload_optimizer=True), dict(offload_optimizer=True, save_on_cpu=True),
             dict(offload_optimizer=True, param_dtype=bfloat16),
             dict(offload_optimizer=True, param_dtype=bfloat16, save_on_cpu=True)]
    return base + [dict(c, **e) for e in extra for c in base
                   if not (e.get("param_dtype") is not None and c["autocast"] is not None)
                   and not (e.get("save_on_cpu") and c["checkpoint_segments"])] + fell


def _check_candidate(c, model, batch_size, world_size=None, device="cpu"):

    keys = {"accumulation_steps", "checkpoint_segments", "autocast", *OFFLOAD_KEYS} | \
        ({"zero"} if world_size is not None else set())
    if not isinstance(c, dict) or set(c) - keys:
        raise TypeError(f"plan: a candidate must be a dict of {', '.join(sorted(keys))}, got {c!r}")
    c = dict(dict(accumulation_steps=1, checkpoint_segments=None, autocast=None,
                  **({"zero": 0} if world_size is not None else {})), **c)
    if c.get("zero", 0) not in (0, 1, 2):
        raise ValueError(f"plan: a candidate's zero must be 0, 1 or 2, got {c['zero']!r}")
    if c.get("overlap_grad_copies") and not c.get("offload_optimizer"):
        raise ValueError(f"plan: a candidate's overlap_grad_copies needs offload_optimizer=True, got {c!r}")
    if c.get("fallback") and _device_fallback(device) is None:
        raise ValueError(f"plan: a candidate's fallback needs a fallback set on {device} first "
                         f"(gm.memory.set_fallback({device!r}, ...)), got {c!r}")
    for key in OFFLOAD_KEYS:  # a remedy not used is left out, as in the default grid
        if not c.get(key):
            c.pop(key, None)
    k = _positive_int(c["accumulation_steps"], "a candidate's accumulation_steps", "plan")
    if batch_size % k:
        raise ValueError(f"plan: a candidate's accumulation_steps={k} does not divide batch_size={batch_size}")
    if c["checkpoint_segments"] is not None and not isinstance(model, Sequential):
        raise TypeError(f"plan: checkpoint_segments needs an nn.Sequential model, got {type(model).__name__}")
    return c


def plan(model, input_shape, loss_fn=None, optimizer=None, batch_size=None, target=None, budget=None,
         candidates=None, world_size=None, device="cpu", step_seconds=None):
    """The fastest configuration (under the cost model in this module's docstring) whose predicted training
    step fits in `budget` bytes, as a Plan; plan.step(x, y, optimizer) then runs it.

    The leading arguments are estimate()'s, in its order: model, input_shape (one sample's shape), loss_fn
    (default output.sum()), optimizer (as for estimate(): a class or factory of the parameters, default Adam —
    the one step() is given should be the same kind, or the prediction is for another optimizer's state),
    batch_size (required), target (a Tensor or shape, first dim following the micro-batch); then budget (bytes,
    required). candidates: dicts of accumulation_steps, checkpoint_segments, autocast to choose from; default:
    every accumulation k = 1, 2, 4, ... dividing batch_size, checkpoint segments None, 2, 4 (Sequential only)
    and autocast None or gm.bfloat16. Ties in time go to fp32, then fewer segments. Raises ValueError naming the
    smallest predicted total when nothing fits. device: the device the plan is for (as max_batch_size's: its
    estimates stand for it, "cuda" from a machine without one too); for a CUDA device, with optimizer None or
    Adam/AdamW/SGD, the offload remedies are candidates too (module docstring), and Plan.prepare(model),
    Plan.optimizer(params) apply them; a candidate may also ask for overlap_grad_copies=True with
    offload_optimizer=True (not in the default grid: it costs the gradients' bytes of host memory). On a device
    with a fallback set (gm.memory.set_fallback), each on-device candidate is also tried with fallback=True: the
    blocks past the budget in the fallback, as under gm.memory.set_limit(device, budget) (module docstring).
    (The former order, plan(model, loss_fn, input_shape, batch_size, budget, ...), still works, with a
    DeprecationWarning.)
    world_size: plan one rank of a data-parallel run of world_size ranks (batch_size is then per rank): the
    candidates also choose zero = 0 (DistributedDataParallel), 1 or 2 (ZeroRedundancyOptimizer stage), and each
    is estimated for every rank (estimate(..., world_size=, zero=)); budget is one device's.
    step_seconds: the measured time of one plain fp32 step of the whole batch on the device (e.g. timed on a
    smaller run and scaled); with it and gm.memory.calibrate()'s figures for this machine (time_model()), the
    offload and fallback candidates are priced by the calibrated time model from their own estimates' bytes
    (remedy_cost()), else by the fixed factors; Plan.priced_by says which."""
    if callable(input_shape) and not isinstance(input_shape, (tuple, list, int)):
        warnings.warn("plan(model, loss_fn, input_shape, batch_size, budget): the order is now estimate()'s, "
                      "plan(model, input_shape, loss_fn, optimizer, batch_size, target, budget); pass them by "
                      "keyword", DeprecationWarning, stacklevel=2)
        # a positional call in the former order (loss_fn, input_shape, batch_size, budget, target, optimizer)
        # landed in (input_shape, loss_fn, optimizer, batch_size, target, budget): put each back
        input_shape, loss_fn, optimizer, batch_size, budget = loss_fn, input_shape, budget, optimizer, batch_size
    if batch_size is None:
        raise TypeError("plan() missing required argument: 'batch_size'")
    if budget is None:
        raise TypeError("plan() missing required argument: 'budget' (bytes)")
    if not isinstance(model, Module):
        raise TypeError(f"plan: model must be a gpumemnet.nn.Module, got {type(model).__name__}")
    if loss_fn is not None and not callable(loss_fn):
        raise TypeError(f"plan: loss_fn must be callable (output, target) -> scalar, got "
                        f"{type(loss_fn).__name__}")
    _positive_int(batch_size, "batch_size", "plan")
    _budget(budget, "plan")
    shape = _sample_shape(input_shape)
    if world_size is not None:
        _positive_int(world_size, "world_size", "plan")
    dev = device_str(device)
    can_offload = dev.startswith("cuda") and (optimizer is None or optimizer in _OFFLOADABLE)
    cands = _grid(model, batch_size, world_size, can_offload, _device_fallback(dev) is not None) \
        if candidates is None else [_check_candidate(c, model, batch_size, world_size, dev) for c in candidates]
    if not cands:
        raise ValueError("plan: candidates is empty")
    if step_seconds is not None and (isinstance(step_seconds, bool) or not isinstance(step_seconds, (int, float))
                                     or not step_seconds > 0):
        raise ValueError(f"plan: step_seconds must be a positive number of seconds, got {step_seconds!r}")
    timing = time_model(dev, step_seconds, any(c.get("offload_optimizer") or c.get("save_on_cpu") for c in cands),
                        any(c.get("fallback") for c in cands))

    def measured(c):  # priced from its own estimate: known only once estimated
        return timing is not None and any(c.get(k) for k in ("offload_optimizer", "save_on_cpu", "fallback"))

    def order(c, t):
        return (t, c["autocast"] is not None, c["checkpoint_segments"] or 0, c["accumulation_steps"],
                c.get("zero", 0), c.get("param_dtype") is not None)

    ranks = {} if world_size is None else {"world_size": world_size}
    # Cheapest first, as a queue: a candidate priced by its estimate waits at its on-device part's time (a bound:
    # a remedy never saves time) until estimated, then goes back at its measured time; the first that fits and has
    # nothing cheaper before it is the choice. Without the time model every time is known and this is a sort.
    queue = [(order(c, _base_cost(**c, device=dev) if measured(c) else step_cost(**c, device=dev)), i, c, None)
             for i, c in enumerate(cands)]
    heapq.heapify(queue)
    considered, best = [], None
    while queue:
        key, i, c, fitted = heapq.heappop(queue)
        t = key[0]
        if fitted is not None:  # estimated, fits, and nothing left is faster
            best = (c, fitted, t)
            break
        est, need, ok = _fit(budget, model, shape, fallback=bool(c.get("fallback")), loss_fn=loss_fn,
                             batch_size=batch_size, target=target, device=dev, **_estimate_kwargs(c, optimizer),
                             **ranks)
        if measured(c) and est is not None:
            t = step_cost(**c, device=dev, estimate=est, timing=timing)
        considered.append((c, need, t))
        if ok and (not measured(c) or not queue or (order(c, t), i) < queue[0][:2]):
            best = (c, est, t)
            break
        if ok:
            heapq.heappush(queue, (order(c, t), i, c, est))
    if best is None:
        c, need, _ = min(considered, key=lambda r: r[1])
        why = " (its live tensors fit, but not the allocator's segments that hold them)" if need <= budget else ""
        raise ValueError(f"plan: no configuration fits the budget of {_fmt(budget)} ({budget} bytes): the "
                         f"smallest predicted total is {_fmt(need)} ({need} bytes){why}, with {_describe(c)}")
    c, est, t = best
    p = Plan(model, loss_fn, batch_size, budget, c["accumulation_steps"], c["checkpoint_segments"],
             c["autocast"], est, t, considered, offload_optimizer=bool(c.get("offload_optimizer")),
             priced_by=PRICED_MEASURED if timing is not None else PRICED_FIXED,
             remedy_time=t / _base_cost(**c, device=dev),
             save_on_cpu=bool(c.get("save_on_cpu")), param_dtype=c.get("param_dtype"),
             overlap_grad_copies=bool(c.get("overlap_grad_copies")), fallback=bool(c.get("fallback")))
    if world_size is not None:
        p.world_size, p.zero = world_size, c["zero"]
    return p


def _estimate_kwargs(c, optimizer):
    """estimate()'s keywords for candidate c: the offloading optimizer made from `optimizer` (None: Adam)."""
    kw = {k: v for k, v in c.items() if k not in OFFLOAD_KEYS}
    kw["optimizer"] = optimizer
    if c.get("offload_optimizer"):
        cls = Adam if optimizer is None else optimizer
        overlap = bool(c.get("overlap_grad_copies"))
        kw["optimizer"] = lambda ps: cls(ps, offload="cpu").overlap_grad_copies(overlap)
    kw["save_on_cpu"] = bool(c.get("save_on_cpu"))
    kw["param_dtype"] = c.get("param_dtype")
    return kw


def _config(p):
    """A Plan's configuration, as the candidates' dicts (an offload remedy only when used)."""
    c = dict(accumulation_steps=p.accumulation_steps, checkpoint_segments=p.checkpoint_segments,
             autocast=p.autocast, **({} if p.world_size is None else {"zero": p.zero}))
    for key in OFFLOAD_KEYS:
        if getattr(p, key, None):
            c[key] = getattr(p, key)
    return c


def _describe(c):
    amp = "fp32" if c["autocast"] is None else f"autocast {c['autocast']}"
    zero = "" if "zero" not in c else f", zero={c['zero']}"
    off = ""
    if c.get("offload_optimizer"):
        off += ", optimizer offloaded to the host" + (f" with {c['param_dtype']} parameters on the device"
                                                      if c.get("param_dtype") is not None else "")
        if c.get("overlap_grad_copies"):
            off += ", gradients copied down during backward"
    if c.get("save_on_cpu"):
        off += ", activations saved on the host"
    if c.get("fallback"):
        off += ", blocks past the budget in the device's fallback"
    return (f"accumulation_steps={c['accumulation_steps']}, checkpoint_segments={c['checkpoint_segments']}, "
            f"{amp}{zero}{off}")
