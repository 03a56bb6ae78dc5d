"""Module hooks beyond the plain forward ones: PyTorch 2.x's forward-hook options (prepend, with_kwargs,
always_call), the full backward hooks and backward pre-hooks (per module and global), and the handles that remove
them. Module.__call__ (module.py) takes its fast path while a module has no hook at all and nothing is registered
globally; otherwise it calls `call_with_hooks` here, which is PyTorch's Module._call_impl.

Backward hooks work as PyTorch's torch.utils.hooks.BackwardHook does: the module's positional tensor inputs and its
tensor outputs pass through identity autograd Functions (`_InputHook`, `_OutputHook`). The output node's backward
sees grad_output first (pre-hooks may replace it); the input node's backward runs once every gradient with respect
to the module's inputs has arrived, which is when the full hooks are called (their result replaces grad_input).

Hook lists are lists (gpumemnet's prune and weight_norm look their hooks up in `_forward_pre_hooks`); an entry
is the hook itself, or a `_Flagged` wrapper when it was registered with options or is already in the list (so that
each handle removes exactly its own registration). They also answer PyTorch's dict view of them (HookList:
`for k, hook in module._forward_pre_hooks.items()`, then `del module._forward_pre_hooks[k]`, as pruning code
does), keyed by the handles' ids as PyTorch's."""
import itertools
import warnings
import weakref

from ... import _C
from ..._core.autograd import Function, register_graph_backward
from ..._core.autograd_hooks import RemovableHandle
from ..._core.state import grad_mode, warn_outside

__all__ = ["register_module_forward_pre_hook", "register_module_forward_hook", "register_module_backward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook"]

_ids = itertools.count()


class _HookHandle(RemovableHandle):
    """PyTorch's RemovableHandle: remove() (once is enough, twice is harmless), `id`, and `with handle:` removes
    on exit. Removes its own entry by identity from every list it was added to, then refreshes its module's
    `_has_hooks` (held weakly: a handle does not keep a module alive)."""
    __slots__ = ("id", "_lists", "_owner")

    def __init__(self, lists, entry, owner=None):
        super().__init__(lists[0], entry)
        self._lists = lists
        self._owner = None if owner is None else weakref.ref(owner)
        self.id = next(_ids)

    def remove(self):
        for lst in self._lists:
            for i, e in enumerate(list.__iter__(lst)):
                if e is self._fn:
                    list.__delitem__(lst, i)
                    if type(lst) is HookList:
                        lst._keys.pop(id(e), None)
                    break
        module = self._owner() if self._owner is not None else None
        if module is not None:
            refresh_has_hooks(module)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def refresh_has_hooks(module):
    """module._has_hooks: whether Module.__call__ must take call_with_hooks. One attribute to test instead of four
    (an attribute read of a Module is not specialised by CPython: its class defines __getattr__). register_* set it,
    handles clear it; a stale True (a list emptied by hand) only sends a call the slow way, which reads the lists."""
    object.__setattr__(module, "_has_hooks", bool(module._forward_pre_hooks or module._forward_hooks or
                                                  module._backward_hooks or module._backward_pre_hooks))


# The names of a module's hook containers (Module.__setattr__ adopts a dict assigned to one: adopt)
CONTAINERS = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks",
              "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


def new_hook_lists(module):
    """A new module's empty hook containers, owned by it (one weak reference for all), and _has_hooks False."""
    owner = weakref.ref(module)
    for name in CONTAINERS:
        hooks = HookList()
        hooks._owner = owner
        object.__setattr__(module, name, hooks)
    object.__setattr__(module, "_has_hooks", False)


def adopt(module, name):
    """module.<name> (a hook container) as a HookList owned by module: a dict a script assigned by hand
    (`model._forward_hooks = OrderedDict()` to strip hooks, or one filled with {id: hook}) becomes one with the
    same keys and hooks, so that the forward runs its hooks and register_* adds to it; _has_hooks follows."""
    d = module.__dict__
    value = d.get(name)
    if type(value) is not HookList and isinstance(value, dict):
        # a module PyTorch pickled keeps its hooks' options beside them: {id: True} in <name>_with_kwargs / ...
        with_kwargs, always = d.pop(name + "_with_kwargs", None) or {}, d.pop(name + "_always_called", None) or {}
        hooks = HookList()
        for key, hook in value.items():
            if key in with_kwargs or key in always:
                hooks._place(key, _Flagged(hook, key in with_kwargs, key in always))
            else:
                hooks[key] = hook
        object.__setattr__(module, name, hooks)
        value = hooks
    if type(value) is HookList:
        value._owner = weakref.ref(module)
    refresh_has_hooks(module)


class HookList(list):
    """A module's hook list (entries, in call order) that also reads as PyTorch's OrderedDict of hooks keyed by the
    handles' ids: keys() are the ids, values() the hooks as registered (options unwrapped), items() both;
    `hooks[h.id]`, `hooks[k] = hook`, `del hooks[h.id]`, pop, copy, update, move_to_end, `h.id in hooks` and the
    repr are the dict's. Iterating gives the entries (the forward's loops read the list as it is), where PyTorch's
    dict gives its keys. A change made through the dict's methods refreshes the owning module's _has_hooks."""
    __slots__ = ("_keys", "_owner")

    def __init__(self, *args):
        super().__init__(*args)
        self._keys = {}  # id(entry) -> (entry, handle id); the entry is kept so that its id() is not reused
        self._owner = None  # the module (weakly), set by adopt

    def _changed(self):
        module = self._owner() if self._owner is not None else None
        if module is not None:
            refresh_has_hooks(module)

    def __setitem__(self, key, hook):
        """hooks[k] = hook: replaces the hook of handle id k in place, or adds one under k (a plain hook);
        hooks[i:j] = entries is the list's (drop_user_hooks filters the entries so)."""
        if isinstance(key, slice):
            list.__setitem__(self, key, hook)
            self._changed()
            return
        if not isinstance(key, int) or isinstance(key, bool):
            raise TypeError(f"module hooks are keyed by handle ids (ints), got {key!r}")
        self._place(key, _Flagged(hook) if any(e is hook for e in list.__iter__(self)) else hook)  # (by identity)
        self._changed()

    def _place(self, key, entry):
        """entry under handle id key: in place of the entry key had, else at the end."""
        try:
            i = self._position(key)
        except KeyError:
            list.append(self, entry)
        else:
            self._keys.pop(id(list.__getitem__(self, i)), None)
            list.__setitem__(self, i, entry)
        self._keys[id(entry)] = (entry, key)

    def update(self, other):
        for key, hook in (other.items() if hasattr(other, "items") else other):
            self[key] = hook

    def pop(self, *args):
        """pop(key[, default]): the hook of handle id key, removed (pop() alone: the last entry, as a list's)."""
        if not args:
            entry = list.pop(self)
            self._keys.pop(id(entry), None)
            self._changed()
            return _fn(entry)
        if args[0] not in self:
            if len(args) > 1:
                return args[1]
            raise KeyError(args[0])
        hook = self[args[0]]
        del self[args[0]]
        return hook

    def clear(self):
        list.clear(self)
        self._keys.clear()
        self._changed()

    def copy(self):
        twin = HookList(list.__iter__(self))
        twin._keys = dict(self._keys)
        return twin

    def move_to_end(self, key, last=True):
        entry = list.pop(self, self._position(key))
        list.append(self, entry) if last else list.insert(self, 0, entry)

    def key_of(self, entry):
        """The handle id of entry (one assigned now for an entry added without a handle)."""
        k = self._keys.get(id(entry))
        if k is None or k[0] is not entry:
            k = self._keys[id(entry)] = (entry, next(_ids))
        return k[1]

    def keys(self):
        return [self.key_of(e) for e in list.__iter__(self)]

    def values(self):
        return [_fn(e) for e in list.__iter__(self)]

    def items(self):
        return [(self.key_of(e), _fn(e)) for e in list.__iter__(self)]

    def _position(self, key):
        """The position of the entry of handle id `key`, or of the entry `key` itself (iterating gives entries: a
        loop `for k in hooks: hooks[k]` written for the dict still finds each hook)."""
        by_id = isinstance(key, int) and not isinstance(key, bool)
        for i, e in enumerate(list.__iter__(self)):
            if (self.key_of(e) == key) if by_id else (e is key):
                return i
        raise KeyError(key)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return list.__getitem__(self, key)
        return _fn(list.__getitem__(self, self._position(key)))

    def __delitem__(self, key):
        if isinstance(key, slice):
            list.__delitem__(self, key)
        else:
            self.remove(list.__getitem__(self, self._position(key)))
        self._changed()

    def __contains__(self, key):
        if isinstance(key, int) and not isinstance(key, bool):
            return key in self.keys()
        return list.__contains__(self, key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def remove(self, entry):  # (prune and weight_norm remove their hooks so): its key goes too, not kept alive
        for i, e in enumerate(list.__iter__(self)):
            if e is entry:
                list.__delitem__(self, i)
                self._keys.pop(id(entry), None)
                return
        raise ValueError("HookList.remove(x): x not in list")

    def __repr__(self):
        return f"OrderedDict({self.items()!r})"

    def __reduce_ex__(self, protocol):  # a copy or pickle holds the entries; their keys are made again
        return HookList, (list(self),)


class _Flagged:
    """A list entry for a hook registered with options (or registered twice)."""
    __slots__ = ("fn", "with_kwargs", "always_call")

    def __init__(self, fn, with_kwargs=False, always_call=False):
        self.fn, self.with_kwargs, self.always_call = fn, with_kwargs, always_call


class WithModule:
    """hook(module, *args) called as entry(*args): PyTorch's _WrappedHook for load_state_dict pre-hooks registered
    with the module. The module is held weakly (its own list holds this: a strong link would be a cycle); a copy or
    pickle of the module takes the hook along, bound to the copy."""

    def __init__(self, hook, module):
        self.hook = hook
        self.module = weakref.ref(module)

    def __call__(self, *args):
        module = self.module()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        return self.hook(module, *args)

    def __getstate__(self):
        return {"hook": self.hook, "module": self.module()}

    def __setstate__(self, d):
        self.hook = d["hook"]
        if d["module"] is None:
            raise RuntimeError("You are trying to revive the hook of a dead Module!")
        self.module = weakref.ref(d["module"])


def _fn(entry):
    return entry.fn if type(entry) is _Flagged else entry


def drop_user_hooks(module):
    """Remove from module the hooks that are not gpumemnet's own (a meta copy the estimator runs: the script's
    feature extractors, Grad-CAM and counters must not see that run). gpumemnet's stay: pruning masks, weight_norm
    and spectral_norm compute the weights the forward uses."""
    for name in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks"):
        hooks = getattr(module, name, None)
        if hooks:
            hooks[:] = [e for e in hooks if _is_ours(_fn(e))]
    refresh_has_hooks(module)


def user_hooks(module):
    """How many of module's own hooks (not its children's) are the script's: the ones drop_user_hooks removes."""
    return sum(1 for name in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")
               for e in (getattr(module, name, None) or ()) if not _is_ours(_fn(e)))


def _is_ours(fn):
    owner = getattr(fn, "__module__", None) or type(fn).__module__
    return owner.startswith("gpumemnet.") or type(fn).__module__.startswith("gpumemnet.")


def add_hook(lists, hook, what, prepend=False, with_kwargs=False, always_call=False, owner=None):
    """Add hook to lists[0] (and to the other lists: the union of all global hooks), return its handle. owner: the
    module whose calls the hook changes (its _has_hooks is kept up to date)."""
    if not callable(hook):
        raise TypeError(f"{what}: hook must be callable, got {type(hook).__name__}")
    lst = lists[0]
    entry = hook
    if with_kwargs or always_call or any(e is hook for e in lst):
        entry = _Flagged(hook, with_kwargs, always_call)
    if prepend:
        lst.insert(0, entry)
    else:
        lst.append(entry)
    for other in lists[1:]:
        other.append(entry)
    if owner is not None:
        object.__setattr__(owner, "_has_hooks", True)
    handle = _HookHandle(lists, entry, owner)
    if type(lst) is HookList:
        lst._keys[id(entry)] = (entry, handle.id)
    return handle


# ---- global hooks (torch.nn.modules.module.register_module_*) --------------------------------------------------
_global_pre_hooks = []
_global_hooks = []
_global_backward_pre_hooks = []
_global_backward_hooks = []
# Every global hook of any kind: Module.__call__ asks this one list whether it may take its fast path.
_global_all = []
# None until a global backward hook is registered, then whether it was a full one (the two kinds do not mix)
_global_kind = {"full": None}


def register_module_forward_pre_hook(hook):
    """hook(module, args) -> None or new args, before every module's forward (before the module's own)."""
    return add_hook((_global_pre_hooks, _global_all), hook, "register_module_forward_pre_hook")


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) -> None or a new output, after every module's forward (with_kwargs:
    hook(module, args, kwargs, output)); always_call: also when forward raised."""
    return add_hook((_global_hooks, _global_all), hook, "register_module_forward_hook",
                    with_kwargs=with_kwargs, always_call=always_call)


def _claim_global_kind(full):
    if _global_kind["full"] is (not full):
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
                           "Please use only one of them.")
    _global_kind["full"] = full


def register_module_backward_hook(hook):
    """Deprecated (as in PyTorch). gpumemnet gives it the semantics of register_module_full_backward_hook: see
    Module.register_backward_hook."""
    _claim_global_kind(False)
    _warn_legacy("register_module_backward_hook")
    return add_hook((_global_backward_hooks, _global_all), hook, "register_module_backward_hook")


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) -> None or new grad_output, for every module (before the module's own)."""
    return add_hook((_global_backward_pre_hooks, _global_all), hook, "register_module_full_backward_pre_hook")


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) -> None or new grad_input, for every module (before its own)."""
    _claim_global_kind(True)
    return add_hook((_global_backward_hooks, _global_all), hook, "register_module_full_backward_hook")


def _warn_legacy(name):
    # PyTorch's non-full hook sees the gradients of the last autograd node the forward recorded (for Linear, addmm's
    # bias, input and weight gradients), which gpumemnet's engine cannot hook (no post-hooks on nodes). It warns
    # (FutureWarning) where those differ from the module's; gpumemnet always gives the module's gradients and says so.
    warnings.warn(f"{name} is deprecated; in gpumemnet it behaves as the full backward hook (grad_input are the "
                  f"gradients with respect to the module's positional tensor inputs, not those of the inputs of the "
                  f"last autograd node of its forward). Use the full backward hook to get the documented behaviour "
                  f"in PyTorch too.", FutureWarning, stacklevel=3)


# ---- backward hooks ------------------------------------------------------------------------------------------
def _zeros(meta):
    shape, dtype, device = meta
    g = _C.empty(shape, dtype, device)
    _C.fill_(g, 0)
    return g


class _InputHook(Function):
    """Identity on the module's tensor inputs; its backward hands the gradients with respect to them to the full
    backward hooks (a gradient that did not arrive is zeros, as PyTorch materialises it for its Function)."""

    @staticmethod
    def forward(ctx, bw, *tensors):
        return _identity(ctx, bw, tensors)

    @staticmethod
    def backward(ctx, *grads):
        grads = grads + (None,) * (len(ctx.metas) - len(grads))  # the engine passes grads up to the last one
        grads = tuple(_zeros(m) if g is None else g for g, m in zip(grads, ctx.metas))
        return (None,) + ctx.bw.inputs_ready(grads, ctx.metas)


class _OutputHook(Function):
    """Identity on the module's tensor outputs; its backward captures grad_output and runs the pre-hooks."""

    @staticmethod
    def forward(ctx, bw, *tensors):
        return _identity(ctx, bw, tensors)

    @staticmethod
    def backward(ctx, *grads):
        grads = grads + (None,) * (len(ctx.metas) - len(grads))
        return (None,) + ctx.bw.outputs_ready(grads)


def _node_name(self):
    return "BackwardHookFunctionBackward"  # PyTorch's (code looks hook nodes up by it)


_InputHook.name = _OutputHook.name = _node_name


def _identity(ctx, bw, tensors):
    # New tensor objects on the same memory: the caller's tensors keep their own place in the graph. Those that do
    # not require grad stay out of it (PyTorch marks them non-differentiable).
    if hasattr(ctx, "__dict__"):  # a node is recorded (the no-graph ctx has no attributes)
        ctx.bw = bw
        ctx.metas = [(tuple(t.shape), t._dtype, t._device) for t in tensors]
        ctx.mark_non_differentiable(*[i for i, t in enumerate(tensors) if not t.requires_grad])
    return tuple(t.detach() for t in tensors)


# Under create_graph the same backward runs: it only passes gradients on (and calls the hooks), recording nothing.
register_graph_backward(_InputHook, _InputHook.backward)
register_graph_backward(_OutputHook, _OutputHook.backward)


class BackwardHook:
    """PyTorch's torch.utils.hooks.BackwardHook for one call of a module: setup_input_hook(args) before forward,
    setup_output_hook(result) after it."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_outputs = -1
        self.output_tensors_index = None
        self.n_inputs = -1
        self.input_tensors_index = None

    def _apply_on_tensors(self, fn_cls, args):
        idx = [i for i, a in enumerate(args) if isinstance(a, _C.TensorBase)]
        if not (grad_mode.get() and any(args[i].requires_grad for i in idx)):
            return args, None
        new = fn_cls.apply(self, *[args[i] for i in idx])
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return (tuple(out) if type(args) is tuple else type(args)(*out)), idx

    def setup_input_hook(self, args):
        res, self.input_tensors_index = self._apply_on_tensors(_InputHook, args)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result):
        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        res, self.output_tensors_index = self._apply_on_tensors(_OutputHook, args)
        self.n_outputs = len(args)
        return res if is_tuple else res[0]

    @staticmethod
    def _pack(indices, values, size):
        res = [None] * size
        for i, v in zip(indices, values):
            res[i] = v
        return tuple(res)

    def outputs_ready(self, grads):
        """The output node's backward: grads w.r.t. the tensor outputs -> those passed on (pre-hooks' result)."""
        self.grad_outputs = self._pack(self.output_tensors_index, grads, self.n_outputs)
        for hook in self.user_pre_hooks:
            r = hook(self.module, self.grad_outputs)
            if r is None:
                continue
            if not isinstance(r, tuple) or len(r) != len(self.grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                   f"{_count(r)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = r
        local = self.grad_outputs
        if self.input_tensors_index is None:
            # no input requires grad: the full hooks fire now, with grad_input all None (PyTorch's rule 2)
            if self.user_hooks:
                warn_outside("Full backward hook is firing when gradients are computed with respect to module "
                             "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                             "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more "
                             "details.")  # (at the user's backward() line, as PyTorch's)
                grad_inputs = (None,) * self.n_inputs
                for hook in self.user_hooks:
                    r = hook(self.module, grad_inputs, self.grad_outputs)
                    if r is not None and not (isinstance(r, tuple) and all(g is None for g in r)):
                        raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                           "return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_tensors_index)

    def inputs_ready(self, grads, metas):
        """The input node's backward: grads w.r.t. the tensor inputs -> those passed on (the full hooks' result)."""
        if self.grad_outputs is None:
            # the gradient reached the inputs without passing through the outputs (e.g. a double backward)
            return grads
        res = self._pack(self.input_tensors_index, grads, self.n_inputs)
        for hook in self.user_hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            if not isinstance(out, tuple) or len(out) != len(res):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {_count(out)}, but "
                                   f"expected {len(res)}")
            res = out
        self.grad_outputs = None
        new = tuple(res[i] for i in self.input_tensors_index)
        for k, (g, m) in enumerate(zip(new, metas)):
            if g is not None and tuple(g.shape) != m[0]:
                raise RuntimeError(f"backward hook of {type(self.module).__name__} changed the shape of grad_input"
                                   f"[{self.input_tensors_index[k]}]: got {tuple(g.shape)}, the input has {m[0]}")
        return new


def _count(r):
    return len(r) if isinstance(r, (tuple, list)) else f"a {type(r).__name__} (a tuple is expected)"


def backward_hooks(module):
    """(full backward hooks, backward pre-hooks) that apply to module, globals first."""
    full = [_fn(e) for e in itertools.chain(_global_backward_hooks, module._backward_hooks)]
    pre = [_fn(e) for e in itertools.chain(_global_backward_pre_hooks, module._backward_pre_hooks)]
    return full, pre


# ---- the call with hooks -------------------------------------------------------------------------------------
def call_with_hooks(module, args, kwargs):
    """PyTorch's Module._call_impl past its no-hook shortcut (the hook lists are read once, as PyTorch unpacks
    its dicts: a hook that removes itself does not disturb the others)."""
    result = None
    called = set()  # the always_call hooks that ran already
    try:
        full, pre = backward_hooks(module) if (module._backward_hooks or module._backward_pre_hooks or
                                               _global_backward_hooks or _global_backward_pre_hooks) else ((), ())
        for entry in (*_global_pre_hooks, *module._forward_pre_hooks):
            if type(entry) is _Flagged and entry.with_kwargs:
                r = entry.fn(module, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {r}.")
                    args, kwargs = r
            else:
                r = _fn(entry)(module, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        bw = None
        if full or pre:
            bw = BackwardHook(module, full, pre)
            args = bw.setup_input_hook(args)
        result = module.forward(*args, **kwargs)
        for entry in (*_global_hooks, *module._forward_hooks):
            flagged = type(entry) is _Flagged
            if flagged and entry.always_call:
                called.add(id(entry))
            r = entry.fn(module, args, kwargs, result) if flagged and entry.with_kwargs else \
                _fn(entry)(module, args, result)
            if r is not None:
                result = r
        if bw is not None:
            if not isinstance(result, (_C.TensorBase, tuple)):
                warnings.warn(f"For backward hooks to be called, module output should be a Tensor or a tuple of "
                              f"Tensors but received {type(result)}", stacklevel=3)
            result = bw.setup_output_hook(result)
        return result
    except Exception:
        # always_call hooks that did not run yet run now; their own errors are silenced (the forward's is raised)
        for entry in (*_global_hooks, *module._forward_hooks):
            if type(entry) is not _Flagged or not entry.always_call or id(entry) in called:
                continue
            is_global = any(entry is e for e in _global_hooks)
            try:
                # PyTorch passes kwargs here only to the module's own with_kwargs hooks, not to global ones
                r = entry.fn(module, args, kwargs, result) if entry.with_kwargs and not is_global else \
                    entry.fn(module, args, result)
                if r is not None:
                    result = r
            except Exception as e:
                warnings.warn(f"{'global ' if is_global else ''}module forward hook with ``always_call=True`` raised "
                              f"an exception that was silenced as another error was raised in forward: {e}",
                              stacklevel=3)
        raise
