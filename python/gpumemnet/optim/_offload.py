"""Optimizer offload (ZeRO-Offload's scheme, on one device): Adam/AdamW/SGD(..., offload="cpu").

The device keeps the parameters (in their own dtype: float32, or bfloat16/float16 for half the bytes) and their
gradients; the host keeps, in pinned memory, an fp32 master copy of every parameter and the optimizer's state.
A step, parameter by parameter (each parameter is one bucket: the pinned caching allocator makes its transient
buffers free after the first step, and the host holds at most one parameter's staging at a time):
  1. the gradient is copied down (device -> pinned host, in its own dtype: one transfer, no temporary);
  2. the fused CPU kernel (kernels/cpu/optim.c: multithreaded, vectorised) updates the fp32 master and state;
  3. the parameter is copied up.
For fp32 parameters the kernel reads the host gradient and step 3 copies the master. For half parameters Adam
runs one mixed-dtype pass (adam_step_mixed): it reads the half gradient from the staging buffer, updates the fp32
master and state, and writes the parameter rounded to its dtype back over the gradient in that buffer, which step
3 copies up; SGD widens the gradient on the host and rounds the master into a second buffer (two more passes).
So the device holds exactly what it held without offload minus the optimizer state (and, for half
parameters, half the parameter and gradient bytes); the host holds masters + state + one parameter's staging.

By default the copies happen in step(), synchronously. overlap_grad_copies() instead copies each gradient down
as backward produces it (a post-accumulate-grad hook), on the device's copy stream (csrc/cuda.c _copy_async):
the copy waits for the kernel that produced the gradient and runs beside the rest of backward; step() waits for
each before using it. The price: the host holds every parameter's staging buffer from its hook to the step
(the gradient bytes, in the device's dtype) instead of one at a time, and under gradient accumulation each
gradient crosses once per micro-batch. A pre-accumulation hook makes the compute stream wait for the previous
micro-batch's copy of a gradient before backward accumulates into it again.

What the user sees is unchanged: state_dict() has the keys and values it has without offload (its tensors are
the host ones), load_state_dict() fills host state, gm.save/gm.load round-trip it. The fp32 masters are not in
the state dict (PyTorch's optimizers have none): a master is (re)made from its parameter on the parameter's
first step, after load_state_dict, and whenever the parameter was changed outside the optimizer (its version
moved), so that `model.load_state_dict(...)` or `p.data.copy_(...)` are never overwritten by a stale master.
For half parameters the master's bits below the half precision are not saved (the model's half parameters
are then all there is, as in PyTorch's own half training).

On a model whose parameters are on the CPU there is nothing to offload: the optimizer runs as without it, after
a one-time note. On meta (an estimate) the host buffers are counted as "meta-host" (_core/offload.py)."""
import warnings

from .. import _C
from .._core import offload as _off
from .._core.dtype import as_dtype
from .._core.scope import category

__all__ = ["OffloadMixin"]

_F32 = as_dtype("float32").code


def _staged(dst, src, dev_t, cat, transfer, down):
    """Copy between the device tensor dev_t (src when down, dst when up) and a host fp32 tensor, in the device's
    dtype across the link: transfer(dst, src) moves the bytes between device and host (copy_to_host/to_device
    count them in bytes_moved, _C.copy_ does not) and, for a half dev_t, a host buffer of its dtype (tagged cat)
    holds them while the host widens (down) or rounds (up) there, so the link carries half the bytes."""
    if dev_t._dtype == _F32:
        transfer(dst, src)
        return
    with category(cat):
        stage = _off.host_empty(dev_t.shape, dev_t._dtype, dev_t._device)
    if down:
        transfer(stage, src)
        _C.copy_(dst, stage)
    else:
        _C.copy_(stage, src)
        transfer(dst, stage)


class OffloadMixin:
    """The host side of an offloading optimizer. A subclass calls _init_offload(offload) in __init__ and, in
    _step_group, hands a group's (params, grads) to _offloaded(...) when self._offloads(params)."""

    def _init_offload(self, offload):
        if offload not in (None, "cpu"):
            raise ValueError(f"{type(self).__name__}: offload must be None or 'cpu', got {offload!r}")
        self.offload = offload
        self._masters = {}   # parameter -> its fp32 master on the host
        self._synced = {}    # parameter -> its _version right after the step's upload
        self._noted_cpu = False
        self._early = {}     # parameter -> (staging buffer, gradient, its _version) copied down by its hook
        self._overlap_handles = []

    def overlap_grad_copies(self, enabled=True):
        """Copy each offloaded parameter's gradient down as backward produces it, overlapped with the rest of
        backward on the device's copy stream (see the module's docstring); enabled=False goes back to copying
        in step(). Returns the optimizer, so that a factory can be one expression: gm.memory.estimate(...,
        optimizer=lambda ps: Adam(ps, offload="cpu").overlap_grad_copies()) runs it on meta and counts the
        gradients' host staging and their copies per micro-batch (Estimate.host_peak, bytes_overlapped)."""
        for h in self._overlap_handles:
            h.remove()
        self._overlap_handles, self._early = [], {}
        if not enabled or getattr(self, "offload", None) is None:
            return self
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and _off.host_device(p._device) is not None:
                    self._overlap_handles.append(p.register_hook(self._before_accumulate(p)))
                    self._overlap_handles.append(p.register_post_accumulate_grad_hook(self._grad_ready))
        return self

    def _before_accumulate(self, p):
        def hook(grad):
            early = self._early.get(p)
            dev = early[1]._device if early is not None else ""
            if dev.startswith("cuda"):  # backward writes into the gradient the copy stream may still read
                _C._copy_wait(early[0], int(dev.partition(":")[2] or 0))
            return None
        return hook

    def _grad_ready(self, p):
        g = p.grad
        if g is None or not g.is_contiguous():
            return  # step() copies it
        early = self._early.get(p)
        stage = early[0] if early is not None and early[0]._dtype == g._dtype else None
        if stage is None:
            with category("gradient"):
                stage = _off.host_empty(g.shape, g._dtype, p._device)
        _off.copy_to_host_async(stage, g)
        self._early[p] = (stage, g, g._version)

    def _early_grad(self, p, g):
        """The host copy of g its hook started, waited for; None when there is none or g changed since."""
        early = self._early.pop(p, None)
        if early is None or early[1] is not g or g._version != early[2]:
            return None
        _C._copy_wait(early[0])
        return early[0]

    def _offloads(self, params):
        if getattr(self, "offload", None) is None or not params:
            return False
        if _off.host_device(params[0]._device) is not None:
            return True
        if not self._noted_cpu:
            self._noted_cpu = True
            warnings.warn(f"{type(self).__name__}(offload='cpu'): the parameters are on {params[0]._device}, "
                          f"already host memory; the optimizer runs as without offload", UserWarning, stacklevel=4)
        return False

    # ---- host buffers ------------------------------------------------------------------------------------------
    def _host_state(self, p, key, zero=True):
        """A fp32 state tensor for p in pinned host memory, tagged "optimizer", zero-filled unless the step
        writes it first."""
        with category("optimizer"):
            t = _off.host_empty(p.shape, _F32, p._device)
        if zero and t._device != "meta":
            _C.fill_(t, 0)
        if p._name:
            t._name = f"{key}({p._name})"
        return t

    def _master(self, p):
        """p's fp32 master on the host, (re)made from p when it has none or p changed outside the optimizer."""
        m = self._masters.get(p)
        if m is not None and self._synced.get(p) == p._version:
            return m
        if m is None:
            m = self._masters[p] = self._host_state(p, "master", zero=False)
        # One-time (per resync) download, not part of a step's traffic: not counted in bytes_moved.
        _staged(m, p, p, "workspace", _C.copy_, down=True)
        return m

    def _host_grad(self, g, device):
        """g copied down, as fp32 on the host (tagged "gradient": the step's transient copy)."""
        if not g.is_contiguous():
            g = g.contiguous()
        with category("gradient"):
            gh = _off.host_empty(g.shape, _F32, device)
        _staged(gh, g, g, "gradient", _off.copy_to_host, down=True)
        return gh

    def _upload(self, p, master):
        _staged(p, master, p, "workspace", _off.copy_to_device, down=False)
        self._synced[p] = p._version

    def _offloaded(self, params, grads, prepare, update, mixed=None):
        """Every parameter's master and state first (prepare(p) makes p's state), so that the first step holds
        what every later one holds; then for each parameter: gradient down, update(p, master, host_grad) on the
        host, master up. With mixed(p, master, stage) (Adam), a half parameter takes one fused pass instead: its
        gradient comes down into a staging buffer in its own dtype, the kernel reads it and writes the rounded
        parameter over it, and the buffer goes up: no fp32 copy of the gradient, no separate rounding pass."""
        masters = []
        for p in params:
            masters.append(self._master(p))
            prepare(p)
        for p, g, master in zip(params, grads, masters):
            early = self._early_grad(p, g) if self._early else None
            if mixed is not None and p._dtype != _F32 and g._dtype == p._dtype:
                stage = early
                if stage is None:
                    if not g.is_contiguous():
                        g = g.contiguous()
                    with category("gradient"):
                        stage = _off.host_empty(g.shape, g._dtype, p._device)
                    _off.copy_to_host(stage, g)
                mixed(p, master, stage)
                _off.copy_to_device(p, stage)
                self._synced[p] = p._version
                del stage
                continue
            if early is None:
                gh = self._host_grad(g, p._device)
            elif g._dtype == _F32:
                gh = early
            else:  # widened on the host, as _host_grad does after its copy
                with category("gradient"):
                    gh = _off.host_empty(g.shape, _F32, p._device)
                _C.copy_(gh, early)
            del early
            update(p, master, gh)
            del gh
            self._upload(p, master)

    # ---- state_dict --------------------------------------------------------------------------------------------
    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._synced.clear()  # masters are remade from the parameters at the next step

    def _adopt(self, p, key, value, existing):
        if getattr(self, "offload", None) is None or _off.host_device(p._device) is None:
            return super()._adopt(p, key, value, existing)
        dst = existing
        if not (isinstance(dst, _C.TensorBase) and tuple(dst.shape) == tuple(p.shape) and dst._dtype == _F32):
            dst = self._host_state(p, key, zero=False)
        if dst._device != "meta":
            if value._device == "meta":
                raise ValueError(f"load_state_dict: state {key!r} is a meta tensor (no data) but the parameter is "
                                 f"on {p._device}")
            _C.copy_(dst, value)
        return dst
