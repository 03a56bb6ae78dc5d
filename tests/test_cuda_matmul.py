"""CUDA matmul (kernels/cuda/matmul.cu through cuBLAS; kernels/cuda/emu/matmul_emu.cpp in the emulator) against
the CPU from the same inputs: vectors, matrices, batches, broadcast batch dims, transposed and strided views,
every dtype, empty dims, the backward through autograd, gm.backends.cuda.matmul.allow_tf32, device errors, and
the allocator's bytes (the same on cuda as on cpu)."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet import backends

from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda

rng = np.random.default_rng(2)
FLOATS = [gm.float32, gm.float64, gm.float16, gm.bfloat16]
# products sum K terms in another order than OpenBLAS: float32 needs a little more room than elementwise ops
TOL = {gm.float32: (2e-5, 2e-5), gm.float64: (1e-12, 1e-12), gm.float16: (2e-3, 2e-3),
       gm.bfloat16: (1.6e-2, 1.6e-2)}


def make(shape, dtype):
    """The same values on cpu and cuda (integers for int64, small normals otherwise)."""
    if dtype == gm.int64:
        a = rng.integers(-50, 50, shape)
    else:
        a = rng.standard_normal(shape)
    c = gm.tensor(a).to(dtype)
    return c, c.cuda()


def check(out_g, out_c, dtype):
    if dtype == gm.int64:
        assert_close(out_g, out_c, exact=True)
    else:
        r, a = TOL[dtype]
        assert_close(out_g, out_c, rtol=r, atol=a)


SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((1, 1), (1, 1)), ((5, 2, 3), (5, 3, 4)),
          ((5, 2, 3), (3, 4)), ((3,), (5, 3, 4)), ((2, 1, 4, 3), (3, 3, 2)), ((2, 3, 4, 5), (2, 3, 5, 2)),
          ((7, 33), (33, 17))]


@pytest.mark.parametrize("dtype", FLOATS + [gm.int64])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_matches_cpu(dtype, sa, sb):
    (ac, ag), (bc, bg) = make(sa, dtype), make(sb, dtype)
    check(ag @ bg, ac @ bc, dtype)


def transposed(shape, dtype):
    """A (..., m, n) operand stored as its transpose: column-contiguous, read by cuBLAS with a transpose flag."""
    c, g = make(shape[:-2] + (shape[-1], shape[-2]), dtype)
    return c._transpose(-1, -2), g._transpose(-1, -2)


@pytest.mark.parametrize("dtype", FLOATS + [gm.int64])
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_transposed_operands(dtype, ta, tb):
    for sa, sb in [((4, 6), (6, 3)), ((3, 4, 6), (3, 6, 5)), ((3, 4, 6), (6, 5))]:
        ac, ag = transposed(sa, dtype) if ta else make(sa, dtype)
        bc, bg = transposed(sb, dtype) if tb else make(sb, dtype)
        check(ag @ bg, ac @ bc, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_row_slices_and_strided_vectors(dtype):
    # rows with a leading dimension larger than the row (a slice of a wider matrix) and vectors with a stride:
    # both readable by cuBLAS as they are
    wc, wg = make((5, 9), dtype)
    bc, bg = make((4, 3), dtype)
    check(wg._slice(1, 2, 6, 1) @ bg, wc._slice(1, 2, 6, 1) @ bc, dtype)
    vc, vg = make((8,), dtype)
    mc, mg = make((4, 5), dtype)
    check(vg._slice(0, 0, 8, 2) @ mg, vc._slice(0, 0, 8, 2) @ mc, dtype)
    check(mg._transpose(0, 1) @ vg._slice(0, 0, 8, 2), mc._transpose(0, 1) @ vc._slice(0, 0, 8, 2), dtype)


@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16])
def test_half_operands_no_blas_can_read(dtype):
    # every second row and column of a matrix: neither row- nor column-contiguous. float16/bfloat16 are packed
    # into the workspace (the one the CPU widens into), batch by batch, a broadcast operand once
    wc, wg = make((3, 8, 10), dtype)
    bc, bg = make((5, 4), dtype)
    sl = lambda t: t._slice(1, 0, 8, 2)._slice(2, 0, 10, 2)  # noqa: E731  (3, 4, 5)
    check(sl(wg) @ bg, sl(wc) @ bc, dtype)
    cc, cg = make((4, 6), dtype)
    check(cg._transpose(0, 1) @ sl(wg), cc._transpose(0, 1) @ sl(wc), dtype)


@pytest.mark.parametrize("dtype", [gm.float32, gm.float64])
def test_float_operands_no_blas_can_read_are_copied(dtype):
    wc, wg = make((8, 10), dtype)
    bc, bg = make((5, 3), dtype)
    sl = lambda t: t._slice(0, 0, 8, 2)._slice(1, 0, 10, 2)  # noqa: E731
    check(sl(wg) @ bg, sl(wc) @ bc, dtype)


def test_broadcast_operand_with_stride_zero_batches():
    ac, ag = make((4, 3), gm.float32)
    bc, bg = make((2, 3, 5), gm.float32)
    check(ag._expand((2, 4, 3)) @ bg, ac._expand((2, 4, 3)) @ bc, gm.float32)
    check(ag._unsqueeze(0)._expand((6, 4, 3)) @ bg._slice(0, 0, 1, 1)._expand((6, 3, 5)),
          ac._unsqueeze(0)._expand((6, 4, 3)) @ bc._slice(0, 0, 1, 1)._expand((6, 3, 5)), gm.float32)


@pytest.mark.parametrize("dtype", FLOATS + [gm.int64])
@pytest.mark.parametrize("sa,sb", [((0, 3), (3, 4)), ((2, 0), (0, 4)), ((3, 0), (0,)), ((0, 2, 3), (3, 4)),
                                   ((2, 3), (3, 0))])
def test_empty_dims(dtype, sa, sb):
    (ac, ag), (bc, bg) = make(sa, dtype), make(sb, dtype)
    out = ag @ bg
    assert tuple(out.shape) == tuple((ac @ bc).shape)
    assert_close(out, ac @ bc, exact=True)  # K == 0 gives zeros


def test_larger_product():
    (ac, ag), (bc, bg) = make((64, 300), gm.float32), make((300, 48), gm.float32)
    check(ag @ bg, ac @ bc, gm.float32)


# ---- backward --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (3,)),
                                   ((3,), (3, 4)), ((3,), (3,))])
def test_backward_matches_cpu(dtype, sa, sb):
    (ac, ag), (bc, bg) = make(sa, dtype), make(sb, dtype)
    for t in (ac, ag, bc, bg):
        t.requires_grad_()
    yc, yg = ac @ bc, ag @ bg
    g = gm.tensor(rng.standard_normal(tuple(yc.shape))).to(dtype)
    yc.backward(g)
    yg.backward(g.cuda())
    check(ag.grad, ac.grad, dtype)
    check(bg.grad, bc.grad, dtype)


# ---- TF32 --------------------------------------------------------------------------------------------------------

def test_allow_tf32_switch():
    m = backends.cuda.matmul
    assert m.allow_tf32 is False  # off by default: float32 products round like the CPU's
    try:
        m.allow_tf32 = True
        assert m.allow_tf32 is True
        (ac, ag), (bc, bg) = make((16, 64), gm.float32), make((64, 8), gm.float32)
        # TF32 keeps 10 bits of mantissa: close to the float32 product, not equal to it
        assert_close(ag @ bg, ac @ bc, rtol=5e-2, atol=5e-2)
    finally:
        m.allow_tf32 = False
    assert m.allow_tf32 is False
    with pytest.raises(TypeError, match="bool"):
        m.allow_tf32 = 1


# ---- errors and memory -------------------------------------------------------------------------------------------

def test_mixing_cpu_and_cuda_is_a_clear_error():
    (ac, ag), (bc, bg) = make((2, 3), gm.float32), make((3, 4), gm.float32)
    with pytest.raises(RuntimeError, match="same device"):
        _C.matmul(ag, bc)
    with pytest.raises(RuntimeError, match="same device"):
        _C.matmul(ac, bg)


def test_shape_errors_are_the_cpu_ones():
    (_, ag), (_, bg) = make((2, 3), gm.float32), make((4, 5), gm.float32)
    with pytest.raises(ValueError, match="inner dimensions 3 and 4 differ"):
        _C.matmul(ag, bg)


@pytest.mark.parametrize("dtype", [gm.float32, gm.float16, gm.int64])
@pytest.mark.parametrize("layout", ["plain", "batched", "strided"])
def test_cuda_allocates_what_the_cpu_allocates(dtype, layout):
    def run(dev):
        a, b = gm.tensor(rng.standard_normal((3, 8, 10))).to(dtype), gm.tensor(rng.standard_normal((5, 6)))
        a, b = a.to(dev), b.to(dtype).to(dev)
        if layout == "plain":
            a = a._select(0, 0)._slice(1, 0, 5, 1)
        elif layout == "batched":
            a = a._slice(2, 0, 5, 1)
        else:
            a = a._slice(1, 0, 8, 2)._slice(2, 0, 10, 2)  # (3, 4, 5): no BLAS can read it
        mem = gm.memory
        base = mem.memory_allocated(dev)
        mem.reset_peak_memory_stats(dev)
        out = _C.matmul(a, b)
        return mem.memory_allocated(dev) - base, mem.max_memory_allocated(dev) - base, out

    ga, gp, _ = run("cuda:0")
    ca, cp, _ = run("cpu")
    assert (ga, gp) == (ca, cp)
