"""torch.ops: PyTorch's registry of C++ operators. gpumemnet loads none, so libraries that ship optional C++
ops (torchvision) see them absent, as on a machine where they failed to load."""


def load_library(path):
    raise OSError(f"torch.ops.load_library({path!r}): gpumemnet cannot load PyTorch C++ operator libraries")


class _Namespace:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        raise AttributeError(f"torch.ops.{self._name}.{op}: no C++ operator library is loaded under gpumemnet")


def __getattr__(namespace):  # torch.ops.torchvision, torch.ops.image, ...: namespaces exist, their ops do not
    if namespace.startswith("__"):
        raise AttributeError(namespace)
    return _Namespace(namespace)
