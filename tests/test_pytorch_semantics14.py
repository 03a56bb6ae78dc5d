"""PyTorch semantics, round 23 of the hunts: each test runs the same code under PyTorch and under gpumemnet."""
import collections

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet._serialization_torch_write import save as torch_format_save  # what torch.save is under the alias

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _np(t):
    return None if t is None else t.detach().double().numpy().tolist()


# ---- hooks on graph nodes -----------------------------------------------------------------------------------------
def test_node_hooks_run_in_pytorchs_order_with_pytorchs_arguments():
    """grad_fn.register_prehook / register_hook, and the same on a parameter's accumulator found as
    p.expand_as(p).grad_fn.next_functions[0][0] (DeepSpeed's and Horovod's way to hook a gradient): the tensor's
    hook, the node's pre-hook, the node, the post-accumulate hook, the node's post-hook, with PyTorch's arguments."""
    def run(L):
        seen = []
        p = L.nn.Parameter(L.tensor([1.0, 2.0, 3.0]))
        acc = p.expand_as(p).grad_fn.next_functions[0][0]
        acc.register_prehook(lambda go: seen.append(("acc pre", [_np(g) for g in go])))
        acc.register_hook(lambda gi, go: seen.append(("acc post", len(gi), [_np(g) for g in go])))
        p.register_post_accumulate_grad_hook(lambda t: seen.append(("post-acc", _np(t.grad))))
        y = p * p
        y.grad_fn.register_prehook(lambda go: seen.append(("mul pre", [_np(g) for g in go])))
        y.grad_fn.register_hook(lambda gi, go: seen.append(("mul post", [_np(g) for g in gi], [_np(g) for g in go])))
        y.register_hook(lambda g: seen.append(("tensor", _np(g))))
        (y * L.tensor([1.0, 10.0, 100.0])).sum().backward()
        return seen, acc is (p * 2).grad_fn.next_functions[0][0]

    want, got = _both(run)
    assert got == want


def test_node_hooks_replace_gradients_and_are_removable():
    def run(L):
        q = L.nn.Parameter(L.tensor([1.0, 2.0]))
        y = q * 3
        y.grad_fn.register_prehook(lambda go: (go[0] * 10,))
        handle = y.grad_fn.register_hook(lambda gi, go: (gi[0] + 1,) + tuple(gi[1:]))
        y.sum().backward(retain_graph=True)
        first = _np(q.grad)
        handle.remove()
        q.grad = None
        y.sum().backward(retain_graph=True)
        return first, _np(q.grad)

    want, got = _both(run)
    assert got == want == ([31.0, 31.0], [30.0, 30.0])


def test_node_hook_returning_the_wrong_count_is_a_runtime_error():
    def run(L):
        q = L.nn.Parameter(L.tensor([1.0, 2.0]))
        y = q.exp()

        def bad(gi, go):
            return (gi[0], gi[0], gi[0])
        y.grad_fn.register_hook(bad)
        with pytest.raises(RuntimeError, match=r"hook 'bad' has returned an incorrect number of values \(got 3, but "
                                               r"expected 1\)"):
            y.sum().backward()
        return True

    assert _both(run) == (True, True)


def test_node_metadata_is_a_dict_kept_on_the_node():
    def run(L):
        p = L.nn.Parameter(L.ones(2))
        y = p * 2
        y.grad_fn.metadata["tag"] = "mine"
        acc = y.grad_fn.next_functions[0][0]
        acc.metadata["k"] = 1
        return dict(y.grad_fn.metadata), dict(acc.metadata), dict((p * 3).grad_fn.metadata)

    want, got = _both(run)
    assert got == want


def test_increment_version_makes_saved_tensors_stale():
    """torch.autograd.graph.increment_version: a write autograd did not see (a kernel of one's own) is counted, and
    backward through a node that saved the tensor refuses it, as after an in-place op."""
    def run(L):
        x = L.ones(2, requires_grad=True)
        z = x.exp()
        before = z._version
        L.autograd.graph.increment_version(z)
        L.autograd.graph.increment_version([x.detach()])
        with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
            z.sum().backward()
        return before, z._version

    want, got = _both(run)
    assert got == want == (0, 1)


def test_disable_saved_tensors_hooks_refuses_them_inside_only():
    def run(L):
        graph = L.autograd.graph
        with graph.disable_saved_tensors_hooks("no packing here"):
            with pytest.raises(RuntimeError, match="no packing here"):
                with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        with graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t * 2):
            x = L.tensor([1.0, 2.0], requires_grad=True)
            (x * x).sum().backward()
        return _np(x.grad)

    want, got = _both(run)
    assert got == want


def test_node_names_are_pytorchs():
    """grad_fn.name() and the tensor's repr show PyTorch's names (AddBackward0), which logs and graph drawings
    (torchviz) show and some code compares."""
    def run(L):
        a = L.tensor([[1.0, -2.0, 3.0]], requires_grad=True)
        outs = [a + 1, a * a, a.exp(), a.sum(), a.mean(), a[0], a.view(3), a.clone(), L.relu(a), a.unsqueeze(0),
                L.cat([a, a]), L.nn.functional.softmax(a, 1), L.sigmoid(a), a.abs(), -a, a / 2, a ** 2]
        return [o.grad_fn.name() for o in outs], repr(a * 2)

    want, got = _both(run)
    assert got == want


# ---- indexing --------------------------------------------------------------------------------------------------
def test_zero_d_integer_tensor_index_is_an_int():
    """x[i] with i = argmax(...) (a 0-d integer tensor, or a 0-d NumPy array) selects as an int: a view, so writes
    through it reach x (d2l's anchor assignment), and a value of another dtype is cast, as basic indexing casts."""
    def run(L):
        x = L.arange(6.).reshape(2, 3)
        i = L.tensor(1)
        row = x[i]
        row += 10
        x[:, i].zero_()
        x[:, np.array(2)] = L.tensor([7, 8])  # int64 values into float32: cast
        g = L.arange(24., dtype=L.float64).reshape(2, 3, 4).requires_grad_()
        outs = [g[i], g[:, i], g[i, L.tensor([0, 1])], g[..., i], g[L.tensor(-1), i, i]]
        sum((o * o).sum() for o in outs).backward()
        return x.tolist(), [tuple(o.shape) for o in outs], _np(g.grad)

    want, got = _both(run)
    assert got == want


def test_write_into_a_view_whose_base_is_gone_reaches_the_other_views():
    """d2l's masked_softmax in additive attention: `scores = (f @ w.t()).squeeze(-1); X = scores.reshape(-1, n);
    X[~mask] = -1e6` while scores is still held (the matmul's result itself gone): the write is recorded, scores
    sees it, and the gradients are PyTorch's (it was refused)."""
    def run(L, case):
        w = L.tensor([[0.1, -0.2, 0.3, 0.4]], dtype=L.float64, requires_grad=True)
        feat = L.linspace(-1, 1, 24, dtype=L.float64).reshape(2, 3, 4)
        scores = (feat @ w.t()).squeeze(-1)
        col = scores[:, 0]
        X = scores.reshape(-1, 3)
        mask = L.arange(3)[None, :] < L.tensor([2, 1])[:, None]
        if case == 0:
            X[~mask] = -1e6
            loss = L.softmax(X, -1)[:, 0].sum() + (scores * 3).sum()
        elif case == 1:
            X[0] += 1
            X.t()[2].mul_(w[0, 0])
            loss = (scores * L.arange(6.).reshape(2, 3)).sum() + (col ** 2).sum()
        else:
            X[1, 0] = 7.0
            loss = (col * 2).sum() + X.sum()
        loss.backward()
        return _np(w.grad), _np(scores), _np(col)

    for case in range(3):
        want, got = run(torch, case), run(gm, case)
        for a, b in zip(got, want):  # (float64 matmul sums in another order: 1 ulp)
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-12)


def test_reversed_flips_dim_0():
    def run(L):
        x = L.arange(6.).reshape(3, 2)
        return _np(reversed(x)), _np(reversed(L.tensor(2.0))), [_np(r) for r in reversed(list(x))]

    want, got = _both(run)
    assert got == want


# ---- custom Functions ---------------------------------------------------------------------------------------------
def test_custom_function_gradient_is_cast_to_the_inputs_dtype():
    """PyTorch's engine casts a custom Function's returned gradient to its input's dtype: the documented AMP pattern
    custom_fwd(cast_inputs=torch.float32) after an autocast Linear crashed in the Linear's backward (a float32
    gradient for its bfloat16 output), and a float32 gradient reached a bfloat16 input unrounded."""
    def run(L):
        class Sq(L.autograd.Function):
            @staticmethod
            @L.amp.custom_fwd(device_type="cpu", cast_inputs=L.float32)
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return (x * x).sum()

            @staticmethod
            @L.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        class Scale(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.float() * 1.2345678

            @staticmethod
            def backward(ctx, g):
                return g * 1.2345678

        lin = L.nn.Linear(3, 2)
        with L.no_grad():
            lin.weight.copy_(L.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]))
            lin.bias.zero_()
        with L.autocast("cpu", dtype=L.bfloat16):
            Sq.apply(lin(L.tensor([[1.0, 2.0, 3.0]]))).backward()
        a = L.tensor([1.0, 2.0], requires_grad=True)
        seen = []
        ab = a.bfloat16()
        ab.register_hook(lambda g: seen.append((str(g.dtype).split(".")[-1], g.tolist())))
        Scale.apply(ab).sum().backward()
        return _np(lin.weight.grad), seen, _np(a.grad)

    want, got = _both(run)
    assert got[1:] == want[1:]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


# ---- layout, einsum ---------------------------------------------------------------------------------------------
def test_nonzero_is_column_major_as_pytorchs():
    """nonzero() / argwhere() have strides (1, n), so nonzero().t() is contiguous and .view(-1) works on it (PyG's
    edge_index = adj.nonzero().t()); an empty tensor is contiguous whatever its strides."""
    def run(L):
        out = []
        for a in [L.tensor([[0, 1, 1], [1, 0, 0]]), L.tensor([0, 3, 0, 2]), L.zeros(2, 3), L.tensor(5),
                  L.ones(2, 2, 2)]:
            n = a.nonzero()
            out.append((tuple(n.shape), n.stride(), L.argwhere(a).stride(), n.is_contiguous(), n.tolist(),
                        n.t().view(-1).tolist(), n._base is None))
        return out

    want, got = _both(run)
    assert got == want


def test_einsum_sublist_form_and_empty_contractions():
    def run(L):
        x = L.arange(6, dtype=L.float64).reshape(2, 3)
        y = L.arange(12, dtype=L.float64).reshape(3, 4)
        a, b = L.zeros(2, 0, dtype=L.float64), L.zeros(0, 3, dtype=L.float64)
        return (L.einsum(x, [0, 1], y, [1, 2], [0, 2]).tolist(), L.einsum(x, [Ellipsis, 1], [Ellipsis]).tolist(),
                L.einsum(x, [0, 1], y, [1, 2]).tolist(), L.einsum("ij,jk->ik", a, b).tolist(),
                L.einsum("bij,bjk->bik", a[None], b[None]).tolist(), L.einsum("i,i->", L.zeros(0), L.zeros(0)).item())

    want, got = _both(run)
    assert got == want


# ---- library entry points -----------------------------------------------------------------------------------------
def test_names_pyro_and_mlflow_use():
    """Tensor._cdata (pyro.module compares parameters by it), transform_to(positive_semidefinite),
    torch._standard_gamma_grad, torch.load with a pickle_module (mlflow's load_model: it unpickles everything)."""
    import io
    import pickle

    def run(L):
        t = L.nn.Parameter(L.zeros(2))
        psd = L.distributions.transform_to(L.distributions.constraints.positive_semidefinite)
        m = psd(L.tensor([[1.0, 0.0], [2.0, 3.0]], dtype=L.float64))
        a = L.tensor([0.5, 2.0, 7.0], dtype=L.float64)
        g = L._standard_gamma_grad(a, L.tensor([0.3, 1.7, 8.0], dtype=L.float64))
        buf = io.BytesIO()
        (L.save if L is torch else torch_format_save)(collections.OrderedDict(k=_Plain()), buf, pickle_module=pickle)
        buf.seek(0)
        loaded = L.load(buf, pickle_module=pickle)
        buf.seek(0)
        with pytest.raises(RuntimeError, match="explicit pickle_module"):
            L.load(buf, pickle_module=pickle, weights_only=True)
        return (isinstance(t._cdata, int), t._cdata == t._cdata, t.view(2)._cdata == t._cdata, type(psd).__name__,
                _np(m), _np(g), type(loaded["k"]).__name__)

    want, got = _both(run)
    assert got[:5] == want[:5] and got[6:] == want[6:]
    np.testing.assert_allclose(got[5], want[5], rtol=1e-4)  # (PyTorch approximates to 1e-4: gpumemnet's is exact)


class _Plain:
    pass


def test_adam_keeps_betas_as_pytorch_does():
    """Adam and AdamW make betas a tuple whatever sequence came (hydra's ListConfig in param_groups made the
    optimizer's state_dict unloadable with weights_only=True); NAdam, RAdam and Adamax keep what they were given."""
    def run(L):
        p = [L.nn.Parameter(L.ones(2))]
        return [repr(cls(p, betas=[0.9, 0.99]).defaults["betas"])
                for cls in (L.optim.Adam, L.optim.AdamW, L.optim.NAdam, L.optim.RAdam, L.optim.Adamax)]

    want, got = _both(run)
    assert got == want


# ---- autocast and float32 rounding --------------------------------------------------------------------------------
def test_autocast_promotes_index_copy_and_lowers_vecdot():
    """index_copy is on CPU autocast's promote list (a bfloat16 tensor and a float32 source: float32), linalg.vecdot
    on its lower-precision list (mixed inputs cast, not refused)."""
    def run(L):
        s, src = L.zeros(3, 2, dtype=L.bfloat16), L.full((2, 2), 1.5)
        a, b = L.ones(3, 4, dtype=L.bfloat16), L.ones(3, 4)
        with L.autocast("cpu", dtype=L.bfloat16):
            r = s.index_copy(0, L.tensor([0, 2]), src)
            v = L.linalg.vecdot(a, b)
        return str(r.dtype).split(".")[-1], r.tolist(), str(v.dtype).split(".")[-1], v.tolist()

    want, got = _both(run)
    assert got == want


def test_float32_tanh_saturates_to_one_as_pytorchs():
    """tanh(9.1) rounds to 1.0 in float32 (its distance from 1 is under half an ulp), so atanh(tanh(x)) is inf as
    in PyTorch (SAC-style squashing code clamps after it); below the threshold both stay under 1."""
    def run(L):
        t = L.tanh(L.tensor([9.0, 9.1, 9.5, 12.0, -9.1, -20.0]))
        return t.tolist(), L.atanh(t[1:4]).tolist()

    want, got = _both(run)
    assert got[1] == want[1] and got[0][1:] == want[0][1:]
    assert abs(got[0][0] - want[0][0]) <= 6e-8  # (1 ulp below 1: libm's and PyTorch's may differ there)


def test_autocast_float32_list_takes_polar_view_as_complex_cholesky_inverse_lu_solve():
    def run(L):
        b = lambda t: t.to(L.bfloat16)  # noqa: E731
        out = []
        with L.autocast("cpu", dtype=L.bfloat16):
            out.append(str(L.polar(b(L.ones(3)), L.zeros(3)).dtype).split(".")[-1])
            out.append(str(L.view_as_complex(b(L.ones(3, 2))).dtype).split(".")[-1])
            out.append(L.cholesky_inverse(b(L.eye(3) * 2)).tolist())
            out.append(L.lu_solve(b(L.ones(3, 1)), b(L.eye(3)), L.arange(1, 4, dtype=L.int32)).tolist())
        with pytest.raises(NotImplementedError):
            L.polar(b(L.ones(3)), b(L.ones(3)))  # bfloat16 outside autocast: no kernel
        return out

    want, got = _both(run)
    assert got == want


def test_set_takes_a_storage_and_the_qr_names():
    """Tensor.set_(storage, offset, size, stride) shares the storage's memory; torch.conv_tbc (fairseq's ConvTBC),
    torch.orgqr and torch.ormqr (geqrf's Q applied) agree with PyTorch."""
    rng = np.random.default_rng(0)
    x_np, w_np, b_np = rng.standard_normal((5, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    a_np, c_np, d_np = rng.standard_normal((5, 3)), rng.standard_normal((5, 2)), rng.standard_normal((2, 5))

    def run(L):
        x = L.arange(10.)
        y = L.empty(0).set_(x.untyped_storage(), 2, (2, 3), (1, 2))
        z = L.empty(0).set_(x.untyped_storage(), 1, (3,))
        z[0] = 100
        tbc = L.conv_tbc(L.tensor(x_np), L.tensor(w_np), L.tensor(b_np), 1)
        a, tau = L.tensor(a_np), L.tensor([1.2, 0.7, 1.5], dtype=L.float64)
        qs = [L.ormqr(a, tau, L.tensor(c_np if left else d_np), left=left, transpose=tr)
              for left in (True, False) for tr in (False, True)]
        return y.tolist(), x.tolist(), _np(tbc), _np(L.orgqr(a, tau)), [_np(q) for q in qs]

    want, got = _both(run)
    assert got[:2] == want[:2]
    for a, b in zip(got[2:4] + tuple(got[4]), want[2:4] + tuple(want[4])):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-10, atol=1e-12)


# ---- type promotion -------------------------------------------------------------------------------------------------
def test_ipow_is_in_place():
    def run(L):
        x = L.tensor([1.5, 2.0])
        alias, view = x, x[:1]
        x **= 2
        i = L.tensor([2, 3])
        i **= 2
        return alias.tolist(), view.tolist(), x is alias, i.tolist()

    want, got = _both(run)
    assert got == want


def test_a_number_first_promotes_as_a_number():
    """torch.add / mul / sub / div with a Python number or NumPy scalar first: the number promotes as a number (it
    was made a 0-d tensor of its own dtype: float64 for a NumPy float, float32 beside a half 0-d tensor), and alpha
    scales in the result's dtype (a uint8 tensor times 2 wrapped before it was added to 2.5)."""
    def run(L):
        i, u = L.tensor([1, 2, 3]), L.tensor([5, 253, 7], dtype=L.uint8)
        s = np.float64(2.5)
        h, k = L.tensor(3.0, dtype=L.float16), L.tensor(5, dtype=L.int8)
        out = [L.add(s, i), L.mul(s, i), L.div(s, i), L.add(s, u, alpha=2), L.add(2.5, h), L.div(2.5, h),
               L.sub(3, k), L.mul(-2, L.tensor(5, dtype=L.uint8)), L.add(2, i, alpha=3)]
        return [(str(o.dtype).split(".")[-1], o.tolist()) for o in out]

    want, got = _both(run)
    assert got == want


def test_reductions_honour_dtype_and_integer_matmul():
    def run(L):
        b, u = L.tensor([True, False, True]), L.tensor([5, 253, 7], dtype=L.uint8)
        out = [L.prod(u, dtype=L.int32), L.nansum(u, dtype=L.int32), L.prod(b, dtype=L.bool), L.nansum(b, dtype=L.bool),
               L.tensor([1.5, 2.7]).sum(dtype=L.int64)]
        for dt in (L.int8, L.uint8, L.int16, L.int32):
            a = L.tensor([[100, 120], [90, 127]], dtype=dt)
            out += [a @ a, L.mm(a, a), a[0] @ a[1]]
        return [(str(o.dtype).split(".")[-1], o.tolist()) for o in out]

    want, got = _both(run)
    assert got == want


def test_shifts_out_of_range_and_the_sign_of_a_zero_floor_quotient():
    def run(L):
        u, i = L.tensor([5, 253, 7], dtype=L.uint8), L.tensor([-5, 100, 7], dtype=L.int8)
        x, y = L.tensor([-1.75, -0.5, 1.0]), L.tensor([-3.0, 2.0, -4.0])
        r = L.floor_divide(x, y)
        return ((u >> u).tolist(), (i >> L.tensor([9, 9, 1], dtype=L.int8)).tolist(),
                (u >> L.tensor([8, 200, 1], dtype=L.uint8)).tolist(), r.tolist(), L.signbit(r).tolist(),
                L.signbit(x // -2).tolist(), L.signbit(L.div(x, y, rounding_mode="floor")).tolist())

    want, got = _both(run)
    assert got == want


# ---- graph fuzzing (round 23b) ---------------------------------------------------------------------------------------
def test_a_leaf_frozen_after_the_forward_takes_no_gradient():
    """requires_grad_(False) or detach_() on a leaf after its forward (a GAN freezing D after D's forward): PyTorch's
    accumulator leaves .grad alone, and the leaf's post-accumulate hooks do not run."""
    def run(L):
        out = []
        for how in ("detach_", "requires_grad_"):
            w = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
            x = L.tensor([3.0, 4.0], dtype=L.float64, requires_grad=True)
            seen = []
            w.register_post_accumulate_grad_hook(lambda t: seen.append(1))
            loss = (w * x).sum()
            w.detach_() if how == "detach_" else w.requires_grad_(False)
            loss.backward()
            out.append((w.grad is None, x.grad.tolist(), seen))
        return out

    want, got = _both(run)
    assert got == want


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_refuses_an_input_written_after_it(reentrant):
    """The segment would be recomputed from the new values: silently wrong gradients ([3, -6, 12] for 2x = [1, -2,
    4]); PyTorch's checkpoint, which saves its inputs, refuses."""
    def run(L):
        x = L.tensor([0.5, -1.0, 2.0], dtype=L.float64, requires_grad=True)
        a = x * 1.0
        y = L.utils.checkpoint.checkpoint(lambda t: t * t, a, use_reentrant=reentrant)
        a.mul_(3)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
        return True

    assert _both(run) == (True, True)


def test_double_backward_through_an_in_place_write_into_a_view():
    """A gradient penalty through `(x @ W.t()).view(...)` then ReLU(inplace=True): the re-derived view had no
    recorded backward (NotImplementedError under create_graph=True)."""
    rng = np.random.default_rng(0)
    w1_np, w2_np, x_np = rng.standard_normal((6, 4)), rng.standard_normal((1, 6)), rng.standard_normal((5, 4))

    def run(L):
        w1, w2 = L.tensor(w1_np, requires_grad=True), L.tensor(w2_np, requires_grad=True)
        x = L.tensor(x_np, requires_grad=True)
        h = (x @ w1.t()).view(5, 2, 3)
        h.relu_()
        e = h[:, :1].expand(5, 3, 3)
        out = h.view(5, 6) @ w2.t() + (e * e).sum((1, 2), keepdim=True)
        g, = L.autograd.grad(out.sum(), x, create_graph=True)
        ((g.norm(2, dim=1) - 1) ** 2).mean().backward()
        return _np(w1.grad), _np(w2.grad)

    want, got = _both(run)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_a_node_hook_may_answer_for_the_tensor_inputs_only():
    """A node here has a slot for each argument of its op (x.sum(1) is given (g, None, None, None) where PyTorch
    gives (g,)): a hook answering (g * 3,) is taken, the rest None."""
    def run(L):
        out = []
        for f in (lambda t: t.clamp(0, 1), L.relu, lambda t: t.sum(0), lambda t: t.view(3, 1)):
            x = L.tensor([0.5, 2.0, -1.0], dtype=L.float64, requires_grad=True)
            y = f(x * 1.0)
            y.grad_fn.register_hook(lambda gi, go: (gi[0] * 3,))
            y.sum().backward()
            out.append(x.grad.tolist())
        return out

    want, got = _both(run)
    assert got == want


def test_a_subclass_repr_names_its_class():
    """PyTorch's repr of a Tensor subclass begins with the class's name (torchvision's tv_tensors build theirs on it:
    BoundingBoxes([...], format=..., canvas_size=...)); tensor_contents replaces the values' text."""
    def run(L):
        class MyT(L.Tensor):
            pass
        t = L.ones(2).as_subclass(MyT)
        return repr(t), repr(L.zeros(2, 2).as_subclass(MyT)), t.__repr__(tensor_contents="..."), repr(L.ones(2))

    want, got = _both(run)
    assert got == want


def test_in_place_write_into_a_view_of_an_output_its_op_saved():
    """pow / elu / leaky_relu keep their output for backward here where PyTorch's keep the input: a write through a
    view of that output (`F.elu(x).flatten(1)` then ReLU(inplace=True)) made backward refuse the changed output; the
    op now keeps a copy first, as for a write into the output itself."""
    F = None

    def run(L):
        nonlocal F
        F = L.nn.functional
        out = []
        for f in (lambda z: z[1:].mul_(3), lambda z: z.view(3, 1).mul_(3), lambda z: z.view(1, 3).diagonal().fill_(0),
                  lambda z: F.relu(z.view(3, 1), inplace=True)):
            for op in (lambda x: x.pow(2), F.elu, lambda x: F.leaky_relu(x, 0.1)):
                x = L.tensor([1.0, -2.0, 3.0], dtype=L.float64, requires_grad=True)
                z = op(x)
                f(z)
                z.sum().backward()
                out.append(x.grad.tolist())
        return out

    want, got = _both(run)
    assert got == want
