"""Group, layer and instance norm (csrc/ops_norm.c's group_norm, kernels/cpu/group_norm.c,
nn/_functional_norm.py, nn/modules/{normalization,instancenorm}.py) and BatchNorm1d/3d (nn/modules/batchnorm.py).

Each op against a NumPy formula in float64 and float32, its float64 gradients against finite differences, PyTorch
(values and every gradient, modules' running statistics), its error paths with PyTorch's exception types, and
meta against the CPU in exact allocator bytes (forward + backward, a permuted layer-norm input's copy included)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet import _C
from gpumemnet.nn import functional as F
from gradcheck import assert_close, check_against_torch, gradcheck, to_numpy
from nnops_util import R, T, cuda_autocast, allocated, rng, rounded


def gn_ref(x, G, w=None, b=None, eps=1e-5):
    N, C = x.shape[:2]
    xs = x.reshape(N, G, -1)
    mean, var = xs.mean(axis=2, keepdims=True), xs.var(axis=2, keepdims=True)
    out = ((xs - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


def ln_ref(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    out = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return out * (1 if w is None else w) + (0 if b is None else b)


TOLS = {gm.float64: (1e-12, 1e-10), gm.float32: (2e-5, 2e-5)}


# ---- forward against NumPy --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gm.float64, gm.float32], ids=str)
@pytest.mark.parametrize("shape", [(2, 6, 5), (3, 6, 3, 5), (2, 6, 2, 3, 2), (4, 6)])
@pytest.mark.parametrize("groups", [1, 3, 6])
def test_group_norm_numpy(shape, groups, dtype):
    x, w, b = R(*shape) * 3 + 2, R(6), R(6)
    out = F.group_norm(T(x, dtype), groups, T(w, dtype), T(b, dtype), eps=1e-3)
    assert out.dtype == dtype and tuple(out.shape) == shape
    assert_close(out, gn_ref(x, groups, w, b, 1e-3), *TOLS[dtype], what="group_norm")
    assert_close(F.group_norm(T(x, dtype), groups), gn_ref(x, groups), *TOLS[dtype], what="group_norm no affine")


@pytest.mark.parametrize("dtype", [gm.float64, gm.float32], ids=str)
@pytest.mark.parametrize("shape,k", [((4, 7), 1), ((2, 3, 5), 1), ((2, 3, 4, 5), 2), ((2, 3, 4, 5), 3)])
def test_layer_norm_numpy(shape, k, dtype):
    x = R(*shape) * 2 - 1
    ns = shape[len(shape) - k:]
    w, b = R(*ns), R(*ns)
    assert_close(F.layer_norm(T(x, dtype), ns, T(w, dtype), T(b, dtype)), ln_ref(x, k, w, b), *TOLS[dtype])
    assert_close(F.layer_norm(T(x, dtype), list(ns)), ln_ref(x, k), *TOLS[dtype])


def test_layer_norm_channels_last_permuted():
    """ConvNeXt's form: (N, C, H, W) -> permute to (N, H, W, C) (not contiguous) -> layer norm over C -> back."""
    x = R(2, 5, 3, 4)
    xp = T(x).permute(0, 2, 3, 1)
    assert not xp.is_contiguous()
    w, b = R(5), R(5)
    out = F.layer_norm(xp, (5,), T(w), T(b), 1e-6)
    assert tuple(out.shape) == (2, 3, 4, 5)
    assert_close(out, ln_ref(x.transpose(0, 2, 3, 1), 1, w, b, 1e-6), 1e-12, 1e-10)
    # LayerNorm2d of torchvision's convnext: permute, layer norm, permute back
    back = F.layer_norm(T(x).permute(0, 2, 3, 1), (5,), T(w), T(b), 1e-6).permute(0, 3, 1, 2)
    assert_close(back, ln_ref(x.transpose(0, 2, 3, 1), 1, w, b, 1e-6).transpose(0, 3, 1, 2), 1e-12, 1e-10)


def test_instance_norm_numpy_and_running_stats():
    x = R(3, 4, 5, 6) * 2 + 1
    w, b = R(4), R(4)
    rm, rv = T(R(4)), T(rng.uniform(0.5, 2, 4))
    rm0, rv0 = to_numpy(rm), to_numpy(rv)
    out = F.instance_norm(T(x), rm, rv, T(w), T(b), use_input_stats=True, momentum=0.2, eps=1e-4)
    assert_close(out, gn_ref(x, 4, w, b, 1e-4), 1e-12, 1e-10)
    # PyTorch's rule: towards the batch mean of the per-instance statistics, the variance unbiased
    means, vars_ = x.mean(axis=(2, 3)), x.var(axis=(2, 3), ddof=1)
    assert_close(rm, 0.8 * rm0 + 0.2 * means.mean(0), 1e-12, 1e-10, what="running_mean")
    assert_close(rv, 0.8 * rv0 + 0.2 * vars_.mean(0), 1e-9, 1e-9, what="running_var")
    # eval: every instance normalized with the running statistics
    ev = F.instance_norm(T(x), rm, rv, T(w), T(b), use_input_stats=False, eps=1e-4)
    r_m, r_v = to_numpy(rm).reshape(1, 4, 1, 1), to_numpy(rv).reshape(1, 4, 1, 1)
    assert_close(ev, (x - r_m) / np.sqrt(r_v + 1e-4) * w.reshape(1, 4, 1, 1) + b.reshape(1, 4, 1, 1), 1e-12, 1e-10)


def test_instance_norm_running_stats_updated_again_under_checkpoint():
    """As PyTorch's checkpoint does, the recomputation moves the running statistics a second time."""
    from gpumemnet.utils.checkpoint import checkpoint
    x = R(2, 3, 4, 4)
    m = nn.InstanceNorm2d(3, track_running_stats=True).double()
    ref = nn.InstanceNorm2d(3, track_running_stats=True).double()
    a = T(x, requires_grad=True)
    checkpoint(m, a).sum().backward()
    ref(T(x))
    ref(T(x))
    assert_close(m.running_mean, to_numpy(ref.running_mean), 0, 0)
    assert_close(m.running_var, to_numpy(ref.running_var), 0, 0)
    assert a.grad is not None


# ---- layer norm's row kernel (kernels/cpu/group_norm.c: one group, a row of elements each its own channel) -------
def ln_grads_ref(x, w, g, eps=1e-5):
    """float64 (dx, dw, db) of layer norm over the last dim, w None for no weight."""
    mu = x.mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    wg = g * (1 if w is None else w)
    dx = rstd * (wg - wg.mean(axis=-1, keepdims=True) - xhat * (wg * xhat).mean(axis=-1, keepdims=True))
    return dx, (g * xhat).sum(axis=0), g.sum(axis=0)


ROW_TOLS = {gm.float64: (1e-12, 1e-10), gm.float32: (1e-5, 1e-4), gm.bfloat16: (2e-2, 5e-2)}


@pytest.mark.parametrize("dtype", [gm.float64, gm.float32, gm.bfloat16], ids=str)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("shape", [(37, 1027), (3, 200), (5, 16)])
def test_layer_norm_rows_numpy(shape, affine, dtype):
    """Rows longer than a vector and not a multiple of one (the loops' remainders), more than one block of the
    weight's gradient (64 channels), each affine form; the gradients as autograd hands them (a fresh gradient
    tensor, which the kernel writes the input's gradient over)."""
    x, g = R(*shape) * 3 + 1, R(*shape)
    w = R(shape[1]) if affine != "none" else None
    b = R(shape[1]) if affine == "both" else None
    # the reference takes the inputs as rounded to dtype
    x, g, w, b = (None if v is None else to_numpy(T(v, dtype)).astype(np.float64) for v in (x, g, w, b))
    xt = T(x, dtype, requires_grad=True)
    wt, bt = (None if v is None else T(v, dtype, requires_grad=True) for v in (w, b))
    out = F.layer_norm(xt, (shape[1],), wt, bt)
    assert out.dtype == dtype
    assert_close(out, ln_ref(x, 1, w, b), *ROW_TOLS[dtype], what="layer_norm rows")
    (out * T(g, dtype)).sum().backward()
    dx, dw, db = ln_grads_ref(x, w, g)
    assert_close(xt.grad, dx, *ROW_TOLS[dtype], what="layer_norm rows: input gradient")
    if wt is not None:
        assert_close(wt.grad, dw, *ROW_TOLS[dtype], what="layer_norm rows: weight gradient")
    if bt is not None:
        assert_close(bt.grad, db, *ROW_TOLS[dtype], what="layer_norm rows: bias gradient")


@pytest.mark.parametrize("kind", ["layer", "group"])
def test_norm_same_at_any_thread_count(kind):
    """Groups (rows) go to threads whole and the weight's gradient sums over samples in order in every block of
    channels: one thread and two give the same bits (the sizes are above the kernels' parallel grain)."""
    shape, C = ((64, 1027), 1027) if kind == "layer" else ((8, 96, 9, 11), 96)
    x, w, b, g = R(*shape).astype(np.float32), R(C), R(C), R(*shape)

    def run():
        xt = T(x, requires_grad=True)
        wt, bt = T(w, gm.float32, requires_grad=True), T(b, gm.float32, requires_grad=True)
        out = F.layer_norm(xt, (C,), wt, bt) if kind == "layer" else F.group_norm(xt, 12, wt, bt)
        out.backward(T(g, gm.float32))
        return [to_numpy(t) for t in (out, xt.grad, wt.grad, bt.grad)]
    threads = gm.get_num_threads()
    try:
        gm.set_num_threads(1)
        one = run()
        gm.set_num_threads(2)
        two = run()
    finally:
        gm.set_num_threads(threads)
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)


# ---- gradients ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((2, 4, 2, 2), 1), ((1, 3, 2, 1, 2), 3)])
def test_group_norm_gradcheck(shape, groups):
    C = shape[1]
    gradcheck(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-3),
              [T(R(*shape), requires_grad=True), T(R(C), requires_grad=True), T(R(C), requires_grad=True)],
              what="group_norm")
    gradcheck(lambda x: F.group_norm(x, groups), [T(R(*shape), requires_grad=True)], what="group_norm no affine")


def test_layer_norm_gradcheck():
    gradcheck(lambda x, w, b: F.layer_norm(x.permute(0, 2, 3, 1), (3,), w, b),
              [T(R(2, 3, 2, 2), requires_grad=True), T(R(3), requires_grad=True), T(R(3), requires_grad=True)],
              what="layer_norm channels-last")
    gradcheck(lambda x, w: F.layer_norm(x, (2, 3), w),
              [T(R(2, 2, 3), requires_grad=True), T(R(2, 3), requires_grad=True)], what="layer_norm 2-d shape")


def test_instance_norm_gradcheck():
    gradcheck(lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
              [T(R(2, 3, 4), requires_grad=True), T(R(3), requires_grad=True), T(R(3), requires_grad=True)],
              what="instance_norm")
    rm, rv = T(R(3)), T(rng.uniform(0.5, 2, 3))
    gradcheck(lambda x, w: F.instance_norm(x, rm, rv, w, use_input_stats=False),
              [T(R(2, 3, 2, 2), requires_grad=True), T(R(3), requires_grad=True)], what="instance_norm eval")


# ---- against PyTorch ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 3, 5), 1), ((2, 6, 2, 3, 2), 6), ((5, 8), 4),
                                          ((4, 64, 9, 11), 8)])
def test_group_norm_torch(shape, groups):
    torch = pytest.importorskip("torch")
    C = shape[1]
    check_against_torch(lambda x, w, b: F.group_norm(x, groups, w, b),
                        lambda x, w, b: torch.nn.functional.group_norm(x, groups, w, b),
                        [R(*shape) * 2 + 3, R(C), R(C)], atol=1e-10, rtol=1e-9, what="group_norm")


@pytest.mark.parametrize("perm", [None, (0, 2, 3, 1)])
def test_layer_norm_torch(perm):
    torch = pytest.importorskip("torch")

    def run(lib):
        def fn(x, w, b):
            x = x if perm is None else x.permute(*perm)
            return lib.layer_norm(x, (x.shape[-1],), w, b, 1e-6)
        return fn
    C = 4 if perm else 5
    check_against_torch(run(F), run(torch.nn.functional), [R(2, 4, 3, 5), R(C), R(C)], atol=1e-10, rtol=1e-9)


def test_instance_norm_torch():
    torch = pytest.importorskip("torch")
    check_against_torch(lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                        lambda x, w, b: torch.nn.functional.instance_norm(x, weight=w, bias=b),
                        [R(2, 3, 4, 5) + 1, R(3), R(3)], atol=1e-10, rtol=1e-9)


def _copy_params(gm_mod, t_mod, torch):
    """The same random (not 1 and 0) weight and bias in both."""
    for name, p in t_mod.named_parameters():
        v = R(*p.shape)
        with torch.no_grad():
            p.copy_(torch.tensor(v))
        setattr(gm_mod, name, nn.Parameter(T(v, gm.float32)))


def _module_vs_torch(gm_mod, t_mod, shapes, torch, steps_eval=True):
    """Train-mode steps (outputs, input and parameter gradients, buffers), then eval, against PyTorch."""
    _copy_params(gm_mod, t_mod, torch)
    gm_mod.double()
    t_mod.double()
    for shape in shapes:
        x = R(*shape) * 2 + 0.5
        xg, xt = T(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        og, ot = gm_mod(xg), t_mod(xt)
        assert_close(og, ot.detach().numpy(), 1e-10, 1e-9, what=f"{type(gm_mod).__name__} out {shape}")
        w = R(*ot.shape)
        (og * T(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        assert_close(xg.grad, xt.grad.numpy(), 1e-10, 1e-9, what="input grad")
        for name, p in t_mod.named_parameters():
            assert_close(getattr(gm_mod, name).grad, p.grad.numpy(), 1e-9, 1e-9, what=f"{name} grad")
        for name, buf in t_mod.named_buffers():
            got = getattr(gm_mod, name)
            assert got is not None, name
            assert_close(to_numpy(got), buf.numpy(), 1e-10, 1e-9, what=f"buffer {name}")
    if steps_eval:
        gm_mod.eval()
        t_mod.eval()
        x = R(*shapes[0])
        assert_close(gm_mod(T(x)), t_mod(torch.tensor(x)).detach().numpy(), 1e-10, 1e-9, what="eval out")


@pytest.mark.parametrize("kind,shapes", [("1d", [(4, 3), (4, 3, 5)]), ("3d", [(2, 3, 2, 3, 2)])])
@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("track", [True, False])
def test_batch_norm_1d_3d_modules_torch(kind, shapes, momentum, track):
    torch = pytest.importorskip("torch")
    cls = {"1d": "BatchNorm1d", "3d": "BatchNorm3d"}[kind]
    g, t = getattr(nn, cls)(3, momentum=momentum, track_running_stats=track), \
        getattr(torch.nn, cls)(3, momentum=momentum, track_running_stats=track)
    _module_vs_torch(g, t, shapes * 2, torch)
    if track:
        assert int(to_numpy(g.num_batches_tracked)) == int(t.num_batches_tracked) == 2 * len(shapes)


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (2, 3, 6)), ("InstanceNorm2d", (2, 3, 4, 5)),
                                       ("InstanceNorm3d", (2, 3, 2, 3, 2)), ("InstanceNorm2d", (3, 4, 5))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True)])
def test_instance_norm_modules_torch(cls, shape, affine, track):
    torch = pytest.importorskip("torch")
    g = getattr(nn, cls)(3, affine=affine, track_running_stats=track)
    t = getattr(torch.nn, cls)(3, affine=affine, track_running_stats=track)
    _module_vs_torch(g, t, [shape, shape], torch)


def test_group_and_layer_norm_modules_torch():
    torch = pytest.importorskip("torch")
    _module_vs_torch(nn.GroupNorm(2, 6), torch.nn.GroupNorm(2, 6), [(3, 6, 4, 4), (2, 6, 5)], torch)
    _module_vs_torch(nn.GroupNorm(3, 6, affine=False), torch.nn.GroupNorm(3, 6, affine=False), [(2, 6, 3)], torch)
    _module_vs_torch(nn.GroupNorm(3, 6, bias=False), torch.nn.GroupNorm(3, 6, bias=False), [(2, 6, 3)], torch)
    _module_vs_torch(nn.LayerNorm((4, 5)), torch.nn.LayerNorm((4, 5)), [(2, 3, 4, 5)], torch)
    _module_vs_torch(nn.LayerNorm(5, bias=False), torch.nn.LayerNorm(5, bias=False), [(2, 3, 5)], torch)
    _module_vs_torch(nn.LayerNorm(5, elementwise_affine=False), torch.nn.LayerNorm(5, elementwise_affine=False),
                     [(7, 5)], torch)
    assert repr(nn.GroupNorm(2, 6)) == repr(torch.nn.GroupNorm(2, 6))
    assert repr(nn.GroupNorm(2, 6, bias=False)) == repr(torch.nn.GroupNorm(2, 6, bias=False))
    assert repr(nn.BatchNorm3d(3, affine=False)) == repr(torch.nn.BatchNorm3d(3, affine=False))
    assert repr(nn.InstanceNorm1d(3, affine=True, bias=False)) == repr(torch.nn.InstanceNorm1d(3, affine=True,
                                                                                            bias=False))
    assert repr(nn.LayerNorm((4, 5))) == repr(torch.nn.LayerNorm((4, 5)))
    assert repr(nn.InstanceNorm2d(3)) == repr(torch.nn.InstanceNorm2d(3))
    assert repr(nn.BatchNorm1d(3)) == repr(torch.nn.BatchNorm1d(3))


def test_sync_batch_norm_single_process_torch():
    torch = pytest.importorskip("torch")
    g = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3), nn.Sequential(nn.BatchNorm1d(3)))
    g[0].bias = None
    conv = g[0]
    bn = g[1]
    s = nn.SyncBatchNorm.convert_sync_batchnorm(g)
    assert s is g and s[0] is conv and type(s[1]) is nn.SyncBatchNorm and type(s[2][0]) is nn.SyncBatchNorm
    assert s[1].weight is bn.weight and s[1].running_mean is bn.running_mean
    assert repr(nn.SyncBatchNorm(3)) == repr(torch.nn.SyncBatchNorm(3))
    _module_vs_torch(nn.SyncBatchNorm(3), torch.nn.SyncBatchNorm(3), [(4, 3, 2, 2), (5, 3)], torch)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        nn.SyncBatchNorm(3)(T(R(3)))


def test_module_paths():
    """torchvision imports these module paths."""
    from gpumemnet.nn.modules.instancenorm import InstanceNorm2d
    from gpumemnet.nn.modules.normalization import GroupNorm, LayerNorm
    from gpumemnet.nn.modules.batchnorm import BatchNorm1d, BatchNorm3d
    assert nn.InstanceNorm2d is InstanceNorm2d and nn.GroupNorm is GroupNorm and nn.LayerNorm is LayerNorm
    assert nn.BatchNorm1d is BatchNorm1d and nn.BatchNorm3d is BatchNorm3d


# ---- errors ---------------------------------------------------------------------------------------------------------
def test_errors():
    x = T(R(2, 6, 4))
    with pytest.raises(ValueError, match=r"num_channels \(8\) must be divisible by num_groups \(3\)"):
        nn.GroupNorm(3, 8)
    with pytest.raises(RuntimeError, match=r"divisible by num_groups.*\(2, 6, 4\) and num_groups=4"):
        F.group_norm(x, 4)
    with pytest.raises(RuntimeError, match=r"weight.*\(6\).*shape \(5,\)"):
        F.group_norm(x, 2, T(R(5)))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.group_norm(T(R(6)), 2)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.group_norm(T(R(1, 2)), 2)
    with pytest.raises(RuntimeError, match=r"normalized_shape=\[10\], expected input with shape \[\*, 10\], but got "
                                           r"input of size \[2, 6, 4\]"):
        F.layer_norm(x, (10,))
    with pytest.raises(RuntimeError, match=r"weight of shape \[5\] and normalized_shape = \[4\]"):
        F.layer_norm(x, (4,), T(R(5)))
    with pytest.raises(RuntimeError, match="input of size"):
        nn.LayerNorm(5)(x)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got input size "
                                         r"\[1, 6\]"):
        nn.BatchNorm1d(6)(T(R(1, 6)))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(T(R(1, 3, 1, 1)), None, None, training=True)
    F.batch_norm(T(R(1, 3, 1, 1)), T(np.zeros(3)), T(np.ones(3)), training=False)  # eval: fine
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input"):
        nn.BatchNorm1d(6)(T(R(2, 6, 2, 2)))
    with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input"):
        nn.BatchNorm3d(6)(T(R(2, 6, 2, 2)))
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input"):
        nn.InstanceNorm2d(6)(T(R(2, 6)))
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        F.instance_norm(T(R(2, 6, 1)))
    with pytest.raises(ValueError, match=r"size at dim=1 to match num_features \(5\), but got: 6"):
        nn.InstanceNorm1d(5, affine=True)(x)
    with pytest.raises(ValueError, match="use_input_stats=False needs running_mean"):
        F.instance_norm(x, use_input_stats=False)
    with pytest.raises(TypeError, match="floating point"):
        _C.group_norm(gm.zeros(2, 4, dtype=gm.int64), 2)
    out, mean, rstd = _C.group_norm(x, 2)
    with pytest.raises(ValueError, match=r"mean should be the forward's \(2, 2\) float64 statistics, got shape "
                                         r"\(2, 3\)"):
        _C.group_norm_backward(x, x, None, T(R(2, 3)), rstd, 2, True, False, False)
    with pytest.raises(ValueError, match="grad shape"):
        _C.group_norm_backward(T(R(2, 6, 3)), x, None, mean, rstd, 2, True, False, False)


# ---- memory: what backward keeps, meta == CPU -------------------------------------------------------------------
def test_group_norm_saves_input_and_stats_only():
    x = T(R(4, 8, 16, 16), gm.float32, requires_grad=True)
    w, b = T(R(8), gm.float32, requires_grad=True), T(R(8), gm.float32, requires_grad=True)
    before = allocated()
    out = F.group_norm(x, 4, w, b)
    # the output, plus two (N, G) float32 statistics; the input is kept by reference, no normalized copy
    assert allocated() - before == rounded(x.numel() * 4) + 2 * rounded(4 * 4 * 4)
    del out
    assert allocated() == before


def test_layer_norm_permuted_keeps_one_copy():
    """A channels-last input is copied once to contiguous; backward keeps that copy, not the permuted input's
    storage as well (Reshape saves nothing), so the layer holds what PyTorch's does: one input-sized tensor."""
    x = gm.zeros(2, 6, 5, 7, requires_grad=True)
    before = allocated()
    y = F.layer_norm(x.permute(0, 2, 3, 1), (6,))
    n, rows = x.numel() * 4, 2 * 5 * 7
    assert allocated() - before == 2 * rounded(n) + 2 * rounded(rows * 4)  # copy + output + mean + rstd
    del y
    assert allocated() == before


def _step_bytes(device, fn):
    gm.memory.reset_peak_memory_stats(device)
    before = _C.memory_allocated(device)
    fn(device)
    return _C.memory_allocated(device) - before, _C.max_memory_allocated(device) - before


def _params(device, *shapes):
    return [gm.zeros(*s, device=device, requires_grad=True) for s in shapes]


@pytest.mark.parametrize("case", ["group", "layer_permuted", "layer_2d", "instance_running", "bn1d", "bn3d"])
def test_meta_bytes_equal_cpu(case):
    def fn(device):
        if case == "group":
            x, w, b = _params(device, (4, 6, 8, 8), (6,), (6,))
            y = F.group_norm(x, 3, w, b)
        elif case == "layer_permuted":
            x, w, b = _params(device, (2, 6, 5, 7), (6,), (6,))
            y = F.layer_norm(x.permute(0, 2, 3, 1), (6,), w, b).permute(0, 3, 1, 2)
        elif case == "layer_2d":
            x, w, b = _params(device, (2, 6, 5, 7), (5, 7), (5, 7))
            y = F.layer_norm(x, (5, 7), w, b)
        elif case == "instance_running":
            m = nn.InstanceNorm2d(6, affine=True, track_running_stats=True, device=device)
            x, = _params(device, (3, 6, 5, 5))
            y = m(x)
        else:
            m = (nn.BatchNorm1d if case == "bn1d" else nn.BatchNorm3d)(6, device=device)
            x, = _params(device, (8, 6, 7) if case == "bn1d" else (2, 6, 3, 4, 5))
            y = m(x)
        (y * y).sum().backward()
        return x.grad
    cpu = _step_bytes("cpu", fn)
    meta = _step_bytes("meta", fn)
    assert meta == cpu, f"{case}: meta (allocated, peak) {meta} != cpu {cpu}"
    assert cpu[1] > 0


def test_meta_layer_norm_shapes_and_no_data():
    x = gm.empty(2, 5, 3, 4, device="meta")
    y = F.layer_norm(x.permute(0, 2, 3, 1), (5,))
    assert y.device.type == "meta" and tuple(y.shape) == (2, 3, 4, 5)
    out, mean, rstd = _C.group_norm(gm.empty(2, 6, 3, device="meta"), 3)
    assert tuple(mean.shape) == (2, 3) and mean.dtype == gm.float32 and tuple(out.shape) == (2, 6, 3)


# ---- autocast -------------------------------------------------------------------------------------------------------
def test_autocast_policy():
    """PyTorch's lists: layer_norm and group_norm run in float32 under CUDA autocast and follow their input under
    CPU autocast (a meta tensor follows the region's device); instance_norm and batch_norm follow their input."""
    x = T(R(2, 4, 3, 3), gm.bfloat16)
    w = T(R(4), gm.float32)
    with gm.autocast("cpu"):
        assert F.group_norm(x, 2, w, w).dtype == gm.bfloat16
        assert F.layer_norm(x, (3,)).dtype == gm.bfloat16
        assert F.instance_norm(x, weight=w, bias=w).dtype == gm.bfloat16
        assert F.batch_norm(x, None, None, w, w, training=True).dtype == gm.bfloat16
    with cuda_autocast(dtype=gm.bfloat16):
        xm, wm = x.to("meta"), w.to("meta")
        assert F.group_norm(xm, 2, wm, wm).dtype == gm.float32
        assert F.layer_norm(xm, (3,)).dtype == gm.float32
        assert F.batch_norm(xm, None, None, wm, wm, training=True).dtype == gm.bfloat16
    assert F.group_norm(x, 2).dtype == gm.bfloat16  # outside autocast: the input's dtype
    assert_close(F.group_norm(x, 2), gn_ref(to_numpy(x), 2), 2e-2, 2e-2)
