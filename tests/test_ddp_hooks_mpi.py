"""DistributedDataParallel's communication hooks and bucket rebuild over MPI, on 2 ranks
(tests/dist_workers/ddp_hooks.py): the default hooks give bit for bit what their definition computes from every
rank's gradients, several steps with fp16 compression stay within its rounding of one process with the whole
batch, the estimate with a hook equals the measured step; and PyTorch's own DDP with its hooks (gloo) gives the
same gradients. The in-process tests of the same logic are test_ddp_hooks.py."""
import pytest

from dist_util import check_ok, run


def test_default_hooks_and_their_memory():
    check_ok(run("ddp_hooks.py", 2, "hooks", timeout=300), 2)


def test_compress_hooks_match_pytorchs_ddp():
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this PyTorch has no gloo backend")
    check_ok(run("ddp_hooks.py", 2, "torch", timeout=300), 2)
