"""gpumemnet.distributed with CUDA tensors where NCCL is absent: MPI with host staging (the staging tagged
`communication`), on 2 ranks. Runs on the emulator build (GPUMEMNET_CUDA=emu) and on a GPU without NCCL."""
import pytest

import gpumemnet as gm
from dist_util import check_ok, run

pytestmark = pytest.mark.skipif(not gm.cuda.is_available(), reason="no CUDA device (build with GPUMEMNET_CUDA=emu)")


def test_cuda_tensors_staged_through_mpi():
    check_ok(run("cuda_staged.py", 2, timeout=300, extra_env={"GPUMEMNET_NCCL_LIBRARY": "none"}), 2)
