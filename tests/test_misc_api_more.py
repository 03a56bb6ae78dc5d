"""More of test_misc_api.py (split to keep each file under 800 lines): put / index_reduce in place, the dtype
queries, the *_copy forms, Tensor forms of functions, as_strided, windows, histogram, nonzero_static and the
module-level settings, against PyTorch; on the CPU and on CUDA."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
X = R.randn(4, 6)


def _t(l, values, device, **kw):
    return l.tensor(values, device=device, **kw) if l is gm else l.tensor(values, **kw)


def test_copies_own_their_storage(device):
    t = gm.tensor(X, device=device)
    for out in (gm.alias_copy(t), gm.t_copy(t), gm.view_copy(t, [24]), gm.select_copy(t, 0, 1), gm.unbind_copy(t)[0]):
        assert out._storage_id != t._storage_id and out.is_contiguous()
    assert torch.t_copy(torch.tensor(X)).is_contiguous()


def test_in_place_put_and_index_reduce(device):
    for lib, dev in ((gm, device), (torch, "cpu")):
        a = lib.tensor(X, device=dev) if lib is gm else lib.tensor(X)
        a.put_(_t(lib, [0, -1, 7], dev), _t(lib, [1.0, 2.0, 3.0], dev, dtype=lib.float64))
        a.put_(_t(lib, [0, 0], dev), _t(lib, [1.0, 2.0], dev, dtype=lib.float64), accumulate=True)
        a.index_reduce_(1, _t(lib, [0, 0], dev), a[:, 4:] * 2, "amax")
        b = a.put(_t(lib, [3], dev), _t(lib, [9.0], dev, dtype=lib.float64))
        if lib is gm:
            ga, gb = to_np(a), to_np(b)
        else:
            np.testing.assert_allclose(ga, a.numpy(), rtol=1e-12)
            np.testing.assert_allclose(gb, b.numpy(), rtol=1e-12)
    g = gm.index_put(gm.zeros(4, device=device), (gm.tensor([1, 3], device=device),),
                     gm.tensor([5.0, 6.0], device=device))
    np.testing.assert_array_equal(to_np(g), torch.index_put(torch.zeros(4), (torch.tensor([1, 3]),),
                                                            torch.tensor([5.0, 6.0])).numpy())
    h = gm.zeros(4, device=device)
    gm.index_put_(h, (gm.tensor([0, 0], device=device),), gm.tensor([1.0, 2.0], device=device), accumulate=True)
    assert to_np(h).tolist() == [3.0, 0.0, 0.0, 0.0]


def test_dtype_queries_match_pytorch():
    names = ["float32", "float64", "float16", "bfloat16", "int64", "bool", "uint8", "int8", "int16", "int32"]
    for a in names:
        for b in names:
            assert str(gm.promote_types(getattr(gm, a), getattr(gm, b))).split(".")[-1] == \
                str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[-1], (a, b)
            assert gm.can_cast(getattr(gm, a), getattr(gm, b)) == torch.can_cast(getattr(torch, a), getattr(torch, b))
            for sa, sb in (((2,), (2,)), ((), (2,)), ((2,), ()), ((), ())):
                got = gm.result_type(gm.zeros(sa, dtype=getattr(gm, a)), gm.zeros(sb, dtype=getattr(gm, b)))
                want = torch.result_type(torch.zeros(sa, dtype=getattr(torch, a)),
                                         torch.zeros(sb, dtype=getattr(torch, b)))
                assert str(got).split(".")[-1] == str(want).split(".")[-1], (a, b, sa, sb)
        for number in (2, 2.5, True):
            for shape in ((2,), ()):
                got = gm.result_type(gm.zeros(shape, dtype=getattr(gm, a)), number)
                want = torch.result_type(torch.zeros(shape, dtype=getattr(torch, a)), number)
                assert str(got).split(".")[-1] == str(want).split(".")[-1], (a, number, shape)
    assert gm.result_type(2, 2.5) == gm.float32 and str(torch.result_type(2, 2.5)) == "torch.float32"
    assert gm.typename(gm.zeros(2)) == torch.typename(torch.zeros(2)) == "torch.FloatTensor"
    assert gm.typename(3) == torch.typename(3) == "int" and gm.typename(int) == torch.typename(int) == "int"
    assert gm.typename(gm.nn.Linear(1, 1)).endswith("nn.modules.linear.Linear")


def test_tensor_forms_of_functions(device):
    a, b = gm.tensor([1.0, 3.0, 3.0, 7.0], device=device), torch.tensor([1.0, 3.0, 3.0, 7.0])
    np.testing.assert_array_equal(to_np(a.histc(4, 0, 8)), b.histc(4, 0, 8).numpy())
    assert a[1:2].is_nonzero() == b[1:2].is_nonzero() and not gm.zeros(1, device=device).is_nonzero()
    gm.manual_seed(0)
    s = a.multinomial(3, replacement=True)
    assert tuple(s.shape) == (3,) and s.dtype == gm.int64 and set(to_np(s).tolist()) <= {0, 1, 2, 3}


def test_extras_match_pytorch(device):
    a, b = gm.tensor(X, device=device), torch.tensor(X)
    ya, yb = gm.empty_strided((2, 3), (1, 2), device=device), torch.empty_strided((2, 3), (1, 2))
    assert ya.stride() == yb.stride() and ya.dtype == gm.float32
    c = a.clone()
    c.as_strided_((3, 2), (1, 3), 2)
    d = b.clone()
    d.as_strided_((3, 2), (1, 3), 2)
    np.testing.assert_array_equal(to_np(c), d.numpy())
    idx = [5, -1, 0, 11, 7, 13, -8]  # out of range: PyTorch wraps each coordinate
    for got, want in zip(gm.unravel_index(gm.tensor(idx, device=device), (3, 4)),
                         torch.unravel_index(torch.tensor(idx), (3, 4))):
        np.testing.assert_array_equal(to_np(got), want.numpy())
    assert to_np(gm.vander(gm.tensor([1, 2, 3], device=device))).tolist() == \
        torch.vander(torch.tensor([1, 2, 3])).tolist()
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window"):
        for n, periodic in ((0, True), (1, False), (5, True), (6, False), (7, True)):
            np.testing.assert_allclose(to_np(getattr(gm, name)(n, periodic, device=device)),
                                       getattr(torch, name)(n, periodic).numpy(), atol=1e-6, err_msg=name)
        assert getattr(gm, name)(4, dtype=gm.float64).dtype == gm.float64
    for n, periodic, beta in ((0, True, 12.0), (1, True, 3.0), (5, True, 12.0), (6, False, 5.0), (7, True, 0.5)):
        np.testing.assert_allclose(to_np(gm.kaiser_window(n, periodic, beta, dtype=gm.float64, device=device)),
                                   torch.kaiser_window(n, periodic, beta, dtype=torch.float64).numpy(), rtol=1e-10)
    np.testing.assert_allclose(to_np(gm.hamming_window(6, True, 0.5, 0.5, device=device)),
                               torch.hamming_window(6, True, 0.5, 0.5).numpy(), atol=1e-7)
    for kw in ({"bins": 4}, {"bins": 3, "range": (-1.0, 1.0)}, {"bins": 5, "density": True}):
        ha, hb = gm.histogram(a, **kw), torch.histogram(b, **kw)
        np.testing.assert_allclose(to_np(ha.hist), hb.hist.numpy(), rtol=1e-12)
        np.testing.assert_allclose(to_np(ha.bin_edges), hb.bin_edges.numpy(), rtol=1e-12)
    edges = [-2.0, 0.0, 0.5, 3.0]
    ha = a.histogram(gm.tensor(edges, dtype=gm.float64, device=device), weight=a.abs())
    hb = b.histogram(torch.tensor(edges, dtype=torch.float64), weight=b.abs())
    np.testing.assert_allclose(to_np(ha.hist), hb.hist.numpy(), rtol=1e-12)
    for size in (0, 3, 30):
        np.testing.assert_array_equal(to_np(gm.nonzero_static(a > 0.5, size=size)),
                                      torch.nonzero_static(b > 0.5, size=size).numpy())
    np.testing.assert_array_equal(to_np((a > 0).nonzero_static(size=4, fill_value=9)),
                                  (b > 0).nonzero_static(size=4, fill_value=9).numpy())


def test_module_level_settings_and_factories(device):
    with pytest.warns(UserWarning, match="deprecated"):
        got = gm.range(1, 4)
    np.testing.assert_array_equal(to_np(got), torch.range(1, 4).numpy())
    with pytest.warns(UserWarning):
        np.testing.assert_allclose(to_np(gm.range(0, 1, 0.3, device=device)), torch.range(0, 1, 0.3).numpy(),
                                   rtol=1e-6)
        assert gm.range(5, 1, -2, dtype=gm.int64).tolist() == torch.range(5, 1, -2, dtype=torch.int64).tolist()
    x = gm.ones(2, device=device)
    assert gm.asarray(x) is x and gm.asarray(x, copy=True) is not x
    assert gm.asarray(x, dtype=gm.float64).dtype == gm.float64 and gm.asarray([1, 2]).dtype == gm.int64
    assert gm.asarray(np.zeros(3, np.float32), requires_grad=True).requires_grad
    for mode, number in (("warn", 1), ("error", 2), ("default", 0), (1, 1), (0, 0)):
        gm.set_deterministic_debug_mode(mode)
        torch.set_deterministic_debug_mode(mode)
        assert gm.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode() == number
    assert not gm.are_deterministic_algorithms_enabled()
    before = gm.get_num_interop_threads()
    gm.set_num_interop_threads(3)
    assert gm.get_num_interop_threads() == 3
    gm.set_num_interop_threads(before)
    gm.set_warn_always(True)
    assert gm.is_warn_always_enabled()
    gm.set_warn_always(False)
    assert not gm.is_warn_always_enabled() and not gm.is_storage(x) and not torch.is_storage(torch.ones(2))


def test_vander_gradient(device):
    x = gm.tensor([0.5, -1.5, 2.0, 0.0], dtype=gm.float64, device=device, requires_grad=True)
    gm.vander(x, 4).sum().backward()  # finite at 0 too (x**0's gradient would be 0 * 0**-1 = NaN)
    v = np.array([0.5, -1.5, 2.0, 0.0])
    np.testing.assert_allclose(to_np(x.grad), 1 + 2 * v + 3 * v ** 2, rtol=1e-12)


def test_legacy_methods_match_pytorch(device):
    a, b = gm.arange(6.0, device=device), torch.arange(6.0)
    for args in ((2, 3), ([1, 2],), (), ((2,),)):
        ya, yb = a.new(*args), b.new(*args)
        assert tuple(ya.shape) == tuple(yb.shape) and ya.dtype == gm.float32 and ya.device.type == a.device.type
    assert tuple(a.new(gm.Size([2, 2])).shape) == tuple(b.new(torch.Size([2, 2])).shape)
    np.testing.assert_array_equal(to_np(a.new([1, 2])), b.new([1, 2]).numpy())
    cases = [lambda t: t.resize_(2, 2), lambda t: t.resize_((3, 3))[:2], lambda t: t.resize_as_(t[:3] * 0),
             lambda t: t.reshape(2, 3).t().resize_(6), lambda t: t[2:].resize_(2, 2), lambda t: t.resize_(0)]
    for case in cases:
        ya, yb = case(a.clone()), case(b.clone())
        assert tuple(ya.shape) == tuple(yb.shape) and ya.stride() == yb.stride()
        np.testing.assert_array_equal(to_np(ya), yb.numpy())
    c = a.clone()
    assert c.resize_(4, 4) is c and to_np(c).reshape(-1)[:6].tolist() == list(range(6))
    for t in (gm.zeros(2, 3, device=device), torch.zeros(2, 3)):
        assert t.t().dim_order() == (1, 0) and t.dim_order() == (0, 1)
        assert not (t.is_sparse or t.is_sparse_csr or t.is_quantized or t.is_nested)
    assert gm.zeros(2, device=device).layout is gm.strided and repr(gm.strided) == "gpumemnet.strided"
    if device == "cpu":
        for lib in (gm, torch):
            t = lib.arange(4.0)
            t.apply_(lambda v: v * v + 1)
            t.map_(lib.tensor([1.0, 2.0, 3.0, 4.0]), lambda x, y: x - y)
            assert t.tolist() == [0.0, 0.0, 2.0, 6.0]
            u = lib.ones(2, 3, dtype=lib.int64)
            u.map_(lib.tensor([1, 2, 3]), lambda x, y: x * y)
            assert u.tolist() == [[1, 2, 3], [1, 2, 3]]


GRADIENT_CASES = [
    ({}, None), ({"spacing": 2.0, "dim": 1, "edge_order": 2}, None), ({"spacing": (1.5, 2.0)}, None),
    ({"dim": -1, "edge_order": 2}, [0.0, 1.0, 3.0, 4.0, 7.0, 8.0]), ({"dim": [1]}, [0.0, 0.5, 2.0, 2.5, 3.0, 5.0]),
    ({"dim": 0, "spacing": 0.5}, None),
]


@pytest.mark.parametrize("case", range(len(GRADIENT_CASES)))
def test_gradient_matches_pytorch(device, case):
    kw, coords = GRADIENT_CASES[case]
    a = gm.tensor(X, dtype=gm.float64, device=device, requires_grad=True)
    b = torch.tensor(X, requires_grad=True)
    ka, kb = dict(kw), dict(kw)
    if coords is not None:
        ka["spacing"] = [gm.tensor(coords, dtype=gm.float64, device=device)]
        kb["spacing"] = [torch.tensor(coords, dtype=torch.float64)]
    ya, yb = gm.gradient(a, **ka), torch.gradient(b, **kb)
    assert len(ya) == len(yb)
    for i, (p, q) in enumerate(zip(ya, yb)):
        np.testing.assert_allclose(to_np(p), q.detach().numpy(), rtol=1e-12, atol=1e-12)
    sum(((p * (i + 1)).sum() for i, p in enumerate(ya)), gm.zeros((), dtype=gm.float64, device=device)).backward()
    sum((q * (i + 1)).sum() for i, q in enumerate(yb)).backward()
    np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_of_integers_and_empty_permuted(device):
    got, want = gm.gradient(gm.arange(5, device=device), spacing=2), torch.gradient(torch.arange(5), spacing=2)
    assert got[0].dtype == gm.float32
    np.testing.assert_array_equal(to_np(got[0]), want[0].numpy())
    for size, order in (((2, 3, 4), (0, 2, 1)), ((2, 3), (1, 0)), ((5,), (0,)), ((2, 0, 3), (2, 0, 1))):
        assert gm.empty_permuted(size, order, device=device).stride() == torch.empty_permuted(size, order).stride()
    assert gm.empty_permuted((2, 3), (1, 0), dtype=gm.int64).dtype == gm.int64


def test_shapes_and_gradients_on_meta():
    """The memory estimator runs models on meta tensors: the composites give their shapes there, backward too."""
    m = gm.zeros(4, 6, device="meta", requires_grad=True)
    i = gm.zeros(2, 6, dtype=gm.int64, device="meta")
    calls = {
        (4, 6): [lambda: m.scatter_reduce(0, i, m[:2], "sum"), lambda: m.scatter_reduce(0, i, m[:2], "mean"),
                 lambda: m.masked_scatter(m > 0, m), lambda: m.renorm(2, 0, 1.0),
                 lambda: gm.select_scatter(m, m[0], 0, 1), lambda: gm.slice_scatter(m, m[:, :2], 1, 0, 2),
                 lambda: gm.diagonal_scatter(m, m.diagonal()), lambda: gm.gradient(m)[0],
                 lambda: m.put(i[0, :3], m[0, :3])],
        (4,): [lambda: m.nanmedian(1).values, lambda: m.nanquantile(0.5, 1)],
        (4, 12): [lambda: gm.column_stack([m, m])], (4, 6, 2): [lambda: gm.dstack([m, m])],
        (2, 2): [lambda: m.as_strided((2, 2), (1, 6))], (4, 3): [lambda: m.hsplit(2)[1]],
    }
    for shape, fns in calls.items():
        for fn in fns:
            out = fn()
            assert tuple(out.shape) == shape and out.device.type == "meta"
            out.sum().backward()
    assert tuple(m.grad.shape) == (4, 6)
    assert m.output_nr == 0 and torch.ones(2, requires_grad=True).output_nr == 0


def test_feature_dropout_norm_except_dim_and_more(device):
    x = gm.ones(8, 16, 5, device=device)
    gm.manual_seed(5)
    y = to_np(gm.feature_dropout(x, 0.25, True))
    per_channel = y[:, :, 0]
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)} and (y == y[:, :, :1]).all()  # whole channels
    assert abs((per_channel == 0).mean() - 0.25) < 0.15
    assert gm.feature_dropout(x, 0.5, False) is x and float(gm.feature_dropout(x, 1.0, True).sum()) == 0.0
    z = gm.ones(2, 3, device=device)
    assert gm.feature_dropout_(z, 0.5, False) is z
    v = R.randn(3, 4, 2)
    for p, dim in ((2, 0), (2, 1), (1, 2), (3, -1), (2, 2)):
        a = gm.tensor(v, device=device, requires_grad=True)
        b = torch.tensor(v, requires_grad=True)
        ya, yb = gm.norm_except_dim(a, p, dim), torch.norm_except_dim(b, p, dim)
        assert tuple(ya.shape) == tuple(yb.shape)
        np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-12)
        ya.sum().backward()
        yb.sum().backward()
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-10)
    np.testing.assert_array_equal(to_np(gm.tensor(X, device=device).hardshrink(0.7)),
                                  torch.tensor(X).hardshrink(0.7).numpy())
    r = gm.arange(6.0, device=device)
    gm.resize_as_(r, gm.zeros(2, 2))
    assert tuple(r.shape) == (2, 2) and to_np(r).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    if device == "cpu":
        for lib in (gm, torch):
            t = lib.ones(3)
            t.map2_(lib.ones(3) * 2, lib.tensor([1.0, 2.0, 3.0]), lambda a, b, c: a + b * c)
            assert t.tolist() == [3.0, 5.0, 7.0]
        t = gm.ones(2)
        assert t.const_data_ptr() == t.data_ptr() == t[1:].data_ptr() - 4


def test_torch_level_3d_ops(device):
    """torch.conv3d / conv_transpose3d (F's signatures) and torch.max_pool3d (stride=() for the kernel's)."""
    r = np.random.RandomState(7)
    x, w = r.randn(1, 2, 5, 6, 6), r.randn(3, 2, 3, 3, 3)
    g = [gm.tensor(a, device=device) for a in (x, w)]
    t = [torch.tensor(a) for a in (x, w)]
    np.testing.assert_allclose(to_np(gm.conv3d(*g, None, 1, 1)), torch.conv3d(*t, None, 1, 1).numpy(), rtol=1e-12)
    wt = r.randn(2, 4, 2, 2, 2)
    np.testing.assert_allclose(to_np(gm.conv_transpose3d(g[0], gm.tensor(wt, device=device), stride=2)),
                               torch.conv_transpose3d(t[0], torch.tensor(wt), stride=2).numpy(), rtol=1e-12)
    np.testing.assert_array_equal(to_np(gm.max_pool3d(g[0], 2)), torch.max_pool3d(t[0], 2).numpy())
    np.testing.assert_array_equal(to_np(gm.max_pool3d(g[0], 3, (1, 2, 2), 1)),
                                  torch.max_pool3d(t[0], 3, (1, 2, 2), 1).numpy())
