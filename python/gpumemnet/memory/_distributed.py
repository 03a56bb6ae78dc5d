"""What estimate(..., world_size=N, zero=0|1|2) runs on meta for one rank: the meta copy wrapped as the real script
wraps the model (DistributedDataParallel for zero 0 and 1; the bare model for ZeRO-2, which reduces the gradients
itself) and the optimizer as it makes it (ZeroRedundancyOptimizer for zero 1 and 2), over a simulated group
(gpumemnet.distributed._comm.Simulated). The wrappers' own code runs, so the rank's buckets, gradient and state
shards and gathered parameters are allocated on meta exactly as on the device; only the data movement is skipped."""
from ..distributed import _comm
from ..distributed.process_group import ProcessGroup
from ..distributed.optim.zero import ZeroRedundancyOptimizer
from ..nn.modules.batchnorm import SyncBatchNorm
from ..nn.modules.module import Module
from ..nn.parallel.distributed import DistributedDataParallel
from ..utils.checkpoint import checkpoint_sequential
from . import stats as _memory

__all__ = ["check", "unwrap", "wrap"]


def unwrap(model, world_size, comm_hook=None):
    """(module, world_size, comm_hook as (state, hook) or None). A model already wrapped in DistributedDataParallel
    is estimated as its module on the wrapper's world size and with its comm hook (the wrapper itself, with its
    buckets and its group, is not copied to meta)."""
    if comm_hook is not None:
        if not isinstance(comm_hook, tuple):
            comm_hook = (None, comm_hook)
        if len(comm_hook) != 2 or not callable(comm_hook[1]):
            raise TypeError(f"estimate: comm_hook must be a hook or (state, hook), got {comm_hook!r}")
    if isinstance(model, DistributedDataParallel):
        if comm_hook is None:
            comm_hook = model._comm_hook
        return model.module, model.process_group.size if world_size is None else world_size, comm_hook
    if comm_hook is not None and world_size is None:
        raise ValueError("estimate: comm_hook needs world_size (it is DistributedDataParallel's)")
    return model, world_size, comm_hook


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
        return checkpoint_sequential(self.inner, self.segments, *xs, use_reentrant=False)


def wrap(clone, optimizer, world_size, zero, rank, comm_hook, checkpoint_segments, meta):
    """(module to run the step through, factory of the optimizer from the parameters, bytes the wrapper holds
    before the step: DDP's buckets). comm_hook (state, hook) is registered on the DDP wrapper; a state that is a
    process group (or None) becomes the simulated one, so the hook's collectives move nothing."""
    group = _comm.Simulated(rank, world_size)
    for m in clone.modules():  # the clone is the estimate's own: its SyncBatchNorms sync over the simulated group
        if isinstance(m, SyncBatchNorm) and m.process_group is None:
            m.process_group = group
    a0 = _memory.memory_allocated(meta)
    inner = _Checkpointed(clone, checkpoint_segments) if checkpoint_segments else clone
    model = inner if zero == 2 else DistributedDataParallel(inner, process_group=group)
    held = _memory.memory_allocated(meta) - a0
    if comm_hook is not None and zero != 2:
        state, hook = comm_hook
        if state is None or isinstance(state, ProcessGroup):
            state = group.process_group()
        model.register_comm_hook(state, hook)

    def make_optimizer(params):
        if not zero:
            return optimizer(params)
        return ZeroRedundancyOptimizer(params, optimizer_class=optimizer, process_group=group, stage=zero)
    return model, make_optimizer, held
