"""PyTorch names that ultralytics, fastai, open_clip, MONAI, ignite, thop and pytorch-optimizer reach (the hunt through
vision, fastai, scientific and tabular/RL libraries), each checked against PyTorch itself: the same function run
under both libraries and the results compared."""
import enum
import importlib
import itertools
import subprocess
import sys
import textwrap
import typing
import warnings

import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _mod(lib, name):
    return importlib.import_module(lib.__name__ + name)


def _raised(fn):
    """The exception's type name (and message) fn raises, or its result."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the comparison is the test
        return type(e).__name__, str(e)


def _dt(dtype):
    return str(dtype).rsplit(".", 1)[-1]


# ---- 1. torch.utils.deterministic ----------------------------------------------------------------------------
def test_fill_uninitialized_memory_reads_back_what_was_set():
    def run(L):
        det = _mod(L, ".utils.deterministic")
        out = [det.fill_uninitialized_memory]
        try:
            det.fill_uninitialized_memory = False
            out.append(det.fill_uninitialized_memory)
            out.append(_raised(lambda: setattr(det, "fill_uninitialized_memory", 1)))
            out.append(det.fill_uninitialized_memory)
        finally:
            det.fill_uninitialized_memory = True
        return out + [det.fill_uninitialized_memory]
    ref, got = _both(run)
    assert got == ref == [True, False, ("RuntimeError", "expected a bool, but got int"), False, True]


# ---- 2. DataLoader iterators ---------------------------------------------------------------------------------
def _rows(batches):
    return [[t.tolist() for t in b] if isinstance(b, (list, tuple)) else getattr(b, "tolist", lambda: b)()
            for b in batches]


@pytest.mark.parametrize("workers", [0, 1])
def test_get_iterator_gives_the_loader_batches(workers):
    def run(L):
        data = _mod(L, ".utils.data")
        ds = data.TensorDataset(L.arange(10.0), L.arange(10))
        loader = data.DataLoader(ds, batch_size=3, num_workers=workers)
        it = loader._get_iterator()
        batches = _rows(next(it) for _ in range(len(loader)))
        after = _raised(lambda: next(it))
        names = type(it).__name__, isinstance(it, _mod(L, ".utils.data.dataloader")._BaseDataLoaderIter)

        def shuffled(get):  # the two libraries shuffle differently: each against itself
            return _rows(get(data.DataLoader(ds, batch_size=3, shuffle=True, num_workers=workers,
                                             generator=L.Generator().manual_seed(7))))
        same = shuffled(lambda dl: dl._get_iterator()) == shuffled(iter)
        return batches, after[0], names, len(it), same
    ref, got = _both(run)
    assert got == ref
    assert got[1:] == ("StopIteration", ("_SingleProcessDataLoaderIter" if workers == 0 else
                                         "_MultiProcessingDataLoaderIter", True), 4, True)


def test_infinite_loader_pattern_of_ultralytics():
    """ultralytics' InfiniteDataLoader: one iterator over a repeating batch sampler, next() len(self) times a pass."""
    def run(L):
        data = _mod(L, ".utils.data")

        class Repeat:
            def __init__(self, sampler):
                self.sampler = sampler

            def __iter__(self):
                while True:
                    yield from iter(self.sampler)

        class InfiniteDataLoader(data.DataLoader):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                object.__setattr__(self, "batch_sampler", Repeat(self.batch_sampler))
                self.iterator = super().__iter__()

            def __len__(self):
                return len(self.batch_sampler.sampler)

            def __iter__(self):
                for _ in range(len(self)):
                    yield next(self.iterator)

        dl = InfiniteDataLoader(data.TensorDataset(L.arange(5.0)), batch_size=2)
        return [_rows(dl) for _ in range(3)]
    ref, got = _both(run)
    assert got == ref


def test_iterable_dataset_through_the_iterator():
    def run(L):
        data = _mod(L, ".utils.data")

        class Stream(data.IterableDataset):
            def __iter__(self):
                return iter(range(7))

        out = []
        for kw in ({"batch_size": 3}, {"batch_size": 3, "drop_last": True}, {"batch_size": None}):
            out.append(_rows(data.DataLoader(Stream(), **kw)._get_iterator()))
        return out
    ref, got = _both(run)
    assert got == ref


def test_dataset_kind_and_an_iterator_over_a_loader_like_object():
    """fastai builds _SingleProcessDataLoaderIter over its own _FakeLoader (the attributes PyTorch's iterator
    reads); the loader's dataset is itself, declared Iterable, and its sampler is itertools.count()."""
    def run(L):
        mod = _mod(L, ".utils.data.dataloader")

        class FakeLoader:
            _IterableDataset_len_called, _auto_collation, drop_last, in_order = None, False, False, True
            generator, prefetch_factor, pin_memory, pin_memory_device, num_workers, timeout = None, 2, False, "", 0, 0
            worker_init_fn, multiprocessing_context, persistent_workers = None, None, False
            _dataset_kind = mod._DatasetKind.Iterable

            def __init__(self):
                self.dataset = self

            def collate_fn(self, x):
                return x

            @property
            def _index_sampler(self):
                return itertools.count()

            def __iter__(self):
                return iter([L.ones(2), L.zeros(2)])

        fake = FakeLoader()
        batches = _rows(mod._SingleProcessDataLoaderIter(fake))
        fake.num_workers = 1
        refused = _raised(lambda: mod._SingleProcessDataLoaderIter(fake))
        return (mod._DatasetKind.Map, mod._DatasetKind.Iterable), batches, refused
    ref, got = _both(run)
    assert got == ref


# ---- 3. nn's private bases and the fractional max pools ------------------------------------------------------
PADS = {"_ConstantPadNd": ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"],
        "_ReflectionPadNd": ["ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d"],
        "_ReplicationPadNd": ["ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d"],
        "_CircularPadNd": ["CircularPad1d", "CircularPad2d", "CircularPad3d"]}


def test_padding_modules_derive_from_pytorchs_private_bases():
    def run(L):
        padding, out = L.nn.modules.padding, []
        for base, names in PADS.items():
            for base2 in PADS:
                out += [(n, base2, issubclass(getattr(L.nn, n), getattr(padding, base2))) for n in names]
        for d in (1, 2, 3):
            m = getattr(L.nn, f"ZeroPad{d}d")(1)
            out.append((isinstance(m, getattr(L.nn, f"ConstantPad{d}d")), m.value, repr(m)))
        out += [repr(L.nn.ConstantPad2d((1, 0, 2, 0), 2.5)), repr(L.nn.ReflectionPad1d(2))]
        x = L.arange(12.0).reshape(1, 1, 3, 4)
        out += [L.nn.ZeroPad2d((1, 0, 0, 1))(x).tolist(), L.nn.ConstantPad2d(1, -1.0)(x).tolist()]
        return out
    ref, got = _both(run)
    assert got == ref


def test_max_unpool_base_and_fractional_max_pool_names():
    def run(L):
        base = L.nn.modules.pooling._MaxUnpoolNd
        return ([issubclass(L.nn.MaxUnpool1d, base), issubclass(L.nn.MaxUnpool2d, base),
                 issubclass(L.nn.MaxUnpool2d, L.nn.MaxUnpool1d), repr(L.nn.MaxUnpool2d(2, 1))],
                [isinstance(getattr(L.nn, n), type) and issubclass(getattr(L.nn, n), L.nn.Module)
                 for n in ("FractionalMaxPool2d", "FractionalMaxPool3d")])
    ref, got = _both(run)
    assert got == ref


def test_fractional_max_pool_refuses_to_be_built():
    """gpumemnet has no fractional max pooling: the names exist for imports, building one says so."""
    for name in ("FractionalMaxPool2d", "FractionalMaxPool3d"):
        with pytest.raises(NotImplementedError, match=f"torch.nn.{name} is a PyTorch name gpumemnet does not have"):
            getattr(gm.nn, name)(2, output_size=3)


# ---- 4-8. names read at import ---------------------------------------------------------------------------------
def test_tensor_type_exists_and_has_no_constructor():
    def run(L):
        return isinstance(L.TensorType, type), _raised(L.TensorType)
    ref, got = _both(run)
    assert got == ref


def test_reduce_op_members():
    def run(L):
        op = _mod(L, ".distributed").ReduceOp
        names = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]
        return [(n, int(m), str(m), repr(m), m == int(m)) for n, m in ((n, getattr(op, n)) for n in names)]
    ref, got = _both(run)
    assert got == ref


def test_opt_state_enum():
    def run(L):
        opt_state = _mod(L, ".amp.grad_scaler").OptState
        return issubclass(opt_state, enum.Enum), [(m.name, m.value) for m in opt_state], opt_state(1).name
    ref, got = _both(run)
    assert got == ref


def test_flatten_and_unflatten_dense_tensors():
    def run(L):
        u = _mod(L, "._utils")
        a, b, c = L.arange(6.0).view(2, 3), L.tensor(7.0), L.tensor([8, 9])
        flat = u._flatten_dense_tensors([a, b, c])
        parts = u._unflatten_dense_tensors(flat, [a, b, c])
        shapes = [tuple(p.shape) for p in parts]
        parts[0][1, 1] = 40.0  # views of flat
        single = u._flatten_dense_tensors([a.t()])
        x = L.ones(2, requires_grad=True)
        u._flatten_dense_tensors([x * 2, x]).sum().backward()
        return (flat.tolist(), _dt(flat.dtype), type(parts).__name__, shapes, [p.tolist() for p in parts],
                single.tolist(), x.grad.tolist(), u._unflatten_dense_tensors(flat, []),
                _raised(lambda: u._flatten_dense_tensors([1, 2])),
                _raised(lambda: u._unflatten_dense_tensors(L.ones(3), [L.ones(5)]))[0])
    ref, got = _both(run)
    assert got == ref


def test_default_protocol():
    ref, got = _both(lambda L: _mod(L, ".serialization").DEFAULT_PROTOCOL)
    assert got == ref == 2


# ---- 9. torch.jit.isinstance -----------------------------------------------------------------------------------
def test_jit_isinstance_refines_typing_generics():
    def run(L):
        jit = L.jit if L is torch else _mod(gm, ".compat.jit")  # torch.jit is gpumemnet.compat.jit under the alias
        T = L.Tensor
        x = L.zeros(2)
        cases = [(x, T), (None, T), ([x], typing.List[T]), ([x, 1], typing.List[T]), ((x,), typing.List[T]),
                 ({"a": x}, typing.Dict[str, T]), ({1: x}, typing.Dict[str, T]),
                 ({"a": [x]}, typing.Dict[str, typing.List[T]]),
                 (None, typing.Optional[T]), (x, typing.Optional[T]), (1, typing.Optional[T]),
                 ((x, 1), typing.Tuple[T, int]), ((x,), typing.Tuple[T, int]),
                 ([[1, 2]], typing.List[typing.List[int]]),
                 ("s", typing.Union[int, str]), ([x], typing.Optional[typing.List[T]]), (x, (int, T)), (1, (str,)),
                 ([1], list), ({}, typing.Dict), (x, typing.List), (x, [T]), (1, int | None), (None, int | None)]
        out = []
        for obj, tp in cases:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = _raised(lambda: jit.isinstance(obj, tp))
            out.append((r, len(w)))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out.append((jit.isinstance([], typing.List[int]), [str(i.message)[:40] for i in w]))
        return out
    ref, got = _both(run)
    assert got == ref


# ---- 10. torch.backends.__allow_nonbracketed_mutation -----------------------------------------------------------
def test_allow_nonbracketed_mutation_lets_flags_be_set():
    def run(L):
        cudnn = L.backends.cudnn
        before = cudnn.deterministic, cudnn.benchmark
        try:
            with getattr(L.backends, "__allow_nonbracketed_mutation")():
                cudnn.deterministic, cudnn.benchmark = True, False
            return cudnn.deterministic, cudnn.benchmark
        finally:
            cudnn.deterministic, cudnn.benchmark = before
    ref, got = _both(run)
    assert got == ref == (True, False)


# ---- 11. torch.utils._foreach_utils ----------------------------------------------------------------------------
def _groups(g):
    return sorted((str(k[0]), _dt(k[1]), [[None if t is None else t.tolist() for t in tl] for tl in v[0]], v[1])
                  for k, v in g.items())


def test_group_tensors_by_device_and_dtype():
    def run(L):
        fu = _mod(L, ".utils._foreach_utils")
        g = fu._group_tensors_by_device_and_dtype
        a, b, c = L.ones(2), L.ones(3, dtype=L.float64), L.zeros(1)
        grouped = g([[a, b, c], [a * 2, None, c + 3]], with_indices=True)
        key = next(k for k in grouped if _dt(k[1]) == "float32")
        value = grouped[key]
        value[0][0][0].add_(1)  # the input tensors themselves (or views of them), not copies
        errors = [_raised(lambda v=v: g(v))[0] for v in ([], [[]], [[a, None]], [[a], [b, c]])]
        return (_groups(grouped), _groups(g([[a, b, c]])), _groups(g([[a, b], [c, c]], True)), type(value).__name__,
                type(key).__name__, a.tolist(), errors, fu._get_foreach_kernels_supported_devices(),
                fu._get_fused_kernels_supported_devices(), fu._device_has_foreach_support(L.device("cpu")),
                fu._has_foreach_support([a, None], L.device("cpu")),
                fu._has_foreach_support([L.nn.Parameter(a)], L.device("cpu")))
    ref, got = _both(run)
    assert got == ref


# ---- 12. Tensor.new_* with layout= and pin_memory= -------------------------------------------------------------
def test_new_factories_take_layout_and_pin_memory():
    def run(L):
        x = L.zeros(2, 3, dtype=L.float64)
        out = []
        for name in ("new_empty", "new_zeros", "new_ones"):
            r = getattr(x, name)((4,), dtype=None, layout=L.strided, device=None, pin_memory=False, requires_grad=False)
            out.append((tuple(r.shape), _dt(r.dtype), r.tolist() if name != "new_empty" else None))
            out.append(_raised(lambda: getattr(x, name)(2, layout="strided")))
            r = getattr(x, name)(size=(1, 2), layout=None, pin_memory=None)
            out.append((tuple(r.shape), r.is_pinned()))
        r = x.new_full((2,), 3.0, layout=L.strided, pin_memory=False, requires_grad=True)
        out += [(r.tolist(), r.requires_grad, _dt(r.dtype)), _raised(lambda: x.new_full((2,), 1.0, layout=3))]
        return out
    ref, got = _both(run)
    assert got == ref


def test_new_factories_refuse_other_layouts():
    """PyTorch makes a sparse tensor there; gpumemnet has dense tensors only and says so."""
    x = gm.zeros(2)
    for name in ("new_empty", "new_zeros", "new_ones"):
        with pytest.raises(NotImplementedError, match=f"{name}\\(\\): layout=.*sparse_coo is not supported"):
            getattr(x, name)(2, layout=gm.sparse_coo)
    with pytest.raises(NotImplementedError, match="new_full"):
        x.new_full((2,), 1.0, layout=gm.sparse_coo)


# ---- under the alias ------------------------------------------------------------------------------------------
def test_names_resolve_under_the_alias(tmp_path):
    script = tmp_path / "names5.py"
    script.write_text(textwrap.dedent("""
        from typing import Dict, List
        import torch
        import torch.nn as nn
        from torch import TensorType
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
        from torch.amp.grad_scaler import OptState
        from torch.serialization import DEFAULT_PROTOCOL
        from torch.utils._foreach_utils import _group_tensors_by_device_and_dtype
        from torch.utils.data.dataloader import _DatasetKind, _SingleProcessDataLoaderIter
        import torch.distributed as dist
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = False
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        torch.utils.deterministic.fill_uninitialized_memory = True
        torch.use_deterministic_algorithms(False)
        with torch.backends.__allow_nonbracketed_mutation():
            torch.backends.cudnn.benchmark = False
        x = torch.zeros(2)
        assert torch.jit.isinstance([x], List[torch.Tensor])
        assert not torch.jit.isinstance({1: x}, Dict[str, torch.Tensor])
        assert isinstance(nn.ZeroPad2d(1), nn.modules.padding._ConstantPadNd)
        assert issubclass(nn.MaxUnpool2d, nn.modules.pooling._MaxUnpoolNd) and nn.FractionalMaxPool3d
        assert x.new_empty((3,), layout=torch.strided, pin_memory=False).shape == (3,)
        dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(4.)), batch_size=2)
        it = dl._get_iterator()
        print(DEFAULT_PROTOCOL, int(dist.ReduceOp.BXOR), OptState.STEPPED.value, _DatasetKind.Iterable,
              [next(it)[0].tolist() for _ in range(2)], TensorType.__name__)
    """))
    out = subprocess.run([sys.executable, "-m", "gpumemnet", "run", "--no-estimate", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "2 7 2 1 [[0.0, 1.0], [2.0, 3.0]] TensorType"
