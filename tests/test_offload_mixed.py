"""The mixed-dtype CPU Adam of optimizer offload (_C.adam_step_mixed_, kernels/cpu/optim.c adam_step_mixed): one
pass reads a half (or fp32) gradient, updates the fp32 master and moments, and writes the parameter rounded to the
gradient's dtype over the gradient. The master and state must equal, bit for bit, the fp32 fused Adam on the
widened gradient (itself tested against PyTorch in the optimizer tests), and the written parameter the master
rounded to the dtype; every bad argument is refused by name. The CUDA side: tests/test_cuda_offload.py."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

HALF = {"bfloat16": gm.bfloat16, "float16": gm.float16, "float32": gm.float32}
CASES = [  # (weight_decay, decoupled, amsgrad, maximize)
    (0.0, False, False, False),
    (0.1, False, True, False),
    (0.1, True, False, True),
    (0.0, True, True, False),
]


def _tensors(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    master = gm.from_numpy(rng.standard_normal(n).astype(np.float32))
    grad = gm.from_numpy(rng.standard_normal(n).astype(np.float32)).to(dtype)
    return master, grad


@pytest.mark.parametrize("name", list(HALF))
@pytest.mark.parametrize("wd,decoupled,amsgrad,maximize", CASES)
@pytest.mark.parametrize("n", [7, 70_001])  # one thread, and a team (OPTIM_PARALLEL_MIN is 32768)
def test_mixed_step_equals_fp32_adam_on_the_widened_gradient(name, wd, decoupled, amsgrad, maximize, n):
    dtype = HALF[name]
    master, grad = _tensors(n, dtype)
    ref_master = master.clone()
    m, v, mx = gm.zeros(n), gm.zeros(n), gm.zeros(n)
    rm, rv, rmx = gm.zeros(n), gm.zeros(n), gm.zeros(n)
    hp = (1e-2, 0.9, 0.999, 1e-8, wd, decoupled, amsgrad, maximize)
    for step in range(1, 4):
        _, grad = _tensors(n, dtype, seed=step)
        stage = grad.clone()
        _C.adam_step_mixed_(stage, master, m, v, mx if amsgrad else None, step, *hp)
        _C.adam_step_([ref_master], [grad.float()], [rm], [rv], [rmx] if amsgrad else None, [step], *hp)
        np.testing.assert_array_equal(master.numpy(), ref_master.numpy())
        np.testing.assert_array_equal(m.numpy(), rm.numpy())
        np.testing.assert_array_equal(v.numpy(), rv.numpy())
        if amsgrad:
            np.testing.assert_array_equal(mx.numpy(), rmx.numpy())
        # the parameter in the gradient's dtype: the master rounded (the same rounding as a copy)
        np.testing.assert_array_equal(stage.float().numpy(), ref_master.to(dtype).float().numpy())


def test_versions_move_and_meta_runs_nothing():
    master, grad = _tensors(5, gm.bfloat16)
    m, v = gm.zeros(5), gm.zeros(5)
    before = [t._version for t in (grad, master, m, v)]
    _C.adam_step_mixed_(grad, master, m, v, None, 1, 1e-3, 0.9, 0.999)
    assert all(t._version > b for t, b in zip((grad, master, m, v), before))
    mt = [gm.empty(1 << 20, device="meta") for _ in range(3)]
    g = gm.empty(1 << 20, dtype=gm.bfloat16, device="meta")
    a0 = gm.memory.memory_allocated("meta")
    _C.adam_step_mixed_(g, mt[0], mt[1], mt[2], None, 1, 1e-3, 0.9, 0.999)
    assert gm.memory.memory_allocated("meta") == a0  # it allocates nothing


def test_arguments_are_checked():
    master, grad = _tensors(6, gm.bfloat16)
    m, v = gm.zeros(6), gm.zeros(6)
    call = _C.adam_step_mixed_
    with pytest.raises(TypeError, match="adam_step_mixed_: master has dtype bfloat16; expected float32"):
        call(grad, master.to(gm.bfloat16), m, v, None, 1, 1e-3, 0.9, 0.999)
    with pytest.raises(ValueError, match=r"exp_avg has shape \(5,\) on cpu but grad_param has shape \(6,\)"):
        call(grad, master, gm.zeros(5), v, None, 1, 1e-3, 0.9, 0.999)
    with pytest.raises(ValueError, match="exp_avg_sq is not contiguous"):
        call(grad, master, m, gm.zeros(12)[::2], None, 1, 1e-3, 0.9, 0.999)
    with pytest.raises(ValueError, match="exp_avg and exp_avg_sq share memory"):
        call(grad, master, m, m, None, 1, 1e-3, 0.9, 0.999)
    with pytest.raises(ValueError, match="step must be >= 1"):
        call(grad, master, m, v, None, 0, 1e-3, 0.9, 0.999)
    with pytest.raises(ValueError, match="amsgrad needs max_exp_avg_sq"):
        call(grad, master, m, v, None, 1, 1e-3, 0.9, 0.999, 0.0, 0.0, False, True)
    with pytest.raises(TypeError, match="grad_param has dtype float64; expected float16, bfloat16 or float32"):
        call(grad.double(), master, m, v, None, 1, 1e-3, 0.9, 0.999)
    with pytest.raises(TypeError, match="grad_param must be a Tensor"):
        call(None, master, m, v, None, 1, 1e-3, 0.9, 0.999)
    with pytest.raises(ValueError, match="beta1"):
        call(grad, master, m, v, None, 1, 1e-3, 1.0, 0.999)
    with pytest.raises(ValueError, match="on meta but grad_param"):
        call(grad, master, gm.empty(6, device="meta"), v, None, 1, 1e-3, 0.9, 0.999)


def test_against_pytorch_adam_on_a_widened_bf16_gradient():
    torch = pytest.importorskip("torch")
    n = 1000
    master, _ = _tensors(n, gm.bfloat16)
    tp = torch.nn.Parameter(torch.from_numpy(master.numpy().copy()))
    opt = torch.optim.AdamW([tp], lr=1e-2, weight_decay=0.1)
    m, v = gm.zeros(n), gm.zeros(n)
    for step in range(1, 4):
        _, g = _tensors(n, gm.bfloat16, seed=step)
        tp.grad = torch.from_numpy(g.float().numpy().copy())
        opt.step()
        stage = g.clone()
        _C.adam_step_mixed_(stage, master, m, v, None, step, 1e-2, 0.9, 0.999, 1e-8, 0.1, True)
        np.testing.assert_allclose(master.numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-7)
