"""torch.nn._reduction: the reduction names' enum and the legacy size_average / reduce arguments' translation,
which loss modules written for PyTorch import (torchbnn: `from torch.nn import _reduction as _Reduction`)."""
import warnings

from ._args import check_reduction

__all__ = ["get_enum", "legacy_get_string", "legacy_get_enum"]


def get_enum(reduction):
    """'none' -> 0, 'mean' -> 1, 'sum' -> 2 (PyTorch's enum); 'elementwise_mean' is 'mean', with its warning."""
    if reduction == "none":
        return 0
    if reduction == "mean":
        return 1
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.", stacklevel=2)
        return 1
    if reduction == "sum":
        return 2
    raise ValueError(f"{reduction} is not a valid value for reduction")


def legacy_get_string(size_average, reduce, emit_warning=True):
    """The reduction the deprecated (size_average, reduce) pair means: None counts as True."""
    ret = check_reduction("mean", size_average, reduce)
    if emit_warning:
        warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                      stacklevel=2)
    return ret


def legacy_get_enum(size_average, reduce, emit_warning=True):
    return get_enum(legacy_get_string(size_average, reduce, emit_warning))
