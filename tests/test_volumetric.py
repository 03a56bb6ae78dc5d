"""The 3-D layers (nn/_functional_volumetric.py, nn/modules/volumetric.py) against PyTorch: conv3d,
conv_transpose3d, max/avg/adaptive 3-D pooling, values and gradients in float64 and float32 across their
arguments, the modules' shapes, attributes and initialisation, a small 3-D CNN trained a few steps next to
PyTorch's, and the memory estimator running a 3-D model on meta."""
import math

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float64": dict(rtol=1e-10, atol=1e-10), "float32": dict(rtol=2e-4, atol=2e-4)}


def _run(fn_gm, fn_torch, shapes, device, dtype="float64", seed=0, grad=True, ints=()):
    """fn on inputs of the given shapes in both libraries: values, and gradients of a random weighting of the
    output with respect to every input. ints: positions of outputs compared exactly (indices)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    ga = [gm.tensor(a, dtype=getattr(gm, dtype), device=device, requires_grad=grad) for a in arrays]
    ta = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=grad) for a in arrays]
    og, ot = fn_gm(*ga), fn_torch(*ta)
    if isinstance(ot, tuple):
        for i in ints:
            assert og[i].dtype == gm.int64 and tuple(og[i].shape) == tuple(ot[i].shape)
            np.testing.assert_array_equal(to_np(og[i]), ot[i].numpy())
        og, ot = og[0], ot[0]
    assert tuple(og.shape) == tuple(ot.shape)
    assert str(og.dtype).split(".")[-1] == str(ot.dtype).split(".")[-1]
    assert og.is_contiguous()
    np.testing.assert_allclose(to_np(og), ot.detach().double().numpy(), **TOL[dtype])
    if not grad:
        return
    w = rng.standard_normal(tuple(ot.shape))
    (og * gm.tensor(w, dtype=og.dtype, device=device)).sum().backward()
    (ot * torch.tensor(w, dtype=ot.dtype)).sum().backward()
    for a, b in zip(ga, ta):
        np.testing.assert_allclose(to_np(a.grad), b.grad.double().numpy(), **TOL[dtype])


CONV3D = [
    dict(),
    dict(stride=2),
    dict(padding=1),
    dict(padding=(1, 0, 2), stride=(2, 1, 3), dilation=(2, 1, 1)),
    dict(padding="same"),
    dict(padding="same", dilation=(2, 1, 2)),
    dict(padding="valid", stride=(1,)),
]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kw", CONV3D, ids=str)
def test_conv3d(kw, dtype, device):
    _run(lambda x, w, b: F.conv3d(x, w, b, **kw), lambda x, w, b: TF.conv3d(x, w, b, **kw),
         [(2, 4, 7, 6, 8), (6, 4, 3, 2, 3), (6,)], device, dtype)


@pytest.mark.parametrize("kw,shapes", [
    (dict(groups=2, padding=1), [(2, 4, 5, 6, 5), (6, 2, 3, 3, 3)]),
    (dict(groups=4, stride=2), [(1, 4, 5, 6, 5), (4, 1, 3, 3, 3)]),         # depthwise
    (dict(padding="same"), [(2, 4, 5, 6, 5), (6, 4, 2, 4, 2)]),              # even kernels: the extra at the end
    (dict(), [(4, 5, 6, 5), (6, 4, 2, 4, 2)]),                              # unbatched
    (dict(stride=3), [(1, 2, 1, 3, 3), (3, 2, 1, 1, 1)]),                   # 1x1x1, one depth
], ids=str)
def test_conv3d_groups_same_unbatched(kw, shapes, device):
    _run(lambda x, w: F.conv3d(x, w, **kw), lambda x, w: TF.conv3d(x, w, **kw), shapes, device)


CONV_T = [
    dict(),
    dict(stride=2),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=(3, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 2), output_padding=(1, 1, 0)),
    dict(dilation=2, output_padding=1),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kw", CONV_T, ids=str)
def test_conv_transpose3d(kw, dtype, device):
    _run(lambda x, w, b: F.conv_transpose3d(x, w, b, **kw), lambda x, w, b: TF.conv_transpose3d(x, w, b, **kw),
         [(2, 4, 4, 3, 5), (4, 3, 3, 2, 3), (3,)], device, dtype)


def test_conv_transpose3d_groups_and_unbatched(device):
    _run(lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, groups=2),
         lambda x, w, b: TF.conv_transpose3d(x, w, b, stride=2, groups=2),
         [(2, 4, 4, 3, 5), (4, 3, 3, 2, 3), (6,)], device)
    _run(lambda x, w: F.conv_transpose3d(x, w, padding=1), lambda x, w: TF.conv_transpose3d(x, w, padding=1),
         [(4, 3, 3, 5), (4, 2, 3, 3, 3)], device)


MAXPOOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), dilation=(2, 1, 1), ceil_mode=True, padding=(1, 1, 0)),
    dict(kernel_size=(1, 3, 2), stride=(2, 2, 1), ceil_mode=True),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kw", MAXPOOL, ids=str)
def test_max_pool3d(kw, dtype, device):
    _run(lambda x: F.max_pool3d(x, **kw, return_indices=True), lambda x: TF.max_pool3d(x, **kw, return_indices=True),
         [(2, 3, 7, 6, 5)], device, dtype, ints=(1,))
    _run(lambda x: F.max_pool3d(x, **kw), lambda x: TF.max_pool3d(x, **kw), [(3, 7, 6, 5)], device, dtype)


def test_max_pool3d_ties_take_the_first(device):
    x = np.zeros((1, 1, 4, 4, 4))
    x[0, 0, 1, 0, 1] = x[0, 0, 0, 1, 1] = x[0, 0, 1, 1, 0] = 5.0
    out, idx = F.max_pool3d(gm.tensor(x, device=device), 2, return_indices=True)
    ref, ridx = TF.max_pool3d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(to_np(idx), ridx.numpy())
    np.testing.assert_array_equal(to_np(out), ref.numpy())


AVGPOOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
    dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), ceil_mode=True, padding=(1, 1, 0), divisor_override=5),
    dict(kernel_size=(2, 3, 1), padding=(1, 1, 0), count_include_pad=False),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kw", AVGPOOL, ids=str)
def test_avg_pool3d(kw, dtype, device):
    _run(lambda x: F.avg_pool3d(x, **kw), lambda x: TF.avg_pool3d(x, **kw), [(2, 3, 7, 6, 5)], device, dtype)


@pytest.mark.parametrize("size", [1, 3, (2, None, 4), (7, 6, 5), (4, 4, 3), (9, 2, 8)], ids=str)
def test_adaptive_pool3d(size, device):
    _run(lambda x: F.adaptive_avg_pool3d(x, size), lambda x: TF.adaptive_avg_pool3d(x, size), [(2, 3, 7, 6, 5)],
         device)
    _run(lambda x: F.adaptive_max_pool3d(x, size, True), lambda x: TF.adaptive_max_pool3d(x, size, True),
         [(2, 3, 7, 6, 5)], device, ints=(1,))
    _run(lambda x: F.adaptive_max_pool3d(x, size), lambda x: TF.adaptive_max_pool3d(x, size), [(3, 7, 6, 5)],
         device, "float32")


def test_without_grad_and_empty_batch(device):
    _run(lambda x, w: F.conv3d(x, w, padding=1), lambda x, w: TF.conv3d(x, w, padding=1),
         [(2, 2, 4, 4, 4), (3, 2, 3, 3, 3)], device, grad=False)
    _run(lambda x: F.max_pool3d(x, 2), lambda x: TF.max_pool3d(x, 2), [(0, 2, 4, 4, 4)], device, grad=False)
    _run(lambda x: F.avg_pool3d(x, 2), lambda x: TF.avg_pool3d(x, 2), [(0, 2, 4, 4, 4)], device, grad=False)
    _run(lambda x: F.adaptive_max_pool3d(x, 2), lambda x: TF.adaptive_max_pool3d(x, 2), [(0, 2, 4, 4, 4)], device,
         grad=False)
    _run(lambda x, w: F.conv3d(x, w), lambda x, w: TF.conv3d(x, w), [(0, 2, 4, 4, 4), (3, 2, 1, 1, 1)], device,
         grad=False)
    _run(lambda x, w: F.conv_transpose3d(x, w), lambda x, w: TF.conv_transpose3d(x, w),
         [(0, 2, 4, 4, 4), (2, 3, 1, 1, 1)], device, grad=False)


# ---- modules ---------------------------------------------------------------------------------------------------
def test_conv3d_module_attributes_and_init(device):
    m, t = gm.nn.Conv3d(4, 6, (3, 1, 2), stride=2, padding=1, groups=2, device=device), \
        torch.nn.Conv3d(4, 6, (3, 1, 2), stride=2, padding=1, groups=2)
    for attr in ("kernel_size", "stride", "padding", "dilation", "output_padding", "groups", "padding_mode",
                 "in_channels", "out_channels", "transposed", "_reversed_padding_repeated_twice"):
        assert tuple(np.atleast_1d(getattr(m, attr))) == tuple(np.atleast_1d(getattr(t, attr))), attr
    assert tuple(m.weight.shape) == tuple(t.weight.shape) == (6, 2, 3, 1, 2)
    assert repr(m) == repr(t)
    bound = 1 / math.sqrt(2 * 3 * 1 * 2)  # kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    for p in (m.weight, m.bias):
        v = to_np(p)
        assert v.min() >= -bound and v.max() <= bound and v.std() > bound / 4
    n = gm.nn.Conv3d(2, 3, 3, bias=False, padding="same", dilation=2)
    assert n.bias is None and n.padding == "same" and repr(n) == repr(torch.nn.Conv3d(2, 3, 3, bias=False,
                                                                                        padding="same", dilation=2))


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (2, 0, 1), "same"], ids=str)
def test_conv3d_module_padding_modes(mode, padding, device):
    t = torch.nn.Conv3d(2, 3, (3, 2, 3), padding=padding, padding_mode=mode).double()
    m = gm.nn.Conv3d(2, 3, (3, 2, 3), padding=padding, padding_mode=mode, device=device, dtype=gm.float64)
    with gm.no_grad():
        m.weight.copy_(gm.tensor(t.weight.detach().numpy(), device=device))
        m.bias.copy_(gm.tensor(t.bias.detach().numpy(), device=device))
    _run(m, t, [(2, 2, 4, 5, 6)], device)


def test_conv_transpose3d_module_output_size(device):
    t = torch.nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1).double()
    m = gm.nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1, device=device, dtype=gm.float64)
    assert tuple(m.weight.shape) == (4, 2, 3, 3, 3) and repr(m) == repr(t)
    with gm.no_grad():
        m.weight.copy_(gm.tensor(t.weight.detach().numpy(), device=device))
        m.bias.copy_(gm.tensor(t.bias.detach().numpy(), device=device))
    _run(lambda x: m(x, output_size=(8, 7, 8)), lambda x: t(x, output_size=(8, 7, 8)), [(1, 4, 4, 4, 4)], device)
    _run(lambda x: m(x, output_size=[1, 2, 7, 8, 7]), lambda x: t(x, output_size=[1, 2, 7, 8, 7]),
         [(1, 4, 4, 4, 4)], device)


def test_pool_modules(device):
    cases = [("MaxPool3d", (3,), dict(stride=2, padding=1, ceil_mode=True)),
             ("AvgPool3d", ((2, 3, 2),), dict(count_include_pad=False, padding=1)),
             ("AdaptiveAvgPool3d", ((2, 3, None),), {}), ("AdaptiveMaxPool3d", (2,), {})]
    for name, args, kw in cases:
        m, t = getattr(gm.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
        assert repr(m) == repr(t)
        _run(m, t, [(2, 3, 5, 6, 7)], device)
    m, t = gm.nn.MaxPool3d(2, return_indices=True), torch.nn.MaxPool3d(2, return_indices=True)
    _run(m, t, [(2, 3, 5, 6, 7)], device, ints=(1,))


# ---- a small 3-D CNN trained next to PyTorch's --------------------------------------------------------------------
def _net(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d(2),
                         nn.Conv3d(4, 6, (1, 3, 3), stride=(1, 2, 2), padding_mode="replicate", padding=(0, 1, 1)),
                         nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(6, 3))


def test_small_3d_cnn_trains_as_pytorch(device):
    torch.manual_seed(0)
    tnet = _net(torch).double()
    net = _net(gm).to(device).double()
    with gm.no_grad():
        for p, q in zip(net.parameters(), tnet.parameters()):
            p.copy_(gm.tensor(q.detach().numpy(), device=device))
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 2, 6, 8, 8)), rng.integers(0, 3, 4)
    opt = gm.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tnet.parameters(), lr=0.1, momentum=0.9)
    for _ in range(4):
        loss = F.cross_entropy(net(gm.tensor(x, device=device)), gm.tensor(y, device=device))
        tloss = TF.cross_entropy(tnet(torch.tensor(x)), torch.tensor(y))
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-9)
    for p, q in zip(net.parameters(), tnet.parameters()):
        np.testing.assert_allclose(to_np(p), q.detach().numpy(), rtol=1e-8, atol=1e-10)


def test_3d_model_runs_on_meta_in_the_estimator():
    nn = gm.nn
    model = nn.Sequential(nn.Conv3d(2, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(), nn.MaxPool3d(2),
                          nn.ConvTranspose3d(8, 4, 2, stride=2), nn.AvgPool3d(2), nn.AdaptiveMaxPool3d(2),
                          nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(4, 3))
    est = gm.memory.estimate(model, (2, 8, 8, 8), batch_size=4, optimizer=gm.optim.SGD)
    params = sum(p.numel() * 4 for p in model.parameters())
    assert est.peak > params + 4 * 2 * 8 ** 3 * 4  # at least the weights and the input batch
    x = gm.empty(4, 2, 8, 8, 8, device="meta")
    assert tuple(F.conv3d(x, gm.empty(5, 2, 3, 3, 3, device="meta"), stride=2).shape) == (4, 5, 3, 3, 3)


# ---- F.interpolate on 5-D inputs ---------------------------------------------------------------------------------
RESIZES = [dict(size=(7, 3, 12)), dict(size=4), dict(scale_factor=2), dict(scale_factor=(2.4, 0.5, 1.7)),
           dict(scale_factor=2.5, recompute_scale_factor=True), dict(size=(8, 10, 12)), dict(scale_factor=(1, 1, 1))]


@pytest.mark.parametrize("mode,align_corners", [("nearest", None), ("nearest-exact", None), ("trilinear", False),
                                                ("trilinear", True), ("area", None)])
@pytest.mark.parametrize("kw", RESIZES, ids=str)
def test_interpolate_5d(kw, mode, align_corners, device):
    _run(lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw),
         lambda x: TF.interpolate(x, mode=mode, align_corners=align_corners, **kw), [(2, 3, 4, 5, 6)], device)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_interpolate_5d_nearest_indices(dtype, device):
    """The source index of every output along one dim, for many sizes and factors (PyTorch computes them in the
    input's precision and rounds to float32 before the floor: near-integer positions decide)."""
    rng = np.random.default_rng(3)
    for trial in range(300):
        n, mode = int(rng.integers(1, 13)), ("nearest", "nearest-exact")[trial % 2]
        kw = dict(size=(int(rng.integers(1, 40)), 1, 1)) if trial % 3 == 0 else \
            dict(scale_factor=(float(np.round(rng.uniform(0.3, 4.5), int(rng.integers(0, 4)))), 1, 1))
        x = np.arange(n, dtype=dtype).reshape(1, 1, n, 1, 1)
        if "scale_factor" in kw and int(n * kw["scale_factor"][0]) < 1:
            continue
        ours = F.interpolate(gm.tensor(x, device=device), mode=mode, **kw)
        np.testing.assert_array_equal(to_np(ours).ravel(), TF.interpolate(torch.tensor(x), mode=mode, **kw).numpy()
                                      .ravel(), err_msg=f"{n} {mode} {kw}")


def test_interpolate_5d_nearest_backward_is_the_adjoint(device):
    """A factor of 2.1 doubles a depth of 4: PyTorch's forward reads depths 0,0,0,1,1,2,2,3 but its backward sums
    the outputs in pairs as for a factor of 2; ours sums each output into the depth the forward read."""
    x = gm.zeros(1, 1, 4, 1, 1, device=device, requires_grad=True)
    out = F.interpolate(x, scale_factor=(2.1, 1, 1), mode="nearest")
    out.backward(gm.arange(1.0, 9.0, device=device).reshape(1, 1, 8, 1, 1))
    np.testing.assert_array_equal(to_np(x.grad).ravel(), [6, 9, 13, 8])


def test_upsample_module_5d(device):
    for m, t in [(gm.nn.Upsample(scale_factor=2, mode="trilinear"), torch.nn.Upsample(scale_factor=2,
                                                                                     mode="trilinear")),
                 (gm.nn.Upsample(size=(3, 5, 2)), torch.nn.Upsample(size=(3, 5, 2)))]:
        _run(m, t, [(1, 2, 3, 4, 5)], device)


@pytest.mark.parametrize("size", [(0, 2, 2), (2, 0, 2), (3, 2, 0)], ids=str)
def test_adaptive_pool3d_to_an_empty_size(size, device):
    """An empty result; its backward gives a zero gradient (PyTorch's adaptive_avg_pool3d_backward refuses)."""
    _run(lambda x: F.adaptive_avg_pool3d(x, size), lambda x: TF.adaptive_avg_pool3d(x, size), [(1, 2, 3, 4, 4)],
         device, grad=False)
    _run(lambda x: F.adaptive_max_pool3d(x, size, True), lambda x: TF.adaptive_max_pool3d(x, size, True),
         [(1, 2, 3, 4, 4)], device, grad=False, ints=(1,))
    x = gm.ones(1, 2, 3, 4, 4, device=device, requires_grad=True)
    F.adaptive_max_pool3d(x, size).sum().backward()
    assert tuple(x.grad.shape) == (1, 2, 3, 4, 4) and not to_np(x.grad).any()
