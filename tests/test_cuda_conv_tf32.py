"""gm.backends.cudnn.allow_tf32: TF32 for float32 convolutions, on by default as in PyTorch, separate from the
matmuls' switch (gm.backends.cuda.matmul.allow_tf32, off by default). The switch reaches the algorithm choice:
the cache asks cuDNN again after a change; on a GPU no tensor-core engine runs while TF32 is off, and TF32 rounds
the inputs when it is on. (tests/conftest.py turns TF32 off for the other CUDA tests; each test here restores what it found.)"""
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import requires_cuda

CUDNN_FMA_MATH = 3  # cudnnMathType_t: float32 without tensor cores


@pytest.fixture
def tf32_restored():
    cudnn, matmul = gm.backends.cudnn.allow_tf32, gm.backends.cuda.matmul.allow_tf32
    yield
    gm.backends.cudnn.allow_tf32, gm.backends.cuda.matmul.allow_tf32 = cudnn, matmul


def test_defaults_are_pytorchs():
    torch = pytest.importorskip("torch")
    code = ("import gpumemnet as gm; print(gm.backends.cudnn.allow_tf32, gm.backends.cuda.matmul.allow_tf32)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(torch.backends.cudnn.allow_tf32), str(torch.backends.cuda.matmul.allow_tf32)] == ["True",
                                                                                                        "False"]


def test_the_switches_are_separate_and_flags_restores(tf32_restored):
    cudnn = gm.backends.cudnn
    cudnn.allow_tf32 = True
    gm.backends.cuda.matmul.allow_tf32 = False
    assert cudnn.allow_tf32 is True and gm.backends.cuda.matmul.allow_tf32 is False
    with cudnn.flags(enabled=True, allow_tf32=False):
        assert cudnn.allow_tf32 is False and gm.backends.cuda.matmul.allow_tf32 is False
    assert cudnn.allow_tf32 is True


@requires_cuda
def test_a_change_reaches_the_algorithm_choice(tf32_restored):
    rng = np.random.default_rng(0)
    x = gm.tensor(rng.standard_normal((2, 16, 12, 12), dtype=np.float32), device="cuda")
    w = gm.tensor(rng.standard_normal((16, 16, 3, 3), dtype=np.float32), device="cuda")
    picks = {}
    for tf32 in (False, True, False):
        gm.backends.cudnn.allow_tf32 = tf32
        F.conv2d(x, w, padding=1)
        picks.setdefault(tf32, []).append(_C._conv_algo_last())
    # each setting has its own cached choice: the first call under TF32 asked again, the return to FMA found its own
    assert not picks[True][0]["cached"] and picks[False][1]["cached"]
    if not gm.cuda.is_emulated():  # the emulator runs one direct kernel whatever the math
        # without TF32 no tensor-core engine; with it the heuristics may still rank a plain one first (they did for
        # this small layer on an H200), so what TF32 does is tested by its rounding below
        assert picks[False][0]["math"] == CUDNN_FMA_MATH == picks[False][1]["math"]


@requires_cuda
@pytest.mark.skipif(gm.cuda.is_available() and gm.cuda.is_emulated(), reason="TF32 rounding needs a GPU")
def test_tf32_rounds_the_inputs_and_fma_does_not(tf32_restored):
    """On a GPU: float32 math lands near float64 (Winograd and FFT included, ~1e-5 of the largest output at
    worst); TF32 rounds the inputs to 10-bit mantissas, ~2^-11 each: here ~5e-4 of the largest output."""
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((4, 64, 16, 16)).astype(np.float32)
    wa = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    ref = F.conv2d(gm.tensor(xa.astype(np.float64)), gm.tensor(wa.astype(np.float64)), padding=1).numpy()
    scale = np.abs(ref).max()
    err = {}
    for tf32 in (False, True):
        gm.backends.cudnn.allow_tf32 = tf32
        got = F.conv2d(gm.tensor(xa, device="cuda"), gm.tensor(wa, device="cuda"), padding=1).cpu().numpy()
        err[tf32] = np.abs(got - ref).max() / scale
    assert err[False] < 5e-5 < err[True] < 1e-2, err
