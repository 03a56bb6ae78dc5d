"""torch.distributed.tensor.experimental: DTensor's experimental helpers. gpumemnet has no DTensor (tensor/__init__.py
says why), so every tensor is already local: implicit_replication is a context that changes nothing (Opacus enters it
around its per-sample clipping), local_map calls the function on its arguments as they are, register_sharding
registers nothing; context_parallel (which shards buffers along a mesh) raises."""
import contextlib

from . import _WHY

__all__ = ["context_parallel", "implicit_replication", "local_map", "register_sharding"]


@contextlib.contextmanager
def implicit_replication():
    """Inside it PyTorch treats plain tensors mixed with DTensors as replicated; with no DTensor, nothing to do."""
    yield


def local_map(func=None, out_placements=None, in_placements=None, in_grad_placements=None, device_mesh=None, *,
              redistribute_inputs=False):
    """func run on the local tensors: here every tensor is local, so func itself (also as a decorator)."""
    if func is None:
        return lambda f: local_map(f, out_placements, in_placements, in_grad_placements, device_mesh,
                                   redistribute_inputs=redistribute_inputs)
    if not callable(func):
        raise TypeError(f"local_map: func must be callable, got {type(func).__name__}")
    return func


def register_sharding(op):
    """A decorator registering a sharding strategy for op; with no DTensor there is nothing to register it for."""
    return lambda fn: fn


@contextlib.contextmanager
def context_parallel(mesh, *, buffers=None, buffer_seq_dims=None, no_restore_buffers=None):
    raise NotImplementedError(f"torch.distributed.tensor.experimental.context_parallel: {_WHY}")
    yield  # noqa: unreachable - a generator, so that the error is raised on entering the block
