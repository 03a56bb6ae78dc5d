"""nn ops on CUDA against the CPU (kernels/cuda/{activation,dropout,norm,softmax,loss}.cu, csrc/ops_nnops.c):
every op of the family run from the same inputs on both devices, forward and backward, in every float dtype.

Two levels: the _C functions themselves (forward and backward kernels, every argument combination, exact
allocator bytes), and the public functional API through autograd (x.cuda().requires_grad_() ... .backward()).
Exact equality where the CUDA kernel does the CPU's arithmetic with no transcendental and no multiply-add in
between (relu, leaky_relu, dropout and its mask, nll_loss, batch-norm eval's running statistics); tolerances
elsewhere (summation order of reductions, the GPU's libm, nvcc's fused multiply-adds). Runs on a GPU or on the
emulator build (tests/cuda_util.py)."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import _functional_nn as F
from cuda_util import HAVE_CUDA, assert_close, requires_cuda, to_np

pytestmark = requires_cuda

FLOATS = [gm.float32, gm.float64, gm.float16, gm.bfloat16]
NAMES = {gm.float32: "float32", gm.float64: "float64", gm.float16: "float16", gm.bfloat16: "bfloat16"}
RELU, LEAKY_RELU, SIGMOID, TANH, GELU, GELU_TANH = range(6)
NONE, MEAN, SUM = range(3)
MSE, L1 = range(2)


def _device_copy_works():
    """Strided copies on the device (the elementwise family's kernels) back non-contiguous inputs and autograd's
    gradient accumulation; until they exist, those tests skip with this reason."""
    if not HAVE_CUDA:
        return False
    try:
        gm.zeros(2, 3).cuda().t().contiguous()
        return True
    except RuntimeError:
        return False


COPY_REASON = ("same-device CUDA copies (elementwise family) are not available in this build: non-contiguous "
               "inputs, dtype casts of weights and autograd need them")
HAVE_DEVICE_COPY = _device_copy_works()
needs_device_copy = pytest.mark.skipif(not HAVE_DEVICE_COPY, reason=COPY_REASON)


def skip_without_device_copy(needed):
    if needed and not HAVE_DEVICE_COPY:
        pytest.skip(COPY_REASON)


def rng(seed=0):
    return np.random.default_rng(seed)


def pair(a, dtype=gm.float32):
    """The same values as a CPU tensor and a CUDA tensor."""
    c = gm.tensor(np.asarray(a), dtype=dtype)
    return c, c.cuda()


def close(dev, cpu, dtype=None, exact=False, **kw):
    assert_close(dev, cpu, exact=exact, **kw)


def delta_bytes(device, fn):
    """(bytes still allocated after fn, peak above the start while fn ran) on device; fn's results are kept
    alive until both are measured."""
    gm.memory.reset_peak_memory_stats(device)
    start = gm.memory.memory_allocated(device)
    keep = fn()
    now = gm.memory.memory_allocated(device)
    peak = gm.memory.max_memory_allocated(device)
    del keep
    return now - start, peak - start


# ---- activations ------------------------------------------------------------------------------------------------
ACT_CASES = [(RELU, 0.0), (LEAKY_RELU, 0.1), (LEAKY_RELU, -0.3), (SIGMOID, 0.0), (TANH, 0.0), (GELU, 0.0),
             (GELU_TANH, 0.0)]
EXACT_ACTS = (RELU, LEAKY_RELU)


def _saved(op, alpha, x, out):
    return x if op in (GELU, GELU_TANH) or (op == LEAKY_RELU and alpha < 0) else out


@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("op,alpha", ACT_CASES)
def test_activation_forward_backward(op, alpha, dtype):
    r = rng(op)
    xc, xd = pair(r.standard_normal((3, 7, 45)) * 3, dtype)
    gc, gd = pair(r.standard_normal((3, 7, 45)), dtype)
    exact = op in EXACT_ACTS
    oc, od = _C.activation(op, xc, alpha), _C.activation(op, xd, alpha)
    close(od, oc, exact=exact)
    sc, sd = _saved(op, alpha, xc, oc), _saved(op, alpha, xd, od)
    # GELU (tanh form)'s gradient has 1 - tanh(u)^2, which cancels where tanh saturates: the CPU's vector tanhf and
    # the device's differ by an ulp or two there, which is ~1e-6 of the gradient, absolute
    kw = {"atol": 4e-6} if op == GELU_TANH and dtype == gm.float32 else {}
    close(_C.activation_backward(op, gd, sd, alpha), _C.activation_backward(op, gc, sc, alpha), exact=exact, **kw)


@pytest.mark.parametrize("op,alpha", ACT_CASES)
def test_activation_inplace_and_special_values(op, alpha):
    a = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 80.0, -800.0, 1e-30, -2.5])
    xc, xd = pair(a)
    assert _C.activation(op, xd, alpha, xd) is xd  # the in-place form
    _C.activation(op, xc, alpha, xc)
    close(xd, xc, exact=op in EXACT_ACTS)


def test_activation_empty():
    for op, alpha in ACT_CASES:
        xc, xd = pair(np.zeros((0, 4)))
        out = _C.activation(op, xd, alpha)
        assert tuple(out.shape) == (0, 4) and out.device.type == "cuda"
        assert tuple(_C.activation_backward(op, xd, xd, alpha).shape) == (0, 4)


@needs_device_copy
def test_activation_noncontiguous():
    xc, xd = pair(rng(1).standard_normal((6, 5)))
    for op, alpha in ACT_CASES:
        close(_C.activation(op, xd.t(), alpha), _C.activation(op, xc.t(), alpha), exact=op in EXACT_ACTS)
    vc, vd = xc.t(), xd.t()
    _C.activation(RELU, vd, 0.0, vd)  # in place through a strided view: written back
    _C.activation(RELU, vc, 0.0, vc)
    close(xd, xc, exact=True)


@needs_device_copy
@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
def test_activation_autograd(dtype):
    r = rng(2)
    x = r.standard_normal((4, 9))
    g = r.standard_normal((4, 9))
    fns = [F.relu, lambda t: F.leaky_relu(t, 0.2), lambda t: F.leaky_relu(t, -0.2), F.sigmoid, F.tanh, F.gelu,
           lambda t: F.gelu(t, approximate="tanh")]
    for i, fn in enumerate(fns):
        grads = []
        for dev in ("cpu", "cuda"):
            t = gm.tensor(x, dtype=dtype).to(dev).requires_grad_()
            out = fn(t)
            out.backward(gm.tensor(g, dtype=dtype).to(dev))
            grads.append((out, t.grad))
        close(grads[1][0], grads[0][0], exact=i < 3)
        close(grads[1][1], grads[0][1], exact=i < 3)


def test_activation_memory_matches_cpu():
    xc, xd = pair(rng(3).standard_normal((64, 33)))
    for op, alpha in ACT_CASES:
        assert delta_bytes("cuda", lambda: _C.activation(op, xd, alpha)) == \
            delta_bytes("cpu", lambda: _C.activation(op, xc, alpha))


def test_mixing_devices_is_a_clear_error():
    xc, xd = pair(np.ones((2, 3)))
    with pytest.raises(RuntimeError, match="cpu|cuda"):
        _C.activation_backward(RELU, xd, xc)
    with pytest.raises(RuntimeError, match="cpu|cuda"):
        _C.softmax_backward(xc, xd, 1)
    t = gm.tensor(np.array([0, 1]))
    with pytest.raises(RuntimeError, match="cpu|cuda"):
        _C.cross_entropy(xd, t)
    with pytest.raises(RuntimeError, match="cpu|cuda"):
        _C.pointwise_loss(MSE, xd, xc)
    with pytest.raises(RuntimeError, match="cpu|cuda"):
        _C.batch_norm(xd, None, None, gm.ones(3), None, True, 0.1, 1e-5)


# ---- dropout ----------------------------------------------------------------------------------------------------
def _dropout_both(x, p, channelwise=False, seed=1234):
    res = []
    for t in x:
        gm.manual_seed(seed)
        out, mask = _C.dropout(t, p, channelwise)
        res.append((out, mask, tuple(gm.get_rng_state().tolist())))  # the 16 state bytes, comparable by ==
    return res


@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("shape", [(1001,), (3, 7, 5, 3), (2, 4096)])
def test_dropout_mask_is_bit_identical(shape, dtype):
    xc, xd = pair(rng(4).standard_normal(shape), dtype)
    (oc, mc, sc), (od, md, sd) = _dropout_both((xc, xd), 0.3)
    assert md.dtype == gm.bool_ and md.device.type == "cuda"
    close(md, mc, exact=True)
    close(od, oc, exact=True)
    assert sc == sd  # the generator advanced by the same number of blocks
    gc, gd = pair(rng(5).standard_normal(shape), dtype)
    close(_C.dropout_backward(gd, md, 0.3), _C.dropout_backward(gc, mc, 0.3), exact=True)


@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
def test_dropout2d_mask_is_bit_identical(dtype):
    for shape in ((4, 6, 5, 7), (6, 5, 7)):
        xc, xd = pair(rng(6).standard_normal(shape), dtype)
        (oc, mc, sc), (od, md, sd) = _dropout_both((xc, xd), 0.5, channelwise=True)
        assert tuple(md.shape) == shape[:-2]
        close(md, mc, exact=True)
        close(od, oc, exact=True)
        assert sc == sd
        gc, gd = pair(rng(7).standard_normal(shape), dtype)
        close(_C.dropout_backward(gd, md, 0.5), _C.dropout_backward(gc, mc, 0.5), exact=True)


def test_dropout_edges_p0_p1_inf_and_empty():
    a = np.array([1.0, -2.0, np.inf, -np.inf, np.nan, 0.5])
    xc, xd = pair(a)
    (oc, mc, sc), (od, md, sd) = _dropout_both((xc, xd), 1.0)
    close(od, oc, exact=True)
    assert not to_np(md).any() and (to_np(od) == 0).all()  # zeros even for inf/NaN inputs
    gm.manual_seed(9)
    before = gm.get_rng_state()
    _C.dropout(xd, 1.0)
    assert gm.get_rng_state().equal(before)  # p = 1 draws nothing, as on the CPU
    (oc, mc, sc), (od, md, sd) = _dropout_both((xc, xd), 0.0)
    close(od, oc, exact=True)
    assert to_np(md).all()
    xc, xd = pair(np.zeros((0, 3)))
    (oc, mc, sc), (od, md, sd) = _dropout_both((xc, xd), 0.4)
    assert tuple(od.shape) == (0, 3) and tuple(md.shape) == (0, 3) and sc == sd


def test_dropout_inplace():
    xc, xd = pair(rng(8).standard_normal((5, 9)))
    gm.manual_seed(3)
    _C.dropout(xc, 0.25, False, True)
    gm.manual_seed(3)
    out, _ = _C.dropout(xd, 0.25, False, True)
    assert out is xd
    close(xd, xc, exact=True)


@needs_device_copy
def test_dropout_autograd_and_noncontiguous():
    x = rng(9).standard_normal((6, 8))
    g = rng(10).standard_normal((8, 6))
    res = []
    for dev in ("cpu", "cuda"):
        t = gm.tensor(x).to(dev).requires_grad_()
        gm.manual_seed(77)
        out = F.dropout(t.t(), 0.4)
        out.backward(gm.tensor(g).to(dev))
        res.append((out, t.grad))
    close(res[1][0], res[0][0], exact=True)
    close(res[1][1], res[0][1], exact=True)


def test_dropout_memory_matches_cpu():
    xc, xd = pair(rng(11).standard_normal((3, 4, 33)))
    gm.manual_seed(1)
    a = delta_bytes("cpu", lambda: _C.dropout(xc, 0.5))
    gm.manual_seed(1)
    assert delta_bytes("cuda", lambda: _C.dropout(xd, 0.5)) == a


# ---- batch norm -------------------------------------------------------------------------------------------------
# channels split over blocks or not; HW = 1, < 256 and >= 256
BN_SHAPES = [(16, 5), (200, 3), (3, 4, 5, 7), (2, 3, 16, 20), (40, 3, 1, 1)]


def _bn_inputs(shape, dtype, pdtype, seed=0, offset=0.0):
    r = rng(seed)
    C = shape[1]
    x = r.standard_normal(shape) * 2 + offset
    params = dict(w=r.uniform(0.5, 1.5, C), b=r.standard_normal(C), rm=r.standard_normal(C) * 0.1,
                  rv=r.uniform(0.5, 2.0, C))
    cpu = {k: gm.tensor(v, dtype=pdtype) for k, v in params.items()}
    cpu["x"] = gm.tensor(x, dtype=dtype)
    dev = {k: v.cuda() for k, v in cpu.items()}
    return cpu, dev


def _bn_tol(dtype):
    # normalisation divides by a per-channel std computed in another order: a few float32 ulps
    return {} if dtype in (gm.float16, gm.bfloat16) else dict(rtol=1e-5 if dtype == gm.float32 else 1e-10,
                                                               atol=1e-5 if dtype == gm.float32 else 1e-12)


@pytest.mark.parametrize("dtype,pdtype", [(gm.float32, gm.float32), (gm.float64, gm.float64),
                                          (gm.float16, gm.float32), (gm.bfloat16, gm.float32),
                                          (gm.float16, gm.float16)], ids=str)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_training(shape, dtype, pdtype):
    cpu, dev = _bn_inputs(shape, dtype, pdtype, seed=len(shape))
    outs = []
    for t in (cpu, dev):
        out, mean, invstd = _C.batch_norm(t["x"], t["rm"], t["rv"], t["w"], t["b"], True, 0.1, 1e-5)
        outs.append((out, mean, invstd))
    tol = _bn_tol(dtype)
    for d, c in zip(outs[1], outs[0]):
        close(d, c, **tol)
    close(dev["rm"], cpu["rm"], **tol)
    close(dev["rv"], cpu["rv"], **tol)
    g = rng(1).standard_normal(shape)
    gc, gd = gm.tensor(g, dtype=dtype), gm.tensor(g, dtype=dtype).cuda()
    for need in ((True, True, True), (True, False, False), (False, True, True), (False, False, True)):
        rc = _C.batch_norm_backward(gc, cpu["x"], cpu["w"], outs[0][1], outs[0][2], True, *need)
        rd = _C.batch_norm_backward(gd, dev["x"], dev["w"], outs[1][1], outs[1][2], True, *need)
        for d, c in zip(rd, rc):
            assert (d is None) == (c is None)
            if c is not None:
                # sums of products over a channel: relative to the gradient's scale
                scale = float(np.abs(to_np(c)).max()) or 1.0
                close(d, c, rtol=tol.get("rtol", 2e-2), atol=tol.get("atol", 2e-2) * scale)


@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_eval(shape, dtype):
    cpu, dev = _bn_inputs(shape, dtype, gm.float32, seed=7)
    rc = _C.batch_norm(cpu["x"], cpu["rm"], cpu["rv"], cpu["w"], cpu["b"], False, 0.1, 1e-5)
    rd = _C.batch_norm(dev["x"], dev["rm"], dev["rv"], dev["w"], dev["b"], False, 0.1, 1e-5)
    close(rd[1], rc[1], exact=True)  # mean = running_mean
    close(rd[2], rc[2])
    close(rd[0], rc[0], **_bn_tol(dtype))
    close(dev["rm"], cpu["rm"], exact=True)  # untouched in eval
    g = rng(2).standard_normal(shape)
    gc, gd = gm.tensor(g, dtype=dtype), gm.tensor(g, dtype=dtype).cuda()
    # eval without the weight's gradient: the input is not needed (None)
    bc = _C.batch_norm_backward(gc, None, cpu["w"], rc[1], rc[2], False, True, False, True)
    bd = _C.batch_norm_backward(gd, None, dev["w"], rd[1], rd[2], False, True, False, True)
    close(bd[0], bc[0], **_bn_tol(dtype))
    close(bd[2], bc[2], **({} if dtype in (gm.float16, gm.bfloat16) else dict(rtol=1e-5, atol=1e-5)))
    bc = _C.batch_norm_backward(gc, cpu["x"], cpu["w"], rc[1], rc[2], False, True, True, True)
    bd = _C.batch_norm_backward(gd, dev["x"], dev["w"], rd[1], rd[2], False, True, True, True)
    for d, c in zip(bd, bc):
        close(d, c, **({} if dtype in (gm.float16, gm.bfloat16) else dict(rtol=1e-5, atol=1e-5)))


def test_batch_norm_without_affine_or_running_stats_and_far_from_zero():
    cpu, dev = _bn_inputs((8, 3, 4, 4), gm.float32, gm.float32, seed=3, offset=1000.0)
    rc = _C.batch_norm(cpu["x"], None, None, None, None, True, 0.1, 1e-5)
    rd = _C.batch_norm(dev["x"], None, None, None, None, True, 0.1, 1e-5)
    for d, c in zip(rd, rc):
        close(d, c, rtol=1e-5, atol=1e-4)  # two-pass variance: no cancellation at mean 1000


def test_batch_norm_empty_channels_and_batch():
    x = gm.zeros(4, 0, 3).cuda()
    out, mean, invstd = _C.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    assert tuple(out.shape) == (4, 0, 3) and tuple(mean.shape) == (0,)
    cpu, dev = _bn_inputs((0, 3, 2, 2), gm.float32, gm.float32)
    rc = _C.batch_norm(cpu["x"], cpu["rm"], cpu["rv"], cpu["w"], cpu["b"], False, 0.1, 1e-5)
    rd = _C.batch_norm(dev["x"], dev["rm"], dev["rv"], dev["w"], dev["b"], False, 0.1, 1e-5)
    assert tuple(rd[0].shape) == (0, 3, 2, 2)
    close(rd[2], rc[2])


@needs_device_copy
def test_batch_norm_autograd_and_module():
    x = rng(12).standard_normal((6, 3, 5, 5))
    g = rng(13).standard_normal((6, 3, 5, 5))
    res = []
    for dev in ("cpu", "cuda"):
        bn = gm.nn.BatchNorm2d(3).to(dev)
        t = gm.tensor(x, dtype=gm.float32).to(dev).requires_grad_()
        out = bn(t.permute(0, 1, 3, 2))  # non-contiguous input
        out.backward(gm.tensor(g, dtype=gm.float32).to(dev))
        res.append((out, t.grad, bn.weight.grad, bn.bias.grad, bn.running_mean, bn.running_var))
    for d, c in zip(res[1], res[0]):
        close(d, c, rtol=1e-5, atol=1e-5)


def test_batch_norm_memory():
    """Outputs take the CPU's bytes; training (and backward's sums) also take the per-channel partial sums of
    the blocks a channel is split over as workspace while the call runs: a few KiB, nothing left after."""
    cpu, dev = _bn_inputs((4, 3, 6, 6), gm.float32, gm.float32)
    for training in (True, False):
        kc, pc = delta_bytes("cpu", lambda: _C.batch_norm(cpu["x"], cpu["rm"], cpu["rv"], cpu["w"], cpu["b"], training,
                                                          0.1, 1e-5))
        kd, pd = delta_bytes("cuda", lambda: _C.batch_norm(dev["x"], dev["rm"], dev["rv"], dev["w"], dev["b"],
                                                           training, 0.1, 1e-5))
        assert kd == kc
        assert pc <= pd <= pc + 65536 and (pd == pc) == (not training)
    gc, gd = pair(np.ones((4, 3, 6, 6)))
    oc = _C.batch_norm(cpu["x"], None, None, cpu["w"], None, True, 0.1, 1e-5)
    od = _C.batch_norm(dev["x"], None, None, dev["w"], None, True, 0.1, 1e-5)
    for need in ((True, True, True), (True, False, False)):
        kd, pd = delta_bytes("cuda", lambda: _C.batch_norm_backward(gd, dev["x"], dev["w"], od[1], od[2], True, *need))
        kc, pc = delta_bytes("cpu", lambda: _C.batch_norm_backward(gc, cpu["x"], cpu["w"], oc[1], oc[2], True, *need))
        assert kd == kc and pc < pd <= pc + 65536
    assert gm.memory.memory_stats("cuda")["by_category"]["workspace"]["current"] == 0


# ---- softmax ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("shape", [(5, 100), (2, 3, 4, 5), (7,), (3, 200, 2)], ids=str)
def test_softmax_every_dim(shape, dtype, log):
    r = rng(len(shape))
    xc, xd = pair(r.standard_normal(shape) * 4, dtype)
    gc, gd = pair(r.standard_normal(shape), dtype)
    for dim in range(-len(shape), len(shape)):
        oc, od = _C.softmax(xc, dim, log), _C.softmax(xd, dim, log)
        close(od, oc)
        close(_C.softmax_backward(gd, od, dim, log), _C.softmax_backward(gc, oc, dim, log),
              **({"atol": 1e-5} if dtype == gm.float32 else {}))


@pytest.mark.parametrize("log", [False, True])
def test_softmax_special_rows(log):
    a = np.array([[-np.inf] * 70, [np.nan] + [1.0] * 69, [np.inf] + [0.0] * 69, [0.0] * 69 + [-np.inf]])
    for x in (a, a[:, :5]):  # one block per row, and one thread per row
        xc, xd = pair(x)
        close(_C.softmax(xd, 1, log), _C.softmax(xc, 1, log))


def test_softmax_empty_and_scalar():
    for shape, dim in (((0, 5), 1), ((3, 0), 1), ((3, 0), 0), ((), 0)):
        xc, xd = pair(np.ones(shape))
        close(_C.softmax(xd, dim), _C.softmax(xc, dim))


@needs_device_copy
def test_softmax_autograd_noncontiguous():
    x = rng(14).standard_normal((4, 6, 3))
    g = rng(15).standard_normal((3, 6, 4))
    for fn in (F.softmax, F.log_softmax):
        res = []
        for dev in ("cpu", "cuda"):
            t = gm.tensor(x, dtype=gm.float32).to(dev).requires_grad_()
            out = fn(t.permute(2, 1, 0), dim=1)
            out.backward(gm.tensor(g, dtype=gm.float32).to(dev))
            res.append((out, t.grad))
        close(res[1][0], res[0][0])
        close(res[1][1], res[0][1], atol=1e-6)


def test_softmax_memory_matches_cpu():
    xc, xd = pair(rng(16).standard_normal((8, 100)))
    assert delta_bytes("cuda", lambda: _C.softmax(xd, 1)) == delta_bytes("cpu", lambda: _C.softmax(xc, 1))


# ---- class losses --------------------------------------------------------------------------------------------------
def _targets(shape, C, r, ignore=None, frac=0.0):
    t = r.integers(0, C, shape)
    if ignore is not None and frac:
        t = np.where(r.random(shape) < frac, ignore, t)
    return t


CE_CASES = [  # input shape, weight?, ignore fraction, smoothing
    ((6, 5), False, 0.0, 0.0), ((6, 5), True, 0.3, 0.0), ((6, 5), True, 0.3, 0.2), ((9, 130), False, 0.2, 0.1),
    ((9, 130), True, 0.0, 0.0), ((3, 4, 5, 6), False, 0.0, 0.0), ((3, 4, 5, 6), True, 0.25, 0.15), ((7,), False, 0, 0),
    ((2, 3, 300), True, 0.1, 0.05)]


def _ce_inputs(shape, weighted, frac, dtype, seed):
    skip_without_device_copy(weighted and dtype != gm.float64)  # weights go to the kernels as float64
    r = rng(seed)
    C = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    x = r.standard_normal(shape) * 3
    t = _targets(tshape, C, r, -100, frac)
    w = r.uniform(0.2, 2.0, C) if weighted else None
    xc, xd = pair(x, dtype)
    tc, td = pair(t, gm.int64)
    wc = gm.tensor(w, dtype=dtype) if weighted else None
    return (xc, tc, wc), (xd, td, wc.cuda() if weighted else None)


def _loss_tol(dtype):
    return dict(rtol=2e-5, atol=1e-5) if dtype == gm.float32 else {}


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("case", range(len(CE_CASES)))
def test_cross_entropy(case, dtype, reduction):
    shape, weighted, frac, eps = CE_CASES[case]
    (xc, tc, wc), (xd, td, wd) = _ce_inputs(shape, weighted, frac, dtype, case)
    lc, lsec, wsc = _C.cross_entropy(xc, tc, wc, -100, reduction, eps)
    ld, lsed, wsd = _C.cross_entropy(xd, td, wd, -100, reduction, eps)
    tol = _loss_tol(dtype)
    close(ld, lc, **tol)
    close(lsed, lsec, **({} if dtype == gm.float64 else dict(rtol=1e-5, atol=1e-5)))
    assert wsd == pytest.approx(wsc, rel=1e-12)
    g = rng(case + 100).standard_normal(tuple(lc.shape))
    gc, gd = pair(g, dtype)
    dc = _C.cross_entropy_backward(gc, xc, tc, wc, lsec, -100, reduction, eps, wsc)
    dd = _C.cross_entropy_backward(gd, xd, td, wd, lsed, -100, reduction, eps, wsd)
    close(dd, dc, **tol)


def test_cross_entropy_all_ignored_and_empty():
    (xc, tc, _), (xd, td, _) = _ce_inputs((4, 3), False, 0.0, gm.float32, 0)
    tc, td = pair(np.full(4, 2), gm.int64)
    for red in (NONE, MEAN, SUM):
        rc = _C.cross_entropy(xc, tc, None, 2, red, 0.0)
        rd = _C.cross_entropy(xd, td, None, 2, red, 0.0)
        close(rd[0], rc[0])  # mean: 0/0 = NaN on both
        assert rd[2] == rc[2] == 0.0
    xc, xd = pair(np.zeros((0, 3)))
    tc, td = pair(np.zeros(0, dtype=np.int64), gm.int64)
    for red in (NONE, MEAN, SUM):
        close(_C.cross_entropy(xd, td, None, -100, red, 0.0)[0], _C.cross_entropy(xc, tc, None, -100, red, 0.0)[0])


@pytest.mark.parametrize("bad", [5, -1, 1 << 40])
@pytest.mark.parametrize("shape", [(6, 5), (6, 130), (2, 5, 3)], ids=str)
def test_class_losses_bad_target_same_error(shape, bad):
    C = shape[1]
    bad = C if bad == 5 else bad
    r = rng(0)
    t = _targets((shape[0],) + shape[2:], C, r)
    t.flat[3] = bad
    t.flat[4] = bad + 1 if bad >= 0 else -7  # a later one: the first is named
    xc, xd = pair(r.standard_normal(shape))
    tc, td = pair(t, gm.int64)
    for fn in (lambda x, t: _C.cross_entropy(x, t, None, -100, MEAN, 0.0),
               lambda x, t: _C.nll_loss(x, t, None, -100, NONE)):
        with pytest.raises(IndexError) as ec:
            fn(xc, tc)
        with pytest.raises(IndexError) as ed:
            fn(xd, td)
        assert str(ed.value) == str(ec.value)
        assert f"target {bad} is out of bounds" in str(ed.value) and "flat position 3" in str(ed.value)
    # backward validates too (a direct call with targets that forward never saw)
    gc, gd = pair(np.ones(()))
    lse_c, lse_d = pair(np.zeros(t.shape), gm.float32)
    with pytest.raises(IndexError) as ec:
        _C.cross_entropy_backward(gc, xc, tc, None, lse_c, -100, MEAN, 0.0, 1.0)
    with pytest.raises(IndexError) as ed:
        _C.cross_entropy_backward(gd, xd, td, None, lse_d, -100, MEAN, 0.0, 1.0)
    assert str(ed.value) == str(ec.value)
    with pytest.raises(IndexError) as ec:
        _C.nll_loss_backward(gc, tc, None, -100, MEAN, 1.0, shape, "float32")
    with pytest.raises(IndexError) as ed:
        _C.nll_loss_backward(gd, td, None, -100, MEAN, 1.0, shape, "float32")
    assert str(ed.value) == str(ec.value)
    # the device is still usable after the error (no device-side assert)
    close(_C.activation(RELU, xd, 0.0), _C.activation(RELU, xc, 0.0), exact=True)


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("case", [0, 1, 3, 6, 7])
def test_nll_loss(case, dtype, reduction):
    shape, weighted, frac, _ = CE_CASES[case]
    (xc, tc, wc), (xd, td, wd) = _ce_inputs(shape, weighted, frac, dtype, case)
    lc, wsc = _C.nll_loss(xc, tc, wc, -100, reduction)
    ld, wsd = _C.nll_loss(xd, td, wd, -100, reduction)
    close(ld, lc, exact=reduction == NONE, **({} if reduction == NONE else _loss_tol(dtype)))
    assert wsd == pytest.approx(wsc, rel=1e-12)
    g = rng(case).standard_normal(tuple(lc.shape))
    gc, gd = pair(g, dtype)
    dc = _C.nll_loss_backward(gc, tc, wc, -100, reduction, wsc, shape, NAMES[dtype])
    dd = _C.nll_loss_backward(gd, td, wd, -100, reduction, wsd, shape, NAMES[dtype])
    close(dd, dc, **_loss_tol(dtype))


def test_class_loss_memory():
    """Outputs are the CPU's bytes; the CUDA run also takes the reduction scratch (workspace) while it runs."""
    from gpumemnet import _C as C_
    (xc, tc, _), (xd, td, _) = _ce_inputs((16, 10), False, 0.0, gm.float32, 0)
    scratch = None
    for fn in (lambda x, t: C_.cross_entropy(x, t, None, -100, MEAN, 0.0), lambda x, t: C_.nll_loss(x, t)):
        kept_c, peak_c = delta_bytes("cpu", lambda: fn(xc, tc))
        kept_d, peak_d = delta_bytes("cuda", lambda: fn(xd, td))
        assert kept_d == kept_c
        extra = peak_d - peak_c
        assert 0 < extra <= 16384  # CUDA_LOSS_SCRATCH_BYTES rounded to the allocator's 512-byte granules
        scratch = extra if scratch is None else scratch
        assert extra == scratch
    assert gm.memory.memory_stats("cuda")["by_category"]["workspace"]["current"] == 0


@needs_device_copy
@pytest.mark.parametrize("dtype", [gm.float32, gm.float64], ids=NAMES.get)
def test_class_losses_autograd(dtype):
    for case in (1, 2, 3, 6):
        shape, weighted, frac, eps = CE_CASES[case]
        (xc, tc, wc), (xd, td, wd) = _ce_inputs(shape, weighted, frac, dtype, case)
        res = []
        for x, t, w in ((xc, tc, wc), (xd, td, wd)):
            x = x.detach().requires_grad_()
            loss = F.cross_entropy(x, t, weight=w, label_smoothing=eps)
            loss.backward()
            x2 = x.detach().requires_grad_()
            nll = F.nll_loss(F.log_softmax(x2, dim=1), t, weight=w, reduction="sum")
            nll.backward()
            res.append((loss, x.grad, nll, x2.grad))
        for d, c in zip(res[1], res[0]):
            close(d, c, **_loss_tol(dtype))


# ---- pointwise and bce losses ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("op", [MSE, L1])
def test_pointwise_losses(op, dtype, reduction):
    r = rng(op)
    shape = (5, 3, 70)
    x = r.standard_normal(shape)
    t = np.where(r.random(shape) < 0.1, x, r.standard_normal(shape))  # some exact zeros of x - t (l1's sign)
    xc, xd = pair(x, dtype)
    tc, td = pair(t, dtype)
    lc, ld = _C.pointwise_loss(op, xc, tc, reduction), _C.pointwise_loss(op, xd, td, reduction)
    close(ld, lc, exact=reduction == NONE, **({} if reduction == NONE else _loss_tol(dtype)))
    gc, gd = pair(r.standard_normal(tuple(lc.shape)), dtype)
    for need in ((True, True), (True, False), (False, True)):
        rc = _C.pointwise_loss_backward(op, gc, xc, tc, reduction, *need)
        rd = _C.pointwise_loss_backward(op, gd, xd, td, reduction, *need)
        for d, c in zip(rd, rc):
            assert (d is None) == (c is None)
            if c is not None:
                close(d, c, exact=reduction == NONE)


def test_pointwise_losses_empty_and_nan():
    xc, xd = pair(np.zeros((0, 2)))
    for op in (MSE, L1):
        for red in (NONE, MEAN, SUM):
            close(_C.pointwise_loss(op, xd, xd, red), _C.pointwise_loss(op, xc, xc, red))
    xc, xd = pair(np.array([1.0, np.nan, 2.0]))
    tc, td = pair(np.array([1.0, 0.0, np.inf]))
    for op in (MSE, L1):
        close(_C.pointwise_loss(op, xd, td, MEAN), _C.pointwise_loss(op, xc, tc, MEAN))
        gc, gd = pair(np.ones(()))
        close(_C.pointwise_loss_backward(op, gd, xd, td, MEAN, True, True)[0],
              _C.pointwise_loss_backward(op, gc, xc, tc, MEAN, True, True)[0])


BCE_CASES = [  # input shape, weight shape, pos_weight shape
    ((6, 5), None, None), ((6, 5), (5,), None), ((6, 5), None, (5,)), ((4, 3, 5, 5), (3, 1, 1), (5,)),
    ((300,), (300,), (300,)), ((2, 3), (1, 3), None)]


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("case", range(len(BCE_CASES)))
def test_bce_with_logits(case, dtype, reduction):
    shape, wshape, pshape = BCE_CASES[case]
    # a weight that does not span the trailing dims as they are is laid out by a device copy
    skip_without_device_copy(wshape and wshape != shape[-len(wshape):])
    r = rng(case)
    xc, xd = pair(r.standard_normal(shape) * 5, dtype)
    tc, td = pair(r.random(shape), dtype)
    wc, wd = pair(r.uniform(0.1, 2, wshape), dtype) if wshape else (None, None)
    pc, pd = pair(r.uniform(0.5, 3, pshape), dtype) if pshape else (None, None)
    lc = _C.bce_with_logits(xc, tc, wc, pc, reduction)
    ld = _C.bce_with_logits(xd, td, wd, pd, reduction)
    close(ld, lc, **_loss_tol(dtype))
    gc, gd = pair(r.standard_normal(tuple(lc.shape)), dtype)
    for need in ((True, True), (True, False), (False, True)):
        rc = _C.bce_with_logits_backward(gc, xc, tc, wc, pc, reduction, *need)
        rd = _C.bce_with_logits_backward(gd, xd, td, wd, pd, reduction, *need)
        for d, c in zip(rd, rc):
            assert (d is None) == (c is None)
            if c is not None:
                close(d, c, **_loss_tol(dtype))


def test_bce_extremes():
    xc, xd = pair(np.array([-800.0, -30.0, 0.0, 30.0, 800.0, np.inf, -np.inf]))
    tc, td = pair(np.array([0.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.0]))
    close(_C.bce_with_logits(xd, td, None, None, NONE), _C.bce_with_logits(xc, tc, None, None, NONE))
    gc, gd = pair(np.ones(7))
    for d, c in zip(_C.bce_with_logits_backward(gd, xd, td, None, None, NONE, True, True),
                    _C.bce_with_logits_backward(gc, xc, tc, None, None, NONE, True, True)):
        close(d, c)


def test_reduced_pointwise_loss_memory():
    xc, xd = pair(rng(0).standard_normal((8, 9)))
    for red, scratch in ((NONE, False), (MEAN, True), (SUM, True)):
        kc, pc = delta_bytes("cpu", lambda: _C.pointwise_loss(MSE, xc, xc, red))
        kd, pd = delta_bytes("cuda", lambda: _C.pointwise_loss(MSE, xd, xd, red))
        assert kd == kc
        assert (pd > pc) == scratch and pd - pc <= 16384
        kc, pc = delta_bytes("cpu", lambda: _C.bce_with_logits(xc, xc, None, None, red))
        kd, pd = delta_bytes("cuda", lambda: _C.bce_with_logits(xd, xd, None, None, red))
        assert kd == kc and (pd > pc) == scratch


@needs_device_copy
@pytest.mark.parametrize("dtype", [gm.float32, gm.float64], ids=NAMES.get)
def test_pointwise_and_bce_autograd(dtype):
    r = rng(5)
    x, t = r.standard_normal((4, 6)), r.random((4, 6))
    fns = [F.mse_loss, F.l1_loss, F.binary_cross_entropy_with_logits,
           lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=gm.ones(6, dtype=dtype).to(a.device) * 2)]
    for fn in fns:
        res = []
        for dev in ("cpu", "cuda"):
            a = gm.tensor(x, dtype=dtype).to(dev).requires_grad_()
            b = gm.tensor(t, dtype=dtype).to(dev).requires_grad_()
            loss = fn(a, b)
            loss.backward()
            res.append((loss, a.grad, b.grad))
        for d, c in zip(res[1], res[0]):
            close(d, c, **_loss_tol(dtype))
