"""gpumemnet.distributed: PyTorch's torch.distributed API over MPI (and NCCL for CUDA tensors) (layer 2).

    mpiexec -n 2 python train.py          # ranks and world size come from the MPI launcher

    import gpumemnet.distributed as dist
    dist.init_process_group("mpi")
    dist.all_reduce(grad, op=dist.ReduceOp.SUM)

The MPI library is loaded when init_process_group runs (_mpi.py says where it is looked for; `pip install mpich`
is enough), so importing gpumemnet needs no MPI. process_group.py holds the group, the timeout and the abort of
every rank on an uncaught exception; collectives.py the tensor collectives; objects.py the pickled-object ones."""
from .grad_bucket import GradBucket  # noqa: F401
from .process_group import (DistError, DistBackendError, Backend, GroupMember, ProcessGroup, Work,  # noqa: F401
                            group, is_available, is_initialized, is_mpi_available, is_nccl_available,
                            init_process_group, destroy_process_group, get_rank, get_world_size, get_backend, new_group,
                            get_group_rank, get_global_rank, get_process_group_ranks, default_pg_timeout)
from .collectives import (ReduceOp, all_reduce, broadcast, all_gather, all_gather_into_tensor,  # noqa: F401
                          reduce_scatter, reduce_scatter_tensor, reduce, gather, scatter, barrier)
from .objects import broadcast_object_list, all_gather_object, gather_object, scatter_object_list  # noqa: F401
from ._functional_collectives import all_to_all_single  # noqa: F401  (named, refused: no all-to-all here)
from . import algorithms  # noqa: F401,E402  (torch.distributed.algorithms.ddp_comm_hooks: DDP's default hooks)

is_gloo_available = lambda: False  # noqa: E731  (PyTorch's query; gloo is not a gpumemnet backend)


def is_torchelastic_launched():
    """Whether torchrun started this process (it sets TORCHELASTIC_RUN_ID); gpumemnet's ranks come from mpiexec."""
    import os
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None
