"""The caching allocator on device memory: the same policy and statistics as on the CPU, limits, the CUDA
out-of-memory error and recovery, and no growth over a training loop. Byte counts are exact."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda

pytestmark = requires_cuda
MiB = 1 << 20


@pytest.fixture(autouse=True)
def clean_device():
    gm.memory.set_limit("cuda", None)
    gm.memory.empty_cache("cuda")
    yield
    gm.memory.set_limit("cuda", None)
    gm.memory.empty_cache("cuda")


def test_small_and_large_pools_as_on_the_cpu():
    base_alloc, base_res = gm.memory.memory_allocated("cuda"), gm.memory.memory_reserved("cuda")
    a = gm.empty(100, device="cuda")               # 400 B -> 512 B block in a 2 MiB small segment
    assert gm.memory.memory_allocated("cuda") - base_alloc == 512
    assert gm.memory.memory_reserved("cuda") - base_res == 2 * MiB
    b = gm.empty(3 * MiB // 4, device="cuda")      # 3 MiB -> a 20 MiB large segment
    assert gm.memory.memory_reserved("cuda") - base_res == 22 * MiB
    c = gm.empty(11 * MiB // 4, device="cuda")     # 11 MiB: best fit in the 17 MiB left of that segment
    assert gm.memory.memory_reserved("cuda") - base_res == 22 * MiB
    d = gm.empty(15 * MiB // 4, device="cuda")     # 15 MiB fits nowhere: its own segment rounded to 16 MiB
    assert gm.memory.memory_reserved("cuda") - base_res == 38 * MiB
    del a, b, c, d
    assert gm.memory.memory_allocated("cuda") == base_alloc
    assert gm.memory.empty_cache("cuda") >= 38 * MiB


def test_the_same_program_allocates_the_same_bytes_on_cpu_and_cuda():
    def program(dev):
        gm.memory.reset_peak_memory_stats(dev)
        start = gm.memory.memory_allocated(dev)
        xs = [gm.empty(n, device=dev) for n in (1, 1000, 300_000, 5_000_000)]
        ys = [x.to(gm.float64) for x in xs[:2]]
        del xs[1]
        return gm.memory.max_memory_allocated(dev) - start, gm.memory.memory_allocated(dev) - start, ys
    cpu_peak, cpu_now, _ = program("cpu")
    cuda_peak, cuda_now, _ = program("cuda")
    assert (cuda_peak, cuda_now) == (cpu_peak, cpu_now)


def test_limit_raises_cuda_out_of_memory_then_recovers():
    gm.memory.set_limit("cuda", 8 * MiB)
    keep = gm.empty(MiB, device="cuda")  # 4 MiB
    with gm.memory.scope("fc1 forward"), pytest.raises(gm.OutOfMemoryError) as info:
        gm.empty(2 * MiB, device="cuda")   # 8 MiB more: over the limit
    text = str(info.value)
    assert text.startswith("CUDA out of memory on cuda:0: tried to allocate 8.00 MiB")
    assert "fc1 forward" in text and "limit 8.00 MiB" in text and "free on the device" in text
    assert info.value.requested_bytes == 8 * MiB
    del keep
    again = gm.empty(2 * MiB, device="cuda")  # fits once the first tensor is gone
    assert again.numel() == 2 * MiB


def test_limit_as_a_fraction_of_the_device():
    total = gm.cuda.mem_get_info()[1]
    gm.cuda.set_per_process_memory_fraction(0.5)
    assert gm.memory.get_limit("cuda") == int(0.5 * total)
    with pytest.raises(ValueError, match="fraction"):
        gm.cuda.set_per_process_memory_fraction(1.5)


def test_torch_style_names_answer_from_the_allocator():
    x = gm.empty(1000, device="cuda")
    assert gm.cuda.memory_allocated() == gm.memory.memory_allocated("cuda")
    assert gm.cuda.max_memory_allocated() >= gm.cuda.memory_allocated()
    assert gm.cuda.memory_reserved() >= gm.cuda.memory_allocated()
    assert "by category" in gm.cuda.memory_summary().lower() or "category" in gm.cuda.memory_summary()
    del x
