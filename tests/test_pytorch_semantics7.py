"""PyTorch semantics that scripts written for PyTorch rely on (stop 42, round 9 of the hunts: torchvision's
detection / segmentation / video zoo, scientific ML, recommenders, time series and skorch, and what followed), each
checked against PyTorch itself: the same function run under both libraries and the results compared."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet._serialization_torch_write import save as torch_format_save  # what torch.save is under the alias

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_of_half_weights_counts_bags_past_the_half_range(dtype, mode):
    """Bag numbers are counted in int64 (a bfloat16 count stops at 256: entries landed in the wrong bags) and half
    weights' bags are summed in float32, as PyTorch's kernel does."""
    def run(L):
        F = L.nn.functional
        dt = getattr(L, dtype)
        w = L.arange(10, dtype=dt).view(10, 1).expand(10, 2).contiguous()
        idx = L.arange(3000) % 10
        out = [F.embedding_bag(idx, w, L.arange(3000), mode=mode).float().tolist()]
        out.append(F.embedding_bag(L.ones(400, dtype=L.long), L.ones(3, 2, dtype=dt), L.tensor([0]),
                                   mode=mode).float().tolist())
        return out
    ref, got = _both(run)
    assert got == ref


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_scatter_sums_in_float32_as_pytorch(dtype):
    """scatter_add, scatter_reduce (sum, mean), index_add of slices and gather's backward sum half values in float32
    and round once; index_add of single elements and x[idx]'s backward sum in the half type: each as PyTorch's."""
    def run(L):
        dt, n = getattr(L, dtype), 5000
        idx, src = L.zeros(n, dtype=L.long), L.full((n,), 0.5, dtype=dt)
        z = L.zeros(2, dtype=dt)
        out = [z.scatter_add(0, idx, src)[0].item(), z.scatter_reduce(0, idx, src, "sum")[0].item(),
               z.scatter_reduce(0, idx, src, "mean", include_self=False)[0].item(), z.index_add(0, idx, src)[0].item(),
               L.zeros(2, 3, dtype=dt).index_add(0, idx, src.view(n, 1).expand(n, 3).contiguous())[0, 0].item(),
               L.zeros(2, 3, dtype=dt).scatter_add(0, idx.view(n, 1).expand(n, 3),
                                                   src.view(n, 1).expand(n, 3).contiguous())[0, 0].item()]
        w = L.zeros(2, 1, dtype=dt, requires_grad=True)
        g, = L.autograd.grad((w.gather(0, idx.view(n, 1)) * 0.5).sum(), w)
        out.append(g[0, 0].item())
        w1 = L.zeros(2, dtype=dt, requires_grad=True)
        g, = L.autograd.grad((L.take_along_dim(w1, idx) * 0.5).sum(), w1)
        out.append(g[0].item())
        g, = L.autograd.grad((w1[idx] * 0.5).sum(), w1)
        out.append(g[0].item())
        return out
    ref, got = _both(run)
    assert got == ref


def test_float32_linspace_rounds_its_ends_first():
    """Python-float ends are rounded to float32 before the points are made, as PyTorch's: a symmetric grid keeps
    its exact 0 (it was 1 ulp off) and the points equal PyTorch's."""
    def run(L):
        return [L.linspace(-math.pi, math.pi, 5).tolist(), L.linspace(-0.1, 0.1, 3).tolist(),
                L.linspace(0.0, 2 * math.pi, 9).tolist(), L.linspace(-4 / 3, 4 / 3, 7).tolist(),
                L.linspace(-4 / 3, 4 / 3, 7, dtype=L.float64).tolist()]
    ref, got = _both(run)
    assert got == ref
    assert got[0][2] == 0.0


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool"])
def test_pad_fills_integer_tensors_with_the_value(dtype):
    """F.pad's constant of a narrow integer tensor is the value, truncated (it was value != 0, as for bool: a uint8
    mask padded with 255 got class 1); a value out of the dtype's range is refused with PyTorch's error."""
    def run(L):
        F, dt = L.nn.functional, getattr(L, dtype)
        x = L.zeros(1, 1, 2, 2, dtype=dt)
        out = [F.pad(x, [1, 1, 0, 0], value=7.0).tolist(), F.pad(x, [0, 1, 1, 0], value=2.7).tolist()]
        for v in (-1, 300, 70000, -3.9):
            try:
                out.append(F.pad(x, [1, 0], value=v).tolist())
            except RuntimeError as e:
                out.append(str(e))
        return out
    ref, got = _both(run)
    assert got == ref


def test_complex_in_place_product_with_an_operand_that_needs_grad():
    """a.mul_(c) / div_ / add_ / sub_ on a complex tensor with c needing grad (linear_operator's Toeplitz products
    in gpytorch's KISS-GP) gives PyTorch's values and gradient (it was refused: a's old values are read by the
    product's backward)."""
    def run(L):
        x = L.linspace(0.0, 1.0, 5, dtype=L.float64)
        w = L.tensor([0.5, -1.0, 2.0, 0.25, 1.0], dtype=L.float64, requires_grad=True)
        a, c = L.fft.fft(x), L.fft.fft(w)
        a.mul_(c)
        a.div_(c + 3)
        a.add_(c, alpha=2)
        a.sub_(c)
        out = L.fft.ifft(a).real
        out.sum().backward()
        return [round(v, 12) for v in out.tolist()], [round(v, 12) for v in w.grad.tolist()]
    ref, got = _both(run)
    assert got == ref


def test_hasattr_transposes_and_save_load_of_complex_and_sparse_tensors(tmp_path):
    """hasattr / getattr(default) answer on complex and sparse tensors (a missing method raised TypeError); mT, T, H,
    mH exist on both; a sparse COO tensor saved by torch.save (PyTorch's format) loads with the default
    weights_only=True, and files cross between the libraries."""
    def run(L):
        z = L.complex(L.tensor([[1.0, 2.0], [3.0, 4.0]]), L.tensor([[0.5, -1.0], [2.0, 0.0]]))
        s = L.sparse_coo_tensor(L.tensor([[0, 1, 2], [2, 0, 1]]), L.tensor([1.0, 2.0, 3.0]), (3, 3))
        out = [hasattr(z, "no_such_thing"), getattr(s, "_no_such", "dflt"), hasattr(s, "no_such_thing")]
        for name in ("mT", "T", "H", "mH"):
            out.append(L.view_as_real(getattr(z, name).resolve_conj()).tolist())
            out.append(getattr(s, name).to_dense().tolist())
        path = tmp_path / f"sparse_{L.__name__}.pt"
        (L.save if L is torch else torch_format_save)({"adj": s.coalesce(), "n": 3}, path)  # torch.save's format
        return out, path
    (ref, ref_path), (got, got_path) = _both(run)
    assert got == ref
    for lib, path in ((gm, ref_path), (torch, got_path), (gm, got_path)):
        d = lib.load(path)
        assert d["adj"].to_dense().tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 0.0], [0.0, 3.0, 0.0]], (lib, path)
        assert d["adj"].is_coalesced() and d["n"] == 3


def test_mixed_dtype_triangular_solves_index_select_errors_and_scatter_multiply():
    """solve_triangular(float32 A, float64 B) answers in A's dtype (a float32 GP with float64 targets) while the
    older triangular_solve refuses the mix; index_select out of range raises IndexError except along dim 1, as
    PyTorch's CPU kernels; scatter's deprecated reduce='multiply' works."""
    def run(L):
        A, b = L.tensor([[2.0, 0.0], [1.0, 3.0]]), L.tensor([[1.0], [2.0]], dtype=L.float64)
        x = L.linalg.solve_triangular(A, b, upper=False)
        out = [str(x.dtype).split(".")[-1], x.tolist()]
        for f in (lambda: L.triangular_solve(b, A, upper=False),
                  lambda: L.zeros(3).index_select(0, L.tensor([5])),
                  lambda: L.zeros(2, 3).index_select(1, L.tensor([3])),
                  lambda: L.zeros(2, 3, 4).index_select(2, L.tensor([4]))):
            try:
                f()
                out.append(None)
            except (RuntimeError, IndexError) as e:
                out.append(type(e).__name__)
        idx, src = L.tensor([[0, 1], [0, 0]]), L.tensor([[2.0, 3.0], [4.0, 5.0]])
        out.append(L.ones(2, 2).scatter(0, idx, src, reduce="multiply").tolist())
        out.append(L.ones(2, 2).scatter_(0, idx, 2.0, reduce="multiply").tolist())
        return out
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref, got = _both(run)
    assert got == ref


def test_complex_parameter_in_state_dict_and_checkpoints(tmp_path):
    """A complex nn.Parameter (FNO's spectral weights) is complex in state_dict() and loads from a complex
    checkpoint, as PyTorch's (it showed its float64 (..., 2) real pairs and refused PyTorch's checkpoints); gm.save
    and gm.load keep it."""
    def run(L):
        class Spectral(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.weights1 = L.nn.Parameter(L.zeros(2, 3, dtype=L.complex128))
        m = Spectral()
        w = L.complex(L.arange(6.0).view(2, 3), -L.arange(6.0).view(2, 3)).to(L.complex128)
        m.load_state_dict({"weights1": w})
        sd = m.state_dict()
        return [(k, str(v.dtype).split(".")[-1], tuple(v.shape)) for k, v in sd.items()], \
            L.view_as_real(m.weights1.detach()).tolist(), m
    (ref, ref_w, _), (got, got_w, m) = _both(run)
    assert got == ref and got_w == ref_w
    gm.save(m.state_dict(), tmp_path / "spectral")
    back = gm.load(tmp_path / "spectral")["weights1"]
    assert back.dtype == gm.complex128 and gm.view_as_real(back).tolist() == got_w


def test_searchsorted_of_no_values():
    """searchsorted of an empty batch of values gives an empty result of their shape (a batched one raised)."""
    def run(L):
        return [tuple(L.searchsorted(s, v).shape) for s, v in (
            (L.tensor([1.0, 2.0, 3.0]), L.tensor([])), (L.tensor([[1.0, 2.0, 3.0]] * 2), L.zeros(2, 0)),
            (L.zeros(0, 3), L.zeros(0, 2)))]
    ref, got = _both(run)
    assert got == ref


def test_numpy_keywords_of_linalg_norms_dynamo_config_and_the_T_warning():
    """torch.linalg.norm / vector_norm / matrix_norm take axis= / keepdims= (POT's sinkhorn passes keepdims);
    torch._dynamo.config keeps what scripts set at import and patch() restores it (k-diffusion); x.T of a tensor
    that is not 2-D says PyTorch's deprecation warning."""
    import warnings
    from gpumemnet._core import state

    def run(L):
        x = L.arange(6.0).reshape(2, 3)
        out = [L.linalg.norm(x, dim=1, keepdims=True).tolist(), L.linalg.vector_norm(x, axis=1).tolist(),
               tuple(L.linalg.matrix_norm(x, keepdims=True).shape)]
        import importlib  # torch._dynamo, under the alias gpumemnet.compat._dynamo
        config = importlib.import_module("torch._dynamo" if L is torch else "gpumemnet.compat._dynamo").config
        before = config.suppress_errors
        with config.patch(suppress_errors=True):
            out.append(config.suppress_errors)
        out += [config.suppress_errors == before, config.cache_size_limit]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out.append(tuple(L.zeros(2, 3, 4).T.shape))
        out.append(any("x.T` on tensors of dimension other than 2" in str(w.message) for w in caught))
        return out
    state.warned_once.difference_update([m for m in state.warned_once if "x.T` on tensors" in m])
    ref = run(torch)
    got = run(gm)
    assert got == ref


def test_legacy_constructor_shares_arrays_and_tensor_lr_is_kept():
    """torch.Tensor(ndarray) / LongTensor(ndarray) share an array of their own dtype, as PyTorch's (CleanRL's
    torch.Tensor(next_obs) over a buffer the environment rewrites); a tensor lr stays a tensor that scripts anneal
    in place, and schedulers fill it."""
    def run(L):
        buf, ints = np.zeros(3, np.float32), np.zeros(2, np.int64)
        t, i, c = L.Tensor(buf), L.LongTensor(ints), L.Tensor(np.zeros(2))  # float64: a float32 copy
        buf[0], ints[1] = 5.0, 7
        out = [t.tolist(), i.tolist(), str(c.dtype).split(".")[-1]]
        w = L.nn.Parameter(L.tensor([1.0, -2.0], dtype=L.float64))
        opt = L.optim.SGD([w], lr=L.tensor(0.1))
        sched = L.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
        for k in range(3):
            opt.param_groups[0]["lr"].copy_(L.tensor(0.1 * (1 - k / 4))) if k == 1 else None
            opt.zero_grad()
            (w ** 2).sum().backward()
            opt.step()
            sched.step()
        out += [type(opt.param_groups[0]["lr"]).__name__, float(opt.param_groups[0]["lr"]),
                float(opt.param_groups[0]["initial_lr"]), [round(v, 12) for v in w.tolist()]]
        return out
    ref, got = _both(run)
    assert got == ref


def test_warnings_of_no_degrees_of_freedom_kl_div_mean_and_numpy_of_a_grad_tensor():
    """std / var / std_mean of one value (NaN) and kl_div's default 'mean' say PyTorch's warnings at the caller's
    line; np.asarray of a tensor that requires grad is refused as t.numpy() is (it hid a forgotten no_grad)."""
    import warnings

    def run(L):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            L.tensor([1.0]).std()
            L.var(L.zeros(3, 1), 1)
            L.std_mean(L.tensor([2.0]))
            L.zeros(2, 3).std(0)
            L.zeros(3, 4).var(dim=())  # every dim: 12 values, no warning
            L.nn.functional.kl_div(L.zeros(2, 3), L.ones(2, 3) / 3)
            L.nn.functional.kl_div(L.zeros(2, 3), L.ones(2, 3) / 3, reduction="batchmean")
        said = [(str(w.message).split("(Triggered")[0].strip()[:60], w.filename == __file__) for w in caught]
        try:
            np.asarray(L.ones(2, requires_grad=True))
            refused = False
        except RuntimeError:
            refused = True
        return said, refused
    ref, got = _both(run)
    assert got == ref


def test_parameter_list_holds_modules_and_objects_and_in_place_writes_into_views_of_views():
    """ParameterList keeps a module (a nested ParameterList: vit-pytorch's nViT) as a submodule and any other object
    as it is, wrapping plain tensors alone, as PyTorch's; an in-place write into a view of a graph tensor that is
    itself a view (Performer's v.masked_fill_(mask, 0) on a slice of a reshaped projection) is recorded, with
    PyTorch's gradient (it was refused); torch.cuda._initialized and torch.binomial exist."""
    def run(L):
        pl = L.nn.ParameterList([L.nn.Parameter(L.ones(2)), L.ones(3), L.nn.Linear(2, 2), None, 3,
                                 L.nn.ParameterList([L.nn.Parameter(L.zeros(1))])])
        out = [len(pl), [n for n, _ in pl.named_parameters()], list(pl.state_dict()), pl[4], pl[3] is None,
               repr(pl).replace("gpumemnet", "torch").splitlines()[2:]]
        writes = [lambda v: v.masked_fill_(L.tensor([[True, False], [False, True]]), 0.0), lambda v: v.add_(1.0),
                  lambda v: v.mul_(3.0), lambda v: v.__setitem__(0, 5.0), lambda v: v.zero_(),
                  lambda v: v.clamp_(0, 3), lambda v: v.copy_(L.ones(2, 2))]
        for write in writes:
            x = L.arange(8.0, requires_grad=True)
            y = (x * 2).view(2, 4)
            write(y[:, :2])
            (y * L.arange(8.0).view(2, 4)).sum().backward()
            out.append((y.tolist(), x.grad.tolist()))
        out += [L.cuda._initialized, tuple(L.binomial(L.full((2, 3), 4.0), L.full((2, 3), 0.5)).shape)]
        return out
    ref, got = _both(run)
    assert got == ref


def test_func_transforms_and_forward_ad_under_no_grad_and_norm_gradients_at_zero():
    """torch.func's jvp / linearize / vmap(jvp) of parameters under no_grad give PyTorch's values (they gave zeros:
    curvlinops' Hessian products), grad / vjp results carry no graph there; forward AD's tangents under no_grad;
    a p-norm's gradient at a zero vector (or, p < 1, a zero entry) is 0 (it was NaN: cdist(p=3) of equal points)."""
    def run(L):
        from importlib import import_module
        func, fwad = L.func, import_module(L.__name__ + ".autograd.forward_ad")
        x = L.tensor([1.0, 2.0, 3.0], dtype=L.float64, requires_grad=True)
        v = L.ones(3, dtype=L.float64)

        def f(t):
            return (t ** 3).sum()
        with L.no_grad():
            out = [func.jvp(f, (x,), (v,))[1].item(), func.jvp(func.grad(f), (x,), (v,))[1].tolist(),
                   func.linearize(f, x)[1](v).item(), func.grad(f)(x).requires_grad,
                   func.vjp(lambda t: t ** 2, x)[1](v)[0].requires_grad,
                   func.vmap(lambda t: func.jvp(f, (x,), (t,))[1])(L.eye(3, dtype=L.float64)).tolist()]
            params, tangent = {"w": x.detach()}, {"w": L.tensor([0.5, -1.0, 2.0], dtype=L.float64)}
            out.append(func.jvp(lambda d: (d["w"] ** 2).sum(), (params,), (tangent,))[1].item())  # a dict's jvp
            tree = func.jvp(lambda t: {"a": t * 2, "b": t.sin()}, (v,), (v,))[1]  # a dict output
            out.append({k: t.tolist() for k, t in tree.items()})
            with fwad.dual_level():
                d = fwad.make_dual(L.tensor([1.0, 2.0], dtype=L.float64), L.ones(2, dtype=L.float64))
                out.append(fwad.unpack_dual((d ** 3).sum()).tangent.item())
        z = L.zeros(3, dtype=L.float64, requires_grad=True)
        L.linalg.vector_norm(z, 3).backward()
        out.append(z.grad.tolist())
        a = L.tensor([[1.0, 2.0], [0.5, -1.0]], dtype=L.float64, requires_grad=True)
        for p in (3.0, 0.5, float("inf")):  # inf: each tied coordinate takes the whole gradient, as PyTorch
            a.grad = None
            L.cdist(a, L.tensor([[1.0, 2.0], [3.0, 0.0]], dtype=L.float64), p=p).sum().backward()
            out.append([round(g, 12) for g in a.grad.reshape(-1).tolist()])
        return out
    ref, got = _both(run)
    assert got == ref


def test_sdpa_integer_masks_sampler_zero_weights_rnn_flat_weights_and_saving_a_sparse_tensor():
    """scaled_dot_product_attention refuses an integer attn_mask, as PyTorch (a 0/1 keep mask was added as a bias);
    WeightedRandomSampler without replacement takes the zero-weight entries last (it raised); an RNN runs with the
    _flat_weights assigned to it (higher's fast weights); ctx.save_for_backward takes a sparse tensor (pyGAT);
    torch.functional and torch.nn._reduction import."""
    import importlib

    def run(L):
        q, k = L.ones(1, 1, 2, 4), L.ones(1, 1, 3, 4)
        try:
            L.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=L.ones(2, 3, dtype=L.long))
            out = ["accepted"]
        except RuntimeError:
            out = ["refused"]
        sampler = L.utils.data.WeightedRandomSampler([0.5, 0.0, 0.0, 1.0], 4, replacement=False)
        order = list(sampler)
        out += [sorted(order), sorted(order[:2])]
        lstm = L.nn.LSTM(3, 4, batch_first=True)
        lstm._flat_weights = [w * 0 for w in lstm._flat_weights]
        out.append(lstm(L.ones(1, 2, 3))[0].abs().sum().item())

        class SpMM(L.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return L.sparse.mm(a, b)

            @staticmethod
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                return None, L.sparse.mm(a.t(), g)
        a = L.sparse_coo_tensor(L.tensor([[0, 1, 2], [1, 0, 2]]), L.tensor([1.0, 2.0, 3.0]), (3, 3))
        b = L.ones(3, 2, requires_grad=True)
        SpMM.apply(a, b).sum().backward()
        out.append(b.grad.tolist())
        name = "torch" if L is torch else "gpumemnet"
        F = importlib.import_module(name + ".functional")
        R = importlib.import_module(name + ".nn._reduction")
        out += [F.einsum("ij->ji", L.ones(2, 3)).shape[0], R.get_enum("sum"), R.legacy_get_string(None, False, False)]
        return out
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, got = _both(run)
    assert got == ref


def test_sparse_requires_grad_and_addition_of_coalesced_tensors():
    """A sparse tensor's requires_grad_() leaves the values tensor the user passed as it was (it turned on its
    requires_grad); the sum of two coalesced sparse tensors is coalesced, its indices() and values() readable."""
    import warnings

    def run(L):
        i, v = L.tensor([[0, 1], [1, 0]]), L.tensor([1.0, 2.0])
        s = L.sparse_coo_tensor(i, v, (2, 2)).requires_grad_()
        a = L.sparse_coo_tensor(L.tensor([[0, 1]]), L.tensor([1.0, 2.0]), (3,)).coalesce()
        b = L.sparse_coo_tensor(L.tensor([[1, 2]]), L.tensor([3.0, 4.0]), (3,)).coalesce()
        c = a + b
        return [v.requires_grad, s.requires_grad, c.is_coalesced(), c.indices().tolist(), c.values().tolist(),
                (a - b).to_dense().tolist()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, got = _both(run)
    assert got == ref


@pytest.mark.parametrize("name", ["cyclic", "cosine_warm_restarts", "plateau", "sequential"])
def test_every_scheduler_fills_a_tensor_lr(name):
    """CyclicLR, CosineAnnealingWarmRestarts, ReduceLROnPlateau and SequentialLR keep a tensor lr the tensor and fill
    it, as PyTorch's (they replaced it with a float), and get_last_lr() holds copies."""
    def run(L):
        S = L.optim.lr_scheduler
        w = L.nn.Parameter(L.tensor([1.0, -2.0], dtype=L.float64))
        opt = L.optim.SGD([w], lr=L.tensor(0.1), momentum=0.9)
        lr = opt.param_groups[0]["lr"]
        sched = {"cyclic": lambda: S.CyclicLR(opt, 0.01, 0.1, step_size_up=2, cycle_momentum=False),
                 "cosine_warm_restarts": lambda: S.CosineAnnealingWarmRestarts(opt, 2),
                 "plateau": lambda: S.ReduceLROnPlateau(opt, patience=0),
                 "sequential": lambda: S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, total_iters=2),
                                                            S.ExponentialLR(opt, 0.9)], milestones=[2])}[name]()
        out = []
        for _ in range(4):
            opt.zero_grad()
            (w ** 2).sum().backward()
            opt.step()
            sched.step(1.0) if name == "plateau" else sched.step()
            out.append((opt.param_groups[0]["lr"] is lr, round(float(lr), 9),
                        [round(float(v), 9) for v in sched.get_last_lr()] if name != "plateau" else None))
        return out, [round(v, 10) for v in w.tolist()]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, got = _both(run)
    assert got == ref


def test_binomial_draws_have_the_binomial_moments():
    """torch.binomial's draws (the streams differ from PyTorch's, so their statistics are compared with the
    distribution's, from NumPy's closed forms): whole numbers in [0, count], mean n p and variance n p (1 - p) within
    five standard errors over 40,000 draws; a count of 0 draws 0; the dtype and device are count's."""
    gm.manual_seed(0)
    n, p = np.array([[10.0, 3.0], [0.0, 50.0]]), np.array([[0.5, 0.2], [0.7, 0.9]])
    draws = gm.binomial(gm.tensor(n).expand(20000, 2, 2).contiguous(), gm.tensor(p).expand(20000, 2, 2).contiguous())
    assert draws.dtype == gm.float64 and tuple(draws.shape) == (20000, 2, 2)
    d = draws.numpy()
    assert (d == np.round(d)).all() and (d >= 0).all() and (d <= n).all() and (d[:, 1, 0] == 0).all()
    mean, var = n * p, n * p * (1 - p)
    se = np.sqrt(np.where(var > 0, var, 1.0) / 20000)
    assert (np.abs(d.mean(0) - mean) < 5 * se).all()
    assert (np.abs(d.var(0) - var) < 0.05 * var + 1e-12).all()
