"""torch.utils._python_dispatch: PyTorch's dispatch modes (TorchDispatchMode: an object that sees every aten
operator a region runs). gpumemnet has no aten dispatcher, so no mode can see its operators: the names are here for
the libraries that import them (ptflops' aten backend, memory trackers) and entering a mode raises, so that a count
made by one is never silently empty."""

__all__ = ["TorchDispatchMode"]


class TorchDispatchMode:
    """Subclassed by libraries; entering an instance raises NotImplementedError (see the module docstring)."""

    def __init__(self, _dispatch_key=None):
        self._dispatch_key = _dispatch_key

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        raise NotImplementedError(
            f"{type(self).__name__}: gpumemnet has no aten dispatcher, so a TorchDispatchMode sees no operator; "
            f"count with module hooks instead (ptflops' backend='pytorch', torch.profiler with with_flops=True)")

    def __exit__(self, exc_type, exc_value, traceback):
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        return cls(*args, **kwargs)

    @classmethod
    def is_infra_mode(cls):
        return False


def _get_current_dispatch_mode():
    return None


def _get_current_dispatch_mode_stack():
    return []


def is_traceable_wrapper_subclass(t):
    return False
