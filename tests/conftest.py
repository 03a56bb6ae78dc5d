"""Fixtures shared by several test files.

The CUDA emulator's (tests/test_cuda_emu_*.py): `runtime` compiles the emulator once per session and `build`
links test programs against it; the compiler commands are emu_util.py's."""
import glob
import os
import subprocess
import sys

import pytest

from emu_util import CXX, EMU, PRELUDE, compile_one


@pytest.fixture(autouse=True, scope="session")
def _float32_convolutions():
    """Float32 convolutions in float32 math: TF32 (cuDNN's default under PyTorch and gpumemnet alike,
    gm.backends.cudnn.allow_tf32) keeps about three decimal digits of the inputs on a GPU, which the CUDA tests'
    float32 tolerances would miss by design. PyTorch's own test suite turns it off the same way;
    tests/test_cuda_conv_tf32.py tests the switch itself."""
    import gpumemnet as gm
    gm.backends.cudnn.allow_tf32 = False


@pytest.fixture(autouse=True)
def _pytorch_distribution_validation():
    """PyTorch's dynamo (torch.compile, flex_attention) turns distributions' argument validation off for the whole
    process: a test that reaches it would make later ones in the same worker that expect PyTorch's ValueErrors
    (error_inputs' distribution cases) fail, depending on how xdist shares the tests out. Each test leaves the
    setting as it found it."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributions", None) if torch is not None and hasattr(torch, "_C") else None
    validate = dist.Distribution._validate_args if dist is not None else None
    yield
    if dist is not None:
        dist.Distribution.set_default_validate_args(validate)


@pytest.fixture(scope="session")
def runtime(tmp_path_factory):
    """The emulator's own objects (emu/*.cpp but the *_emu.cpp stand-ins of cuDNN/cuBLAS files)."""
    d = tmp_path_factory.mktemp("emu_runtime")
    srcs = [s for s in sorted(glob.glob(os.path.join(EMU, "*.cpp"))) if not s.endswith("_emu.cpp")]
    return [compile_one(s, str(d / (os.path.basename(s) + ".o"))) for s in srcs]


@pytest.fixture(scope="session")
def build(tmp_path_factory, runtime):
    """build(source, extra_sources=()) -> an executable of PRELUDE + source linked with the emulator (and the extra
    sources, compiled as setup.py would); each distinct program is built once per session."""
    built = {}

    def _build(source, extra=()):
        key = (source, tuple(extra))
        if key in built:
            return built[key]
        d = tmp_path_factory.mktemp("prog")
        src = d / "prog.cu"
        src.write_text(PRELUDE + source)
        objs = [compile_one(str(src), str(d / "prog.o"))]
        objs += [compile_one(s, str(d / (os.path.basename(s) + ".o"))) for s in extra]
        exe = str(d / "prog")
        r = subprocess.run([CXX, "-o", exe] + objs + runtime + ["-lpthread", "-lm"], capture_output=True, text=True)
        assert r.returncode == 0, f"linking failed:\n{r.stderr}"
        built[key] = exe
        return exe
    return _build
