"""GradScaler (layer 2, amp): loss scaling with a fused unscale and inf/nan check.

GradScaler("cuda") (the default, and gm.cuda.amp.GradScaler) on a machine without CUDA warns and disables
itself, as PyTorch's does: scale() then returns the loss as it is and step() is optimizer.step()."""
import enum
import warnings

from .. import _C

__all__ = ["GradScaler", "OptState"]


_FLOAT32_MAX = 3.4028234663852886e38


class OptState(enum.Enum):
    """Where an optimizer is in the current step (PyTorch's; fastai imports it)."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


# ---- loss scaling --------------------------------------------------------------------------------------
_READY, _UNSCALED, _STEPPED = OptState.READY, OptState.UNSCALED, OptState.STEPPED


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
        if self._enabled and str(device).split(":")[0] == "cuda" and _C._cuda_device_count() == 0:
            # PyTorch's behaviour and words: a scaler for CUDA on a machine without it would only cost time
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)
            self._enabled = False
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._scaled = False
        self._per_optimizer = {}  # id(optimizer) -> [stage, found_inf, gradients checked]

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
            # by a 0-d float32 tensor, as PyTorch's: a float16 or bfloat16 0-d loss becomes float32 (a Python number
            # would keep it in float16, where 65536 x loss overflows), a batch of outputs keeps its dtype
            scale = _C.empty((), 0, outputs._device)  # dtype code 0: float32
            _C.fill_(scale, self._scale)
            return outputs * scale
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
        grads = self._grads(optimizer)
        if any(g._dtype == 2 for g in grads):  # PyTorch's refusal: a float16 gradient cannot hold the scaled values
            raise ValueError("Attempting to unscale FP16 gradients.")
        found = _C.amp_unscale_(grads, 1.0 / self._scale)
        self._per_optimizer[id(optimizer)] = [_UNSCALED, bool(found), len(grads)]

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
        if not st[2]:  # PyTorch's assertion: no gradient was checked, the step would be blind
            raise AssertionError("No inf checks were recorded for this optimizer.")
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
                    # the scale is float32 in PyTorch: it grows only while the grown value stays finite there
                    if self._scale * self._growth_factor <= _FLOAT32_MAX:
                        self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer.clear()
        self._scaled = False

    # PyTorch's accessors of the schedule
    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        return self._growth_tracker if self._enabled else 0

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
