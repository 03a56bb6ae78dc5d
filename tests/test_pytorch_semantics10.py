"""PyTorch semantics that scripts written for PyTorch rely on (stop 44, round 15 of the hunts: inference code, the
memory toolkit used as the stories' users use it, captum / adversarial attacks / torch.nn.utils / torch-optimizer),
each checked against PyTorch itself: the same function run under both libraries and the results compared."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _np(t):
    return t.detach().float().numpy()


@pytest.mark.parametrize("half_inputs", [False, True], ids=["float32 inputs", "bfloat16 inputs"])
def test_attention_backward_under_bf16_autocast(half_inputs):
    """scaled_dot_product_attention and MultiheadAttention trained under bf16 autocast (a Transformer's mixed
    precision step): the backward raised 'matmul: dtypes differ' where the scores of bfloat16 inputs met a float32
    gradient. Gradients are PyTorch's to bfloat16 rounding."""
    r = np.random.RandomState(0)
    q0, w0 = r.standard_normal((2, 2, 6, 8)).astype(np.float32), r.standard_normal((48, 16)).astype(np.float32) / 4
    x0 = r.standard_normal((2, 5, 16)).astype(np.float32)

    def run(L):
        q = L.tensor(q0, dtype=L.bfloat16 if half_inputs else L.float32, requires_grad=True)
        mha = L.nn.MultiheadAttention(16, 2, batch_first=True)
        with L.no_grad():
            mha.in_proj_weight.copy_(L.tensor(w0))
            mha.out_proj.weight.copy_(L.tensor(w0[:16]))
            mha.in_proj_bias.zero_(), mha.out_proj.bias.zero_()
        x = L.tensor(x0)
        with L.autocast("cpu", dtype=L.bfloat16):
            o = L.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            out, _ = mha(x, x, x, need_weights=False)
        (o.float().sum() + out.float().pow(2).sum()).backward()
        return o.dtype is L.bfloat16, out.dtype is L.bfloat16, _np(q.grad), _np(mha.in_proj_weight.grad)
    ref, got = _both(run)
    assert got[:2] == ref[:2] == (True, True)
    for a, b in zip(got[2:], ref[2:]):
        np.testing.assert_allclose(a, b, rtol=0.05, atol=0.05 * np.abs(b).max())
