"""Mixed precision: autocast (one policy table) and GradScaler (loss scaling with a fused unscale).

Autocast policy, applied by the ops themselves through `lower()` and `fp32()`:
  - lower precision (the autocast dtype): conv2d, conv_transpose2d, linear, matmul — the ops whose saved inputs
    dominate activation memory and whose kernels gain most;
  - float32: softmax, log_softmax, the losses, reductions, the statistics of normalisations, exp and log;
  - every other op follows its inputs, and binary ops promote (float16 + float32 -> float32).
Casts of leaf tensors that require grad (parameters) are cached for the outermost autocast region, so a weight
used by several ops is converted once. On the CPU the low-precision tensors are stored as float16/bfloat16 and
the kernels compute in float32. A meta tensor counts as being on every device, so estimates on meta follow the
policy of the device they stand in for.
"""
import contextlib
import functools

from . import _C
from ._dtype import as_dtype, float16, bfloat16, float32

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype"]

_DEFAULT_DTYPE = {"cuda": float16, "cpu": bfloat16}


class _State:
    __slots__ = ("enabled", "device", "dtype", "depth", "cache")

    def __init__(self):
        self.enabled = False
        self.device = None
        self.dtype = None
        self.depth = 0      # nesting of enabled regions: the cache lives as long as the outermost
        self.cache = {}


_state = _State()


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
    return _state.dtype if is_autocast_enabled(device_type) else _DEFAULT_DTYPE[device_type]


class autocast:
    """with gm.autocast("cuda", dtype=gm.float16): ...  (also usable as a decorator). Nestable; the previous
    state is restored on exit, even when the body raises."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=True):
        if device_type not in ("cpu", "cuda"):
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        if dtype is None:
            dtype = _DEFAULT_DTYPE[device_type]
        dtype = as_dtype(dtype, "autocast(dtype)")
        if dtype not in (float16, bfloat16):
            raise ValueError(f"autocast: dtype must be gpumemnet.float16 or gpumemnet.bfloat16, got {dtype!r}")
        self.device_type = device_type
        self.dtype = dtype
        self.enabled = bool(enabled)
        self.cache_enabled = cache_enabled

    def __enter__(self):
        s = _state
        self._prev = (s.enabled, s.device, s.dtype)
        if self.enabled:
            s.depth += 1
            s.enabled, s.device, s.dtype = True, self.device_type, self.dtype
        else:
            s.enabled = False
        return self

    def __exit__(self, *exc):
        s = _state
        if self.enabled:
            s.depth -= 1
            if s.depth == 0:
                s.cache.clear()  # the cached low-precision weights die with the outermost region
        s.enabled, s.device, s.dtype = self._prev
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
    from ._tensor import Tensor
    if t.requires_grad and t.grad_fn is None:  # a parameter: convert once per region
        key = (id(t), t._version, dtype.code)
        hit = _state.cache.get(key)
        if hit is not None and hit[0] is t:
            return hit[1]
        out = Tensor.to(t, dtype)
        _state.cache[key] = (t, out)
        return out
    return Tensor.to(t, dtype)


def lower(*tensors):
    """Inputs of a lower-precision op, cast to the autocast dtype (floating tensors on the autocast device)."""
    if not _state.enabled:
        return tensors
    dt = _state.dtype
    return tuple(_cast(t, dt) if t is not None and isinstance(t, _C.TensorBase) and t._dtype <= 3 and
                 t._dtype != dt.code and _applies(t) else t for t in tensors)


def fp32(*tensors):
    """Inputs of a float32 op: low-precision floating tensors are widened to float32."""
    if not _state.enabled:
        return tensors
    return tuple(_cast(t, float32) if t is not None and isinstance(t, _C.TensorBase) and t._dtype in (2, 3) and
                 _applies(t) else t for t in tensors)


def _capture():
    """The autocast state, for checkpoint to replay during recomputation."""
    return (_state.enabled, _state.device, _state.dtype)


@contextlib.contextmanager
def _replay(captured):
    enabled, device, dtype = captured
    if not enabled:
        with autocast("cpu", enabled=False):
            yield
    else:
        with autocast(device, dtype):
            yield


# ---- loss scaling --------------------------------------------------------------------------------------
_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """Scale the loss so small float16 gradients do not flush to zero; unscale with one fused pass that also
    finds inf/nan; skip the optimizer step when there are any, and adapt the scale.

    The loop of story 002, with gm names:
        with gm.autocast("cuda"):
            loss = loss_fn(net(x), y)
        scaler.scale(loss / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            scaler.step(opt); scaler.update(); opt.zero_grad()
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if isinstance(device, (int, float)) and not isinstance(device, bool):  # GradScaler(2.**10) positional
            init_scale, device = device, "cuda"
        if init_scale <= 0:
            raise ValueError(f"GradScaler: init_scale must be positive, got {init_scale}")
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval!r}")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._scaled = False
        self._per_optimizer = {}  # id(optimizer) -> [stage, found_inf]

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """outputs * scale (a tensor, or a list/tuple of them)."""
        if not self._enabled:
            return outputs
        self._scaled = True
        if isinstance(outputs, _C.TensorBase):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: expected a tensor or a list/tuple of tensors, got "
                        f"{type(outputs).__name__}")

    def _grads(self, optimizer):
        grads = []
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if not g._is_contiguous():
                    p.grad = g = g.contiguous()
                grads.append(g)
        return grads

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale in place (one fused pass that also looks for inf/nan).
        Call it before clipping gradients; step() calls it otherwise. At most once per update()."""
        if not self._enabled:
            return
        st = self._per_optimizer.get(id(optimizer))
        if st is not None and st[0] == _UNSCALED:
            raise RuntimeError("GradScaler.unscale_: already called on this optimizer since the last update(); "
                               "the gradients would be divided by the scale twice")
        if st is not None and st[0] == _STEPPED:
            raise RuntimeError("GradScaler.unscale_: called after step(); call update() first")
        if not self._scaled:
            raise RuntimeError("GradScaler.unscale_: no loss was scaled with scale() since the last update(); "
                               "call scaler.scale(loss).backward() first")
        found = _C.amp_unscale_(self._grads(optimizer), 1.0 / self._scale)
        self._per_optimizer[id(optimizer)] = [_UNSCALED, bool(found)]

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and run optimizer.step(), unless a gradient holds inf/nan: then the step
        is skipped (returns None) and update() will lower the scale."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if not self._scaled:
            raise RuntimeError("GradScaler.step: called before scale(); scale the loss and call backward() on "
                               "it first (scaler.scale(loss).backward())")
        st = self._per_optimizer.get(id(optimizer))
        if st is not None and st[0] == _STEPPED:
            raise RuntimeError("GradScaler.step: already called on this optimizer since the last update()")
        if st is None:
            self.unscale_(optimizer)
            st = self._per_optimizer[id(optimizer)]
        st[0] = _STEPPED
        if st[1]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Back off after an inf/nan; grow after growth_interval clean steps in a row."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif self._per_optimizer:
            if any(st[1] for st in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer.clear()
        self._scaled = False

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state):
        if not self._enabled:
            return
        if not state:
            raise RuntimeError("GradScaler.load_state_dict: the state is empty (saved from a disabled scaler?)")
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} - set(state)
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing keys {sorted(missing)}")
        self._scale = float(state["scale"])
        self._growth_factor = float(state["growth_factor"])
        self._backoff_factor = float(state["backoff_factor"])
        self._growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])
