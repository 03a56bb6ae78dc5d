"""More semantics PyTorch code relies on, checked against PyTorch itself (stop 38: the hunt through libraries built
on PyTorch: einops and lucidrains' models, model summaries and metrics, Hugging Face, Lightning and timm)."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _name(dtype):
    return str(dtype).split(".")[-1]


def test_cat_promotes_as_pytorch():
    for a, b in itertools.product(_DTYPES, _DTYPES):
        ref, got = _both(lambda L: _name(L.cat([L.zeros(1, dtype=getattr(L, a)),
                                                L.zeros(2, dtype=getattr(L, b))]).dtype))
        assert got == ref, (a, b)


def test_xlogy_computes_in_the_result_dtype():
    """float64 x with float32 y: the log of y widened (PyTorch), not float32's log widened afterwards."""
    def run(L):
        x = L.tensor([1.1, 0.0, 2.0], dtype=L.float64)
        y = L.tensor([1.3, 0.0, 7.7], dtype=L.float32)
        ints = L.xlogy(L.tensor([1, 0, 2]), L.tensor([2, 0, 3]))
        return _name(L.xlogy(x, y).dtype), L.xlogy(x, y).tolist(), ints.tolist()
    ref, got = _both(run)
    assert got[0] == ref[0] and got[2] == pytest.approx(ref[2], rel=1e-6)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-15)


def test_compiler_switches_and_distributed_names_import():
    """einx sets up its backend with torch.compiler.allow_in_graph; vector-quantize-pytorch imports
    torch.distributed.nn; accelerate imports torch.distributed.algorithms.join."""
    from gpumemnet.distributed.algorithms.join import Join, JoinHook, Joinable  # noqa: F401
    from gpumemnet.distributed import nn as dist_nn
    import gpumemnet.compat.compiler as compiler
    f = lambda x: x  # noqa: E731
    for name in ("allow_in_graph", "assume_constant_result", "nonstrict_trace"):
        assert getattr(compiler, name)(f)(3) == getattr(torch.compiler, name)(f)(3) == 3
    with compiler.set_stance("force_eager"):
        pass
    assert dist_nn.all_reduce is dist_nn.functional.all_reduce
    x = gm.tensor([1.0, 2.0])
    assert gm.logaddexp(x, x).tolist() == pytest.approx(torch.logaddexp(torch.tensor([1.0, 2.0]),
                                                                        torch.tensor([1.0, 2.0])).tolist())


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "uint8", "bool", "int64", "float16"])
def test_scatter_and_index_fill_of_a_number_into_any_dtype(dtype):
    """torchmetrics' top-k one-hot: zeros_like(p, dtype=int32).scatter_(-1, idx, 1); a float number truncates."""
    def run(L):
        dt, idx = getattr(L, dtype), L.tensor([[2], [0]])
        out = [L.zeros(2, 3, dtype=dt).scatter_(1, idx, 1), L.zeros(2, 3, dtype=dt).scatter(1, idx, 2.9),
               L.zeros(3, dtype=dt).index_fill_(0, L.tensor([1]), 5), L.zeros(3, dtype=dt).index_fill(0, L.tensor([2]),
                                                                                                     L.tensor(1))]
        if dtype != "bool":
            out.append(L.zeros(3, dtype=dt).index_put_((L.tensor([0, 0, 2]),), L.tensor([5, 5, 1], dtype=dt),
                                                       accumulate=True))
        return [t.tolist() for t in out]
    ref, got = _both(run)
    assert got == ref


def test_activation_modules_call_nn_functional_by_name():
    """ptflops counts by replacing F.relu, F.silu ...: the modules must call what PyTorch's call."""
    import gpumemnet.nn.functional as F
    calls = []
    saved = {n: getattr(F, n) for n in ("relu", "silu", "hardswish", "hardsigmoid", "mish", "linear", "softmax")}
    try:
        for n, f in saved.items():
            setattr(F, n, (lambda n, f: lambda *a, **k: calls.append(n) or f(*a, **k))(n, f))
        x = gm.randn(2, 4)
        for m in (gm.nn.ReLU(), gm.nn.ReLU(inplace=True), gm.nn.SiLU(), gm.nn.Hardswish(), gm.nn.Hardsigmoid(),
                  gm.nn.Mish(inplace=True)):
            m(x.clone())
        q = x[None]
        gm.nn.MultiheadAttention(4, 2)(q, q, q)  # self-attention: one packed in-projection
    finally:
        for n, f in saved.items():
            setattr(F, n, f)
    assert calls == ["relu", "relu", "silu", "hardswish", "hardsigmoid", "mish", "linear", "softmax", "linear"]


def test_attention_row_with_every_key_masked_gives_zeros():
    """A left-padded batch through Hugging Face's SDPA models: PyTorch (2.5 on) gives such rows zeros, not NaN,
    with bool and with -inf float masks, and finite gradients."""
    def run(L):
        q = L.tensor(np.random.default_rng(0).standard_normal((2, 2, 3, 4)), requires_grad=True)
        keep = L.tensor([[False, False, False], [True, False, False], [True, True, False]])
        add = L.zeros(3, 3, dtype=L.float64).masked_fill(~keep, float("-inf"))
        F = L.nn.functional
        o1 = F.scaled_dot_product_attention(q, q, q, attn_mask=keep)
        o2 = F.scaled_dot_product_attention(q, q * 2, q, attn_mask=add)
        (o1.sum() + (o2 ** 2).sum()).backward()
        return o1.detach().numpy(), o2.detach().numpy(), q.grad.numpy()
    for r, g in zip(*_both(run)):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)


def test_flex_attention_with_score_and_mask_mods():
    def run(L):
        from importlib import import_module
        fa = import_module(L.__name__ + ".nn.attention.flex_attention")
        R = np.random.default_rng(0)
        q, k, v = (L.tensor(R.standard_normal((2, 3, n, 4))) for n in (5, 6, 6))
        bm = fa.create_block_mask(lambda b, h, qi, kv: (qi > 0) & (kv <= qi), 2, None, 5, 6, device="cpu")
        out, aux = fa.flex_attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s + (qi - kv) * 0.1 + h * 0.05,
                                     block_mask=bm, return_aux=fa.AuxRequest(lse=True))
        return out.numpy(), aux.lse.numpy()
    ref, got = _both(run)  # (it turns distributions' validation off: conftest.py restores it after each test)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(np.isneginf(got[1]), np.isneginf(ref[1]))
    np.testing.assert_allclose(got[1][np.isfinite(ref[1])], ref[1][np.isfinite(ref[1])], rtol=1e-12)


def test_tensor_and_module_api_that_libraries_use():
    def run(L):
        x = L.tensor([[1, 2], [39, 4]])
        idx = L.tensor([[0, 1, 1, 0], [1, 1, 0, 0]]).unsqueeze(-1)  # beam search gathers 4 of 2 rows
        gathered = L.take_along_dim(L.arange(20.0).reshape(2, 2, 5), idx, dim=1)
        steps = [L.linspace(-0.5, 0.5, n).tolist() for n in L.tensor([5, 4])]
        mixed = L.einsum("i,j->ij", L.arange(4), L.tensor([1.0, 0.5]))
        buf = bytearray(np.arange(4, dtype=np.float32).tobytes())
        fb = L.frombuffer(buf, dtype=L.float32, offset=4)
        fb[0] = 9.0  # shares the buffer's memory
        old, w = L.zeros(3), L.ones(3, requires_grad=True)
        old.data.lerp_(w * 2, 0.2)  # an EMA through .data: the values land, no graph
        return (39 in x, 5 in x, gathered.tolist(), steps, str(mixed.dtype).split(".")[-1],
                np.frombuffer(buf, np.float32).tolist(), L.from_dlpack(np.arange(3.0)).tolist(),
                old.tolist(), old.requires_grad)
    ref, got = _both(run)
    assert got == ref


def test_nn_buffer_and_module_type():
    def run(L):
        class M(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = L.nn.Linear(2, 2)
                self.position_ids = L.nn.Buffer(L.arange(4), persistent=False)
                self.scale = L.nn.Buffer(L.ones(2))
        m = M()
        m.type(L.float64)
        m.set_submodule("lin", L.nn.Linear(2, 3))
        return (list(m.state_dict()), [n for n, _ in m.named_buffers()], isinstance(m.scale, L.nn.Buffer),
                isinstance(m.lin.weight, L.nn.Buffer), str(m.scale.dtype).split(".")[-1], m.lin.out_features)
    ref, got = _both(run)
    assert got == ref


def test_custom_op_runs_its_registered_backward():
    def run(L):
        @_module(L, ".library").custom_op("gmtest::cube", mutates_args=())
        def cube(x: L.Tensor, k: float = 1.0) -> L.Tensor:
            return x ** 3 * k

        def setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.k = inputs[1]

        def backward(ctx, g):  # 10x the true derivative: the registered formula must be the one used
            x, = ctx.saved_tensors
            return g * 30 * x * x * ctx.k, None
        cube.register_autograd(backward, setup_context=setup)
        x = L.tensor([1.0, 2.0], requires_grad=True)
        y = cube(x, k=2.0)
        y.sum().backward()
        return y.tolist(), x.grad.tolist()
    ref, got = _both(run)
    assert got == ref


def test_names_libraries_import_exist():
    """torchinfo, kornia, fvcore, Hugging Face and accelerate stop at import on any of these."""
    for mod, names in {"": ["backends.mkldnn.is_available", "SymInt", "_assert_async", "float8_e4m3fn",
                            "autograd.forward_ad.unpack_dual", "cuda.CUDAGraph", "frombuffer", "from_dlpack"],
                       ".jit": ["ScriptModule"], ".library": ["custom_op"], ".compiler": ["allow_in_graph"],
                       ".nn.parameter": ["UninitializedParameter", "UninitializedBuffer", "Buffer", "is_lazy"],
                       ".nn.modules.module": ["_EXTRA_STATE_KEY_SUFFIX"],
                       ".utils._pytree": ["_dict_flatten_with_keys"], ".utils.dlpack": ["to_dlpack"],
                       ".distributed.tensor": ["DTensor"],
                       ".distributed.fsdp.fully_sharded_data_parallel": ["FullyShardedDataParallel"],
                       # Lightning's
                       ".distributed.constants": ["default_pg_timeout"], ".multiprocessing": ["spawn"],
                       ".overrides": ["TorchFunctionMode"], ".utils.flop_counter": ["FlopCounterMode"],
                       ".utils.data.dataloader": ["_BaseDataLoaderIter", "_MultiProcessingDataLoaderIter"],
                       ".autograd.profiler": ["emit_nvtx"], ".profiler": ["kineto_available"],
                       ".distributed": ["is_torchelastic_launched", "all_to_all_single"],
                       # transformers' and kornia's
                       ".distributed.tensor.placement_types": ["_StridedShard", "Shard"],
                       ".distributed.tensor._utils": ["compute_local_shape_and_global_offset"],
                       ".distributed._functional_collectives": ["wait_tensor", "all_to_all_single_autograd"],
                       ".distributed._composable.fsdp": ["fully_shard"], ".distributed.device_mesh": ["DeviceMesh"],
                       ".distributed.fsdp": ["MixedPrecisionPolicy", "CPUOffloadPolicy"],
                       "._subclasses.fake_tensor": ["is_fake"], ".fx.experimental.proxy_tensor": ["get_proxy_mode"]
                       }.items():
        for m in (_module(torch, mod), _module(gm, mod)):
            for n in names:
                obj = m
                for part in n.split("."):
                    obj = getattr(obj, part)
    assert gm.finfo(gm.float8_e4m3fn).max == torch.finfo(torch.float8_e4m3fn).max


def _module(lib, mod):
    """lib's module for torch<mod>: gpumemnet keeps torch.jit, torch.library and torch.compiler in its compat
    package (gpumemnet/dropin.py maps them)."""
    from importlib import import_module
    if lib is gm and mod and mod.split(".")[1] in ("jit", "library", "compiler", "fx", "_subclasses"):
        return import_module("gpumemnet.compat" + mod)
    return import_module(lib.__name__ + mod)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_fused_ops_round_once_as_pytorch(dtype):
    """lerp / addcmul / addcdiv / add(alpha=) on bf16 and fp16 (timm's bf16 optimizers, Lightning's bf16-true):
    PyTorch computes them in float32 (with a fused multiply-add) and rounds once; bit for bit here."""
    def run(L):
        rng = np.random.default_rng(0)
        dt = getattr(L, dtype)
        a, b, c = (L.tensor(rng.normal(size=(32, 32))).to(dt) for _ in range(3))
        w = L.tensor(rng.uniform(size=(32, 32))).to(dt)
        outs = [L.lerp(a, b, 0.1), L.lerp(a, b, 0.7), L.lerp(a, b, w), a.clone().lerp_(b, 0.1),
                L.addcmul(a, b, c, value=0.3), a.clone().addcmul_(b, c, value=-0.5),
                L.addcdiv(a, b, c.abs() + 1, value=0.3), a.clone().addcdiv_(b, c.abs() + 1), a.add(b, alpha=0.3),
                a.sub(b, alpha=0.7), a.clone().add_(b, alpha=-0.01), a.clone().sub_(b, alpha=3)]
        return [o.float().numpy() for o in outs]
    for i, (r, g) in enumerate(zip(*_both(run))):
        np.testing.assert_array_equal(g, r, err_msg=f"op {i}")


def test_index_put_of_another_dtype_and_conv_list_arguments():
    def run(L):
        out = []
        x = L.zeros(5)
        for idx, v in ((L.tensor([1, 3]), L.tensor([1.5, 2.5], dtype=L.float64)), (x > -1, L.ones(5, dtype=L.int64)),
                       (x > 0, L.tensor(2.0, dtype=L.float64)), (slice(0, 2), L.ones(2, dtype=L.float64))):
            try:
                x[idx] = v
                out.append(x.tolist())
            except RuntimeError as e:
                out.append(str(e)[:60])
        conv = L.nn.Conv2d(2, 2, 3, stride=[2], padding=[1], dilation=[1])
        g = L.tensor([1.0, -2.0])
        return out, tuple(conv(L.ones(1, 2, 8, 8)).shape), g.conj().tolist(), g.resolve_conj().tolist()
    ref, got = _both(run)
    assert got == ref


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_addmm_rounds_once(dtype):
    """addmm / baddbmm in bf16 / fp16 (GPT-2's Conv1D, nn.Linear under bf16): PyTorch's GEMM scales and adds in
    float32 and rounds once. Rounding the product first differed from it in about a quarter of the elements; a
    float32 sum in another order may still flip the odd tie."""
    def run(L):
        rng = np.random.default_rng(3)
        dt = getattr(L, dtype)
        x, w, b = (L.tensor(rng.standard_normal(s)).to(dt) for s in [(8, 32), (32, 24), (24,)])
        b1, b2, c = (L.tensor(rng.standard_normal(s)).to(dt) for s in [(3, 8, 32), (3, 32, 24), (3, 8, 24)])
        outs = [L.addmm(b, x, w), L.addmm(b, x, w, beta=0.5, alpha=2), L.baddbmm(c, b1, b2, alpha=0.3),
                c.clone().baddbmm_(b1, b2)]
        return [o.float().numpy() for o in outs]
    for i, (r, g) in enumerate(zip(*_both(run))):
        assert (g != r).sum() <= 2, f"op {i}: {(g != r).sum()} of {r.size} elements differ from PyTorch's"


def test_python_bool_indices_act_as_zero_dim_masks():
    """x[True] is x[None]; x[False] an empty selection; both read and written as PyTorch (stop 39)."""
    def run(L):
        x = L.arange(6.).reshape(2, 3)
        shapes = [tuple(x[i].shape) for i in (True, False, (True, 0), (0, True), (Ellipsis, True), (None, True))]
        writes = []
        for i in (True, False, (0, True)):
            y = x.clone()
            y[i] = 7
            writes.append(y.tolist())
        z = L.ones(3, requires_grad=True)
        (z[True] * 2).sum().backward()
        return shapes, writes, z.grad.tolist()
    ref, got = _both(run)
    assert got == ref


def test_views_know_their_base_as_pytorch():
    """Tensor._base / _is_view() (torchviz draws a view's base; serialisers clone views): the root of a chain of
    views, None for detach(), .data, a dtype view and fresh results. Unlike PyTorch, a view does not keep its base
    alive: once the base is gone, _base is None."""
    def run(L):
        x = L.arange(6.).reshape(2, 3).clone()
        views = (x.view(6), x.reshape(6), x[0], x[:, 1], x[None], x.unsqueeze(0), x.permute(1, 0), x.expand(2, 2, 3),
                 x.T, x.mT, x.narrow(0, 0, 1), x.split(1)[0], x.unbind()[1], x.chunk(3, 1)[2], x.flatten(),
                 x.squeeze(), x.diagonal(), x.unfold(1, 2, 1), x.as_strided((2,), (1,)), x.view_as(x), x.t().t())
        others = (x + 1, x.clone(), x.t().contiguous(), x.detach(), x[0].detach(), x.data, x.view(L.int32), x)
        w = L.ones(3, requires_grad=True)
        return ([v._base is x and v._is_view() for v in views], [o._base is None and not o._is_view() for o in others],
                w[:2]._base is w)
    ref, got = _both(run)
    assert got == ref
    x = gm.ones(3)
    v = x[1:]
    del x
    assert v._base is None


def test_graph_walks_find_accumulators_by_their_variable():
    """torchviz's make_dot: hasattr(fn, 'variable') tells a leaf's AccumulateGrad, hasattr(fn, 'saved_tensors') a
    custom Function's node (PyTorch's built-in nodes have neither)."""
    class Double(gm.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2

    w = gm.ones(3, requires_grad=True)
    y = Double.apply((w * 2).relu()).sum()
    seen, stack = [], [y.grad_fn]
    while stack:
        fn = stack.pop()
        seen.append((hasattr(fn, "variable"), hasattr(fn, "saved_tensors")))
        if hasattr(fn, "variable"):
            assert fn.variable is w
        stack += [n for n, _ in fn.next_functions if n is not None]
    assert seen == [(False, False), (False, True), (False, False), (False, False), (True, False)]


def test_writes_through_data_leave_the_version_alone():
    """torchdiffeq's `scratch.data[i] = v` "sneaks past the version checker": PyTorch's .data has a version counter
    of its own, so a tensor saved for backward and written through .data still backpropagates (its new values)."""
    def run(L):
        a = L.ones(3, requires_grad=True)
        k = L.zeros(3)
        y = a * k
        before = k._version
        k.data[0] = 5.0
        k.data.mul_(2.0)
        y.sum().backward()
        return a.grad.tolist(), k._version - before
    assert run(gm) == run(torch)
    k = gm.zeros(3)
    y = gm.ones(3, requires_grad=True) * k
    k[0] = 5.0  # a write through k itself is still refused at backward
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_a_list_holding_sequences_indexes_as_a_tuple():
    """x[[rows, cols]] is x[rows, cols] (PyTorch's reading, with its deprecation warning): pytorch-metric-learning's
    HistogramLoss indexes with t.tolist() of a (2, K) tensor; a list of numbers stays one index tensor."""
    def run(L):
        m = L.arange(16.).reshape(4, 4)
        with pytest.warns(UserWarning, match="non-tuple sequence"):
            picked = m[[[0, 1, 2], [1, 3, 3]]].tolist()
        shapes = [tuple(m[i].shape) for i in ([0, slice(1, 3)], [0, None], [[0, 1]], [0, 1])]
        w = m.clone()
        w[[[0, 1, 2], [1, 3, 3]]] = -1.0
        x = L.ones(4, 4, requires_grad=True)
        x[[[0, 1], [1, 2]]].sum().backward()
        return picked, shapes, w.sum().item(), x.grad.tolist()
    ref, got = _both(run)
    assert got == ref


def test_numpy_integers_and_integer_tensors_stand_for_ints():
    """PyTorch takes a NumPy integer or a one-element integer tensor wherever an int goes (__index__): captum pads by
    np.int64s and draws kthvalue's k as a 0-d tensor; SB3 sizes layers by np.int64 sums of MultiDiscrete spaces."""
    def run(L):
        F = L.nn.functional
        x = L.arange(24.).reshape(2, 3, 4)
        i, t = np.int64(2), L.tensor(2)
        return [tuple(F.pad(x, (i, i)).shape), tuple(F.pad(x, (t, t)).shape), L.kthvalue(x, t).values.sum().item(),
                x.topk(t).values.sum().item(), len(x.chunk(t, 2)), tuple(x.sum(t).shape), x.roll(t, 2)[0, 0, 0].item(),
                tuple(F.interpolate(x, size=t * 3).shape), tuple(F.softmax(x, dim=t).shape),
                tuple(F.softmax(x, dim=i).shape), tuple(L.nn.Linear(i, i).weight.shape),
                tuple(L.nn.Conv2d(i, i, i).weight.shape), tuple(L.nn.Conv1d(i, i, (i,)).weight.shape),
                tuple(L.nn.BatchNorm1d(i).weight.shape), tuple(L.nn.LayerNorm(i).weight.shape),
                tuple(L.nn.MultiheadAttention(np.int64(4), np.int64(2)).in_proj_weight.shape),
                tuple(F.avg_pool1d(x, t).shape), tuple(F.pixel_shuffle(L.ones(1, 4, 2, 2), i).shape)]
    ref, got = _both(run)
    assert got == ref


@pytest.mark.filterwarnings("ignore:dropout2d")
def test_dropout2d_of_3d_and_2d_inputs_drops_as_pytorch():
    """A 3-D input is (N, C, L), each (n, c) row dropped whole (pytorch#77081's legacy reading), a 2-D one is
    dropped elementwise (mnist_rnn's Dropout2d after an LSTM); both warn as PyTorch does."""
    def run(L):
        with pytest.warns(UserWarning, match="dropout2d: Received a 3D input"):
            z = L.nn.Dropout2d(0.5)(L.ones(200, 6, 5)) == 0
        with pytest.warns(UserWarning, match="dropout2d: Received a 2-D input"):
            y = L.nn.Dropout2d(0.5)(L.ones(400, 16))
        return (bool((z == z[:, :, :1]).all()), bool((z == z[:, :1, :1]).all()), 0.4 < z.float().mean().item() < 0.6,
                sorted(set(y.flatten().tolist())), 0.4 < (y == 0).float().mean().item() < 0.6)
    ref, got = _both(run)
    assert got == ref == (True, False, True, [0.0, 2.0], True)


def test_linear_broadcasts_a_bias_of_another_shape():
    """captum's README ToyModel sets nn.Parameter(torch.zeros(1, 3)) as a Linear's bias: PyTorch broadcasts it."""
    def run(L):
        x = L.arange(6.).reshape(2, 3)
        sums = [L.nn.functional.linear(x, L.eye(3), L.ones(s)).sum().item() for s in [(1, 3), (2, 1), (2, 3), (1,)]]
        m = L.nn.Linear(3, 3)
        m.bias = L.nn.Parameter(L.zeros(1, 3))
        m(x).sum().backward()
        return sums, m.bias.grad.tolist()
    ref, got = _both(run)
    assert got == ref


def test_a_graph_value_copied_into_a_view_of_data_lands_in_the_parameter():
    """peft's OFT merge(): weight = conv.weight.data.view(...); weight.copy_(R @ weight) with R requiring grad."""
    def run(L):
        conv = L.nn.Conv2d(2, 4, 3)
        with L.no_grad():
            conv.weight.copy_(L.arange(72.).reshape(4, 2, 3, 3) / 72)
        r = (L.eye(4) * 2).requires_grad_()
        weight = conv.weight.data.view(4, 18)
        result = L.mm(r, weight)
        weight.copy_(result)
        return weight.requires_grad, conv.weight.detach().sum().item()
    ref, got = _both(run)
    assert got == ref


def test_float32_scans_round_each_result_once_as_pytorchs_cpu_scans():
    """PyTorch's CPU cumsum / cumprod accumulate float32 in float64: every entry is the float64 scan rounded once
    (diffusers' alphas_cumprod differed by 3.6e-7 with a float32 tree)."""
    rng = np.random.default_rng(0)
    a = rng.uniform(0.98, 1.0, 1000).astype(np.float32)
    b = rng.standard_normal(10000).astype(np.float32)
    np.testing.assert_array_equal(gm.tensor(a).cumprod(0).numpy(), np.cumprod(a.astype(np.float64)).astype(np.float32))
    np.testing.assert_array_equal(gm.tensor(b).cumsum(0).numpy(), np.cumsum(b.astype(np.float64)).astype(np.float32))
    x = gm.tensor(a.reshape(10, 100), requires_grad=True)
    y = x.cumprod(1)
    y.sum().backward()
    t = torch.tensor(a.reshape(10, 100), requires_grad=True)
    t.cumprod(1).sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), t.detach().cumprod(1).numpy())
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5)


@pytest.mark.filterwarnings("ignore:Sparse invariant")
def test_dense_to_sparse_and_dense_plus_sparse():
    """pytorch/examples' gcn: degree matrices made with diag(v).to_sparse(), adj = torch.eye(n) + adj (dense)."""
    def run(L):
        s = L.diag(L.tensor([1.0, 0.5, 0.25])).to_sparse()
        v = L.ones(2, requires_grad=True)
        adj = L.sparse_coo_tensor(L.tensor([[0, 1], [1, 2]]), v, (3, 3))
        dense = L.eye(3) + adj
        dense.sum().backward()
        return (s.is_sparse, s._nnz(), s.to_dense().tolist(), dense.tolist(), (L.eye(3) - adj).tolist(),
                (adj + adj).to_dense().tolist(), v.grad.tolist(), L.spmm(s, L.ones(3, 2)).tolist())
    ref, got = _both(run)
    assert got == ref


def test_distribution_repr_shows_parameter_sizes_as_pytorch():
    def run(L):
        return repr(L.distributions.Normal(L.zeros(2), L.ones(2))) + repr(L.distributions.Normal(0.0, 1.0))
    ref, got = _both(run)
    assert got.replace("gpumemnet.", "torch.") == ref


def test_to_an_int_is_a_cuda_device():
    """x.to(0) is x.to('cuda:0') (an int is a device index, not a dtype)."""
    if gm.cuda.is_available():
        assert str(gm.ones(2).to(0).device) == "cuda:0"
    else:
        with pytest.raises(RuntimeError, match="(?i)cuda"):
            gm.ones(2).to(0)
    assert gm.ones(2).to("cpu", gm.float16).dtype == gm.float16


@pytest.mark.filterwarnings("ignore:dropout3d")
def test_dropout3d_of_fewer_dims_drops_each_leading_slice():
    """PyTorch's deprecated form: a 3-D or 2-D input to dropout3d is one unbatched sample, each x[i] dropped whole."""
    def run(L):
        with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input"):
            z = L.nn.Dropout3d(0.5)(L.ones(50, 4, 3)) == 0
        w = L.nn.functional.dropout3d(L.ones(60, 5), 0.5) == 0
        return bool((z == z[:, :1, :1]).all()), 0.2 < z.float().mean().item() < 0.8, bool((w == w[:, :1]).all())
    ref, got = _both(run)
    assert got == ref == (True, True, True)
