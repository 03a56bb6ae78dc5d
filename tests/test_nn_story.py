"""Seed 000's network (tests/story000.py) built on the meta device: the torchsummary table's output shapes and
Param # row by row, its memory, and the scope named in an out-of-memory error; against PyTorch (where torch is
importable) its parameter names and shapes, and a small copy's forward, backward and default init."""
import math

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet import _C
from gradcheck import assert_close, to_numpy
from nn_util import MiB, meta
from story000 import STORY_000_TABLE, Story000, _torch_story


# ---- seed 000's network ---------------------------------------------------------------------------------------------
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
