"""NCCL for CUDA tensors (layer 2, distributed): not in this build yet. Without it, CUDA tensors go through MPI
with host staging (collectives.py)."""
import os

ENV = "GPUMEMNET_NCCL_LIBRARY"


def is_available():
    return False


def init(rank, world_size, device_id=None, required=False):
    """The NCCL communicator of this rank, or None (then CUDA tensors are staged through MPI)."""
    if required:
        raise RuntimeError("init_process_group(backend='nccl'): NCCL is not supported by this build of gpumemnet; "
                           "use backend='mpi' (CUDA tensors then travel through MPI with host staging)")
    return None


def destroy(state, abort=False):
    pass


def start(state, kind, out, inp, op, root, avg):
    raise RuntimeError("NCCL is not available")
