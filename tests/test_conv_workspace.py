"""The convolutions' workspace: its bound (the default 64 MiB, the same results under a smaller one, an error below
one column), that no allocation outlives its op, the column buffer tiled by output rows, and the meta device
allocating exactly the CPU's bytes (shapes, workspace, the copy of a strided grad_output) -- in exact allocator
bytes."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from conv_util import (R, T, _workspace_peak, ref_conv2d, ref_conv2d_grad_weight, ref_conv_transpose2d, threads,
                       workspace_limit)
from gpumemnet import _C
from gpumemnet.nn._functional_conv import conv2d, conv_transpose2d, linear
from gradcheck import assert_close, to_numpy


# ---- the workspace bound --------------------------------------------------------------------------------------
def test_default_workspace_limit_is_64_mib():
    assert _C.get_conv_workspace_limit() == 64 << 20


@pytest.mark.parametrize("dtype", [gm.float32, gm.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", [
    dict(x=(3, 6, 11, 9), w=(6, 3, 3, 3), groups=2, padding=1),
    dict(x=(2, 4, 10, 10), w=(6, 4, 3, 2), stride=2, dilation=(2, 1), padding=(2, 1)),
    dict(x=(2, 16, 24, 24), w=(32, 16, 3, 3), padding=1, threads=2),  # threaded: one buffer per thread
], ids=["grouped3x3", "strided", "threaded"])
def test_workspace_bound_gives_the_same_results(workspace_limit, threads, case, dtype):
    case = dict(case)
    gm.set_num_threads(case.pop("threads", 1))
    x, w = R(*case.pop("x")), R(*case.pop("w"))
    column = w.shape[1] * w.shape[2] * w.shape[3] * (4 if dtype == gm.float32 else 8)

    def run():
        xt, wt = T(x, dtype, requires_grad=True), T(w, dtype, requires_grad=True)
        out = conv2d(xt, wt, **case)
        gm.memory.reset_peak_memory_stats("cpu")
        out.backward(T(np.ones(out.shape) * 0.5, dtype))
        return to_numpy(out), to_numpy(xt.grad), to_numpy(wt.grad)

    full = run()
    # Every output element is the same dot product whatever the tiling, but OpenBLAS picks its kernel by matrix
    # size (small-matrix kernels for narrow tiles), and the weight gradient sums over tiles: results agree to
    # rounding, not bit for bit. The rounding of a K-term sum of unit-sized terms grows as sqrt(K) ulps, and an
    # output that cancels to near 0 keeps that absolute error (seen: 1.3e-5 at -0.28, K = 144, on AVX-512), so the
    # tolerance is scaled by sqrt(K); a tiling bug (a term lost or doubled) is off by about 1.
    k_terms = w.shape[1] * w.shape[2] * w.shape[3]
    tol = (1e-5 if dtype == gm.float32 else 1e-12) * max(1.0, np.sqrt(k_terms) / 4)
    for limit in (column, 3 * column + 17, 40 * column):
        _C.set_conv_workspace_limit(limit)
        gm.memory.reset_peak_memory_stats("cpu")
        xt, wt = T(x, dtype), T(w, dtype)
        out = to_numpy(conv2d(xt, wt, **case))
        assert _workspace_peak() <= limit + 512, f"forward: workspace peak {_workspace_peak()} > limit {limit}"
        tiled = run()
        assert _workspace_peak() <= limit + 512, f"backward: workspace peak {_workspace_peak()} > limit {limit}"
        for k, (a, b) in enumerate(zip((out,) + tiled[1:], full)):
            # one-column tiles make the float32 weight gradient a sum of ~1000 rank-1 updates, rounded each time
            t = tol * (20 if k == 2 else 1)
            assert_close(a, b, t, t, what=f"{('output', 'input gradient', 'weight gradient')[k]}, limit {limit}")


def test_transposed_conv_respects_the_workspace_bound(workspace_limit):
    x, w = R(2, 6, 5, 5), R(6, 4, 3, 3)
    ref = ref_conv_transpose2d(x, w, None, stride=2, padding=1)
    limit = 4 * 3 * 3 * 8 * 7  # seven columns
    _C.set_conv_workspace_limit(limit)
    gm.memory.reset_peak_memory_stats("cpu")
    xt, wt = T(x, requires_grad=True), T(w, requires_grad=True)
    out = conv_transpose2d(xt, wt, None, stride=2, padding=1)
    out.sum().backward()
    assert _workspace_peak() <= limit + 512
    assert_close(out, ref, 1e-12, 1e-12)


def test_pointwise_and_depthwise_need_no_workspace():
    for w in (R(8, 6, 1, 1), R(6, 1, 3, 3), R(12, 1, 3, 3)):
        x = T(R(2, 6, 8, 8), requires_grad=True)
        groups = 1 if w.shape[2] == 1 else 6
        gm.memory.reset_peak_memory_stats("cpu")
        out = conv2d(x, T(w, requires_grad=True), groups=groups, padding=w.shape[2] // 2)
        out.backward(gm.ones(out.shape, dtype=out.dtype))  # contiguous: nothing to copy for gemm
        assert _workspace_peak() == 0, f"weight {w.shape}: workspace peak {_workspace_peak()}"


def test_workspace_smaller_than_one_column_is_an_error(workspace_limit):
    _C.set_conv_workspace_limit(100)
    with pytest.raises(RuntimeError, match="cannot hold one im2col column of 108 bytes"):
        conv2d(gm.zeros((1, 3, 5, 5)), gm.zeros((2, 3, 3, 3)))
    conv2d(gm.zeros((1, 3, 5, 5)), gm.zeros((2, 3, 1, 1)))  # the pointwise gemm needs none
    with pytest.raises(ValueError, match="non-negative number of bytes"):
        _C.set_conv_workspace_limit(-1)


def test_no_allocation_outlives_its_op(workspace_limit):
    """Outputs, copies and workspaces are all released: after every path (non-contiguous operands, expanded
    gradients, an error raised after copies were made) the allocator holds exactly what the test holds."""
    gc.collect()
    base = gm.memory.memory_allocated("cpu")
    x = T(R(2, 6, 7, 5), requires_grad=True)
    w = T(R(6, 4, 3, 3)).transpose(0, 1)  # non-contiguous: copied
    w.requires_grad = True
    conv2d(x, w, padding=1, groups=1).sum().backward()
    conv_transpose2d(x.transpose(2, 3), T(R(6, 2, 3, 3), requires_grad=True), stride=2, groups=2).sum().backward()
    linear(x.permute(0, 2, 3, 1), T(R(4, 6), requires_grad=True), T(R(4), requires_grad=True)).sum().backward()
    _C.set_conv_workspace_limit(64)
    with pytest.raises(RuntimeError, match="cannot hold one im2col column"):
        conv2d(x.detach(), w.detach())
    del x, w
    gc.collect()
    assert gm.memory.memory_allocated("cpu") == base


# ---- meta device ------------------------------------------------------------------------------------------------
def test_meta_shapes_and_allocations(workspace_limit, threads):
    gm.set_num_threads(1)
    x = gm.empty((8, 64, 56, 56), device="meta", requires_grad=True)
    w = gm.empty((128, 64, 3, 3), device="meta", requires_grad=True)
    b = gm.empty((128,), device="meta", requires_grad=True)
    gm.memory.reset_peak_memory_stats("meta")
    before = gm.memory.memory_allocated("meta")
    # no padding: with padding 1 (a 28x28 output, the input's phases) float32 takes the direct kernel where the CPU
    # has AVX-512 (tests/test_conv_direct.py)
    out = conv2d(x, w, b, stride=2, padding=0)
    assert tuple(out.shape) == (8, 128, 27, 27) and out.device.type == "meta"
    assert gm.memory.memory_allocated("meta") - before == 8 * 128 * 27 * 27 * 4
    stats = gm.memory.memory_stats("meta")["by_category"]["workspace"]
    assert stats["current"] == 0
    # a tile of whole output rows of about 256 KiB of columns, not the item's whole column matrix (64*9 rows x 729
    # positions), although that fits in 64 MiB: 256 KiB / (64*9*4 bytes) = 113 columns, below the floor of 256
    # columns, rounded up to 10 rows of 27
    assert stats["peak"] == 64 * 9 * 10 * 27 * 4
    out.sum().backward()
    assert tuple(x.grad.shape) == tuple(x.shape) and tuple(w.grad.shape) == tuple(w.shape)
    assert tuple(b.grad.shape) == (128,)

    assert tuple(conv2d(gm.empty((2, 3, 9, 9), device="meta"), gm.empty((6, 1, 3, 3), device="meta"),
                        groups=3, padding="same").shape) == (2, 6, 9, 9)
    t = conv_transpose2d(gm.empty((2, 16, 7, 7), device="meta"), gm.empty((16, 8, 4, 4), device="meta"),
                         stride=2, padding=1)
    assert tuple(t.shape) == (2, 8, 14, 14)
    y = linear(gm.empty((4, 10, 32), device="meta"), gm.empty((16, 32), device="meta"))
    assert tuple(y.shape) == (4, 10, 16)
    # half precision: stored in half, computed in float32 (the autocast path), on meta as on the CPU
    h = conv2d(gm.empty((1, 3, 8, 8), device="meta", dtype=gm.float16),
               gm.empty((4, 3, 3, 3), device="meta", dtype=gm.float16))
    assert tuple(h.shape) == (1, 4, 6, 6) and h.dtype == gm.float16


@pytest.mark.parametrize("nthreads", [1, 2])
def test_meta_and_cpu_allocate_the_same_workspace(workspace_limit, threads, nthreads):
    """meta plans exactly like the CPU (a CPU thread takes one column buffer, within the limit)."""
    gm.set_num_threads(nthreads)
    _C.set_conv_workspace_limit(10_000)
    peaks = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((2, 4, 12, 12), device=dev)
        w = gm.zeros((4, 4, 3, 3), device=dev)
        gm.memory.reset_peak_memory_stats(dev)
        conv2d(x, w, padding=1)
        peaks.append(gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"])
    assert peaks[0] == peaks[1]
    if nthreads == 1:
        assert peaks[0] == 69 * 4 * 9 * 4 + 512 - (69 * 4 * 9 * 4) % 512


# ---- tiles within an image --------------------------------------------------------------------------------------
def test_tiles_split_an_image_by_output_rows(threads):
    """The column buffer is whole output rows of about 256 KiB per thread, not the image's column matrix: in
    float64 8*9*8 = 576 bytes per column, 2**18 // 576 = 455 columns, rounded up to 8 rows of 64 (of 64 rows);
    in float32 15 rows. Every pass still matches the references across the tile boundary, and meta plans the same
    bytes."""
    gm.set_num_threads(1)
    x, w, b = R(2, 8, 64, 64), R(4, 8, 3, 3), R(4)
    xt, wt = T(x, requires_grad=True), T(w, requires_grad=True)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(xt, wt, T(b), padding=1)
    assert _workspace_peak() == 8 * 64 * 8 * 9 * 8  # float64
    assert_close(out, ref_conv2d(x, w, b, padding=1), 1e-10, 1e-10, what="forward")
    dout = R(*out.shape)
    out.backward(T(dout))
    assert_close(wt.grad, ref_conv2d_grad_weight(x, dout, w.shape, padding=1), 1e-9, 1e-10, what="weight grad")
    # the input-gradient is the transposed conv of dout: flip the kernel and swap its channels
    dx_ref = ref_conv2d(dout, w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3), padding=1)
    assert_close(xt.grad, dx_ref, 1e-9, 1e-10, what="input grad")
    peaks = []
    for dev in ("cpu", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        conv2d(gm.zeros((1, 8, 64, 64), device=dev), gm.zeros((4, 8, 3, 3), device=dev), padding=1)
        peaks.append(gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"])
    assert peaks[0] == peaks[1] == 15 * 64 * 8 * 9 * 4


def test_meta_allocates_the_cpus_bytes_for_a_strided_grad_output():
    """A transposed view's gradient reaches the convolution strided: the bias gradient then reads a contiguous
    copy of it, and meta (what gm.memory.estimate runs) allocates that copy too."""
    peaks = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((2, 3, 8, 8), device=dev, requires_grad=True)
        w, b = gm.zeros((4, 3, 3, 3), device=dev, requires_grad=True), gm.zeros(4, device=dev, requires_grad=True)
        y = conv2d(x, w, b, padding=1).transpose(2, 3)
        g = gm.zeros((2, 4, 8, 8), device=dev)
        gc.collect()
        gm.memory.record_history(True, device=dev)
        y.backward(g)
        peaks.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert peaks[0] == peaks[1]  # every allocation, in order
    assert (2 * 4 * 8 * 8 * 4, "workspace") in peaks[0]  # the copy
