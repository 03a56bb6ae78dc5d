"""Autocast (layer 1, core): the per-thread state, the context manager, and the casts the ops apply.

It lives in the core because Tensor's own methods (matmul, exp, sum...) apply the policy; gpumemnet.amp
re-exports it beside GradScaler. The state is per thread, as in PyTorch.

Autocast policy, applied by the ops themselves through `lower()` and `fp32()`:
  - lower precision (the autocast dtype): conv2d, conv_transpose2d, linear, matmul — the ops whose saved inputs
    dominate activation memory and whose kernels gain most;
  - float32 on both devices (`fp32`): the losses and prod; on CUDA only (`fp32_on_cuda`, PyTorch's CUDA list
    less its CPU one): softmax, log_softmax, softplus, sum, mean, var, std, exp, log, reciprocal, group_norm and
    layer_norm (their output too), which under CPU autocast follow their input as PyTorch's CPU autocast does;
    batch_norm and instance_norm follow their input on both (statistics in float32 or wider inside the kernel);
  - every other op follows its inputs, and binary ops promote (float16 + float32 -> float32).
Casts of leaf tensors that require grad (parameters) are cached for the outermost autocast region, so a weight used
by several ops is converted once; the bfloat16 gradient of such a cast goes to the float32 parameter as it is and is
widened while it is added into .grad (functions.ToDtype.backward: one pass, no float32 copy). On a CPU without
bfloat16 products a one-group conv2d takes the float32 weight and bias uncast and rounds them as it widens them
(nn/_functional_conv.py _keeps_f32_weight), so there is no cast to cache. On the CPU bfloat16 linear layers multiply
bfloat16 operands directly (kernels/cpu/gemm_bf16.c: AMX or AVX512-BF16 where the CPU has them, float32 sums, each
result rounded once), and so do the convolution passes where that is measured faster, on AMX only
(kernels/cpu/conv_half.c, bf16_on_gemm; every stride-1 pass on the tile unit, conv_half_amx.c;
GPUMEMNET_BF16_CONV=amx, =gemm or =widen forces a route); otherwise the low-precision tensors are stored as
float16/bfloat16 and the kernels compute in float32. Batch norm, relu/relu6 (the other activations through L1 tiles)
and 2x2 max pooling read and write bfloat16 directly on AVX-512 (kernels/cpu/nn_bf16.c, pool_2x2.c), so the ops
between two convolutions make no float32 copy. A meta tensor counts as being on every device, so estimates on meta
follow the policy of the device they stand in for.
"""
import contextlib
import functools
import threading
import warnings

from .. import _C
from .dtype import as_dtype, float16, bfloat16, float32, float64

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype"]

_DEFAULT_DTYPE = {"cuda": float16, "cpu": bfloat16}


class _State(threading.local):
    """This thread's autocast state (threading.local runs __init__ once per thread: each starts disabled). The
    per-op check is one attribute read, `_state.enabled` (see _core/state.py for its cost)."""

    def __init__(self):
        self.enabled = False
        self.device = None
        self.dtype = None
        self.depth = 0      # nesting of enabled regions: the cache lives as long as the outermost
        self.cache = {}
        self.cache_enabled = True
        self.fast = {}      # device type -> the dtype set_dtype chose for it (torch.set_autocast_dtype)
        self.meta_stands_for = None  # set_meta_stands_for


_state = _State()


_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                 "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


def check_device_type(device_type, op):
    """device_type, checked as PyTorch checks the device_type argument of its autocast functions."""
    if not isinstance(device_type, str):
        raise TypeError(f"{op}(): argument 'device_type' must be str, not {type(device_type).__name__}")
    if device_type not in _DEVICE_TYPES:
        raise RuntimeError(f"{op}: expected one of {', '.join(_DEVICE_TYPES)} device type at start of device "
                           f"string: {device_type}")
    return device_type


def set_meta_stands_for(device_type):
    """While an estimate replays a step on meta on this thread (gpumemnet.memory.estimator sets it, and sets the
    previous value back after): autocast("meta", ...) means autocast(device_type, ...), so that a forward opening
    a region for its own input's device (x-transformers' and rotary embeddings' `with autocast(t.device.type,
    enabled=False)`) gets the region of the device the estimate stands for. None: "meta" is refused, as PyTorch
    refuses a device type autocast does not know. Returns the previous value."""
    prev, _state.meta_stands_for = _state.meta_stands_for, device_type
    return prev


def is_autocast_enabled(device_type=None):
    return _state.enabled and (device_type is None or device_type == _state.device)


def get_autocast_dtype(device_type=None):
    """The dtype autocast lowers to on device_type: the active region's when it is for that device type, else the
    device type's default (float16 on cuda, bfloat16 on cpu), as torch.get_autocast_dtype answers. Without a
    device_type: the active region's, or None outside one."""
    if device_type is None:
        return _state.dtype if _state.enabled else None
    if device_type not in _DEFAULT_DTYPE:
        raise ValueError(f"get_autocast_dtype: device_type must be 'cpu' or 'cuda', got {device_type!r}")
    if is_autocast_enabled(device_type):
        return _state.dtype
    return _state.fast.get(device_type, _DEFAULT_DTYPE[device_type])


# The state as PyTorch's functions set it outside a `with autocast(...)` (torch.set_autocast_enabled and its
# kin, gpumemnet/_aliases.py). One device type is autocast at a time here (PyTorch keeps one state per device
# type): enabling one replaces the other, and disabling a device type that is not the enabled one changes nothing.
def set_enabled(device_type, enabled):
    s = _state
    if enabled:
        s.dtype = get_autocast_dtype(device_type)
        s.enabled, s.device = True, device_type
    elif s.device == device_type:
        s.enabled = False


def set_dtype(device_type, dtype):
    """The dtype device_type's regions lower to from now on, this region's too when it is for device_type."""
    _state.fast[device_type] = dtype
    if is_autocast_enabled(device_type):
        _state.dtype = dtype


def cache_enabled():
    return _state.cache_enabled


def set_cache_enabled(enabled):
    _state.cache_enabled = bool(enabled)


def clear_cache():
    _state.cache.clear()


def increment_nesting():
    _state.depth += 1
    return _state.depth


def decrement_nesting():
    _state.depth -= 1
    return _state.depth


class autocast:
    """with gm.autocast("cuda", dtype=gm.float16): ...  (also usable as a decorator). Nestable; the previous
    state is restored on exit, even when the body raises."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == "meta" and _state.meta_stands_for is not None:
            device_type = _state.meta_stands_for
        if device_type not in ("cpu", "cuda"):
            raise _C.ArgumentError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        if dtype is None:
            dtype = get_autocast_dtype(device_type)  # the default, or what torch.set_autocast_dtype chose
        dtype = as_dtype(dtype, "autocast(dtype)")
        if device_type == "cuda" and enabled and _state.meta_stands_for != "cuda" and _C._cuda_device_count() == 0:
            # PyTorch's words and behaviour: a script written for a GPU runs its autocast regions in full precision
            # on a machine without one. An estimate for "cuda" (meta standing for it) keeps the region.
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
            enabled = False
        if dtype not in (float16, bfloat16) and enabled:  # PyTorch's: a warning, and autocast off (opacus enters
            dev = device_type.upper()                      # autocast(dtype=activations.dtype), int64 for an Embedding)
            order = "torch.bfloat16, torch.float16" if device_type == "cpu" else "torch.float16, torch.bfloat16"
            warnings.warn(f"In {dev} autocast, but the target dtype is not supported. Disabling autocast.\n{dev} "
                          f"Autocast only supports dtypes of {order} currently.", stacklevel=2)
            enabled = False
        self.device_type = self.device = device_type  # .device, .fast_dtype, ._enabled: PyTorch's attribute names
        self.dtype = self.fast_dtype = dtype
        self.enabled = self._enabled = bool(enabled)
        self.cache_enabled = self._cache_enabled = _state.cache_enabled if cache_enabled is None else cache_enabled

    def __enter__(self):
        s = _state
        self._prev = (s.enabled, s.device, s.dtype, s.cache_enabled, dict(s.fast))
        if self.enabled:
            s.depth += 1
            s.enabled, s.device, s.dtype = True, self.device_type, self.dtype
        elif s.device == self.device_type:  # a region for another device type leaves this one's as it is
            s.enabled = False
        s.cache_enabled = bool(self.cache_enabled)
        return self

    def __exit__(self, *exc):
        s = _state
        if self.enabled:
            s.depth -= 1
            if s.depth == 0:
                s.cache.clear()  # the cached low-precision weights die with the outermost region
        s.enabled, s.device, s.dtype, s.cache_enabled, s.fast = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


def _applies(t):
    d = t._device
    return d == "meta" or d.split(":")[0] == _state.device


def _cast(t, dtype):
    if t.requires_grad and t.grad_fn is None and _state.cache_enabled:  # a parameter: convert once per region
        key = (id(t), t._version, dtype.code)
        hit = _state.cache.get(key)
        if hit is not None and hit[0] is t:
            return hit[1]
        out = t.to(dtype)
        _state.cache[key] = (t, out)
        return out
    return t.to(dtype)


def cast_source(t):
    """The parameter that t is this region's cached cast of, or None. An op may keep the parameter for its backward
    instead of t and cast it again there (nn/_functional_conv.py): the half copy then lives only while the op's
    backward runs instead of from the forward to the end of backward, and the cast gives the same bits again."""
    node = t.grad_fn
    if not _state.cache or node is None or not node._edges or node._edges[0] is None:
        return None
    leaf = getattr(node._edges[0][0], "variable", None)
    if leaf is None:
        return None
    key = (id(leaf), leaf._version, t._dtype)
    hit = _state.cache.get(key)
    if hit is None or hit[0] is not leaf or hit[1] is not t:
        return None
    del _state.cache[key]  # the op keeps the parameter: a later use casts again rather than keep t to the end
    return leaf


def lower(*tensors):
    """Inputs of a lower-precision op, cast to the autocast dtype (floating tensors on the autocast device). float64
    tensors are left as they are, as PyTorch's autocast leaves them (its is_eligible: floating and not double), so
    a model.double() run under autocast stays a float64 run."""
    if not _state.enabled:
        return tensors
    dt = _state.dtype
    return tuple(_cast(t, dt) if t is not None and isinstance(t, _C.TensorBase) and t._dtype in (0, 2, 3) and
                 t._dtype != dt.code and _applies(t) else t for t in tensors)


def fp32(*tensors):
    """Inputs of a float32 op: low-precision floating tensors are widened to float32."""
    if not _state.enabled:
        return tensors
    return tuple(_cast(t, float32) if t is not None and isinstance(t, _C.TensorBase) and t._dtype in (2, 3) and
                 _applies(t) else t for t in tensors)


def promote(*tensors):
    """Inputs of an op on autocast's promote list (index_copy; cat and stack promote by themselves): floating tensors
    of several dtypes cast to the widest (float64 if one is, else float32), as PyTorch's autocast does."""
    if not _state.enabled:
        return tensors
    codes = {t._dtype for t in tensors if isinstance(t, _C.TensorBase) and t._dtype <= 3 and _applies(t)}
    if len(codes) < 2:
        return tensors
    wide = float64 if 1 in codes else float32
    return tuple(_cast(t, wide) if isinstance(t, _C.TensorBase) and t._dtype <= 3 and t._dtype != wide.code and
                 _applies(t) else t for t in tensors)


def float32_op(fn):
    """A function on both of PyTorch's autocast float32 lists (the losses composed of other ops): its half tensor
    arguments are widened first, so its result is float32 whatever its parts do."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _state.enabled:
            args = fp32(*args)
            kwargs = dict(zip(kwargs, fp32(*kwargs.values())))
        return fn(*args, **kwargs)
    return wrapper


def fp32_on_cuda(*tensors):
    """Inputs of an op on PyTorch's CUDA float32 list but not on its CPU one (softmax, log_softmax, softplus,
    layer_norm, group_norm, exp, log, sum, mean, var, std, reciprocal, the inverse trigonometric and hyperbolic
    functions...): widened under a CUDA region; under a CPU region they follow their inputs, as PyTorch's CPU
    autocast leaves them (a bfloat16 input gives a bfloat16 result, computed in float32 inside the kernel)."""
    if not _state.enabled or _state.device != "cuda":
        return tensors
    return fp32(*tensors)


def _capture():
    """The autocast state, for checkpoint to replay during recomputation."""
    return (_state.enabled, _state.device, _state.dtype)


@contextlib.contextmanager
def _replay(captured):
    enabled, device, dtype = captured
    if not enabled:
        with autocast(_state.device or "cpu", enabled=False):
            yield
    else:
        with autocast(device, dtype):
            yield


@contextlib.contextmanager
def suspended():
    """No autocast region at all while it runs, not even an outer one's cache of cast weights (an estimate made
    inside the caller's region runs its own regions as a script's: each one's cache dies with it); the caller's
    state is back after."""
    s = _state
    saved = (s.enabled, s.device, s.dtype, s.depth, s.cache)
    s.enabled, s.device, s.dtype, s.depth, s.cache = False, None, None, 0, {}
    try:
        yield
    finally:
        s.enabled, s.device, s.dtype, s.depth, s.cache = saved
