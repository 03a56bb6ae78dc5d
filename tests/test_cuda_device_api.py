"""torch.cuda's current-device and seeding names (gm.cuda/_device.py) and torch.accelerator (gm.accelerator), which
training scripts call at start-up (`torch.cuda.manual_seed_all(seed)`, `torch.cuda.set_device(local_rank)`,
`torch.accelerator.current_accelerator()` in PyTorch's own MNIST example). Without a usable CUDA device they behave
as PyTorch's do there (checked against PyTorch where installed); the current device is checked on the emulator
with two devices, in a fresh process."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda

NO_CUDA = not gm.cuda.is_available()
no_cuda_only = pytest.mark.skipif(not NO_CUDA, reason="the behaviour without a usable CUDA device")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@no_cuda_only
def test_seeding_cuda_without_a_device_leaves_the_cpu_stream_alone(torch):
    def draws(lib):
        lib.manual_seed(1)
        a = lib.rand(3).numpy()
        lib.cuda.manual_seed_all(2)
        lib.cuda.manual_seed(3)
        lib.cuda.seed_all()
        b = lib.rand(3).numpy()
        lib.manual_seed(1)
        lib.rand(3)
        return a, b, lib.rand(3).numpy()

    for lib in (torch, gm):
        _, b, uninterrupted = draws(lib)
        np.testing.assert_array_equal(b, uninterrupted, err_msg=lib.__name__)


@no_cuda_only
def test_device_names_without_a_device_answer_as_pytorchs(torch):
    for lib in (torch, gm):
        assert lib.cuda.is_bf16_supported() is False
        assert lib.cuda.get_rng_state_all() == []
        assert lib.cuda.set_device(-1) is None
        for call in (lib.cuda.current_device, lambda: lib.cuda.set_device(0), lib.cuda.initial_seed,
                     lib.cuda.get_rng_state):
            with pytest.raises(RuntimeError):
                call()
        assert lib.accelerator.is_available() is False
        assert lib.accelerator.current_accelerator(check_available=True) is None
        assert lib.accelerator.device_count() == 0
    built = gm.cuda.is_built()
    assert (gm.accelerator.current_accelerator() == "cuda") is built
    assert str(torch.accelerator.current_accelerator()) == "cuda"  # PyPI's PyTorch is a CUDA build


def test_the_names_reach_through_the_torch_alias():
    code = textwrap.dedent("""
        import gpumemnet as gm
        gm.as_torch()
        import torch
        assert torch.cuda.OutOfMemoryError is gm.OutOfMemoryError
        for name in ("set_device", "current_device", "device", "manual_seed", "manual_seed_all", "seed",
                     "seed_all", "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
                     "set_rng_state_all", "is_bf16_supported", "is_initialized", "init"):
            assert callable(getattr(torch.cuda, name)), name
        for name in ("is_available", "current_accelerator", "device_count", "current_device_index",
                     "set_device_index", "device_index", "synchronize", "memory_allocated", "empty_cache"):
            assert callable(getattr(torch.accelerator, name)), name
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@requires_cuda
def test_cuda_seeding_seeds_the_generator_cuda_draws_from():
    gm.cuda.manual_seed_all(7)
    a = gm.rand(5, device="cuda").cpu().numpy()
    gm.manual_seed(7)
    np.testing.assert_array_equal(gm.rand(5, device="cuda").cpu().numpy(), a)
    state = gm.cuda.get_rng_state()
    b = gm.rand(5, device="cuda").cpu().numpy()
    gm.cuda.set_rng_state(state)
    np.testing.assert_array_equal(gm.rand(5, device="cuda").cpu().numpy(), b)
    assert gm.cuda.initial_seed() == 7


@requires_cuda
@pytest.mark.skipif(not gm.cuda.is_emulated(), reason="two devices: the emulator's GPUMEMNET_EMU_DEVICES")
def test_set_device_moves_what_a_bare_cuda_names_per_thread():
    code = textwrap.dedent("""
        import threading
        import gpumemnet as gm
        assert gm.cuda.device_count() == 2 and gm.cuda.current_device() == 0
        gm.cuda.set_device(1)
        assert gm.cuda.current_device() == 1 and gm.accelerator.current_device_index() == 1
        assert str(gm.zeros(2, device="cuda").device) == "cuda:1"
        assert str(gm.zeros(2).cuda().device) == "cuda:1"
        assert str(gm.zeros(2).to("cuda").device) == "cuda:1"
        assert gm.device("cuda").index == 1
        model = gm.nn.Linear(3, 2).cuda()
        assert all(str(p.device) == "cuda:1" for p in model.parameters())
        y = model(gm.ones(4, 3, device="cuda"))
        assert str(y.device) == "cuda:1"
        assert gm.cuda.memory_allocated() == gm.cuda.memory_allocated(1) > 0
        with gm.cuda.device(0):
            assert str(gm.zeros(2, device="cuda").device) == "cuda:0"
        assert gm.cuda.current_device() == 1
        seen = []
        t = threading.Thread(target=lambda: seen.append(gm.cuda.current_device()))
        t.start(); t.join()
        assert seen == [0], seen  # the current device is per thread
        try:
            gm.cuda.set_device(2)
        except RuntimeError as e:
            assert "cuda:2" in str(e) and "2 CUDA devices" in str(e), e
        else:
            raise AssertionError("set_device(2) with 2 devices did not raise")
        print("ok")
    """)
    env = dict(os.environ, GPUMEMNET_EMU_DEVICES="2")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
