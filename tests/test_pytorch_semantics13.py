"""PyTorch semantics, round 22 of the hunts: each test runs the same code under PyTorch and under gpumemnet."""
import collections

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet._serialization_torch_write import save as torch_format_save  # what torch.save is under the alias

torch = pytest.importorskip("torch")


def _save(L):
    """torch.save, under PyTorch or as the alias serves it (gm.save writes gpumemnet's own format)."""
    return torch.save if L is torch else torch_format_save


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


# ---- pinning a batch: PyTorch's containers -----------------------------------------------------------------------
class _Batch:
    """A custom batch type as PyTorch's docs write it: it pins itself."""
    def __init__(self, x):
        self.x = x

    def pin_memory(self):
        return ("pinned", self.x)


class _Tagged(dict):
    pass


def test_pin_memory_follows_pytorchs_containers():
    """torch.utils.data._utils.pin_memory.pin_memory (used by speechbrain and custom loaders) keeps named tuples,
    dict subclasses with their attributes, tuples, ranges, and lets an object with pin_memory() pin itself."""
    Pair = collections.namedtuple("Pair", "a b")

    def run(L):
        from_lib = __import__(L.__name__ + ".utils.data._utils.pin_memory", fromlist=["pin_memory"]).pin_memory
        tagged = _Tagged(k=_Batch(1))
        tagged.note = "kept"
        out = from_lib([Pair(_Batch(2), "s"), tagged, (_Batch(3), b"b"), range(3), 7])
        pair, d, tup, rng, seven = out
        return (type(out).__name__, type(pair).__name__, pair, type(d).__name__, d, getattr(d, "note", None),
                type(tup).__name__, tup, rng, seven)

    want, got = _both(run)
    assert got == want


def test_dataloader_pins_named_tuples_and_custom_batches(monkeypatch):
    """pin_memory=True pins the tensors inside a named tuple batch (they came back unpinned) and calls a custom
    batch's own pin_memory(), as PyTorch's loader does on a machine with an accelerator (one is pretended here:
    without one both loaders leave batches unpinned, and this CPU build cannot pin: a pinned tensor is marked)."""
    from gpumemnet.utils.data import dataloader
    monkeypatch.setattr(dataloader._C, "_cuda_device_count", lambda: 1)
    monkeypatch.setattr(gm.Tensor, "pin_memory", lambda t: t + 100)
    Pair = collections.namedtuple("Pair", "x y")
    data = gm.utils.data.TensorDataset(gm.tensor(np.arange(8.0).reshape(4, 2)), gm.arange(4))

    def as_pair(samples):
        x, y = gm.utils.data.default_collate(samples)
        return Pair(x, y)

    batch = next(iter(gm.utils.data.DataLoader(data, batch_size=2, collate_fn=as_pair, pin_memory=True)))
    assert type(batch) is Pair and batch.x.tolist() == [[100, 101], [102, 103]] and batch.y.tolist() == [100, 101]
    custom = next(iter(gm.utils.data.DataLoader(data, batch_size=2, collate_fn=_Batch, pin_memory=True)))
    assert custom[0] == "pinned"


# ---- a Python number past a floating dtype's range ----------------------------------------------------------------
def _outcome(fn):
    try:
        return fn().double().tolist()
    except RuntimeError as e:
        return str(e)


OVERFLOW = {
    "full": lambda L, dt, big: L.full((2,), big, dtype=dt),
    "full_like": lambda L, dt, big: L.full_like(L.zeros(2, dtype=dt), big),
    "new_full": lambda L, dt, big: L.zeros(2, dtype=dt).new_full((2,), big),
    "fill_": lambda L, dt, big: L.zeros(2, dtype=dt).fill_(big),
    "fill_diagonal_": lambda L, dt, big: L.zeros(2, 2, dtype=dt).fill_diagonal_(big),
    "masked_fill": lambda L, dt, big: L.zeros(2, dtype=dt).masked_fill(L.tensor([True, False]), -big),
    "masked_fill_": lambda L, dt, big: L.zeros(2, dtype=dt).masked_fill_(L.tensor([True, False]), -big),
    "index_fill": lambda L, dt, big: L.zeros(2, dtype=dt).index_fill(0, L.tensor([0]), big),
    "clamp": lambda L, dt, big: L.zeros(2, dtype=dt).clamp(min=-big),
    "clamp_": lambda L, dt, big: L.zeros(2, dtype=dt).clamp_(-big, big),
    "add_alpha": lambda L, dt, big: L.zeros(2, dtype=dt).add(L.ones(2, dtype=dt), alpha=big),
    "lerp": lambda L, dt, big: L.zeros(2, dtype=dt).lerp(L.ones(2, dtype=dt), big),
    "setitem": lambda L, dt, big: _set(L.zeros(2, dtype=dt), 0, big),
    "setitem_mask": lambda L, dt, big: _set(L.zeros(2, dtype=dt), L.tensor([True, False]), big),
    "setitem_index": lambda L, dt, big: _set(L.zeros(2, dtype=dt), L.tensor([0]), big),
    "nan_to_num": lambda L, dt, big: L.tensor([float("inf")], dtype=dt).nan_to_num(posinf=big),
    "tensor": lambda L, dt, big: L.tensor([big], dtype=dt),
    "full_inf": lambda L, dt, big: L.full((1,), float("-inf"), dtype=dt),
    "masked_fill_in_range": lambda L, dt, big: L.zeros(2, dtype=dt).masked_fill(L.tensor([True, False]), -6e4),
}


def _set(t, idx, v):
    t[idx] = v
    return t


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", sorted(OVERFLOW))
def test_a_number_past_the_dtypes_range_is_refused_where_pytorch_refuses_it(case, dtype):
    """full(..., 1e39), masked_fill of a float16 score matrix with -1e9, clamp(min=-1e39) ...: PyTorch raises
    'value cannot be converted to type ... without overflow' where a finite number would become inf (it wrote
    inf silently here); where PyTorch writes inf (half[0] = 1e6, tensor([1e39]), nan_to_num, lerp of half) so
    does gpumemnet."""
    big = 1e6 if dtype == "float16" else 1e39
    want, got = _both(lambda L: _outcome(lambda: OVERFLOW[case](L, getattr(L, dtype), big)))
    assert got == want


# ---- views recorded before an in-place write into their base -----------------------------------------------------
REBASE_WRITES = {
    "mul_": lambda L, b, q: b.mul_(q),
    "add_": lambda L, b, q: b.add_(q),
    "exp_": lambda L, b, q: b.exp_(),
    "setitem_all": lambda L, b, q: b.__setitem__(slice(None), q),
    "copy_": lambda L, b, q: b.copy_(q.expand(2, 3)),
    "masked_fill_": lambda L, b, q: b.masked_fill_(b > 2, 0.0),
    "relu_inplace": lambda L, b, q: L.nn.functional.relu(b.sub_(3), inplace=True),
    "sibling_slice_mul_": lambda L, b, q: b[:, 0].mul_(q[:2]),
    "view_of_view_add_": lambda L, b, q: b[:, :2][:, 0].add_(q[:2]),
    "flat_view_mul_": lambda L, b, q: b.view(6)[1:3].mul_(q[:2]),
    "setitem_sibling": lambda L, b, q: b.__setitem__((slice(None), 0), q[:2] * 3),
}


@pytest.mark.parametrize("case", sorted(REBASE_WRITES))
def test_a_view_taken_before_an_inplace_write_into_its_base_sees_the_write(case):
    """v = b[:, :2]; b.mul_(q); loss(v): PyTorch regenerates v's grad_fn from b's new node, so q gets its
    gradient and x's counts the write. gpumemnet kept v's old node: q.grad was None and x.grad wrong, silently
    (kornia's and pytorch-metric-learning's code write into a clone's slices while other views are alive)."""
    def run(L):
        x = L.tensor([[1., 2., 3.], [4., 5., 6.]], dtype=L.float64, requires_grad=True)
        q = L.tensor([0.5, -0.25, 2.0], dtype=L.float64, requires_grad=True)
        b = x.clone()
        v, w = b[:, :2], b.view(6)
        REBASE_WRITES[case](L, b, q)
        ((v * v).sum() + (w * w).sum() * 0.5).backward()
        return v.requires_grad, None if q.grad is None else q.grad.tolist(), x.grad.tolist()

    want, got = _both(run)
    assert got == want


# ---- optimizer state: an optimizer's own entries, int steps, NAdam's mu_product, copies of the step ------------------
def test_optimizer_state_keeps_its_own_entries_and_int_steps_through_a_round_trip():
    """MADGRAD keeps self.state["k"], EmoNavi self.state["ema"]: PyTorch's state_dict() carries such entries and
    load_state_dict() puts them back (they were dropped, and a resumed run restarted its counters); a library
    optimizer's int step stays an int (it came back as a float tensor, which json.dumps refuses)."""
    def run(L):
        p = L.nn.Parameter(L.ones(2))
        opt = L.optim.SGD([p], lr=0.1)
        p.grad = L.ones(2)
        opt.step()
        opt.state["ema"] = {"short": 0.5}
        opt.state[p]["step"] = 3
        sd = opt.state_dict()
        again = L.optim.SGD([p], lr=0.1)
        again.load_state_dict(sd)
        return sorted(map(str, sd["state"])), again.state.get("ema"), again.state_dict()["state"][0]["step"]

    want, got = _both(run)
    assert got == want and type(got[2]) is int


def test_nadam_and_adam_state_read_as_pytorchs():
    """NAdam's mu_product is a float32 product as PyTorch's tensor is (float64 parameters drifted by 2e-9 after five
    steps); Adam's step answers clone(), dtype, device, and prints as PyTorch's 0-d tensor does."""
    def run(L):
        p = L.nn.Parameter(L.tensor([1.0, 2.0], dtype=L.float64))
        opt = L.optim.NAdam([p], lr=0.1)
        for i in range(5):
            p.grad = L.tensor([0.5, -0.3], dtype=L.float64) * (i + 1)
            opt.step()
        q = L.nn.Parameter(L.ones(3))
        adam = L.optim.AdamW([q])
        q.grad = L.ones(3)
        adam.step()
        step = adam.state[q]["step"]
        copied = {k: v.clone() for k, v in adam.state[q].items()}
        return (p.tolist(), float(opt.state_dict()["state"][0]["mu_product"]), str(step), f"{step}",
                step.dtype == L.float32, str(step.device), tuple(step.shape), float(copied["step"]))

    want, got = _both(run)
    assert got == want


# ---- torch.utils._pytree's registry, as Lightning 2.6 reads it -----------------------------------------------------
def test_pytree_registry_holds_pytorchs_node_records():
    """Lightning's apply_to_collection reads SUPPORTED_NODES[_get_node_type(x)].flatten_fn for every batch and
    output: the entries were bare tuples and named tuples were missing, so every Trainer.fit / predict raised."""
    def run(L):
        from_lib = __import__(L.__name__ + ".utils._pytree", fromlist=["SUPPORTED_NODES"])
        P = collections.namedtuple("P", "x y")
        out = []
        for obj in ([1, 2], (3, 4), {"a": 5}, P(1, 2), collections.OrderedDict(b=6)):
            node = from_lib.SUPPORTED_NODES[from_lib._get_node_type(obj)]
            children, context = node.flatten_fn(obj)
            out.append((list(children), node.unflatten_fn(children, context) == obj, from_lib._is_leaf(obj)))
        return out, from_lib._is_leaf(3), from_lib._is_leaf([1], is_leaf=lambda t: True)

    want, got = _both(run)
    assert got == want


# ---- torch.save / torch.load: a module's own __getstate__, frozen parameters, the unsafe-globals scan -------------
class _Blanking:
    """A module class whose __getstate__ blanks a cache and drops a lambda (torchmetrics' Metric drops its wrapped
    update / compute there): made under either library by _blanking(L)."""


def _blanking(L):
    class Blanking(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = L.nn.Linear(2, 2)
            self.cache, self.fn = [1, 2, 3], (lambda x: x)

        def __getstate__(self):
            d = self.__dict__.copy()
            d.pop("fn")
            d["cache"] = None
            return d
    Blanking.__qualname__ = "_Blanking"  # picklable by reference: this module's _Blanking name
    return Blanking


def test_save_asks_a_modules_own_getstate_and_keeps_frozen_parameters(tmp_path):
    """torch.save pickled a module's __dict__ past its class's __getstate__ (a lambda it drops made the save fail:
    every Lightning checkpoint of a pytorch-forecasting model holding a torchmetrics loss), and wrote a frozen
    Parameter as a plain tensor (it loaded back as one, under either library)."""
    def run(L):
        global _Blanking
        _Blanking = _blanking(L)
        path = tmp_path / f"{L.__name__}.pt"
        frozen = L.nn.Parameter(L.ones(2), requires_grad=False)
        _save(L)({"m": _Blanking(), "p": frozen, "lin": L.nn.Linear(2, 2).requires_grad_(False)}, path)
        out = L.load(path, weights_only=False)
        return (out["m"].cache, hasattr(out["m"], "fn"), isinstance(out["p"], L.nn.Parameter), out["p"].requires_grad,
                isinstance(out["lin"].weight, L.nn.Parameter))

    want, got = _both(run)
    assert got == want


def test_unsafe_globals_in_a_checkpoint_are_listed(tmp_path):
    """torch.serialization.get_unsafe_globals_in_checkpoint (darts calls it before loading a model) names the
    globals weights_only would refuse, less those add_safe_globals admitted."""
    import argparse

    def run(L):
        path = tmp_path / f"{L.__name__}.pt"
        _save(L)({"w": L.ones(2), "ns": argparse.Namespace(a=1), "od": collections.OrderedDict(a=L.zeros(1))}, path)
        before = sorted(L.serialization.get_unsafe_globals_in_checkpoint(path))
        with L.serialization.safe_globals([argparse.Namespace]):
            admitted = sorted(L.serialization.get_unsafe_globals_in_checkpoint(str(path)))
        try:
            L.serialization.get_unsafe_globals_in_checkpoint(__import__("io").BytesIO(b"not a zip"))
        except ValueError as e:
            return before, admitted, str(e)

    want, got = _both(run)
    assert got == want


def test_an_expanded_view_taken_before_a_write_into_its_base():
    """An expand() of a view, its base then written in place: the re-derived view reads some elements many times,
    and its gradient is summed over the broadcast dim (the backward raised: 'a broadcast view')."""
    def run(L):
        x = L.tensor([[1., 2.], [3., 4.]], dtype=L.float64, requires_grad=True)
        b = x.clone()
        v = b[:1].expand(3, 2)
        w = b[:, 1:].expand(2, 4)
        b[1] = 0.0
        ((v ** 2).sum() + (w * L.arange(8.0, dtype=L.float64).view(2, 4)).sum()).backward()
        return x.grad.tolist()

    want, got = _both(run)
    assert got == want


# ---- a value that requires grad written into a plain tensor whose views are alive ----------------------------------
PLAIN_WRITES = {
    # kornia's quaternion_to_axis_angle: a slice of a fresh zeros tensor, written through slices of the slice
    "view_of_view_iadd": lambda L, f: _kornia_axis_angle(L, f),
    # a buffer filled row by row while a view of one row is held (a CRF's score table)
    "row_held_setitem": lambda L, f: _rows(L, f),
    "root_mul_with_view": lambda L, f: _root_mul(L, f),
}


def _kornia_axis_angle(L, f):
    out = L.zeros(2, 4, dtype=L.float64)[..., :3]
    out[..., 0] += f * 2.0
    out[..., 1] += f * 3.0
    return out, out


def _rows(L, f):
    s = L.zeros(3, 2, dtype=L.float64)
    row0 = s[0]
    s[1] = f * 3
    s[2] = row0 + f
    return s, row0


def _root_mul(L, f):
    s = L.ones(2, 2, dtype=L.float64)
    col = s[:, 1]
    s.mul_(f.unsqueeze(1))
    return col, s


@pytest.mark.parametrize("case", sorted(PLAIN_WRITES))
def test_a_grad_value_written_into_a_plain_tensor_with_live_views(case):
    """PyTorch records the write on the root (CopySlices) and every view of it takes the graph; gpumemnet refused
    ('shares its memory with another') whenever a second view was alive: kornia's rotation conversions raised
    for inputs that require grad, and so did code that fills a buffer while holding a row of it."""
    def run(L):
        f = L.tensor([0.5, -1.5], dtype=L.float64, requires_grad=True)
        a, b = PLAIN_WRITES[case](L, f)
        ((a * a).sum() + (b * 3).sum()).backward()
        return a.tolist(), b.tolist(), a.requires_grad, b.requires_grad, f.grad.tolist()

    want, got = _both(run)
    assert got == want


def test_an_alias_that_is_no_view_takes_no_graph_from_a_write_into_its_memory():
    """detach() aliases share the memory and not the graph (PyTorch's): a write of a value that requires grad into
    the root gives its views the graph and not the alias; one into the alias (Lightning's StochasticWeightAveraging:
    `p.detach().copy_(avg_p)`, which raised here) gives the alias alone the graph."""
    def run(L):
        f = L.tensor([0.5, -1.5], requires_grad=True)
        s = L.zeros(2, 2)
        alias, view = s.detach(), s[1]
        s[1] = f * 3
        (view * 2).sum().backward()
        p = L.nn.Parameter(L.ones(2))
        copied = p.detach()
        copied.copy_(f)
        return (s.requires_grad, view.requires_grad, alias.requires_grad, f.grad.tolist(), p.tolist(),
                copied.requires_grad, p.requires_grad, p.grad_fn is None)

    want, got = _both(run)
    assert got == want


def test_an_optimizer_resumes_as_pytorchs_does():
    """load_state_dict keeps a library optimizer's tensor step (timm's rmsproptf, nadamw, adopt... add_() to it:
    it became gpumemnet's Step int, and the first step after a resume raised), goes through __setstate__ (where
    such optimizers fill in their options), and gives an older checkpoint's groups the options it lacks
    ('maximize', 'foreach': KeyError at step)."""
    def run(L):
        class Counting(L.optim.Optimizer):
            def __init__(self, ps):
                super().__init__(ps, {"lr": 0.1})

            def __setstate__(self, state):
                super().__setstate__(state)
                for g in self.param_groups:
                    g.setdefault("new_option", 123)

            def step(self):
                for p in self.param_groups[0]["params"]:
                    st = self.state[p]
                    st.setdefault("step", L.tensor(0.0))
                    st["step"].add_(1)
                    p.data.add_(-0.1 * st["step"])

        m = L.nn.Linear(2, 2)
        with L.no_grad():
            m.weight.fill_(0.5), m.bias.fill_(0.1)
        opt = Counting(m.parameters())
        opt.step()
        opt.load_state_dict(opt.state_dict())
        opt.step()
        sgd = L.optim.AdamW(m.parameters(), lr=0.01)
        m(L.ones(1, 2)).sum().backward()
        sgd.step()
        sd = sgd.state_dict()
        sd["param_groups"] = [{k: v for k, v in g.items() if k not in ("maximize", "foreach", "capturable",
                                                                         "differentiable", "fused")}
                              for g in sd["param_groups"]]
        again = L.optim.AdamW(m.parameters(), lr=0.01)
        again.load_state_dict(sd)
        again.step()
        return (m.weight.tolist(), float(opt.state[m.weight]["step"]), opt.param_groups[0]["new_option"],
                again.param_groups[0]["maximize"])

    want, got = _both(run)
    assert got == want


def test_foreach_forms_that_optimizer_libraries_call():
    """_foreach_addcmul_ / _foreach_addcdiv_ with the value positional (one number, a list, a 1-D tensor of them)
    and _foreach_pow(number, exponents): timm's foreach optimizers call these; Optimizer's
    _group_tensors_by_device_and_dtype (timm's ADOPT)."""
    def run(L):
        a = [L.tensor([1.0, 2.0], dtype=L.float64), L.tensor([3.0], dtype=L.float64)]
        b = [L.tensor([0.5, 0.25], dtype=L.float64), L.tensor([2.0], dtype=L.float64)]
        out = []
        for value in (0.1, [0.1, 0.2], L.tensor([0.3, 0.7], dtype=L.float64)):
            x = [t.clone() for t in a]
            L._foreach_addcdiv_(x, b, b, value)
            out.append([t.tolist() for t in x] + [t.tolist() for t in L._foreach_addcmul(a, b, b, value)])
        out.append([t.tolist() for t in L._foreach_pow(2.0, a)])
        groups = L.optim.Optimizer._group_tensors_by_device_and_dtype([a + [L.ones(1)], b + [L.zeros(1)]])
        out.append(sorted((str(dt).split(".")[-1], [[t.tolist() for t in tl] for tl in lists], idx)
                          for (dev, dt), (lists, idx) in groups.items()))
        return out

    want, got = _both(run)
    assert got == want


def test_autocast_products_take_a_lowered_input_beside_float32_matrices():
    """Under bf16 autocast, attention code adds bmm(q, k) scores (bf16, autocast's own) into baddbmm with float32
    q and k (Bloom / GPT-NeoX): the dtypes were checked before autocast lowered them, and refused."""
    def run(L):
        r = np.random.default_rng(0)
        a = L.tensor(r.standard_normal((2, 3, 4)), dtype=L.float32)
        b = L.tensor(r.standard_normal((2, 4, 3)), dtype=L.float32)
        m = L.tensor(r.standard_normal((3, 4)), dtype=L.float32)
        with L.autocast("cpu", dtype=L.bfloat16):
            scores = a @ b
            outs = [L.baddbmm(scores, a, b, beta=1.0, alpha=0.5), L.addbmm(scores[0], a, b),
                    L.addmm(scores[0], m, m.t()[:, :3])]
        return [(str(o.dtype).split(".")[-1], round(o.double().sum().item(), 4)) for o in outs]

    want, got = _both(run)
    assert got == want


def test_names_pyg_and_lightning_call():
    """torch._segment_reduce is the function (PyG's softmax(ptr=) and its aggregations call it; the name was a
    module's); torch.autograd._profiler_enabled (Lightning's PyTorchProfiler)."""
    def run(L):
        src = L.tensor([1.0, 2.0, 3.0, 4.0], dtype=L.float64)
        with L.profiler.profile(activities=[L.profiler.ProfilerActivity.CPU]):
            inside = L.autograd._profiler_enabled()
        return (L._segment_reduce(src, "sum", offsets=L.tensor([0, 1, 4])).tolist(), inside,
                L.autograd._profiler_enabled())

    want, got = _both(run)
    assert got == want


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [False, True])
def test_scatter_and_index_reduce_share_ties_as_pytorch(reduce, include_self):
    """PyTorch counts self's value among the ties of an amax / amin even with include_self=False (self then gets
    no share): PyG's scatter(reduce='max') on a zeros base gave each tied source g / k here where PyTorch gives
    g / (k + 1)."""
    def run(L):
        src = L.tensor([0.0, -1.0, 2.0, 2.0, 0.0, 3.0], dtype=L.float64, requires_grad=True)
        base = L.tensor([0.0, 2.0, 5.0], dtype=L.float64, requires_grad=True)
        idx = L.tensor([0, 0, 1, 1, 0, 2])
        out = base.scatter_reduce(0, idx, src, reduce=reduce, include_self=include_self)
        rows = base.unsqueeze(1).expand(3, 2).contiguous()
        out2 = rows.index_reduce(0, L.tensor([0, 1, 1]), src[:6].view(3, 2), reduce, include_self=include_self)
        (out * L.tensor([1.0, 2.0, 3.0], dtype=L.float64)).sum().backward(retain_graph=True)
        first = src.grad.tolist(), base.grad.tolist()
        src.grad = base.grad = None
        out2.sum().backward()
        return out.tolist(), out2.tolist(), first, src.grad.tolist(), base.grad.tolist()

    want, got = _both(run)
    assert got == want
