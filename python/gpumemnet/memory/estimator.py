"""Know before you run: estimate(...) runs one real training step of a copy of the model on the meta device
(summary(...), in summary_table.py, prints it as torchsummary's table).

Nothing here models memory with formulas. The meta device runs every op's shape inference and every allocation
through the same allocator policy as the CPU (and CUDA), so the bytes of a step run on meta are the bytes the real
step will take, byte for byte. The copy is made without touching data: every parameter and buffer is replaced by
an empty meta tensor of the same shape before the deep copy, so the real model and its gradients are left
exactly as they were. Nor is the random generator touched: while an estimate runs, its thread's meta ops draw
no random numbers (_core/state.py's meta_draws_random; dropout reads it), so a trainer drawing dropout masks in
another thread sees the same stream with or without an estimate beside it. (Saving and restoring the
generator's state around the run would not do: it would undo the other thread's draws made meanwhile.)

The meta run stands for the target device (_C._set_meta_target, csrc/meta_target.h): for device="cuda" the ops
on meta also take the scratch the CUDA kernels take and the CPU kernels do not (batch norm's and the losses'
cross-block partial sums), and convolutions take CUDA's workspace instead of the CPU's im2col columns. That
workspace is cuDNN's choice: the first of its candidate algorithms whose workspace the allocator can give. When
the device is in this process (a CUDA build with a GPU, or the emulator), meta asks the device's cuDNN for the
same candidates and applies the same rule to its own allocator, under the limit the estimate runs with, from an
empty table of choices as in a fresh process (csrc/ops_conv_workspace.c): the estimate takes the workspace the
real step takes, byte for byte. Without the device (a CPU-only build, or estimating for CUDA on a machine without
a GPU) there is no cuDNN to ask: convolutions take no workspace, and Estimate.conv_workspace_counted is False,
with a note saying what that leaves out (the real peak can only be higher by what was free at that moment, as
cuDNN takes a workspace only when the allocator can give it).
"""
import contextlib
import functools
import gc
import html
import random
import threading
import time
import traceback

import numpy as np

from .. import _C
from .. import cuda
from .._core.autocast import (autocast as _autocast, get_autocast_dtype, is_autocast_enabled,
                              set_meta_stands_for, suspended)
from .._core import offload as _offload
from .._core.autograd import enable_grad, no_grad
from .._core.dtype import DTYPES, as_dtype, device_str
from .._core.scope import category
from .._core.state import state
from ..nn.modules.module import Module
from ..optim import Adam, NoGradientWarning
from ..utils.checkpoint import checkpoint_sequential
from . import _distributed
from ._live_objects import live_objects
from . import stats as _memory
from ._meta_model import LayerRow  # noqa: F401  (public here, as before the split)
from ._meta_model import (_LayerRecorder, _cat, _check_scalar_loss, _call_loss, _input_specs, _levels,
                          _made_up_target, _meta_copy, _meta_like, _nullctx, _release, _shape_text, cut_outside,
                          reads_outside, reads_values, sequence_now, tensors_in, warning_filter, HOOKS_NOTE,
                          hooks_left_out)

__all__ = ["Estimate", "LayerRow", "estimate"]

META = "meta"


class _Busy(threading.local):
    """How many estimates run on this thread: an OutOfMemoryError inside one (a `limit` reached) is an answer,
    not something to explain with more estimates (gpumemnet.memory.oom checks this)."""
    depth = 0


busy = _Busy()

# The meta device's allocator, statistics, limit and target (_C._set_meta_target) are process-wide, in C. An
# estimate resets its peak, sets its limit and target and reads its figures, so two estimates running at once in
# two threads would read each other's allocations: they take turns. (Reentrant: the OOM predictor and plan run
# estimates inside their own turn.)
_meta_turn = threading.RLock()


def holding_meta(fn):
    """fn run while holding the meta device (see _meta_turn)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _meta_turn:
            return fn(*args, **kwargs)
    return wrapper


_fmt = _memory.format_bytes  # one unit everywhere (stats.format_bytes)


class Estimate:
    """What training steps need. Bytes are allocator bytes (blocks rounded as the allocator rounds them).

    One definition of "peak" in everything shown (repr, summary, run mode): what the device holds at the highest
    moment, parameters and input included. These are `total` (the training step) and `inference_total` (a
    forward under no_grad in eval mode); the attributes below named peak are the part of them above the
    parameters and input.

    total           parameters + input + peak (+ optimizer_init_bytes, comm_bytes): the training step's peak on
                    the device
    optimizer_init_bytes  what the optimizer's constructor allocated (Adagrad's state_sum), held before the first
                    step: counted in total and optimizer_bytes, not in peak
    inference_total parameters + input + inference_peak: the inference forward's peak on the device
    peak            the steps' peak allocated bytes above what was live before them (parameters, input)
    inference_peak  the same for the inference forward
    peak_reserved   peak reserved bytes (segments: blocks + cache) for the model, input and step together,
                    from an empty cache: what the device must hand the allocator (compare with `total`)
    at_peak         {category: bytes} at the moment of the steps' peak, parameters and input included: it sums
                    to `total` (each category's own highest value, at other moments, is not shown: those do not
                    add up to a peak). Categories: gm.memory.CATEGORY_DOCS
    peak_scope      the allocator scope of the allocation that reached the peak ("fc1 backward", "Adam.step")
    fallback_peak   with a limit and a fallback set on the device (gm.memory.set_fallback), the peak bytes of the
                    blocks that went to the fallback (host memory or files), not counted in peak
    params, trainable, param_bytes, gradient_bytes, optimizer_bytes, activation_bytes (peak saved for backward),
    input_bytes, layers (LayerRow list), device (what the estimate stands for: "cpu", "cuda:0"...), notes (what
    the figures leave out, as sentences: CUDNN_NOTE when conv_workspace_counted is False).
    conv_workspace_counted  False when the step's convolutions ran for CUDA with no cuDNN to ask (no CUDA device
                    in this process): their workspace is not in the figures (notes and the repr say so); True
                    otherwise (the CPU's im2col columns, or the workspace cuDNN picks on this machine's device).
    host_peak       the host memory's highest allocated bytes during the step, for what the step keeps in host
                    memory (an offloading optimizer's fp32 masters, state and staging; activations under
                    save_on_cpu): 0 when nothing is offloaded. Counted by the allocator as "meta-host" (the same
                    policy as the host's: byte for byte what "cpu-pinned", or "cpu" for pageable copies, shows)
    bytes_to_host, bytes_to_device   what offload copies across the bus in the step (steady state: an
                    offloading optimizer's one-time download of its masters is not counted); bytes_moved: both
    micro_batch_to_host, micro_batch_to_device   the part of them one micro-batch's forward and backward moves
                    (every micro-batch moves the same; the rest is the optimizer step's): under
                    accumulation_steps=k an overlapped optimizer sends each gradient down k times
    overlapped_to_host, overlapped_to_device   the part of bytes_to_host/device that crosses on the device's copy
                    stream beside backward's kernels (bytes_overlapped: both): an optimizer's gradients after
                    overlap_grad_copies(), save_on_cpu's prefetch. overlap_grad_copies: whether the optimizer the
                    factory made overlaps (optimizer=lambda ps: Adam(ps, offload="cpu").overlap_grad_copies())
    Steps: the peaks (total, peak, peak_reserved, at_peak, peak_scope, activation_bytes, host_peak, fallback_peak)
    are the highest of all the steps estimate() runs: the first, the second, and more until one repeats the one
    before (which every later step then repeats): the most any number of real steps reaches. A stateful optimizer
    on the device makes its state in its first step, so a later step's forward and backward run with it alive and
    usually go higher (story 000, Adam, 2 micro-batches: 14.22 GiB in step 1, 16.41 GiB from step 2 on); an
    offloading optimizer's state is on the host and its later steps peak about as the first.
    first_step_peak the first step's peak above the parameters and input (first_step_total: with them);
                    first_step_at_peak, first_step_scope: its at_peak and peak_scope
    peak_step       the first step that reached the peak (1 when no later step goes higher); steps: how many ran
    The per-step figures (gradient_bytes, optimizer_bytes: the state's size, bytes_to_host/device and
    micro_batch_*, overlapped_*) are one step's, the last's (the steady state's) where they differ.
    Data parallel (estimate(..., world_size=N, zero=z)): the figures are one rank's, `rank`; comm_bytes is what
    DistributedDataParallel holds from its construction (the gradient buckets, category communication), counted
    in total; per_rank is [total of rank 0, 1, ...] when every rank was estimated (ZeRO: the shards differ), and
    the Estimate is then the rank with the highest total."""
    comm_bytes = optimizer_init_bytes = 0
    world_size = None
    zero = 0
    rank = None
    per_rank = None
    host_peak = bytes_to_host = bytes_to_device = 0
    micro_batch_to_host = micro_batch_to_device = overlapped_to_host = overlapped_to_device = 0
    overlap_grad_copies = False
    conv_workspace_counted = True
    outside_tensors = 0  # tensors requiring grad the forward reads from outside the model (OUTSIDE_NOTE)
    first_step_peak = None
    peak_step = 1

    def __init__(self, **kw):
        if kw.get("first_step_peak") is None:  # one step (made elsewhere): it is the first
            kw.update(first_step_peak=kw.get("peak"), first_step_at_peak=kw.get("at_peak"),
                      first_step_scope=kw.get("peak_scope"))
        self.__dict__.update(kw)

    @property
    def bytes_moved(self):
        return self.bytes_to_host + self.bytes_to_device

    @property
    def bytes_overlapped(self):
        return self.overlapped_to_host + self.overlapped_to_device

    @property
    def total(self):
        return self.param_bytes + self.input_bytes + self.comm_bytes + self.optimizer_init_bytes + self.peak

    @property
    def first_step_total(self):
        return self.param_bytes + self.input_bytes + self.comm_bytes + self.optimizer_init_bytes + \
            self.first_step_peak

    @property
    def steps_text(self):
        """'' when the first step peaks as the later ones; else ' from step 2 on (step 1: 3.50 MiB)' (the first
        step that reached the peak)."""
        if self.peak_step == 1:
            return ""
        return f" from step {self.peak_step} on (step 1: {_fmt(self.first_step_total)})"

    @property
    def inference_total(self):
        return self.param_bytes + self.input_bytes + self.inference_peak

    def fits(self, capacity):
        """Whether the allocated bytes fit. The allocator also needs whole segments and may fragment them:
        summary() settles that by running the step under capacity as a limit (estimate(..., limit=))."""
        return self.total <= capacity

    def verdict(self, capacity):
        if self.fits(capacity):
            return f"fits: {_fmt(self.total)} of {_fmt(capacity)}"
        return f"does not fit: needs {_fmt(self.total)}, has {_fmt(capacity)}"

    @property
    def predicted_for(self):
        """'predicted for cuda:0 (cuDNN workspace not included)', 'predicted for cpu'."""
        return f"predicted for {self.device}" + (" (cuDNN workspace not included)" if CUDNN_NOTE in self.notes
                                                 else "")

    def breakdown(self):
        """[(category, bytes)] at the moment of the peak, the categories holding bytes, largest first."""
        return sorted(((c, b) for c, b in self.at_peak.items() if b), key=lambda cb: -cb[1])

    def __repr__(self):
        return (f"Estimate(training peak {_fmt(self.total)} in {self.peak_scope!r}{self.steps_text}, inference peak "
                f"{_fmt(self.inference_total)}, params={self.params:,}, {self.predicted_for})")

    def _repr_html_(self):
        """A notebook shows the estimate as a table (text stays the repr in a terminal)."""
        rows = [("training peak", f"{_fmt(self.total)} (reached in {self.peak_scope or '?'}{self.steps_text})")]
        rows += [(f"&nbsp;&nbsp;{c} at the peak", _fmt(b)) for c, b in self.breakdown()]
        rows += [("inference peak", _fmt(self.inference_total)), ("parameters", f"{self.params:,} "
                 f"({_fmt(self.param_bytes)})"), ("gradients", _fmt(self.gradient_bytes)),
                 ("optimizer state", _fmt(self.optimizer_bytes)),
                 ("activations saved for backward (most at once)", _fmt(self.activation_bytes)),
                 ("input", _fmt(self.input_bytes))]
        return _html_table(f"gpumemnet estimate: training steps, {html.escape(self.predicted_for)}",
                           [(k, html.escape(v)) for k, v in rows])


def _html_table(caption, rows, header=None):
    """A small self-contained HTML table (no scripts, no external styles): caption, optional header, rows of
    already-escaped cells."""
    out = ['<table class="gpumemnet" style="border-collapse:collapse;font-family:monospace">',
           f'<caption style="text-align:left;font-weight:bold">{caption}</caption>']
    if header:
        out.append("<tr>" + "".join(f'<th style="text-align:left;padding:0 8px">{h}</th>' for h in header)
                   + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f'<td style="padding:0 8px">{c}</td>' for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


CUDNN_NOTE = ("cuDNN workspace not included: this process has no CUDA device whose cuDNN could be asked which "
              "algorithm it picks, so every convolution is modelled with 0 bytes of workspace; on the GPU cuDNN "
              "takes an algorithm's workspace only when the allocator can still give it, so the real peak may "
              "exceed this estimate by at most what is free at that moment (a limit, gm.memory.set_limit, bounds "
              "it); estimate on a machine with the GPU to count it byte for byte")


def _meta_target(dev):
    """(target, sm_count) of _C._set_meta_target for the device an estimate stands for: 'cuda:N' with the GPU's
    multiprocessor count when it is here (cuDNN is asked for the convolutions' workspace; the count sizes batch
    norm's scratch), 'cuda' with 0 (unknown: the kernels' default) when it is not, 'cpu' for everything else."""
    if dev.split(":")[0] != "cuda":
        return "cpu", 0
    index = int(dev.split(":")[1]) if ":" in dev else 0
    if index >= cuda.device_count():
        return "cuda", 0
    return f"cuda:{index}", cuda.get_device_properties(index).multi_processor_count


def _host_rng_states():
    """The state of every host generator a forward could draw from, NumPy's (each BitGenerator, so each
    np.random.Generator, and each RandomState with its cached gaussian; the global np.random is one) and Python's
    (random.Random instances, the global `random` included): a forward that draws from one (noise from a module's
    np.random.default_rng, an augmentation factor from np.random.uniform) runs again in the estimate's replay,
    which must not move them for the real run. They are found among the live objects, by exact type in one C call
    (_live_objects.py: safe beside a thread that trains)."""
    found = live_objects(np.random.BitGenerator, np.random.RandomState, random.Random,
                         exclude=(random.SystemRandom,))  # (no state to save: it reads the OS)
    return [(g, _rng_state(g)) for g in found]


def _rng_state(g):
    if isinstance(g, np.random.BitGenerator):
        return g.state
    return g.get_state(legacy=False) if isinstance(g, np.random.RandomState) else g.getstate()


def _restore_host_rngs(states):
    for g, st in states:
        if isinstance(g, np.random.BitGenerator):
            g.state = st
        elif isinstance(g, np.random.RandomState):
            g.set_state(st)
        else:
            g.setstate(st)


def estimate(model, input_shape, loss_fn=None, optimizer=None, batch_size=None, target=None, autocast=None,
             checkpoint_segments=None, accumulation_steps=1, device="cpu", limit=None, world_size=None, zero=0,
             rank=None, save_on_cpu=False, param_dtype=None, comm_hook=None, zero_grad_to_none=True,
             keep_outputs=False):
    """Run training steps of `model` (forward, loss, backward, the optimizer's step; zero_grad; again) on a meta
    copy and return an Estimate of the training run's peak. The model itself is not touched.

    Why more than one: the optimizer makes its state (Adam's exp_avg and exp_avg_sq, SGD's momentum buffers) in
    its first step, so from the second step on the forward and backward run with that state alive and usually peak
    higher than the first step did (story 000, Adam, 2 micro-batches: 14.22 GiB in step 1, 16.41 GiB from step 2
    on). The steps run until one leaves the allocator's blocks as the step before left them (usually the second or
    the third; at most MAX_STEPS, or Estimate.notes says so): every later step then repeats it, so the Estimate's
    peak is the highest any number of real steps reaches (Estimate.first_step_peak keeps the first step's).
    Between the steps the optimizer's zero_grad runs, as a loop calls it after its step (or at the top of the
    next iteration, which is the same): zero_grad_to_none=True is PyTorch's default zero_grad(set_to_none=True),
    the gradients freed before the next forward; False is zero_grad(set_to_none=False), the gradients kept
    (zeroed) through the next forward and backward accumulating into them. Every step takes the same batch.
    keep_outputs=True is a loop that holds the output and the loss in variables (`out = model(x); loss =
    crit(out, y)`): they stay alive through backward, beside their gradients, and until the next forward replaces
    them; False (the default) is `crit(model(x), y).backward()`, the output freed once the loss has it. The gap
    is about the output's size twice (large for language-model logits and segmentation maps): give True for the
    usual loop. `python -m gpumemnet run` sees which the script does.
    optimizer=False runs one step (forward and
    backward only: nothing carries over to a second one).

    The order of the leading arguments is the same in estimate, plan and max_batch_size: model, input_shape,
    loss_fn, optimizer, batch_size, target.
    input_shape: one sample's shape with batch_size, or the whole batch's shape when batch_size is None; or a
    Tensor (its shape and dtype), or a tuple of Tensors for a model taking several inputs.
    loss_fn(output, target): default output.sum(); target: a Tensor or shape (first dim = micro-batch). A loss_fn
    without a target gets one made up: class indices (int64, the output's shape without dim 1, as cross_entropy
    and nll_loss take) or, when loss_fn refuses those, a tensor of the output's shape and dtype (mse_loss...).
    optimizer: a class or factory called with the parameters (default gm.optim.Adam); False: no step.
    autocast: a dtype (gm.bfloat16, gm.float16) for forward + loss under gm.autocast(device's type).
    checkpoint_segments: run a Sequential model through gm.utils.checkpoint_sequential.
    accumulation_steps: k micro-batches of batch // k, each loss divided by k and backpropagated, then one step.
    device: the device the estimate stands for (its autocast policy; summary compares with its capacity).
    limit: run the step as gm.memory.set_limit(device, limit) would: the allocator frees its cache and retries
    where the real device would, and OutOfMemoryError is raised where the real step would raise it. This is the
    test of "fits" that counts reserved bytes (fragmentation included), not only allocated ones.
    save_on_cpu: forward under gm.autograd.graph.save_on_cpu (saved activations in host memory; entering that
    context around estimate() does the same). param_dtype: the model's floating parameters (and floating inputs,
    and a target given as a shape) in this dtype, as after model.to(param_dtype): gm.bfloat16 with
    optimizer=lambda ps: Adam(ps, offload="cpu") is bf16 parameters on the device with fp32 masters on the host.
    Estimate.host_peak and bytes_moved say what
    offload puts in host memory and moves per step. The factory's optimizer runs as the script's would: one that
    overlaps its gradient copies with backward (optimizer=lambda ps: Adam(ps, offload="cpu").overlap_grad_copies())
    is estimated so (each gradient staged on the host from its backward to the step, and copied down once per
    micro-batch: Estimate.micro_batch_to_host, bytes_overlapped).
    world_size: the step of one rank of a data-parallel run of world_size ranks, each with this batch (so give
    the per-rank batch): the model wrapped in gm.nn.parallel.DistributedDataParallel (zero=0) and the optimizer
    in gm.distributed.optim.ZeroRedundancyOptimizer(optimizer_class=optimizer, stage=zero) for zero=1 (under DDP)
    or 2 (alone), as the script does it; every rank's figures (rank=None), or one rank's. A model given already
    wrapped in DistributedDataParallel is estimated so, on the wrapper's world size (and its comm hook).
    comm_hook: the DDP communication hook the script registers, a hook (state None) or (state, hook): what it
    allocates (fp16_compress_hook's half-size copy of each bucket) is counted; needs world_size."""
    model, world_size, comm_hook = _distributed.unwrap(model, world_size, comm_hook)
    world_size, zero, ranks = _distributed.check(world_size, zero, rank)
    if autocast is None and is_autocast_enabled():
        # called inside the caller's autocast region (the OOM explainer of a forward under autocast): the step a
        # script runs there, its forward and loss in the region (not the estimate's own work)
        autocast = get_autocast_dtype()
    with _meta_turn, _meta_mode_like(device), _caller_modes_off():
        ests = [_estimate(model, input_shape, loss_fn, optimizer, batch_size, target, autocast, checkpoint_segments,
                          accumulation_steps, device, limit, dist=(world_size, zero, r, comm_hook),
                          save_on_cpu=save_on_cpu, param_dtype=param_dtype,
                          zero_grad_to_none=zero_grad_to_none, keep_outputs=keep_outputs) for r in ranks]
    if len(ests) == 1:
        return ests[0]
    worst = max(ests, key=lambda e: e.total)
    worst.per_rank = [e.total for e in ests]
    return worst


@contextlib.contextmanager
def _caller_modes_off():
    """The step replayed as a script runs it whatever mode the caller is in: grad on (an estimate made in a
    validation block under no_grad), the caller's autocast off (estimate(autocast=) sets the step's own)."""
    with enable_grad(), suspended():
        yield


@contextlib.contextmanager
def _meta_mode_like(device):
    """Meta in the device's allocator mode (gm.memory.set_allocator: expandable segments reserve other bytes) while
    an estimate runs, when meta holds nothing to switch it; its own mode after. An estimate that raises (an
    OutOfMemoryError under a limit) has its frames cleared so that its meta tensors go before meta switches back."""
    try:
        mode, meta_mode = _device_allocator(device_str(device)), _C.get_allocator(META)
    except (TypeError, ValueError, RuntimeError):  # a bad device: _estimate says so
        mode = meta_mode = None
    if mode == meta_mode:  # the usual case: nothing to switch, nothing else done
        yield
        return
    gc.collect()
    switched = _memory.memory_allocated(META) == 0
    if switched:
        _C.set_allocator(META, mode == "expandable")
    try:
        yield
    except BaseException as e:
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        if switched:
            gc.collect()
            if _memory.memory_allocated(META) == 0:
                _C.set_allocator(META, meta_mode == "expandable")


def _sum_of(out):
    """The default loss: output.sum(); for an output holding several tensors (an RNN's (output, state), a dict of
    heads), the sum of the sums of its floating-point tensors that require grad."""
    if isinstance(out, _C.TensorBase):
        return out.sum()
    parts = [t for _, t in tensors_in(out) if t.is_floating_point() and t.requires_grad]
    if not parts:
        raise ValueError("estimate: the model's output holds no tensor that requires grad, so there is no default "
                         "loss; pass loss_fn=")
    total = parts[0].sum()
    for t in parts[1:]:
        total = total + t.sum()
    return total


def _keyword_inputs(input_shape, input_kwargs, checkpoint_segments):
    """(input_shape with the keyword tensors after the positional ones, the keyword tensors' names, the other
    keyword values) for _estimate's input_kwargs. A 0-d tensor (a temperature) has no batch to split: it is
    passed as it is, as the values are."""
    if not input_kwargs:
        return input_shape, [], {}
    if checkpoint_segments is not None:
        raise ValueError("estimate: checkpoint_segments runs a Sequential, which takes no keyword inputs")
    names = [k for k, v in input_kwargs.items() if isinstance(v, _C.TensorBase) and v.dim()]
    tensors = [input_shape] if isinstance(input_shape, _C.TensorBase) else list(input_shape)
    if not all(isinstance(t, _C.TensorBase) for t in tensors) or not tensors + names:
        raise ValueError("estimate: with keyword inputs, input_shape gives the positional inputs as tensors, and "
                         "there must be one tensor at least")
    return tensors + [input_kwargs[k] for k in names], names, {k: v for k, v in input_kwargs.items()
                                                                if k not in names}


def _estimate(model, input_shape, loss_fn=None, optimizer=None, batch_size=None, target=None, autocast=None,
              checkpoint_segments=None, accumulation_steps=1, device="cpu", limit=None, keep_outputs=False,
              dist=(None, 0, None, None), save_on_cpu=False, param_dtype=None, zero_grad_to_none=True,
              zero_grad_late=False, target_as_is=False, input_kwargs=None, keep_loss=None, no_target=False):
    """estimate(); input_kwargs: the forward's keyword arguments (python -m gpumemnet run replays a Hugging Face
    style model(x, labels=y) or model(input_ids=x, labels=y)): a tensor stands for its shape and dtype as a
    positional input does (input_shape then gives the positional ones as tensors, maybe none), anything else is
    passed as it is. keep_outputs: the output and the loss stay alive until the next ones replace them (through the
    optimizer step and the next forward), as in a script that holds them in variables (`out = model(x); loss =
    ...`: python -m gpumemnet run). keep_loss: the same for the loss alone, when it differs (None: as
    keep_outputs): `loss = F.cross_entropy(model(x).transpose(1, 2), y)` holds the loss and not the output.
    target_as_is: the target keeps its own first dim (python -m gpumemnet run replays the script's, whose batch
    need not be the input's first dim: a time-major RNN's (T*N,) targets for (T, N) inputs). no_target: loss_fn
    takes no target, none is made up for it (run mode's replay of out["loss"], or of a loss of the output alone;
    made up, the target needs a forward more, and an output that is a Tensor). zero_grad_late: the script calls
    zero_grad() between its loss and backward (run mode sees where), so the last step's gradients are alive
    through the second step's forward. dist: (world_size, zero, rank, comm_hook) of one data-parallel rank, or
    world_size None (see memory/_distributed.py)."""
    if not isinstance(model, Module):
        raise TypeError(f"estimate: model must be a gpumemnet.nn.Module, got {type(model).__name__}")
    params = list(model.parameters())
    if not params:
        raise ValueError(f"estimate: {type(model).__name__} has no parameters: there is no training step to "
                         f"estimate (use a forward under no_grad)")
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"estimate: batch_size must be a positive int or None, got {batch_size!r}")
    pdt = as_dtype(param_dtype, "estimate(param_dtype)") if param_dtype is not None else None
    input_shape, kw_names, kw_values = _keyword_inputs(input_shape, input_kwargs, checkpoint_segments)
    specs = _input_specs(input_shape, batch_size, params[0]._dtype)
    # an input tensor that requires grad does so in the replay (its gradient; a reentrant checkpoint's segment
    # trains only then)
    grad_inputs = [i for i, t in enumerate(input_shape if isinstance(input_shape, (list, tuple)) else [input_shape])
                   if isinstance(t, _C.TensorBase) and t.requires_grad]
    npos = len(specs) - len(kw_names)
    if pdt is not None:  # the model's inputs follow its parameters' dtype, as after model.to(dtype) and x.to(dtype)
        specs = [(sh, pdt.code if DTYPES[dt].is_floating_point else dt) for sh, dt in specs]
    shape = specs[0][0]
    k = accumulation_steps
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"estimate: accumulation_steps must be a positive int, got {k!r}")
    if shape[0] % k:
        raise ValueError(f"estimate: the batch of {shape[0]} (input shape {shape}) does not split into "
                         f"{k} equal micro-batches")
    micro = shape[0] // k
    if checkpoint_segments is not None and (isinstance(checkpoint_segments, bool) or
                                            not isinstance(checkpoint_segments, int) or checkpoint_segments < 1):
        raise ValueError(f"estimate: checkpoint_segments must be a positive int or None, got "
                         f"{checkpoint_segments!r}")
    if checkpoint_segments is not None and not hasattr(model, "children"):
        raise TypeError("estimate: checkpoint_segments needs a Sequential model")
    dev = device_str(device)
    amp_dtype = as_dtype(autocast, "estimate(autocast)") if autocast is not None else None
    if amp_dtype is not None and amp_dtype.name not in ("float16", "bfloat16"):
        raise ValueError(f"estimate: autocast must be gm.float16 or gm.bfloat16 (the dtype autocast lowers to), "
                         f"or None, got {amp_dtype}")
    keep_loss = keep_outputs if keep_loss is None else keep_loss
    if optimizer is None:
        optimizer = Adam
    elif optimizer is not False and not callable(optimizer):
        raise TypeError(f"estimate: optimizer must be a function of the parameters that builds the optimizer "
                        f"(an optimizer class, or lambda ps: SGD(ps, lr=0.1, momentum=0.9)), None for Adam or "
                        f"False for none, got {type(optimizer).__name__} {optimizer!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise ValueError(f"estimate: limit must be a positive number of bytes or None, got {limit!r}")
    amp_ctx = (lambda: _autocast(dev.split(":")[0], dtype=amp_dtype)) if amp_dtype is not None else _nullctx

    def micro_batch(xs, i):
        return [x[i * micro:(i + 1) * micro] for x in xs] if k > 1 else xs

    def forward(fn, xi):
        """fn (the copy, or its data-parallel wrapper) on micro-batch xi: the positional inputs, then the keyword
        ones (their tensors are xi's last) and the keyword values as they were given."""
        return fn(*xi[:npos], **dict(zip(kw_names, xi[npos:])), **kw_values)

    meta_target = _meta_target(dev)
    draws = state.meta_draws_random
    t0 = time.perf_counter()
    gc.collect()
    _memory.empty_cache(META)  # the estimate stands for a fresh process: no cache to reuse
    start = _memory.memory_stats(META)
    levels = _levels()
    pre_cat = {c: v["current"] for c, v in start["by_category"].items()}
    p0, r0 = pre_cat["parameter"], _memory.memory_reserved(META)
    # The caller's meta limit (someone rehearsing a small card on meta) is not the estimate's: it has its own.
    meta_limit = _C.get_limit(META)
    _C.set_limit(META, int(r0 + limit) if limit is not None else None)
    # Under a limit, the device's fallback (gm.memory.set_fallback) decides what does not fit: meta makes the same
    # split, quietly (the warning is the real run's), and fallback_peak reports what went there.
    meta_fallback, fallback = _C.get_fallback(META), _device_fallback(dev) if limit is not None else None
    _C.set_fallback(META, *(fallback or (None, 0)), None)
    clone = xs = xi = y = opt = recorder = out = loss = None
    busy.depth += 1
    state.meta_draws_random = False
    meta_draws = _C._set_meta_draws(False)  # meta fills on this thread leave the generator where it is
    host_rngs = _host_rng_states()
    # the forward's own autocast(x.device.type, ...) regions get "meta": they stand for the estimated device's
    prev_stands_for = set_meta_stands_for(dev.split(":")[0])
    prev_target = _C._set_meta_target(*meta_target)
    # cuDNN's choices on meta start from an empty table, as the device's do in a fresh process
    _C._conv_algo_cache_clear("meta")
    uncounted = _C._conv_workspace_uncounted()
    # A fresh process has no segments: the free room left in segments the caller's live meta tensors hold (another
    # model built on meta) must not serve the step, or its estimate would depend on what else is alive.
    prev_fresh = [_C._fresh_segments(d, True) for d in (META, _memory.META_HOST)]
    try:
        clone = _meta_copy(model, dev, pdt.code if pdt is not None else None)
        first_seq, outside = sequence_now(), set()  # the replay's graph nodes are numbered from first_seq
        param_bytes = _cat("parameter") - p0
        a0 = _memory.memory_allocated(META)
        with category("input"):
            xs = [_C.empty(sh, dt, META) for sh, dt in specs]
            for i in grad_inputs:
                xs[i].requires_grad = True
            if target is not None:
                y = _meta_like(target, None if target_as_is else micro, "target", pdt.code if pdt is not None
                               else None)
        if target is None and loss_fn is not None and not no_target:
            y = _made_up_target(clone, micro_batch(xs, 0), loss_fn, amp_ctx, forward)
        input_bytes = _memory.memory_allocated(META) - a0
        ready = _levels()  # model and inputs: what stays from here to the inference forward
        step_model, make_optimizer, comm_bytes = clone, optimizer, 0
        if dist[0] is not None:
            step_model, make_optimizer, comm_bytes = _distributed.wrap(clone, optimizer, *dist, checkpoint_segments,
                                                                       META)
        o0, a1 = _cat("optimizer"), _memory.memory_allocated(META)
        opt = make_optimizer(list(clone.parameters())) if optimizer is not False else None
        # what the optimizer's constructor allocated (Adagrad's state_sum), held from before the first step
        optimizer_init_bytes = _memory.memory_allocated(META) - a1
        recorder = _LayerRecorder(clone)
        clone.train()
        gc.collect()
        _memory.empty_cache(_memory.META_HOST)
        host_base = _memory.memory_allocated(_memory.META_HOST)
        _memory.reset_peak_memory_stats(META)
        _memory.reset_peak_memory_stats(_memory.META_HOST)
        _offload.reset_bytes_moved()
        before = _memory.memory_stats(META)
        notes = [HOOKS_NOTE.format(n=n)] if (n := hooks_left_out(model)) else []
        base = before["allocated"]["current"]
        base_cat = {c: v["current"] for c, v in before["by_category"].items()}
        # Steps until one repeats the one before: the first creates the optimizer's state (lazily, in its step),
        # the second runs its forward and backward with that state alive, as every later step does. A step that
        # leaves the allocator's blocks as the step before left them (_layout) starts the next one from the same
        # state, so every later step repeats it: the run has settled. Usually the second or the third does (a
        # higher second step may take new segments; where they split differs, inception_v3's third step peaks
        # 316 KiB above its second). Without an optimizer nothing differs from one step to the next.
        first, layout, step_peaks = None, None, []
        for step in range(MAX_STEPS if opt is not None else 1):
            if step:
                if step == 1:
                    first = _memory.memory_stats(META)
                if not zero_grad_late:
                    _zero_grad(opt, clone, zero_grad_to_none)
                _offload.reset_bytes_moved()  # the per-step figures are the steady step's
            for i in range(k):
                xi = micro_batch(xs, i)
                recorder.on = step == 0 and i == 0
                with amp_ctx(), (_offload.save_on_cpu() if save_on_cpu else _nullctx()):
                    try:
                        # Assigned as a script assigns its variables: with keep_outputs the previous output and
                        # loss are freed once the new ones exist (out = model(x) frees the last out after the
                        # forward); without, they went right after their use.
                        if dist[0] is not None:  # the wrapper runs the checkpointed Sequential itself
                            out = forward(step_model, xi)
                        else:
                            out = checkpoint_sequential(clone, checkpoint_segments, *xi, use_reentrant=False) \
                                if checkpoint_segments else forward(clone, xi)
                    except _C.OutOfMemoryError:
                        raise
                    except (ValueError, RuntimeError, TypeError, IndexError) as e:
                        if reads_values(e):
                            raise ValueError(f"estimate: the model's forward reads tensor values (.item(), bool(), "
                                             f"an `if` on a tensor), which a replay on meta cannot: {e}") from e
                        if reads_outside(e):
                            raise ValueError(f"estimate: the model's forward reads tensors that are not the model's "
                                             f"(a global store's, a closure's), which its meta copy cannot stand "
                                             f"in for: {e}") from e
                        got = ", ".join(str(tuple(x.shape)) for x in xi)
                        raise ValueError(f"estimate: the model does not accept an input of shape {got} (input_shape="
                                         f"{_shape_text(input_shape)}, batch_size={batch_size}): {e}") from e
                    finally:
                        recorder.on = False
                    loss = _sum_of(out) if loss_fn is None else _call_loss(loss_fn, out, y)
                if not keep_outputs:
                    out = None
                _check_scalar_loss(loss, "estimate")
                if k > 1:
                    loss = loss / k
                if step and zero_grad_late and i == 0:  # the script's zero_grad() between forward and backward
                    _zero_grad(opt, clone, zero_grad_to_none)
                outside |= cut_outside(loss, first_seq)  # the replay's backward touches no real .grad
                loss.backward()
                if not keep_loss:
                    loss = None
                if i == 0:
                    micro_moved = _offload.bytes_moved()
            grad_bytes = _cat("gradient") - base_cat["gradient"]
            if opt is None:
                break
            with warning_filter("ignore", NoGradientWarning):  # the replay's step is not the script's
                _replay_step(opt)
            step_peaks.append(_memory.max_memory_allocated(META))
            now = _layout()
            if now == layout:
                break
            layout = now
        else:
            notes.append(f"the allocator's layout still changed in step {MAX_STEPS}: a later step may peak higher")
        if outside:
            notes.append(OUTSIDE_NOTE.format(n=len(outside)))
        out = loss = None
        host_peak = _memory.max_memory_allocated(_memory.META_HOST) - host_base
        moved, overlapped = _offload.bytes_moved(), _offload.bytes_overlapped()
        overlap = bool(getattr(opt, "_overlap_handles", None))
        after = _memory.memory_stats(META)
        optimizer_bytes = _cat("optimizer") - o0
        # the allocator's peak since the reset: the highest of the two steps (the first one's when they tie)
        peak = after["allocated"]["peak"] - base
        first_step_peak = (first or after)["allocated"]["peak"] - base
        peak_step = 1 + next(i for i, p in enumerate(step_peaks or [after["allocated"]["peak"]])
                             if p == after["allocated"]["peak"])
        first_at = (first or after)["at_peak"]
        peak_reserved = after["reserved"]["peak"] - r0
        fallback_peak = sum(v["allocated"]["peak"] for where, v in after["by_location"].items() if where != "device")
        at = after["at_peak"]
        # at the moment of the peak, everything the step's device holds: parameters and input included
        at_peak = {c: v - pre_cat[c] for c, v in at["by_category"].items()}
        activation_bytes = after["by_category"]["activation"]["peak"] - base_cat["activation"]
        rows = recorder.rows
        recorder.remove()
        recorder = None
        # the step's state goes before the inference forward: a validation pass holds only the model
        del opt
        step_model = None
        for p in clone.parameters():
            p.grad = None
        del p  # the loop's last parameter would outlive the copy, and keep its segment from empty_cache
        _release(ready)
        _memory.empty_cache(META)
        clone.eval()
        _memory.reset_peak_memory_stats(META)
        ibase = _memory.memory_allocated(META)
        with no_grad(), amp_ctx():
            out = forward(clone, micro_batch(xs, 0))
        out = None
        inference_peak = _memory.max_memory_allocated(META) - ibase
        uncounted = _C._conv_workspace_uncounted() - uncounted
    finally:
        if recorder is not None:
            recorder.remove()
        del clone, xs, xi, y, out, loss  # xi too: the input's meta blocks go before empty_cache
        opt = step_model = None
        _release(levels)
        _memory.empty_cache(META)
        _memory.empty_cache(_memory.META_HOST)
        _C.set_limit(META, meta_limit)
        for d, was in zip((META, _memory.META_HOST), prev_fresh):
            _C._fresh_segments(d, was)
        _C.set_fallback(META, *(meta_fallback or (None, 0)), None)
        _C._set_meta_target(*prev_target)
        state.meta_draws_random = draws
        _C._set_meta_draws(meta_draws)
        _restore_host_rngs(host_rngs)
        set_meta_stands_for(prev_stands_for)
        busy.depth -= 1
    return Estimate(
        peak=peak, peak_reserved=peak_reserved, at_peak=at_peak, peak_scope=at["scope"],
        first_step_peak=first_step_peak, peak_step=peak_step, steps=max(len(step_peaks), 1),
        first_step_at_peak={c: v - pre_cat[c] for c, v in first_at["by_category"].items()},
        first_step_scope=first_at["scope"],
        inference_peak=inference_peak, params=sum(p.numel() for p in params),
        trainable=sum(p.numel() for p in params if p.requires_grad), param_bytes=param_bytes,
        gradient_bytes=grad_bytes, optimizer_bytes=optimizer_bytes, activation_bytes=activation_bytes,
        optimizer_init_bytes=optimizer_init_bytes,
        fallback_peak=fallback_peak,
        input_bytes=input_bytes, layers=rows, input_shape=shape, micro_batch=micro, device=dev,
        comm_bytes=comm_bytes, world_size=dist[0], zero=dist[1], rank=dist[2],
        notes=([CUDNN_NOTE] if uncounted else []) + notes, conv_workspace_counted=not uncounted,
        seconds=time.perf_counter() - t0,
        host_peak=host_peak, bytes_to_host=moved["to_host"], bytes_to_device=moved["to_device"],
        micro_batch_to_host=micro_moved["to_host"], micro_batch_to_device=micro_moved["to_device"],
        overlapped_to_host=overlapped["to_host"], overlapped_to_device=overlapped["to_device"],
        overlap_grad_copies=overlap, outside_tensors=len(outside))


OUTSIDE_NOTE = ("the forward reads {n} tensor(s) requiring grad that are not the model's (a global store's): the "
                "replay leaves them and their gradients alone, and does not count what they take")
MAX_STEPS = 8  # steps an estimate runs at most, waiting for one that repeats the step before


def _layout():
    """The meta and meta-host allocators' blocks (segment pool and size; each block's offset, size and whether it
    is allocated), which with the live objects decide every later allocation: two steps that leave the same
    layout are followed by the same steps."""
    return [[(pool, size, [b[:3] for b in blocks]) for pool, size, blocks in _C._segments(d)]
            for d in (META, _memory.META_HOST)]


def _zero_grad(opt, clone, set_to_none):
    """The optimizer's zero_grad(set_to_none) (a subclass's own, as ZeroRedundancyOptimizer's buckets); an object
    from a factory that has none (a step() alone) gets PyTorch's default on the copy's parameters."""
    zero_grad = getattr(opt, "zero_grad", None)
    if zero_grad is not None:
        zero_grad(set_to_none=set_to_none)
        return
    for p in clone.parameters():
        if set_to_none:
            p.grad = None
        elif p.grad is not None:
            _C.fill_(p.grad, 0)


def _device_allocator(dev):
    """'caching' or 'expandable': the allocator mode of dev ('caching' for a device this build cannot use)."""
    try:
        return _C.get_allocator(dev)
    except RuntimeError:
        return "caching"


def _device_fallback(dev):
    """(location, category mask) of the fallback set on dev, or None (also for a device this build cannot use)."""
    try:
        return _C.get_fallback(dev)
    except RuntimeError:
        return None



def _replay_step(opt):
    """opt.step() in the replay. A step that takes a closure (LBFGS and its kind) evaluates the loss's values, which
    meta tensors do not have: said in words rather than as step()'s TypeError."""
    try:
        opt.step()
    except TypeError as e:
        if "closure" not in str(e):
            raise
        raise NotImplementedError(f"{type(opt).__name__}.step takes a closure (LBFGS-style), which the estimate "
                                  f"cannot replay: it reads the loss's values") from None
