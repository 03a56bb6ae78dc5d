"""The storage-only integer dtypes uint8, int8, int16, int32 (kernels/common.h GM_U8..GM_I32): creation, NumPy
both ways, casts both ways (against NumPy and PyTorch), views, indexing, cat, comparisons, serialization; every op
without kernels for them raises TypeError naming the op and the dtype; meta bytes equal CPU bytes."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from gradcheck import to_numpy

NARROW = [gm.uint8, gm.int8, gm.int16, gm.int32]
NP = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
      "float32": np.float32, "float64": np.float64, "float16": np.float16, "bool": np.bool_}
ALL = [gm.float32, gm.float64, gm.float16, gm.bfloat16, gm.int64, gm.bool] + NARROW


def test_dtype_objects_match_torch():
    torch = pytest.importorskip("torch")
    for d in NARROW:
        t = getattr(torch, d.name)
        assert d.itemsize == t.itemsize and d.is_floating_point == t.is_floating_point
        assert gm.iinfo(d).max == torch.iinfo(t).max and gm.iinfo(d).min == torch.iinfo(t).min
    assert (gm.int, gm.short, gm.char) == (gm.int32, gm.int16, gm.int8)


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_creation_and_numpy_round_trip(d):
    npd = NP[d.name]
    assert to_numpy(gm.zeros(2, 3, dtype=d)).dtype == npd
    for t, ref in ((gm.zeros(2, 3, dtype=d), np.zeros((2, 3), npd)), (gm.ones(4, dtype=d), np.ones(4, npd)),
                   (gm.full((2,), 7, dtype=d), np.full(2, 7, npd)), (gm.tensor([[1, -2], [3, 4]], dtype=d),
                                                                    np.array([[1, -2], [3, 4]]).astype(npd)),
                   (gm.arange(2, 9, 3, dtype=d), np.arange(2, 9, 3).astype(npd))):
        assert t.dtype == d
        np.testing.assert_array_equal(to_numpy(t), ref)
        assert to_numpy(t).dtype == npd
    assert gm.empty(5, dtype=d).dtype == d and gm.zeros_like(gm.zeros(3, dtype=d)).dtype == d
    a = (np.arange(24).reshape(2, 3, 4) * 37 - 200).astype(npd)
    t = gm.from_numpy(a)
    assert t.dtype == d
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(gm.from_numpy(a[:, ::2, 1:]).numpy(), a[:, ::2, 1:])  # strided source
    assert t.tolist() == a.tolist() and f"dtype=gpumemnet.{d.name}" in repr(t)
    v = t[1, 2, 3].item()  # a Python int, as PyTorch's item() gives for every integer dtype
    assert type(v) is int and v == int(a[1, 2, 3])


def test_casts_every_pair_against_numpy_on_in_range_values():
    vals = np.array([0, 1, 2, 5, 7, 100, 127, 0, 1, 3])
    for src, dst in itertools.product(ALL, ALL):
        x = gm.tensor(vals, dtype=src)
        got = x.to(dst)
        assert got.dtype == dst
        ref = vals.astype(np.float64) if dst is not gm.bool else vals != 0
        if src is gm.bool:
            ref = (vals != 0).astype(ref.dtype)
        np.testing.assert_array_equal(to_numpy(got).astype(np.float64), np.asarray(ref, np.float64),
                                      err_msg=f"{src} -> {dst}")


def test_wrapping_casts_against_torch():
    torch = pytest.importorskip("torch")
    big = [300, -1, 70000, -129, 2 ** 40 + 5, -(2 ** 33) - 3, 255, 128]
    for d in NARROW:
        td = getattr(torch, d.name)
        np.testing.assert_array_equal(to_numpy(gm.tensor(big).to(d)), torch.tensor(big).to(td).numpy())
        # and back up, through every other integer type
        for e in NARROW:
            np.testing.assert_array_equal(to_numpy(gm.tensor(big).to(d).to(e)),
                                          torch.tensor(big).to(td).to(getattr(torch, e.name)).numpy())
    fl = [0.0, 1.7, -1.2, 99.9, -0.5, 126.5]  # in range for every type: truncation toward zero
    for d in (gm.int8, gm.int16, gm.int32):
        np.testing.assert_array_equal(to_numpy(gm.tensor(fl).to(d)),
                                      torch.tensor(fl).to(getattr(torch, d.name)).numpy())
    np.testing.assert_array_equal(to_numpy(gm.tensor([0.0, 1.7, 255.9]).byte()),
                                  torch.tensor([0.0, 1.7, 255.9]).byte().numpy())
    assert gm.tensor([0.0, 2.0]).to(gm.uint8).bool().tolist() == [False, True]
    assert gm.tensor([True, False]).byte().tolist() == [1, 0]
    assert gm.tensor([256]).byte().bool().tolist() == [False]  # 256 -> 0 as a byte, as PyTorch


def test_method_casts():
    x = gm.tensor([1.0, 2.0])
    assert (x.byte().dtype, x.char().dtype, x.short().dtype, x.int().dtype, x.int().long().dtype) == (
        gm.uint8, gm.int8, gm.int16, gm.int32, gm.int64)
    assert x.int().float().dtype == gm.float32 and x.byte().type_as(x).dtype == gm.float32


def test_image_pipeline():
    torch = pytest.importorskip("torch")
    img = (np.arange(48).reshape(4, 4, 3) * 5).astype(np.uint8)
    g = gm.from_numpy(img).permute(2, 0, 1).float().div(255)
    t = torch.from_numpy(img).permute(2, 0, 1).float().div(255)
    np.testing.assert_array_equal(to_numpy(g), t.numpy())
    back = (g * 255).round().to(gm.uint8)
    np.testing.assert_array_equal(to_numpy(back), img.transpose(2, 0, 1))


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_views_indexing_cat_and_assignment(d):
    a = (np.arange(24).reshape(4, 6) - 5).astype(NP[d.name])
    x = gm.from_numpy(a)
    np.testing.assert_array_equal(to_numpy(x[1:3, ::2]), a[1:3, ::2])
    np.testing.assert_array_equal(to_numpy(x.t()), a.T)
    np.testing.assert_array_equal(to_numpy(x.reshape(3, 8)), a.reshape(3, 8))
    np.testing.assert_array_equal(to_numpy(x[gm.tensor([3, 0])]), a[[3, 0]])
    np.testing.assert_array_equal(to_numpy(x[x > 4]), a[a > 4])
    np.testing.assert_array_equal(to_numpy(x.t().contiguous()), a.T)
    np.testing.assert_array_equal(to_numpy(gm.cat([x, x[:1]], 0)), np.concatenate([a, a[:1]], 0))
    np.testing.assert_array_equal(to_numpy(gm.stack([x, x], 1)), np.stack([a, a], 1))
    assert gm.cat([x, gm.ones(1, 6, dtype=gm.bool)]).dtype == d  # bool joins the integer type
    assert gm.cat([x, gm.ones(1, 6, dtype=gm.int64)]).dtype == gm.int64
    assert gm.cat([x, gm.ones(1, 6)]).dtype == gm.float32
    np.testing.assert_array_equal(to_numpy(x.split(2, 1)[2]), a[:, 4:])
    y = x.clone()
    y[0] = 3
    y[1, 2] = gm.tensor(9)
    y[2] = gm.tensor([1, 2, 3, 4, 5, 6])
    ref = a.copy()
    ref[0], ref[1, 2], ref[2] = 3, 9, [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(to_numpy(y), ref)
    y.fill_(2)
    assert to_numpy(y).tolist() == [[2] * 6] * 4
    y.copy_(gm.tensor(a.astype(np.float32)))
    np.testing.assert_array_equal(to_numpy(y), a)


def test_comparisons_against_torch():
    torch = pytest.importorskip("torch")
    a = np.array([0, 3, 200, 7], np.uint8)
    b = np.array([[1], [200]], np.int16)
    ga, gb, ta, tb = gm.from_numpy(a), gm.from_numpy(b), torch.from_numpy(a), torch.from_numpy(b)
    for op in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        np.testing.assert_array_equal(to_numpy(getattr(ga, op)(gb)), getattr(ta, op)(tb).numpy(), err_msg=op)
        np.testing.assert_array_equal(to_numpy(getattr(ga, op)(3)), getattr(ta, op)(3).numpy(), err_msg=op)
        np.testing.assert_array_equal(to_numpy(getattr(ga, op)(2.5)), getattr(ta, op)(2.5).numpy(), err_msg=op)
    # mixed with float or int64 tensors: promoted, as in PyTorch
    np.testing.assert_array_equal(to_numpy(ga * 2.0), (ta * 2.0).numpy())
    np.testing.assert_array_equal(to_numpy(ga + gm.tensor([1, 1, 1, 1])), (ta + torch.tensor([1, 1, 1, 1])).numpy())
    assert (ga + gm.tensor([1, 1, 1, 1])).dtype == gm.int64
    np.testing.assert_array_equal(to_numpy(ga.float() / 255), (ta.float() / 255).numpy())
    assert bool(ga.any()) and not bool(ga.all()) and ga.isnan().tolist() == [False] * 4


@pytest.mark.parametrize("dev", ["cpu", "meta"])
def test_unsupported_ops_raise_type_error_naming_op_and_dtype(dev):
    # (relu, relu6 and hardtanh clamp integers, as PyTorch's do: tests/test_pytorch_semantics10.py; conv2d and the
    # pools compute them in float64, as PyTorch's CPU kernels take them: tests/test_pytorch_semantics12.py; matmul
    # multiplies them in int64 and wraps back, as PyTorch's: tests/test_pytorch_semantics14.py)
    x = gm.zeros(2, 3, 4, 4, dtype=gm.uint8, device=dev)
    cases = {
        "var": lambda: x.var(), "softmax": lambda: x.softmax(1),
        "index_put_": lambda: gm._C.index_put_(x.reshape(-1), 0, gm.tensor([0], device=dev), 1, True),
    }
    for name, fn in cases.items():
        with pytest.raises(TypeError, match="uint8"):
            fn()


def _elementwise_and_reductions(lib, x, y):
    return {"add scalar": x + 1, "add": x + y, "rsub": 8 - x, "mul": x * y, "floordiv": x // y, "remainder": x % y,
            "neg": -x, "abs": x.abs(), "true div": x / y, "float scalar": x * 2.5, "clamp": x.clamp(-5, 5),
            "where": lib.where(x > 2, x, y), "sum": x.sum(), "sum dim": x.sum(1), "prod": x.prod(0),
            "amax": x.amax(1), "amin": x.amin(0), "max": x.max(), "max dim values": x.max(1).values,
            "max dim indices": x.max(1).indices, "argmax": x.argmax(1), "cumsum": x.cumsum(1),
            "sort": x.sort(1).values, "topk": x.topk(1).indices}


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_arithmetic_and_reductions_wrap_as_pytorchs(d):
    """Computed in int64 and cast back: the same values, dtypes and two's-complement wrap-around as PyTorch's
    native kernels (the extremes of each dtype included), e.g. torchvision's AutoAugment on int32."""
    torch = pytest.importorskip("torch")
    info = np.iinfo(d.name)
    a = np.array([[100 % (info.max + 1), 7, info.max], [info.min, 3, 1]], dtype=d.name)
    b = np.array([[3, 2, 1], [1, 5, 7]], dtype=d.name)
    got = _elementwise_and_reductions(gm, gm.tensor(a), gm.tensor(b))
    want = _elementwise_and_reductions(torch, torch.from_numpy(a), torch.from_numpy(b))
    for name, w in want.items():
        g = got[name]
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], name
        np.testing.assert_array_equal(to_numpy(g), w.numpy(), err_msg=name)


def test_error_messages_name_the_op():
    x = gm.zeros(3, dtype=gm.int16)
    with pytest.raises(TypeError, match=r"var: input of dtype int16 is not supported"):
        x.var()
    with pytest.raises(TypeError, match=r"softmax.*int16"):
        x.softmax(0)


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_meta_bytes_equal_cpu(d):
    def run(dev):
        base = gm.memory.memory_stats(dev)["allocated"]["current"]
        x = gm.zeros(7, 5, dtype=d, device=dev)
        ys = [x.float(), x.to(gm.int64), gm.full((3, 3), 1, dtype=d, device=dev), gm.cat([x, x]), x > 1,
              x.t().contiguous(), gm.arange(11, dtype=d, device=dev)]
        out = gm.memory.memory_stats(dev)["allocated"]["current"] - base, [(tuple(y.shape), y.dtype) for y in ys]
        del ys, x
        return out
    cpu, meta = run("cpu"), run("meta")
    assert cpu == meta and cpu[0] > 0


def test_save_load_round_trip(tmp_path):
    sd = {d.name: gm.tensor([1, 2, 120], dtype=d) for d in NARROW}
    gm.save(sd, tmp_path / "x.safetensors")
    back = gm.load(tmp_path / "x.safetensors")
    for d in NARROW:
        assert back[d.name].dtype == d and back[d.name].tolist() == sd[d.name].tolist()


def test_view_as_a_dtype_reads_the_same_bytes_as_numpy():
    a = (np.arange(48) * 7919).astype(np.int32).reshape(2, 3, 8)
    t = gm.tensor(a)
    for d in (gm.uint8, gm.int16, gm.int64, gm.float32, gm.float64):
        np.testing.assert_array_equal(to_numpy(t.view(d)), a.view(NP[d.name]))
    np.testing.assert_array_equal(to_numpy(t[:, 1:, 2:6].view(gm.int64)), a[:, 1:, 2:6].view(np.int64))
    np.testing.assert_array_equal(to_numpy(t.view(gm.uint8)[..., 4:12].view(gm.int32)), a[..., 1:3])
    with pytest.raises(RuntimeError, match="divisible"):
        t[..., :3].view(gm.int64)
    with pytest.raises(RuntimeError, match="stride"):
        t.transpose(1, 2).view(gm.uint8)
    with pytest.raises(RuntimeError, match="cannot be 0"):
        t[0, 0, 0].view(gm.int64)
