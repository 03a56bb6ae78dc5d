"""nn.functional's and nn's remaining names against PyTorch (nn/_functional_more.py, nn/_functional_conv1d.py,
nn/modules/more.py): values and gradients in float64, on the CPU and on CUDA (the emulator without a GPU)."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
X = R.randn(4, 6) * 2
Y = R.randn(4, 6)
SIGN = np.where(R.rand(4) > 0.5, 1.0, -1.0)
LABELS = (R.rand(4, 6) > 0.5).astype(np.float64)
Q, K, V = R.randn(2, 3, 5, 4), R.randn(2, 3, 7, 4), R.randn(2, 3, 7, 6)
MASK = R.rand(5, 7) > 0.3
MASK[:, 0] = True  # every row keeps a key (an all-masked row is NaN in both)


def t(lib, a, device, grad=False):
    if lib is gm:
        return gm.tensor(a, dtype=gm.float64 if a.dtype.kind == "f" else None, device=device, requires_grad=grad)
    return torch.tensor(a, requires_grad=grad)


# name -> (function of (lib, F, inputs...), the inputs that take gradients, the other inputs)
CASES = {
    "selu": (lambda l, F, x: F.selu(x), [X], []),
    "celu": (lambda l, F, x: F.celu(x, 0.7), [X], []),
    "glu": (lambda l, F, x: F.glu(x, -1), [X], []),
    "logsigmoid": (lambda l, F, x: F.logsigmoid(x), [X], []),
    "softsign": (lambda l, F, x: F.softsign(x), [X], []),
    "softshrink": (lambda l, F, x: F.softshrink(x, 0.8), [X], []),
    "hardshrink": (lambda l, F, x: F.hardshrink(x, 0.8), [X], []),
    "tanhshrink": (lambda l, F, x: F.tanhshrink(x), [X], []),
    "threshold": (lambda l, F, x: F.threshold(x, 0.3, -2.0), [X], []),
    "softmin": (lambda l, F, x: F.softmin(x, dim=1), [X], []),
    "pairwise_distance": (lambda l, F, x, y: F.pairwise_distance(x, y), [X, Y], []),
    "pairwise_distance p=1 keepdim": (lambda l, F, x, y: F.pairwise_distance(x, y, 1.0, keepdim=True), [X, Y], []),
    "channel_shuffle": (lambda l, F, x: F.channel_shuffle(x.reshape(2, 6, 2), 3), [X], []),
    "margin_ranking_loss": (lambda l, F, x, y, s: F.margin_ranking_loss(x[:, 0], y[:, 0], s, 0.2), [X, Y], [SIGN]),
    "hinge_embedding_loss": (lambda l, F, x, s: F.hinge_embedding_loss(x[:, 0], s, reduction="sum"), [X], [SIGN]),
    "soft_margin_loss": (lambda l, F, x, s: F.soft_margin_loss(x[:, 0], s), [X], [SIGN]),
    "multilabel_soft_margin_loss": (lambda l, F, x, y: F.multilabel_soft_margin_loss(x, y), [X], [LABELS]),
    "cosine_embedding_loss": (lambda l, F, x, y, s: F.cosine_embedding_loss(x, y, s, 0.1), [X, Y], [SIGN]),
    "triplet_margin_loss": (lambda l, F, x, y: F.triplet_margin_loss(x, y, x.flip(0), swap=True), [X, Y], []),
    "gaussian_nll_loss": (lambda l, F, x, y: F.gaussian_nll_loss(x, y, y.abs() + 0.1, full=True), [X, Y], []),
    "poisson_nll_loss": (lambda l, F, x, y: F.poisson_nll_loss(x, y.abs(), full=True), [X, Y], []),
    "sdpa": (lambda l, F, q, k, v: F.scaled_dot_product_attention(q, k, v), [Q, K, V], []),
    "sdpa causal scale": (lambda l, F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
                          [Q, K, V], []),
    "sdpa bool mask": (lambda l, F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                       [Q, K, V], [MASK]),
    "sdpa float mask": (lambda l, F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m * 0.5),
                        [Q, K, V, MASK.astype(np.float64)], []),
    "sdpa gqa": (lambda l, F, q, k, v: F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True),
                 [Q, K, V], []),
    "conv1d": (lambda l, F, x, w: F.conv1d(x.reshape(2, 3, 4), w.reshape(3, 3, 2)[:, :, :2], padding=1,
                                           stride=2), [X, R.randn(18)], []),
    "conv1d unbatched same": (lambda l, F, x, w: F.conv1d(x.reshape(3, 8), w.reshape(2, 3, 3), padding="same"),
                              [X, R.randn(18)], []),
    "unfold": (lambda l, F, x: F.unfold(x.reshape(1, 2, 3, 4), (2, 3), padding=1, stride=(1, 2)), [X], []),
    "unfold dilated": (lambda l, F, x: F.unfold(x.reshape(2, 1, 3, 4), 2, dilation=(1, 2)), [X], []),
    "fold": (lambda l, F, x: F.fold(x.reshape(1, 4, 6), (3, 4), 2), [X], []),
    "fold strided padded": (lambda l, F, x: F.fold(x.reshape(2, 4, 3), (1, 4), 2, padding=1, stride=2), [X], []),
    "Unfold module": (lambda l, F, x: l.nn.Unfold(2, stride=2)(x.reshape(1, 1, 4, 6)), [X], []),
    "Fold module": (lambda l, F, x: l.nn.Fold((3, 4), 2)(x.reshape(1, 4, 6)), [X], []),
    "conv_transpose1d": (lambda l, F, x, w: F.conv_transpose1d(x.reshape(2, 3, 4), w.reshape(3, 2, 3), stride=2,
                                                               padding=1, output_padding=1), [X, R.randn(18)], []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_functional_matches_pytorch(name, device):
    fn, grads, others = CASES[name]
    ours = [t(gm, a, device, True) for a in grads]
    theirs = [t(torch, a, device, True) for a in grads]
    extra_ours = [t(gm, a, device) for a in others]
    extra_theirs = [t(torch, a, device) for a in others]
    ya = fn(gm, gm.nn.functional, *ours, *extra_ours)
    yb = fn(torch, torch.nn.functional, *theirs, *extra_theirs)
    assert tuple(ya.shape) == tuple(yb.shape), name
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
    w = np.random.RandomState(1).randn(*yb.shape)
    (ya * gm.tensor(w, device=device)).sum().backward()
    (yb * torch.tensor(w)).sum().backward()
    # PyTorch's celu takes 1/alpha through a float32 scalar in its backward (its gradient is off by ~1e-8 of
    # exp(x / alpha)); test_celu_gradient_is_exact checks ours against float64 finite differences
    rtol = 1e-7 if name == "celu" else 1e-9
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=rtol, atol=1e-11, err_msg=name)


def test_celu_gradient_is_exact():
    x = X.reshape(-1)
    a = gm.tensor(x, dtype=gm.float64, requires_grad=True)
    gm.nn.functional.celu(a, 0.7).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.where(x > 0, 1.0, np.exp(np.minimum(x, 0) / 0.7)), rtol=1e-13)


MODULES = [("SELU", (), 1), ("CELU", (0.5,), 1), ("GLU", (1,), 1), ("LogSigmoid", (), 1), ("Softsign", (), 1),
           ("Softshrink", (0.3,), 1), ("Hardshrink", (0.3,), 1), ("Tanhshrink", (), 1), ("Threshold", (0.1, 20.0), 1),
           ("Softmin", (1,), 1), ("PairwiseDistance", (), 2), ("CosineSimilarity", (1,), 2),
           ("Unflatten", (1, (2, 3)), 1), ("SoftMarginLoss", (), 2), ("MultiLabelSoftMarginLoss", (), 2),
           ("TripletMarginLoss", (0.5,), 3), ("GaussianNLLLoss", (), 3), ("PoissonNLLLoss", (), 2),
           ("MarginRankingLoss", (0.1,), 3), ("HingeEmbeddingLoss", (), 2), ("CosineEmbeddingLoss", (), 3)]


@pytest.mark.parametrize("name,args,n", MODULES, ids=[m[0] for m in MODULES])
def test_modules_match_pytorch(name, args, n, device):
    inputs = [X, Y, np.abs(X) + 0.1][:n]
    if name in ("SoftMarginLoss", "HingeEmbeddingLoss"):
        inputs = [X[:, 0], SIGN]
    elif name in ("MarginRankingLoss",):
        inputs = [X[:, 0], Y[:, 0], SIGN]
    elif name == "CosineEmbeddingLoss":
        inputs = [X, Y, SIGN]
    elif name == "MultiLabelSoftMarginLoss":
        inputs = [X, LABELS]
    elif name == "PoissonNLLLoss":
        inputs = [X, np.abs(Y)]
    ya = getattr(gm.nn, name)(*args)(*[t(gm, a, device) for a in inputs])
    yb = getattr(torch.nn, name)(*args)(*[t(torch, a, device) for a in inputs])
    np.testing.assert_allclose(to_np(ya), yb.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_channel_shuffle_module_and_shufflenet_pattern(device):
    x = np.arange(2 * 6 * 2 * 2, dtype=np.float64).reshape(2, 6, 2, 2)
    np.testing.assert_array_equal(to_np(gm.nn.ChannelShuffle(2)(gm.tensor(x, device=device))),
                                  torch.nn.ChannelShuffle(2)(torch.tensor(x)).numpy())


@pytest.mark.parametrize("kw", [dict(stride=1, padding=1), dict(stride=2, padding=2, dilation=2),
                                dict(padding="same"), dict(groups=2)], ids=["pad", "dilated", "same", "groups"])
def test_conv1d_module_loads_pytorch_weights_and_matches(kw, device):
    torch.manual_seed(0)
    tm = torch.nn.Conv1d(4, 6, 3, **kw).double()
    m = gm.nn.Conv1d(4, 6, 3, **kw).to(device).double()
    assert tuple(m.weight.shape) == tuple(tm.weight.shape) and m.kernel_size == tm.kernel_size
    assert m.padding == tm.padding and m.stride == tm.stride and repr(m) == repr(tm)
    m.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = R.randn(2, 4, 11)
    a, b = t(gm, x, device, True), t(torch, x, device, True)
    ya, yb = m(a), tm(b)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-10, atol=1e-12)
    ya.sum().backward()
    yb.sum().backward()
    np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(to_np(m.weight.grad), tm.weight.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_conv_transpose1d_output_size(device):
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose1d(3, 2, 3, stride=2).double()
    m = gm.nn.ConvTranspose1d(3, 2, 3, stride=2).to(device).double()
    m.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = R.randn(1, 3, 5)
    ya, yb = m(t(gm, x, device), output_size=[12]), tm(t(torch, x, device), output_size=[12])
    assert tuple(ya.shape) == tuple(yb.shape) == (1, 2, 12)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,args", [("SELU", ()), ("CELU", (0.5,)), ("Threshold", (0.1, -1.0))])
def test_inplace_layers_in_a_graph_and_outside(name, args):
    """inplace=True writes into the input outside a graph; in a graph the layer's output is right and backward runs
    (the input is then left as it was: a composed activation cannot be recorded in place)."""
    x = gm.tensor(X)
    out = getattr(gm.nn, name)(*args, inplace=True)(x)
    ref = getattr(torch.nn, name)(*args)(torch.tensor(X))
    assert out is x
    np.testing.assert_allclose(x.numpy(), ref.numpy(), rtol=1e-14)
    a = gm.tensor(X, requires_grad=True)
    ta = torch.tensor(X, requires_grad=True)
    y = getattr(gm.nn, name)(*args, inplace=True)(a * 1.0)
    ty = getattr(torch.nn, name)(*args, inplace=True)(ta * 1.0)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-7)


@pytest.mark.parametrize("legacy,reduction", [(dict(reduce=False), "none"), (dict(size_average=False), "sum"),
                                              (dict(size_average=True, reduce=True), "mean")])
def test_losses_take_the_deprecated_reduction_arguments(legacy, reduction):
    """size_average / reduce override reduction, as in PyTorch."""
    a, b = gm.tensor(X[:, 0]), torch.tensor(X[:, 0])
    s, ts = gm.tensor(SIGN), torch.tensor(SIGN)
    ours = gm.nn.functional.soft_margin_loss(a, s, **legacy)
    theirs = torch.nn.functional.soft_margin_loss(b, ts, **legacy)
    np.testing.assert_allclose(to_np(ours), theirs.numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_np(ours), theirs.numpy() if reduction == "none" else
                               to_np(gm.nn.functional.soft_margin_loss(a, s, reduction=reduction)), rtol=1e-12)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        gm.nn.functional.soft_margin_loss(a, s, reduction="avg")
