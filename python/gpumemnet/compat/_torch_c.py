"""torch._C: the few names of PyTorch's C extension that Python libraries call directly (usage logging, tracing
state, dispatch-key guards). gpumemnet has no dispatcher keys: the guards do nothing, as when no key is active."""
def _log_api_usage_once(event):
    pass


def _get_tracing_state():
    return None


class DisableTorchFunctionSubclass:
    """A context in which PyTorch does not dispatch to Tensor subclasses' __torch_function__; gpumemnet never
    does, so it changes nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class DisableTorchFunction(DisableTorchFunctionSubclass):
    pass


class _AnyKey(type):
    def __getattr__(cls, name):  # every key PyTorch names exists, as its own name
        if name.startswith("__"):
            raise AttributeError(name)
        return name


class DispatchKey(metaclass=_AnyKey):
    pass


class DispatchKeySet:
    def __init__(self, *keys):
        self.keys = frozenset(keys)

    def __or__(self, other):
        return DispatchKeySet(*(self.keys | other.keys))


class _ExcludeDispatchKeyGuard:
    def __init__(self, *keys):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
