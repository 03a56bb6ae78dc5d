"""The allocator under threads (csrc/allocator.h: a lock per device) and CPU kernels without the GIL (GM_KERNEL's
policy, csrc/threads.c): concurrent allocation and free keep the statistics exact, and ops computed from several
threads give what they give on one."""
import gc
import threading

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

CATEGORIES = ("parameter", "gradient", "optimizer", "activation", "activation_grad", "workspace", "input",
        "communication", "other")


@pytest.fixture(autouse=True)
def leave_no_cache():
    """The segments these tests cache would change which free blocks later tests' allocations find."""
    yield
    gc.collect()
    for device in ("cpu", "meta"):
        gm.memory.empty_cache(device)


def by_category(device):
    return {k: v["current"] for k, v in gm.memory.memory_stats(device)["by_category"].items()}


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_native_threads_allocate_and_free_without_the_gil(device):
    """Eight native threads, no GIL between them: every block is written whole by its owner and checked before it
    is freed (two threads handed overlapping memory would see each other's bytes), and every figure comes back."""
    gc.collect()
    before_stats = by_category(device)
    before = gm.memory.memory_allocated(device)
    corrupt, failed = _C._allocator_stress(device, 8, 2000, 1234)
    assert (corrupt, failed) == (0, 0)
    assert gm.memory.memory_allocated(device) == before
    assert by_category(device) == before_stats
    stats = gm.memory.memory_stats(device)
    assert stats["num_allocs"] - stats["num_frees"] >= 0


def test_stress_hook_rejects_bad_arguments():
    with pytest.raises(ValueError, match="1..64 threads"):
        _C._allocator_stress("cpu", 0, 10, 1)
    with pytest.raises(ValueError, match="unknown device"):
        _C._allocator_stress("gpu", 2, 10, 1)


def workload(seed, rounds=6):
    """Allocate and free tensors of many sizes under a category of its own, with large kernels (which run without
    the GIL) in between; returns the values computed."""
    rng = np.random.default_rng(seed)
    out = []
    with gm.memory.category(CATEGORIES[seed % len(CATEGORIES)]):
        for r in range(rounds):
            keep = [gm.empty(int(n), dtype=gm.float32) for n in rng.integers(1, 300_000, size=12)]
            a = gm.from_numpy(rng.standard_normal((256, 384)).astype(np.float32))
            b = gm.from_numpy(rng.standard_normal((384, 128)).astype(np.float32))
            big = gm.from_numpy(rng.standard_normal(200_000).astype(np.float32))
            c = (a @ b).relu()          # matmul and a 32768-element activation: both without the GIL
            s = big.exp().sum()         # 200000 elements in, one out
            m = gm.nn.functional.max_pool2d(c.reshape(1, 1, 256, 128), 2)
            out.append((c.numpy().copy(), float(s.item()), m.numpy().copy()))
            del keep[::2]
            keep.append(gm.empty(int(rng.integers(1, 3_000_000)), dtype=gm.float32))
            del keep, a, b, big, c, s, m
    return out


def test_python_threads_keep_statistics_exact_and_results_equal():
    gc.collect()
    before = by_category("cpu")
    seeds = list(range(8))
    expected = {s: workload(s) for s in seeds}  # one thread
    results, errors = {}, []

    def run(s):
        try:
            results[s] = workload(s)
        except BaseException as e:  # noqa: BLE001 - reported below with its thread
            errors.append((s, repr(e)))

    threads = [threading.Thread(target=run, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for s in seeds:
        for (c, total, m), (c0, total0, m0) in zip(results[s], expected[s]):
            np.testing.assert_array_equal(c, c0)
            assert total == total0
            np.testing.assert_array_equal(m, m0)
    del results, expected
    gc.collect()
    assert by_category("cpu") == before

