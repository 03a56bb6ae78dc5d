"""The collectives DistributedDataParallel and ZeroRedundancyOptimizer call, behind one small object.

`world()` talks through gpumemnet.distributed's default process group (MPI or NCCL). `Simulated(rank, world_size)`
stands for one rank of a group without talking to anyone: its collectives return at once and touch no data. The
estimator wraps a meta copy of the model in DDP / ZeRO with a Simulated group, so the step it runs on meta makes
exactly the allocations of that rank's real step (buckets, shards, gathered parameters), byte for byte: the code
that allocates is the same, only the data movement is skipped. That holds because the collectives themselves
allocate nothing on CPU tensors (contiguous buffers are handed to MPI as they are); a collective that staged its
buffers would have to be simulated here too."""

__all__ = ["world", "Simulated", "CATEGORY"]

# The allocator category of communication buffers (gpumemnet.distributed adds it to the allocator).
CATEGORY = "communication"


class _Done:
    """A finished Work: what Simulated's collectives return for async_op=True."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


class _World:
    """A process group of gpumemnet.distributed: the default one (group None) or one from new_group. Ranks here
    (rank, src) are the group's own."""
    simulated = False

    def __init__(self, group=None):
        from .. import distributed as dist  # the package this module lives in, complete by the time it is called
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("the default process group is not initialized: call "
                               "gpumemnet.distributed.init_process_group() first (and launch with mpiexec -n N)")
        if group is not None and not isinstance(group, dist.ProcessGroup):
            raise TypeError(f"process_group: expected None or a group from new_group, got {type(group).__name__}")
        if dist.get_rank(group) < 0:
            raise ValueError(f"process_group: this rank ({dist.get_rank()}) is not in {group!r}")
        self.dist, self.group = dist, group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)

    def process_group(self):
        return self.group if self.group is not None else self.dist.group.WORLD

    def progress(self):
        """Let collectives in flight move on (MPI progresses them only inside its calls)."""
        from .process_group import prune_pending
        prune_pending()

    def all_reduce_sum(self, t, async_op=False):
        return self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM, group=self.group, async_op=async_op)

    def broadcast(self, t, src=0):
        return self.dist.broadcast(t, None, group=self.group, group_src=src)

    def all_gather_into_tensor(self, out, inp, async_op=False):
        return self.dist.all_gather_into_tensor(out, inp, group=self.group, async_op=async_op)

    def reduce_scatter_sum(self, out, inp, async_op=False):
        return self.dist.reduce_scatter_tensor(out, inp, op=self.dist.ReduceOp.SUM, group=self.group,
                                               async_op=async_op)

    def broadcast_object_list(self, objs, src=0):
        return self.dist.broadcast_object_list(objs, group=self.group, group_src=src)

    def all_gather_object(self, out, obj):
        return self.dist.all_gather_object(out, obj, group=self.group)


class SimulatedGroup:
    """Simulated's face as a ProcessGroup (rank(), size()): what a DDP communication hook gets as its state under
    the estimator instead of the default group. gpumemnet.distributed's collectives given it as group= run on
    meta tensors only, moving nothing."""
    simulated = True

    def __init__(self, rank, world_size):
        self._rank, self._size = rank, world_size

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def __repr__(self):
        return f"SimulatedGroup(rank={self._rank}, size={self._size})"


class Simulated:
    """One rank of a world_size group, for the estimator: collectives move no data (see the module docstring)."""
    simulated = True

    def __init__(self, rank, world_size):
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"rank must be an int in [0, {world_size - 1}], got {rank!r}")
        self.rank, self.size = rank, world_size

    def _done(self, async_op):
        return _Done() if async_op else None

    def process_group(self):
        return SimulatedGroup(self.rank, self.size)

    def all_reduce_sum(self, t, async_op=False):
        return self._done(async_op)

    def broadcast(self, t, src=0):
        return None

    def all_gather_into_tensor(self, out, inp, async_op=False):
        return self._done(async_op)

    def reduce_scatter_sum(self, out, inp, async_op=False):
        return self._done(async_op)

    def broadcast_object_list(self, objs, src=0):
        return None

    def all_gather_object(self, out, obj):
        for i in range(len(out)):
            out[i] = obj


def world(process_group=None):
    """The group DDP and ZeRO use: None is the default process group, a ProcessGroup one from new_group; a
    Simulated one (the estimator's), or any object with .rank, .size and Simulated's methods (the tests'
    in-process ranks), is used as it is."""
    from .process_group import ProcessGroup
    if process_group is None or isinstance(process_group, ProcessGroup):
        return _World(process_group)
    if isinstance(process_group, (Simulated, _World)) or isinstance(getattr(process_group, "rank", None), int):
        return process_group
    raise TypeError(f"process_group: expected None or a group from new_group, got {type(process_group).__name__}")
