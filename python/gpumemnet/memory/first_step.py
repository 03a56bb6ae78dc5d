"""`python -m gpumemnet run`: the peak of each model's training steps (the first, and the steady one that every later
step repeats: estimate() runs both), predicted before the first step's backward runs, as one line on stderr (and,
when it does not fit, the configurations plan() tried).

What is watched, only while run mode is on (watch() / unwatch(); the package's face turns it on):
  - every root call of a Module (the outermost module entered from the script) in training mode with grad
    enabled and parameters that require grad: its input tensors' shapes and dtypes, positional and keyword
    (a Hugging Face model(input_ids=x, labels=y); other keyword values as they are), the autocast region it ran
    in, the bytes its device held when it started, and the graph nodes and layouts of its outputs (weakly:
    nothing is kept alive for it);
  - the loss applied to such an output or to a view of it (out.view(-1, C), model(x).transpose(1, 2), a slice):
    a loss Module's call (nn.CrossEntropyLoss()(out, y)), or a loss function reached through the
    `torch.nn.functional` alias (F.cross_entropy(out, y): wrap_torch_attribute), with the other arguments kept as
    shapes, dtypes and layouts; or the output's own loss, when backward() is called on it (out["loss"],
    out.loss);
  - the first backward() whose graph reaches a watched model's outputs (the `backward_starting` hook of
    _core/hooks.py): there, before anything of backward runs, the model's training step is estimated.

The estimate is gm.memory.estimate's meta run of the same step: the model's meta copy, inputs of the same
shapes and dtypes, the same loss replayed on them (a loss Module is copied with meta buffers; a loss function is
called with the same arguments), the optimizer that holds the model's parameters rebuilt over the copy's with the
same class and hyper-parameters, the same autocast. It is exact where the script does what a training loop
does: the output and the loss are held in variables until the next iteration (so the estimate keeps them alive
through the step, and the next step's forward runs while they still hold the last ones), and the target is on the
device before the forward. Where the script calls zero_grad() is seen (the hooks' zero_grad_called slot): a call
between the forward's start and backward (a no-op in step 1) means the last step's gradients are alive through
every later forward, and the estimate runs so. The line's peak is the bytes the device held when the forward
started plus the steps' own peak, so it can be compared with the device's capacity and with
gm.memory.max_memory_allocated() after the steps (after step 1: the first step's figure, which the line gives too
when it is lower). Not included: what the script allocates between the forward and
backward besides the loss (metrics, logging), ops applied after the loss (a GradScaler's scaled loss, a division
by accumulation steps: a few scalar blocks), and a GradScaler's own step.

Nothing the script sees changes: the estimate runs on a copy on the meta device, draws no random numbers (the
NumPy and Python generators a forward draws from are set back after the replay: estimator._host_rng_states) and
leaves the model, its gradients and the optimizer as they were; a tensor the forward reads from outside the model
(a global parameter store's) stays out of the replay's backward (estimator's cut_outside), its .grad untouched,
and the line says so. A DistributedDataParallel model is replayed as its module under the estimate's own wrapper."""
import contextlib
import inspect
import os
import sys
import threading
import weakref

from .. import _C
from .._core import hooks
from .._core.autocast import get_autocast_dtype, is_autocast_enabled
from .._core.autograd import is_grad_enabled
from .._core.functions import ToDtype as _ToDtype
from .._core.dtype import device as _device, factory_device
from .._core.scope import category
from .._core.state import state
from ..nn.modules._hooks import _global_all, _global_pre_hooks, add_hook
from ..nn.modules.loss import _Loss
from ..nn.modules.module import Module, register_module_forward_hook
from ..optim._step_hooks import register_optimizer_step_post_hook
from ..optim.optimizer import Optimizer
from . import _distributed
from ._live_objects import live_objects
from ._output_views import Output as _Output, viewed as _viewed
from . import estimator as _estimator
from . import planner as _planner
from . import stats as _stats
from ._meta_model import (_Attr, _deepcopy_rebound, _meta_attributes, layout_of, meta_laid_out, tensors_in,
                          warning_filter)

__all__ = ["watch", "unwatch", "parse_bytes", "wrap_torch_attribute", "EstimateOnly"]

_fmt = _stats.format_bytes


class EstimateOnly(SystemExit):
    """Raised after the estimate with --estimate-only: the script stops there, exit status 0."""


class _Discard:
    """A text stream that keeps nothing (what the estimate's replays print)."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass


def parse_bytes(text):
    """'6GiB', '6 GiB', '512MiB', '6G' (binary), '6GB' (decimal, 10**9), or a number of bytes -> int."""
    units = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30,
             "t": 2**40, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
    s = str(text).strip().lower().replace(" ", "")
    i = len(s)
    while i and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    number, unit = s[:i], s[i:]
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError):
        raise ValueError(f"cannot read {text!r} as a size: write a number and a unit such as 6GiB, 512MiB or "
                         f"6GB (GiB/MiB are binary, GB/MB decimal)") from None
    if value <= 0:
        raise ValueError(f"a size must be positive, got {text!r}")
    return int(value)


# ---- what is recorded ---------------------------------------------------------------------------------------
def _at(obj, path):
    for key in path:
        obj = getattr(obj, key) if isinstance(key, _Attr) else obj[key]
    return obj


def _path_text(path):
    """How the line names a tensor of the output: output, output['loss'], output.loss (a dataclass's field)."""
    return "output" + "".join(f".{k}" if isinstance(k, _Attr) else f"[{k!r}]" for k in path)


# keyword arguments of a forward that are replayed as they are (return_dict=True, labels=None)
_PLAIN = (type(None), bool, int, float, str)


def _nones_by_name(mod, args, kwargs):
    """(args, kwargs) with the positional arguments from the first None on passed by name (block(x, None) is
    block(x, mask=None)), so that the replay's positional inputs are tensors and the None is replayed as it is;
    unchanged when the forward's signature does not name those arguments."""
    i = next((i for i, a in enumerate(args) if a is None), None)
    if i is None:
        return args, kwargs
    try:
        params = list(inspect.signature(mod.forward).parameters.values())[:len(args)]
    except (TypeError, ValueError):
        return args, kwargs
    if len(params) < len(args) or any(p.kind is not p.POSITIONAL_OR_KEYWORD or p.name in kwargs
                                      for p in params[i:]):
        return args, kwargs
    return args[:i], dict(kwargs, **{p.name: a for p, a in zip(params[i:], args[i:])})


def _not_replayed(args, kwargs):
    """The type names of the arguments the estimate cannot replay: positional ones that are not tensors, keyword
    ones that are neither tensors nor plain values."""
    odd = [a for a in args if not isinstance(a, _C.TensorBase)]
    odd += [v for v in kwargs.values() if not isinstance(v, (_C.TensorBase,) + _PLAIN)]
    return sorted({type(a).__name__ for a in odd})


class _LossCall:
    """A loss applied to a watched model's output: what to call, and its arguments as a template (the model's
    output by its path in the output, other tensors by shape and dtype, anything else as it was)."""

    def __init__(self, fn, name, args, kwargs, result):
        self.fn, self.name, self.args, self.kwargs = fn, name, args, kwargs
        self.result = weakref.ref(result) if isinstance(result, _C.TensorBase) else None
        self.graded = isinstance(result, _C.TensorBase) and result.requires_grad  # (not a metric under no_grad)


class _Call:
    """A root call of a model in training: all the estimate needs, nothing that keeps a tensor alive."""

    def __init__(self, model, args, kwargs):
        self.model = weakref.ref(model)
        self.inputs = [(tuple(a.shape), a._dtype, a._device) for a in args]
        self.grad_inputs = [i for i, a in enumerate(args) if a.requires_grad]  # (the replay's inputs do too)
        # keyword arguments (Hugging Face's model(input_ids=x, labels=y)): tensors by shape and dtype, values as is
        self.kwargs = {k: ("tensor", tuple(v.shape), v._dtype) if isinstance(v, _C.TensorBase) else ("value", v)
                       for k, v in kwargs.items()}
        self.device = next(p for p in model.parameters())._device
        self.held = _stats.memory_allocated(self.device)  # before the forward allocates anything
        self.amp = get_autocast_dtype() if is_autocast_enabled() else None
        self.outputs = []   # [_Output] of the tensors in the output
        self.nodes = []     # weakrefs to the outputs' graph nodes: the graph outlives the output variables
        self.losses = []    # [_LossCall]: the losses applied to the output (a multi-task step adds several)
        self.zero_grads = 0  # the watcher's count of zero_grad() calls when this forward started
        # step 2's call estimated again (_Revision): (micro-batches per step, set_to_none, what step 1 assumed)
        self.revision = None


class _Revision:
    """A model estimated at step 1, watched until step 2's first forward: the line assumed one forward per
    optimizer step and the set_to_none of the zero_grad() seen by then (or PyTorch's default, True), and the
    script's loop may show otherwise (gradient accumulation; zero_grad(set_to_none=False) after the step). Then
    step 2 is estimated again, against the bytes held when step 1 started."""

    def __init__(self, model, held, set_to_none):
        self.model, self.held, self.set_to_none = weakref.ref(model), held, set_to_none
        self.forwards = 1   # training forwards since step 1's
        self.k = None       # forwards per optimizer step, once the first step ran


def _spec(value, outputs):
    """A template entry for one argument of a loss call: ("output", path, how it is viewed: _Output.view, () for
    the output itself), ("tensor", shape, dtype, layout) or ("value", value)."""
    if isinstance(value, _C.TensorBase):
        for o in outputs:
            if o.ref() is value:
                return ("output", o.path, ())
        for o in outputs:  # a view of the output (criterion(out.view(-1, C), y)): replayed as the same view
            how = o.view(value)
            if how is not None:
                return ("output", o.path, how)
        for o in outputs:  # a cast of it (F.cross_entropy(out.float(), y) after an autocast forward)
            if _cast_of(value, o):
                return ("output", o.path, ("cast", value.dtype))
        return ("tensor", tuple(value.shape), value._dtype, layout_of(value))
    return ("value", value)


def _cast_of(value, o):
    """Whether value is output o cast to another dtype (its node a ToDtype whose input is o's node)."""
    node, target = value.grad_fn, (o.node() if o.node is not None else None)
    if type(node) is not _ToDtype or target is None or tuple(value.shape) != o.shape:
        return False
    edge = node._edges[0] if node._edges else None
    return edge is not None and edge[0] is target


def _meta_tensor(entry):
    """A meta tensor for a ("tensor", shape, dtype, layout) entry."""
    _, shape, dtype, layout = entry
    return meta_laid_out(shape, dtype, layout)


# ---- the watcher --------------------------------------------------------------------------------------------
def _never_fails(method):
    """A hook of the watcher runs inside the script's own calls: a failure of the watching says so once on
    stderr and stops the watching, instead of breaking the script's run."""
    def hook(self, *args):
        try:
            return method(self, *args)
        except EstimateOnly:
            raise
        except Exception as e:
            if not self.broken:
                self.broken = True
                print(f"gpumemnet run: watching for step 1 stopped: {type(e).__name__}: {e}", file=self.out)
    hook.__name__ = method.__name__
    # a module's input it keeps is a root call's in training (the caller's own, never handed over): Sequential's
    # children may still write over their intermediates under no_grad (nn/modules/_donation.py)
    hook._keeps_no_input = True
    return hook


class _Watcher:
    def __init__(self, cap, estimate_only, out):
        self.cap, self.estimate_only, self.out = cap, estimate_only, out
        self.lock = threading.Lock()
        self.pending = {}               # id(model) -> _Call (its latest root call in training)
        self.done = weakref.WeakSet()   # models estimated already
        self.estimated = 0
        self.broken = False
        self.said = weakref.WeakSet()   # classes whose "is not estimated" line was printed
        # zero_grad() calls seen (hooks' zero_grad_called), and the set_to_none of the last one
        self.zero_grads, self.set_to_none = 0, True
        self.revisions = {}             # id(model) -> _Revision
        # the pre-hook takes the call's keyword arguments too (register_module_forward_pre_hook has no
        # with_kwargs, but the global list takes such an entry as a module's own list does)
        self.handles = [add_hook((_global_pre_hooks, _global_all), self.pre, "register_module_forward_pre_hook",
                                 with_kwargs=True), register_module_forward_hook(self.post),
                        register_optimizer_step_post_hook(self.stepped)]

    def close(self):
        for h in self.handles:
            h.remove()

    # -- hooks (every module call: cheap unless it is a root call) --
    @_never_fails
    def pre(self, mod, args, kwargs):
        # a block that checkpoint() recomputes in backward is entered with no module around it: it is part of the
        # step of the model whose forward checkpointed it, not a training step of its own
        if self.broken or len(state.modules) != 1 or _estimator.busy.depth or isinstance(mod, _Loss) or \
                state.recomputing:
            return
        if mod in self.done:
            if id(mod) in self.revisions:
                self.revision_forward(mod, args, kwargs)
            return
        if not (mod.training and is_grad_enabled()) or not (args or kwargs) or \
                not any(p.requires_grad for p in mod.parameters()):
            return
        args, kwargs = _nones_by_name(mod, args, kwargs)
        kinds = _not_replayed(args, kwargs)
        if kinds:
            # the estimate replays tensor inputs by shape and dtype; a tuple of states (an LSTM's (h, c)), a list
            # or a flag is not replayed: said once per class, instead of silence (torchdiffeq makes a new module
            # for each odeint call)
            self.done.add(mod)
            if type(mod) not in self.said:
                self.said.add(type(mod))
                print(f"gpumemnet run: step 1 of {type(mod).__name__} is not estimated: its forward takes "
                      f"{', '.join(kinds)} arguments besides tensors, and the estimate replays tensor inputs only",
                      file=self.out)
            return
        if not any(isinstance(v, _C.TensorBase) for v in kwargs.values()) and not args:
            return  # no input tensor: nothing to replay a step of
        call = _Call(mod, args, kwargs)
        call.zero_grads = self.zero_grads
        with self.lock:
            self.pending[id(mod)] = call

    def revision_forward(self, mod, args, kwargs):
        """A later training forward of a model estimated at step 1: counted until the optimizer's first step; at
        step 2's first forward, a call to estimate again when the loop runs otherwise than the line assumed."""
        rev = self.revisions[id(mod)]
        if rev.model() is not mod or not (mod.training and is_grad_enabled()):
            return
        if rev.k is None:
            rev.forwards += 1
            return
        del self.revisions[id(mod)]
        args, kwargs = _nones_by_name(mod, args, kwargs)
        # micro-batches are replayed as one batch of k: keyword tensors (a mask) need not have a batch dim
        if (rev.k, self.set_to_none) == (1, rev.set_to_none) or not args or _not_replayed(args, kwargs) or \
                rev.k > 1 and any(isinstance(v, _C.TensorBase) for v in kwargs.values()):
            return
        call = _Call(mod, args, kwargs)
        call.zero_grads, call.held = self.zero_grads, rev.held
        call.revision = (rev.k, self.set_to_none, rev.set_to_none)
        with self.lock:
            self.pending[id(mod)] = call

    @_never_fails
    def stepped(self, opt, args, kwargs):
        """An optimizer's step: the first after a model's step-1 estimate says how many forwards a step takes."""
        if not self.revisions or _estimator.busy.depth:
            return
        mine = {id(p) for g in opt.param_groups for p in g["params"]}
        for rev in list(self.revisions.values()):
            model = rev.model()
            if rev.k is None and model is not None and any(id(p) in mine for p in model.parameters()):
                rev.k = rev.forwards

    def zero_grad_called(self, set_to_none):
        """A zero_grad() ran: counted, so that the estimate knows whether the script calls it between its forward
        and its backward (then the last step's gradients are alive in the next forward) or elsewhere. The
        estimate's own calls, between its two steps on meta, are not the script's."""
        if _estimator.busy.depth:
            return
        self.zero_grads += 1
        self.set_to_none = bool(set_to_none)

    @_never_fails
    def post(self, mod, args, out):
        if self.broken or len(state.modules) != 1 or _estimator.busy.depth:
            return
        call = self.pending.get(id(mod))
        if call is not None and call.model() is mod and not call.outputs:
            found = tensors_in(out)
            call.outputs = [_Output(path, t) for path, t in found]
            call.nodes = [weakref.ref(t.grad_fn) for _, t in found if t.grad_fn is not None]
        elif isinstance(mod, _Loss):
            self.loss_called(mod, type(mod).__name__, args, {}, out)

    @_never_fails
    def loss_called(self, fn, name, args, kwargs, result):
        """A loss was computed: remember it for the model whose output it took."""
        with self.lock:
            calls = list(self.pending.values())
        for call in calls:
            if not call.outputs:
                continue
            targs = [_spec(a, call.outputs) for a in args]
            tkw = {k: _spec(v, call.outputs) for k, v in kwargs.items()}
            if any(t[0] == "output" for t in targs + list(tkw.values())):
                call.losses.append(_LossCall(fn, name, targs, tkw, result))
                return

    @_never_fails
    def backward_starting(self, tensors):
        if self.broken or not self.pending or _estimator.busy.depth:
            return
        root = tensors[0].grad_fn if tensors else None
        if root is None:
            return
        with self.lock:
            calls = list(self.pending.items())
        for key, call in calls:
            model = call.model()
            if model is None:
                with self.lock:
                    self.pending.pop(key, None)
                continue
            nodes = {id(n()) for n in call.nodes if n() is not None}
            if not nodes or not _reaches(root, nodes):
                continue
            with self.lock:
                self.pending.pop(key, None)
            self.done.add(model)
            self.report(model, call, tensors[0])

    @_never_fails
    def forward_oom(self, module):
        """An OutOfMemoryError escaped a root call: when it is a watched model's first training forward, the
        estimate is made now (the loss not seen yet: guessed), before the error goes up."""
        call = self.pending.get(id(module))
        if call is None or call.model() is not module or call.outputs or module in self.done:
            return
        with self.lock:
            self.pending.pop(id(module), None)
        self.done.add(module)
        self.report(module, call, None, note="its forward ran out of memory; ")

    # -- the estimate and its line --
    def report(self, model, call, loss, note=""):
        name = type(model).__name__
        try:
            # the estimate replays the script's forward on meta copies: what that prints or warns is not the
            # script's (a forward that prints its shapes printed them ~9 more times); side effects that are not
            # output (a global list appended to) still happen (--no-estimate runs none)
            with warning_filter("ignore"), contextlib.redirect_stdout(_Discard()), \
                    contextlib.redirect_stderr(_Discard()):
                line, remedies = self.estimate(model, call, loss, note)
        except Exception as e:  # the script's run matters more than its estimate
            print(f"gpumemnet run: step 1 of {name} could not be estimated: {type(e).__name__}: {e}",
                  file=self.out)
            if self.estimate_only:
                raise EstimateOnly(1) from None
            return
        print(line, file=self.out)
        for r in remedies:
            print(r, file=self.out)
        if call.revision is None and not self.estimate_only:
            self.revisions[id(model)] = _Revision(model, call.held, self.set_to_none)
        self.out.flush()
        self.estimated += 1
        if self.estimate_only:
            raise EstimateOnly(0)

    def estimate(self, model, call, loss_tensor, note=""):
        dev = call.device
        # A DistributedDataParallel model (its process group cannot be copied) is replayed as its module under
        # the estimate's own DDP wrapper, on the wrapper's world size and with its comm hook.
        model, world_size, comm_hook = _distributed.unwrap(model, None, None)
        dist = (world_size, 0, 0, comm_hook) if world_size is not None else (None, 0, None, None)
        opts, used = _optimizers_of(model), []
        losses = call.losses
        k, to_none, assumed = call.revision or (1, self.set_to_none, self.set_to_none)
        if call.revision is not None:  # what step 1's line assumed otherwise
            did = [f"accumulates {k} forward and backward passes per optimizer step"] if k > 1 else []
            if to_none != assumed:
                did.append("zeroes its gradients in place (zero_grad(set_to_none=False)): they stay alive through "
                           "the next forward" if not to_none else "drops its gradients (zero_grad())")
            note = f"revised at step 2: the script {' and '.join(did)}; " + note
        with _estimator._meta_turn:
            inputs = [_C.empty((shape[0] * k,) + shape[1:], dtype, "meta") for shape, dtype, _ in call.inputs]
            for i in call.grad_inputs:
                inputs[i].requires_grad = True
            kwargs = {k: _C.empty(e[1], e[2], "meta") if e[0] == "tensor" else e[1] for k, e in call.kwargs.items()}
            if loss_tensor is None:  # the forward did not finish: the loss is guessed
                target, loss_fn, loss_name = _guess_loss()
            else:
                target, loss_fn, loss_name = _loss_of(call, losses, loss_tensor)
            factory = _first_rebuilt(model, opts, used) if opts else False
            # The script's zero_grad() between this forward and its backward (a no-op in step 1) leaves the last
            # step's gradients alive through every later forward; before the forward or after the step, it does
            # not. Not seen yet (it may come after the step): the latter.
            with _factories_on_meta(dev), _estimator._caller_modes_off():
                est = _estimator._estimate(model, inputs, loss_fn=loss_fn, optimizer=factory, target=target,
                                           autocast=call.amp, device=dev,
                                           keep_outputs=call.outputs[0].ref() is not None if call.outputs else False,
                                           keep_loss=None if loss_tensor is None else _held_by_script(loss_tensor),
                                           zero_grad_to_none=to_none, accumulation_steps=k,
                                           zero_grad_late=self.zero_grads > call.zero_grads, target_as_is=True,
                                           input_kwargs=kwargs, no_target=loss_tensor is not None, dist=dist)
        if est.outside_tensors:
            note += _estimator.OUTSIDE_NOTE.format(n=est.outside_tensors) + "; "
        hooks = _estimator.hooks_left_out(model)
        if hooks:
            note += _estimator.HOOKS_NOTE.format(n=hooks) + "; "
        opt = used[0] if used else None
        capacity = self.cap or _stats.get_limit(dev) or _stats.capacity(dev)
        predicted = call.held + est.peak
        shapes = ", ".join([str(s) for s, _, _ in call.inputs] +
                           [f"{k}={e[1]}" for k, e in call.kwargs.items() if e[0] == "tensor"])
        wrapper = f" in DistributedDataParallel over {world_size} rank(s)" if world_size is not None else ""
        step = 1 if call.revision is None else 2
        what = (f"gpumemnet run: step {step} of {type(model).__name__}{wrapper} (input {shapes}, loss {loss_name}, "
                f"{type(opt).__name__ if opt is not None else 'no optimizer'}"
                f"{', autocast ' + str(call.amp).rsplit('.', 1)[-1] if call.amp is not None else ''}) on {dev}")
        fits = predicted <= capacity
        # held at the start + the steps' own peak, as the line's peak (est.steps_text counts the model and input)
        later = (f" from step {est.peak_step} on (step 1: {_fmt(call.held + est.first_step_peak)})"
                 if est.peak_step > 1 else "")
        line = (f"{what}: {note}peak {_fmt(predicted)} predicted ({predicted} bytes: {_fmt(call.held)} held at its "
                f"start + {_fmt(est.peak)} for the steps, reached in {est.peak_scope or '?'}{later}), capacity "
                f"{_fmt(capacity)}"
                f"{' (--cap)' if self.cap else ''}: " + ("fits" if fits else
                                                          f"does not fit ({_fmt(predicted - capacity)} over)"))
        # a revised line's remedies would plan the micro-batch: step 1's line gave them
        remedies = [] if fits or call.revision else self.remedies(model, call, est, loss_fn, target, factory,
                                                                 capacity)
        return line, remedies

    def remedies(self, model, call, est, loss_fn, target, factory, capacity):
        """plan()'s configurations, in the order it ranks them (fastest first), each checked against what the
        device has left for this model's step once everything else the process holds is counted."""
        # held at the start that is not the model, its batch, its optimizer's first state or DDP's buckets (each
        # configuration's total counts those again)
        besides = call.held - est.param_bytes - est.input_bytes - est.optimizer_init_bytes - est.comm_bytes
        budget = capacity - besides
        if len(call.inputs) != 1 or call.kwargs:
            return ["  (plan() needs one input of the parameters' dtype; it has none to offer here)"]
        shape, dtype, _ = call.inputs[0]
        if dtype != next(model.parameters())._dtype or len(shape) < 1:
            return ["  (plan() needs one input of the parameters' dtype; it has none to offer here)"]
        if budget <= 0:
            return [f"  the process holds {_fmt(besides)} besides this model and its batch: nothing is left for "
                    f"the step"]
        with _estimator._meta_turn:
            try:
                p = _planner.plan(model, shape[1:], loss_fn, factory or None, batch_size=shape[0], target=target,
                                  budget=budget)
            except ValueError as e:
                return [f"  plan(): {e}"]
        out = [f"  remedies ranked by plan() (fastest first; {_fmt(budget)} left for the model, its batch and the "
               f"step):"]
        for c, need, t in p.considered:
            ok = need <= budget and c == _planner._config(p)
            out.append(f"    - {_planner._describe(c)}: {_fmt(need) if need != float('inf') else 'too large'}"
                       f" predicted, time x{t:.2f}: " + ("fits" if ok else "does not fit"))
        out.append(f"  fits with {_planner._describe(_planner._config(p))} (gm.memory.plan(...).step(x, y, optimizer) "
                   f"runs it)")
        return out


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # gpumemnet's own files


def _held_by_script(t):
    """Whether the script's frame that called backward() holds tensor t in a variable (`loss = ...;
    loss.backward()`: the loss stays alive into the next forward) rather than as a temporary
    (`criterion(out, y).backward()`). That frame is the first one outside gpumemnet on this thread's stack."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return frame is not None and any(v is t for v in frame.f_locals.values())


def _factories_on_meta(dev):
    """While the step is estimated on meta: a tensor the script's forward makes with no device= (torch.zeros(n, d)
    for a GCN's sums, torch.arange(C) for a center loss) lands on meta, as in the real step it lands on the device
    the model is on when that is the default one; otherwise it would meet the meta tensors as a CPU tensor."""
    return _device("meta") if factory_device(None) == dev else contextlib.nullcontext()


def _reaches(root, ids):
    """Whether the graph from node `root` reaches a node whose id is in ids."""
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in ids:
            return True
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in getattr(node, "_edges", ()) or ():
            if e is not None and e[0] is not None:
                stack.append(e[0])
    return False


def _optimizers_of(model):
    """The optimizers holding the model's trainable parameters, best first: the most of them, and at equal
    counts one that can be rebuilt from parameter groups before a wrapper sharing its groups (Lightning's
    LightningOptimizer, opacus' DPOptimizer), whatever gc's order. Optimizers are found among the live objects
    (once per model): nothing in the optimizers has to know about run mode."""
    mine = {id(p) for p in model.parameters() if p.requires_grad}
    found = []
    for o in live_objects(Optimizer):
        n = sum(1 for g in o.param_groups for p in g["params"] if id(p) in mine)
        if n:
            found.append((-n, _is_wrapper(o), len(found), o))
    return [o for *_, o in sorted(found, key=lambda f: f[:3])]


def _is_wrapper(opt):
    """Whether opt's class takes something else than parameter groups to build: its __init__ is not an
    optimizer's own (a wrapper made by subclassing the optimizer's class), or it takes an optimizer, or arguments
    that are not among its defaults (DPOptimizer(optimizer, *, noise_multiplier, max_grad_norm, ...))."""
    owner = next((c for c in type(opt).__mro__ if "__init__" in c.__dict__), object)
    if not issubclass(owner, Optimizer):
        return True
    try:
        params = list(inspect.signature(owner.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    if not params or "optim" in params[0].name.lower():
        return True
    defaults = getattr(opt, "defaults", None) or {}
    return any(p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in defaults
               for p in params[1:])


def _first_rebuilt(model, opts, used):
    """A factory that rebuilds the first of opts (_optimizers_of's order) whose class takes its groups and
    defaults; one refusing them (a TypeError: a wrapper the ranking did not see as one) gives way to the next.
    The optimizer rebuilt is appended to `used`, for the line to name."""
    factories = [(o, _optimizer_factory(model, o)) for o in opts]

    def make(params):
        errors = []
        for o, f in factories:
            try:
                made = f(params)
            except TypeError as e:
                errors.append(f"{type(o).__name__}: {e}")
                continue
            used.append(o)
            return made
        raise TypeError("no optimizer of the model could be rebuilt over its meta copy: " + "; ".join(errors))
    return make


def _optimizer_factory(model, opt):
    """A factory of the same optimizer (class, groups and their hyper-parameters) over the meta copy's
    parameters, which come in model.parameters()' order; an offloading one offloads (offload is not among its
    defaults) and overlaps its gradient copies when the script's does (optim/_offload.py)."""
    index = {id(p): i for i, p in enumerate(model.parameters())}
    sig = inspect.signature(type(opt).__init__).parameters
    defaults = {k: v for k, v in opt.defaults.items() if k in sig}
    if getattr(opt, "offload", None) is not None and "offload" in sig:
        defaults["offload"] = opt.offload
    overlap = bool(getattr(opt, "_overlap_handles", None))

    def make(params):
        groups = []
        for g in opt.param_groups:
            ps = [params[index[id(p)]] for p in g["params"] if id(p) in index]
            if ps:
                groups.append(dict({k: v for k, v in g.items() if k != "params"}, params=ps))
        made = type(opt)(groups, **defaults)
        return made.overlap_grad_copies() if overlap else made
    return make


def _meta_module(mod):
    """A copy of a loss Module whose tensors (class weights...) are empty meta tensors."""
    memo = {}
    for m in mod.modules():
        for t in list(m._parameters.values()) + list(m._buffers.values()):
            if t is not None:
                memo[id(t)] = _C.empty(tuple(t.shape), t._dtype, "meta")
    _meta_attributes(mod, memo)
    return _deepcopy_rebound(mod, memo)


def _guess_loss():
    """(target, loss_fn, name) when the loss was not seen: the script's loss Module when it made exactly one (the
    estimate makes up its target: class indices, or a tensor like the output), else output.sum()."""
    losses = live_objects(_Loss)
    if len(losses) != 1:
        return None, None, "not seen (output.sum() instead)"
    fn = _meta_module(losses[0])
    return None, (lambda out, y: _summed(fn(out, y))), f"{type(losses[0]).__name__} (guessed: the only loss module)"


def _summed(loss):
    """A per-sample loss (reduction='none', which d2l's and the CIFAR speedruns' scripts reduce afterwards with
    .mean() or .sum()) summed for the estimate's backward: the same bytes as the script's reduction."""
    return loss.sum() if isinstance(loss, _C.TensorBase) and loss.numel() != 1 else loss


def _loss_of(call, losses, loss_tensor):
    """(target, loss_fn, name) for the estimate: the model's own output when backward() was called on it (a Hugging
    Face model's output.loss, out["loss"], a model that returns its loss), else the recorded loss replayed."""
    own = next((o for o in call.outputs if o.ref() is loss_tensor), None)
    if own is None:
        return _replay(losses, loss_tensor)
    path = own.path
    return None, (lambda out, y: _summed(_at(out, path))), _path_text(path)


def _replay(losses, loss_tensor):
    """(target, loss_fn, name) for the estimate: the recorded losses replayed on the meta output: the one backward()
    was called on, else all that carry gradients, summed (a multi-task step: `cross_entropy(a, y) + mse_loss(b, z)`;
    one alone, the last recorded). The first one's first tensor argument that is not the output stands as the
    target (made as the estimate's input); without a recorded loss, output.sum() (named so on the line)."""
    if not losses:
        return None, None, "not seen (output.sum() instead)"
    chosen = [loss for loss in losses if loss.result is not None and loss.result() is loss_tensor]
    if not chosen:
        chosen = [loss for loss in losses if loss.graded] or losses[-1:]
    target, first = _replayed(chosen[0], True)
    rest = [_replayed(loss, False)[1] for loss in chosen[1:]]

    def loss_fn(out, y):
        total = first(out, y)
        for fn in rest:
            total = total + fn(out, None)
        return total
    name = " + ".join(loss.name for loss in chosen)
    if len(chosen) > 1 or chosen[0].result is None or chosen[0].result() is not loss_tensor:
        name += " (backward from an expression of it)" if len(chosen) == 1 else " (backward from their sum)"
    return target, loss_fn, name


def _replayed(loss, with_target):
    """(target, fn(out, y)) replaying one recorded loss: with_target, its first tensor argument that is not the
    output is the estimate's target (made here, as an input). Another loss's tensors (its own target) are made
    here too, before the estimate counts: the script held them before its forward, in the line's "held at its
    start"."""
    fn = _meta_module(loss.fn) if isinstance(loss.fn, Module) else loss.fn
    entries = list(enumerate(loss.args)) + list(loss.kwargs.items())
    tkey = next((k for k, t in entries if t[0] == "tensor"), None) if with_target else None
    with category("input"):
        target = _meta_tensor(dict(entries)[tkey]) if tkey is not None else None
        made = {} if with_target else {k: _meta_tensor(t) for k, t in entries if t[0] == "tensor"}

    def value(entry, out, y, key):
        kind = entry[0]
        if kind == "output":
            return _viewed(_at(out, entry[1]), entry[2])
        if kind == "tensor":
            return y if key == tkey else made[key] if key in made else _meta_tensor(entry)
        return entry[1]

    def replay(out, y):
        args = [value(e, out, y, i) for i, e in enumerate(loss.args)]
        kwargs = {k: value(e, out, y, k) for k, e in loss.kwargs.items()}
        return _summed(fn(*args, **kwargs))
    return target, replay


# ---- turning it on -----------------------------------------------------------------------------------------------
_watcher = None
_LOSS_NAMES = ("cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div")
_wrapped = {}


def wrap_torch_attribute(name, value):
    """For the `torch` alias (gpumemnet.dropin): torch.nn.functional's loss functions, wrapped so that run mode
    sees which loss a script applies to its model's output. Everything else is returned as it is."""
    if _watcher is None or not name.startswith("torch.nn.functional.") or not callable(value):
        return value
    short = name.rsplit(".", 1)[1]
    if not (short.endswith("_loss") or short in _LOSS_NAMES):
        return value
    w = _wrapped.get(value)
    if w is None:
        def w(*args, _fn=value, _name=f"F.{short}", **kwargs):
            result = _fn(*args, **kwargs)
            watcher = _watcher
            if watcher is not None and watcher.pending and not _estimator.busy.depth:
                watcher.loss_called(_fn, _name, args, kwargs, result)
            return result
        w.__name__, w.__qualname__, w.__doc__, w.__wrapped__ = value.__name__, value.__qualname__, value.__doc__, value
        _wrapped[value] = w
    return w


def watch(cap=None, estimate_only=False, out=None):
    """Turn run mode's first-step estimates on (python -m gpumemnet run). cap: bytes, the capacity the estimate
    compares with (the caller also sets it as the device's limit); estimate_only: stop the script after the
    first estimate (EstimateOnly, a SystemExit with status 0)."""
    global _watcher
    unwatch()
    _watcher = w = _Watcher(cap, estimate_only, out or sys.stderr)
    hooks.register("backward_starting", w.backward_starting)
    hooks.register("zero_grad_called", w.zero_grad_called)
    explain = hooks.get("explain_oom")

    def explain_then_estimate(exc, module, args):
        if explain is not None:
            explain(exc, module, args)
        w.forward_oom(module)
    w.explain_oom = explain
    hooks.register("explain_oom", explain_then_estimate)
    return w


def unwatch():
    """Turn it off again; returns how many estimates were printed."""
    global _watcher
    w, _watcher = _watcher, None
    hooks.register("backward_starting", None)
    hooks.register("zero_grad_called", None)
    if w is None:
        return 0
    w.close()
    hooks.register("explain_oom", w.explain_oom)
    return w.estimated
