"""torch.amp.custom_fwd / custom_bwd: decorators for the forward and backward of a custom autograd.Function under
autocast (PyTorch's semantics). custom_fwd(cast_inputs=dtype) runs forward with autocast off and its floating
tensor arguments cast to dtype where autocast is on; without cast_inputs forward runs under the caller's autocast.
custom_bwd runs backward under the autocast state forward ran in (its dtype too; off after cast_inputs), as
PyTorch's does."""
import functools

from .._core.autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .._core.tensor import Tensor


def _cast(x, dtype):
    if isinstance(x, Tensor) and x.dtype.is_floating_point and x.dtype != dtype:
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _cast(v, dtype) for k, v in x.items()}
    return x


def custom_fwd(fwd=None, *, device_type="cuda", cast_inputs=None):
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        enabled = is_autocast_enabled(device_type)
        ctx = args[0] if args else None
        if ctx is not None:
            try:  # backward's autocast: forward's, except where forward ran with it off on cast inputs
                ctx._fwd_used_autocast = enabled and cast_inputs is None
                ctx._dtype = get_autocast_dtype(device_type)
            except AttributeError:
                pass  # the ctx of an unrecorded call takes no attributes
        if cast_inputs is None or not enabled:
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(*_cast(args, cast_inputs), **_cast(kwargs, cast_inputs))
    return forward


def custom_bwd(bwd=None, *, device_type="cuda"):
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(*args, **kwargs):
        used = getattr(args[0], "_fwd_used_autocast", False) if args else False
        with autocast(device_type, dtype=getattr(args[0], "_dtype", None) if args else None, enabled=used):
            return bwd(*args, **kwargs)
    return backward
