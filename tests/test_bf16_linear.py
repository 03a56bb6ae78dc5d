"""bfloat16 linear on bfloat16 products (kernels/cpu/linear.c on gemm_bf16): forward and gradients against PyTorch's
bfloat16 CPU results and float64, no float32 copies (meta bytes equal CPU bytes, and no workspace)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F

torch = pytest.importorskip("torch")

# (input shape, out_features, bias, weight given as a transposed view): sizes that cross the product's blocks
CASES = [((4, 10), 7, True, False), ((3, 5, 33), 300, False, False), ((130, 513), 17, True, True), ((2, 1), 3, True, False)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_bf16_linear_matches_pytorch_and_float64(case, threads):
    shape, fo, bias, wt = case
    gen = torch.Generator().manual_seed(fo)
    x = torch.randn(*shape, generator=gen).bfloat16()
    w = (torch.randn(fo, shape[-1], generator=gen) / shape[-1] ** 0.5).bfloat16()
    b = torch.randn(fo, generator=gen).bfloat16() if bias else None
    go = torch.randn(*shape[:-1], fo, generator=gen).bfloat16()

    def torch_side(dtype):
        ts = [t.detach().to(dtype).requires_grad_() for t in (x, w) + ((b,) if bias else ())]
        out = torch.nn.functional.linear(ts[0], ts[1], ts[2] if bias else None)
        out.backward(go.to(dtype))
        return [out.detach().double().numpy()] + [t.grad.double().numpy() for t in ts]

    gm.set_num_threads(threads)
    gx = gm.tensor(x.float().numpy()).to(gm.bfloat16).requires_grad_()
    if wt:  # a column-major weight: the product reads it through its strides
        gw = gm.tensor(np.ascontiguousarray(w.float().numpy().T)).to(gm.bfloat16).requires_grad_()
        wv = gw.t()
    else:
        gw = wv = gm.tensor(w.float().numpy()).to(gm.bfloat16).requires_grad_()
    gb = gm.tensor(b.float().numpy()).to(gm.bfloat16).requires_grad_() if bias else None
    out = F.linear(gx, wv, gb)
    assert out.dtype == gm.bfloat16
    out.backward(gm.tensor(go.float().numpy()).to(gm.bfloat16))
    gwg = gw.grad.float().numpy().T if wt else gw.grad.float().numpy()
    ours = [out.detach().float().numpy(), gx.grad.float().numpy(), gwg] + ([gb.grad.float().numpy()] if bias else [])
    for name, o, t, r in zip(("out", "dx", "dw", "db"), ours, torch_side(torch.bfloat16), torch_side(torch.float64)):
        scale = np.abs(r).max() + 1e-30
        err, terr = np.abs(o - r).max() / scale, np.abs(t - r).max() / scale
        assert err <= 2.0 ** -6, (name, err)
        assert err <= terr + 2 * 2.0 ** -8, (name, err, terr)


def test_bf16_linear_meta_bytes_equal_cpu_bytes_and_no_float32_copy():
    peaks = {}
    for dev in ("cpu", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_stats(dev)["allocated"]["current"]
        x = gm.zeros(64, 256, dtype=gm.bfloat16, device=dev).requires_grad_()
        w = gm.zeros(128, 256, dtype=gm.bfloat16, device=dev).requires_grad_()
        F.linear(x, w).sum().backward()
        s = gm.memory.memory_stats(dev)
        peaks[dev] = (s["allocated"]["peak"] - base, s["by_category"]["workspace"]["peak"])
        del x, w
    assert peaks["cpu"] == peaks["meta"]
    # before, the operands were widened into workspace: (64 x 256 + 128 x 256 + 64 x 128) float32 = 224 KiB; what
    # is left (16 KiB) is the sum's gradient, a broadcast view that csrc copies into a matrix (64 x 128 bfloat16)
    assert peaks["cpu"][1] <= 64 * 128 * 2
