"""Module: the base of every layer — registration of parameters, buffers and submodules, traversal, train/eval,
device/dtype moves, state_dict, PyTorch's repr, and forward calls tagged with an allocator scope.

Every call of a module runs its forward under the allocator scope "<path> forward" (e.g. "features.3 forward"),
so that memory statistics, the history and OutOfMemoryError say which layer allocated what. Paths are the
names of named_modules() seen from the root: they are computed once, the first time the root is called (a
module added later learns its path from its parent on its own first call)."""
import itertools
import threading
import warnings
import weakref
from collections import OrderedDict, namedtuple

from ... import _C
from ..._core import hooks
from ..._core.autograd import no_grad
from ..._core.state import state
from ..._core.complex import ComplexTensor
from ..._core.dtype import as_dtype, device_str
from ..parameter import Buffer, Parameter
from .module_more import ModuleMore
from . import _hooks
from ._hooks import (_global_all, _global_hooks, _global_pre_hooks, add_hook, call_with_hooks,  # noqa: F401
                     register_module_backward_hook, register_module_forward_hook, register_module_forward_pre_hook,
                     register_module_full_backward_hook, register_module_full_backward_pre_hook)

__all__ = ["Module", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_backward_hook", "register_module_full_backward_pre_hook",
           "register_module_full_backward_hook"]


_EXTRA_STATE_KEY_SUFFIX = "_extra_state"  # PyTorch's name for it (Hugging Face's checkpoint loading reads it)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns; printed as PyTorch prints it when both lists are empty."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


IncompatibleKeys = _IncompatibleKeys  # gpumemnet's earlier name

# Copies load_state_dict defers until every check passed (per thread): _load_from_state_dict adds to the list.
_loading = threading.local()


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module(ModuleMore):
    """Base class of all layers. Subclasses call super().__init__() first, assign Parameters, Modules and
    buffers (register_buffer) as attributes, and define forward()."""

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        self._init_hook_lists()
        object.__setattr__(self, "_path", None)   # "features.3", set on the first call
        object.__setattr__(self, "_scope", None)  # "features.3 forward"

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- calling ---------------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        scope = self._scope
        if scope is None:
            scope = self._resolve_paths()
        prev = _C.set_scope(scope)
        stack = state.modules  # per thread; autograd names saved activations after stack[-1]
        if not stack and len(args) == 1 and isinstance(args[0], _C.TensorBase):
            # a root call: an OOM later in backward or the optimizer step is explained for this model and an
            # input of this shape (held weakly and by shape: nothing stays alive for it)
            state.last_root = (weakref.ref(self), tuple(args[0].shape))
        stack.append(self)
        try:
            # one test for every kind of hook (_hooks.refresh_has_hooks): a module without any pays nothing more
            if self._has_hooks or _global_all:
                return call_with_hooks(self, args, kwargs)
            return self.forward(*args, **kwargs)
        except _C.OutOfMemoryError as e:
            if len(stack) == 1:  # the outermost call: the model and its input are known, say what would fit
                explain = hooks.get("explain_oom")  # gpumemnet.memory's, registered when it is imported
                if explain is not None:
                    explain(e, self, args)
            raise
        finally:
            stack.pop()
            _C.set_scope(prev)

    def _resolve_paths(self):
        """Name this module and everything under it, from the running parent if it holds us as a child (a module
        added after the root's first call), else as a root. Parameters and buffers get their full names too
        (`_name`, read by memory reports: "fc1.weight")."""
        prefix = ""
        stack = state.modules
        if stack:
            parent = stack[-1]
            for name, child in parent._modules.items():
                if child is self:
                    prefix = f"{parent._path}.{name}" if parent._path else name
                    break
        for path, m in self.named_modules(prefix=prefix):
            object.__setattr__(m, "_path", path)
            # The root has no path of its own: its class name says what ran.
            object.__setattr__(m, "_scope", f"{path or type(m).__name__} forward")
        for name, t in itertools.chain(self.named_parameters(prefix=prefix), self.named_buffers(prefix=prefix)):
            t._name = name
        return self._scope

    # ---- hooks ------------------------------------------------------------------------------------------
    # Lists of hooks (_hooks.py says what an entry is); each register_* returns a handle with remove().
    _version = 1  # state_dict's local_metadata["version"] (PyTorch's: modules that changed their state raise it)

    def _init_hook_lists(self):
        object.__setattr__(self, "_is_full_backward_hook", None)  # None until a backward hook says which kind
        _hooks.new_hook_lists(self)  # (and _has_hooks: whether a call must run hooks)

    def __setstate__(self, d):
        # a module pickled before these lists existed gets empty ones
        self.__dict__.update(d)
        self.__dict__.setdefault("_is_full_backward_hook", None)
        for name in _hooks.CONTAINERS:
            if name not in self.__dict__:
                object.__setattr__(self, name, _hooks.HookList())
        for name in _hooks.CONTAINERS:
            _hooks.adopt(self, name)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (a non-tuple is wrapped in one). with_kwargs: hook(module, args,
        kwargs) -> None or (new_args, new_kwargs). prepend: before this module's other pre-hooks (global ones still
        run first)."""
        return add_hook((self._forward_pre_hooks,), hook, "register_forward_pre_hook", prepend, with_kwargs,
                        owner=self)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) -> None or a new output; with_kwargs: hook(module, args, kwargs, output).
        always_call: run it even when forward (or an earlier hook) raised, with output None if there was none."""
        return add_hook((self._forward_hooks,), hook, "register_forward_hook", prepend, with_kwargs, always_call,
                        owner=self)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output (a tuple as long), when the gradients with respect
        to the module's outputs are computed; entries are None for non-tensor outputs and outputs that got none."""
        return add_hook((self._backward_pre_hooks,), hook, "register_full_backward_pre_hook", prepend, owner=self)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input (a tuple as long), once the gradients
        with respect to the module's positional inputs are computed. grad_input has an entry per positional argument:
        None for non-tensors, zeros for tensors that do not require grad or got no gradient (as PyTorch). When no
        input requires grad the hook fires with the outputs' gradients and grad_input all None (and must return
        None). The forward sees, and the caller gets, new tensor objects on the same memory (PyTorch's views)."""
        if self._is_full_backward_hook is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        object.__setattr__(self, "_is_full_backward_hook", True)
        return add_hook((self._backward_hooks,), hook, "register_full_backward_hook", prepend, owner=self)

    def register_backward_hook(self, hook):
        """Deprecated, as in PyTorch. PyTorch hooks the grad_fn of the output (grad_input are the gradients of that
        last autograd node's inputs, e.g. addmm's for Linear), which gpumemnet's engine cannot do (its nodes have no
        post-hooks), so here it is the full backward hook, with a FutureWarning saying so. The two kinds still do not
        mix on one module, as in PyTorch."""
        if self._is_full_backward_hook is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        object.__setattr__(self, "_is_full_backward_hook", False)
        _hooks._warn_legacy("register_backward_hook")
        return add_hook((self._backward_hooks,), hook, "register_backward_hook", owner=self)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars) -> None, before state_dict() collects this module's state."""
        return add_hook((self._state_dict_pre_hooks,), hook, "register_state_dict_pre_hook")

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, after state_dict() collected this module and its
        children; it may change state_dict in place (returning anything else is an error, as in PyTorch)."""
        hook._from_public_api = True  # PyTorch's mark: state_dict() refuses a return value from these
        return add_hook((self._state_dict_hooks,), hook, "register_state_dict_post_hook")

    def _register_state_dict_hook(self, hook):
        """The older form: a new dict the hook returns replaces the state dict (as PyTorch, this is respected where
        state_dict() was called on the module itself; for a child, the parent goes on with its own dict)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was previously "
                               "registered via register_state_dict_post_hook")
        return add_hook((self._state_dict_hooks,), hook, "_register_state_dict_hook")

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """hook([module,] state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        before this module's keys are read from state_dict (its copy, which the hook may change, e.g. rename keys
        of an old checkpoint)."""
        if not callable(hook):
            raise TypeError(f"register_load_state_dict_pre_hook: hook must be callable, got {type(hook).__name__}")
        entry = _hooks.WithModule(hook, self) if with_module else hook
        return add_hook((self._load_state_dict_pre_hooks,), entry, "register_load_state_dict_pre_hook")

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, after this module and its children were loaded; it may change
        incompatible_keys.missing_keys / unexpected_keys in place, which load_state_dict(strict=True) then judges."""
        return add_hook((self._load_state_dict_post_hooks,), hook, "register_load_state_dict_post_hook")

    # ---- registration -----------------------------------------------------------------------------------
    def _check_name(self, name, kind):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name must not contain "." (got {name})')
        if name == "":
            raise KeyError(f"{kind} name must not be empty")

    def register_parameter(self, name, param):
        """Add a parameter (a Parameter, or None for an absent one such as bias=False)."""
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(gpumemnet.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"cannot assign non-leaf Tensor to parameter '{name}'; make it a leaf first, e.g. "
                             f"Parameter(t.detach())")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a tensor that is state but not a parameter (BatchNorm's running_mean). Persistent buffers are part
        of state_dict."""
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, (_C.TensorBase, ComplexTensor)):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(gpumemnet Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name):
        # Only reached when normal lookup fails: parameters, buffers and submodules live in their dicts.
        d = self.__dict__
        if "_parameters" in d:
            for table in ("_parameters", "_buffers", "_modules"):
                t = d[table]
                if name in t:
                    return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if value.__class__ is ComplexTensor and value._r._is_param and params is not None:
            # nn.Parameter of a complex tensor (FNO's spectral weights): its real (..., 2) Parameter is what
            # parameters(), the optimizers and state_dict see; the attribute gives the complex view of it
            self.__setattr__(name, value._r)
            d[name] = value
            return
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            for t in (d["_buffers"], d["_modules"]):
                t.pop(name, None)
            d.pop(name, None)
            d["_non_persistent_buffers_set"].discard(name)
            self.register_parameter(name, value)
        elif isinstance(value, Buffer) and params is not None:  # nn.Buffer(...): registered as a buffer
            params.pop(name, None)
            d["_modules"].pop(name, None)
            self.register_buffer(name, value, persistent=value.persistent)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(gpumemnet.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            params.pop(name, None)
            d["_buffers"].pop(name, None)
            d["_non_persistent_buffers_set"].discard(name)
            d.pop(name, None)
            d["_modules"][name] = value
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(gpumemnet.nn.Module or None expected)")
            d["_modules"][name] = value
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, (_C.TensorBase, ComplexTensor)):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(gpumemnet Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)
            if name in _hooks.CONTAINERS:  # a dict of hooks set by hand (model._forward_hooks = OrderedDict())
                _hooks.adopt(self, name)

    def __delattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if name in d.get(table, ()):
                del d[table][name]
                d["_non_persistent_buffers_set"].discard(name)
                d.pop(name, None)  # a complex parameter's view
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---- traversal ---------------------------------------------------------------------------------------
    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else \
            [(prefix, self)]
        for mod_prefix, mod in mods:
            for k, v in get(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, parameter) pairs; a parameter shared by several modules is listed once, under its first
        name (what an optimizer must see: updating it twice would be wrong)."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if item not in mod._modules or mod._modules[item] is None:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def _get_tensor(self, target, table, what):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        tensors = getattr(mod, table)
        if name not in tensors:
            raise AttributeError(f"{mod._get_name()} has no {what} `{name}`")
        return tensors[name]

    def get_parameter(self, target):
        return self._get_tensor(target, "_parameters", "parameter")

    def get_buffer(self, target):
        return self._get_tensor(target, "_buffers", "buffer")

    # ---- modes and gradients ----------------------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode here and, through each child's own train() (PyTorch's recursion: a subclass that
        overrides train() to keep a frozen BatchNorm in eval, or LoRA merging its weights on eval(), is called),
        in every submodule."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drop (default) or zero every parameter's .grad. Dropping frees the gradient memory until the next
        backward, which is why it is the default."""
        seen = hooks.get("zero_grad_called")
        if seen is not None:
            seen(set_to_none)
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g = g.detach()
                    p.grad = g
                _C.fill_(g, 0)

    def apply(self, fn):
        """fn(module) on every submodule (children first) and then self; e.g. a custom initialisation."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- device and dtype -----------------------------------------------------------------------------------
    def _apply_tensors(self, convert):
        return self._apply(convert)

    def _apply(self, fn, recurse=True):
        """Replace every parameter and buffer t by fn(t), children first: what to(), float(), half(), cuda()...
        run, as PyTorch's do, so a subclass that overrides _apply sees every conversion (YOLOv5's Detect converts
        its plain-tensor anchors: `self = super()._apply(fn); self.anchors = fn(self.anchors)`). A parameter keeps
        its identity (its data is swapped in place, as PyTorch's Module.to does), so an optimizer built before the
        move still holds it; its gradient is converted too. Buffers are replaced."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        for name, p in self._parameters.items():
            if p is None:
                continue
            new = fn(p)
            if new is p:
                continue
            grad = fn(p.grad) if p.grad is not None else None
            p.grad = None
            p._set_data(new)
            p._name = p._name  # label the new storage for memory reports
            p.grad = grad
        for name, b in self._buffers.items():
            if b.__class__ is ComplexTensor:  # moves between devices; stays complex (PyTorch's half() too)
                dev = getattr(fn, "device", None)
                self._buffers[name] = b if dev is None else b.to(dev)
            elif b is not None:
                new = fn(b)
                if new is not b:
                    new._name = b._name
                self._buffers[name] = self._moved_buffer(b, new)
        return self

    def _moved_buffer(self, old, new):
        """The buffer that replaces `old` after a move or cast: `new` (lazy.py keeps a placeholder's replacement a
        placeholder)."""
        return new

    def to(self, *args, device=None, dtype=None, non_blocking=False, memory_format=None):
        """to(device), to(dtype), to(device, dtype), to(tensor): move and/or cast. dtype applies to floating
        parameters and buffers only (num_batches_tracked stays int64), as in PyTorch. memory_format
        (gpumemnet.channels_last, ...) is accepted and changes nothing: gpumemnet keeps NCHW (same results, same
        bytes; see gpumemnet.channels_last)."""
        if memory_format is not None and type(memory_format).__name__ != "memory_format":
            raise TypeError(f"to: memory_format must be a gpumemnet memory format, got {memory_format!r}")
        for a in args:
            if isinstance(a, _C.TensorBase):
                device, dtype = a._device, a.dtype
            elif isinstance(a, str) or type(a).__name__ == "device":
                device = a
            elif a is not None:
                dtype = a
        dev = device_str(device) if device is not None else None
        dt = as_dtype(dtype) if dtype is not None else None
        if dt is not None and not dt.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dt}")

        def convert(t):
            # allocate under t's own category: a moved gradient is still a gradient, a buffer still model state
            prev = _C.set_category(t._category)
            try:
                out = t.detach()
                if dt is not None and t.dtype.is_floating_point and t._dtype != dt.code:
                    out = out.to(dtype=dt)
                if dev is not None and out._device != dev:
                    out = out.to(device=dev)
            finally:
                _C.set_category(prev)
            return t if out._storage_id == t._storage_id else out
        convert.device = dev
        return self._apply_tensors(convert)

    def to_empty(self, device):
        """Move to device without copying values (e.g. from meta, then initialise): new storage, no data."""
        dev = device_str(device)

        def convert(t):
            if t._device == dev:
                return t
            prev = _C.set_category(t._category)
            try:
                return _C.empty(t.shape, t._dtype, dev)
            finally:
                _C.set_category(prev)
        return self._apply_tensors(convert)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        """Move parameters and buffers to CUDA device `device` (None: the thread's current one)."""
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def float(self):
        return self.to(dtype="float32")

    def double(self):
        return self.to(dtype="float64")

    def half(self):
        return self.to(dtype="float16")

    def bfloat16(self):
        return self.to(dtype="bfloat16")

    # ---- state_dict ---------------------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """This module's own parameters and persistent buffers (not its children's) into destination, and its
        extra state under "_extra_state" when its class defines get_extra_state (PyTorch's rule)."""
        for name, p in self._parameters.items():
            if p is not None:  # a complex parameter (its real pairs here) as its complex view, as PyTorch holds it
                v, c = p if keep_vars else p.detach(), self.__dict__.get(name)
                destination[prefix + name] = ComplexTensor(v) if c.__class__ is ComplexTensor and c._r is p else v
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def get_extra_state(self):
        """State beyond parameters and buffers that state_dict should hold; a subclass defines it together with
        set_extra_state."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to "
                           "report this bug.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to "
                           "report this bug.")

    def share_memory(self):
        """Every parameter and buffer into shared memory in place (Tensor.share_memory_): processes forked or
        spawned afterwards train the same weights (pytorch/examples' mnist_hogwild)."""
        return self._apply(lambda t: t.share_memory_())

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """OrderedDict of parameters and persistent buffers by full name, as detached tensors sharing storage
        (keep_vars=True: the Parameter objects themselves). Like PyTorch's, a new one carries `_metadata` (each
        module's {"version": ...} by path), which load_state_dict hands to its hooks. The old positional form
        state_dict(destination, prefix, keep_vars) is taken with PyTorch's warning (overrides in older code)."""
        if args:
            if len(args) > 3:
                raise TypeError(f"state_dict() takes at most 3 positional arguments ({len(args)} given)")
            warnings.warn("Positional args are being deprecated, use kwargs instead. Refer to "
                          "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
                          " for details.", FutureWarning, stacklevel=2)
            destination, prefix, keep_vars = (args + (destination, prefix, keep_vars)[len(args):])[:3]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in tuple(self._state_dict_pre_hooks):
            _hooks._fn(hook)(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in tuple(self._state_dict_hooks):
            hook = _hooks._fn(hook)
            r = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if r is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif r is not None:
                destination = r
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values from state_dict into this module's parameters and persistent buffers, in place; assign=True
        makes each parameter and buffer take the state's tensor itself (its memory, dtype and device: a model built
        on the meta device is loaded so), parameters keeping their requires_grad, as in PyTorch.

        Every problem is collected first, then reported in one RuntimeError: missing and unexpected keys (only
        when strict) and every shape mismatch (always: a wrong shape cannot be copied). Nothing is copied when
        there is an error, unless a module has a load_state_dict post-hook: as in PyTorch, that module's subtree is
        copied before its hooks run (they may read the loaded values). Each module reads its keys in
        _load_from_state_dict, after its load pre-hooks, from its own copy of the dict (PyTorch's walk).
        Returns _IncompatibleKeys(missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # the hooks may change it: the caller's stays as it was
        if metadata is not None:
            state_dict._metadata = metadata
        outer = getattr(_loading, "pairs", None), getattr(_loading, "assign", False)
        pending = []
        _loading.pairs, _loading.assign = pending, bool(assign)
        try:
            self._load_walk(state_dict, "", metadata, missing, unexpected, errors, pending)
            if strict:
                if unexpected:
                    errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                                  + ". ")
                if missing:
                    errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing)
                                  + ". ")
            if errors:
                raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t"
                                   + "\n\t".join(errors))
            _copy_pairs(pending)
        finally:
            _loading.pairs, _loading.assign = outer
        return _IncompatibleKeys(missing, unexpected)

    def _load_walk(self, local, prefix, metadata, missing, unexpected, errors, pending):
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        self._load_from_state_dict(local, prefix, local_metadata, True, missing, unexpected, errors)
        for name, child in self._modules.items():
            if child is not None:
                p = prefix + name + "."
                child._load_walk({k: v for k, v in local.items() if k.startswith(p)}, p, metadata, missing,
                                 unexpected, errors, pending)
        if self._load_state_dict_post_hooks:
            if not errors:  # the hooks see this subtree loaded, as in PyTorch
                _copy_pairs(pending)
                del pending[:]
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in tuple(self._load_state_dict_post_hooks):
                if _hooks._fn(hook)(self, keys) is not None:
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                         "expected to return new values, if incompatible_keys need to be modified, "
                                         "it should be done inplace.")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """This module's own keys (not its children's): PyTorch's signature and order (load pre-hooks, then each
        parameter and persistent buffer, then, when strict, the keys under prefix that name nothing here). Within
        load_state_dict the copies wait until every check passed; called on its own, it copies at once."""
        lazy = getattr(self, "_lazy_load_hook", None)  # lazy modules take their shapes from the state (lazy.py)
        if lazy is not None:
            lazy(state_dict, prefix)
        for hook in tuple(self._load_state_dict_pre_hooks):
            _hooks._fn(hook)(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        local_state = {k: v for k, v in itertools.chain(
            self._parameters.items(),
            ((k, b) for k, b in self._buffers.items() if k not in self._non_persistent_buffers_set)) if v is not None}
        pairs = []
        for name, target in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if value.__class__ is ComplexTensor:  # complex buffers; a complex parameter kept as its real pairs
                target, value = getattr(target, "_r", target), value._r
            if not isinstance(value, _C.TensorBase):
                try:
                    import numpy as np
                    value = _C.from_numpy(np.asarray(value), target._dtype, "cpu")
                except (TypeError, ValueError):
                    error_msgs.append(f'While copying the parameter named "{key}", expected a tensor or an '
                                      f"array-like value from checkpoint but received {type(value).__name__}")
                    continue
            if tuple(value.shape) != tuple(target.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from "
                                  f"checkpoint, the shape in current model is {tuple(target.shape)}.")
                continue
            pairs.append((key, target, value))
        if type(self).set_extra_state is not Module.set_extra_state:
            key = prefix + _EXTRA_STATE_KEY_SUFFIX
            if key in state_dict:
                self.set_extra_state(state_dict[key])
            elif strict:
                missing_keys.append(key)
            local_state = dict(local_state, _extra_state=None)
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    head = key[len(prefix):].split(".", 1)
                    if (head[0] not in self._modules) if len(head) > 1 else (head[0] not in local_state):
                        unexpected_keys.append(key)
        pending = getattr(_loading, "pairs", None)
        if pending is None:
            _copy_pairs(pairs)
        else:
            pending.extend(pairs)

    # ---- repr --------------------------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(m), 2) for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"


def _copy_pairs(pairs):
    """Copy each checked (key, target, value) of load_state_dict in place, without recording (with assign=True:
    the target takes the value's memory, dtype and device, keeping its identity and requires_grad)."""
    with no_grad():
        for k, target, value in pairs:
            if getattr(_loading, "assign", False):
                target.data = value  # Tensor.data's swap: the value's memory, tagged "parameter" for a parameter
                continue
            if target._device == "meta":  # nothing to copy into (shapes were checked); PyTorch's warning
                if value._device != "meta":
                    warnings.warn(f"for {k}: copying from a non-meta parameter in the checkpoint to a meta parameter "
                                  f"in the current model, which is a no-op. (Did you mean to pass `assign=True` to "
                                  f"assign items in the state dictionary to their corresponding key in the module "
                                  f"instead of copying them in place?)", UserWarning, stacklevel=4)
                continue
            if value._device == "meta":
                raise RuntimeError(f'While copying the parameter named "{k}": the checkpoint value is on the '
                                   f"meta device and holds no data")
            if value._device != target._device:
                value = value.to(device=target._device)
            _C.copy_(target, value)
