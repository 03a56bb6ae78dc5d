"""gpumemnet.distributed with CUDA tensors where NCCL is absent: MPI with host staging (the staging tagged
`communication`), on 2 ranks. Runs on the emulator build (GPUMEMNET_CUDA=emu) and on a GPU without NCCL."""
import os

import pytest

import gpumemnet as gm
from dist_util import check_ok, run

pytestmark = pytest.mark.skipif(not gm.cuda.is_available(), reason="no CUDA device (build with GPUMEMNET_CUDA=emu)")


def test_cuda_tensors_staged_through_mpi():
    check_ok(run("cuda_staged.py", 2, timeout=300, extra_env={"GPUMEMNET_NCCL_LIBRARY": "none"}), 2)


def test_the_nccl_binding_loads_nccl():
    """The NCCL library resolves through csrc/dist_nccl.c (its symbols, its version, a unique id) even where no
    NCCL communicator can run (the emulator: gpumemnet.distributed then stages CUDA tensors through MPI)."""
    from gpumemnet.distributed import _nccl
    found = [p for p in _nccl.candidates() if os.path.exists(p)]
    if not found:
        pytest.skip("no libnccl installed (the nvidia-nccl-cu* wheel or the system's libnccl2)")
    assert gm._C.dist_nccl_load(found[0]) >= 21000
    assert len(gm._C.dist_nccl_unique_id()) == 128
    assert _nccl.is_available() == (not gm.cuda.is_emulated())
    with pytest.raises(ValueError, match="unique_id must be 128 bytes, got 1"):
        gm._C.dist_nccl_init(b"x", 1, 0, 0)


def test_cuda_tensors_through_nccl():
    """On a GPU with NCCL (tools/gpu_check.sh): one rank per visible GPU, at most 2 (NCCL refuses two ranks on one
    GPU; a world of one still runs every NCCL call)."""
    from gpumemnet.distributed import _nccl
    if gm.cuda.is_emulated() or not _nccl.is_available():
        pytest.skip("needs a GPU and NCCL (the emulator stages CUDA tensors through MPI instead)")
    n = min(2, gm.cuda.device_count())
    check_ok(run("nccl.py", n, timeout=300), n)
