"""Per-thread state of the Python layer (layer 1): grad mode, saved-tensor hooks, the modules running,
checkpoint recomputation, and whether meta ops may draw random numbers. (Autocast's is in _core/autocast.py.)

PyTorch keeps grad mode, inference mode and autocast per thread; so do we: `no_grad()` in one thread must not
stop another thread's graph. The allocator's category and scope are per thread in C (csrc/allocator.c).

`state` is a threading.local whose scalar fields are class attributes: a thread that has never set one reads
the class default, so a new thread starts with grad on without running any code, and the
per-op check stays one attribute read (`state.grad_enabled`). Mutable fields (lists, dicts) are made per
thread in __init__, which threading.local runs once in each thread on its first access."""
import threading


class _ThreadState(threading.local):
    grad_enabled = True     # no_grad / enable_grad / set_grad_enabled / inference_mode
    recomputing = 0         # > 0 while a checkpointed segment is recomputed for backward (utils.checkpoint)
    meta_draws_random = True  # False while an estimate runs here: meta dropout then draws nothing (see estimator)

    def __init__(self):
        self.saved_tensors_hooks = []  # (pack, unpack) pairs, innermost last
        self.modules = []          # the modules whose forward is running, innermost last
        self.last_root = None      # (weakref to the last root module called, its input shape), for OOM advice


state = _ThreadState()
