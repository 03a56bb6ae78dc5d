"""nn/_functional_extra*.py and nn/modules/extra.py against PyTorch itself: multi-head attention (the functional form
and the layer, loading PyTorch's state_dict), rms_norm, local_response_norm, CrossMapLRN2d, bilinear, rrelu, the
in-place activations, gumbel_softmax, pdist, lp_pool, max_pool*_with_indices, max_unpool, upsample*, the margin
losses, embedding_bag; values, gradients (float64), dtypes and shapes, on the CPU and on CUDA. The lazy modules:
test_nn_extra_lazy.py."""
import math
import warnings

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
TF = torch.nn.functional

R = np.random.RandomState(0)


def _pair_of(a, device, grad):
    """The same array as a gpumemnet tensor on device and a PyTorch tensor on the CPU (int arrays stay int64)."""
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return gm.tensor(a, device=device), torch.tensor(a)
    return (gm.tensor(a, dtype=gm.float64, device=device, requires_grad=grad),
            torch.tensor(a, dtype=torch.float64, requires_grad=grad))


def check(fn, *arrays, grad=True, no_grad=(), rtol=1e-10, atol=1e-10, device="cpu"):
    """fn(F-like namespace, *tensors) on both libraries: same shape, dtype, values, and gradients of a random
    weighting of the output with respect to every float input (except the positions in no_grad)."""
    ours, theirs = [], []
    for i, a in enumerate(arrays):
        g, t = _pair_of(a, device, grad and i not in no_grad)
        ours.append(g)
        theirs.append(t)
    ya, yb = fn(F, *ours), fn(TF, *theirs)
    assert tuple(ya.shape) == tuple(yb.shape)
    assert str(ya.dtype).split(".")[-1] == str(yb.dtype).split(".")[-1]
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=rtol, atol=atol)
    if not grad or not yb.requires_grad:
        return
    w = R.randn(*yb.shape)
    (ya * gm.tensor(w, dtype=gm.float64, device=device)).sum().backward()
    (yb * torch.tensor(w, dtype=torch.float64)).sum().backward()
    for i, (g, t) in enumerate(zip(ours, theirs)):
        if t.requires_grad:
            assert g.grad is not None, f"input {i} has no gradient"
            np.testing.assert_allclose(to_np(g.grad), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")


X3 = R.randn(2, 5, 6)
POS4 = R.rand(2, 3, 6, 5) + 0.1
POOL_X = R.randn(2, 3, 6, 6)
M_X = R.randn(4, 5)
M_T = np.array([0, 4, 2, 2])
ML_T = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 0, 0], [4, 4, -1, 0, 0]])

# name -> (fn(lib, *tensors), inputs, positions that take no gradient)
CASES = {
    "rms_norm weight": (lambda L, x, w: L.rms_norm(x, (6,), w), (X3, R.randn(6)), ()),
    "rms_norm 2 dims eps": (lambda L, x: L.rms_norm(x, [5, 6], eps=1e-3), (X3,), ()),
    "rms_norm default eps": (lambda L, x: L.rms_norm(x * 1e-9, [6]), (X3,), ()),
    "local_response_norm 3-D": (lambda L, x: L.local_response_norm(x, 3, alpha=0.1), (X3,), ()),
    "local_response_norm 4-D even size": (lambda L, x: L.local_response_norm(x, 2, 0.3, 0.5, 2.0), (POS4,), ()),
    "local_response_norm 5-D": (lambda L, x: L.local_response_norm(x.reshape(2, 3, 2, 3, 5), 4, 1.0), (POS4,), ()),
    "local_response_norm empty": (lambda L, x: L.local_response_norm(x[:, :, :0], 3), (X3,), ()),
    "bilinear": (lambda L, a, b, w, c: L.bilinear(a, b, w, c), (R.randn(3, 4), R.randn(3, 5), R.randn(2, 4, 5),
                                                                 R.randn(2)), ()),
    "bilinear batched no bias": (lambda L, a, b, w: L.bilinear(a, b, w), (R.randn(2, 3, 4), R.randn(2, 3, 1),
                                                                         R.randn(6, 4, 1)), ()),
    "bilinear 1-D": (lambda L, a, b, w: L.bilinear(a, b, w), (R.randn(4), R.randn(3), R.randn(2, 4, 3)), ()),
    "rrelu eval": (lambda L, x: L.rrelu(x, 0.1, 0.3), (X3,), ()),
    "rrelu eval defaults": (lambda L, x: L.rrelu(x), (X3,), ()),
    "pdist p=2 with a repeated row": (lambda L, x: L.pdist(x), (np.vstack([X3[0], X3[0, :2]]),), ()),
    "pdist p=1": (lambda L, x: L.pdist(x, 1), (X3[0],), ()),
    "pdist p=3": (lambda L, x: L.pdist(x, 3.0), (X3[0],), ()),
    "pdist p=0.5": (lambda L, x: L.pdist(x, 0.5), (X3[0],), ()),
    "pdist p=inf": (lambda L, x: L.pdist(x, float("inf")), (X3[0],), ()),
    "pdist p=0": (lambda L, x: L.pdist(x, 0), (np.vstack([X3[0], X3[0, :1]]),), ()),
    "pdist one row": (lambda L, x: L.pdist(x), (X3[0, :1],), ()),
    "lp_pool1d": (lambda L, x: L.lp_pool1d(x, 2, 3), (POS4[0],), ()),
    "lp_pool1d stride ceil": (lambda L, x: L.lp_pool1d(x, 3.0, 2, stride=1, ceil_mode=True), (POS4[0],), ()),
    "lp_pool1d inf": (lambda L, x: L.lp_pool1d(x, float("inf"), 2), (X3,), ()),
    "lp_pool2d": (lambda L, x: L.lp_pool2d(x, 2, (2, 3)), (POS4,), ()),
    "lp_pool2d -inf": (lambda L, x: L.lp_pool2d(x, -float("inf"), 2, stride=1), (POS4,), ()),
    "lp_pool2d 1.5 ceil": (lambda L, x: L.lp_pool2d(x, 1.5, 3, stride=2, ceil_mode=True), (POS4,), ()),
    "max_pool2d_with_indices": (lambda L, x: L.max_pool2d_with_indices(x, 2)[0], (POOL_X,), ()),
    "max_pool2d_with_indices indices": (lambda L, x: L.max_pool2d_with_indices(x, 3, 2, 1)[1], (POOL_X,), ()),
    "max_pool1d_with_indices": (lambda L, x: L.max_pool1d_with_indices(x[0], 3, 2, 1)[0], (POOL_X,), ()),
    "max_pool1d_with_indices indices": (lambda L, x: L.max_pool1d_with_indices(x[0], 2, ceil_mode=True)[1],
                                        (POOL_X,), ()),
    "upsample nearest": (lambda L, x: L.upsample(x, scale_factor=2), (POS4,), ()),
    "upsample bilinear": (lambda L, x: L.upsample(x, size=(7, 9), mode="bilinear"), (POS4,), ()),
    "upsample_nearest": (lambda L, x: L.upsample_nearest(x, size=(7, 9)), (POS4,), ()),
    "upsample_bilinear": (lambda L, x: L.upsample_bilinear(x, scale_factor=2), (POS4,), ()),
    "multi_margin_loss": (lambda L, x, t: L.multi_margin_loss(x, t), (M_X, M_T), ()),
    "multi_margin_loss sum": (lambda L, x, t: L.multi_margin_loss(x, t, reduction="sum"), (M_X, M_T), ()),
    "multi_margin_loss none": (lambda L, x, t: L.multi_margin_loss(x, t, reduction="none"), (M_X, M_T), ()),
    "multi_margin_loss p=2 weight margin": (lambda L, x, t, w: L.multi_margin_loss(x, t, p=2, margin=0.7, weight=w),
                                            (M_X, M_T, R.rand(5)), (2,)),
    "multi_margin_loss legacy reduce": (lambda L, x, t: L.multi_margin_loss(x, t, size_average=False), (M_X, M_T),
                                        ()),
    "multi_margin_loss 1-D, 0-d target": (lambda L, x, t: L.multi_margin_loss(x, t, reduction="none"),
                                          (M_X[0], np.array(3)), ()),
    "multi_margin_loss 1-D, 1-element target": (lambda L, x, t: L.multi_margin_loss(x, t), (M_X[0], np.array([3])),
                                                ()),
    "multi_margin_loss empty batch": (lambda L, x, t: L.multi_margin_loss(x[:0], t[:0], reduction="none"),
                                      (M_X, M_T), ()),
    "multilabel_margin_loss": (lambda L, x, t: L.multilabel_margin_loss(x, t), (M_X, ML_T), ()),
    "multilabel_margin_loss sum": (lambda L, x, t: L.multilabel_margin_loss(x, t, reduction="sum"), (M_X, ML_T), ()),
    "multilabel_margin_loss none": (lambda L, x, t: L.multilabel_margin_loss(x, t, reduction="none"), (M_X, ML_T),
                                    ()),
    "multilabel_margin_loss 1-D": (lambda L, x, t: L.multilabel_margin_loss(x, t), (M_X[2], ML_T[2]), ()),
    "multilabel_margin_loss empty batch": (lambda L, x, t: L.multilabel_margin_loss(x[:0], t[:0], reduction="sum"),
                                           (M_X, ML_T), ()),
    "triplet_margin_with_distance_loss": (lambda L, a, p, n: L.triplet_margin_with_distance_loss(a, p, n),
                                          (R.randn(3, 4), R.randn(3, 4), R.randn(3, 4)), ()),
    "triplet_margin_with_distance_loss swap custom": (
        lambda L, a, p, n: L.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda x, y: (x - y).abs()
                                                               .sum(-1), margin=2.0, swap=True, reduction="none"),
        (R.randn(3, 4), R.randn(3, 4), R.randn(3, 4)), ()),
    "triplet_margin_with_distance_loss sum broadcast": (
        lambda L, a, p, n: L.triplet_margin_with_distance_loss(a, p, n, reduction="sum"),
        (R.randn(3, 4), R.randn(1, 4), R.randn(3, 4)), ()),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_pytorch(name, device):
    fn, arrays, no_grad = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # upsample*'s deprecation: test_upsample_warns checks it
        check(fn, *arrays, no_grad=no_grad, device=device)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float32_results_keep_their_dtype(dtype, device):
    x = R.randn(2, 3, 4, 4)
    for fn in (lambda L, t: L.rms_norm(t, [4]), lambda L, t: L.local_response_norm(t, 2),
               lambda L, t: L.lp_pool2d(t.abs(), 2, 2), lambda L, t: L.pdist(t[0, 0])):
        ya = fn(F, gm.tensor(x, dtype=getattr(gm, dtype), device=device))
        yb = fn(TF, torch.tensor(x, dtype=getattr(torch, dtype)))
        assert str(ya.dtype).split(".")[-1] == dtype
        np.testing.assert_allclose(to_np(ya), yb.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [2, 3, 4, 5, 6])
def test_cross_map_lrn2d_matches_pytorch(size, device):
    """PyTorch's legacy forward and hand-written backward, quirks included (size 1's backward fails in PyTorch)."""
    check(lambda L, x: (gm.nn if L is F else torch.nn).CrossMapLRN2d(size, 0.5, 0.75, 1.0)(x), R.randn(2, 7, 3, 2),
          device=device)


@pytest.mark.parametrize("kw", [{}, {"output_size": (7, 7)}, {"output_size": [2, 3, 7, 6]}, {"stride": 2}])
def test_max_unpool2d_matches_pytorch(kw, device):
    out, idx = TF.max_pool2d(torch.tensor(POOL_X), 2, return_indices=True)
    check(lambda L, x, i: L.max_unpool2d(x, i, 2, **kw), out.numpy(), idx.numpy(), device=device)


def test_max_unpool_more_forms_match_pytorch(device):
    x5 = POOL_X[0, :, :5, :5].copy()
    out, idx = TF.max_pool2d(torch.tensor(x5), 3, stride=2, padding=1, return_indices=True)
    check(lambda L, x, i: L.max_unpool2d(x, i, 3, 2, 1), out.numpy(), idx.numpy(), device=device)  # 3-D input
    out, idx = TF.max_pool1d(torch.tensor(POOL_X[0]), 2, return_indices=True)
    check(lambda L, x, i: L.max_unpool1d(x, i, 2), out.numpy(), idx.numpy(), device=device)
    check(lambda L, x, i: L.max_unpool1d(x, i, 2, output_size=[7]), out.numpy(), idx.numpy(), device=device)
    check(lambda L, x, i: L.max_unpool1d(x, i, 2), out.numpy()[0], idx.numpy()[0], device=device)  # 2-D input


def test_upsample_warns_as_pytorch():
    x = gm.zeros(1, 1, 2, 2)
    for fn, name in ((lambda: F.upsample(x, scale_factor=2), "upsample"),
                     (lambda: F.upsample_nearest(x, scale_factor=2), "upsample_nearest"),
                     (lambda: F.upsample_bilinear(x, scale_factor=2), "upsample_bilinear")):
        with pytest.warns(UserWarning, match=rf"`nn.functional.{name}` is deprecated") as rec:
            fn()
        assert rec[0].filename == __file__  # stacklevel points at the caller


def test_rrelu_training_draws_slopes_in_range(device):
    x = gm.tensor(R.randn(50, 40), dtype=gm.float64, device=device, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    xs, ys = to_np(x), to_np(y)
    slope = ys[xs < 0] / xs[xs < 0]
    assert slope.min() >= 0.1 and slope.max() <= 0.3 and slope.std() > 0.03  # drawn, not the mean
    np.testing.assert_array_equal(ys[xs > 0], xs[xs > 0])
    y.sum().backward()
    np.testing.assert_allclose(to_np(x.grad), np.where(xs > 0, 1.0, ys / np.where(xs == 0, 1, xs)))
    gm.manual_seed(3)
    a = to_np(F.rrelu(x.detach(), training=True))
    gm.manual_seed(3)
    np.testing.assert_array_equal(a, to_np(F.rrelu(x.detach(), training=True)))  # the global generator


@pytest.mark.parametrize("name,args", [("celu_", (0.7,)), ("selu_", ()), ("threshold_", (0.1, 5.0)),
                                       ("rrelu_", (0.1, 0.3))])
def test_inplace_activations_match_pytorch(name, args, device):
    x = R.randn(3, 4)
    a, b = gm.tensor(x, device=device), torch.tensor(x)
    ra, rb = getattr(F, name)(a, *args), getattr(TF, name)(b, *args)
    assert ra is a
    np.testing.assert_allclose(to_np(a), b.numpy(), rtol=1e-6)
    np.testing.assert_allclose(to_np(ra), rb.numpy(), rtol=1e-6)


def test_inplace_activations_refuse_a_leaf_that_requires_grad():
    for name, args in (("celu_", ()), ("selu_", ()), ("threshold_", (0.0, 1.0)), ("rrelu_", ())):
        with pytest.raises(RuntimeError, match=name):
            getattr(F, name)(gm.zeros(3, requires_grad=True), *args)
        with pytest.raises(RuntimeError):
            getattr(TF, name)(torch.zeros(3, requires_grad=True), *args)
    t = gm.tensor([1, 5, -2])
    F.threshold_(t, 1, 7)  # integer tensors are accepted, as PyTorch's
    assert t.tolist() == [7, 5, 7]


def test_rrelu_module_and_inplace(device):
    m = gm.nn.RReLU(0.1, 0.3, inplace=True)
    assert repr(m) == repr(torch.nn.RReLU(0.1, 0.3, inplace=True))
    x = gm.tensor([-1.0, 2.0], device=device)
    m.eval()
    y = m(x)
    assert y is x
    np.testing.assert_allclose(to_np(x), [-0.2, 2.0], rtol=1e-6)


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax(hard, device):
    gm.manual_seed(0)
    logits = gm.tensor(R.randn(400, 5), dtype=gm.float64, device=device, requires_grad=True)
    y = F.gumbel_softmax(logits, tau=0.5, hard=hard)
    ys = to_np(y)
    np.testing.assert_allclose(ys.sum(1), 1.0)
    if hard:
        assert set(np.unique(ys)) <= {0.0, 1.0}
    # the sampled argmax follows softmax(logits): compare frequencies of the most likely class
    p = to_np(F.softmax(logits.detach(), -1))
    assert abs((ys.argmax(1) == p.argmax(1)).mean() - p.max(1).mean()) < 0.1
    w = gm.tensor(R.randn(400, 5), dtype=gm.float64, device=device)
    (y * w).sum().backward()
    # straight-through: hard=True has the soft sample's gradient, so both are nonzero and sum to 0 per row
    np.testing.assert_allclose(to_np(logits.grad).sum(1), 0.0, atol=1e-10)
    assert np.abs(to_np(logits.grad)).sum() > 0
    with pytest.warns(UserWarning, match="eps"):
        F.gumbel_softmax(logits.detach(), eps=1e-5)


# ---- MultiheadAttention -------------------------------------------------------------------------------------------
E, H, LQ, S, N = 8, 2, 3, 4, 2
MQ, MK, MV = R.randn(LQ, N, E), R.randn(S, N, E), R.randn(S, N, E)
BOOL_MASK = R.rand(LQ, S) > 0.7
BOOL_MASK[:, 0] = False
KPM = R.rand(N, S) > 0.6
KPM[:, 0] = False

MHA_OPTS = {
    "plain": {}, "no weights": {"need_weights": False}, "per-head weights": {"average_attn_weights": False},
    "bias_kv zero_attn": {"bias_kv": True, "add_zero_attn": True}, "bool mask": {"attn_mask": "bool"},
    "float 3-D mask": {"attn_mask": "float3"}, "key padding": {"kpm": True},
    "key padding, bool mask, no weights": {"kpm": True, "attn_mask": "bool", "need_weights": False},
    "bias_kv, key padding, mask": {"bias_kv": True, "kpm": True, "attn_mask": "bool"},
    "causal, no weights": {"causal": True, "need_weights": False}, "causal": {"causal": True},
    "unbatched": {"unbatched": True, "kpm": True}, "separate weights": {"separate": True, "bias_kv": True},
}


def _mha_call(L, FF, device, opts):
    kd = (S, N, 5) if opts.get("separate") else (S, N, E)
    shapes = [kd, kd, (3 * E, E), (3 * E,), (E, E), (E,), (1, 1, E), (1, 1, E), (E, E), (E, 5), (E, 5)]
    arrs = [MQ] + [np.random.RandomState(i + 1).randn(*s) for i, s in enumerate(shapes)]
    dev = {} if L is torch else {"device": device}
    ts = [L.tensor(a, dtype=L.float64, requires_grad=True, **dev) for a in arrs]
    q, k, v = ts[:3]
    mask = {"bool": L.tensor(BOOL_MASK, **dev), "float3": L.tensor(np.random.RandomState(12).randn(N * H, LQ, S),
                                                                    dtype=L.float64, **dev)}.get(opts.get("attn_mask"))
    if opts.get("causal"):
        mask = L.tensor(np.triu(np.ones((LQ, S), bool), 1), **dev)
    kpm = L.tensor(KPM, **dev) if opts.get("kpm") else None
    if opts.get("unbatched"):
        q, k, v, kpm = q[:, 0], k[:, 0], v[:, 0], kpm[0]
    bias = opts.get("bias_kv")
    sep = opts.get("separate")
    out, w = FF.multi_head_attention_forward(
        q, k, v, E, H, None if sep else ts[3], ts[4], ts[7] if bias else None, ts[8] if bias else None,
        opts.get("add_zero_attn", False), 0.0, ts[5], ts[6], key_padding_mask=kpm,
        need_weights=opts.get("need_weights", True), attn_mask=mask,
        average_attn_weights=opts.get("average_attn_weights", True), is_causal=opts.get("causal", False),
        use_separate_proj_weight=bool(sep), q_proj_weight=ts[9] if sep else None,
        k_proj_weight=ts[10] if sep else None, v_proj_weight=ts[11] if sep else None)
    (out.sum() + (w.sum() * 0.3 if w is not None else 0)).backward()
    return out, w, ts


@pytest.mark.parametrize("name", list(MHA_OPTS))
def test_multi_head_attention_forward_matches_pytorch(name, device):
    opts = MHA_OPTS[name]
    oa, wa, ta = _mha_call(gm, F, device, opts)
    ob, wb, tb = _mha_call(torch, TF, device, opts)
    assert tuple(oa.shape) == tuple(ob.shape)
    np.testing.assert_allclose(to_np(oa), ob.detach().numpy(), rtol=1e-10, atol=1e-10)
    assert (wa is None) == (wb is None)
    if wb is not None:
        assert tuple(wa.shape) == tuple(wb.shape)
        np.testing.assert_allclose(to_np(wa), wb.detach().numpy(), rtol=1e-10, atol=1e-10)
    for i, (a, b) in enumerate(zip(ta, tb)):
        if b.grad is None:
            assert a.grad is None or not to_np(a.grad).any(), i
        else:
            np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-9, atol=1e-10, err_msg=f"input {i}")


def test_multi_head_attention_mixed_mask_types_warn_as_pytorch():
    q = gm.zeros(3, 1, 4)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask is deprecated"):
        F.multi_head_attention_forward(q, q, q, 4, 1, gm.zeros(12, 4), None, None, None, False, 0.0, gm.zeros(4, 4),
                                       None, key_padding_mask=gm.zeros(1, 3, dtype=gm.bool), attn_mask=gm.zeros(3, 3))


MHA_KW = [{}, {"bias": False}, {"add_bias_kv": True, "add_zero_attn": True}, {"kdim": 5, "vdim": 3},
          {"batch_first": True}, {"batch_first": True, "kdim": 6}]


@pytest.mark.parametrize("kw", MHA_KW, ids=[str(k) for k in MHA_KW])
def test_multihead_attention_loads_pytorch_state_dict(kw, device):
    theirs = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, **kw)
    ours = gm.nn.MultiheadAttention(E, H, dtype=gm.float64, device=device, **kw)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    bf = kw.get("batch_first", False)
    kd, vd = kw.get("kdim", E), kw.get("vdim", E)
    arrs = [R.randn(*((N, LQ, E) if bf else (LQ, N, E))), R.randn(*((N, S, kd) if bf else (S, N, kd))),
            R.randn(*((N, S, vd) if bf else (S, N, vd)))]
    kpm = KPM
    for mode in ("train", "eval"):
        getattr(theirs, mode)()
        getattr(ours, mode)()
        theirs.zero_grad()
        ours.zero_grad()
        tb = [torch.tensor(a, requires_grad=True) for a in arrs]
        ta = [gm.tensor(a, device=device, requires_grad=True) for a in arrs]
        ob, wb = theirs(*tb, key_padding_mask=torch.tensor(kpm))
        oa, wa = ours(*ta, key_padding_mask=gm.tensor(kpm, device=device))
        np.testing.assert_allclose(to_np(oa), ob.detach().numpy(), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(to_np(wa), wb.detach().numpy(), rtol=1e-10, atol=1e-10)
        (ob.sum() + wb.sum()).backward()
        (oa.sum() + wa.sum()).backward()
        for a, b in zip(ta, tb):
            np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-9, atol=1e-10)
        mine = dict(ours.named_parameters())
        for n, p in theirs.named_parameters():
            np.testing.assert_allclose(to_np(mine[n].grad), p.grad.numpy(), rtol=1e-9, atol=1e-10, err_msg=n)


def test_multihead_attention_self_attention_shortcuts_and_unbatched(device):
    theirs = torch.nn.MultiheadAttention(6, 3, dtype=torch.float64, batch_first=True).eval()
    ours = gm.nn.MultiheadAttention(6, 3, dtype=gm.float64, batch_first=True, device=device).eval()
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = R.randn(2, 5, 6)
    causal = np.triu(np.ones((5, 5), bool), 1)
    with torch.no_grad():  # PyTorch's fast path
        ob, _ = theirs(*(torch.tensor(x),) * 3, attn_mask=torch.tensor(causal), need_weights=False, is_causal=True)
        ub, uw = theirs(*(torch.tensor(x[0]),) * 3)
    xa = gm.tensor(x, device=device)
    oa, wa = ours(xa, xa, xa, attn_mask=gm.tensor(causal, device=device), need_weights=False, is_causal=True)
    assert wa is None
    np.testing.assert_allclose(to_np(oa), ob.numpy(), rtol=1e-9, atol=1e-10)
    ua, uwa = ours(xa[0], xa[0], xa[0])
    np.testing.assert_allclose(to_np(ua), ub.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(to_np(uwa), uw.numpy(), rtol=1e-9, atol=1e-10)


def test_multihead_attention_initialisation_follows_pytorch():
    gm.manual_seed(0)
    m = gm.nn.MultiheadAttention(64, 4, add_bias_kv=True)
    w = to_np(m.in_proj_weight)
    bound = math.sqrt(6.0 / (64 + 3 * 64))  # xavier_uniform_ over (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert not to_np(m.in_proj_bias).any() and not to_np(m.out_proj.bias).any()
    assert np.abs(to_np(m.out_proj.weight)).max() <= 1 / math.sqrt(64)  # Linear's own initialisation
    assert tuple(m.bias_k.shape) == (1, 1, 64) and to_np(m.bias_k).std() > 0
    m2 = gm.nn.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False)
    assert m2.in_proj_weight is None and m2.in_proj_bias is None and m2.out_proj.bias is None
    assert tuple(m2.k_proj_weight.shape) == (8, 3) and tuple(m2.v_proj_weight.shape) == (8, 5)
    assert m2.bias_k is None and not m2._qkv_same_embed_dim


def test_multihead_attention_dropout_in_training_only(device):
    m = gm.nn.MultiheadAttention(8, 2, dropout=0.5, device=device)
    x = gm.tensor(R.randn(3, 2, 8), dtype=gm.float32, device=device)
    _, w = m(x, x, x, average_attn_weights=False)
    assert (to_np(w) == 0).any()  # dropped weights
    m.eval()
    _, w = m(x, x, x)
    np.testing.assert_allclose(to_np(w).sum(-1), 1.0, rtol=1e-5)


def test_multihead_attention_on_meta():
    m = gm.nn.MultiheadAttention(16, 4, device="meta", batch_first=True)
    x = gm.zeros(2, 5, 16, device="meta")
    out, w = m(x, x, x, key_padding_mask=gm.zeros(2, 5, dtype=gm.bool, device="meta"))
    assert tuple(out.shape) == (2, 5, 16) and tuple(w.shape) == (2, 5, 5) and out.device.type == "meta"


# ---- the other layers ---------------------------------------------------------------------------------------------
def _load(ours, theirs):
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


LAYERS = {
    "RMSNorm": (lambda nn: nn.RMSNorm([5, 6], eps=1e-4, dtype=nn is torch.nn and torch.float64 or gm.float64),
                (X3,)),
    "RMSNorm no affine": (lambda nn: nn.RMSNorm(6, elementwise_affine=False), (X3,)),
    "LocalResponseNorm": (lambda nn: nn.LocalResponseNorm(3, 0.2, 0.6, 1.5), (POS4,)),
    "CrossMapLRN2d": (lambda nn: nn.CrossMapLRN2d(3, 0.2, 0.6, 1.5), (POS4,)),
    "Bilinear": (lambda nn: nn.Bilinear(4, 5, 3, dtype=nn is torch.nn and torch.float64 or gm.float64),
                 (R.randn(2, 4), R.randn(2, 5))),
    "Bilinear no bias": (lambda nn: nn.Bilinear(4, 5, 3, bias=False, dtype=nn is torch.nn and torch.float64 or
                                                gm.float64), (R.randn(2, 4), R.randn(2, 5))),
    "RReLU eval": (lambda nn: nn.RReLU(0.2, 0.4).eval(), (X3,)),
    "LPPool1d": (lambda nn: nn.LPPool1d(2, 3, stride=2), (POS4[0],)),
    "LPPool2d": (lambda nn: nn.LPPool2d(1.5, (2, 3), ceil_mode=True), (POS4,)),
    "MultiMarginLoss": (lambda nn: nn.MultiMarginLoss(p=2, margin=0.5, reduction="sum"), (M_X, M_T)),
    "MultiLabelMarginLoss": (lambda nn: nn.MultiLabelMarginLoss(reduction="none"), (M_X, ML_T)),
    "TripletMarginWithDistanceLoss": (lambda nn: nn.TripletMarginWithDistanceLoss(margin=0.5, swap=True),
                                      (R.randn(3, 4), R.randn(3, 4), R.randn(3, 4))),
    "NLLLoss2d": (lambda nn: nn.NLLLoss2d(), (np.log(R.rand(2, 3, 2, 2)), R.randint(0, 3, (2, 2, 2)))),
}


@pytest.mark.filterwarnings("ignore:`NLLLoss2d` has been deprecated")
@pytest.mark.parametrize("name", list(LAYERS))
def test_layers_match_pytorch(name, device):
    make, arrays = LAYERS[name]
    ours, theirs = make(gm.nn).to(device), make(torch.nn).double()
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _load(ours, theirs)
    check(lambda L, *t: (ours if L is F else theirs)(*t), *arrays, device=device)
    for (n, p), (n2, p2) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == n2
        np.testing.assert_allclose(to_np(p.grad), p2.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_nllloss2d_warns_as_pytorch():
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated. Please use `NLLLoss`") as rec:
        gm.nn.NLLLoss2d()
        assert isinstance(gm.nn.NLLLoss2d(ignore_index=3), gm.nn.NLLLoss)
    assert rec[0].filename == __file__


def test_layer_initialisation_follows_pytorch():
    assert (to_np(gm.nn.RMSNorm(4).weight) == 1).all()
    b = gm.nn.Bilinear(16, 3, 5)
    w, bias = to_np(b.weight), to_np(b.bias)
    assert np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.2 and np.abs(bias).max() <= 0.25  # U(+-1/sqrt(16))
    assert tuple(b.weight.shape) == (5, 16, 3)


@pytest.mark.parametrize("kw", [{}, {"stride": 1}, {"stride": (2, 1), "padding": (1, 0)}])
def test_max_unpool2d_layer_inverts_max_pool2d(kw, device):
    pool = torch.nn.MaxPool2d(3, return_indices=True, **kw)
    out, idx = pool(torch.tensor(POOL_X))
    ours, theirs = gm.nn.MaxUnpool2d(3, **kw), torch.nn.MaxUnpool2d(3, **kw)
    assert repr(ours) == repr(theirs)
    check(lambda L, x, i: (ours if L is F else theirs)(x, i, output_size=POOL_X.shape), out.numpy(), idx.numpy(),
          device=device)


def test_max_unpool1d_layer(device):
    out, idx = TF.max_pool1d(torch.tensor(POOL_X[0]), 2, return_indices=True)
    ours, theirs = gm.nn.MaxUnpool1d(2), torch.nn.MaxUnpool1d(2)
    assert repr(ours) == repr(theirs)
    check(lambda L, x, i: (ours if L is F else theirs)(x, i), out.numpy(), idx.numpy(), device=device)


def test_multilabel_margin_loss_on_meta():
    x = gm.zeros(3, 4, device="meta", requires_grad=True)
    t = gm.zeros(3, 4, dtype=gm.int64, device="meta")
    assert tuple(F.multilabel_margin_loss(x, t, reduction="none").shape) == (3,)
    assert tuple(F.multi_margin_loss(x, t[:, 0]).shape) == ()
    o, i = F.max_pool2d_with_indices(gm.zeros(1, 1, 4, 4, device="meta"), 2)
    assert tuple(F.max_unpool2d(o, i, 2).shape) == (1, 1, 4, 4)


# ---- embedding bags -----------------------------------------------------------------------------------------------
BAG_IDX = np.array([1, 2, 3, 4, 5, 6, 0])
BAGS = {
    "2-D mean": (np.array([[1, 2, 3], [4, 4, 0]]), None, {}),
    "2-D sum padding": (np.array([[1, 2, 3], [4, 5, 0]]), None, {"mode": "sum", "padding_idx": 4}),
    "2-D max": (np.array([[1, 2, 3], [4, 5, 6]]), None, {"mode": "max"}),
    "2-D max padding": (np.array([[1, 2, 2], [4, 4, 4]]), None, {"mode": "max", "padding_idx": 4}),
    "2-D sum weighted": (np.array([[1, 2, 3], [4, 4, 0]]), None, {"mode": "sum", "psw": True}),
    "1-D sum empty bag": (BAG_IDX, np.array([0, 2, 2, 5]), {"mode": "sum"}),
    "1-D mean padding": (BAG_IDX, np.array([0, 2, 2, 5]), {"padding_idx": 5}),
    "1-D max": (BAG_IDX, np.array([0, 2, 2, 5]), {"mode": "max"}),
    "1-D max negative padding, empty last bag": (BAG_IDX, np.array([0, 2, 2, 7]), {"mode": "max", "padding_idx": -1}),
    "1-D sum include_last_offset": (BAG_IDX, np.array([0, 2, 3, 7]), {"mode": "sum", "include_last_offset": True}),
    "1-D max include_last_offset": (BAG_IDX, np.array([0, 2, 2, 7]), {"mode": "max", "include_last_offset": True}),
    "1-D mean include_last_offset": (BAG_IDX, np.array([0, 2, 7, 7]), {"include_last_offset": True}),
    "1-D max of nothing": (np.zeros(0, np.int64), np.array([0, 0]), {"mode": "max"}),
    "1-D sum weighted": (BAG_IDX, np.array([0, 3]), {"mode": "sum", "psw": True}),
    "1-D int32 indices": (BAG_IDX.astype(np.int32), np.array([0, 3], np.int32), {"mode": "sum"}),
}


@pytest.mark.parametrize("name", list(BAGS))
def test_embedding_bag_matches_pytorch(name, device):
    idx, offsets, kw = BAGS[name]
    kw = dict(kw)
    psw = R.randn(*idx.shape) if kw.pop("psw", False) else None

    def fn(L, w, *rest):
        lib = gm if L is F else torch
        dev = {"device": device} if lib is gm else {}
        off = None if offsets is None else lib.tensor(offsets, **dev)
        return L.embedding_bag(lib.tensor(idx, **dev), w, off, per_sample_weights=rest[0] if rest else None, **kw)
    check(fn, R.randn(7, 3), *([] if psw is None else [psw]), device=device)


def test_embedding_bag_max_norm_renormalises_the_rows_used():
    w = R.randn(6, 3) * 3
    a, b = gm.tensor(w), torch.tensor(w)
    ya = F.embedding_bag(gm.tensor([[0, 2]]), a, max_norm=1.0, mode="sum")
    yb = TF.embedding_bag(torch.tensor([[0, 2]]), b, max_norm=1.0, mode="sum")
    np.testing.assert_allclose(to_np(ya), yb.numpy(), rtol=1e-6)
    np.testing.assert_allclose(to_np(a), b.numpy(), rtol=1e-6)  # rows 0 and 2 rescaled in place, the rest kept


def test_embedding_bag_layer(device):
    theirs = torch.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=-2, dtype=torch.float64)
    ours = gm.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=-2, device=device, dtype=gm.float64)
    assert repr(ours) == repr(theirs) and ours.padding_idx == 8
    assert not to_np(ours.weight)[8].any() and to_np(ours.weight).std() > 0.5  # N(0, 1), padding row zeroed
    _load(ours, theirs)
    check(lambda L, i, o: (ours if L is F else theirs)(i, o), np.array([1, 8, 3, 9]), np.array([0, 1]),
          device=device)
    fixed = R.randn(4, 2)
    a = gm.nn.EmbeddingBag.from_pretrained(gm.tensor(fixed), mode="max")
    b = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(fixed), mode="max")
    assert repr(a) == repr(b) and not a.weight.requires_grad
    np.testing.assert_allclose(to_np(a(gm.tensor([[0, 3]]))), b(torch.tensor([[0, 3]])).numpy())
