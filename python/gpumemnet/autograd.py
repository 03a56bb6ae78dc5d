"""gm.autograd (the package's face, layer 4): PyTorch's torch.autograd names, re-exported from the core.

The engine and Function live in gpumemnet/_core/autograd.py; this module only gives them their public path
(gm.autograd.Function, gm.autograd.grad, gm.autograd.graph.saved_tensors_hooks, graph.save_on_cpu...)."""
from ._core.autograd import (  # noqa: F401
    Function, backward, grad, no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled)
from ._core.autograd import __all__  # noqa: F401
from ._core.autograd import graph as _core_graph
from ._core.offload import save_on_cpu as _save_on_cpu
from ._core.state import anomaly as _anomaly


class graph(_core_graph):
    """torch.autograd.graph: saved_tensors_hooks (the core's) and save_on_cpu (_core/offload.py, which sits above
    the core's autograd and so is attached here, at the package's face)."""
    save_on_cpu = _save_on_cpu


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
