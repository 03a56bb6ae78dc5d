"""Semantics that PyTorch code relies on, checked against PyTorch itself (stop 37's hunts through d2l.ai, fast.ai's
course, volumetric code and a conformance sweep of the tensor API): CPU autocast's dtype policy, empty dim lists,
arange over tensors, 0-d sorts, contiguous results, comparisons with None, dtype=float, in-place writes into
activation outputs and into views."""
import numpy as np
import pytest

import gpumemnet as gm

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
    with gm.autocast("cuda", dtype=gm.bfloat16):
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
