"""PyTorch semantics that scripts written for PyTorch rely on (stop 45: the gaps left by rounds 15-16 and what
round 17 of the hunts found), each checked against PyTorch itself: the same function run under both libraries
and the results compared."""
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _autocast_trace(L):
    """What a script sees of autocast's state when it switches it by hand (torch.set_autocast_enabled / dtype, as
    PyTorch's own autocast.__enter__ does) and nests regions for other device types: the dtypes of a product and
    the queries' answers, step by step."""
    a, b = L.ones(4, 4), L.ones(4, 4)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # autocast("cuda") on a machine without CUDA: warned and off in both
        with L.autocast("cpu", dtype=L.bfloat16):
            with L.autocast("cuda", enabled=False):  # another device type's region leaves the CPU's on
                seen.append((L.mm(a, b).dtype, L.is_autocast_enabled("cpu")))
            with L.autocast("cuda"):
                seen.append((L.mm(a, b).dtype, L.is_autocast_enabled("cpu")))
            with L.autocast("cpu", enabled=False):
                seen.append(L.mm(a, b).dtype)
            L.set_autocast_enabled("cpu", False)
            seen.append((L.mm(a, b).dtype, L.is_autocast_enabled("cpu")))
            L.set_autocast_enabled("cpu", True)
            L.set_autocast_dtype("cpu", L.float16)
            seen.append((L.mm(a, b).dtype, L.get_autocast_dtype("cpu")))
        seen.append((L.get_autocast_dtype("cpu"), L.is_autocast_enabled("cpu"), L.is_autocast_cache_enabled()))
        L.set_autocast_dtype("cpu", L.float16)  # a region that names no dtype takes the one set
        try:
            with L.autocast("cpu"):
                seen.append(L.mm(a, b).dtype)
        finally:
            L.set_autocast_dtype("cpu", L.bfloat16)
        L.set_autocast_enabled(True)  # the legacy one-argument form: CUDA's
        seen.append((L.is_autocast_enabled(), L.is_autocast_enabled("cuda"), L.is_autocast_enabled("cpu")))
        L.set_autocast_enabled(False)
        seen.append(L.is_autocast_enabled())
        with L.autocast("cpu", cache_enabled=False) as ac:
            seen.append((L.is_autocast_cache_enabled(), ac.device, ac.fast_dtype, ac._enabled, ac._cache_enabled))
        seen.append(L.is_autocast_cache_enabled())
    seen.append([L.autocast_increment_nesting(), L.autocast_increment_nesting(), L.autocast_decrement_nesting(),
                 L.autocast_decrement_nesting()])
    L.clear_autocast_cache()
    seen.append([L.amp.is_autocast_available(d) for d in ("cpu", "cuda", "xpu", "meta", "lazy")])
    return seen


def test_autocast_state_functions_and_nested_device_types():
    t, g = _both(_autocast_trace)
    assert repr(g) == repr(t).replace("torch.", "gpumemnet.")


def test_autocast_mode_module_and_bad_device_type():
    """torch.amp.autocast_mode is importable with its names; an unknown device type is PyTorch's RuntimeError."""
    import gpumemnet.amp.autocast_mode as gm_mode
    import torch.amp.autocast_mode as torch_mode
    for name in ("autocast", "custom_fwd", "custom_bwd", "is_autocast_available"):
        assert hasattr(gm_mode, name) and hasattr(torch_mode, name)
    for L in (torch, gm):
        with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
            L.amp.is_autocast_available("foo")
        with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
            L.set_autocast_enabled("foo", True)


def test_autocast_cache_disabled_still_casts_each_use():
    """autocast(cache_enabled=False): each use of a parameter casts it again (no cached copy outlives the op), and
    the values and gradients are the cached run's."""
    w0 = np.random.RandomState(0).standard_normal((8, 8)).astype(np.float32)

    def run(L, cache):
        w = L.tensor(w0, requires_grad=True)
        x = L.ones(2, 8)
        with L.autocast("cpu", dtype=L.bfloat16, cache_enabled=cache):
            y = (x @ w) @ w
        y.float().sum().backward()
        return y.float().detach().numpy(), w.grad.numpy()

    for cache in (True, False):
        (ty, tg), (gy, gg) = run(torch, cache), run(gm, cache)
        np.testing.assert_allclose(gy, ty, rtol=1e-2)
        np.testing.assert_allclose(gg, tg, rtol=2e-2, atol=1e-2)
    np.testing.assert_array_equal(run(gm, False)[0], run(gm, True)[0])
    from gpumemnet._core.autocast import _state
    w = gm.ones(8, 8, requires_grad=True)
    for cache, kept in ((False, 0), (True, 1)):
        with gm.autocast("cpu", dtype=gm.bfloat16, cache_enabled=cache):
            gm.ones(2, 8) @ w
            assert len(_state.cache) == kept  # the one bfloat16 copy of w, kept for the region's other uses


def _vals(out):
    """Values of a result (a tensor or a tuple of them) as float64 arrays, with their shapes."""
    outs = out if isinstance(out, tuple) else (out,)
    return [np.asarray(o.detach().double().numpy()) for o in outs]


X12 = (np.arange(12, dtype=np.float64).reshape(3, 4) ** 2)


@pytest.mark.parametrize("call", [
    lambda L, x: L.var(x, True), lambda L, x: L.var(x, False), lambda L, x: x.std(False), lambda L, x: x.var(True),
    lambda L, x: L.std_mean(x, True), lambda L, x: L.var_mean(x, False),
    lambda L, x: L.var_mean(x, None, keepdim=True), lambda L, x: L.std_mean(x, dim=None, correction=0, keepdim=True),
    lambda L, x: L.var_mean(x, 1, keepdim=True), lambda L, x: L.var(x, dim=0, unbiased=False),
], ids=["var(x, True)", "var(x, False)", "x.std(False)", "x.var(True)", "std_mean(x, True)", "var_mean(x, False)",
        "var_mean keepdim no dim", "std_mean keepdim no dim", "var_mean dim 1 keepdim", "var dim unbiased kw"])
def test_var_std_legacy_unbiased_positional(call):
    """A bool where dim goes is the legacy var(input, unbiased): over every element (it was read as dim 1 / 0 and
    gave per-row variances); var_mean's mean keeps its dims with keepdim and no dim."""
    t, g = _both(lambda L: _vals(call(L, L.tensor(X12))))
    assert [a.shape for a in g] == [a.shape for a in t]
    for a, b in zip(g, t):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_var_legacy_unbiased_takes_no_other_argument():
    for L in (torch, gm):
        with pytest.raises(TypeError):
            L.var(L.ones(3), True, True)


@pytest.mark.parametrize("shapes", [((3, 3), (3,)), ((2, 3), (2,)), ((2, 3, 4), (2, 3, 1)), ((4, 3, 5), (4, 1, 5)),
                                    ((2, 3), (2, 3)), ((2, 3), None)],
                         ids=["per sample square", "per sample", "size-1 last", "size-1 middle", "same", "float"])
def test_gaussian_nll_loss_variance_shapes_and_gradients(shapes):
    """gaussian_nll_loss with one variance per sample (input.shape[:-1]) broadcasts it over the last dim (it went
    along the wrong dim: wrong values for square inputs, an error otherwise); var's gradient passes the eps clamp
    as PyTorch's (the clamp is outside the graph)."""
    shape, vshape = shapes
    r = np.random.RandomState(1)
    x0, y0 = r.standard_normal(shape), r.standard_normal(shape)
    v0 = None if vshape is None else np.abs(r.standard_normal(vshape)) + 0.1
    if v0 is not None:
        v0.reshape(-1)[0] = 1e-8  # under eps: clamped in the forward, a gradient still

    def run(L):
        x = L.tensor(x0, requires_grad=True)
        var = 0.7 if v0 is None else L.tensor(v0, requires_grad=True)
        loss = L.nn.functional.gaussian_nll_loss(x, L.tensor(y0), var, full=True, reduction="sum")
        loss.backward()
        return [loss.item(), x.grad.numpy()] + ([] if v0 is None else [var.grad.numpy()])

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_gaussian_nll_loss_refuses_a_variance_of_another_shape():
    for L in (torch, gm):
        with pytest.raises(ValueError, match="var is of incorrect size"):
            L.nn.functional.gaussian_nll_loss(L.zeros(2, 3), L.zeros(2, 3), L.ones(3, 2))


@pytest.mark.parametrize("shapes", [((1, 2, 3), (2, 1, 3), -2), ((4, 1), (4, 3), 1), ((2, 3), (3,), 1)])
def test_cosine_similarity_broadcasts_before_its_norms(shapes):
    """x1 and x2 broadcast along the reduced dim: each norm runs over the broadcast dim (values were above 1)."""
    s1, s2, dim = shapes
    r = np.random.RandomState(2)
    a0, b0 = r.standard_normal(s1), r.standard_normal(s2)

    def run(L):
        a, b = L.tensor(a0, requires_grad=True), L.tensor(b0, requires_grad=True)
        out = L.nn.functional.cosine_similarity(a, b, dim=dim)
        out.sum().backward()
        return out.detach().numpy(), a.grad.numpy(), b.grad.numpy()

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


def test_index_fill_value_tensor_gets_its_gradient():
    """index_fill / index_fill_ with a 0-d value tensor requiring grad: the value's gradient is the sum of the
    filled entries' (it was None: the value was read as a number)."""
    def run(L):
        x = L.arange(6, dtype=L.float64).reshape(2, 3).requires_grad_()
        v = L.tensor(5.0, dtype=L.float64, requires_grad=True)
        w = L.arange(6, dtype=L.float64).reshape(2, 3)
        y = L.index_fill(x, 1, L.tensor([0, 2]), v)
        x2 = x * 2
        x2.index_fill_(0, L.tensor([1]), v)
        ((y + x2) * w).sum().backward()
        return y.detach().numpy(), x2.detach().numpy(), x.grad.numpy(), v.grad.numpy()

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "midpoint"])
def test_quantile_q_tensor_gets_its_gradient(interpolation):
    """quantile with q requiring grad: 'linear' interpolates with a weight from q, so q has a gradient (it was
    None); the other modes take no weight from q, and q's gradient stays None, as in PyTorch."""
    def run(L):
        x = L.tensor([1.0, 4.0, 2.0, 8.0, 3.0], dtype=L.float64, requires_grad=True)
        q = L.tensor([0.3, 0.5, 0.9], dtype=L.float64, requires_grad=True)
        y = L.quantile(x, q, interpolation=interpolation)
        (y * L.tensor([1.0, 2.0, 3.0], dtype=L.float64)).sum().backward()
        return y.detach().numpy(), x.grad.numpy(), None if q.grad is None else q.grad.numpy()

    (ty, tx, tq), (gy, gx, gq) = _both(run)
    np.testing.assert_allclose(gy, ty, rtol=1e-12)
    np.testing.assert_allclose(gx, tx, rtol=1e-12)
    assert (gq is None) == (tq is None)
    if tq is not None:
        np.testing.assert_allclose(gq, tq, rtol=1e-12)


def test_div_floor_is_floor_division_with_zero_gradient():
    """div(a, b, rounding_mode='floor') of floats is Python's // (1.0 // 0.1 is 9; floor(1.0 / 0.1) is 10, which
    it gave), its gradient zero; remainder's gradient wrt b is -(a // b) with the same quotient."""
    a0 = np.array([1.0, 0.7, 2.0, 1.0, -3.5, 5.0, 0.0, 7.0])
    b0 = np.array([0.1, 0.1, 0.2, -np.inf, 2.0, 0.0, 0.0, -2.0])

    def run(L):
        out = []
        for dt in (L.float64, L.float32):
            a, b = L.tensor(a0, dtype=dt, requires_grad=True), L.tensor(b0, dtype=dt, requires_grad=True)
            y = L.div(a, b, rounding_mode="floor")
            y.sum().backward()
            out += [y.detach().double().numpy(), a.grad.double().numpy(), b.grad.double().numpy(),
                    L.div(a.detach(), 0.1, rounding_mode="floor").double().numpy()]
            a, b = L.tensor(a0[:5], dtype=dt), L.tensor(b0[:5], dtype=dt, requires_grad=True)
            L.remainder(a, b).sum().backward()
            out.append(b.grad.double().numpy())
        x = L.tensor([3.0, -3.0])
        x.div_(L.tensor([0.1, 0.1]), rounding_mode="floor")
        out.append(x.numpy())
        return out

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_array_equal(a, b)


def test_hypot_neither_overflows_nor_underflows():
    """hypot of magnitudes whose squares overflow (1e200, 3e30 in float32) or underflow (1e-30 in float32) is
    finite and exact to rounding (it was inf / 0), inf beside a NaN, with PyTorch's gradients and broadcasting."""
    a0 = np.array([1.7976931348623157e308, 1e308, 1e200, np.inf, np.inf, 3.0, -2.0, np.nan, 1e-200])
    b0 = np.array([0.0, 0.0, 1e200, np.nan, 1.0, 4.0, -5.0, 1.0, 3e-200])

    def run(L):
        a, b = L.tensor(a0, requires_grad=True), L.tensor(b0, requires_grad=True)
        y = L.hypot(a, b)
        y.sum().backward()
        f = L.tensor([3e30, 1e-30, 3.0], dtype=L.float32)
        c, d = L.tensor([[1.0], [2.0]], requires_grad=True), L.tensor([3.0, 4.0], requires_grad=True)
        z = L.hypot(c, d)
        z.sum().backward()
        return [y.detach().numpy(), a.grad.numpy(), b.grad.numpy(), L.hypot(f, f).numpy(), z.detach().numpy(),
                c.grad.numpy(), d.grad.numpy()]

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_allclose(a, b, rtol=2e-16 if a.dtype == np.float64 else 1e-7)


@pytest.mark.parametrize("call", [
    lambda L: L.tensor([1, 0, 1]).logit_(), lambda L: L.tensor([1, 0, 1], dtype=L.uint8).logit_(),
    lambda L: L.tensor([3, 4]).hypot_(L.tensor([4.0, 0.5])), lambda L: L.tensor([3, 4]).xlogy_(2.5),
    lambda L: L.tensor([True]).xlogy_(L.tensor([2.5])), lambda L: L.tensor([3, 4]).nextafter_(L.tensor([9.0, 0.0])),
    lambda L: L.tensor([3, 4]).cumprod_(0, dtype=L.float32),
], ids=["logit_ int64", "logit_ uint8", "hypot_", "xlogy_", "xlogy_ bool", "nextafter_", "cumprod_ dtype"])
def test_inplace_float_result_into_integer_tensor_is_refused(call):
    """An in-place op whose result is floating point on an integer or bool tensor raises (it wrote truncated
    values: logit_ of [1, 0, 1] gave int64's extremes)."""
    for L in (torch, gm):
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type|Bad in-place call"):
            call(L)


def test_lerp_of_integer_tensors_is_refused():
    for L in (torch, gm):
        with pytest.raises(NotImplementedError, match="lerp_kernel_scalar\" not implemented for 'Long'"):
            L.lerp(L.tensor([1, 2]), L.tensor([3, 4]), 0.5)
        with pytest.raises(NotImplementedError, match="lerp_kernel_scalar\" not implemented for 'Long'"):
            L.tensor([3, 4]).lerp_(L.tensor([5, 5]), 0.5)


@pytest.mark.parametrize("reduce", ["amax", "amin", "sum", "prod"])
def test_scatter_reduce_bool_without_self(reduce):
    """scatter_reduce on bool tensors with include_self=False: an entry that receives only False stays False under
    amax (it became True: int64's least value written into a bool array)."""
    def run(L):
        x = L.tensor([True, False, True, False])
        src = L.tensor([False, False, True, False])
        idx = L.tensor([0, 1, 1, 3])
        return x.scatter_reduce(0, idx, src, reduce, include_self=False).numpy()

    t, g = _both(run)
    np.testing.assert_array_equal(g, t)


def test_batch_norm_refuses_negative_eps_in_eval():
    """A negative eps in eval mode (running statistics) raises as in training (it returned NaN or garbage)."""
    for L in (torch, gm):
        with pytest.raises(ValueError, match="eps must be non-negative"):
            L.nn.functional.batch_norm(L.ones(4, 3), L.zeros(3), L.ones(3), training=False, eps=-1.0)
        bn = L.nn.BatchNorm1d(3, eps=-0.5).eval()
        with pytest.raises(ValueError, match="eps must be non-negative"):
            bn(L.ones(4, 3))


_X34 = np.random.RandomState(0).standard_normal((3, 4))
_OUT_CASES = {
    "softmax": lambda L, x, E: L.softmax(x, 1, out=E(3, 4)),
    "log_softmax": lambda L, x, E: L.log_softmax(x, 1, out=E(3, 4)),
    "scatter": lambda L, x, E: L.scatter(x, 0, L.tensor([[0, 1, 2, 0]]), 1.0, out=E(3, 4)),
    "scatter_add": lambda L, x, E: L.scatter_add(x, 0, L.tensor([[0, 1, 2, 0]]), x[:1] * 2, out=E(3, 4)),
    "scatter_reduce": lambda L, x, E: L.scatter_reduce(x, 0, L.tensor([[0, 1, 2, 0]]), x[:1], "sum", out=E(3, 4)),
    "index_add": lambda L, x, E: L.index_add(x, 0, L.tensor([0]), x[2:], out=E(3, 4)),
    "index_copy": lambda L, x, E: L.index_copy(x, 0, L.tensor([0]), x[2:], out=E(3, 4)),
    "take": lambda L, x, E: L.take(x, L.tensor([0, 5]), out=E(2)),
    "tensordot": lambda L, x, E: L.tensordot(x, x.T, 1, out=E(3, 3)),
    "isin": lambda L, x, E: L.isin(x, x[0], out=E(3, 4, dt=L.bool)),
    "angle": lambda L, x, E: L.angle(x, out=E(3, 4)),
    "hardshrink": lambda L, x, E: L.hardshrink(x, 0.5, out=E(3, 4)),
    "mvlgamma": lambda L, x, E: L.mvlgamma(x.abs() + 1, 1, out=E(3, 4)),
    "frexp": lambda L, x, E: L.frexp(x, out=(E(3, 4), E(3, 4, dt=L.int32))),
    "slice_scatter": lambda L, x, E: L.slice_scatter(x, x[:1] * 0, 0, 0, 1, out=E(3, 4)),
    "transpose_copy": lambda L, x, E: L.transpose_copy(x, 0, 1, out=E(4, 3)),
    "view_copy": lambda L, x, E: L.view_copy(x, (12,), out=E(12)),
    "permute_copy": lambda L, x, E: L.permute_copy(x, (1, 0), out=E(4, 3)),
    "unsqueeze_copy": lambda L, x, E: L.unsqueeze_copy(x, 0, out=E(1, 3, 4)),
    "expand_copy": lambda L, x, E: L.expand_copy(x[:1], (3, 4), out=E(3, 4)),
    "diagonal_copy": lambda L, x, E: L.diagonal_copy(x, out=E(3)),
    "unfold_copy": lambda L, x, E: L.unfold_copy(x, 1, 2, 2, out=E(3, 2, 2)),
}


@pytest.mark.parametrize("name", list(_OUT_CASES))
def test_out_argument_of_more_functions(name):
    """out= on functions PyTorch gives it (softmax, scatter*, index_add, take, tensordot, the *_copy ops...): it was
    a TypeError. The result is written into out, which is returned, with PyTorch's values."""
    def run(L):
        made = []

        def E(*shape, dt=L.float64):
            made.append(L.empty(*shape, dtype=dt))
            return made[-1]

        r = _OUT_CASES[name](L, L.tensor(_X34), E)
        r = r if isinstance(r, tuple) else (r,)
        assert all(a is b for a, b in zip(r, made))
        return [t.double().numpy() for t in r]

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _library_ops(L, ns):
    """Operators defined from Python reached through torch.ops, as spikingjelly's neurons define and call theirs:
    custom_op + register_autograd, Library.define + impl (an overload, a keyset kernel), torch.library.impl."""
    x = L.tensor([1.0, 2.0, 3.0], requires_grad=True)

    @L.library.custom_op(f"{ns}::scaled", mutates_args=())
    def scaled(a: L.Tensor, k: float) -> L.Tensor:
        return a * k

    def setup(ctx, inputs, output):
        ctx.k = inputs[1]

    scaled.register_autograd(lambda ctx, g: (g * ctx.k * 10, None), setup_context=setup)
    lib = L.library.Library(f"{ns}b", "DEF")
    lib.define("thrice(Tensor a) -> Tensor")
    lib.define("thrice.pair(Tensor a, Tensor b) -> Tensor")
    lib.impl("thrice", lambda a: a * 5, "CompositeImplicitAutograd")
    lib.impl("thrice", lambda a: a * 3, "CompositeImplicitAutograd")  # a later kernel replaces the earlier
    lib.impl("thrice.pair", lambda keyset, a, b: a * b * 3, "CompositeImplicitAutograd", with_keyset=True)
    L.library.define(f"{ns}b::square", "(Tensor a) -> Tensor")
    L.library.impl(f"{ns}b::square", "cpu", lambda a: a * a)
    ops, opsb = getattr(L.ops, ns), getattr(L.ops, f"{ns}b")
    y = ops.scaled(x, 2.0) + ops.scaled.default(x, 1.0) + opsb.thrice(x) + opsb.thrice.pair(x, x)
    y.sum().backward()
    return y.detach().numpy(), x.grad.numpy(), opsb.square(x.detach()).numpy(), sorted(opsb.thrice.overloads())


def test_python_defined_operators_through_torch_ops():
    import types
    from gpumemnet.compat import library, ops  # torch.library and torch.ops under the alias
    L = types.SimpleNamespace(tensor=gm.tensor, Tensor=gm.Tensor, library=library, ops=ops)
    t, g = _library_ops(torch, "semantics11t"), _library_ops(L, "semantics11g")
    for a, b in zip(g[:3], t[:3]):
        np.testing.assert_array_equal(a, b)
    assert g[3] == t[3]


def test_torchscript_graph_classes_import_and_refuse_construction():
    """from torch._C import Value / Node / Block (snntorch imports Value): names without a constructor."""
    from gpumemnet.compat import _torch_c
    for name in ("Value", "Node", "Block"):
        for mod in (torch._C, _torch_c):
            with pytest.raises(TypeError, match="No constructor defined"):
                getattr(mod, name)()


@pytest.mark.parametrize("call, error, words", [
    (lambda L: L.nn.functional.max_pool1d(L.arange(6.0).reshape(1, 2, 3), kernel_size=8608480567731124087,
                                          padding=1250999896764, dilation=1250999896764, ceil_mode=True),
     RuntimeError, "effective kernel size overflows"),
    (lambda L: L.nn.functional.avg_pool2d(L.ones(3, 3, 3), 2, divisor_override=0), RuntimeError,
     "divisor must be not zero"),
    (lambda L: L.signal.windows.general_cosine(3, a=[]), ValueError, "Coefficients cannot be empty"),
], ids=["max_pool1d kernel * dilation past int64", "avg_pool2d divisor_override=0", "general_cosine a=[]"])
def test_refusals_of_pytorch_type(call, error, words):
    """Arguments PyTorch refuses, refused with its exception type (a pooling kernel whose span overflows int64
    computed a result from the wrapped product: undefined behaviour in C)."""
    for L in (torch, gm):
        with pytest.raises(error, match=words):
            call(L)


_INPLACE_IN_GRAPH = {
    "polygamma_": lambda L, x: x.polygamma_(1),
    "renorm_": lambda L, x: x.renorm_(2, 0, 1.0),
    "put_": lambda L, x: x.put_(L.tensor([0, 3]), L.tensor([9.0, 8.0], dtype=L.float64)),
    "put_ accumulate": lambda L, x: x.put_(L.tensor([1, 1]), L.tensor([9.0, 8.0], dtype=L.float64), accumulate=True),
}


@pytest.mark.parametrize("name", list(_INPLACE_IN_GRAPH))
@pytest.mark.parametrize("through_view", [False, True], ids=["tensor", "transposed view"])
def test_inplace_ops_recorded_in_a_graph(name, through_view):
    """polygamma_, renorm_, put_ (and index_put_ below) on a tensor in a graph, or on a view of one, are recorded
    as PyTorch records them (they were refused). (PyTorch's trigamma is 5e-10 off: polygamma(1, 0.5) = pi^2 / 2.)"""
    def run(L):
        a = L.tensor([[0.5, 1.5], [2.0, 3.0]], dtype=L.float64, requires_grad=True)
        base = a * 1
        x = base.t() if through_view else base
        _INPLACE_IN_GRAPH[name](L, x)
        (base * L.arange(1.0, 5.0, dtype=L.float64).reshape(2, 2)).sum().backward()
        return base.detach().numpy(), a.grad.numpy()

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-15)


def test_index_put_on_a_view_of_a_graph_tensor():
    def run(L):
        a = L.arange(6.0, dtype=L.float64).reshape(2, 3).requires_grad_()
        v0 = L.tensor(7.0, dtype=L.float64, requires_grad=True)
        base = a * 1
        base.t().index_put_((L.tensor([0, 2]),), v0 * 2)
        (base * L.arange(1.0, 7.0, dtype=L.float64).reshape(2, 3)).sum().backward()
        return base.detach().numpy(), a.grad.numpy(), v0.grad.numpy()

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "nansum", "prelu"])
def test_second_order_through_a_zero_dim_input(reduce):
    """create_graph=True through a 0-d tensor reduced over dim 0 (it raised 'cannot expand shape (1,) to ()'), and
    prelu's gradient of a 0-d input keeps its shape (it was (1,))."""
    def run(L):
        x = L.tensor(-1.5, dtype=L.float64, requires_grad=True)
        y = L.nn.functional.prelu(x, L.tensor(0.25, dtype=L.float64)) if reduce == "prelu" else \
            getattr(x, reduce)(0)
        g, = L.autograd.grad((y * y * 2).sum(), x, create_graph=True)
        gg, = L.autograd.grad(g, x)
        return tuple(g.shape), g.detach().numpy(), gg.numpy()

    t, g = _both(run)
    assert g[0] == t[0]
    np.testing.assert_allclose(g[1], t[1], rtol=1e-14)
    np.testing.assert_allclose(g[2], t[2], rtol=1e-14)


def test_angle_linear_gradient_small_forms():
    """angle of +-inf is 0 / pi (it was NaN: inf * 0); F.linear with a 1-D weight gives one output per row (it was
    refused; with a bias PyTorch refuses it too); gradient(spacing=None) is spacing 1."""
    def run(L):
        x = L.tensor([np.inf, -np.inf, np.nan, -2.0, 0.0, 3.0], dtype=L.float64, requires_grad=True)
        a = L.angle(x)
        a.sum().backward()
        m = L.arange(6, dtype=L.float64).reshape(2, 3).requires_grad_()
        w = L.tensor([1.0, 2.0, 3.0], dtype=L.float64, requires_grad=True)
        y = L.nn.functional.linear(m, w)
        y.sum().backward()
        with pytest.raises(RuntimeError):
            L.nn.functional.linear(m, w, L.tensor(0.5, dtype=L.float64))
        gr = L.gradient(L.tensor([1.0, 4.0, 9.0, 16.0], dtype=L.float64), spacing=None)[0]
        return [a.detach().numpy(), x.grad.numpy(), y.detach().numpy(), m.grad.numpy(), w.grad.numpy(), gr.numpy()]

    t, g = _both(run)
    for a, b in zip(g, t):
        np.testing.assert_array_equal(a, b)


def _hook_dicts(L):
    """A module's hook dicts handled by hand, as scripts strip or install hooks: a new OrderedDict assigned and filled
    by key, a hook replaced in place by its handle's id, pop / copy / move_to_end / update, register_* after an
    assignment, and a deepcopy of the module with its hooks."""
    import collections
    import copy
    calls = []
    x = L.ones(1, 2)
    m = L.nn.Linear(2, 2)
    m._forward_hooks = collections.OrderedDict()
    m._forward_hooks[1] = lambda mod, a, o: calls.append("a")
    m(x)
    m2 = L.nn.Linear(2, 2)
    m2.register_forward_pre_hook(lambda mod, a: calls.append("pre"))
    m2._forward_hooks = collections.OrderedDict({7: lambda mod, a, o: calls.append("b")})
    m2(x)
    m3 = L.nn.Linear(2, 2)
    h = m3.register_forward_hook(lambda mod, a, o: calls.append("c"))
    m3._forward_hooks[h.id] = lambda mod, a, o: calls.append("replaced")
    m3(x)
    f = lambda mod, a, o: calls.append("f")  # noqa: E731
    h2 = m3.register_forward_hook(f)
    m3._forward_hooks.move_to_end(h2.id, last=False)
    m3(x)
    popped = m3._forward_hooks.pop(h2.id) is f
    dup = m3._forward_hooks.copy()
    dup[99] = f  # the copy is not the module's
    m3(x)
    m3._forward_hooks = collections.OrderedDict()  # strip, then register again
    m3.register_forward_hook(lambda mod, a, o: calls.append("again"))
    m3(x)
    m4 = copy.deepcopy(m3)
    m4._forward_hooks.clear()
    m4(x)
    m3(x)
    return calls, popped, len(dup), m3._forward_hooks.pop(12345, "default")


def test_hook_dicts_set_and_changed_by_hand():
    t, g = _both(_hook_dicts)
    assert g == t


def test_activation_reprs_and_instance_norm_state_version():
    """repr of Threshold / Softshrink / Hardshrink / Softmin / GLU / CELU shows their arguments (it showed none);
    InstanceNorm saves state_dict version 2, as PyTorch's _NormBase."""
    def run(L):
        nn = L.nn
        mods = [nn.Threshold(2.0, 1.0), nn.Threshold(2.0, 1.0, True), nn.Softshrink(0.5), nn.Hardshrink(2.0),
                nn.Softmin(dim=1), nn.Softmin(), nn.GLU(), nn.CELU(2.0), nn.CELU(2.0, True)]
        return [repr(m) for m in mods] + [nn.InstanceNorm1d(3).state_dict()._metadata[""]["version"]]

    t, g = _both(run)
    assert g == t


@pytest.mark.parametrize("kw", [{}, {"nesterov": False, "weight_decay": 0.0}, {"adjust_lr_fn": "match_rms_adamw"},
                                {"adjust_lr_fn": "spectral_unclamped", "momentum": 0.9}],
                         ids=["defaults", "no nesterov", "match_rms_adamw", "spectral_unclamped"])
def test_muon_steps_as_pytorchs(kw):
    """torch.optim.Muon (round 20: missing): three steps on a tall and a wide matrix, the same parameters (the
    Newton-Schulz iteration runs in bfloat16 in both), the same state_dict layout."""
    r = np.random.RandomState(0)
    w0 = [r.standard_normal((6, 4)).astype(np.float32), r.standard_normal((3, 5)).astype(np.float32)]
    g0 = [[r.standard_normal(w.shape).astype(np.float32) for w in w0] for _ in range(3)]

    def run(L):
        ps = [L.nn.Parameter(L.tensor(w)) for w in w0]
        opt = L.optim.Muon(ps, lr=0.02, **kw)
        for gs in g0:
            for p, g in zip(ps, gs):
                p.grad = L.tensor(g)
            opt.step()
        sd = opt.state_dict()
        return [p.detach().numpy() for p in ps], sorted(sd["param_groups"][0]), sorted(sd["state"][0])

    (tp, tg, ts), (gp, gg, gs) = _both(run)
    for a, b in zip(gp, tp):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert (gg, gs) == (tg, ts)


def test_muon_refuses_what_pytorchs_refuses():
    for L in (torch, gm):
        with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
            L.optim.Muon([L.nn.Parameter(L.ones(3))])
        with pytest.raises(ValueError, match="Adjust learning rate function nope is not supported"):
            L.optim.Muon([L.nn.Parameter(L.ones(2, 2))], adjust_lr_fn="nope")


@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_sequence_is_contiguous_in_the_first_sequences_dtype(batch_first):
    """pad_sequence's result is contiguous in both layouts (batch_first=False was a transposed view, so the
    seq2seq loss line trg[1:].view(-1) raised), in the first sequence's dtype (stack promoted), with gradients."""
    def run(L):
        a = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = L.tensor([4.0, 5.0], dtype=L.float64)
        out = L.nn.utils.rnn.pad_sequence([a, b], batch_first=batch_first, padding_value=-1.0)
        (out * L.arange(6.0).reshape(out.shape)).sum().backward()
        ints = L.nn.utils.rnn.pad_sequence([L.tensor([1, 2], dtype=L.int32), L.tensor([3])], padding_value=4.5)
        return (out.is_contiguous(), str(out.dtype).split(".")[-1], out.detach().view(-1).numpy(), a.grad.numpy(),
                str(ints.dtype).split(".")[-1], ints.numpy())

    t, g = _both(run)
    assert g[0] == t[0] and g[1] == t[1] and g[4] == t[4]
    for i in (2, 3, 5):
        np.testing.assert_array_equal(g[i], t[i])


def test_lbfgs_strong_wolfe_on_an_unbounded_objective_keeps_stepping():
    """LBFGS with the strong Wolfe line search on an objective without a lower bound (or maximize=True on a convex
    one): the cubic interpolation divides by zero, which gives inf / NaN and the search goes on, as PyTorch's
    (it raised ZeroDivisionError). Both runs diverge to huge parameters."""
    def run(L, maximize):
        x = L.tensor([1.0, -2.0, 0.5], dtype=L.float64, requires_grad=True)
        opt = L.optim.LBFGS([x], line_search_fn="strong_wolfe", maximize=maximize)
        sign = 1.0 if maximize else -1.0

        def closure():
            opt.zero_grad()
            loss = sign * (0.5 * x * x + x).sum()
            loss.backward()
            return loss
        for _ in range(3):
            opt.step(closure)
        return np.abs(x.detach().numpy()).max()

    for maximize in (False, True):
        assert run(torch, maximize) > 1e30 and run(gm, maximize) > 1e30
