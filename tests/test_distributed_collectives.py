"""gpumemnet.distributed's collectives on CPU tensors over MPI, on 2 and 3 ranks (tests/dist_workers/collectives.py
checks every collective, dtype and op against NumPy on every rank), and what works without MPI."""
import os
import subprocess
import sys

import pytest

import gpumemnet as gm
import gpumemnet.distributed as dist
from dist_util import check_ok, env, missing, run


@pytest.mark.parametrize("n", [2, 3])
def test_every_collective_matches_numpy(n):
    check_ok(run("collectives.py", n, timeout=300), n)


@pytest.mark.parametrize("n", [2, 3])
def test_differentiable_collectives(n):
    """torch.distributed.nn.functional (vector-quantize-pytorch imports it; contrastive losses gather with it)."""
    check_ok(run("dist_nn.py", n, timeout=300), n)


def test_differentiable_collectives_on_one_process_are_the_identity():
    from gpumemnet.distributed.nn import functional as dnf
    x = gm.tensor([1.0, 2.0], requires_grad=True)
    (dnf.all_reduce(x) * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0] and dnf.all_gather(x)[0].tolist() == [1.0, 2.0]


def test_the_mpi_5_standard_abi_too():
    """The wheel's libmpi_abi.so.1: handles are pointers there (ints in the MPICH ABI loaded by default)."""
    lib = os.path.join(sys.prefix, "lib", "libmpi_abi.so.1")
    if os.environ.get("GPUMEMNET_MPIEXEC"):
        pytest.skip("the MPI 5 ABI library is the mpich wheel's: it runs under the wheel's mpiexec, not "
                    "$GPUMEMNET_MPIEXEC")
    if not os.path.exists(lib):
        missing(f"{lib} not installed (the mpich wheel ships it)")
    proc = run("collectives.py", 2, timeout=300, extra_env={"GPUMEMNET_MPI_LIBRARY": lib})
    check_ok(proc, 2)


def test_import_needs_no_mpi_and_init_says_how_to_install_one(tmp_path):
    """With no MPI anywhere (an empty library path, a bogus $GPUMEMNET_MPI_LIBRARY), gpumemnet imports, and
    init_process_group explains how to get one."""
    code = ("import gpumemnet.distributed as d, gpumemnet._C as C\n"
            "import gpumemnet.distributed._mpi as m\n"
            "m.candidates = lambda: [('libmpi_none_here.so.12', \"the system's\")]\n"
            "print('available', d.is_mpi_available())\n"
            "try:\n    d.init_process_group('mpi')\nexcept RuntimeError as e:\n    print('ERR', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "available False" in proc.stdout
    assert "no MPI library found" in proc.stdout and "pip install mpich" in proc.stdout, proc.stdout
    e = env(GPUMEMNET_MPI_LIBRARY=str(tmp_path / "libnothing.so"))
    proc = subprocess.run([sys.executable, "-c", "import gpumemnet.distributed as d\nd.init_process_group()"],
                          env=e, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "GPUMEMNET_MPI_LIBRARY=" in proc.stderr and "libnothing.so" in proc.stderr


def test_before_init():
    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.all_reduce(gm.zeros(3))
    with pytest.raises(ValueError, match="backend 'gloo' is not supported"):
        dist.init_process_group("gloo")
    # meta tensors need no group: estimates run a distributed step in one process
    assert dist.all_reduce(gm.empty(3, device="meta")) is None
    outs = [gm.empty(4, device="meta") for _ in range(3)]
    before = gm.memory.memory_stats("meta")["by_category"]["communication"]["peak"]
    gm.memory.reset_peak_memory_stats("meta")
    dist.all_gather(outs, gm.empty(4, device="meta"))
    assert gm.memory.memory_stats("meta")["by_category"]["communication"]["peak"] == 512  # 48 B, one block
    assert before >= 0


def test_communication_is_a_category():
    assert "communication" in gm.memory.CATEGORIES and gm.memory.CATEGORY_DOCS["communication"]
    with gm.memory.category("communication"):
        t = gm.empty(1000)
    assert t._category == "communication"
    row = [ln for ln in gm.memory.memory_summary("cpu").splitlines() if ln.split()[:1] == ["communication"]]
    assert row and "4.00 KiB" in row[0], gm.memory.memory_summary("cpu")
