"""gpumemnet.nn's Module mechanics: Parameter, registration and naming, deduplication of shared parameters,
train/eval, zero_grad, apply, requires_grad_, containers, the allocator scope each call runs under, hooks,
to(dtype/device/meta), state_dict round trips and load_state_dict reporting every missing/unexpected key and shape
mismatch at once, and repr strings exactly as PyTorch prints them (for the same module tree)."""
from collections import OrderedDict

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C
from gradcheck import assert_close, to_numpy
from nn_util import Tiny, meta


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
        "  (1): BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)\n"
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
            "BatchNorm2d(8, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=True)",
        nn.Upsample(scale_factor=2): "Upsample(scale_factor=2.0, mode='nearest')",
        nn.Upsample(size=(4, 4), mode="bilinear"): "Upsample(size=(4, 4), mode='bilinear')",
        nn.CrossEntropyLoss(): "CrossEntropyLoss()",
        nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()]):
            "ModuleList(\n  (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)\n  (3): ReLU()\n)",
        nn.ModuleList(): "ModuleList()",
    }
    for mod, text in cases.items():
        assert repr(mod) == text
