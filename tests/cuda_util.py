"""Helpers for the CPU-vs-CUDA tests (tests/test_cuda_*.py).

Every op is run on the CPU and on CUDA from the same inputs, forward and backward, and compared with tolerances
that fit the dtype (reductions may sum in another order on the GPU). The CUDA side is a real GPU when one is
present, or the CPU emulator of a `GPUMEMNET_CUDA=emu` build (kernels/cuda/README.md); with neither, the tests
skip and say why."""
import numpy as np
import pytest

import gpumemnet as gm

HAVE_CUDA = gm.cuda.is_available()
requires_cuda = pytest.mark.skipif(
    not HAVE_CUDA, reason="no CUDA device: gm.cuda.is_available() is False (build with GPUMEMNET_CUDA=emu to run "
                          "these tests on the CPU emulator)")

# rtol, atol per dtype for results that may differ in summation order; elementwise results are exact.
TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14), "float16": (2e-3, 1e-4), "bfloat16": (1.6e-2, 1e-3)}


def to_np(t):
    """A tensor (any device, any dtype) as a float64 / int64 / bool NumPy array."""
    t = t.detach().cpu()
    if t.dtype in (gm.float16, gm.bfloat16):
        t = t.float()
    a = t.numpy()
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def assert_close(cuda_t, cpu_t, dtype=None, exact=False, rtol=None, atol=None):
    """cuda_t (on CUDA) equals cpu_t (on the CPU): same shape and dtype, values within the dtype's tolerance."""
    assert cuda_t.device.type == "cuda", f"expected a CUDA result, got one on {cuda_t.device}"
    assert cpu_t.device.type == "cpu"
    assert tuple(cuda_t.shape) == tuple(cpu_t.shape)
    assert cuda_t.dtype == cpu_t.dtype
    a, b = to_np(cuda_t), to_np(cpu_t)
    if exact or a.dtype.kind != "f":
        np.testing.assert_array_equal(a, b)
        return
    r, t = TOL[str(cpu_t.dtype).replace("gpumemnet.", "")]
    np.testing.assert_allclose(a, b, rtol=rtol if rtol is not None else r, atol=atol if atol is not None else t)


# ---- one test, every device -----------------------------------------------------------------------------------
# The toolkit tests (test_toolkit, test_checkpoint, test_amp) take a `device` argument: import this fixture
# (`from cuda_util import device`) and each test runs on "cpu" and on "cuda", the latter skipped with
# requires_cuda's reason when there is no CUDA device.
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=requires_cuda)]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def is_cuda(device):
    return str(device).split(":")[0] == "cuda"


def workspace_peak(device):
    """The peak of the allocator's workspace category on device since its last reset_peak_memory_stats: on CUDA
    the convolutions' workspace is cuDNN's own choice (0 in the emulator, whose stand-in needs none), so byte
    bounds that include the whole peak allow for it by this figure."""
    return gm.memory.memory_stats(device)["by_category"]["workspace"]["peak"]
