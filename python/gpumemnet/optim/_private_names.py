"""The private helpers of torch.optim.optimizer that optimizer libraries written for PyTorch import (timm's ADOPT,
pytorch_optimizer, heavyball): each does here what PyTorch's does on a CPU without torch.compile."""
import typing

from .._core.autograd import set_grad_enabled
from .._core.dtype import float32, float64, get_default_dtype

ParamsT = typing.Union[typing.Iterable, typing.Iterable[dict], typing.Iterable[tuple]]  # (annotations)
_foreach_doc = _fused_doc = _capturable_doc = _differentiable_doc = _maximize_doc = ""  # docstring parts


def _get_value(x):
    """A step count as a number: a tensor's item, a number as it is."""
    return x.item() if hasattr(x, "item") and not isinstance(x, (int, float)) else x


def _stack_if_compiling(x):
    return x


def _get_scalar_dtype(is_fused=None):
    return float64 if get_default_dtype() == float64 else float32


def _get_capturable_supported_devices(supports_xla=True):
    return ["cuda"]


def _default_to_fused_or_foreach(params, differentiable, use_fused=False):
    """(fused, foreach) for the defaults: both off, as PyTorch chooses for CPU tensors."""
    return False, False


def _view_as_real(params, *state_and_grads):
    """Complex parameters as real pairs in place: gpumemnet's parameters are real, so nothing to do."""


def _disable_dynamo_if_unsupported(single_tensor_fn=None):
    return lambda func: func


def _use_grad_for_differentiable(func):
    """A step that runs with grad on only when the optimizer's group asks for differentiable=True."""
    def step(self, *args, **kwargs):
        with set_grad_enabled(self.defaults.get("differentiable", False)):
            return func(self, *args, **kwargs)
    step.__name__, step.__doc__ = func.__name__, func.__doc__
    return step


def _group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    """{(device, dtype): ([each list's tensors at the positions of that kind], the positions if with_indices)},
    by the first list's tensors, as PyTorch's foreach optimizers group their lists."""
    groups = {}
    for i, t in enumerate(tensorlistlist[0]):
        groups.setdefault((t.device, t.dtype), []).append(i)
    return {key: ([[tl[i] if tl else None for i in idx] for tl in tensorlistlist], idx if with_indices else [])
            for key, idx in groups.items()}
