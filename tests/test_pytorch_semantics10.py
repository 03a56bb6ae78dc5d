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


def _overlapping_params(L):
    """Two parameters over one tensor's memory, a column and a row sharing Z[0, 0] (what parametrize's unsafe
    right_inverse returning views installs), one of them not contiguous; gradients 1 and 10."""
    z = L.arange(9.0, dtype=L.float64).reshape(3, 3)
    p0, p1 = L.nn.Parameter(z[:, 0]), L.nn.Parameter(z[0, :])
    p0.grad, p1.grad = L.ones(3, dtype=L.float64), L.ones(3, dtype=L.float64) * 10
    return z, p0, p1


@pytest.mark.parametrize("make", [lambda L, ps: L.optim.SGD(ps, lr=1.0),
                                  lambda L, ps: L.optim.SGD(ps, lr=1.0, momentum=0.9),
                                  lambda L, ps: L.optim.Adam(ps, lr=1.0)], ids=["SGD", "momentum", "Adam"])
def test_a_step_over_parameters_sharing_memory_updates_each_in_turn(make):
    """The fused step updated the non-contiguous parameter in a copy written back at the end, undoing the other's
    update of the shared element (SGD: Z[0, 0] = -1 where PyTorch gives -11)."""
    def run(L):
        z, p0, p1 = _overlapping_params(L)
        make(L, [p0, p1]).step()
        return z.tolist()
    ref, got = _both(run)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_relu_relu6_hardtanh_of_integer_tensors():
    """PyTorch clamps integer tensors (bounds cast to the type: -0.5 -> 0); gpumemnet refused them."""
    def run(L):
        F, out = L.nn.functional, []
        for dt in (L.int8, L.uint8, L.int32, L.int64):
            x = L.tensor([0, 2, 9] if dt is L.uint8 else [-3, 2, 9], dtype=dt)
            y = x.clone()
            L.nn.ReLU(inplace=True)(y)
            for f in (L.relu, F.relu6, lambda t: F.hardtanh(t, -0.5, 2.5)):
                r = f(x)
                out.append((r.tolist(), str(r.dtype).split(".")[-1]))
            out.append(y.tolist())
        return out
    ref, got = _both(run)
    assert got == ref


def test_a_legacy_dlpack_capsule_round_trip_shares_memory():
    """torch.utils.dlpack.to_dlpack / from_dlpack (CuPy / JAX-era interop): the capsule's tensor shares the
    original's memory, for writing too (NumPy marks a legacy import read-only; from_dlpack raised on a capsule)."""
    def run(L):
        from importlib import import_module
        dl = import_module(L.__name__ + ".utils.dlpack")
        t = L.arange(6.0).reshape(2, 3)[:, 1:]
        u = dl.from_dlpack(dl.to_dlpack(t))
        u[0, 0] = 9.0
        return type(dl.to_dlpack(t)).__name__, u.tolist(), t.tolist()
    ref, got = _both(run)
    assert got == ref


def test_torch_cuda_random_names_the_generators_functions():
    names = ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
             "get_rng_state_all", "set_rng_state", "set_rng_state_all")
    assert all(callable(getattr(gm.cuda.random, n)) for n in names)
    assert all(hasattr(torch.cuda.random, n) for n in names)
    gm.cuda.random.manual_seed(0)  # a no-op without CUDA, as PyTorch's
    assert gm.cuda.random.get_rng_state_all() == [] or gm.cuda.device_count() > 0


def test_kldivloss_warns_of_its_deprecated_arguments():
    import warnings

    def run(L):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loss = L.nn.KLDivLoss(size_average=False)
        return loss.reduction, [str(x.message) for x in w]
    ref, got = _both(run)
    assert got == ref == ("sum", ["size_average and reduce args will be deprecated, please use reduction='sum' "
                                  "instead."])


def test_copy_of_a_value_requiring_grad_into_a_tensor_saved_for_backward():
    """torch_optimizer's Apollo(weight_decay > 0): a tensor an earlier product saved takes copy_ of a value that
    requires grad. PyTorch allows it (the tensor joins the graph); the saved alias is not a view a user holds,
    and the backward through the earlier product is then refused, as PyTorch refuses it."""
    def run(L):
        p = L.ones(3, requires_grad=True)
        d = L.zeros(3)
        g = L.ones(3) * p
        g.mul_(d)  # saves d
        d.copy_(p * 2)
        out = [d.requires_grad, d.tolist()]
        try:
            g.sum().backward()
            out.append("ran")
        except RuntimeError:
            out.append("RuntimeError")
        d.sum().backward()
        return out + [p.grad.tolist()]
    ref, got = _both(run)
    assert got == ref == [True, [2.0, 2.0, 2.0], "RuntimeError", [2.0, 2.0, 2.0]]


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_addmm_family_under_autocast_rounds_once(dt):
    """Under autocast addmm / baddbmm / addbmm lower their operands and compute in float32, rounding once as
    PyTorch's GEMM does; the product was lowered again and rounded first (30 % of elements 1 ulp off)."""
    r = np.random.RandomState(11)
    c, a, b = (r.standard_normal(s).astype(np.float32) for s in ((64, 64), (64, 32), (32, 64)))

    def run(L):
        d = getattr(L, dt)
        C, A, B = L.tensor(c), L.tensor(a), L.tensor(b)
        with L.autocast("cpu", dtype=d):
            outs = [L.addmm(C, A, B), L.baddbmm(C[None], A[None], B[None])[0],
                    L.addbmm(C, A[None], B[None]), L.addmm(C, A, B, beta=0.5, alpha=2.0)]
        return [(str(o.dtype).split(".")[-1], o.float().numpy()) for o in outs]
    ref, got = _both(run)
    for (dg, g), (dr, w) in zip(got, ref):
        assert dg == dr
        np.testing.assert_array_equal(g, w)


def test_custom_bwd_runs_under_forwards_autocast_state():
    """custom_fwd(cast_inputs=float32) runs forward with autocast off, and backward off too; without cast_inputs
    backward runs under forward's autocast with its dtype (float16 here, not the CPU default bfloat16)."""
    def run(L):
        seen = []

        def fn(cast):
            class Mm(L.autograd.Function):
                @staticmethod
                @L.amp.custom_fwd(device_type="cpu", cast_inputs=L.float32 if cast else None)
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a.mm(b)

                @staticmethod
                @L.amp.custom_bwd(device_type="cpu")
                def backward(ctx, g):
                    a, b = ctx.saved_tensors
                    ga = g.mm(b.t())
                    seen.append((L.is_autocast_enabled("cpu"), str(L.get_autocast_dtype("cpu")).split(".")[-1],
                                 str(ga.dtype).split(".")[-1]))
                    return ga, a.t().mm(g)
            return Mm
        a = L.linspace(-1, 1, 12).reshape(3, 4).requires_grad_()
        b = L.linspace(-2, 1, 20).reshape(4, 5).requires_grad_()
        with L.autocast("cpu", dtype=L.bfloat16):
            fn(True).apply(a, b).sum().backward()
        with L.autocast("cpu", dtype=L.float16):
            out = fn(False).apply(a, b)
        out.float().sum().backward()
        return seen
    ref, got = _both(run)
    assert got == ref == [(False, "bfloat16", "float32"), (True, "float16", "float16")]


def test_grad_scaler_scales_by_a_0d_float32_tensor():
    """A float16 0-d loss times the default scale 65536 is float32 in PyTorch (its scale is a 0-d float32
    tensor); it stayed float16 and overflowed to inf. A batch of bfloat16 outputs keeps its dtype."""
    def run(L):
        s = L.amp.GradScaler("cpu")
        a = s.scale(L.tensor(3.0, dtype=L.float16))
        b = s.scale(L.tensor([0.5, 2.0], dtype=L.bfloat16))
        return str(a.dtype).split(".")[-1], a.item(), str(b.dtype).split(".")[-1], b.tolist()
    ref, got = _both(run)
    assert got == ref == ("float32", 196608.0, "bfloat16", [32768.0, 131072.0])


def test_finfo_of_complex_dtypes_is_that_of_their_parts():
    """pykeen's ComplEx / RotatE ask torch.finfo(complex64): PyTorch answers for float32."""
    def run(L):
        return [(L.finfo(d).dtype, L.finfo(d).eps, L.finfo(d).bits, L.finfo(d).max)
                for d in (L.complex64, L.complex128)]
    ref, got = _both(run)
    assert got == ref


def test_make_subclass_makes_tensor_and_parameter_subclasses():
    """Tensor._make_subclass(cls, data, require_grad) (geoopt's ManifoldTensor / ManifoldParameter)."""
    def run(L):
        class Tagged(L.Tensor):
            def __new__(cls, data, tag=None, requires_grad=False):
                inst = L.Tensor._make_subclass(cls, data, requires_grad)
                inst.tag = tag
                return inst

        class MyParam(L.nn.Parameter):
            def __new__(cls, data, flag=1):
                p = L.Tensor._make_subclass(cls, data, True)
                p.flag = flag
                return p
        data = L.arange(3.0)
        x = Tagged(data, tag="hello", requires_grad=True)
        (x * 2).sum().backward()
        m = L.nn.Linear(2, 2)
        m.w2 = MyParam(L.ones(2))
        x.detach()[0] = 7.0  # an alias of data, as PyTorch's
        return (type(x).__name__, x.tag, x.requires_grad, isinstance(x, L.Tensor), x.grad.tolist(), data.tolist(),
                [n for n, _ in m.named_parameters()], m.w2.flag, isinstance(m.w2, L.nn.Parameter))
    ref, got = _both(run)
    assert got == ref


def test_private_init_helpers_and_concat_dataset_cumsum():
    """mup imports nn.init._no_grad_fill_ and friends; avalanche calls ConcatDataset.cumsum (and older code reads
    cummulative_sizes, with PyTorch's FutureWarning)."""
    import warnings

    def run(L):
        I, data = L.nn.init, L.utils.data
        w = L.empty(2, 3, requires_grad=True)
        I._no_grad_fill_(w, 0.5)
        z = L.ones(2)
        I._no_grad_zero_(z)
        a, b = data.TensorDataset(L.arange(3)), data.TensorDataset(L.arange(5))
        c = data.ConcatDataset([a, b])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sizes = c.cummulative_sizes
        return (w.tolist(), w.requires_grad, z.tolist(), data.ConcatDataset.cumsum([a, b]), sizes,
                [type(x.message).__name__ for x in caught], c[4][0].item())
    ref, got = _both(run)
    assert got == ref


def test_pytorch_module_paths_of_classes_kept_elsewhere(tmp_path):
    """`from torch.optim.adamax import Adamax` (pykeen), `from torch.nn.modules.flatten import Flatten`
    (avalanche), torch.distributed.distributed_c10d: the modules PyTorch has, run under the alias."""
    import os
    import subprocess
    import sys
    script = tmp_path / "paths.py"
    script.write_text("""import importlib, torch
pairs = [("optim.adamw", "AdamW"), ("optim.adamax", "Adamax"), ("optim.asgd", "ASGD"), ("optim.nadam", "NAdam"),
         ("optim.radam", "RAdam"), ("nn.modules.flatten", "Unflatten"), ("nn.modules.upsampling", "Upsample"),
         ("nn.modules.fold", "Fold"), ("nn.modules.distance", "PairwiseDistance"),
         ("nn.modules.channelshuffle", "ChannelShuffle")]
for mod, cls in pairs:
    top = torch
    for part in mod.split(".")[:-1]:
        top = getattr(top, part)
    print(mod, getattr(importlib.import_module("torch." + mod), cls) is getattr(top, cls))
print(importlib.import_module("torch.distributed.distributed_c10d").is_initialized())
""")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gm.__file__)))
    outs = [subprocess.run([sys.executable, *pre, str(script)], capture_output=True, text=True, env=env,
                           timeout=300) for pre in ([], ["-m", "gpumemnet", "run", "--no-estimate"])]
    assert all(o.returncode == 0 for o in outs), outs[1].stderr
    assert outs[1].stdout == outs[0].stdout and outs[0].stdout.count(" True") == 10


def test_grad_scaler_accessors_growth_limit_and_refusals():
    """PyTorch's get/set_growth_factor, backoff, interval; the scale grows only while it stays finite in float32;
    float16 gradients and a step with no gradient checked are refused as PyTorch refuses them."""
    def run(L):
        nn, out = L.nn, []
        s = L.amp.GradScaler("cpu", growth_interval=7)
        s.set_growth_factor(3.0), s.set_backoff_factor(0.25), s.set_growth_interval(5)
        out.append((s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval(), s._get_growth_tracker()))
        s = L.amp.GradScaler("cpu", init_scale=2.0 ** 127, growth_interval=1)
        m = nn.Linear(2, 2)
        o = L.optim.SGD(m.parameters(), lr=0.0)
        for _ in range(2):
            o.zero_grad()
            s.scale(m(L.ones(1, 2)).sum() * 0).backward()
            s.step(o)
            s.update()
            out.append(s.get_scale())
        m = nn.Linear(3, 2).half()
        o = L.optim.SGD(m.parameters(), lr=0.1)
        s = L.amp.GradScaler("cpu")
        s.scale(m(L.ones(4, 3).half()).float().sum()).backward()
        try:
            s.unscale_(o)
        except ValueError as e:
            out.append(str(e))
        s = L.amp.GradScaler("cpu")
        o = L.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
        s.scale(L.ones(1, requires_grad=True).sum())
        try:
            s.step(o)
        except AssertionError as e:
            out.append(str(e))
        return out
    ref, got = _both(run)
    assert got == ref
