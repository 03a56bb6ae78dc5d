"""Semantics that PyTorch code relies on, checked against PyTorch itself (stop 37's hunts through d2l.ai, fast.ai's
course, volumetric code and a conformance sweep of the tensor API): CPU autocast's dtype policy, empty dim lists,
arange over tensors, 0-d sorts, contiguous results, comparisons with None, dtype=float, in-place writes into
activation outputs and into views."""
import numpy as np
import pytest

import gpumemnet as gm
from nnops_util import cuda_autocast

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


# ---- CPU autocast: PyTorch's CPU lists, not its CUDA ones ------------------------------------------------------
_X = np.random.default_rng(0).standard_normal((4, 6))
_X4 = np.random.default_rng(1).standard_normal((2, 4, 3, 3))
_T = np.array([0, 5, 2, 3])
AUTOCAST_OPS = {
    # follow their input on the CPU (PyTorch's CUDA autocast widens them)
    "softmax": lambda L, x, x4, t: L.nn.functional.softmax(x, -1),
    "log_softmax": lambda L, x, x4, t: L.nn.functional.log_softmax(x, -1),
    "softplus": lambda L, x, x4, t: L.nn.functional.softplus(x),
    "layer_norm": lambda L, x, x4, t: L.nn.functional.layer_norm(x, (6,)),
    "group_norm": lambda L, x, x4, t: L.nn.functional.group_norm(x4, 2),
    "exp": lambda L, x, x4, t: x.exp(),
    "log": lambda L, x, x4, t: x.abs().log(),
    "sum": lambda L, x, x4, t: x.sum(),
    "mean": lambda L, x, x4, t: x.mean(),
    "var": lambda L, x, x4, t: x.var(),
    "norm": lambda L, x, x4, t: x.norm(),
    "logsumexp": lambda L, x, x4, t: x.logsumexp(-1),
    "reciprocal": lambda L, x, x4, t: x.reciprocal(),
    "cosine_similarity": lambda L, x, x4, t: L.nn.functional.cosine_similarity(x, x),
    # float32 on both devices
    "prod": lambda L, x, x4, t: x.prod(),
    "cross_entropy": lambda L, x, x4, t: L.nn.functional.cross_entropy(x, t),
    "mse_loss": lambda L, x, x4, t: L.nn.functional.mse_loss(x, x * 0.5),
    "triplet_margin_loss": lambda L, x, x4, t: L.nn.functional.triplet_margin_loss(x, x * 0.5, x * 2),
    "margin_ranking_loss": lambda L, x, x4, t: L.nn.functional.margin_ranking_loss(x[0], x[1], x[2].sign()),
    "cosine_embedding_loss": lambda L, x, x4, t: L.nn.functional.cosine_embedding_loss(x, x * 2, x[:, 0].sign()),
    "poisson_nll_loss": lambda L, x, x4, t: L.nn.functional.poisson_nll_loss(x, x.abs()),
    "multi_margin_loss": lambda L, x, x4, t: L.nn.functional.multi_margin_loss(x, t),
    "cdist": lambda L, x, x4, t: L.cdist(x, x),
    "trace": lambda L, x, x4, t: x[:, :4].trace(),
    # lowered
    "matmul": lambda L, x, x4, t: x @ x.t(),
    "linear": lambda L, x, x4, t: L.nn.functional.linear(x.float(), x.float()),
    # composed of other ops, on neither list
    "gaussian_nll_loss": lambda L, x, x4, t: L.nn.functional.gaussian_nll_loss(x, x * 2, x.abs() + 1),
}


@pytest.mark.parametrize("name", sorted(AUTOCAST_OPS))
def test_cpu_autocast_result_dtypes_match_pytorch(name):
    def run(L):
        x, x4, t = (L.tensor(a).to(L.bfloat16) for a in (_X, _X4)), None, L.tensor(_T)
        x, x4 = list(x)
        with L.autocast("cpu", dtype=L.bfloat16):
            return str(AUTOCAST_OPS[name](L, x, x4, t).dtype).split(".")[-1]
    ref, got = _both(run)
    assert got == ref, f"{name}: {got} under CPU autocast, PyTorch {ref}"


def test_cuda_autocast_policy_still_widens_softmax_and_layer_norm():
    x = gm.ones(4, 6, dtype=gm.bfloat16, device="meta")
    with cuda_autocast(dtype=gm.bfloat16):
        assert gm.nn.functional.softmax(x, -1).dtype == gm.float32
        assert gm.nn.functional.layer_norm(x, (6,)).dtype == gm.float32
        assert x.sum().dtype == gm.float32


def test_cdist_under_autocast_is_float32_throughout():
    a = np.random.default_rng(2).standard_normal((30, 5))
    ref = np.sqrt(((a[:, None] - a[None]) ** 2).sum(-1))
    with gm.autocast("cpu"):
        got = gm.cdist(gm.tensor(a, dtype=gm.float32), gm.tensor(a, dtype=gm.float32))
    assert got.dtype == gm.float32
    off = ~np.eye(30, dtype=bool)  # the diagonal is sqrt(rounding error) in PyTorch's product form too
    np.testing.assert_allclose(_np(got)[off], ref[off], rtol=1e-5)  # bfloat16 products would be off by ~1e-2


# ---- reductions, arange, sorting, layouts -----------------------------------------------------------------------
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "var", "std", "nansum", "norm", "count_nonzero"])
@pytest.mark.parametrize("dims", [(), []])
def test_empty_dim_list_reduces_every_dim(op, dims):
    ref, got = _both(lambda L: getattr(L, op)(L.arange(6.0).reshape(2, 3), dim=dims))
    assert tuple(got.shape) == tuple(ref.shape) == ()
    np.testing.assert_allclose(_np(got), _np(ref), rtol=1e-6)


def test_empty_dim_list_gradient():
    x = gm.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    x.sum(dim=()).backward()
    np.testing.assert_array_equal(_np(x.grad), np.ones((2, 3)))


def test_arange_of_integer_tensors_is_int64():
    def run(L):
        n = L.tensor(3)
        return [str(r.dtype).split(".")[-1] for r in (L.arange(n), L.arange(0, n), L.arange(end=4),
                                                      L.arange(L.tensor(2.5)), L.arange(1, 4, L.tensor(1)))]
    ref, got = _both(run)
    assert got == ref
    assert gm.arange(end=4).tolist() == [0, 1, 2, 3]


def test_zero_dim_sorts_and_searches_keep_zero_dims():
    def run(L):
        z = L.tensor(3.5)
        seq = L.tensor([1.0, 3.0, 5.0])
        return [tuple(r.shape) for r in (z.sort().values, z.sort().indices, z.argsort(), z.topk(1).values,
                                         z.cummax(0).indices, L.searchsorted(seq, L.tensor(4.0)),
                                         L.searchsorted(seq, 4.0), L.bucketize(L.tensor(2.0), seq))]
    ref, got = _both(run)
    assert got == ref


@pytest.mark.parametrize("case", ["sort0", "msort", "cummax1", "topk1", "mixed_index", "sort_grad"])
def test_results_are_contiguous_so_view_works(case):
    def run(L):
        x = L.tensor(np.random.default_rng(3).standard_normal((2, 3, 4)), requires_grad=(case == "sort_grad"))
        r = {"sort0": lambda: x.sort(0).values, "msort": lambda: x.msort(), "cummax1": lambda: x.cummax(1).values,
             "topk1": lambda: x.topk(2, dim=1).values, "mixed_index": lambda: x[:, [0, 2], [1, 3]],
             "sort_grad": lambda: x.sort(1).values}[case]()
        flat = r.view(-1)
        if case == "sort_grad":
            (flat * L.arange(flat.numel(), dtype=flat.dtype)).sum().backward()
            return _np(flat), _np(x.grad)
        return _np(flat), None
    (ref, gref), (got, ggot) = _both(run)
    np.testing.assert_array_equal(got, ref)
    if gref is not None:
        np.testing.assert_array_equal(ggot, gref)


def test_comparison_with_none_or_a_list_is_identity():
    def run(L):
        t = L.tensor([1, 2])
        return t == None, t != None, t == [1, 2], t != "a"  # noqa: E711  (what the scripts write)
    ref, got = _both(run)
    assert got == ref == (False, True, False, True)
    with pytest.raises(TypeError):
        gm.eq(gm.tensor([1, 2]), None)


def test_python_float_dtype_is_float64():
    def run(L):
        return [str(t.dtype).split(".")[-1] for t in (L.zeros(2, dtype=float), L.tensor([0.1], dtype=float),
                                                      L.ones(2).to(float), L.arange(3, dtype=float),
                                                      L.ones(2).sum(dtype=float))]
    ref, got = _both(run)
    assert got == ref == ["float64"] * 5
    assert gm.tensor([0.1], dtype=float).item() == 0.1


# ---- in-place writes into activation outputs and into views -----------------------------------------------------
_WRITES = {"isub": lambda y: y.__isub__(0.4), "mul_": lambda y: y.mul_(3.0),
           "setitem": lambda y: y.__setitem__(1, 7.0), "clamp_": lambda y: y.clamp_(max=0.5)}
_MAKERS = {"leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.1), "elu": lambda L, x: L.nn.functional.elu(x),
           "hardtanh": lambda L, x: L.nn.functional.hardtanh(x), "gelu": lambda L, x: L.nn.functional.gelu(x),
           "square": lambda L, x: x ** 2, "rdiv": lambda L, x: 2 / (x + 5),
           "normalize": lambda L, x: L.nn.functional.normalize(x, dim=0),
           "relu": lambda L, x: L.relu(x), "sigmoid": lambda L, x: L.sigmoid(x), "exp": lambda L, x: x.exp()}


@pytest.mark.parametrize("write", sorted(_WRITES))
@pytest.mark.parametrize("maker", sorted(_MAKERS))
def test_writing_into_an_op_output_before_backward(maker, write):
    """fastai's GeneralRelu (`x = F.leaky_relu(x, a); x -= sub`): allowed where PyTorch's op saves its input, with
    its gradients; refused at backward where PyTorch's saves its result (relu, sigmoid, exp), as PyTorch's is."""
    def run(L):
        x = L.tensor([-1.5, -0.2, 0.3, 2.0, 0.7], dtype=L.float64, requires_grad=True)
        y = _MAKERS[maker](L, x)
        _WRITES[write](y)
        try:
            (y * L.arange(5.0, dtype=L.float64)).sum().backward()
        except RuntimeError:
            return "raises"
        return _np(x.grad)
    ref, got = _both(run)
    if isinstance(ref, str) or isinstance(got, str):
        assert got == ref
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-7)  # PyTorch's hardsigmoid-like constants: float32


_ACTS = {"ReLU": lambda nn: nn.ReLU(True), "LeakyReLU": lambda nn: nn.LeakyReLU(0.1, True),
         "ELU": lambda nn: nn.ELU(1.0, True), "ReLU6": lambda nn: nn.ReLU6(True), "SiLU": lambda nn: nn.SiLU(True),
         "Hardswish": lambda nn: nn.Hardswish(True), "Mish": lambda nn: nn.Mish(True),
         "CELU": lambda nn: nn.CELU(0.7, True), "SELU": lambda nn: nn.SELU(True),
         "Threshold": lambda nn: nn.Threshold(0.25, -3.0, True)}


@pytest.mark.parametrize("form", ["plain", "reshape", "slice", "transpose"])
@pytest.mark.parametrize("act", sorted(_ACTS))
def test_inplace_activation_layers_write_into_their_input(act, form):
    """d2l's `nn.ReLU(inplace=True)(y)` with the result not re-bound: y itself changes, on a view of a tensor in a
    graph too, and the gradients are PyTorch's."""
    x0 = np.array([[-1.5, -0.2, 0.3, 2.0], [0.7, -3.0, 1.1, 0.0]])

    def run(L):
        w = L.tensor(x0, requires_grad=True)
        b = w * 1.5
        y = {"plain": lambda: b, "reshape": lambda: b.reshape(-1), "slice": lambda: b[:, 1:],
             "transpose": lambda: b.t()}[form]()
        r = _ACTS[act](L.nn)(y)
        ((b * b).sum() + (y * L.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum()).backward()
        return _np(y), _np(b), _np(w.grad), r is y
    ref, got = _both(run)
    for g, r in zip(got[:3], ref[:3]):
        np.testing.assert_allclose(g, r, rtol=1e-7, atol=1e-9)
    assert got[3] == ref[3]


# ---- from_numpy / as_tensor share the array's memory -------------------------------------------------------------
def test_from_numpy_shares_memory_both_ways():
    a = np.zeros((3, 4), dtype=np.float32)
    t = gm.from_numpy(a)
    a[0, 1] = 5.0
    t[2, 3] = 7.0
    assert t[0, 1].item() == 5.0 and a[2, 3] == 7.0
    t.add_(1.0)
    assert a.sum() == 12 + 12.0
    assert np.shares_memory(t.numpy(), a)
    v = gm.from_numpy(a[:, ::2])  # positive strides, whole elements: shared, with the array's strides
    assert v.stride() == (4, 2) and v.tolist() == a[:, ::2].tolist()
    v.zero_()
    assert (a[:, ::2] == 0).all() and (a[:, 1::2] != 0).all()


def test_shared_tensor_keeps_the_array_alive_and_is_not_counted():
    before = gm.memory.memory_allocated("cpu")
    t = gm.from_numpy(np.arange(1000, dtype=np.float64))
    assert gm.memory.memory_allocated("cpu") == before  # NumPy's bytes, not the allocator's
    import gc
    gc.collect()
    assert t[999].item() == 999.0 and float(t.sum()) == 999 * 1000 / 2


@pytest.mark.parametrize("kind", ["readonly", "negative_strides", "uint16", "swapped"])
def test_from_numpy_copies_where_it_cannot_share(kind):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = {"readonly": lambda: np.frombuffer(a.tobytes(), dtype=np.float32).reshape(2, 3),
         "negative_strides": lambda: a[:, ::-1], "uint16": lambda: a.astype(np.uint16),
         "swapped": lambda: a.astype(">f4")}[kind]()
    t = gm.from_numpy(a)
    np.testing.assert_array_equal(t.numpy(), a)
    assert not np.shares_memory(t.numpy(), a)
    t.add_(1)  # a copy takes the write (a read-only buffer is never written)
    np.testing.assert_array_equal(t.numpy(), a + 1)


def test_as_tensor_shares_when_dtype_fits_and_gradients_flow():
    a = np.ones(3)
    t = gm.as_tensor(a)
    t[0] = 4.0
    assert a[0] == 4.0
    c = gm.as_tensor(a, dtype=gm.float32)  # another dtype: a copy
    c[1] = 9.0
    assert a[1] == 1.0
    w = gm.from_numpy(np.array([1.0, 2.0])).requires_grad_()
    (w * w).sum().backward()
    assert w.grad.tolist() == [2.0, 4.0]


# ---- optimizers: PyTorch's step and param-group forms -------------------------------------------------------------
@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                  "ASGD", "Rprop", "SGD"])
def test_optimizer_step_and_group_keys_read_as_in_pytorch(name):
    def run(L):
        p = L.nn.Parameter(L.ones(3))
        opt = getattr(L.optim, name)([p], lr=0.1)
        for _ in range(2):
            p.grad = L.ones(3)
            opt.step()
        keys = sorted(k for k in opt.param_groups[0] if k != "params")
        st = opt.state[p].get("step")
        saved = opt.state_dict()["state"][0].get("step") if opt.state_dict()["state"] else None
        return keys, (st.item(), int(st)) if st is not None else None, \
            (str(saved.dtype).split(".")[-1], saved.item()) if saved is not None else None
    ref, got = _both(run)
    assert got == ref


def test_adam_decoupled_weight_decay_is_adamw():
    def run(L, **kw):
        p = L.nn.Parameter(L.tensor([1.0, -2.0, 3.0], dtype=L.float64))
        opt = (L.optim.AdamW if kw.pop("adamw", False) else L.optim.Adam)([p], lr=0.1, weight_decay=0.1, **kw)
        for _ in range(3):
            p.grad = p.detach() * 0.5
            opt.step()
        return _np(p)
    for kw in ({}, {"decoupled_weight_decay": True}):
        np.testing.assert_allclose(run(gm, **kw), run(torch, **kw), rtol=1e-12)
    np.testing.assert_allclose(run(gm, decoupled_weight_decay=True), run(gm, adamw=True), rtol=0)


# ---- padding, sampling, masks ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("pads", [(0, 0, 0, 1, 0, 2, 0, 1), (1, 1, 1, 1, 1, 1, 2, 0), (0, 0, 0, 0, 0, 0, -1, 1),
                                  (1, 0, 0, 0, 0, 0, 1, 1, 1, 0)])
def test_constant_pad_of_more_than_three_dims(pads):
    """torchvision's Swin3D pads four dims of a 5-D input."""
    x0 = np.random.default_rng(4).standard_normal((2, 3, 4, 5, 3))

    def run(L):
        x = L.tensor(x0, requires_grad=True)
        y = L.nn.functional.pad(x, pads, value=0.5)
        (y * L.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        return _np(y), _np(x.grad)
    (y_ref, g_ref), (y, g) = _both(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(g, g_ref)


def test_grid_sample_under_cpu_autocast_widens_its_operands():
    def run(L):
        x = L.tensor(np.arange(16.0).reshape(1, 1, 4, 4)).to(L.bfloat16)
        grid = L.tensor([[[[0.1, -0.3], [0.5, 0.5]]]], dtype=L.float32)
        with L.autocast("cpu", dtype=L.bfloat16):
            out = L.nn.functional.grid_sample(x, grid, align_corners=False)
        return str(out.dtype).split(".")[-1], _np(out.float())
    (dt_ref, v_ref), (dt, v) = _both(run)
    assert dt == dt_ref
    np.testing.assert_allclose(v, v_ref, rtol=1e-6)


def test_mask_assignment_into_a_view_that_cannot_be_flattened():
    """PointNet++'s query_ball_point: group_idx = sorted(...)[:, :, :k]; group_idx[mask] = group_first[mask]."""
    def run(L):
        g = L.arange(24).view(2, 3, 4)[:, :, :2]
        mask = g % 3 == 0
        g[mask] = L.full_like(g, -1)[mask]
        h = L.arange(24).view(2, 3, 4).transpose(0, 2)
        h[h > 10] += 1
        return _np(g), _np(h)
    ref, got = _both(run)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)


# ---- tensors as scripts use them ------------------------------------------------------------------------------------
def test_tensors_and_parameters_take_attributes():
    """Informer's `pe.require_grad = False`, fastai's `p.grad_avg`, `p.no_weight_decay = True`."""
    import copy
    pe = gm.zeros(10, 4).float()
    pe.require_grad = False
    p = gm.nn.Parameter(gm.zeros(3))
    p.no_weight_decay = True
    q = copy.deepcopy(p)
    assert pe.require_grad is False and p.no_weight_decay and q.no_weight_decay and not pe.requires_grad


def test_array_like_objects_keep_their_numpy_dtype():
    """A pandas Series of float64 is read through __array__ (PyTorch's path), not as a list of Python floats."""
    class Series:
        def __init__(self, values):
            self.values = np.asarray(values)

        def __array__(self, dtype=None, copy=None):
            return self.values if dtype is None else self.values.astype(dtype)

        def __len__(self):
            return len(self.values)

        def __getitem__(self, i):
            return self.values[i]
    s = Series([0.1, 1.0 + 1e-9, 123456789.123])
    t = gm.tensor(s)
    assert t.dtype == gm.float64 and t[1].item() - 1.0 == pytest.approx(1e-9, rel=1e-6)
    assert gm.as_tensor(s).dtype == gm.float64 and gm.FloatTensor(s).dtype == gm.float32
    assert gm.ones(2).new(np.array([0.5, 0.25])).tolist() == [0.5, 0.25]


def test_complex_results_take_python_operators():
    """TimesNet's period finding: abs(torch.fft.rfft(x, dim=1))."""
    def run(L):
        xf = L.fft.rfft(L.tensor([[1.0, 2.0, 0.5, -1.0, 3.0]]), dim=1)
        ys = xf.clone()
        ys.mul_(2)
        ys += xf
        return _np(abs(xf)), _np(ys.abs()), _np((+xf).abs())
    ref, got = _both(run)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_dtype_mismatch_in_layers_is_a_runtime_error():
    for layer, x in ((gm.nn.Linear(3, 2), gm.zeros(4, 3, dtype=gm.float64)),
                     (gm.nn.Conv1d(3, 2, 1), gm.zeros(1, 3, 4, dtype=gm.float64))):
        with pytest.raises(RuntimeError, match="dtype"):
            layer(x)


def test_bce_with_logits_takes_integer_and_bool_weights():
    """d2l's word2vec passes its 0/1 mask as weight."""
    def run(L):
        pred = L.tensor([[1.1, -2.2, 3.3, -4.4], [0.5, 0.2, -0.7, 1.0]])
        label = L.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
        mask = L.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
        f = L.nn.functional.binary_cross_entropy_with_logits
        return [_np(f(pred, label, weight=w, reduction="none")) for w in (mask, mask.bool())] + \
            [_np(f(pred, label, pos_weight=L.tensor([1, 2, 3, 4])))]
    ref, got = _both(run)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # PyTorch's log1p(exp(-4.4)) is 1e-5 off in float32


def test_estimate_leaves_the_random_generators_alone():
    """`gpumemnet run` estimates a model before it trains: the meta replay of a forward that draws (noise
    injection, ProbSparse sampling, np.random augmentation) must not move the generators."""
    import random
    from gpumemnet.memory import estimate

    class Noisy(gm.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = gm.nn.Linear(8, 8)

        def forward(self, x):
            noise = gm.randn(x.shape[0], 8, device=x.device) * float(np.random.uniform(0.5, 1.5)) * random.random()
            return (self.l(x) + noise)[:, gm.randint(0, 8, (4,), device=x.device)] * gm.rand(1, device=x.device)
    gm.manual_seed(0)
    np.random.seed(1)
    random.seed(2)
    states = (gm.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    estimate(Noisy(), (4, 8))
    after = (gm.get_rng_state(), np.random.get_state()[1], random.getstate())
    gm.manual_seed(0)
    gm.nn.Linear(8, 8)  # the model's own initialisation draws: the same in both
    assert gm.equal(after[0], gm.get_rng_state())
    np.testing.assert_array_equal(after[1], states[1])
    assert after[2] == states[2]


@pytest.mark.parametrize("write", ["leaky_relu_", "mul_", "relu_", "setitem", "twice"])
def test_retain_grad_follows_in_place_writes(write):
    """PyTorch moves retain_grad to the tensor's new version; hooks registered with register_hook stay with the
    version they were registered on."""
    def run(L):
        x = L.tensor([-1.0, 2.0, 0.5], dtype=L.float64, requires_grad=True)
        h = x * 1.5
        h.retain_grad()
        seen = []
        h.register_hook(lambda g: seen.append(_np(g).copy()))
        if write == "leaky_relu_":
            L.nn.functional.leaky_relu(h, 0.2, inplace=True)
        elif write == "mul_":
            h.mul_(3.0)
        elif write == "relu_":
            h.relu_()
        elif write == "setitem":
            h[0] = 4.0
        else:
            h.mul_(2.0)
            h.add_(1.0)
        (h * L.tensor([3.0, 5.0, 7.0], dtype=L.float64)).sum().backward()
        return _np(h.grad), _np(x.grad), seen[0]
    ref, got = _both(run)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_sign_of_nan_is_zero(dtype):
    def run(L):
        x = L.tensor([float("nan"), -2.0, 0.0, 3.0, float("inf")]).to(getattr(L, dtype))
        return L.sign(x).float().tolist(), L.sgn(x).float().tolist()
    ref, got = _both(run)
    assert got == ref


def test_small_tensor_api_forms():
    """movedim with tuples, any/all of uint8, integer sum dtypes, quantile of rows holding NaN, .real/.imag."""
    def run(L):
        x = L.arange(24.0).reshape(2, 3, 4)
        u = L.tensor([[0, 3], [1, 1]], dtype=L.uint8)
        b = L.tensor([[True, False], [True, True]])
        q = L.tensor([[1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]])
        out = [tuple(L.movedim(x, (0, 1), (2, 0)).shape), tuple(x.movedim((1,), (0,)).shape),
               str(u.any().dtype), str(u.all(1).dtype), u.all(1).tolist(),
               b.sum(1, dtype=L.int32).tolist(), str(b.sum(dtype=L.int32).dtype), x.sum(dtype=L.int32).item(),
               [str(v) for v in L.quantile(q, 0.5, dim=1).tolist()], str(L.quantile(q, 0.25).item()),
               x.real is x]
        try:
            x.imag
        except TypeError as e:  # PyTorch's type
            out.append(type(e).__name__)
        return [str(o).replace("torch.", "").replace("gpumemnet.", "") for o in out]
    ref, got = _both(run)
    assert got == ref


# ---- modules, optimizers and losses as repositories use them ------------------------------------------------------
def test_module_apply_override_sees_every_conversion():
    """YOLOv5's Detect converts its plain-tensor anchors in an _apply override."""
    def run(L):
        class Detect(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = L.nn.Conv2d(1, 1, 1)
                self.anchors = L.ones(2)

            def _apply(self, fn):
                self = super()._apply(fn)
                self.anchors = fn(self.anchors)
                return self
        m = Detect().double()
        out = [str(m.conv.weight.dtype), str(m.anchors.dtype)]
        m.half()
        return [o.split(".")[-1] for o in out + [str(m.anchors.dtype)]]
    ref, got = _both(run)
    assert got == ref == ["float64", "float64", "float16"]


def test_vector_to_parameters_rebinds_the_data():
    def run(L):
        lin = L.nn.Linear(2, 1, bias=False)
        with L.no_grad():
            lin.weight.fill_(1.0)
        snap = lin.state_dict()["weight"]
        vec = L.tensor([5.0, 6.0])
        L.nn.utils.vector_to_parameters(vec, lin.parameters())
        vec.mul_(10)
        lin2 = L.nn.Linear(2, 1)
        L.nn.utils.vector_to_parameters(L.zeros(3, dtype=L.float64), lin2.parameters())
        return snap.tolist(), lin.weight.tolist(), str(lin2.weight.dtype).split(".")[-1]
    ref, got = _both(run)
    assert got == ref


def test_a_parameter_listed_twice_is_updated_twice():
    """PyTorch-GAN's UNIT: itertools.chain over encoders that share a block."""
    import itertools
    import warnings

    def run(L):
        shared = L.nn.Linear(2, 1, bias=False)
        with L.no_grad():
            shared.weight.copy_(L.tensor([[1.0, -2.0]]))
        a, b = L.nn.Sequential(shared), L.nn.Sequential(shared)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = L.optim.Adam(itertools.chain(a.parameters(), b.parameters()), lr=0.1)
        shared(L.tensor([[1.0, 1.0]])).sum().backward()
        opt.step()
        return len(opt.param_groups[0]["params"]), shared.weight.tolist(), float(opt.state[shared.weight]["step"])
    ref, got = _both(run)
    assert got[0] == ref[0] and got[2] == ref[2]
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-6)


def test_hinge_embedding_loss_with_targets_other_than_plus_minus_one():
    def run(L):
        x = L.tensor([[-1.0, 0.3, 2.0], [0.5, -0.2, 1.5]])
        t = L.tensor([[1.0, -1.0, 1.0], [0.0, 0.0, -1.0]])
        return L.nn.functional.hinge_embedding_loss(x, t, reduction="none").tolist(), \
            L.nn.HingeEmbeddingLoss(margin=0.5)(x, t).item()
    ref, got = _both(run)
    np.testing.assert_allclose(got[0], ref[0])
    assert got[1] == pytest.approx(ref[1])


@pytest.mark.parametrize("loss", ["binary_cross_entropy_with_logits", "binary_cross_entropy", "mse_loss", "l1_loss",
                                  "smooth_l1_loss", "cross_entropy", "nll_loss"])
@pytest.mark.parametrize("legacy", [{"size_average": False}, {"reduce": False}, {"size_average": True}])
def test_functional_losses_take_the_legacy_reduction_keywords(loss, legacy):
    """PyTorch-GAN's StarGAN: F.binary_cross_entropy_with_logits(x, t, size_average=False) / n."""
    import warnings

    def run(L):
        x = L.tensor([[0.2, -1.0, 0.7], [1.5, 0.1, -0.3]])
        if loss in ("cross_entropy", "nll_loss"):
            args = (x.log_softmax(1) if loss == "nll_loss" else x, L.tensor([2, 0]))
        elif loss == "binary_cross_entropy":
            args = (x.sigmoid(), L.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))
        else:
            args = (x, L.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _np(getattr(L.nn.functional, loss)(*args, **legacy))
    ref, got = _both(run)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


@pytest.mark.parametrize("op", ["exp_", "log_", "sqrt_", "abs_", "reciprocal_", "sin_", "sign_", "round_", "trunc_",
                                "frac_", "square_", "xlogy_", "hypot_", "digamma_", "erfinv_"])
def test_in_place_unary_ops_in_a_graph(op):
    """A VAE's `std = logvar.mul(0.5).exp_()`: PyTorch records in-place ops on tensors in a graph."""
    args = {"xlogy_": (2.0,), "hypot_": (None,)}.get(op, ())

    def run(L):
        b = L.tensor([0.3, 0.7, 0.45], dtype=L.float64, requires_grad=True)
        a = (b * 1.0) if op != "erfinv_" else b * 0.5
        extra = tuple(L.ones(3, dtype=L.float64) if v is None else v for v in args)
        r = getattr(a, op)(*extra)
        (r * L.tensor([1.0, 2.0, 3.0], dtype=L.float64)).sum().backward()
        return _np(r), _np(b.grad), r is a
    ref, got = _both(run)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-8 if op == "digamma_" else 1e-10)  # trigamma's series
    assert got[2] == ref[2]


def test_sign_is_recorded_with_a_zero_gradient():
    def run(L):
        x = L.tensor([-1.5, 0.3, 2.0], dtype=L.float64, requires_grad=True)
        y = L.sign(x)
        return y.requires_grad, _np(L.autograd.grad((y * 2).sum(), x)[0])
    ref, got = _both(run)
    assert got[0] == ref[0]
    np.testing.assert_array_equal(got[1], ref[1])


def test_module_state_forms_of_older_code():
    """BatchNorm states without num_batches_tracked (pre-0.4.1 checkpoints, hand-made dicts), the positional
    state_dict(destination, prefix) of older overrides, ParameterDict's key order and repr, Conv2d._conv_forward
    (weight-standardised convs), deepcopy leaving a Parameter's .grad behind."""
    import copy
    import warnings

    def run(L):
        nn = L.nn
        src = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
        sd = {k: v for k, v in src.state_dict().items() if not k.endswith("num_batches_tracked")}
        dst = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
        loaded = str(dst.load_state_dict(sd))
        d = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            same = nn.Linear(1, 1).state_dict(d, "lin.") is d
        pd = nn.ParameterDict({"w_out": nn.Parameter(L.zeros(2)), "b_in": nn.Parameter(L.ones(3, 2))})
        conv = nn.Conv2d(2, 4, 3, padding=1)
        x = L.ones(1, 2, 5, 5)
        std_out = conv._conv_forward(x, conv.weight * 2, None).sum().item()
        lin = nn.Linear(2, 2)
        lin(L.ones(1, 2)).sum().backward()
        twin = copy.deepcopy(lin)
        return [loaded, same, sorted(d), list(pd.keys()), repr(pd).replace("gpumemnet", "torch"),
                std_out / (conv(x) - conv.bias.view(1, -1, 1, 1)).sum().item(), twin.weight.grad is None]
    ref, got = _both(run)
    assert got[:5] == ref[:5] and got[6] == ref[6]
    assert got[5] == pytest.approx(ref[5])


def test_container_operators_and_import_paths():
    """Sequential.pop / + / *, ModuleList.pop, torch.nn.common_types, MultiheadAttention from nn.modules.activation."""
    def run(L):
        nn = L.nn
        s = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
        popped = type(s.pop(1)).__name__
        t = s + nn.Sequential(nn.Identity())
        sizes = [len(t), len(s * 2), len(2 * s)]
        s *= 2
        ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
        try:
            s + nn.ReLU()
        except ValueError as e:
            err = type(e).__name__
        return [popped, list(t._modules), sizes, list(s._modules), type(ml.pop(0)).__name__, list(ml._modules), err]
    ref, got = _both(run)
    assert got == ref
    from gpumemnet.nn.common_types import _size_2_t  # noqa: F401
    from gpumemnet.nn.modules.activation import MultiheadAttention
    assert MultiheadAttention is gm.nn.MultiheadAttention


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_integer_trunc_division_keeps_the_dtype(dtype):
    def run(L):
        dt = getattr(L, dtype)
        a = L.tensor([7, -7, 6, -6, 0, 5] if dtype != "uint8" else [7, 200, 6, 9, 0, 5]).to(dt)
        b = L.tensor([2, 2, -4, 4, 3, -5] if dtype != "uint8" else [2, 3, 4, 4, 3, 5]).to(dt)
        r = L.div(a, b, rounding_mode="trunc")
        return str(r.dtype).split(".")[-1], r.tolist(), str(L.div(a, 2, rounding_mode="trunc").dtype).split(".")[-1]
    ref, got = _both(run)
    assert got == ref


def test_assignment_into_a_view_of_a_graph_tensor():
    """d2l's masked_softmax: X = x.reshape(-1, n); X[~mask] = -1e6; softmax(X) — and the other view writes."""
    def run(L):
        w = L.ones(2, 3, dtype=L.float64, requires_grad=True)
        X = (w * 2).reshape(-1, 3)
        mask = L.arange(3)[None, :] < L.tensor([1, 2])[:, None]
        X[~mask] = -1e6
        y = L.softmax(X, dim=-1)
        (y * L.arange(3.0, dtype=L.float64)).sum().backward()
        a = L.ones(4, dtype=L.float64, requires_grad=True) * 1.0
        v = a.view(2, 2)
        v[0, 0] = 5.0
        (a * L.arange(4.0, dtype=L.float64)).sum().backward()
        return _np(y), _np(w.grad), _np(a)
    ref, got = _both(run)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-12)
