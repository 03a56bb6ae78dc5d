"""torch.distributed.tensor.placement_types: how a DTensor is laid out over a device mesh (names only: gpumemnet has
no DTensor, tensor/__init__.py says why)."""

__all__ = ["Placement", "Shard", "Replicate", "Partial"]


class Placement:
    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False


class Shard(Placement):
    def __init__(self, dim):
        self.dim = dim


class Replicate(Placement):
    pass


class Partial(Placement):
    def __init__(self, reduce_op="sum"):
        self.reduce_op = reduce_op


class _StridedShard(Shard):
    def __init__(self, dim, split_factor=1):
        super().__init__(dim)
        self.split_factor = split_factor
