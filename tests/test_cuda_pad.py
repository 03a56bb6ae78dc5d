"""F.pad on CUDA against the CPU (kernels/cuda/pad.cu, csrc/ops_pad.c): every mode, 1-3 padded dims, crops, every
float dtype (and int64/bool for constant), forward and backward bit-identical (the forward copies bytes; the
backward adds the same gradients in the same order), and the allocations the same. Runs on a GPU or on the
emulator build (tests/cuda_util.py)."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda

FLOATS = [gm.float32, gm.float64, gm.float16, gm.bfloat16]
CONSTANT, REFLECT, REPLICATE, CIRCULAR = range(4)
CASES = [((2, 3, 5, 6), (2, 1, 1, 3), REFLECT), ((4, 7), (-2, 3), REFLECT), ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 1),
                                                                           REFLECT),
         ((2, 3, 5, 6), (-1, 2, 2, -2), REPLICATE), ((2, 4, 7), (5, 1), REPLICATE),
         ((2, 3, 5, 6), (5, 2, 5, 1), CIRCULAR), ((2, 3, 5, 6), (-1, 2, 2, -3), CONSTANT),
         ((2, 3, 5, 6), (1, 1, 1, 1, 1, 1), CONSTANT), ((1, 1, 67, 300), (3, 3, 3, 3), REFLECT)]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape,pads,mode", CASES)
def test_pad_forward_backward(shape, pads, mode, dtype):
    r = np.random.default_rng(len(shape) + mode)
    xc = gm.tensor(r.standard_normal(shape), dtype=dtype)
    xd = xc.cuda()
    oc, od = _C.pad(xc, pads, mode, 0.25), _C.pad(xd, pads, mode, 0.25)
    assert_close(od, oc, exact=True)
    gc = gm.tensor(r.standard_normal(tuple(oc.shape)), dtype=dtype)
    dc, dd = _C.pad_backward(gc, pads, mode, shape), _C.pad_backward(gc.cuda(), pads, mode, shape)
    assert_close(dd, dc, exact=True)


@pytest.mark.parametrize("dtype", [gm.int64, gm.bool_], ids=str)
def test_pad_constant_int_and_bool(dtype):
    xc = gm.tensor(np.random.default_rng(0).integers(0, 2, (2, 3, 4))).to(dtype)
    assert_close(_C.pad(xc.cuda(), (1, 2, 0, 1), CONSTANT, 1.0), _C.pad(xc, (1, 2, 0, 1), CONSTANT, 1.0), exact=True)


def test_pad_through_autograd_and_bytes():
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8))
    res = []
    for dev in ("cpu", "cuda"):
        a = gm.tensor(x, dtype=gm.float32).to(dev).requires_grad_()
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_allocated(dev)
        out = gm.nn.ReflectionPad2d(3)(a)
        held = gm.memory.memory_allocated(dev) - base
        (out * out).sum().backward()
        res.append((out, a.grad, held))
    assert_close(res[1][0], res[0][0], exact=True)
    assert_close(res[1][1], res[0][1], exact=True)
    assert res[0][2] == res[1][2]
