"""Optimizer step hooks, PyTorch's: Optimizer.register_step_pre_hook / register_step_post_hook and the global
torch.optim.optimizer.register_optimizer_step_pre_hook / _post_hook. Every subclass's step is wrapped once, when
the class is made (Optimizer.__init_subclass__); the wrapper costs one check while no hook is registered, and a
step that calls its parent's step (a subclass's super().step()) runs the hooks once."""
import functools

from .._core.autograd_hooks import RemovableHandle

_global_pre, _global_post = [], []


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) before every optimizer's step; it may return (new_args, new_kwargs)."""
    _global_pre.append(hook)
    return RemovableHandle(_global_pre, hook)


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) after every optimizer's step."""
    _global_post.append(hook)
    return RemovableHandle(_global_post, hook)


def register(optimizer, which, hook, prepend=False):
    """An optimizer's own hook list `which` ("_step_pre_hooks", "_state_dict_post_hooks" ...), made on first use;
    prepend puts the hook first."""
    if not callable(hook):
        raise TypeError(f"register_{which.strip('_')[:-6]}_hook: hook must be callable, got {type(hook).__name__}")
    hooks = optimizer.__dict__.setdefault(which, [])
    hooks.insert(0, hook) if prepend else hooks.append(hook)
    return RemovableHandle(hooks, hook)


def run(optimizer, which, *args):
    """Call the optimizer's hooks `which` with (optimizer, *args); with args, a hook's non-None result replaces
    args[0] for the hooks after it and is returned (state_dict's post hooks, load_state_dict's pre hooks)."""
    out = args[0] if args else None
    for hook in list(optimizer.__dict__.get(which, ())):
        r = hook(optimizer, *((out,) if args else ()))
        if args and r is not None:
            out = r
    return out


def wrap_step(step):
    """step with the hooks around it."""
    if getattr(step, "_with_step_hooks", False):
        return step

    @functools.wraps(step)
    def hooked(self, *args, **kwargs):
        d = self.__dict__
        d["_opt_called"] = True  # what an LR scheduler's first step asks (PyTorch's attribute)
        pre, post = d.get("_step_pre_hooks"), d.get("_step_post_hooks")
        if not (pre or post or _global_pre or _global_post) or d.get("_in_step_hooks"):
            return step(self, *args, **kwargs)
        d["_in_step_hooks"] = True
        try:
            for hook in (*_global_pre, *(pre or ())):
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(f"a pre-hook must return None or a tuple of (new_args, new_kwargs), but "
                                           f"got {result}.")
                    args, kwargs = result
            out = step(self, *args, **kwargs)
            for hook in (*(post or ()), *_global_post):
                hook(self, args, kwargs)
            return out
        finally:
            d["_in_step_hooks"] = False
    hooked._with_step_hooks = True
    return hooked
