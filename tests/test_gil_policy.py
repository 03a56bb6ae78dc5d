"""GM_KERNEL's GIL policy (csrc/gm.h, csrc/threads.c): a CPU kernel runs without the GIL when the largest tensor its op
made or took (for a fused optimizer step: its whole group) has at least 32768 elements, and keeps it otherwise.
`_C._gil_released_kernels()` counts, per thread, the kernels that gave the GIL away. The reductions are the case the
rule is for: a full reduction of a large tensor has a one-element output, so only its input says the kernel is long."""
import threading

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

BIG, SMALL = 200_000, 16  # elements: above and below the threshold (GM_NOGIL_MIN_WORK = 32768)

REDUCTIONS = {
    "sum": lambda x: _C.reduce(0, x),
    "mean": lambda x: _C.reduce(1, x),
    "amax": lambda x: _C.reduce(2, x),
    "amin": lambda x: _C.reduce(3, x),
    "prod": lambda x: _C.reduce(4, x),
    "argmax": lambda x: _C.argmax(x),
    "argmin": lambda x: _C.argmin(x),
    "max_dim": lambda x: _C.max_dim(x, 0),
    "min_dim": lambda x: _C.min_dim(x, 0),
    "var": lambda x: _C.var(x),
}


def released_by(fn, x):
    """How many kernels gave the GIL away in one call of fn(x). fn runs once before: a size noted by an op whose
    kernel does not go through GM_KERNEL (the tensor's creation) is taken by the next kernel, which must not be
    the one counted."""
    fn(x)
    before = _C._gil_released_kernels()
    fn(x)
    return _C._gil_released_kernels() - before


def data(n):
    return gm.from_numpy(np.random.default_rng(n).uniform(0.5, 1.5, n).astype(np.float32))


@pytest.mark.parametrize("name", REDUCTIONS)
def test_a_full_reduction_of_a_large_tensor_runs_without_the_gil(name):
    assert released_by(REDUCTIONS[name], data(BIG)) == 1


@pytest.mark.parametrize("name", REDUCTIONS)
def test_a_small_reduction_keeps_the_gil(name):
    assert released_by(REDUCTIONS[name], data(SMALL)) == 0


def _sgd(ps):
    _C.sgd_step_(ps, [gm.ones_like(p) for p in ps], None, None, 0.1)


def _adam(ps):
    n = len(ps)
    _C.adam_step_(ps, [gm.ones_like(p) for p in ps], [gm.zeros_like(p) for p in ps],
                  [gm.zeros_like(p) for p in ps], None, [1] * n, 0.1, 0.9, 0.999)


@pytest.mark.parametrize("step", [_sgd, _adam], ids=["sgd", "adam"])
def test_an_optimizer_step_is_as_large_as_its_whole_group(step):
    """The fused step walks every parameter of the group: many small parameters that add up to a large group
    release the GIL; a small group keeps it (it used to give the GIL away on every step). The gradients and
    states each call makes are small tensors: only the step's own kernel can count."""
    assert released_by(step, [data(4096) for _ in range(16)]) == 1
    assert released_by(step, [data(SMALL) for _ in range(4)]) == 0


def test_the_size_is_noted_per_op():
    """The kernel takes the note of its op's size: a small reduction right after a large one keeps the GIL."""
    big, small = data(BIG), data(SMALL)
    _C.reduce(0, small)  # takes the note of the tensors' creation (released_by says why)
    before = _C._gil_released_kernels()
    _C.reduce(0, big)
    _C.reduce(0, small)
    assert _C._gil_released_kernels() - before == 1


def test_the_count_is_per_thread():
    seen = []
    x = data(BIG)
    before = _C._gil_released_kernels()
    t = threading.Thread(target=lambda: seen.append(released_by(REDUCTIONS["sum"], x)))
    t.start()
    t.join()
    assert seen == [1]
    assert _C._gil_released_kernels() == before
