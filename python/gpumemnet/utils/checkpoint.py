"""Activation checkpointing: keep a segment's inputs, drop what its ops save for backward, recompute it when
backward first needs it.

Non-reentrant, built on the saved-tensor hooks (gm.autograd.graph.saved_tensors_hooks): during the forward
every tensor an op saves is replaced by a placeholder (its position); the first unpack in backward re-runs
the function with the Philox state (seed, offset) of the original forward, so dropout masks and results are
identical, and hands each node the tensor recomputed at the same position. BatchNorm's running statistics are
updated again during the recomputation, as both of PyTorch's checkpoint forms do (scripts that compare or resume
across the two libraries get the same buffers), and the autocast state of the forward is replayed. The replay saves and sets the global generator's state only where this thread draws from it: inside an
estimate (whose meta ops draw nothing) it is left alone, so a trainer in another thread is not disturbed.
No input needs requires_grad, inputs may be nested in lists/tuples/dicts, and gradients can be taken
with backward() or gm.autograd.grad.

offload_sequential is the other way to keep a layer's activations off the device: run it with its saved tensors
in host memory (gm.autograd.graph.save_on_cpu), chosen layer by layer, so that only the largest go across.
"""
import contextlib
import enum
import sys
import types
import warnings

from .._core import autocast as _autocast
from .._core import autograd
from .._core.offload import save_on_cpu
from .._core.random import get_rng_state, set_rng_state
from .. import _C
from .._core.state import state
from .._core.tensor import Tensor
from ._pytree import tree_leaves

__all__ = ["checkpoint", "checkpoint_sequential", "offload_sequential", "in_recomputation", "get_device_states",
           "set_device_states", "noop_context_fn", "CheckpointPolicy", "create_selective_checkpoint_contexts"]

def in_recomputation():
    """True while a checkpointed segment is being recomputed for backward (ops with side effects, like
    BatchNorm's running-statistics update, skip them then)."""
    return state.recomputing > 0


def _has_tensor(obj):
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_tensor(o) for o in obj)
    if isinstance(obj, dict):
        return any(_has_tensor(o) for o in obj.values())
    return False


def _detached(obj):
    """Inputs for the recomputation: the same values, cut from the outer graph (its nodes are already there)."""
    if isinstance(obj, Tensor):
        d = obj.detach()
        if obj.requires_grad:
            d.requires_grad = True  # so the ops that save it record (and save) as in the forward
        return d
    if isinstance(obj, (list, tuple)):
        return type(obj)(_detached(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _detached(v) for k, v in obj.items()}
    return obj


class _Frame:
    """One checkpointed call: what is needed to recompute it, and the tensors recomputed for backward."""

    def __init__(self, fn, args, kwargs, rng_state, autocast_state, context):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.context = context  # the recomputation's (context_fn's second)
        self.rng_state = rng_state
        self.touches_rng = state.meta_draws_random  # False inside an estimate (see the module's docstring)
        self.autocast_state = autocast_state
        self.count = 0          # placeholders handed out in the forward
        self.recomputed = {}    # position -> tensor, emptied as backward consumes them
        self.versions = None    # the inputs' versions after the forward: see note_versions

    def pack(self, _tensor):
        # The tensor is dropped here: that is the whole saving. Only its position is kept.
        k = self.count
        self.count += 1
        return k

    def unpack(self, k):
        if k not in self.recomputed:
            self._recompute()
        t = self.recomputed.pop(k, None)
        if t is None:
            raise RuntimeError(
                "checkpoint: the recomputation saved fewer tensors than the forward did; the function must "
                "run the same ops on recomputation (no branching on global state or data-dependent control "
                "flow that changes between the two runs)")
        return t

    def note_versions(self):
        """The positional tensor inputs' versions once the forward ran: one written in place before backward would
        be recomputed from its new values (silently wrong gradients); PyTorch's checkpoint, which saves its inputs,
        refuses. (A tuple of ints, no walk of nested inputs: the estimate's byte-exact replay of checkpointed steps
        is sensitive to when the garbage collector runs, and a flattening here moved it.)"""
        self.versions = tuple(a._version if isinstance(a, Tensor) else None for a in self.args)

    def _recompute(self):
        for i, (t, version) in enumerate(zip(self.args, self.versions or ())):
            if version is not None and t._version != version:  # (PyTorch's checkpoint saves its inputs: its check)
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: checkpoint's input {i} (shape {tuple(t.shape)}) is at version {t._version}; expected "
                    f"version {version} instead. The segment would be recomputed from the new values; clone() the "
                    f"input before writing into it")
        saved = []

        def keep(t):
            saved.append(t)
            return t

        current = _C.get_rng_state() if self.touches_rng else None
        state.recomputing += 1
        try:
            if self.rng_state is not None:
                _C.set_rng_state(*self.rng_state)
            with autograd.enable_grad(), _autocast._replay(self.autocast_state), self.context, \
                    autograd.graph.saved_tensors_hooks(keep, _identity):
                self.fn(*_detached(self.args), **_detached(self.kwargs))
        finally:
            state.recomputing -= 1
            if current is not None:
                _C.set_rng_state(*current)
        if len(saved) != self.count:
            raise RuntimeError(
                f"checkpoint: the forward saved {self.count} tensors for backward but the recomputation saved "
                f"{len(saved)}; the function must run the same ops both times")
        self.recomputed = dict(enumerate(saved))


def get_device_states(*args):
    """PyTorch's: the index of the device of each tensor in args that is not on the CPU or meta, and each one's
    random state (sentence-transformers' GradCache saves them around its recomputation). gpumemnet's generator is
    one stream for every device (_core/random.py), so each state is that stream's."""
    ids = [t.get_device() for t in tree_leaves(args)
           if isinstance(t, Tensor) and t.device.type not in ("cpu", "meta")]
    return ids, [get_rng_state() for _ in ids]


def set_device_states(devices, states, *, device_type=None):
    """Restore states that get_device_states gave (the one stream's, so the last one is what counts)."""
    if device_type == "meta":
        return
    for _, s in zip(devices, states):
        set_rng_state(s)


def _identity(x):
    return x


_REENTRANT_DEFAULT = ("the use_reentrant parameter should be passed explicitly. In a future release, calling "
                      "checkpoint without use_reentrant will raise an exception. use_reentrant=False is recommended, "
                      "but if you need to preserve the current default behavior, you can pass use_reentrant=True. "
                      "Refer to docs for more details on the differences between the two variants.")


def noop_context_fn():
    """checkpoint's default context_fn: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class CheckpointPolicy(enum.Enum):
    """PyTorch's per-op choices of selective checkpointing (create_selective_checkpoint_contexts)."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """context_fn for checkpoint(..., use_reentrant=False, context_fn=partial(this, policy)). PyTorch's policy
    names ATen operator overloads, which gpumemnet's ops are not: here every op of the segment is recomputed (a
    warning says so once). The gradients are the same; the memory saved is the most a policy could save, and the
    recomputation the longest."""
    if not (callable(policy_fn_or_list) or isinstance(policy_fn_or_list, list)):
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    warnings.warn("create_selective_checkpoint_contexts: gpumemnet recomputes every op of the segment (the policy "
                  "names ATen operators, which gpumemnet's ops are not); gradients are unchanged", UserWarning,
                  stacklevel=3)  # checkpoint() calls context_fn: the warning names the user's checkpoint line
    return noop_context_fn()


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, context_fn=noop_context_fn,
               determinism_check="default", debug=False, early_stop=True, respect_saved_tensors_hooks=None, **kwargs):
    """Run function(*args, **kwargs) keeping none of the tensors its ops save for backward; they are recomputed
    when backward needs them. Costs one extra forward of the segment; saves its activations.

    use_reentrant=True runs the same non-reentrant mechanism with the reentrant form's visible rules, as PyTorch
    has them: no keyword arguments, and when no input tensor requires grad the output does not either (a warning
    says the segment's parameters get no gradient). Left out, it is PyTorch's default, the reentrant form, with
    PyTorch's warning to pass it. context_fn() gives two context managers: the forward runs in the first, the
    recomputation in the second. determinism_check, debug and early_stop are PyTorch's options of its
    non-reentrant form: the recomputation here always checks that it saved as many tensors as the forward and stops
    with the last one, and has no debug log."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: " + _REENTRANT_DEFAULT, stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug is not False or respect_saved_tensors_hooks is not None:
            raise ValueError("Passing `context_fn`, `debug`, or `respect_saved_tensors_hooks` is only supported "
                             "when use_reentrant=False.")
        if not any(isinstance(a, _C.TensorBase) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning,
                          stacklevel=2)
            with autograd.no_grad():
                return function(*args)
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    forward_ctx, recompute_ctx = context_fn()
    rng = _C.get_rng_state() if preserve_rng_state and state.meta_draws_random else None
    frame = _Frame(function, args, kwargs, rng, _autocast._capture(), recompute_ctx)
    with forward_ctx, autograd.graph.saved_tensors_hooks(frame.pack, frame.unpack):
        out = function(*args, **kwargs)
    frame.note_versions()
    if not _has_tensor(out):
        raise TypeError(f"checkpoint: the function returned {type(out).__name__}, not a tensor (or a "
                        f"list/tuple/dict holding one); there is nothing to differentiate through")
    return out


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Split a Sequential (or a list of modules/functions) into `segments` consecutive runs; checkpoint every
    run but the last (which backward needs at once anyway), as torch.utils.checkpoint does. PyTorch's signature:
    preserve_rng_state comes as a keyword; use_reentrant left out is the reentrant form, with PyTorch's warning."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: " + _REENTRANT_DEFAULT, stacklevel=2)
        use_reentrant = True
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    mods = list(functions.children()) if hasattr(functions, "children") else list(functions)
    n = len(mods)
    if isinstance(segments, bool) or not isinstance(segments, int):
        raise TypeError(f"checkpoint_sequential: segments must be an int, got {type(segments).__name__}")
    if not 1 <= segments <= n:
        raise ValueError(f"checkpoint_sequential: segments must be between 1 and the number of modules ({n}), "
                         f"got {segments}")
    size = n // segments

    def run(lo, hi):
        def segment(x):
            for m in mods[lo:hi]:
                x = m(x)
            return x
        return segment

    start = 0
    for s in range(segments - 1):
        end = start + size
        input = checkpoint(run(start, end), input, preserve_rng_state=preserve_rng_state,
                           use_reentrant=use_reentrant)
        start = end
    return run(start, n)(input)


def offload_sequential(functions, input, offload, pin_memory=False):
    """Run a Sequential (or a list of modules/functions) on `input`, keeping the tensors that the chosen layers
    save for backward in host memory (save_on_cpu(pin_memory)) and the rest on the device. `offload` chooses
    the layers: a collection of child indices (ints) and/or child names (str, as in named_children()), or a
    predicate module -> bool. Gradients are those of the plain run; what the chosen layers kept moves to the
    host, and comes back, one tensor at a time, when backward reaches them."""
    if hasattr(functions, "named_children"):
        named = list(functions.named_children())
    else:
        named = [(str(i), m) for i, m in enumerate(functions)]
    if callable(offload) and not isinstance(offload, (list, tuple, set, frozenset)):
        chosen = {i for i, (_, m) in enumerate(named) if offload(m)}
    else:
        if isinstance(offload, (str, int)):
            raise TypeError(f"offload_sequential: offload must be a collection of child indices or names, or a "
                            f"predicate, got {offload!r} (wrap a single one in a list)")
        names = {n: i for i, (n, _) in enumerate(named)}
        chosen = set()
        for o in offload:
            if isinstance(o, bool) or not isinstance(o, (int, str)):
                raise TypeError(f"offload_sequential: offload holds {o!r}; expected child indices (int) or names "
                                f"(str)")
            if isinstance(o, int):
                if not -len(named) <= o < len(named):
                    raise IndexError(f"offload_sequential: index {o} out of range for {len(named)} children")
                chosen.add(o % len(named))
            elif o not in names:
                raise ValueError(f"offload_sequential: no child named {o!r}; the children are "
                                 f"{[n for n, _ in named]}")
            else:
                chosen.add(names[o])
    x = input
    for i, (_, m) in enumerate(named):
        if i in chosen:
            with save_on_cpu(pin_memory=pin_memory):
                x = m(x)
        else:
            x = m(x)
    return x


class _CallableModule(types.ModuleType):
    """gm.utils.checkpoint(fn, *args) works (DESIGN.md), and so does torch's spelling
    gm.utils.checkpoint.checkpoint(fn, *args)."""

    def __call__(self, function, *args, **kwargs):
        return checkpoint(function, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
