"""torch.cuda.nvtx: NVTX ranges that mark a step for NVIDIA's profilers (Nsight Systems). gpumemnet emits none:
the calls do nothing and answer as NVTX does with no profiler attached (range_push / range_pop: -2, range_start:
0), which is what PyTorch's give then."""
import contextlib

__all__ = ["range_push", "range_pop", "mark", "range", "range_start", "range_end"]

_NO_TOOL = -2  # NVTX's answer to a push or pop when no tool collects the ranges


def range_push(msg):
    return _NO_TOOL


def range_pop():
    return _NO_TOOL


def mark(msg):
    pass


def range_start(msg):
    return 0


def range_end(range_id):
    pass


@contextlib.contextmanager
def range(msg, *args, **kwargs):  # noqa: A001  (PyTorch's name)
    """A range over the block (msg formatted with args / kwargs, as PyTorch's)."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
