"""PyTorch's Tensor and gm.* API composed in _core/tensor_methods.py and _core/creation.py: values against NumPy
and PyTorch, gradients against finite differences, errors named as PyTorch names them."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gradcheck import assert_close, check_against_torch, gradcheck, to_numpy


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---- rounding -------------------------------------------------------------------------------------------------
HALVES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e20, -3.7, np.inf, -np.inf, np.nan, -0.0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 1e20 overflows float16 on purpose
@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
def test_round_floor_ceil_trunc_match_numpy(dt):
    x = gm.tensor(HALVES, dtype=dt)
    ref = to_numpy(x).astype(np.float64)
    for got, fn in ((x.round(), np.rint), (gm.floor(x), np.floor), (gm.ceil(x), np.ceil), (gm.trunc(x), np.trunc)):
        assert got.dtype == x.dtype
        out = to_numpy(got).astype(np.float64)
        np.testing.assert_array_equal(out, fn(ref))
        np.testing.assert_array_equal(np.signbit(out), np.signbit(fn(ref)))  # -0.5 rounds to -0.


def test_round_decimals_against_torch():
    torch = pytest.importorskip("torch")
    a = rnd(50) * 100
    for d in (-2, -1, 0, 1, 3):
        got = gm.round(gm.tensor(a, dtype=gm.float32), decimals=d)
        np.testing.assert_array_equal(to_numpy(got), torch.round(torch.tensor(a, dtype=torch.float32),
                                                                 decimals=d).numpy())


def test_round_of_integers_is_a_copy_and_bad_decimals_raise():
    x = gm.tensor([3, -4])
    y = x.round()
    assert y.dtype == gm.int64 and y.tolist() == [3, -4]
    y[0] = 7
    assert x.tolist() == [3, -4]
    with pytest.raises(TypeError, match="round: decimals must be an int"):
        gm.tensor([1.0]).round(decimals=1.5)
    with pytest.raises(TypeError, match="expects a floating-point tensor, got int64"):
        gm._C.unary(7, x)


def test_rounding_gradient_is_zero():
    x = gm.tensor(rnd(4), requires_grad=True)
    (x.round() * 3 + x.floor() + x.ceil().sum() + x.round(decimals=2)).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), np.zeros(4))


def test_div_rounding_modes_against_torch():
    torch = pytest.importorskip("torch")
    a, b = np.array([7, -7, 5, -5, 0]), np.array([2, 2, -3, -3, 4])
    for mode in (None, "trunc", "floor"):
        for x, y in ((a, b), (a.astype(np.float32) / 3, b.astype(np.float32)), (a, 2), (a, 2.5)):
            gx = gm.tensor(x)
            tx = torch.tensor(x)
            gy = gm.tensor(y) if isinstance(y, np.ndarray) else y
            ty = torch.tensor(y) if isinstance(y, np.ndarray) else y
            got, ref = gm.divide(gx, gy, rounding_mode=mode), torch.div(tx, ty, rounding_mode=mode)
            assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], (mode, x, y)
            np.testing.assert_allclose(to_numpy(got), ref.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="rounding_mode must be None, 'trunc' or 'floor'"):
        gm.tensor([1.0]).div(2, rounding_mode="round")


# ---- splitting, narrowing, repeating ---------------------------------------------------------------------------
def test_split_chunk_narrow_unbind_against_torch():
    torch = pytest.importorskip("torch")
    a = rnd(4, 7)
    g, t = gm.tensor(a), torch.tensor(a)
    cases = [(lambda x: x.split(3, 1)), (lambda x: x.split([2, 5], 1)), (lambda x: x.split(2)),
             (lambda x: x.chunk(3, 1)), (lambda x: x.chunk(5, 0)), (lambda x: x.chunk(2, -1)),
             (lambda x: x.tensor_split(3, 1)), (lambda x: x.tensor_split([1, 3, 10], 1)),
             (lambda x: x.unbind(1)), (lambda x: (x.narrow(1, -3, 2),)), (lambda x: (x.narrow(0, 4, 0),))]
    for k, fn in enumerate(cases):
        got, ref = fn(g), fn(t)
        assert len(got) == len(ref), k
        for u, v in zip(got, ref):
            np.testing.assert_array_equal(to_numpy(u), v.numpy())
    for k, fn in enumerate(cases[:3]):  # the module-level forms
        name = "split"
        np.testing.assert_array_equal(to_numpy(gm.split(g, 3, 1)[1]), torch.split(t, 3, 1)[1].numpy())
        np.testing.assert_array_equal(to_numpy(gm.chunk(g, 3, 1)[2]), torch.chunk(t, 3, 1)[2].numpy()), name


def test_split_views_share_storage_and_backprop():
    a = gm.tensor(rnd(4, 6), requires_grad=True)
    gradcheck(lambda x: x.split([1, 5], 1)[1] * 2, [a])
    gradcheck(lambda x: gm.cat(x.chunk(3, 1)[::-1], 1), [a])
    gradcheck(lambda x: x.narrow(0, 1, 2).unbind(1)[3], [a])
    x = gm.zeros(3, 4)
    x.split(2, 1)[1].fill_(1)
    assert x.tolist() == [[0, 0, 1, 1]] * 3


def test_split_errors_are_pytorch_s():
    x = gm.zeros(4, 5)
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 5"):
        x.split([2, 2], 1)
    with pytest.raises(RuntimeError, match="split expects split_size be non-negative"):
        x.split(-1)
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0"):
        x.chunk(0)
    with pytest.raises(RuntimeError, match=r"start \(3\) \+ length \(4\) exceeds dimension size \(5\)"):
        x.narrow(1, 3, 4)
    with pytest.raises(IndexError, match="narrow: start \\(9\\) is out of range"):
        x.narrow(1, 9, 0)
    with pytest.raises(IndexError, match="split: dimension 2 is out of range"):
        x.split(1, 2)


def test_repeat_against_torch_and_gradient():
    torch = pytest.importorskip("torch")
    a = rnd(2, 3)
    for sizes in ((2, 1), (1, 3), (2, 2, 2), (3, 1, 1, 2), (0, 2)):
        np.testing.assert_array_equal(to_numpy(gm.tensor(a).repeat(*sizes)), torch.tensor(a).repeat(*sizes).numpy())
    np.testing.assert_array_equal(to_numpy(gm.tensor(a).repeat((2, 1))), np.tile(a, (2, 1)))
    check_against_torch(lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), [a])
    gradcheck(lambda x: x.repeat(2, 3), [gm.tensor(a, requires_grad=True)])
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be smaller"):
        gm.tensor(a).repeat(2)


def test_view_as_reshape_as_expand_as_swapaxes_movedim():
    torch = pytest.importorskip("torch")
    a = rnd(2, 3, 4)
    g, t = gm.tensor(a), torch.tensor(a)
    np.testing.assert_array_equal(to_numpy(g.view_as(gm.zeros(6, 4))), t.view_as(torch.zeros(6, 4)).numpy())
    np.testing.assert_array_equal(to_numpy(g.permute(2, 0, 1).reshape_as(gm.zeros(4, 6))),
                                  t.permute(2, 0, 1).reshape_as(torch.zeros(4, 6)).numpy())
    np.testing.assert_array_equal(to_numpy(g[:, :1].expand_as(g)), t[:, :1].expand_as(t).numpy())
    np.testing.assert_array_equal(to_numpy(g.swapaxes(0, 2)), t.swapaxes(0, 2).numpy())
    np.testing.assert_array_equal(to_numpy(g.movedim(0, 2)), t.movedim(0, 2).numpy())
    np.testing.assert_array_equal(to_numpy(g.index_select(1, gm.tensor([2, 0]))),
                                  t.index_select(1, torch.tensor([2, 0])).numpy())


def test_diff_against_torch():
    torch = pytest.importorskip("torch")
    a = rnd(3, 5)
    for kw in ({}, {"n": 2}, {"dim": 0}, {"n": 3, "dim": 0}, {"n": 0}, {"prepend": np.ones((3, 1)),
                                                                         "append": np.zeros((3, 2))}):
        g_kw = {k: gm.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        t_kw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        np.testing.assert_array_equal(to_numpy(gm.diff(gm.tensor(a), **g_kw)), torch.diff(torch.tensor(a),
                                                                                             **t_kw).numpy())
    assert gm.tensor([1, 4, 9]).diff().tolist() == [3, 5]
    assert gm.tensor([True, True, False]).diff().tolist() == [False, True]
    gradcheck(lambda x: x.diff(2, 1), [gm.tensor(a, requires_grad=True)])
    with pytest.raises(RuntimeError, match="diff expects input to be at least one-dimensional"):
        gm.tensor(1.0).diff()


def test_cat_stack_edge_cases_against_torch():
    torch = pytest.importorskip("torch")

    def both(fn):
        g, t = fn(gm), fn(torch)
        assert str(g.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(to_numpy(g), t.numpy())

    both(lambda m: m.cat([m.zeros(0), m.ones(2, 3)]))                       # the legacy empty 1-D tensor
    both(lambda m: m.cat([m.ones(2, 3), m.zeros(0, dtype=m.float64), m.ones(2, 3)], 1))
    both(lambda m: m.cat([m.zeros(2, 0), m.ones(2, 3)], 1))
    both(lambda m: m.cat((m.zeros(2, 3), m.ones(2, 3, dtype=m.float64)), dim=-1))
    both(lambda m: m.stack((m.zeros(()), m.ones(()))))
    both(lambda m: m.stack([m.zeros(2, 3), m.ones(2, 3)], dim=-1))
    both(lambda m: m.concat([m.zeros(2, 3), m.ones(1, 3)]))
    both(lambda m: m.hstack([m.zeros(2, 3), m.ones(2, 1)]))
    both(lambda m: m.hstack([m.zeros(3), m.ones(2)]))
    both(lambda m: m.vstack([m.zeros(3), m.ones(2, 3)]))
    with pytest.raises(RuntimeError, match="stack expects a non-empty TensorList"):
        gm.stack([])
    a = gm.tensor(rnd(2, 3), requires_grad=True)
    gradcheck(lambda x: gm.cat([gm.zeros(0, dtype=gm.float64), x, x * 2], 1), [a])


def test_sort_argsort_topk_against_torch():
    torch = pytest.importorskip("torch")
    a = rnd(4, 7).astype(np.float32)
    a[0, 2], a[2, 5] = np.nan, np.inf
    a[1, 1] = a[1, 4] = a[1, 6]  # ties keep their order (stable)
    g, t = gm.tensor(a), torch.tensor(a)
    for kw in ({}, {"descending": True}, {"dim": 0}, {"dim": 0, "descending": True}):
        gv, gi = g.sort(**kw)
        tv, ti = t.sort(**kw, stable=True)
        np.testing.assert_array_equal(to_numpy(gi), ti.numpy())
        np.testing.assert_array_equal(to_numpy(gv), tv.numpy())
        np.testing.assert_array_equal(to_numpy(gm.argsort(g, **kw)), torch.argsort(t, **kw, stable=True).numpy())
    i = gm.tensor([[3, 1, 2], [0, 0, -5]])
    np.testing.assert_array_equal(to_numpy(i.sort(descending=True)[0]), [[3, 2, 1], [0, 0, -5]])
    b = rnd(5, 6, seed=3)
    for k, kw in ((3, {}), (2, {"dim": 0}), (4, {"largest": False}), (0, {})):
        gv, gi = gm.tensor(b).topk(k, **kw)
        tv, ti = torch.tensor(b).topk(k, **kw)
        np.testing.assert_array_equal(to_numpy(gi), ti.numpy())
        np.testing.assert_array_equal(to_numpy(gv), tv.numpy())
    check_against_torch(lambda x: x.topk(3, 1)[0], lambda x: x.topk(3, 1)[0], [b])
    check_against_torch(lambda x: x.sort(0, descending=True)[0], lambda x: x.sort(0, descending=True)[0], [b])
    gradcheck(lambda x: x.topk(2, 0, largest=False)[0], [gm.tensor(b, requires_grad=True)])
    idx = gm.tensor(rnd(5, 6, seed=4)).argsort(1)
    np.testing.assert_array_equal(to_numpy(gm.take_along_dim(gm.tensor(b), idx, 1)),
                                  np.take_along_axis(b, to_numpy(idx), 1))
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        gm.tensor(b).topk(7)
    with pytest.raises(RuntimeError, match="take_along_dim: indices of shape"):
        gm.tensor(b).take_along_dim(gm.zeros(2, 2, dtype=gm.int64), 1)


def test_sort_topk_meta_bytes_equal_cpu():
    def run(dev):
        base = gm.memory.memory_stats(dev)["allocated"]
        x = gm.zeros(6, 9, device=dev)
        ys = [x.topk(3, 1), x.sort(0), x.argsort()]
        now = gm.memory.memory_stats(dev)["allocated"]
        out = now["current"] - base["current"], [tuple(y.shape) for p in ys[:2] for y in p]
        del ys, x
        return out
    assert run("meta") == run("cpu")


# ---- products ---------------------------------------------------------------------------------------------------
def test_mm_bmm_against_torch_and_errors():
    pytest.importorskip("torch")
    check_against_torch(lambda a, b: a.mm(b), lambda a, b: a.mm(b), [rnd(3, 4), rnd(4, 2, seed=1)])
    check_against_torch(lambda a, b: gm.bmm(a, b), lambda a, b: a.bmm(b), [rnd(2, 3, 4), rnd(2, 4, 5, seed=1)])
    with pytest.raises(RuntimeError, match="mm: self must be a matrix"):
        gm.zeros(2, 3, 4).mm(gm.zeros(4, 2))
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        gm.zeros(3, 4).bmm(gm.zeros(4, 2))
    with pytest.raises(RuntimeError, match="same batch size"):
        gm.zeros(2, 3, 4).bmm(gm.zeros(3, 4, 2))


def test_prod_values_and_gradient_with_zeros():
    torch = pytest.importorskip("torch")
    a = rnd(3, 4)
    a[1, 2] = 0.0          # one zero in row 1
    a[2, 0] = a[2, 3] = 0  # two zeros in row 2
    for dim in (None, 1, 0):
        kw = {} if dim is None else {"dim": dim}
        check_against_torch(lambda x: x.prod(**kw), lambda x: x.prod(**kw), [a], what=f"prod {dim}")
    gradcheck(lambda x: x.prod(1, keepdim=True), [gm.tensor(a, requires_grad=True)])
    gradcheck(lambda x: gm.prod(x), [gm.tensor(rnd(5), requires_grad=True)])


def test_norm_against_torch():
    pytest.importorskip("torch")
    a = rnd(3, 4) + 0.1
    for p in ("fro", 2, 1, 3, math.inf, -math.inf):
        check_against_torch(lambda x: x.norm(p), lambda x: x.norm(p), [a], what=f"norm {p}")
        check_against_torch(lambda x: x.norm(p, dim=1, keepdim=True), lambda x: x.norm(p, dim=1, keepdim=True),
                            [a], what=f"norm {p} dim")
    with pytest.raises(RuntimeError, match="norm\\(\\): input dtype should be floating point"):
        gm.tensor([1, 2]).norm()


# ---- new_* ----------------------------------------------------------------------------------------------------
def test_new_constructors_keep_dtype_and_device():
    x = gm.zeros(2, dtype=gm.float64)
    for t, shape, val in ((x.new_zeros(2, 3), (2, 3), 0), (x.new_ones((4,)), (4,), 1), (x.new_full((2,), 3.5),
                                                                                           (2,), 3.5)):
        assert t.dtype == gm.float64 and tuple(t.shape) == shape and t.device == x.device
        assert np.all(to_numpy(t) == val)
    assert tuple(x.new_empty(3, 1).shape) == (3, 1)
    t = x.new_tensor([1, 2])
    assert t.dtype == gm.float64 and t.tolist() == [1.0, 2.0]  # new_tensor takes self's dtype, not int64
    assert x.new_zeros(2, dtype=gm.int64).dtype == gm.int64
    assert x.new_ones(1, requires_grad=True).requires_grad
    m = gm.zeros(2, device="meta").new_zeros(5)
    assert m.device == "meta" and tuple(m.shape) == (5,)


# ---- logical tests --------------------------------------------------------------------------------------------
def test_isnan_isinf_isfinite_isclose_against_torch():
    torch = pytest.importorskip("torch")
    a = np.array([0.0, 1.0, np.nan, np.inf, -np.inf, 1e-9, 1.00001])
    b = np.array([0.0, 1.0 + 1e-6, np.nan, np.inf, np.inf, 0.0, 1.0])
    g, t = gm.tensor(a, dtype=gm.float32), torch.tensor(a, dtype=torch.float32)
    gb, tb = gm.tensor(b, dtype=gm.float32), torch.tensor(b, dtype=torch.float32)
    for name in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(to_numpy(getattr(gm, name)(g)), getattr(torch, name)(t).numpy())
    for kw in ({}, {"equal_nan": True}, {"rtol": 0, "atol": 1e-8}):
        np.testing.assert_array_equal(to_numpy(g.isclose(gb, **kw)), torch.isclose(t, tb, **kw).numpy())
        assert gm.allclose(g, gb, **kw) == torch.allclose(t, tb, **kw)
    assert gm.allclose(g[:2], gb[:2], atol=1e-5)
    i = gm.tensor([1, 2])
    assert gm.isnan(i).tolist() == [False, False] and gm.isfinite(i).tolist() == [True, True]


def test_all_any_logical_and_bitwise_against_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    g, t = gm.tensor(a), torch.tensor(a)
    assert bool(g.all()) == bool(t.all()) and bool(g.any()) == bool(t.any())
    for dim in (0, 1, (0, 1)):
        np.testing.assert_array_equal(to_numpy(g.all(dim)), t.all(dim).numpy())
        np.testing.assert_array_equal(to_numpy(g.any(dim, keepdim=True)), t.any(dim, keepdim=True).numpy())
    p, q = g > 1, g < 4
    tp, tq = t > 1, t < 4
    for op in ("__and__", "__or__", "__xor__"):
        np.testing.assert_array_equal(to_numpy(getattr(p, op)(q)), getattr(tp, op)(tq).numpy())
    np.testing.assert_array_equal(to_numpy(~p), (~tp).numpy())
    np.testing.assert_array_equal(to_numpy(gm.logical_and(g, g - 1)), torch.logical_and(t, t - 1).numpy())
    with pytest.raises(NotImplementedError, match="\"bitwise_and\" not implemented for 'Double'"):
        g & g
    with pytest.raises(TypeError, match="only implemented on integer and Boolean-type tensors"):
        ~g
    i, ti = gm.tensor([[5, -3, 12]]), torch.tensor([[5, -3, 12]])
    for op in ("__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__rand__", "__rlshift__"):
        np.testing.assert_array_equal(to_numpy(getattr(i, op)(3)), getattr(ti, op)(3).numpy())
        np.testing.assert_array_equal(to_numpy(getattr(i, op)(i.T)), getattr(ti, op)(ti.T).numpy())
    np.testing.assert_array_equal(to_numpy(~i), (~ti).numpy())
    j, tj = i.clone(), ti.clone()
    j &= 6
    j <<= 2
    tj &= 6
    tj <<= 2
    np.testing.assert_array_equal(to_numpy(j), tj.numpy())


def test_masked_fill_and_where_method():
    torch = pytest.importorskip("torch")
    check_against_torch(lambda x, m: x.masked_fill(m, -1.5), lambda x, m: x.masked_fill(m, -1.5),
                        [rnd(3, 4), rnd(1, 4, seed=2) > 0])
    x = gm.tensor([1, 2, 3])
    y = x.masked_fill(x > 1, 2.7)
    assert y.dtype == gm.int64 and y.tolist() == torch.tensor([1, 2, 3]).masked_fill(
        torch.tensor([False, True, True]), 2.7).tolist()
    x.masked_fill_(x == 1, gm.tensor(9))
    assert x.tolist() == [9, 2, 3]
    with pytest.raises(TypeError, match="masked_fill: mask must be a bool tensor"):
        x.masked_fill(x, 0)
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        x.masked_fill(x > 0, gm.tensor([1, 2, 3]))
    assert gm.tensor([1.0, 2.0]).where(gm.tensor([True, False]), 0.0).tolist() == [1.0, 0.0]


# ---- factories ----------------------------------------------------------------------------------------------
def test_eye_linspace_logspace_against_torch():
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(to_numpy(gm.eye(3)), torch.eye(3).numpy())
    np.testing.assert_array_equal(to_numpy(gm.eye(2, 4, dtype=gm.int64)), torch.eye(2, 4, dtype=torch.int64).numpy())
    for args in ((0, 1, 5), (-3.5, 2.25, 7), (1, 1, 1), (2, -2, 4), (0, 10, 0)):
        np.testing.assert_array_equal(to_numpy(gm.linspace(*args)), torch.linspace(*args).numpy())
        # float64: PyTorch's fused multiply-add can differ from ours by an ulp
        np.testing.assert_allclose(to_numpy(gm.linspace(*args, dtype=gm.float64)),
                                   torch.linspace(*args, dtype=torch.float64).numpy(), rtol=4e-16, atol=4e-16)
    assert_close(gm.logspace(0, 3, 4), torch.logspace(0, 3, 4).numpy(), rtol=1e-6)
    assert_close(gm.logspace(0, 3, 4, base=2.0), torch.logspace(0, 3, 4, base=2.0).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        gm.linspace(0, 1, -1)


def test_randint_randperm_are_seeded_in_range_and_uniformish():
    gm.manual_seed(1)
    a = gm.randint(3, 9, (4000,))
    gm.manual_seed(1)
    assert gm.randint(3, 9, (4000,)).tolist() == a.tolist()
    v = to_numpy(a)
    assert a.dtype == gm.int64 and v.min() == 3 and v.max() == 8
    assert np.all(np.abs(np.bincount(v - 3) / 4000 - 1 / 6) < 0.03)
    assert gm.randint(5, (2, 3)).shape == (2, 3)
    p = gm.randperm(50)
    assert p.dtype == gm.int64 and sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50))
    assert gm.randperm(4, device="meta").shape == (4,)
    with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
        gm.randint(5, 5, (2,))


def test_small_functions():
    assert gm.is_tensor(gm.zeros(1)) and not gm.is_tensor(np.zeros(1))
    assert gm.numel(gm.zeros(2, 3)) == 6 and gm.is_floating_point(gm.zeros(1))
    assert gm.as_tensor([1, 2]).dtype == gm.int64
    x = gm.zeros(2)
    assert gm.as_tensor(x) is x
    s = gm.scalar_tensor(2.5)
    assert s.ndim == 0 and s.dtype == gm.float32 and s.item() == 2.5
    assert gm.tensor([4.0]).square().item() == 16.0 and gm.tensor([4.0]).rsqrt().item() == 0.5
    assert gm.clamp_min(gm.tensor([-1.0, 2.0]), 0).tolist() == [0.0, 2.0]
    assert gm.tensor([1.0, 2.0]).equal(gm.tensor([1.0, 2.0])) and not gm.equal(gm.zeros(2), gm.zeros(3))


# ---- 0-d format ----------------------------------------------------------------------------------------------
def test_format_of_a_0d_tensor_formats_its_value():
    loss = gm.tensor(1.23456, requires_grad=True) * 1
    assert f"{gm.zeros(2)}" == str(gm.zeros(2))  # more than one element: the tensor's repr, as PyTorch
    assert f"{loss:.3f}" == "1.235" and f"{gm.tensor(7):>4d}" == "   7" and f"{loss}" == str(loss.item())
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{gm.zeros(2):.2f}"


# ---- default dtype, iinfo/finfo -------------------------------------------------------
def test_default_dtype_follows_set_default_dtype():
    assert gm.get_default_dtype() == gm.float32
    try:
        gm.set_default_dtype(gm.float64)
        assert gm.tensor([1.5]).dtype == gm.float64 and gm.zeros(2).dtype == gm.float64
        assert gm.arange(0, 1, 0.5).dtype == gm.float64 and gm.full((1,), 2.0).dtype == gm.float64
        assert gm.tensor([1]).dtype == gm.int64
    finally:
        gm.set_default_dtype(gm.float32)
    assert gm.zeros(1).dtype == gm.float32
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        gm.set_default_dtype(gm.int64)


def test_iinfo_finfo_against_torch():
    torch = pytest.importorskip("torch")
    for name in ("uint8", "int8", "int16", "int32", "int64"):
        a, b = gm.iinfo(getattr(gm, name)), torch.iinfo(getattr(torch, name))
        assert (a.bits, a.min, a.max) == (b.bits, b.min, b.max), name
    for name in ("float32", "float64", "float16", "bfloat16"):
        a, b = gm.finfo(getattr(gm, name)), torch.finfo(getattr(torch, name))
        assert (a.bits, a.eps, a.max, a.min, a.tiny) == (b.bits, b.eps, b.max, b.min, b.tiny), name
    assert gm.finfo().eps == torch.finfo().eps
    with pytest.raises(TypeError, match="iinfo: expected an integer dtype"):
        gm.iinfo(gm.float32)


def test_repeat_returns_new_memory_that_can_be_written():
    # fast-neural-style's normalize_batch: style.repeat(batch, 1, 1, 1) then .div_(255); a view with stride 0
    # (or self itself, for repeat(1, ...)) would refuse the write or alias the source
    for shape, sizes in [((1, 3, 4, 4), (2, 1, 1, 1)), ((3,), (1,)), ((2, 3), (2, 2))]:
        a = gm.randn(*shape)
        before = a.numpy().copy()
        r = a.repeat(*sizes)
        r.div_(255.0)
        assert r.is_contiguous()
        np.testing.assert_array_equal(a.numpy(), before)
        np.testing.assert_allclose(r.numpy(), np.tile(before, sizes) / 255.0, rtol=1e-6)
