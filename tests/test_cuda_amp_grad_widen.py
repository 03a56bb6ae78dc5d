"""float32 + bfloat16 on CUDA (kernels/cuda/elementwise.cu cuda_elementwise_add_widen_forward) against the CPU
(elementwise_add_widen_forward): autocast's bfloat16 weight gradients added into float32 .grad without a float32
copy. Bit for bit (NaN payloads aside), contiguous, strided, broadcast and in place, and the same bytes counted
on CUDA as on meta (no workspace copy of the bfloat16 operand on either)."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda

pytestmark = [requires_cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]
C = gm._C


def _values(shape, seed):
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(shape) * 10.0 ** rng.integers(-40, 38, shape)).astype(np.float32)
    flat = v.reshape(-1)
    flat[rng.integers(0, flat.size, flat.size // 8)] = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)[
        rng.integers(0, 5, flat.size // 8)]
    return v


def _bits_equal(got, want):
    got, want = np.asarray(got.cpu().numpy()), np.asarray(want.numpy())
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("n", [1, 17, 1000, 70001])
def test_contiguous_and_in_place(n):
    a = C.from_numpy(_values(n, n), 0, "cpu")
    b = C.from_numpy(_values(n, n + 1), 3, "cpu")
    want = C.binary(0, a, b)
    ga, gb = a.cuda(), b.cuda()
    _bits_equal(C.binary(0, ga, gb), want)
    assert C.binary(0, ga, gb, ga) is ga
    _bits_equal(ga, want)


def test_strided_and_broadcast():
    a = C.from_numpy(_values((6, 35), 1), 0, "cpu")
    b = C.from_numpy(_values((35, 6), 2), 3, "cpu")
    row = C.from_numpy(_values((35,), 3), 3, "cpu")
    _bits_equal(C.binary(0, a.cuda(), b.cuda().t()), C.binary(0, a, b.t()))
    _bits_equal(C.binary(0, a.cuda(), row.cuda()), C.binary(0, a, row))


def test_cuda_bytes_equal_meta_bytes():
    peaks = {}
    for dev in ("cuda", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_stats(dev)["allocated"]["current"]
        g = gm.zeros(256, 1024, device=dev)
        b = gm.zeros(256, 1024, dtype=gm.bfloat16, device=dev)
        C.binary(0, g, b, g)
        peaks[dev] = gm.memory.memory_stats(dev)["allocated"]["peak"] - base
        del g, b
    assert peaks["cuda"] == peaks["meta"] == 256 * 1024 * 6
