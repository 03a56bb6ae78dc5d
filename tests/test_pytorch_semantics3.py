"""More PyTorch names and semantics that libraries built on PyTorch reach (the hunt through PyTorch Geometric,
torchdiffeq, Captum, Opacus, Pyro and diffusers), each checked against PyTorch itself: the same lambda run under
both libraries and the results compared."""
import collections
import importlib
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _mod(lib, name):
    return importlib.import_module(lib.__name__ + name)


# ---- names that libraries import ----------------------------------------------------------------------------
def test_scatter_gather_of_objects_that_are_not_tensors():
    """Captum imports torch.nn.parallel.scatter_gather; without a GPU only its object paths run in both."""
    P = collections.namedtuple("P", "a b")

    def run(L):
        sg = _mod(L, ".nn.parallel.scatter_gather")
        return [sg.scatter(3, [0, 1]), sg.scatter((1, "a"), [0, 1]), sg.scatter({"k": 1}, [0]), sg.scatter([], [0, 1]),
                sg.scatter(P(1, 2), [0, 1]), sg.scatter_kwargs((1, 2), {"k": 3}, [0, 1]),
                sg.scatter_kwargs((), None, [0, 1]), sg.gather([None, None], 0), sg.gather([{"a": None}] * 2, 0),
                sg.gather([(None,), (None,)], 0), L.nn.parallel.scatter is sg.scatter, sorted(sg.__all__)]
    ref, got = _both(run)
    assert got == ref


def test_scatter_gather_refuse_as_pytorch():
    def run(L):
        sg, out = _mod(L, ".nn.parallel.scatter_gather"), []
        for f in (lambda: sg.scatter(L.arange(4.0), ["cpu"]), lambda: sg.gather([L.ones(2), L.ones(2)], "cpu"),
                  lambda: sg.gather([{"a": None}, {}], 0)):
            with pytest.raises(Exception) as e:
                f()
            out.append((e.type.__name__, str(e.value)))
        return out
    ref, got = _both(run)
    assert got == ref


def test_scatter_chunks_tensors_onto_the_targets():
    """gpumemnet's side alone (PyTorch's needs a GPU): one chunk per target, as Tensor.chunk cuts them."""
    sg = _mod(gm, ".nn.parallel.scatter_gather")
    if gm.cuda.is_available():
        parts = sg.scatter(gm.arange(5.0), [0, 0])
        assert [p.tolist() for p in parts] == [[0.0, 1.0, 2.0], [3.0, 4.0]] and parts[0].device == gm.device(0)
        assert sg.gather(list(parts), 0).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    else:
        with pytest.raises(RuntimeError, match="no CUDA (support|device)"):  # built without CUDA / no GPU here
            sg.scatter(gm.arange(5.0), [0, 0])


def test_collate_module_and_collate_fn_type():
    """Opacus: `from torch.utils.data._utils.collate import default_collate`, `dataloader._collate_fn_t`."""
    def run(L):
        c = _mod(L, ".utils.data._utils.collate")
        batch = [{"x": L.ones(2) * i, "y": (i, 2.5, "a"), "z": np.array([i, 1]), "w": np.float32(i)} for i in range(3)]
        outs = [c.collate(batch, collate_fn_map=c.default_collate_fn_map), c.default_collate(batch)]
        custom = c.collate([[L.ones(1)], [L.zeros(1)]], collate_fn_map={L.Tensor: lambda b, **k: len(b)})
        flat = [{k: (v.tolist() if isinstance(v, L.Tensor) else [x.tolist() if isinstance(x, L.Tensor) else x
                                                                     for x in v])
                 for k, v in o.items()} for o in outs]
        types = [str(o["y"][1].dtype).split(".")[-1] for o in outs]
        dl = _mod(L, ".utils.data.dataloader")
        return (flat, types, custom, c.default_collate is L.utils.data.default_collate,
                c.default_convert is L.utils.data.default_convert, dl._collate_fn_t.__origin__.__name__)
    ref, got = _both(run)
    assert got == ref


def test_collate_of_unequal_sequences_refuses():
    def run(L):
        c = _mod(L, ".utils.data._utils.collate")
        with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
            c.collate([[1, 2], [1]], collate_fn_map=c.default_collate_fn_map)
        with pytest.raises(TypeError, match="default_collate: batch must contain"):
            c.collate([object()], collate_fn_map=c.default_collate_fn_map)
    _both(run)


def test_distributed_tensor_old_name_and_implicit_replication():
    def run(L):
        old, new = _mod(L, ".distributed._tensor"), _mod(L, ".distributed.tensor")
        exp = _mod(L, ".distributed._tensor.experimental")
        with exp.implicit_replication():
            x = L.ones(2) * 2
        return (old.DTensor is new.DTensor, old.Shard is new.Shard, exp.implicit_replication is
                _mod(L, ".distributed.tensor.experimental").implicit_replication, x.tolist(),
                sorted(n for n in ("DTensor", "DeviceMesh", "Shard", "Replicate", "Partial", "distribute_tensor")
                       if hasattr(old, n)))
    ref, got = _both(run)
    assert got == ref


def test_future_serialization_and_distributions_names():
    """Captum's isinstance(x, torch.Future); Pyro's MAP_LOCATION, constraints.__all__, positive_semidefinite."""
    def run(L):
        fut = L.futures.Future()
        fut.set_result(3)
        C, T = L.distributions.constraints, L.distributions.transforms
        m = L.tensor([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.0], [0.0, 0.0]]])
        psd = C.positive_semidefinite
        return (isinstance(fut, L.Future), fut.wait(), L.serialization.MAP_LOCATION is not None,
                "positive_semidefinite" in C.__all__, psd.check(m).tolist(), psd.event_dim, psd.is_discrete,
                psd.check(L.tensor([[1.0, 2.0], [0.0, 1.0]])).tolist(), sorted(T.__all__),
                sorted(set(L.distributions.__all__)), all(hasattr(L.optim, n) for n in L.optim.__all__))
    ref, got = _both(run)
    assert got == ref


def test_compat_names_of_pytorch_geometric():
    """torch._C._disabled_torch_function_impl, torch.ops.aten.clone.default, torch._tensor_str, torch.sparse_csr,
    torch.distributed.rpc (is_available False here), torch.__config__."""
    def run(L):
        c_mod = importlib.import_module("gpumemnet.compat._torch_c") if L is gm else L._C
        ops = importlib.import_module("gpumemnet.compat.ops") if L is gm else L.ops
        ts = _mod(L, "._tensor_str")
        t = L.arange(30.0).reshape(5, 6) / 7
        text = ts._add_suffixes("Index(" + ts._tensor_str(t, 6), ["dim_size=3", "dtype=x"], 6, force_newline=False)
        text2 = ts._add_suffixes("I(" + ts._tensor_str(t[0], 2), ["a=1"], 2, force_newline=True)
        rpc = _mod(L, ".distributed.rpc")
        cfg = _mod(L, ".__config__")
        return (c_mod._disabled_torch_function_impl(L.add, (), (L.ones(1), 2)).tolist(),
                ops.aten.clone.default(L.ones(2)).tolist(), ops.aten.clone.default == ops.aten.clone.default,
                text, text2, ts.get_printoptions(), L.sparse_csr != L.sparse_coo, repr(L.sparse_csr).split(".")[1],
                callable(rpc.init_rpc), isinstance(cfg.show(), str), "at::get_num_threads()" in cfg.parallel_info())
    ref, got = _both(run)
    assert got == ref
    assert not gm.distributed.rpc.is_available() and "USE_MKL" not in gm.__config__.show()


def test_nextafter_as_pytorch():
    """torchdiffeq's _nextafter: torch.nextafter elementwise, broadcast, promoted; integers refused."""
    def run(L):
        a = L.tensor([1.0, 0.0, -1.0, float("inf"), float("nan"), 2.0, -0.0, 1e-45])
        b = L.tensor([2.0, -1.0, -2.0, 0.0, 1.0, 2.0, 1.0, 0.0])
        out = [L.nextafter(a, b), a.nextafter(b), a.clone().nextafter_(b), L.nextafter(a, b.double()),
               L.nextafter(L.ones(2, 1), L.zeros(3)), L.nextafter(a[:2].double(), b[:2].double())]
        for dt in ("float16", "bfloat16"):
            x = L.tensor([1.0, 0.0, -1.0, 3.0, 0.0, -2.0], dtype=getattr(L, dt))
            out.append(L.nextafter(x, L.tensor([2.0, -1.0, -2.0, -5.0, 1.0, 0.0], dtype=getattr(L, dt))).float())
        buf = L.empty(2)
        L.nextafter(L.tensor([1.0, 2.0]), L.tensor([0.0, 3.0]), out=buf)
        out.append(buf)
        return [(str(o.dtype).split(".")[-1], tuple(o.shape), np.asarray(o.tolist(), dtype=np.float64)) for o in out]
    ref, got = _both(run)
    for (dr, sr, vr), (dg, sg, vg) in zip(ref, got):
        assert (dr, sr) == (dg, sg)
        np.testing.assert_array_equal(vg, vr)


def test_nextafter_refuses_as_pytorch():
    def run(L):
        out = []
        for f in (lambda: L.nextafter(L.tensor([1, 2]), L.tensor([3, 4])), lambda: L.nextafter(L.ones(1), 2.0)):
            with pytest.raises(Exception) as e:
                f()
            out.append(e.type.__name__)
        return out
    ref, got = _both(run)
    assert got == ref


def test_pytree_dict_flatten_stream_and_device_module():
    """diffusers: _pytree._dict_flatten / _dict_unflatten, torch.Stream in annotations, get_device_module."""
    def run(L):
        p = _mod(L, ".utils._pytree")
        vals, ctx = p._dict_flatten({"a": 1, "b": 2})
        s = L.Stream("cpu")
        errs = []
        for bad in ("meta", 3):
            with pytest.raises(RuntimeError) as e:
                L.get_device_module(bad)
            errs.append(str(e.value))
        return (vals, ctx, p._dict_unflatten([3, 4], ["x", "y"]), s.query(), s.device_type, str(s.device),
                s == L.Stream("cpu"), s.device_index, s.stream_id,
                [L.get_device_module(d).__name__.split(".")[-1] for d in ("cpu", "cuda:1", L.device("cpu"))], errs,
                str(L.cuda.Stream | L.Stream).count("Stream"))
    ref, got = _both(run)
    assert got == ref


def test_dsmm_and_sparse_tensor_methods():
    """torch.dsmm; sparse_coo_tensor of int32 indices keeps int64 ones; numel, ndimension, type of a sparse tensor."""
    def run(L):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            i32 = L.sparse_coo_tensor(L.tensor([[0, 1], [1, 0]], dtype=L.int32), L.tensor([1.0, 2.0]), (2, 3))
            f64 = L.sparse_coo_tensor([[0, 1], [2, 0]], L.tensor([1.0, 2.0], dtype=L.float64), (2, 3))
        return (str(i32._indices().dtype).split(".")[-1], i32.to_dense().tolist(), i32.numel(), i32.ndimension(),
                i32.type(), f64.type(), i32.type(L.float64).type(), i32.type("torch.sparse.DoubleTensor").type(),
                L.dsmm(i32, L.ones(3, 2)).tolist(), L.dsmm(L.ones(2, 2), L.ones(2, 3)).tolist())
    ref, got = _both(run)
    assert got == ref


def test_broadcast_shapes_returns_size():
    def run(L):
        outs = [L.broadcast_shapes((2, 1), (3,)), L.broadcast_shapes(), L.broadcast_shapes(3), L.broadcast_shapes([4])]
        return [(type(o).__name__, tuple(o)) for o in outs]
    ref, got = _both(run)
    assert got == ref


def test_uninitialized_parameter_materialize():
    """PyG's Linear(-1, out): p.materialize(shape) turns the placeholder into a parameter of that shape."""
    def run(L):
        p = L.nn.parameter.UninitializedParameter()
        before = isinstance(p, L.nn.parameter.UninitializedParameter)
        p.materialize((3, 4))
        b = L.nn.parameter.UninitializedBuffer()
        b.materialize((2,), dtype=L.float64)
        return (before, tuple(p.shape), isinstance(p, L.nn.Parameter),
                isinstance(p, L.nn.parameter.UninitializedParameter), p.requires_grad, tuple(b.shape),
                str(b.dtype).split(".")[-1])
    ref, got = _both(run)
    assert got == ref


# ---- devices --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [("mps",), ("xpu",), ("xpu:1",), ("hpu",), ("mtia",), ("xla",), ("privateuseone",),
                                  ("ipu",), ("mps", 0), ("mps:0",), (0,), (1,), ("cuda", 0), ("cuda:1",), ("meta",)])
def test_device_types_construct_as_pytorch(spec):
    def run(L):
        d = L.device(*spec)
        return (repr(d).replace("gpumemnet", "torch"), str(d), d.type, d.index, d == L.device("cpu"),
                d == L.device("cuda:0") if d.type != "cuda" else None, d == L.device(str(d)),
                hash(d) == hash(L.device(*spec)),
                {d: 1}[L.device(*spec)])
    ref, got = _both(run)
    assert got == ref


def test_bare_cuda_device_and_errors_unchanged():
    assert str(gm.device("cuda")).startswith("cuda:")  # gpumemnet names the current device (other code relies on it)
    for bad in ("tpu", -1):
        with pytest.raises(RuntimeError):
            torch.device(bad)
        with pytest.raises(RuntimeError):
            gm.device(bad)
    with pytest.raises(RuntimeError, match="unknown device 'mps'|mps"):
        gm.zeros(2).to("mps")


# ---- nn.init with generator= ----------------------------------------------------------------------------------
_INITS = [("uniform_", {}), ("normal_", {}), ("kaiming_uniform_", {}), ("kaiming_normal_", {}),
          ("xavier_uniform_", {}), ("xavier_normal_", {}), ("trunc_normal_", {}), ("orthogonal_", {}),
          ("sparse_", {"sparsity": 0.5})]


@pytest.mark.parametrize("name,kw", _INITS)
def test_init_draws_from_the_generator(name, kw):
    """PyTorch 2.x's generator=: the same seed gives the same values, and the global generator does not move
    (except for sparse_, whose zero rows PyTorch draws from the global generator)."""
    def run(L):
        init = L.nn.init
        L.manual_seed(7)
        state = L.get_rng_state()
        outs = []
        for _ in range(2):
            g = L.Generator().manual_seed(123)
            outs.append(getattr(init, name)(L.empty(6, 5), generator=g, **kw))
        third = getattr(init, name)(L.empty(6, 5), generator=L.Generator().manual_seed(124), **kw)
        return (outs[0].tolist() == outs[1].tolist(), outs[0].tolist() != third.tolist(),
                L.equal(L.get_rng_state(), state), tuple(outs[0].shape))
    ref, got = _both(run)
    assert got == ref == ((False, True, False, (6, 5)) if name == "sparse_" else (True, True, True, (6, 5)))


def test_init_with_generator_matches_the_tensor_methods():
    """In gpumemnet the init functions draw as Tensor.uniform_ / normal_(generator=g) do."""
    a = gm.nn.init.uniform_(gm.empty(100), -2, 3, generator=gm.Generator().manual_seed(5))
    b = gm.empty(100).uniform_(-2, 3, generator=gm.Generator().manual_seed(5))
    c = gm.nn.init.normal_(gm.empty(100), 1, 2, generator=gm.Generator().manual_seed(5))
    d = gm.empty(100).normal_(1, 2, generator=gm.Generator().manual_seed(5))
    assert a.tolist() == b.tolist() and c.tolist() == d.tolist()
    with pytest.raises(TypeError, match="generator"):
        gm.nn.init.uniform_(gm.empty(2), generator=3)


# ---- under the alias ------------------------------------------------------------------------------------------
def test_names_resolve_under_the_alias(tmp_path):
    script = tmp_path / "names3.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch.nn.parallel.scatter_gather import scatter
        from torch.utils.data._utils.collate import default_collate
        from torch.utils.data.dataloader import _collate_fn_t
        from torch.distributed._tensor.experimental import implicit_replication
        from torch.serialization import MAP_LOCATION
        from torch.distributed import rpc
        import torch.distributed.fsdp.wrap
        import torch._tensor_str
        assert isinstance(torch.futures.Future(), torch.Future) and not rpc.is_available()
        assert torch.get_device_module("cpu") is torch.cpu
        assert torch.ops.aten.clone.default(torch.ones(1)).tolist() == [1.0]
        assert torch.distributions.constraints.positive_semidefinite.event_dim == 2
        assert torch.utils._pytree._dict_unflatten(*torch.utils._pytree._dict_flatten({"a": 1})) == {"a": 1}
        assert torch.broadcast_shapes((2, 1), (3,)) == torch.Size([2, 3])
        print(torch.device("mps"), torch.sparse_csr, torch.nextafter(torch.ones(1), torch.zeros(1)).item() < 1)
    """))
    out = subprocess.run([sys.executable, "-m", "gpumemnet", "run", "--no-estimate", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "mps torch.sparse_csr True"
