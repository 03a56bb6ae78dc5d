"""torch.utils._foreach_utils: PyTorch's helpers for the foreach optimizer paths, which optimizer libraries import
(pytorch-optimizer): group lists of tensors by (device, dtype), and which devices have foreach / fused kernels."""
import typing

from .._core.tensor import Tensor

TensorListList = typing.List[typing.List[typing.Optional[Tensor]]]
Indices = typing.List[int]
_foreach_supported_types = [Tensor]


def _get_foreach_kernels_supported_devices():
    """The device types PyTorch has foreach kernels for (the CPU runs them as loops)."""
    return ["cuda", "xpu", "mtia", "privateuseone"]


def _get_fused_kernels_supported_devices():
    """The device types PyTorch has fused optimizer kernels for."""
    return ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", "privateuseone"]


def _device_has_foreach_support(device):
    return device.type in _get_foreach_kernels_supported_devices() + ["cpu"]


def _has_foreach_support(tensors, device):
    """Whether every tensor is exactly a Tensor (or None) on such a device. A parameter is not: it has a class of
    its own in PyTorch, while here it is a Tensor marked _is_param."""
    return _device_has_foreach_support(device) and all(
        t is None or (type(t) in _foreach_supported_types and not t._is_param) for t in tensors)


def _group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    """{(device, dtype): ([list of each input list's tensors at those positions], [positions])}, the groups keyed
    by the tensors of the first list (which must all be tensors); the other lists' entries at the same positions
    (tensors or None) go with them, as PyTorch's. The positions are listed only with with_indices. The tensors are
    the inputs themselves, so writing into them writes into the inputs."""
    if not isinstance(tensorlistlist, (list, tuple)) or not all(isinstance(tl, (list, tuple)) for tl in tensorlistlist):
        raise TypeError(f"_group_tensors_by_device_and_dtype(): tensorlistlist must be a list of lists of tensors, "
                        f"got {type(tensorlistlist).__name__}")
    if not tensorlistlist or not tensorlistlist[0]:
        raise RuntimeError("_group_tensors_by_device_and_dtype(): expected a non-empty list of non-empty tensor "
                           "lists")
    n = len(tensorlistlist[0])
    if any(len(tl) != n for tl in tensorlistlist):
        raise RuntimeError(f"_group_tensors_by_device_and_dtype(): the tensor lists must have the same length, got "
                           f"lengths {[len(tl) for tl in tensorlistlist]}")
    for tl in tensorlistlist:
        for t in tl:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"_group_tensors_by_device_and_dtype(): expected Tensors or None, got "
                                f"{type(t).__name__}")
    groups = {}
    for i, t in enumerate(tensorlistlist[0]):
        if t is None:
            raise RuntimeError(f"Tensors of the first list of nested Tensor lists are supposed to be defined but the "
                               f"{i}-th Tensor is not.")
        lists, indices = groups.setdefault((t.device, t.dtype), ([[] for _ in tensorlistlist], []))
        for j, tl in enumerate(tensorlistlist):
            lists[j].append(tl[i])
        if with_indices:
            indices.append(i)
    return groups
