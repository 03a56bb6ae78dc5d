"""How the profiler records (layer 3): while at least one profile is recording, every public function of
gpumemnet._C (each op of the core: matmul, conv2d, the elementwise kernels, ...) is replaced by a timing wrapper,
and the originals are put back when the last recording stops; nothing is wrapped at other times, so an idle
profiler costs nothing.

A range (an op, a record_function, a module's forward, a ProfilerStep#N) is a _Frame on its thread's stack:
opened with the time, and where memory is profiled the bytes the allocator holds per device; closed with the
same. Its parent is the frame below it on the stack, so nesting is exact (self = total - children). A frame
belongs to the sessions that were recording when it opened; ranges still open when a session stops are
left out of it."""
import sys
import threading
import time

from .. import _C
from .._core import activation as _act, functions as _ops
from .._core.tensor import Tensor

__all__ = ["record_function"]

# _C's functions that are not ops: the allocator's own queries and settings (the profiler reads them itself),
# scope/category tags set by every module call, and the setup calls of the other subsystems.
_NOT_OPS = {"memory_allocated", "max_memory_allocated", "memory_reserved", "memory_stats", "memory_capacity",
            "reset_peak_memory_stats", "empty_cache", "set_limit", "get_limit", "set_scope", "get_scope",
            "set_category", "get_category", "get_allocator", "set_allocator", "get_fallback", "set_fallback",
            "get_history", "history_enabled", "record_history", "label_unnamed", "get_num_threads",
            "set_num_threads", "manual_seed", "get_rng_state", "set_rng_state", "set_meta_capacity",
            "get_conv_workspace_limit", "set_conv_workspace_limit"}
# the private functions that do work worth seeing: the backward walk, device copies
_PRIVATE_OPS = {"_run_backward": "autograd::engine::backward", "_to_device": "gm::to", "_copy_async": "gm::copy_",
                "_pin_memory": "gm::pin_memory"}
# the generic kernels take an op code first: named after the op (gm::add, gm::exp, gm::sum)
_CODED = {
    "binary": ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"),
    "unary": ("neg", "exp", "log", "sqrt", "abs", "sign", "logical_not", "round", "floor", "ceil"),
    "reduce": ("sum", "mean", "amax", "amin", "prod"),
    "activation": ("relu", "leaky_relu", "sigmoid", "tanh", "gelu", "gelu_tanh", "silu", "hardswish", "hardsigmoid",
                   "mish", "hardtanh", "elu", "softplus"),
}
_CODED["activation_backward"] = tuple(n + "_backward" for n in _CODED["activation"])
_SLOTS = {"__add__": "add", "__radd__": "add", "__sub__": "sub", "__rsub__": "sub", "__mul__": "mul",
          "__rmul__": "mul", "__truediv__": "div", "__rtruediv__": "div"}
_SLOT_CODES = {"add": _ops.ADD, "sub": _ops.SUB, "mul": _ops.MUL, "div": _ops.DIV}
# the tables above follow the core's codes
assert _ops.ADD == 0 and _ops.NEG == 0 and _ops.SUM == 0 and _ops.GE == 12 and _act.RELU == 0 and _act.SOFTPLUS == 12


class _Frame:
    __slots__ = ("name", "parent", "sessions", "start", "end", "mem0", "mem1", "shapes", "stack", "flops",
                 "user", "thread", "seq", "slot")

    def __init__(self, name, parent, sessions, user, seq):
        self.name, self.parent, self.sessions, self.user, self.seq = name, parent, sessions, user, seq
        self.thread = threading.get_native_id()
        self.shapes = self.stack = None
        self.flops = 0
        self.mem0 = self.mem1 = None
        self.end = None
        self.slot = False


class _Recorder:
    """The one recorder of the process: the sessions recording now, the wrappers, the per-thread stacks."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sessions = ()          # recording now (a tuple, replaced whole: read without the lock)
        self.local = threading.local()
        self.originals = {}         # name -> _C's function, while wrapped
        self.slots = []             # the operators set on Tensor, while wrapped
        self.module_hooks = None
        self.seq = 0

    # ---- sessions --------------------------------------------------------------------------------------------
    def start(self, session):
        with self.lock:
            if not self.sessions:
                self._wrap()
            self.sessions = self.sessions + (session,)
            if session.with_modules and self.module_hooks is None:
                self._hook_modules()

    def stop(self, session):
        with self.lock:
            self.sessions = tuple(s for s in self.sessions if s is not session)
            if not any(s.with_modules for s in self.sessions) and self.module_hooks is not None:
                for h in self.module_hooks:
                    h.remove()
                self.module_hooks = None
            if not self.sessions:
                self._unwrap()

    # ---- frames ----------------------------------------------------------------------------------------------
    def stack(self):
        s = getattr(self.local, "stack", None)
        if s is None:
            s = self.local.stack = []
        return s

    def open(self, name, user=False, args=None, skip=2):
        """A new frame on this thread's stack, or None when nothing records."""
        sessions = self.sessions
        if not sessions:
            return None
        stack = self.stack()
        self.seq += 1
        f = _Frame(name, stack[-1] if stack else None, sessions, user, self.seq)
        if args is not None and any(s.record_shapes for s in sessions):
            f.shapes = [list(a.shape) if isinstance(a, _C.TensorBase) else [] for a in args]
        if any(s.with_stack for s in sessions):
            f.stack = _user_stack(skip)
        devices = _memory_devices(sessions)
        if devices:
            f.mem0 = tuple(_C.memory_allocated(d) for d in devices)
        stack.append(f)
        f.start = time.perf_counter_ns()
        return f

    def close(self, f):
        f.end = time.perf_counter_ns()
        devices = _memory_devices(f.sessions)
        if devices and f.mem0 is not None:
            f.mem1 = tuple(_C.memory_allocated(d) for d in devices)
        stack = self.stack()
        # frames left open above this one (a forward that raised before its module's hook closed it) end here
        while stack:
            top = stack.pop()
            if top is f:
                break
            top.end = f.end
            top.mem1 = f.mem1 if top.sessions == f.sessions else None  # the same devices measured, or none
            self._deliver(top)
        self._deliver(f)

    def _deliver(self, f):
        for s in f.sessions:
            if s.recording:
                s.frames.append(f)

    # ---- the wrappers ----------------------------------------------------------------------------------------
    def _wrap(self):
        for name in dir(_C):
            fn = getattr(_C, name)
            if not callable(fn) or isinstance(fn, type) or name.startswith("__") or name in _NOT_OPS:
                continue
            if name.startswith("_") and name not in _PRIVATE_OPS:
                continue
            if name.startswith("dist_") or name.startswith("_cuda"):
                continue
            self.originals[name] = fn
            setattr(_C, name, self._timed(name, fn))

        # the arithmetic operators are C slots of TensorBase (a + b never looks up _C.binary): timed through
        # Tensor, which the slots of a Python class call; deleting the attribute gives the C slots back
        for name, op in _SLOTS.items():
            if name not in vars(Tensor):
                setattr(Tensor, name, self._timed(op, getattr(_C.TensorBase, name), slot=True))
                self.slots.append(name)

    def _unwrap(self):
        for name, fn in self.originals.items():
            setattr(_C, name, fn)
        self.originals = {}
        for name in self.slots:
            delattr(Tensor, name)
        self.slots = []

    def _timed(self, name, fn, slot=False):
        """fn timed as the range gm::<name> (an operator slot: as gm::<op>, the op it computes)."""
        label = _PRIVATE_OPS.get(name, "gm::" + name)
        coded = _CODED.get(name)
        flops_of = _FLOPS.get("binary" if slot else name)
        rec = self

        def timed(*args, **kwargs):
            if not rec.sessions:
                return fn(*args, **kwargs)
            op = label
            shape_args = args
            if coded is not None and args and isinstance(args[0], int) and 0 <= args[0] < len(coded):
                op, shape_args = "gm::" + coded[args[0]], args[1:]
                stack = rec.stack()
                if stack and stack[-1].name == op and stack[-1].slot:
                    return fn(*args, **kwargs)  # the kernel of the operator being timed: one range, not two
            f = rec.open(op, args=shape_args)
            if f is None:  # the last recording stopped meanwhile (another thread)
                return fn(*args, **kwargs)
            f.slot = slot
            try:
                out = fn(*args, **kwargs)
            finally:
                rec.close(f)
            if flops_of is not None and any(s.with_flops for s in f.sessions):
                f.flops = flops_of((_SLOT_CODES[name],) + args if slot else args, out)
            return out

        timed.__name__ = getattr(fn, "__name__", name)
        timed.__doc__ = getattr(fn, "__doc__", None)
        timed.__wrapped__ = fn
        return timed

    # ---- module ranges (with_modules) ------------------------------------------------------------------------
    def _hook_modules(self):
        from ..nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
        local = self.local

        def pre(module, args):
            path = getattr(module, "_path", None)  # "layer1.0.conv1", set by Module.__call__ before the hooks
            f = self.open(f"nn.Module: {type(module).__name__}" + (f" {path}" if path else ""), skip=3)
            if f is not None:
                if not hasattr(local, "modules"):
                    local.modules = []
                local.modules.append((module, f))

        def post(module, args, out):
            mods = getattr(local, "modules", None)
            # the entries of modules whose forward raised (no post hook ran) are dropped on the way down
            while mods:
                m, f = mods.pop()
                if m is module:
                    if f in self.stack():
                        self.close(f)
                    break

        self.module_hooks = (register_module_forward_pre_hook(pre), register_module_forward_hook(post))


_recorder = _Recorder()


def _memory_devices(sessions):
    devices = []
    for s in sessions:
        for d in s.memory_devices:
            if d not in devices:
                devices.append(d)
    return tuple(devices)


_OWN = __file__.rsplit("/", 2)[0]  # python/gpumemnet: frames inside the library are not the user's


def _user_stack(skip):
    """'file.py(12): fn' for the user's frames of the current stack, innermost first (read from the frames
    themselves: no source lines are loaded, so a stack costs little per op)."""
    out = []
    frame = sys._getframe(skip)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_OWN):
            out.append(f"{code.co_filename}({frame.f_lineno}): {code.co_name}")
        frame = frame.f_back
    return out


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _matmul_flops(args, out):
    # a multiply and an add per element of the output and step of the inner dimension (PyTorch's count for mm)
    a = args[0]
    return 2 * _numel(out.shape) * (a.shape[-1] if a.ndim else 1)


def _linear_flops(args, out):
    return 2 * _numel(out.shape) * args[0].shape[-1]


def _conv2d_flops(args, out):
    w = args[1]
    return 2 * _numel(out.shape) * _numel(w.shape[1:])


def _elementwise_flops(args, out):
    # the multiply-like and add-like kernels count one FLOP per output element, as PyTorch's counter does
    return _numel(out.shape) if args[0] in (_ops.ADD, _ops.SUB, _ops.MUL, _ops.DIV) and \
        isinstance(out, _C.TensorBase) else 0


_FLOPS = {"matmul": _matmul_flops, "linear": _linear_flops, "conv2d": _conv2d_flops, "binary": _elementwise_flops}


class record_function:
    """A named range in the profile (its row in key_averages' table, its slice in the Chrome trace), as a
    context manager or a decorator. Costs nothing while no profile records.

        with record_function("data"):
            x = next(it)

        @record_function("step")
        def step(): ...
    """

    def __init__(self, name, args=None):
        self.name, self.args = name, args
        self._frames = []

    def __enter__(self):
        # checked on entering, as PyTorch does (its RuntimeError; ArgumentTypeError is a TypeError too)
        if not isinstance(self.name, str):
            raise _C.ArgumentTypeError(f"record_function: name must be a str, got {type(self.name).__name__} "
                                       f"({self.name!r})")
        if self.args is not None and not isinstance(self.args, str):
            raise _C.ArgumentTypeError(f"record_function: args must be a str or None, got "
                                       f"{type(self.args).__name__} ({self.args!r})")
        self._frames.append(_recorder.open(self.name, user=True))
        return self

    def __exit__(self, *exc):
        f = self._frames.pop() if self._frames else None
        if f is not None:
            _recorder.close(f)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def ranged(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return ranged
