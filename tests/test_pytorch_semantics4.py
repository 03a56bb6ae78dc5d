"""PyTorch names and semantics that libraries built on PyTorch reach (the fifth hunt: fastai, ignite, ultralytics,
open_clip, whisper, MONAI, normalizing flows, botorch, tianshou, pytorch-tabnet, optimizer collections, e3nn), each
checked against PyTorch itself: the same function run under both libraries and the results compared."""
import collections
import importlib

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _mod(lib, name):
    return importlib.import_module(lib.__name__ + name)


def _torch_c(L):
    """torch._C's Python-level names: PyTorch's extension, or what `torch._C` is under the alias."""
    return L._C if L is torch else importlib.import_module("gpumemnet.compat._torch_c")


def _plain(x, lib):
    """x with tensors as (dtype name, values) and containers as (type name, items): comparable across libraries."""
    if isinstance(x, lib.Tensor):
        return ("tensor", str(x.dtype).split(".")[-1], x.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, [(k, _plain(v, lib)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v, lib) for v in x])
    return x


# ---- data loading -------------------------------------------------------------------------------------------
class _Box:
    def __init__(self, v):
        self.v = v


class _Attrs(dict):
    """A dict subclass that a collate keeps (transformers' BatchEncoding-like samples)."""


def test_default_collate_reads_the_registered_type_map_and_keeps_container_types():
    """default_collate is collate(batch, collate_fn_map=default_collate_fn_map) in PyTorch: a type a library
    registers there is batched by its function, also by the DataLoader; mappings keep their type, lists theirs."""
    def run(L):
        c = _mod(L, ".utils.data._utils.collate")
        c.default_collate_fn_map[_Box] = lambda batch, **kw: sum(b.v for b in batch)
        try:
            samples = [collections.OrderedDict(b=_Box(i), a=L.ones(2) * i, s=[i, 2.5, True], t=(np.int32(i), "x"))
                       for i in range(3)]
            out = [L.utils.data.default_collate(samples),
                   L.utils.data.default_collate([_Attrs(x=i, y=[i, i]) for i in range(2)]),
                   list(L.utils.data.DataLoader([_Box(i) for i in range(4)], batch_size=2)),
                   L.utils.data.default_collate([[True, False], [False, False]])]
        finally:
            del c.default_collate_fn_map[_Box]
        return _plain(out, L), type(out[0]).__name__, type(out[1]).__name__, \
            sorted(k.__name__ if isinstance(k, type) else "tuple" for k in c.default_collate_fn_map
                   if k is not L.Tensor)
    ref, got = _both(run)
    assert got == ref


def test_default_collate_refusals_as_pytorch():
    def run(L):
        errors = []
        for batch in ([[1, 2], [1]], [L.zeros(2), L.zeros(3)], [object()], [np.array(["a"])]):
            with pytest.raises(Exception) as e:
                L.utils.data.default_collate(batch)
            errors.append(isinstance(e.value, RuntimeError) or type(e.value).__name__)
        return errors
    ref, got = _both(run)
    assert got == ref


# ---- tensors ------------------------------------------------------------------------------------------------
def test_ellipsis_and_empty_index_give_a_new_view():
    """x[...] / x[()] is a new view of x (PyTorch's alias), not x: setting its attributes leaves x alone."""
    def run(L):
        x = L.arange(6.0).reshape(2, 3)
        out = []
        for idx in (..., (...,), ()):
            y = x[idx]
            y.requires_grad_()
            out.append((y is x, x.requires_grad, y._base is x._base if x._base is not None else y._base is x,
                        y.data_ptr() == x.data_ptr(), tuple(y.shape)))
        y = x[...]
        y.add_(1)  # writes through to x
        out.append(x.tolist())
        return out
    ref, got = _both(run)
    assert got == ref


# ---- Tensor subclasses and __torch_function__ (fastai's TensorBase, MONAI's MetaTensor) ------------------------
def _subclasses(L):
    class Plain(L.Tensor):
        pass

    class Logged(L.Tensor):
        calls = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.calls.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    class WithMeta(L.Tensor):
        """fastai's TensorBase: metadata copied from the first argument that has it."""
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            res = super().__torch_function__(func, types, args, kwargs or {})
            src = next((a for a in args if hasattr(a, "meta")), None)
            if isinstance(res, WithMeta) and src is not None:
                res.meta = src.meta
            return res

    class OptedOut(L.Tensor):
        __torch_function__ = _torch_c(L)._disabled_torch_function_impl
    return Plain, Logged, WithMeta, OptedOut


def test_gradients_flow_through_subclass_instances():
    """fastai's BaseLoss turns the model output into a TensorBase (as_subclass): gpumemnet recorded no op on it,
    and the loss's gradient through it was silently lost."""
    def run(L):
        Plain, Logged, WithMeta, _ = _subclasses(L)
        out = []
        for cls in (Plain, Logged, WithMeta):
            w = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
            h = (w * 2).as_subclass(cls)
            s = (h * h).sum() + h.mean()
            loss = s + (w ** 2).sum()
            loss.backward()
            out.append((type(s).__name__, s.requires_grad, w.grad.tolist()))
        return out
    ref, got = _both(run)
    assert got == ref


def test_subclass_methods_and_operators_keep_the_subclass_and_call_torch_function():
    def run(L):
        Plain, Logged, WithMeta, OptedOut = _subclasses(L)
        x = L.arange(6.0).reshape(2, 3)
        out = []
        for cls in (Plain, Logged, WithMeta, OptedOut):
            y = x.as_subclass(cls)
            results = [1 + y, y - 1, 2 * y, y / 2, -y, abs(y), y ** 2, y @ y.t(), y[0], y[:, 1:], y.sum(), y.max(1),
                       y.chunk(3, 1), y.reshape(3, 2), y.detach(), y.clone(), y > 1, y == y, y.float(), y.mean(0)]
            out.append([(type(r).__name__, [type(i).__name__ for i in r] if isinstance(r, tuple) else None)
                        for r in results])
            z = y.clone()
            z += 1
            z.mul_(2)
            out.append((type(z).__name__, z.tolist()))
        Logged.calls.clear()
        y = x.as_subclass(Logged)
        _ = (1 + y, y * 2, y - 1, y[0], y.sum(), y.t(), y > 0, y.mean(0), y.add(1))
        # the func each call hands __torch_function__: PyTorch's Tensor method of the operator
        names = ["add", "mul", "sub", "__getitem__", "sum", "t", "gt", "mean", "add"]
        out.append([f is getattr(L.Tensor, n) for f, n in zip(Logged.calls, names)] + [len(Logged.calls)])
        m = x.as_subclass(WithMeta)
        m.meta = "affine"
        out.append([getattr(r, "meta", None) for r in (m + 1, m[0], m.sum(), m.permute(1, 0))])
        return out
    ref, got = _both(run)
    assert got == ref


def test_torch_function_can_be_disabled_and_libraries_dispatch_their_own_functions():
    def run(L):
        Plain, Logged, _, _ = _subclasses(L)
        y = L.arange(3.0).as_subclass(Logged)
        Logged.calls.clear()
        with _torch_c(L).DisableTorchFunctionSubclass():
            inside = (type(y + 1).__name__, type(y.sum()).__name__)
        ov = _mod(L, ".overrides")

        def scale(t, k=2):  # a library's function, written as PyTorch's docs say
            if ov.has_torch_function((t,)):
                return ov.handle_torch_function(scale, (t,), t, k=k)
            return t * k
        res = scale(y)
        return (inside, [f.__name__ for f in Logged.calls], type(res).__name__, res.tolist(),
                ov.has_torch_function((L.ones(1),)),
                ov.has_torch_function((L.ones(1).as_subclass(Plain),)), type(scale(L.ones(2))).__name__)
    ref, got = _both(run)
    assert got == ref


# ---- writes of graph values into plain tensors ----------------------------------------------------------------
def test_accumulating_losses_into_entries_of_a_plain_tensor():
    """RT-DETR's and YOLOv5-style losses: `loss = torch.zeros(3); loss[0] += part` (refused before), also through a
    named view, `*=` afterwards and an assignment into a view's entry."""
    def run(L):
        w = L.tensor([1.5, -2.0, 0.25], requires_grad=True)
        loss = L.zeros(3)
        for k in range(2):
            loss[0] += (w * (k + 1)).sum()
            loss[1] += (w ** 2).sum()
        loss[0] *= 0.5
        row = L.zeros(2, 3)
        first = row[0]
        first += w * 3  # the view and its base alone: both take the graph
        row[1][2] = w.sum()
        total = loss.sum() + row.sum() + first.sum()
        total.backward()
        return (loss.tolist(), row.tolist(), loss.requires_grad, row.requires_grad, first.requires_grad,
                w.grad.tolist())
    ref, got = _both(run)
    assert np.allclose(np.array(got[5]), ref[5], rtol=1e-6) and got[:5] == ref[:5]


def test_graph_value_into_a_plain_tensor_with_another_live_view():
    """Another view of the memory alive takes the graph too, as in PyTorch (it was refused: gpumemnet could not
    find that view then)."""
    def run(L):
        w = L.ones(3, requires_grad=True)
        x = L.zeros(4, 3)
        other = x[0, :2]
        x[0] += w
        (other * L.tensor([2.0, 3.0])).sum().backward()
        return other.requires_grad, x.requires_grad, w.grad.tolist()

    assert run(gm) == run(torch)


# ---- signatures: positional arguments bind as in PyTorch ------------------------------------------------------
def test_loss_functions_bind_positional_arguments_as_pytorch():
    """PyTorch's losses keep the legacy size_average / reduce slots before reduction: F.mse_loss(a, b, 'sum') is a
    mean there (a truthy size_average); gpumemnet took 'sum' as the reduction (a silently different loss)."""
    import warnings

    def run(L):
        F = L.nn.functional
        a, b = L.tensor([1.0, 2.0, 3.0, 4.0]), L.zeros(4)
        x, t = L.tensor([-1.0, 2.0]), L.tensor([0.0, 1.0])
        lg, y = L.tensor([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]]), L.tensor([0, 2])
        w = L.tensor([1.0, 0.0, 2.0, 0.5])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = [F.mse_loss(a, b, "sum"), F.l1_loss(a, b, False), F.smooth_l1_loss(a, b, None, False),
                   F.binary_cross_entropy_with_logits(x, t, None, "sum"),
                   F.binary_cross_entropy(t * 0.5 + 0.2, t, None, False), F.cross_entropy(lg, y, None, None, 2),
                   F.nll_loss(lg.log_softmax(1), y, None, None, 0, None, "sum"),
                   F.mse_loss(a, b, weight=w), F.l1_loss(a, b, reduction="none", weight=w),
                   F.huber_loss(a, b, "sum", 1.5, w), F.softmax(lg, 1, 3, L.float64),
                   F.log_softmax(lg, 1, 3, L.float64), L.softmax(lg, 1, L.float64), L.log_softmax(lg, 0, L.float64)]
        return [(str(o.dtype).split(".")[-1], np.array(o.tolist())) for o in out]
    ref, got = _both(run)
    assert [d for d, _ in got] == [d for d, _ in ref]
    for (_, g), (_, r) in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_load_takes_map_location_as_its_second_argument(tmp_path):
    def run(L):
        path = str(tmp_path / f"{L.__name__}.pt")
        L.save({"w": L.arange(3.0)}, path)
        seen = []
        out = L.load(path, lambda storage, loc: seen.append(loc) or storage)
        return out["w"].tolist(), L.load(path, {"cpu": "cpu"})["w"].tolist(), L.load(path, "cpu")["w"].tolist()
    ref, got = _both(run)
    assert got == ref


def test_functions_of_subclass_instances_dispatch():
    """torch.* and F.* functions called with a subclass instance go through its __torch_function__ and return the
    subclass (MONAI's MetaTensor keeps its affine through them: without it Spacingd skipped its resampling)."""
    def run(L):
        F = L.nn.functional
        Plain, Logged, WithMeta, OptedOut = _subclasses(L)
        x = L.arange(8.0).reshape(1, 2, 2, 2)
        out = []
        for cls in (Plain, Logged, WithMeta, OptedOut):
            y = x.as_subclass(cls)
            res = [L.cat([y, y]), L.stack([y, x]), L.where(y > 2, y, x), F.pad(y, (1, 1)), F.relu(y),
                   F.interpolate(y, scale_factor=2.0), L.clamp(y, 1, 5), L.softmax(y, 1), L.flatten(y, 1),
                   L.linalg.vector_norm(y), L.split(y, 1, 1)]
            out.append([type(r).__name__ if not isinstance(r, tuple) else [type(i).__name__ for i in r] for r in res])
        Logged.calls.clear()
        y = x.as_subclass(Logged)
        _ = (L.cat([y, y]), F.relu(y), L.nn.functional.conv2d(y, L.ones(1, 2, 1, 1)))
        out.append([f.__name__ for f in Logged.calls])
        m = x.as_subclass(WithMeta)
        m.meta = "affine"
        out.append([getattr(r, "meta", None) for r in (L.cat([m, m]), F.pad(m, (1, 1)), L.clamp(m, 0, 1))])
        return out
    ref, got = _both(run)
    assert got == ref


# ---- numbers as PyTorch's kernels round them --------------------------------------------------------------------
def test_fused_updates_compute_in_the_promoted_dtype():
    """p.add_(u, alpha=-lr) with a bfloat16 u on a float32 / float64 p (Muon-style optimizers), addcmul / addcdiv
    with value on mixed dtypes, the deprecated value-first overload (torch-optimizer's Ranger), addcdiv's rounding
    order and lerp's float32 weight (fastai's smoothed loss): bit for bit PyTorch's."""
    import warnings
    rng = np.random.default_rng(3)
    vals = [rng.standard_normal(257) for _ in range(4)]

    def run(L):
        p64, p32 = L.tensor(vals[0]), L.tensor(vals[1], dtype=L.float32)
        u16 = L.tensor(vals[2], dtype=L.bfloat16)
        a32, b32 = L.tensor(vals[2], dtype=L.float32), L.tensor(vals[3], dtype=L.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = [p64.clone().add_(u16, alpha=-0.01), L.add(p32, u16, alpha=-0.01), p32.clone().sub_(u16, alpha=0.3),
                   L.addcmul(p64, u16, u16, value=0.01), p32.clone().addcdiv_(u16, u16.abs() + 1, value=0.01),
                   p32.clone().addcdiv_(a32, b32.abs() + 0.5, value=1e-3), p32.clone().addcmul_(0.5, a32, b32),
                   p32.addcdiv(0.25, a32, b32.abs() + 1), L.lerp(p32, a32, 0.98), p32.clone().lerp_(a32, 0.999),
                   L.lerp(p32, a32, 0.9999)]
        return [o.numpy() for o in out]
    ref, got = _both(run)
    for i, (g, r) in enumerate(zip(got, ref)):  # (PyTorch's fused multiply-adds: a rounding of the terms apart;
        assert g.dtype == r.dtype, i             # the update rounded to bfloat16 first was 1e-5..1e-3 off)
        assert np.abs(g - r).max() <= 4 * np.spacing(r.dtype.type(4)), (i, np.abs(g - r).max())


def test_batched_grad_outputs_give_each_vector_jacobian_product():
    """autograd.grad(..., is_grads_batched=True): zuko's CNF takes its Jacobian so."""
    x0 = np.array([[0.5, -1.0], [2.0, 0.3]])

    def run(L):
        x = L.tensor(x0, requires_grad=True)
        y = L.sin(x) * x.flip(-1)
        eye = L.eye(2, dtype=L.float64).expand(2, 2, 2).movedim(0, 1)
        (jac,) = L.autograd.grad(y, x, eye, is_grads_batched=True, retain_graph=True)
        (hess,) = L.autograd.grad((y ** 2).sum(1), x, L.ones(3, 2, dtype=L.float64), is_grads_batched=True)
        return jac.numpy(), hess.numpy()
    ref, got = _both(run)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-13)


# ---- losses, optimizers and schedulers as libraries drive them --------------------------------------------------
def test_class_losses_read_a_strided_target_view():
    """cross_entropy(out, y[:, task]) (TabNet multi-task): the range check read the wrong elements (a false
    IndexError, or a missed one)."""
    def run(L):
        logits = L.zeros(3, 2, requires_grad=True)
        y = L.tensor([[0, 2], [1, 1], [0, 2]])
        loss = L.nn.functional.cross_entropy(logits, y[:, 0]) + L.nn.functional.nll_loss(logits, y[:, 0])
        with pytest.raises(IndexError):
            L.nn.functional.cross_entropy(logits, L.tensor([[0, 0], [0, 0], [7, 0]])[:, 0])
        return round(loss.item(), 6)
    ref, got = _both(run)
    assert got == ref


def test_optimizers_of_libraries_resume_and_wrap_as_in_pytorch():
    """Adafactor-style state that is not parameter-shaped loads back (torch-optimizer's Lamb / Shampoo), a wrapper
    optimizer that skips __init__ calls _patch_step_function (pytorch-optimizer's Lookahead), and ignite's
    ReduceLROnPlateau handler replaces _reduce_lr with one that takes the epoch."""
    def run(L):
        class Factored(L.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))

            @L.no_grad()
            def step(self):
                for g in self.param_groups:
                    for p in g["params"]:
                        st = self.state[p]
                        if not st:
                            st["row"], st["col"] = L.zeros(p.shape[0]), L.zeros(p.shape[1])
                            st["count"] = L.zeros((), dtype=L.int64)
                        st["row"].add_(p.grad.pow(2).mean(1))
                        st["col"].add_(p.grad.pow(2).mean(0))
                        st["count"].add_(1)
                        p.sub_(g["lr"] * p.grad / (st["row"][:, None] * st["col"][None, :]).sqrt())
        w = L.nn.Parameter(L.arange(6.0).reshape(2, 3))
        w.grad = L.ones(2, 3)
        opt = Factored([w])
        opt.step()
        opt2 = Factored([L.nn.Parameter(w.detach().clone())])
        opt2.load_state_dict(opt.state_dict())
        loaded = {k: (tuple(v.shape), str(v.dtype)) for k, v in opt2.state_dict()["state"][0].items()}

        class Wrapper(L.optim.Optimizer):
            def __init__(self, inner):
                self.optimizer = inner
                self._optimizer_step_pre_hooks, self._optimizer_step_post_hooks = {}, {}
                self._patch_step_function()

            @property
            def param_groups(self):
                return self.optimizer.param_groups

            def step(self, closure=None):
                return self.optimizer.step(closure)
        p = L.nn.Parameter(L.ones(2))
        p.grad = L.ones(2)
        Wrapper(L.optim.SGD([p], lr=0.1)).step()
        sched = L.optim.lr_scheduler.ReduceLROnPlateau(L.optim.SGD([p], lr=1.0), factor=0.5, patience=0)
        seen = []
        sched._reduce_lr = seen.append
        for v in (1.0, 2.0, 3.0):
            sched.step(v)
        return sorted(loaded.items()), p.tolist(), seen
    ref, got = _both(run)
    assert got[0] == [(k, (s, d.replace("torch.", "gpumemnet."))) for k, (s, d) in ref[0]] and got[1:] == ref[1:]


def test_promotions_and_empty_layers_that_libraries_rely_on():
    """cosine_similarity / cosine_embedding_loss of a one-hot int64 x2 (FocalCosineLoss), BatchNorm1d(0) (fastai's
    TabularModel without continuous columns), a Python complex times an int tensor (e3nn)."""
    def run(L):
        F = L.nn.functional
        x, y = L.tensor([[0.2, -1.0, 0.5], [1.5, 0.3, -0.2]]), L.tensor([2, 0])
        bn = L.nn.BatchNorm1d(0)
        z = 1j * L.arange(-1, 2)
        return (round(F.cosine_embedding_loss(x, F.one_hot(y, 3), L.tensor([1])).item(), 6),
                [round(v, 6) for v in F.cosine_similarity(x, F.one_hot(y, 3), dim=-1).tolist()],
                [tuple(t.shape) for t in bn.parameters()], tuple(bn.running_mean.shape),
                str(z.dtype).split(".")[-1], z.tolist(), str((L.arange(3) > 0) * 1j).count("j"))
    ref, got = _both(run)
    assert got == ref


# ---- files PyTorch wrote ---------------------------------------------------------------------------------------
class Holder:
    """A plain object holding a module (fastai's exported Learner holds .model)."""

    def __init__(self, model):
        self.model = model


def test_modules_inside_plain_objects_load_from_pytorch_files(tmp_path):
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    with torch.no_grad():
        m[0].weight.fill_(0.1)
        m[0].bias.fill_(0.5)
    path = str(tmp_path / "learner.pkl")
    torch.save(Holder(m), path)
    ref = m(torch.ones(1, 3)).tolist()
    got = gm.load(path, weights_only=False)
    assert isinstance(got, Holder) and isinstance(got.model, gm.nn.Sequential)
    assert got.model(gm.ones(1, 3)).tolist() == ref


def _noop_hook(module, args, out):
    return None


def test_whole_modules_saved_under_the_alias_load_in_pytorch(tmp_path):
    """torch.save(model) of a script on gpumemnet (ultralytics' last.pt, fastai's export) loads in PyTorch as
    torch.nn's classes, which run; and back in gpumemnet as its own."""
    from gpumemnet._serialization_torch_write import save
    gm.manual_seed(0)
    m = gm.nn.Sequential(gm.nn.Conv2d(3, 4, 3), gm.nn.BatchNorm2d(4), gm.nn.SiLU(), gm.nn.Flatten(),
                         gm.nn.Linear(36, 2))
    m.register_forward_hook(_noop_hook)  # hooks travel as PyTorch's OrderedDicts
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32)
    want = m.eval()(gm.tensor(x)).detach().numpy()
    path = str(tmp_path / "model.pt")
    save({"model": m, "epoch": 3}, path)
    ref = torch.load(path, weights_only=False)
    assert [type(c).__module__.split(".")[0] for c in ref["model"]] == ["torch"] * 5 and ref["epoch"] == 3
    assert list(ref["model"]._forward_hooks.values()) == [_noop_hook]
    np.testing.assert_allclose(ref["model"].eval()(torch.tensor(x)).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    back = gm.load(path, weights_only=False)["model"]
    np.testing.assert_allclose(back.eval()(gm.tensor(x)).detach().numpy(), want, rtol=1e-6)


def test_complex_in_place_view_changes():
    """MONAI's HilbertTransform: x.unsqueeze_(0) on the FFT of a signal."""
    def run(L):
        u = L.fft.fft(L.arange(8.0).reshape(2, 4), dim=1)
        a, b, c = u.clone(), u.clone(), u.clone()
        a.unsqueeze_(0)
        b.unsqueeze_(-1).squeeze_(-1)
        c.transpose_(0, 1)
        return [(tuple(t.shape), t.tolist()) for t in (a, b, c)]
    ref, got = _both(run)
    assert got == ref


# ---- torch.quasirandom ----------------------------------------------------------------------------------------
def test_sobol_engine_draws_pytorchs_sequence():
    """BoTorch imports torch.quasirandom.SobolEngine: the unscrambled points are PyTorch's bit for bit (SciPy's
    generator, the same direction numbers); a scrambled engine is reproducible by its seed, its points in [0, 1)."""
    pytest.importorskip("scipy")

    def run(L):
        SE = _mod(L, ".quasirandom").SobolEngine
        e = SE(5)
        a = e.draw(7)
        b = e.draw(3, dtype=L.float64)
        f = SE(5).fast_forward(7).draw(3, dtype=L.float64)
        base = SE(2).draw_base2(3)
        e.reset()
        out = L.empty(0)
        e.draw(2, out=out)
        wide = SE(21201).draw(3)
        with pytest.raises(ValueError, match="power of 2"):
            SE(2).fast_forward(3).draw_base2(1)
        with pytest.raises(ValueError, match=r"\[1, 21201\]"):
            SE(21202)
        return ([t.numpy().tolist() for t in (a, b, f, base, out)], str(b.dtype).split(".")[-1], e.num_generated,
                wide.numpy().sum(1).tolist(), repr(SE(3, scramble=True, seed=1)))
    ref, got = _both(run)
    assert got == ref
    s1, s2 = (gm.quasirandom.SobolEngine(4, scramble=True, seed=7).draw(64, dtype=gm.float64).numpy() for _ in "ab")
    assert np.array_equal(s1, s2) and 0 <= s1.min() and s1.max() < 1 and len(np.unique(s1[:, 0])) == 64
    assert not np.array_equal(s1, gm.quasirandom.SobolEngine(4).draw(64, dtype=gm.float64).numpy())


# ---- tensordict / torchrl -------------------------------------------------------------------------------------
def test_random_fills_of_tensors_in_a_graph_and_copy_of_numbers():
    """torchrl's SAC / TD3: p = w.expand(2, n).clone(); p.uniform_(lo, hi) (the old values get no gradient); its
    Collector: traj_id.copy_(n + 1); tensordict's td.to(None)."""
    def run(L):
        w = L.nn.Parameter(L.ones(3))
        out = []
        for fill in (lambda t: t.uniform_(0, 1), lambda t: t.normal_(), lambda t: t.bernoulli_(0.5),
                     lambda t: t.exponential_(), lambda t: t.random_(0, 5), lambda t: t.fill_(2.0)):
            p = w.expand(2, 3).clone()
            fill(p)
            (p * w).sum().backward()
            out.append((p.requires_grad, p.grad_fn is not None, tuple(w.grad.shape)))
            w.grad = None
        with pytest.raises(RuntimeError, match="leaf"):
            w.uniform_()
        t, u = L.zeros((), dtype=L.int64), L.zeros(3)
        for src in (5, 2.5, True):
            t.copy_(src)
            u.copy_(src)
            out.append((t.item(), u.tolist()))
        out.append(str(L.ones(2).to(None).dtype))
        return out
    ref, got = _both(run)
    assert [o if isinstance(o, tuple) else o.split(".")[-1] for o in got] == \
        [o if isinstance(o, tuple) else o.split(".")[-1] for o in ref]


# ---- pickling functions -----------------------------------------------------------------------------------------
class _Act(gm.nn.Module):
    """transformers' GELUActivation: a module holding a function."""

    def __init__(self):
        super().__init__()
        self.act = gm.nn.functional.gelu

    def forward(self, x):
        return self.act(x)


def test_public_functions_pickle_by_their_public_name(tmp_path):
    """pickle.dumps(torch.abs) failed ('_unary.<locals>.fn'), and F.gelu once a Tensor subclass existed: so did
    torch.save / multiprocessing of every model holding a function."""
    import pickle
    import types

    class _Sub(gm.Tensor):  # (a subclass wraps the functions for dispatch: they must still pickle)
        pass
    failed = []
    for ns in (gm, gm.nn.functional, gm.linalg, gm.special, gm.fft, gm.nn.init):
        for name in dir(ns):
            f = getattr(ns, name)
            if name.startswith("_") or not isinstance(f, types.FunctionType):
                continue
            try:
                assert pickle.loads(pickle.dumps(f)) is f
            except Exception:  # noqa: BLE001 - collected and reported together
                failed.append(f"{ns.__name__}.{name}")
    assert not failed, failed
    from gpumemnet._serialization_torch_write import save
    path = str(tmp_path / "act.pt")
    save(_Act(), path)  # under the alias: torch's F.gelu, as PyTorch writes it
    assert torch.load(path, weights_only=False).act is torch.nn.functional.gelu


def test_fill_diagonal_in_a_graph_cuts_the_diagonal_gradient():
    """lightly's DINO loss: loss.fill_diagonal_(0) on a tensor in a graph passed gradient through the overwritten
    diagonal; on a leaf that requires grad PyTorch refuses the write, gpumemnet changed the parameter."""
    def run(L):
        a = L.tensor([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]],
                     dtype=L.float64, requires_grad=True)
        m = a * 2.0
        m.fill_diagonal_(0, wrap=True)
        (m * m).sum().backward()
        w = L.ones(2, 2, requires_grad=True)
        with pytest.raises(RuntimeError):
            w.fill_diagonal_(0)
        return m.tolist(), a.grad.tolist(), w.tolist()
    ref, got = _both(run)
    assert got == ref


def test_checkpoint_device_states():
    """sentence-transformers imports get_device_states / set_device_states (its GradCache); CPU tensors have none."""
    def run(L):
        ck = _mod(L, ".utils.checkpoint")
        ids, states = ck.get_device_states(L.ones(2), [L.zeros(1), {"a": L.ones(1)}], 3)
        ck.set_device_states(ids, states)
        return ids, states
    ref, got = _both(run)
    assert got == ref == ([], [])


class _Foreign:
    """A type with reflected operators of its own (pykan mixes tensors with sympy symbols)."""

    def __radd__(self, o):
        return "radd"

    def __rsub__(self, o):
        return "rsub"

    def __rmul__(self, o):
        return "rmul"

    def __rtruediv__(self, o):
        return "rtruediv"


def test_arithmetic_with_a_foreign_type_defers_to_its_reflected_operator():
    def run(L):
        t = L.ones(2)
        out = [t + _Foreign(), t - _Foreign(), t * _Foreign(), t / _Foreign()]
        for f in (lambda: t + [1, 2], lambda: t * object(), lambda: L.add(t, _Foreign())):
            with pytest.raises(TypeError):
                f()
        return out
    ref, got = _both(run)
    assert got == ref == ["radd", "rsub", "rmul", "rtruediv"]
