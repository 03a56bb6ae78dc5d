"""What estimate(..., world_size=N, zero=0|1|2) runs on meta for one rank: the meta copy wrapped as the real script
wraps the model (DistributedDataParallel for zero 0 and 1; the bare model for ZeRO-2, which reduces the gradients
itself) and the optimizer as it makes it (ZeroRedundancyOptimizer for zero 1 and 2), over a simulated group
(gpumemnet.distributed._comm.Simulated). The wrappers' own code runs, so the rank's buckets, gradient and state
shards and gathered parameters are allocated on meta exactly as on the device; only the data movement is skipped."""
from ..distributed import _comm
from ..distributed.optim.zero import ZeroRedundancyOptimizer
from ..nn.modules.batchnorm import SyncBatchNorm
from ..nn.modules.module import Module
from ..nn.parallel.distributed import DistributedDataParallel
from ..utils.checkpoint import checkpoint_sequential
from . import stats as _memory

__all__ = ["check", "unwrap", "wrap"]


def unwrap(model, world_size):
    """A model already wrapped in DistributedDataParallel is estimated as its module on the wrapper's world size
    (the wrapper itself, with its buckets and its group, is not copied to meta)."""
    if isinstance(model, DistributedDataParallel):
        return model.module, model.process_group.size if world_size is None else world_size
    return model, world_size


def check(world_size, zero, rank):
    """The validated (world_size, zero, ranks to estimate)."""
    if world_size is None:
        if zero:
            raise ValueError(f"estimate: zero={zero!r} needs world_size (the number of ranks sharing the state)")
        if rank is not None:
            raise ValueError("estimate: rank needs world_size")
        return None, 0, [None]
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"estimate: world_size must be a positive int or None, got {world_size!r}")
    if zero not in (0, 1, 2):
        raise ValueError(f"estimate: zero must be 0 (DistributedDataParallel alone), 1 or 2 (ZeroRedundancyOptimizer "
                         f"stage), got {zero!r}")
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"estimate: rank must be an int in [0, {world_size - 1}] or None, got {rank!r}")
        return world_size, zero, [rank]
    # Without ZeRO every rank holds the same; with it the shards differ by padding and allocator rounding only,
    # but byte-exact means each one.
    return world_size, zero, list(range(world_size)) if zero else [0]


class _Checkpointed(Module):
    """The Sequential run through checkpoint_sequential, as one module DDP can wrap."""

    def __init__(self, inner, segments):
        super().__init__()
        self.inner = inner
        self.segments = segments

    def forward(self, *xs):
        return checkpoint_sequential(self.inner, self.segments, *xs)


def wrap(clone, optimizer, world_size, zero, rank, checkpoint_segments, meta):
    """(module to run the step through, factory of the optimizer from the parameters, bytes the wrapper holds
    before the step: DDP's buckets)."""
    group = _comm.Simulated(rank, world_size)
    for m in clone.modules():  # the clone is the estimate's own: its SyncBatchNorms sync over the simulated group
        if isinstance(m, SyncBatchNorm) and m.process_group is None:
            m.process_group = group
    a0 = _memory.memory_allocated(meta)
    inner = _Checkpointed(clone, checkpoint_segments) if checkpoint_segments else clone
    model = inner if zero == 2 else DistributedDataParallel(inner, process_group=group)
    held = _memory.memory_allocated(meta) - a0

    def make_optimizer(params):
        if not zero:
            return optimizer(params)
        return ZeroRedundancyOptimizer(params, optimizer_class=optimizer, process_group=group, stage=zero)
    return model, make_optimizer, held
