"""torch._C: the few names of PyTorch's C extension that Python libraries call directly (usage logging, tracing
state, dispatch-key guards). gpumemnet has no dispatcher keys: the guards do nothing, as when no key is active."""
from ..._core.subclass_dispatch import DisableTorchFunctionSubclass


def _log_api_usage_once(event):
    pass


def _get_tracing_state():
    return None


def _is_tracing():
    """(gpumemnet has no tracer: never.) asteroid-filterbanks asks it on every forward."""
    return False


class DisableTorchFunction(DisableTorchFunctionSubclass):
    """(gpumemnet has no TorchFunctionMode that sees calls: the same as DisableTorchFunctionSubclass.)"""


class TensorType:
    """PyTorch's TorchScript type of tensors (torch.TensorType), named in annotations (open_clip); PyTorch gives it no
    constructor from Python, and gpumemnet has no TorchScript."""

    def __init__(self, *args, **kwargs):
        raise TypeError("torch._C.TensorType: No constructor defined!")


class DeviceObjType:
    """PyTorch's TorchScript type of devices (torch.DeviceObjType), named in annotations and isinstance-free
    checks (pytorch-forecasting imports it); no constructor, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        raise TypeError("torch._C.DeviceObjType: No constructor defined!")


def _no_constructor(name, what):
    def __init__(self, *args, **kwargs):
        raise TypeError(f"torch._C.{name}: No constructor defined!")
    return type(name, (), {"__init__": __init__, "__doc__": f"PyTorch's TorchScript {what} (torch.{name}), "
                           f"imported by libraries for annotations (snntorch imports Value); gpumemnet has no "
                           f"TorchScript graphs, and none is made from Python."})


Value = _no_constructor("Value", "graph value")
Node = _no_constructor("Node", "graph node")
Block = _no_constructor("Block", "graph block")
Graph = _no_constructor("Graph", "graph")  # (annotations of ONNX symbolic functions: transformers' sew_d)
ScriptMethod = _no_constructor("ScriptMethod", "method")  # (torchview's isinstance checks)
ScriptFunction = _no_constructor("ScriptFunction", "function")


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


_TensorMeta = type  # the metaclass of PyTorch's Tensor; gpumemnet's Tensor is an ordinary class


def _parse_to(*args, **kwargs):
    """(device, dtype, non_blocking, memory_format) from Tensor.to / Module.to's arguments, as PyTorch's parser
    gives them (Lightning's DeviceDtypeModuleMixin.to reads them so): a device (str or torch.device), a dtype, a
    tensor (its device and dtype), in that order, or as keywords."""
    from ..._core.dtype import as_dtype, device as _device, dtype as _dtype  # noqa: PLC0415
    from ..._C import TensorBase  # noqa: PLC0415
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for a in args:
        if a is None:  # to(None): nothing asked (tensordict's td.to(None))
            continue
        if isinstance(a, TensorBase):
            device, dtype = a.device, a.dtype
        elif isinstance(a, _dtype):
            dtype = a
        elif isinstance(a, (str, _device, int)):
            device = a
        elif isinstance(a, bool):
            kwargs.setdefault("non_blocking", a)
        else:
            raise TypeError(f"to() received an invalid combination of arguments - got {type(a).__name__}")
    device = _device(device) if isinstance(device, (str, int)) else device
    return (device, as_dtype(dtype) if isinstance(dtype, str) else dtype, bool(kwargs.get("non_blocking", False)),
            kwargs.get("memory_format"))


class _NNNamespace:
    _parse_to = staticmethod(_parse_to)


_nn = _NNNamespace()


class PyTorchFileReader:
    """PyTorch's zip-checkpoint reader class (named in annotations); gpumemnet's torch.load reads the format itself."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("PyTorchFileReader: use torch.load, which reads PyTorch's checkpoint format")


def _are_functorch_transforms_active():
    """gpumemnet's torch.func transforms run on ordinary tensors (kornia then takes its in-place paths safely)."""
    return False


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """What a Tensor subclass sets as its __torch_function__ to opt out of the protocol (PyG's Index, EdgeIndex):
    its instances do not dispatch (subclass_dispatch._takes_part), and a call runs func as on plain tensors."""
    with DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))


from . import _functorch  # noqa: E402,F401  (torch._C._functorch.is_batchedtensor: tensordict)
