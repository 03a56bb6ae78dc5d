"""gpumemnet.nn's init and layers: bounds and moments of each initialisation for given fans; each layer's forward
equals the functional op (and a NumPy reference for Linear/Conv2d/BatchNorm), parameter counts, output shapes;
gradients of a small CNN, inputs and parameters, against float64 finite differences; a batch-norm model against
PyTorch in train mode (where torch is importable)."""
import math

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gradcheck import assert_close, gradcheck, to_numpy
from nn_util import Tiny, meta


# ---- init ----------------------------------------------------------------------------------------------------
def _stats(t):
    a = to_numpy(t).astype(np.float64).ravel()
    return a.min(), a.max(), a.mean(), a.std()


@pytest.mark.parametrize("fan_in", [9, 100, 2304])
def test_default_layer_init_is_uniform_one_over_sqrt_fan_in(fan_in):
    gm.manual_seed(0)
    lin = nn.Linear(fan_in, 400)
    bound = 1 / math.sqrt(fan_in)
    lo, hi, mean, std = _stats(lin.weight)
    assert -bound <= lo and hi <= bound and hi > 0.99 * bound and lo < -0.99 * bound
    assert abs(mean) < 0.02 * bound and abs(std - bound / math.sqrt(3)) < 0.02 * bound
    lo, hi, _, _ = _stats(lin.bias)
    assert -bound <= lo and hi <= bound
    # Conv2d: fan_in = in_channels/groups * kH * kW
    for conv, fan in ((nn.Conv2d(fan_in, 8, 3), fan_in * 9), (nn.Conv2d(fan_in, fan_in, 3, groups=fan_in), 9)):
        cb = 1 / math.sqrt(fan)
        for t in (conv.weight, conv.bias):
            lo, hi, _, _ = _stats(t)
            assert -cb <= lo and hi <= cb
        assert _stats(conv.weight)[1] > 0.5 * cb


def test_init_functions():
    gm.manual_seed(3)
    w = gm.empty(200, 300)
    fan_in, fan_out = 300, 200
    nn.init.kaiming_uniform_(w)  # a=0, leaky_relu: gain sqrt(2)
    b = math.sqrt(6 / fan_in)
    lo, hi, _, std = _stats(w)
    assert -b <= lo and hi <= b and hi > 0.99 * b and abs(std - b / math.sqrt(3)) < 0.02 * b
    nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu")
    assert abs(_stats(w)[3] - math.sqrt(2 / fan_out)) < 0.02 * math.sqrt(2 / fan_out)
    assert nn.init.kaiming_normal_(w) is w
    assert abs(_stats(w)[3] - math.sqrt(2 / fan_in)) < 0.02 * math.sqrt(2 / fan_in)
    nn.init.xavier_uniform_(w, gain=2.0)
    a = 2.0 * math.sqrt(6 / (fan_in + fan_out))
    lo, hi, _, _ = _stats(w)
    assert -a <= lo and hi <= a and hi > 0.99 * a
    nn.init.xavier_normal_(w)
    assert abs(_stats(w)[3] - math.sqrt(2 / (fan_in + fan_out))) < 0.02 * math.sqrt(2 / (fan_in + fan_out))
    nn.init.normal_(w, 3.0, 0.5)
    _, _, mean, std = _stats(w)
    assert abs(mean - 3.0) < 0.01 and abs(std - 0.5) < 0.01
    nn.init.uniform_(w, -2.0, -1.0)
    lo, hi, _, _ = _stats(w)
    assert -2.0 <= lo and hi <= -1.0
    for fn, v in ((nn.init.zeros_, 0.0), (nn.init.ones_, 1.0), (lambda t: nn.init.constant_(t, 2.5), 2.5)):
        fn(w)
        assert_close(w, np.full((200, 300), v, np.float32), 0, 0)
    # in place on a parameter that requires grad, and deterministic under manual_seed
    p = nn.Parameter(gm.empty(5, 5))
    gm.manual_seed(11)
    nn.init.kaiming_uniform_(p, a=math.sqrt(5))
    first = to_numpy(p)
    gm.manual_seed(11)
    nn.init.kaiming_uniform_(p, a=math.sqrt(5))
    assert_close(p, first, 0, 0) and p.requires_grad and p.is_leaf
    with pytest.warns(UserWarning, match="zero-element"):
        nn.init.kaiming_uniform_(gm.empty(0, 3))


def test_calculate_gain_and_fans():
    g = nn.init.calculate_gain
    assert g("linear") == 1 and g("conv2d") == 1 and g("sigmoid") == 1
    assert g("relu") == math.sqrt(2) and g("tanh") == 5 / 3 and g("selu") == 0.75
    assert g("leaky_relu") == math.sqrt(2 / (1 + 0.01 ** 2)) and g("leaky_relu", math.sqrt(5)) == math.sqrt(1 / 3)
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        g("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        g("leaky_relu", "x")
    assert nn.init._calculate_fan_in_and_fan_out(gm.empty(8, 4, 3, 5)) == (60, 120)
    assert nn.init._calculate_fan_in_and_fan_out(gm.empty(8, 4)) == (4, 8)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init._calculate_fan_in_and_fan_out(gm.empty(8))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        nn.init.kaiming_normal_(gm.empty(2, 2), mode="fan_avg")
    with pytest.raises(TypeError, match="expected a gpumemnet Tensor"):
        nn.init.uniform_(np.zeros(3))


def test_meta_init_advances_the_generator_like_cpu(meta):
    gm.manual_seed(5)
    nn.Linear(30, 20)
    after_cpu = gm.get_rng_state()
    gm.manual_seed(5)
    nn.Linear(30, 20, device="meta")
    assert gm.get_rng_state().equal(after_cpu)


# ---- layers --------------------------------------------------------------------------------------------------------
def _np_conv2d(x, w, b, stride, pad, dil, groups):
    """Direct loops: the independent reference."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (r - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (s - 1) - 1) // stride[1] + 1
    out = np.zeros((n, k, oh, ow))
    kg = k // groups
    for o in range(k):
        g = o // kg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dil[0] * (r - 1) + 1:dil[0],
                           j * stride[1]:j * stride[1] + dil[1] * (s - 1) + 1:dil[1]]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3)) + (b[o] if b is not None else 0)
    return out


def _nparams(m):
    return sum(p.numel() for p in m.parameters())


def test_linear_forward_and_shape():
    lin = nn.Linear(5, 3, dtype=gm.float64)
    x = np.random.default_rng(0).standard_normal((4, 5))
    assert _nparams(lin) == 5 * 3 + 3
    assert tuple(lin.weight.shape) == (3, 5) and tuple(lin.bias.shape) == (3,)
    y = lin(gm.tensor(x, dtype=gm.float64))
    assert_close(y, x @ to_numpy(lin.weight).T + to_numpy(lin.bias), 1e-12, 1e-12)
    assert lin.weight.dtype == gm.float64 and tuple(nn.Linear(5, 3, bias=False)(gm.randn(2, 7, 5)).shape) == (2, 7, 3)
    assert nn.Linear(5, 3, bias=False).bias is None and _nparams(nn.Linear(5, 3, bias=False)) == 15
    with pytest.raises(ValueError, match="in_features must be a non-negative int"):
        nn.Linear(-1, 3)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=2, dilation=2, groups=2, bias=False),
                                dict(padding="same"), dict(padding="valid", stride=(2, 1))])
def test_conv2d_forward_matches_loops_and_functional(kw):
    conv = nn.Conv2d(4, 6, 3, dtype=gm.float64, **kw)
    x = np.random.default_rng(1).standard_normal((2, 4, 7, 6))
    y = conv(gm.tensor(x, dtype=gm.float64))
    pad = {"same": (1, 1), "valid": (0, 0)}.get(kw.get("padding"), conv.padding)
    ref = _np_conv2d(x, to_numpy(conv.weight), None if conv.bias is None else to_numpy(conv.bias), conv.stride, pad,
                     conv.dilation, conv.groups)
    assert_close(y, ref, 1e-10, 1e-10)
    f = F.conv2d(gm.tensor(x, dtype=gm.float64), conv.weight, conv.bias, conv.stride, pad, conv.dilation, conv.groups)
    assert_close(y, f, 0, 0)
    assert _nparams(conv) == 6 * (4 // conv.groups) * 9 + (6 if conv.bias is not None else 0)


def test_conv_errors():
    with pytest.raises(ValueError, match=r"in_channels \(3\) must be divisible by groups \(2\)"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be a non-negative integer"):
        nn.Conv2d(3, -1, 3)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv2d(3, 3, 3, groups=0)
    assert nn.Conv2d(3, 0, 3).weight.shape == (0, 3, 3, 3)  # builds, as PyTorch's (its forward refuses it)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv2d(3, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="invalid padding string"):
        nn.Conv2d(3, 4, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="output_padding"):
        nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=2)


def test_conv_transpose2d_forward_and_output_size():
    ct = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2)
    assert tuple(ct.weight.shape) == (4, 3, 3, 3) and _nparams(ct) == 4 * 3 * 9 + 6
    x = gm.randn(2, 4, 5, 5)
    y = ct(x)
    assert tuple(y.shape) == (2, 6, 9, 9)
    assert_close(y, F.conv_transpose2d(x, ct.weight, ct.bias, 2, 1, 0, 2, 1), 0, 0)
    y2 = ct(x, output_size=(10, 10))
    assert tuple(y2.shape) == (2, 6, 10, 10)
    assert_close(y2, F.conv_transpose2d(x, ct.weight, ct.bias, 2, 1, 1, 2, 1), 0, 0)
    with pytest.raises(ValueError, match=r"valid sizes range from \(9..10\)"):
        ct(x, output_size=(12, 12))


def test_pooling_and_activation_layers_equal_functional():
    gm.manual_seed(0)
    x = gm.randn(2, 3, 8, 6)
    cases = [
        (nn.MaxPool2d(2), lambda t: F.max_pool2d(t, 2), (2, 3, 4, 3)),
        (nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True),
         (2, 3, 5, 4)),
        (nn.AvgPool2d(2, stride=1), lambda t: F.avg_pool2d(t, 2, 1), (2, 3, 7, 5)),
        (nn.AdaptiveAvgPool2d((2, 3)), lambda t: F.adaptive_avg_pool2d(t, (2, 3)), (2, 3, 2, 3)),
        (nn.GlobalAvgPool2d(), F.global_avg_pool2d, (2, 3)),
        (nn.GlobalMaxPool2d(), F.global_max_pool2d, (2, 3)),
        (nn.ReLU(), F.relu, (2, 3, 8, 6)),
        (nn.LeakyReLU(0.2), lambda t: F.leaky_relu(t, 0.2), (2, 3, 8, 6)),
        (nn.Sigmoid(), F.sigmoid, (2, 3, 8, 6)),
        (nn.Tanh(), F.tanh, (2, 3, 8, 6)),
        (nn.GELU(), F.gelu, (2, 3, 8, 6)),
        (nn.GELU("tanh"), lambda t: F.gelu(t, approximate="tanh"), (2, 3, 8, 6)),
        (nn.Flatten(), lambda t: t.reshape(2, -1), (2, 144)),
        (nn.Flatten(0, 2), lambda t: t.reshape(48, 6), (48, 6)),
        (nn.Upsample(scale_factor=2), lambda t: F.interpolate(t, scale_factor=2.0), (2, 3, 16, 12)),
        (nn.Upsample(size=(4, 3), mode="bilinear", align_corners=False),
         lambda t: F.interpolate(t, size=(4, 3), mode="bilinear", align_corners=False), (2, 3, 4, 3)),
        (nn.Identity(54, unused=True), lambda t: t, (2, 3, 8, 6)),
    ]
    for mod, fn, shape in cases:
        y = mod(x)
        assert tuple(y.shape) == shape, repr(mod)
        assert_close(y, fn(x), 0, 0, what=repr(mod))
        assert _nparams(mod) == 0
    out, idx = nn.MaxPool2d(2, return_indices=True)(x)
    assert_close(out, F.max_pool2d(x, 2), 0, 0) and idx.dtype == gm.int64 and tuple(idx.shape) == (2, 3, 4, 3)
    # inplace ReLU writes into its input
    t = gm.randn(3, 4)
    ref = np.maximum(to_numpy(t), 0)
    assert nn.ReLU(inplace=True)(t) is t
    assert_close(t, ref, 0, 0)


def test_dropout_layers_follow_training_mode():
    x = gm.ones(4, 8, 5, 5)
    for mod in (nn.Dropout(0.5), nn.Dropout2d(0.5)):
        mod.eval()
        assert_close(mod(x), to_numpy(x), 0, 0)
        mod.train()
        y = to_numpy(mod(x))
        assert set(np.unique(y)) <= {0.0, 2.0} and 0 < (y == 0).mean() < 1
        if isinstance(mod, nn.Dropout2d):  # whole channels
            per_channel = y.reshape(4, 8, -1)
            assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)


def test_batchnorm2d_training_eval_and_running_stats():
    bn = nn.BatchNorm2d(3, dtype=gm.float64)
    assert _nparams(bn) == 6 and bn.num_batches_tracked.dtype == gm.int64
    assert bn.running_mean._category == "parameter"
    assert_close(bn.weight, np.ones(3), 0, 0) and assert_close(bn.bias, np.zeros(3), 0, 0)
    rng = np.random.default_rng(2)
    rm, rv = np.zeros(3), np.ones(3)
    for step in range(3):
        x = rng.standard_normal((4, 3, 2, 5)) * 2 + 1
        y = bn(gm.tensor(x, dtype=gm.float64))
        mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
        assert_close(y, (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5), 1e-10, 1e-8)
        n = x.size / 3
        rm = 0.9 * rm + 0.1 * mean
        rv = 0.9 * rv + 0.1 * var * n / (n - 1)  # unbiased in the running estimate
        assert_close(bn.running_mean, rm, 1e-12, 1e-10)
        assert_close(bn.running_var, rv, 1e-12, 1e-10)
        assert int(bn.num_batches_tracked.item()) == step + 1
    bn.eval()
    x = rng.standard_normal((2, 3, 2, 2))
    assert_close(bn(gm.tensor(x, dtype=gm.float64)), (x - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5),
                 1e-10, 1e-8)
    assert int(bn.num_batches_tracked.item()) == 3  # eval does not count

    cum = nn.BatchNorm2d(2, momentum=None, dtype=gm.float64)
    means = []
    for _ in range(3):
        x = rng.standard_normal((3, 2, 2, 2)) + 5
        means.append(x.mean((0, 2, 3)))
        cum(gm.tensor(x, dtype=gm.float64))
    assert_close(cum.running_mean, np.mean(means, axis=0), 1e-12, 1e-10)  # cumulative average

    plain = nn.BatchNorm2d(2, affine=False, track_running_stats=False)
    assert _nparams(plain) == 0 and plain.running_mean is None and list(plain.state_dict()) == []
    plain.eval()
    x = gm.randn(3, 2, 4, 4)
    assert_close(plain(x), F.batch_norm(x, None, None, None, None, True, 0.1, 1e-5), 0, 0)
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input"):
        bn(gm.randn(3, 2, 2))


def test_loss_layers_equal_functional():
    gm.manual_seed(0)
    logits, target = gm.randn(6, 4), gm.tensor([0, 3, 1, 1, 2, 0])
    w = gm.rand(4) + 0.5
    assert_close(nn.CrossEntropyLoss()(logits, target), F.cross_entropy(logits, target), 0, 0)
    assert_close(nn.CrossEntropyLoss(weight=w, reduction="sum", label_smoothing=0.1)(logits, target),
                 F.cross_entropy(logits, target, weight=w, reduction="sum", label_smoothing=0.1), 0, 0)
    assert_close(nn.CrossEntropyLoss(ignore_index=1, reduction="none")(logits, target),
                 F.cross_entropy(logits, target, ignore_index=1, reduction="none"), 0, 0)
    a, b = gm.randn(3, 5), gm.randn(3, 5)
    assert_close(nn.MSELoss()(a, b), ((to_numpy(a) - to_numpy(b)) ** 2).mean(), 1e-6, 1e-5)
    assert_close(nn.L1Loss(reduction="sum")(a, b), np.abs(to_numpy(a) - to_numpy(b)).sum(), 1e-5, 1e-5)
    assert_close(nn.MSELoss(reduce=False)(a, b), F.mse_loss(a, b, reduction="none"), 0, 0)
    t = gm.rand(3, 5)
    pw = gm.rand(5) + 0.5
    assert_close(nn.BCEWithLogitsLoss(pos_weight=pw)(a, t), F.binary_cross_entropy_with_logits(a, t, pos_weight=pw),
                 0, 0)
    crit = nn.CrossEntropyLoss(weight=w)
    assert list(crit.state_dict()) == ["weight"]  # class weights are a buffer, as in PyTorch
    with pytest.raises(ValueError, match="elementwise is not a valid value for reduction"):
        nn.MSELoss(reduction="elementwise")


def test_small_cnn_gradients_against_finite_differences():
    """Input and parameter gradients of Conv-BN-ReLU-Pool-Linear in float64 (training-mode BatchNorm)."""
    gm.manual_seed(4)
    m = Tiny(dtype=gm.float64)
    x = gm.tensor(np.random.default_rng(5).standard_normal((3, 1, 6, 6)), dtype=gm.float64, requires_grad=True)
    gradcheck(lambda t: m(t), [x], what="Tiny(x)")

    w = np.random.default_rng(6).uniform(-1, 1, (3, 3))
    wt = gm.tensor(w, dtype=gm.float64)
    xd = x.detach()
    m.zero_grad()
    (m(xd) * wt).sum().backward()
    eps = 1e-6
    for name, p in m.named_parameters():
        analytic = to_numpy(p.grad)
        numeric = np.zeros(tuple(p.shape))
        flat = to_numpy(p).ravel()
        for j in range(flat.size):
            vals = []
            for sign in (1, -1):
                v = flat.copy()
                v[j] += sign * eps
                with gm.no_grad():
                    p.copy_(gm.tensor(v.reshape(p.shape), dtype=gm.float64))
                    vals.append(float((m(xd) * wt).sum()))
            numeric.flat[j] = (vals[0] - vals[1]) / (2 * eps)
            with gm.no_grad():
                p.copy_(gm.tensor(flat.reshape(p.shape), dtype=gm.float64))
        assert_close(analytic, numeric, 1e-6, 1e-5, what=f"d/d {name}", labels=("analytic", "numeric"))


def test_bn_model_matches_pytorch_in_train_mode():
    torch = pytest.importorskip("torch")
    ours = Tiny(c=3)

    class TTiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                                                torch.nn.MaxPool2d(2))
            self.fc = torch.nn.Linear(12, 3)

        def forward(self, x):
            return self.fc(self.features(x).flatten(1))
    theirs = TTiny()
    theirs.load_state_dict({k: torch.tensor(to_numpy(v)) for k, v in ours.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((4, 1, 6, 6)).astype(np.float32)
    for _ in range(2):
        assert_close(ours(gm.tensor(x)), theirs(torch.tensor(x)).detach().numpy(), 1e-5, 1e-4)
    for k, v in theirs.state_dict().items():
        assert_close(ours.state_dict()[k], v.numpy(), 1e-6, 1e-5, what=k)
