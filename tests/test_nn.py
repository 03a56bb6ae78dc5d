"""gpumemnet.nn: Parameter, Module mechanics, state_dict, repr, init, every layer, and the story-000 network.

- Module mechanics: registration and naming, deduplication of shared parameters, train/eval, zero_grad, apply,
  requires_grad_, to(dtype/device), hooks, and the allocator scope each call runs under.
- state_dict round trips, and load_state_dict reporting every missing/unexpected key and shape mismatch at once.
- repr strings exactly as PyTorch prints them (for the same module tree).
- init: bounds and moments of each initialisation for given fans.
- layers: forward equals the functional op (and a NumPy reference for Linear/Conv2d/BatchNorm), parameter counts,
  output shapes; gradients of a small CNN, inputs and parameters, against float64 finite differences.
- seed 000's network built on the meta device: the torchsummary table's output shapes and Param # row by row,
  its memory, and the scope named in an out-of-memory error.
PyTorch comparisons run only where torch is importable."""
import gc
import math
from collections import OrderedDict

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C
from gradcheck import assert_close, gradcheck, to_numpy
from story000 import STORY_000_TABLE

MiB = 1024 * 1024


@pytest.fixture
def meta():
    """Meta tensors made by a test are freed and the meta cache emptied afterwards: test_allocator checks that
    nothing is left on meta."""
    yield "meta"
    gm.memory.set_limit("meta", None)
    gc.collect()
    gm.memory.empty_cache("meta")


class Tiny(nn.Module):
    """Conv -> BN -> ReLU -> MaxPool -> Flatten -> Linear: every kind of state a CNN has."""

    def __init__(self, c=2, classes=3, dtype=None, device=None):
        super().__init__()
        kw = dict(dtype=dtype, device=device)
        self.features = nn.Sequential(nn.Conv2d(1, c, 3, **kw), nn.BatchNorm2d(c, **kw), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.fc = nn.Linear(c * 2 * 2, classes, **kw)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


# ---- Parameter ----------------------------------------------------------------------------------------------
def test_parameter_is_a_flagged_tensor_sharing_storage():
    data = gm.randn(3, 4)
    p = nn.Parameter(data)
    assert type(p) is gm.Tensor  # not a subclass: autograd's fast path checks the exact type
    assert isinstance(p, nn.Parameter) and not isinstance(data, nn.Parameter)
    assert not isinstance(p.detach(), nn.Parameter) and not isinstance(p * 2, nn.Parameter)
    assert not isinstance(np.zeros(3), nn.Parameter)
    assert p.requires_grad and p.is_leaf and p._is_param
    assert p._storage_id == data._storage_id and p._category == "parameter"
    assert not nn.Parameter(gm.randn(2), requires_grad=False).requires_grad
    with gm.no_grad():
        data.fill_(2.0)
    assert float(p.sum()) == 24.0
    assert repr(p).startswith("Parameter containing:\ntensor(") and repr(p).endswith("requires_grad=True)")
    assert "Parameter" not in repr(data)


def test_parameter_errors():
    with pytest.raises(TypeError, match="must be a gpumemnet Tensor"):
        nn.Parameter(np.zeros(3))
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(gm.arange(3))
    assert not nn.Parameter(gm.arange(3), requires_grad=False).requires_grad


# ---- registration, naming, traversal --------------------------------------------------------------------------
def test_registration_and_names():
    m = Tiny()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias", "fc.weight",
                     "fc.bias"]
    assert [n for n, _ in m.named_buffers()] == ["features.1.running_mean", "features.1.running_var",
                                                 "features.1.num_batches_tracked"]
    assert [n for n, _ in m.named_children()] == ["features", "fc"]
    assert [n for n, _ in m.named_modules()] == ["", "features", "features.0", "features.1", "features.2",
                                                 "features.3", "fc"]
    assert [n for n, _ in m.features.named_parameters(prefix="f", recurse=False)] == []
    assert [n for n, _ in m.fc.named_parameters(prefix="head")] == ["head.weight", "head.bias"]
    assert len(list(m.parameters())) == 6 and len(list(m.buffers())) == 3 and len(list(m.modules())) == 7
    assert m.get_submodule("features.1") is m.features[1]
    assert m.get_parameter("features.0.bias") is m.features[0].bias
    assert m.get_buffer("features.1.running_var") is m.features[1].running_var
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        m.get_submodule("features.nope")
    with pytest.raises(AttributeError, match="'Tiny' object has no attribute 'nope'"):
        m.nope


def test_setattr_routes_and_rejects():
    m = nn.Module()
    m.w = nn.Parameter(gm.zeros(2))
    m.child = nn.Linear(2, 2)
    m.register_buffer("stat", gm.zeros(2))
    m.register_buffer("scratch", gm.zeros(2), persistent=False)
    m.plain = 3
    assert list(m._parameters) == ["w"] and list(m._modules) == ["child"]
    assert list(m._buffers) == ["stat", "scratch"] and m.plain == 3
    assert list(m.state_dict()) == ["w", "stat", "child.weight", "child.bias"]  # scratch is not persistent
    with pytest.raises(TypeError, match=r"cannot assign 'Tensor' as parameter 'w' \(gpumemnet.nn.Parameter or None"):
        m.w = gm.zeros(2)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'child'"):
        m.child = 3
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'stat'"):
        m.stat = 3
    with pytest.raises(KeyError, match='must not contain "."'):
        m.register_buffer("a.b", gm.zeros(1))
    with pytest.raises(KeyError, match="already exists"):
        m.register_parameter("plain", None)
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter 'q'"):
        m.register_parameter("q", gm.zeros(1))
    with pytest.raises(ValueError, match="non-leaf"):
        m.register_parameter("q", _non_leaf_param())
    m.w = None  # an absent parameter stays registered as None, like bias=False
    assert "w" in m._parameters and [n for n, _ in m.named_parameters()] == ["child.weight", "child.bias"]
    m.child = nn.ReLU()  # a module replaces a module
    del m.child
    assert "child" not in m._modules
    m.stat = gm.ones(2)  # a buffer may be replaced by a tensor
    assert float(m.stat.sum()) == 2.0
    with pytest.raises(AttributeError, match="before Module.__init__"):
        class Bad(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(gm.zeros(1))
        Bad()


def _non_leaf_param():
    p = nn.Parameter(gm.zeros(1))
    q = p * 2
    q._is_param = True
    return q


def test_shared_parameters_are_listed_once():
    a = nn.Linear(3, 3)
    b = nn.Linear(3, 3)
    b.weight = a.weight  # tied weights
    seq = nn.Sequential(a, b, a)  # and a module used twice
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "1.bias"]
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 6
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"]


def test_train_eval_zero_grad_apply_requires_grad():
    m = Tiny()
    assert all(x.training for x in m.modules())
    assert m.eval() is m and not any(x.training for x in m.modules())
    m.features.train()
    assert m.features[1].training and not m.training and not m.fc.training
    with pytest.raises(ValueError, match="boolean"):
        m.train("yes")

    m.train()
    m(gm.randn(2, 1, 6, 6)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    grads = [p.grad for p in m.parameters()]
    m.zero_grad(set_to_none=False)
    assert all(p.grad is g and float(g.abs().sum()) == 0.0 for p, g in zip(m.parameters(), grads))
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())

    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "Sequential", "Linear", "Tiny"]
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.fc.requires_grad_()
    assert [n for n, p in m.named_parameters() if p.requires_grad] == ["fc.weight", "fc.bias"]


def test_containers():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and seq[0] is layers[0] and seq[-1] is layers[2] and list(seq) == layers
    head = seq[1:]
    assert isinstance(head, nn.Sequential) and list(head) == layers[1:]
    assert list(head._modules) == ["1", "2"]  # a slice keeps the names (PyTorch's behaviour)
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and list(seq._modules) == ["0", "1", "2", "3"]
    del seq[1]
    assert list(seq._modules) == ["0", "1", "2"] and seq[1] is layers[2]
    seq.insert(0, nn.Identity())
    assert isinstance(seq[0], nn.Identity) and seq[1] is layers[0]
    with pytest.raises(IndexError, match="out of range"):
        seq[10]
    named = nn.Sequential(OrderedDict([("conv", nn.Conv2d(1, 1, 1)), ("act", nn.ReLU())]))
    assert [n for n, _ in named.named_parameters()] == ["conv.weight", "conv.bias"]
    x = gm.randn(4, 2)
    assert_close(seq(x), F.sigmoid(layers[2](layers[0](x))), 1e-6, 1e-6)

    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    ml.append(nn.ReLU())
    ml += [nn.Tanh()]
    assert len(ml) == 5 and isinstance(ml[-1], nn.Tanh) and isinstance(ml[1:3], nn.ModuleList)
    assert [n for n, _ in ml.named_parameters()][:2] == ["0.weight", "0.bias"]
    with pytest.raises(NotImplementedError):
        ml(x)
    md = nn.ModuleDict({"a": nn.Linear(1, 2), "b": nn.ReLU()})
    md["c"] = nn.Tanh()
    assert list(md.keys()) == ["a", "b", "c"] and "a" in md and len(md) == 3
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    assert isinstance(md.pop("b"), nn.ReLU) and list(md) == ["a", "c"]


# ---- scopes and hooks ------------------------------------------------------------------------------------------
def test_each_call_runs_under_its_module_scope():
    m = Tiny()
    seen = []
    handle = nn.register_module_forward_hook(lambda mod, args, out: seen.append(_C.get_scope()))
    try:
        before = _C.get_scope()
        m(gm.randn(1, 1, 6, 6))
        assert _C.get_scope() == before
    finally:
        handle.remove()
    assert seen == ["features.0 forward", "features.1 forward", "features.2 forward", "features.3 forward",
                    "features forward", "fc forward", "Tiny forward"]
    assert m.fc.weight._name == "fc.weight" and m.features[1].running_mean._name == "features.1.running_mean"

    # a module added after the first call learns its path from its parent
    m.features.append(nn.Identity())
    seen.clear()
    m.features[4].register_forward_hook(lambda mod, args, out: seen.append(_C.get_scope()))
    m.fc = nn.Linear(8, 3)
    m.features[3] = nn.MaxPool2d(4)
    m(gm.randn(1, 1, 10, 10))
    assert seen == ["features.4 forward"] and m.fc._scope == "fc forward"


def test_scope_is_restored_when_forward_raises():
    lin = nn.Linear(3, 2)
    before = _C.get_scope()
    with pytest.raises(Exception):
        lin(gm.randn(2, 4))
    assert _C.get_scope() == before


def test_forward_hooks_modify_and_remove():
    lin = nn.Linear(2, 2)
    h1 = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda mod, args, out: out + 1)
    y = lin(gm.randn(3, 2))
    assert_close(y, np.broadcast_to(to_numpy(lin.bias) + 1, (3, 2)), 1e-6, 1e-6)
    h1.remove()
    h2.remove()
    x = gm.randn(3, 2)
    assert_close(lin(x), F.linear(x, lin.weight, lin.bias), 0, 0)


# ---- device and dtype ------------------------------------------------------------------------------------------
def test_to_dtype_converts_parameters_in_place_and_keeps_structure():
    m = Tiny()
    m(gm.randn(2, 1, 6, 6)).sum().backward()
    old = m.fc.weight
    ref = to_numpy(old).astype(np.float64)
    opt = gm.optim.SGD(m.parameters(), lr=1.0)
    assert m.double() is m
    # the same Parameter objects (PyTorch's `param.data = ...`): an optimizer made before the move still works
    assert m.fc.weight is old and isinstance(m.fc.weight, nn.Parameter) and old.dtype == gm.float64
    assert all(p.dtype == gm.float64 and p._category == "parameter" for p in m.parameters())
    assert m.fc.weight.grad.dtype == gm.float64 and m.fc.weight.grad._category == "gradient"
    assert m.features[1].running_var.dtype == gm.float64
    assert m.features[1].num_batches_tracked.dtype == gm.int64  # integers are not cast
    assert_close(m.fc.weight, ref, 0, 0)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in Tiny().named_parameters()]
    m(gm.randn(2, 1, 6, 6, dtype=gm.float64))  # still runs, in float64
    same = m.fc.weight
    assert m.to(gm.float64).fc.weight is same  # nothing to do: objects kept
    with pytest.raises(TypeError, match="floating point"):
        m.to(gm.int64)
    before = to_numpy(m.fc.weight).copy()
    opt.step()  # the optimizer holds the converted parameters: gradients in float64 step them
    assert_close(m.fc.weight, before - to_numpy(m.fc.weight.grad), 1e-12, 1e-12)


def test_to_meta_and_to_empty(meta):
    m = Tiny()
    m.to("meta")
    assert all(t._device == "meta" for t in list(m.parameters()) + list(m.buffers()))
    assert m.fc.weight._category == "parameter"
    assert tuple(m(gm.randn(2, 1, 6, 6, device="meta")).shape) == (2, 3)
    m2 = Tiny(device="meta")
    m2.to_empty(device="cpu")
    assert all(t._device == "cpu" for t in m2.parameters())
    with pytest.raises(RuntimeError, match="meta tensor has no data"):
        Tiny(device="meta").to("cpu")
    del m, m2


# ---- state_dict ------------------------------------------------------------------------------------------------
def test_state_dict_round_trip():
    gm.manual_seed(1)
    a = Tiny()
    a(gm.randn(4, 1, 6, 6))  # moves the running statistics away from their initial values
    sd = a.state_dict()
    assert list(sd) == ["features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias",
                        "features.1.running_mean", "features.1.running_var", "features.1.num_batches_tracked",
                        "fc.weight", "fc.bias"]
    assert all(not t.requires_grad and not isinstance(t, nn.Parameter) for t in sd.values())
    assert sd["fc.weight"]._storage_id == a.fc.weight._storage_id  # detached, not copied
    assert a.state_dict(keep_vars=True)["fc.weight"] is a.fc.weight
    assert int(sd["features.1.num_batches_tracked"].item()) == 1

    b = Tiny()
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == [] and tuple(res) == ([], [])
    for k, v in b.state_dict().items():
        assert_close(v, sd[k], 0, 0, what=k)
    assert b.fc.weight is not a.fc.weight and b.fc.weight._storage_id != a.fc.weight._storage_id
    assert isinstance(b.fc.weight, nn.Parameter) and b.fc.weight.requires_grad
    x = gm.randn(2, 1, 6, 6)
    a.eval(), b.eval()
    assert_close(a(x), b(x), 0, 0)
    # values from NumPy arrays are accepted too (a checkpoint read by other tools)
    b.load_state_dict({k: to_numpy(v) for k, v in sd.items()})


def test_load_state_dict_reports_every_problem_at_once():
    m = Tiny()
    sd = m.state_dict()
    sd = OrderedDict((k, v) for k, v in sd.items() if k not in ("fc.bias", "features.1.running_var"))
    sd["fc.weight"] = gm.zeros(3, 9)
    sd["features.0.weight"] = gm.zeros(2, 1, 5, 5)
    sd["extra.weight"] = gm.zeros(1)
    before = to_numpy(m.features[0].bias)
    sd["features.0.bias"] = gm.full((2,), 7.0)
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    text = str(info.value)
    assert text.startswith("Error(s) in loading state_dict for Tiny:\n\t")
    lines = text.split("\n\t")[1:]
    assert lines == [
        'Missing key(s) in state_dict: "features.1.running_var", "fc.bias". ',
        'Unexpected key(s) in state_dict: "extra.weight". ',
        "size mismatch for features.0.weight: copying a param with shape (2, 1, 5, 5) from checkpoint, the shape "
        "in current model is (2, 1, 3, 3).",
        "size mismatch for fc.weight: copying a param with shape (3, 9) from checkpoint, the shape in current model "
        "is (3, 8).",
    ]
    assert_close(m.features[0].bias, before, 0, 0)  # nothing was copied

    # strict=False: missing/unexpected are returned, shape mismatches still raise
    with pytest.raises(RuntimeError, match=r"size mismatch for fc.weight.*\(3, 9\).*\(3, 8\)"):
        m.load_state_dict(sd, strict=False)
    del sd["fc.weight"], sd["features.0.weight"]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert missing == ["features.0.weight", "features.1.running_var", "fc.weight", "fc.bias"]
    assert unexpected == ["extra.weight"]
    assert_close(m.features[0].bias, np.full(2, 7.0, np.float32), 0, 0)
    with pytest.raises(TypeError, match="dict-like"):
        m.load_state_dict([1, 2])


def test_load_state_dict_casts_dtype_and_keeps_parameter_identity():
    m = Tiny()
    w = m.fc.weight
    sd = {k: v.double() if v.dtype == gm.float32 else v for k, v in Tiny().state_dict().items()}
    m.load_state_dict(sd)
    assert m.fc.weight is w and w.dtype == gm.float32
    assert_close(w, to_numpy(sd["fc.weight"]).astype(np.float32), 0, 0)


# ---- repr ------------------------------------------------------------------------------------------------------
def test_repr_matches_pytorch():
    m = nn.Sequential(
        nn.Conv2d(3, 64, kernel_size=3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2), nn.Dropout(), nn.Sequential(nn.Flatten(), nn.Linear(4, 5)),
    )
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
        "  (2): ReLU(inplace=True)\n"
        "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
        "  (4): Dropout(p=0.5, inplace=False)\n"
        "  (5): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Linear(in_features=4, out_features=5, bias=True)\n"
        "  )\n"
        ")")
    cases = {
        nn.Conv2d(4, 4, 3, stride=2, dilation=2, groups=4, bias=False):
            "Conv2d(4, 4, kernel_size=(3, 3), stride=(2, 2), dilation=(2, 2), groups=4, bias=False)",
        nn.Conv2d(3, 3, 3, padding="same"): "Conv2d(3, 3, kernel_size=(3, 3), stride=(1, 1), padding=same)",
        nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1):
            "ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))",
        nn.ReLU(): "ReLU()",
        nn.LeakyReLU(0.2, inplace=True): "LeakyReLU(negative_slope=0.2, inplace=True)",
        nn.GELU(): "GELU(approximate='none')",
        nn.Sigmoid(): "Sigmoid()",
        nn.Dropout2d(0.1): "Dropout2d(p=0.1, inplace=False)",
        nn.AvgPool2d(2): "AvgPool2d(kernel_size=2, stride=2, padding=0)",
        nn.AdaptiveAvgPool2d((1, 1)): "AdaptiveAvgPool2d(output_size=(1, 1))",
        nn.GlobalAvgPool2d(): "GlobalAvgPool2d()",
        nn.Identity(): "Identity()",
        nn.Linear(3, 1, bias=False): "Linear(in_features=3, out_features=1, bias=False)",
        nn.BatchNorm2d(8, momentum=None, affine=False):
            "BatchNorm2d(8, eps=1e-05, momentum=None, affine=False, track_running_stats=True)",
        nn.Upsample(scale_factor=2): "Upsample(scale_factor=2.0, mode='nearest')",
        nn.Upsample(size=(4, 4), mode="bilinear"): "Upsample(size=(4, 4), mode='bilinear')",
        nn.CrossEntropyLoss(): "CrossEntropyLoss()",
        nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()]):
            "ModuleList(\n  (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)\n  (3): ReLU()\n)",
        nn.ModuleList(): "ModuleList()",
    }
    for mod, text in cases.items():
        assert repr(mod) == text


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
    assert gm.get_rng_state() == after_cpu


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
    with pytest.raises(ValueError, match="out_channels must be a positive integer"):
        nn.Conv2d(3, 0, 3)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv2d(3, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="asymmetric padding"):
        nn.Conv2d(3, 4, 2, padding="same")
    with pytest.raises(ValueError, match="invalid padding string"):
        nn.Conv2d(3, 4, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be 'zeros'"):
        nn.Conv2d(3, 4, 3, padding_mode="reflect")
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


# ---- seed 000's network ---------------------------------------------------------------------------------------------
def _build_story(self, m, widths=(64, 128, 256, 512), in_hw=(384, 160), hidden=19000, classes=19000,
                 device=None):
    """The network behind seed 000's torchsummary table: VGG-like 3x3 convolutions padded by 1 with ReLU applied
    functionally (torchsummary lists no ReLU rows), five 2x2 max pools, Dropout2d, and two huge Linear layers.
    Input 2 x 384 x 160 (the first row's output is 64 x 384 x 160). `m` is gpumemnet.nn or torch.nn, so that one
    definition serves both."""
    c1, c2, c3, c4 = widths
    convs = [(2, c1), (c1, c2), (c2, c3), (c3, c3), (c3, c4), (c4, c4), (c4, c4), (c4, c4)]
    for i, (a, b) in enumerate(convs, 1):
        setattr(self, f"conv{i}", m.Conv2d(a, b, kernel_size=3, padding=1, device=device))
    for i in range(1, 6):
        setattr(self, f"pool{i}", m.MaxPool2d(2, 2))
    self.dropout = m.Dropout2d(0.5)
    self.fc1 = m.Linear(c4 * (in_hw[0] // 32) * (in_hw[1] // 32), hidden, device=device)
    self.fc2 = m.Linear(hidden, classes, device=device)


def _story_forward(self, x, relu):
    x = self.pool1(relu(self.conv1(x)))
    x = self.pool2(relu(self.conv2(x)))
    x = self.pool3(relu(self.conv4(relu(self.conv3(x)))))
    x = self.pool4(relu(self.conv6(relu(self.conv5(x)))))
    x = self.pool5(relu(self.conv8(relu(self.conv7(x)))))
    x = self.dropout(x)
    return self.fc2(relu(self.fc1(x.flatten(1))))


class Story000(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        _build_story(self, nn, **kw)

    def forward(self, x):
        return _story_forward(self, x, F.relu)


def _torch_story(torch, **kw):
    class TorchStory000(torch.nn.Module):
        def __init__(self):
            super().__init__()
            _build_story(self, torch.nn, **kw)

        def forward(self, x):
            return _story_forward(self, x, torch.nn.functional.relu)
    return TorchStory000()




def _summary_rows(model, x):
    """torchsummary's rows: every leaf module's call, in call order, with its output shape and parameters."""
    rows = []

    def hook(mod, args, out):
        if not mod._modules and mod is not model:
            n = sum(p.numel() for p in mod.parameters())
            shape = "[" + ", ".join(["-1"] + [str(s) for s in out.shape[1:]]) + "]"
            rows.append(f"{type(mod).__name__ + '-' + str(len(rows) + 1):>20}  {shape:>25} {n:>15,}")
    handle = nn.register_module_forward_hook(hook)
    try:
        out = model(x)
    finally:
        handle.remove()
    return rows, out


def test_story_000_network_on_meta(meta):
    base = gm.memory.memory_stats("meta")["by_category"]["parameter"]["current"]
    gm.manual_seed(0)
    model = Story000(device="meta")
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    assert n == 953_937_904  # the table's Param # summed: 953.9M, 99% of it in fc1 and fc2
    used = gm.memory.memory_stats("meta")["by_category"]["parameter"]["current"] - base
    # 3.55 GiB without a byte of data; a block may exceed its request by the allocator's rounding (512 B, or the
    # < 1 MiB rest of a large segment that is not worth splitting off)
    assert n * 4 <= used < n * 4 + MiB * len(params)
    assert gm.memory.memory_allocated("cpu") < 1 << 30
    assert model.fc1.weight.numel() * 4 == 2_334_720_000  # 2.17 GiB: the seed's Adam OOM "Tried to allocate 2.18 GiB"

    x = gm.empty(1, 2, 384, 160, device="meta")
    rows, out = _summary_rows(model, x)
    assert "\n".join(rows) == STORY_000_TABLE
    assert tuple(out.shape) == (1, 19000) and out._device == "meta"
    del model, params, x, out


def test_story_000_scope_appears_in_meta_oom(meta):
    model = Story000(device="meta")
    x = gm.empty(1, 2, 384, 160, device="meta")
    # room for the input's neighbours but not for conv1's 15 MiB output
    gm.memory.set_limit("meta", gm.memory.memory_reserved("meta") + 8 * MiB)
    try:
        with pytest.raises(gm.OutOfMemoryError) as info:
            model(x)
    finally:
        gm.memory.set_limit("meta", None)
    assert info.value.scope == "conv1 forward"
    assert "tried to allocate 15.00 MiB (other in conv1 forward)" in str(info.value)
    assert info.value.by_category["parameter"] >= 953_937_904 * 4
    assert _C.get_scope() == ""
    del model, x


# ---- PyTorch ---------------------------------------------------------------------------------------------------------
def test_story_000_names_and_shapes_match_pytorch(meta):
    torch = pytest.importorskip("torch")
    ours = Story000(device="meta")
    theirs = _torch_story(torch, device="meta")
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    del ours


def test_small_cnn_forward_and_backward_match_pytorch_with_copied_weights():
    torch = pytest.importorskip("torch")
    gm.manual_seed(2)
    ours = Story000(widths=(4, 8, 8, 8), in_hw=(64, 32), hidden=16, classes=5)
    theirs = _torch_story(torch, widths=(4, 8, 8, 8), in_hw=(64, 32), hidden=16, classes=5)
    theirs.load_state_dict({k: torch.tensor(to_numpy(v)) for k, v in ours.state_dict().items()})
    ours.eval(), theirs.eval()
    x = np.random.default_rng(0).standard_normal((2, 2, 64, 32)).astype(np.float32)
    y = ours(gm.tensor(x))
    ty = theirs(torch.tensor(x))
    assert_close(y, ty.detach().numpy(), 1e-5, 1e-4)
    y.sum().backward()
    ty.sum().backward()
    for (k, p), (k2, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert k == k2
        assert_close(p.grad, tp.grad.numpy(), 1e-5, 1e-3, what=k)

    # the default initialisation has PyTorch's bounds: 1/sqrt(fan_in) of the layer's weight, for weight and bias
    for name, tmod in theirs.named_children():
        if name.startswith(("conv", "fc")):
            bound = 1 / math.sqrt(torch.nn.init._calculate_fan_in_and_fan_out(tmod.weight)[0])
            for t in (getattr(ours, name).weight, getattr(ours, name).bias):
                assert float(t.detach().abs().max()) <= bound, name
            assert float(tmod.weight.detach().abs().max()) <= bound


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
