"""Per-thread state of the Python layer (layer 1): grad mode, saved-tensor hooks, the modules running,
checkpoint recomputation, and whether meta ops may draw random numbers. (Autocast's is in _core/autocast.py.)

PyTorch keeps grad mode, inference mode and autocast per thread; so do we: `no_grad()` in one thread must not
stop another thread's graph. The allocator's category and scope are per thread in C (csrc/allocator.c).

Grad mode is read by every op (autograd.needs_grad), so it is a ContextVar: its get() is one C call, about 10 ns,
where a threading.local attribute costs about 50 ns (CPython 3.11, measured). Each thread starts
with its own empty context, so a new thread sees the default (grad on), as in PyTorch. (Unlike PyTorch's
thread-local, an asyncio task copies the context when it is created, so a no_grad() it enters stays its own.)

The rest, read once per module call, saved tensor or estimate rather than per op, is one threading.local:
threading.local runs __init__ once in each thread on the thread's first access, so every thread starts from
the defaults below."""
import contextvars
import os
import sys
import threading
import warnings


class _ThreadState(threading.local):
    def __init__(self):
        self.recomputing = 0      # > 0 while a checkpointed segment is recomputed for backward (utils.checkpoint)
        self.meta_draws_random = True  # False while an estimate runs here: meta dropout then draws nothing
        self.saved_tensors_hooks = []  # (pack, unpack) pairs, innermost last
        self.saved_hooks_refusal = None  # disable_saved_tensors_hooks' message: entering saved_tensors_hooks raises it
        self.retain_graph = True   # False while a backward that frees the graph runs (Function.release_saved)
        self.capturing = False     # True while autograd.grad's backward returns gradients instead of accumulating
        self.create_graph = False  # True while a backward(create_graph=True) runs: nodes record their gradients
        self.modules = []          # the modules whose forward is running, innermost last
        self.last_root = None      # (weakref to the last root module called, its input shape), for OOM advice
        self.overwritable = None   # id of the tensor a Sequential lets its next child overwrite (no_grad)


state = _ThreadState()
warned_once = set()  # the messages warn_once has said in this process


def warn_once(message, category=UserWarning, stacklevel=2):
    """PyTorch's TORCH_WARN_ONCE: `message` said once per process (at the first caller's line; stacklevel counts
    from warn_once's caller), whatever Python's warning filters have recorded since."""
    if message not in warned_once:
        warned_once.add(message)
        warnings.warn(message, category, stacklevel=stacklevel + 1)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/gpumemnet


def warn_outside(message, category=UserWarning):
    """warnings.warn naming the first line outside gpumemnet that led here (the user's call, however many of the
    package's own functions lie between: x.std() and torch.std(x) reach the same check at different depths)."""
    frame, level = sys._getframe(1), 2  # level 1 is this function, 2 its caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


grad_mode = contextvars.ContextVar("gpumemnet.grad_mode", default=True)  # no_grad, enable_grad, inference_mode...
inference_flag = contextvars.ContextVar("gpumemnet.inference_mode", default=False)  # inside inference_mode()


class _Anomaly:
    """Anomaly detection (autograd.set_detect_anomaly): one flag for the whole process, as PyTorch's."""
    enabled = False
    check_nan = True


anomaly = _Anomaly()
