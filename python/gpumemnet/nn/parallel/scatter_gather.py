"""torch.nn.parallel.scatter_gather: scatter, scatter_kwargs, gather, as PyTorch's DataParallel uses them (Captum
imports scatter). Tensors are cut into one chunk per target GPU (Tensor.chunk along dim, differentiable) and each
chunk moved to its GPU; gather concatenates GPU tensors along dim onto one device. Objects that are not tensors are
repeated per target, containers are scattered element by element, as in PyTorch. The targets must be CUDA devices
(an int, 'cuda:N' or a device), as PyTorch's: on a machine without CUDA the move raises."""
import warnings

from ..._core.creation import cat
from ..._core.dtype import device as _device
from ..._core.tensor import Tensor

__all__ = ["scatter", "scatter_kwargs", "gather"]


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def _gpu(d):
    """The CUDA device of a target: an int is its index, a str or device must name a non-CPU device."""
    if isinstance(d, int) and not isinstance(d, bool):
        return _device("cuda", d) if d >= 0 else _device("cuda")
    dev = _device(d) if isinstance(d, (str, _device)) else None
    if dev is None:
        raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{d}")
    if dev.type == "cpu":
        raise ValueError(f"Expected a non cpu device, but got: {dev}")
    return dev


def _scatter_tensor(t, targets, dim):
    devices = [_gpu(d) for d in targets]
    return tuple(chunk.to(dev) for chunk, dev in zip(t.chunk(len(devices), dim), devices))


def scatter(inputs, target_gpus, dim=0):
    """Slice tensors into approximately equal chunks, one per GPU of target_gpus; duplicate references to objects
    that are not tensors. A tuple, list or dict comes back as a list of them, one per GPU."""
    def scatter_map(obj):
        if isinstance(obj, Tensor):
            return _scatter_tensor(obj, target_gpus, dim)
        if _is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in target_gpus]
    return scatter_map(inputs)


def scatter_kwargs(inputs, kwargs, target_gpus, dim=0):
    """scatter of the positional inputs and of the keyword arguments, padded to the same number of GPUs."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def _gather_tensors(tensors, target_device, dim):
    if not all(t.device.type != "cpu" for t in tensors):
        raise AssertionError("Gather function not implemented for CPU tensors")
    dest = "cpu" if target_device == "cpu" else _gpu(target_device)
    if dim == 0 and all(t.dim() == 0 for t in tensors):
        tensors = [t.view(1) for t in tensors]
        warnings.warn("Was asked to gather along dimension 0, but all input tensors were scalars; will instead "
                      "unsqueeze and return a vector.", stacklevel=3)
    return cat([t.to(dest) for t in tensors], dim)


def gather(outputs, target_device, dim=0):
    """Concatenate the tensors of a sequence of per-GPU outputs (nested in dicts, tuples, lists) along dim, on
    target_device."""
    def gather_map(outputs):
        out = outputs[0]
        if isinstance(out, Tensor):
            return _gather_tensors(outputs, target_device, dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outputs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outputs])) for k in out)
        if _is_namedtuple(out):
            return type(out)._make(map(gather_map, zip(*outputs, strict=True)))
        return type(out)(map(gather_map, zip(*outputs, strict=True)))
    return gather_map(outputs)
