"""gm.autograd (the package's face, layer 4): PyTorch's torch.autograd names, re-exported from the core.

The engine and Function live in gpumemnet/_core/autograd.py; this package gives them their public path
(gm.autograd.Function, gm.autograd.grad, gm.autograd.graph.saved_tensors_hooks, graph.save_on_cpu...) and adds
what torch.autograd has beside them: the submodules graph, functional (jacobian, vjp, hessian, vhp, hvp, jvp),
gradcheck and profiler (gpumemnet.profiler's older API), and the legacy Variable. Each submodule imports as torch's does (`import torch.autograd.graph`)."""
from .._core.autograd import (  # noqa: F401
    Function, backward, grad, no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
    is_inference_mode_enabled)
from .._core.state import anomaly as _anomaly
from . import forward_ad, function, functional, graph, profiler  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .variable import Variable  # noqa: F401

__all__ = ["Function", "function", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "is_inference_mode_enabled", "graph", "functional", "profiler", "gradcheck",
           "gradgradcheck", "Variable",
           "set_detect_anomaly", "detect_anomaly"]


class set_detect_anomaly:
    """Anomaly detection on (mode=True) or off, as a call or a context manager (which restores the previous
    setting). While on, every backward checks each gradient a node returns and raises RuntimeError naming the node
    whose gradient holds a NaN (check_nan=False: no check). PyTorch also prints the forward's traceback of that
    node; gpumemnet names the node only. The check reads every gradient once: slower, as in PyTorch."""

    def __init__(self, mode, check_nan=True):
        self.prev = (_anomaly.enabled, _anomaly.check_nan)
        _anomaly.enabled, _anomaly.check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _anomaly.enabled, _anomaly.check_nan = self.prev
        return False


class detect_anomaly(set_detect_anomaly):
    """Context manager (or decorator-free block) with anomaly detection on: see set_detect_anomaly."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = None

    def __enter__(self):
        self.prev = (_anomaly.enabled, _anomaly.check_nan)
        _anomaly.enabled, _anomaly.check_nan = True, bool(self.check_nan)
        return None


def is_anomaly_enabled():
    return _anomaly.enabled


def is_anomaly_check_nan_enabled():
    return _anomaly.check_nan


def _profiler_enabled():
    """Whether a profiler records now (torch.autograd._profiler_enabled: Lightning's PyTorchProfiler asks)."""
    from ..profiler._recorder import _recorder  # noqa: PLC0415  (the profiler sits above autograd)
    return bool(_recorder.sessions)
