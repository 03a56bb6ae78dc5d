"""bfloat16 matmul on bfloat16 products (kernels/cpu/matmul.c on gemm_bf16 where the CPU has AMX):
float32 sums of exact products rounded once, against float64 (transposed, strided, batched with broadcast
operands) and PyTorch's bfloat16 matmul; the workspace csrc allocates for it (2 (M K + K N) bytes, what CUDA needs
to pack an operand cuBLAS cannot read; the CPU uses none) is the same on meta and the CPU."""
import numpy as np
import pytest

import gpumemnet as gm


def bf16(x):
    """float32 -> the float32 values of its bfloat16 rounding (nearest even)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32).reshape(np.shape(x))


def _check(got, a64, b64, K):
    ref = a64 @ b64
    bound = (np.abs(a64) @ np.abs(b64)) * (K + 2) * 2.0 ** -24 + np.abs(ref) * 2.0 ** -8 + 1e-30
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= bound), float((err / bound).max())


# (a shape, b shape, a transposed view, b transposed view, a strided view)
CASES = [((64, 576), (576, 300), False, False, False), ((37, 70), (70, 45), True, False, False),
         ((50, 33), (33, 90), False, True, True), ((3, 40, 65), (65, 20), False, False, False),
         ((2, 1, 17, 40), (3, 40, 9), True, True, False), ((512, 1024), (1024, 256), False, False, False)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_bf16_matmul_against_float64(case, threads):
    sa, sb, ta, tb, strided = case
    rng = np.random.default_rng(len(sa) * 100 + sa[-1])
    a = bf16(rng.standard_normal(sa).astype(np.float32))
    b = bf16(rng.standard_normal(sb).astype(np.float32))
    gm.set_num_threads(threads)
    try:
        def view(x, t, s):
            if t:  # stored transposed, read through a transposed view
                return gm.tensor(np.ascontiguousarray(np.swapaxes(x, -1, -2))).to(gm.bfloat16).transpose(-1, -2)
            if s:  # every other column of a wider matrix
                w = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), np.float32)
                w[..., ::2] = x
                return gm.tensor(w).to(gm.bfloat16)[..., ::2]
            return gm.tensor(x).to(gm.bfloat16)
        out = view(a, ta, strided) @ view(b, tb, False)
    finally:
        gm.set_num_threads(2)
    assert out.dtype == gm.bfloat16
    _check(out.float().numpy(), a.astype(np.float64), b.astype(np.float64), sa[-1])


def test_bf16_matmul_near_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a = bf16(rng.standard_normal((96, 700)).astype(np.float32))
    b = bf16(rng.standard_normal((700, 130)).astype(np.float32))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ours = (gm.tensor(a).to(gm.bfloat16) @ gm.tensor(b).to(gm.bfloat16)).float().numpy()
    theirs = (torch.from_numpy(a).bfloat16() @ torch.from_numpy(b).bfloat16()).float().numpy()
    scale = np.abs(ref).max()
    err, terr = np.abs(ours - ref).max() / scale, np.abs(theirs - ref).max() / scale
    assert err <= terr + 2 * 2.0 ** -8, (err, terr)


def _amx():
    import ctypes
    from gpumemnet import _C
    return ctypes.CDLL(_C.__file__).gemm_bf16_amx() == 1


def test_bf16_matmul_meta_bytes_equal_cpu_bytes():
    M, K, N = 64, 96, 48
    peaks = {}
    for dev in ("cpu", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_stats(dev)["allocated"]["current"]
        a = gm.zeros(M, K, dtype=gm.bfloat16, device=dev).requires_grad_()
        b = gm.zeros(K, N, dtype=gm.bfloat16, device=dev).requires_grad_()
        (a @ b).sum().backward()
        s = gm.memory.memory_stats(dev)
        peaks[dev] = (s["allocated"]["peak"] - base, s["by_category"]["workspace"]["peak"])
        del a, b
    assert peaks["cpu"] == peaks["meta"]
    if not _amx():
        return  # widened to float32 for sgemm: 4 (M K + K N + M N) bytes
    # forward: 2 (M K + K N); the backward's products (M, N) @ (N, K) and (K, M) @ (M, N) the same or less
    assert peaks["cpu"][1] <= 2 * (M * K + K * N) + 2 * M * N * 2
