"""NCCL for CUDA tensors (layer 2, distributed): libnccl.so.2 dlopen'ed by csrc/dist_nccl.c, its unique id broadcast
over MPI (llm.c's bootstrap), collectives queued on the device's stream. Where NCCL is absent (or in the CUDA
emulator, or for int16, which NCCL lacks, and gather/scatter), CUDA tensors go through MPI with host staging
(collectives.py).

Search order for the library: $GPUMEMNET_NCCL_LIBRARY ("none" turns NCCL off), the nvidia-nccl-cu* wheel
(site-packages/nvidia/nccl/lib, as PyTorch's wheels install it), the system's libnccl.so.2 (the loader's path,
then the CUDA toolkit's lib). The communicator's device is init_process_group's device_id when given, else the
rank's local rank (from the launcher's environment) modulo the device count."""
import glob
import os
import site
import sys

from .. import _C

ENV = "GPUMEMNET_NCCL_LIBRARY"
LOCAL_RANK_VARS = ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK",
                   "SLURM_LOCALID")
KINDS = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter")  # the rest are staged through MPI

_version = None


def candidates():
    env = os.environ.get(ENV)
    if env:
        return [] if env.lower() == "none" else [env]
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
    out = [p for d in dict.fromkeys(dirs) for p in glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so*"))]
    return out + ["libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"]


def _load():
    """NCCL's version once loaded, or raise RuntimeError saying what was tried."""
    global _version
    if _version:
        return _version
    tried = []
    for path in candidates():
        try:
            _version = _C.dist_nccl_load(path)
            return _version
        except RuntimeError as e:
            tried.append(str(e))
    raise RuntimeError("NCCL not found (" + ("; ".join(tried) or f"${ENV}=none") + "): install the nvidia-nccl-cu* "
                       "wheel or the system's libnccl2, or use backend='mpi'")


def _usable():
    from .. import cuda
    return cuda.is_available() and not cuda.is_emulated()


def is_available():
    if not _usable():
        return False
    try:
        _load()
        return True
    except RuntimeError:
        return False


def _device(device_id, world_rank):
    from .. import cuda
    if device_id is not None:
        if isinstance(device_id, int):
            return device_id
        idx = getattr(device_id, "index", None)
        if idx is None and isinstance(device_id, str) and ":" in device_id:
            idx = int(device_id.split(":")[1])
        return idx or 0
    local = next((int(os.environ[v]) for v in LOCAL_RANK_VARS if os.environ.get(v, "").isdigit()), world_rank)
    return local % max(1, cuda.device_count())


def init(rank, world_size, mpi_min, mpi_broadcast, device_id=None, required=False):
    """This rank's NCCL state {comm, device, version}, or None (CUDA tensors are then staged through MPI).
    mpi_min(int) -> the smallest over the ranks and mpi_broadcast(bytes) -> rank 0's bytes are the process group's
    MPI (given by process_group, so that this module needs nothing above _C)."""
    if not _usable():
        if required:
            from .. import cuda
            why = "the CUDA emulator has no NCCL" if cuda.is_built() and cuda.is_emulated() else "no CUDA device"
            raise RuntimeError(f"init_process_group(backend='nccl'): {why}; use backend='mpi'")
        return None
    # Every rank must agree: a rank without NCCL would leave the others waiting in ncclCommInitRank.
    try:
        version, err = _load(), ""
    except RuntimeError as e:
        version, err = 0, str(e)
    if not mpi_min(1 if version else 0):
        if required:
            raise RuntimeError("init_process_group(backend='nccl'): " + (err or "NCCL is missing on another rank"))
        return None
    device = _device(device_id, rank)
    uid = mpi_broadcast(_C.dist_nccl_unique_id() if rank == 0 else bytes(128))
    comm = _C.dist_nccl_init(uid, world_size, rank, device)
    return {"comm": comm, "device": device, "version": version}


def destroy(state, abort=False):
    _C.dist_nccl_destroy(state["comm"], abort)


def handles(state, kind, out, inp):
    """Whether NCCL takes this call (else it is staged through MPI)."""
    t = out if out is not None else inp
    return (kind in KINDS and out is not None and t.device.index == state["device"]
            and t.dtype.name != "int16" and (inp is None or inp.device == out.device))


class _NcclRequest:
    def __init__(self, state, cap):
        self.state, self.cap = state, cap

    def test(self):
        return _C.dist_nccl_test(self.cap)

    def wait(self, timeout_s):
        done = _C.dist_nccl_wait(self.cap, timeout_s)
        if not done:  # a hung NCCL kernel ends only when its communicator is aborted
            _C.dist_nccl_destroy(self.state["comm"], True)
        return done


def start(state, kind, out, inp, op, root, world_size):
    return _NcclRequest(state, _C.dist_nccl_start(state["comm"], state["device"], kind, out, inp, op, root,
                                                   world_size))
