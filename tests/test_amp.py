"""autocast and GradScaler: the policy, restoring state, the weight-cast cache, loss scaling with skipped steps,
scale growth and backoff, state_dict, and the errors of misuse.

The tests that compute run once per device (the `device` fixture of cuda_util.py: "cpu", and "cuda" when
present, a GPU or the emulator), with gm.autocast(<that device>): the policy table is the same on both, and
GradScaler's fused unscale runs the CUDA kernel (kernels/cuda/amp.cu) on CUDA gradients."""
import functools

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet._core.autocast import _state as amp_state

from cuda_util import device, is_cuda, requires_cuda, to_np  # noqa: F401  (device: the per-device fixture)
from nnops_util import cuda_autocast


def _param(shape, seed, device="cpu"):
    rng = np.random.default_rng(seed)
    return gm.from_numpy(rng.standard_normal(shape).astype(np.float32), device=device).requires_grad_()


# ---- autocast --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16])
def test_matmul_runs_in_low_precision_and_reductions_in_float32(device, dtype):
    a, b = _param((8, 16), 0, device), _param((16, 4), 1, device)
    with gm.autocast(device, dtype=dtype):
        y = a @ b
        s = y.sum()
        e = y.exp()
    assert y.dtype == dtype
    # sum and exp: on PyTorch's CUDA float32 list, not on its CPU one (they follow their input there)
    wide = gm.float32 if device.startswith("cuda") else dtype
    assert s.dtype == wide and e.dtype == wide
    assert y.device == s.device == a.device
    ref = to_np(a) @ to_np(b)
    tol = 1e-2 if dtype == gm.float16 else 5e-2
    np.testing.assert_allclose(to_np(y), ref, rtol=tol, atol=tol)
    s.backward()
    assert a.grad.dtype == gm.float32 and b.grad.dtype == gm.float32  # grads land in the parameters' dtype
    np.testing.assert_allclose(to_np(a.grad), np.ones((8, 4)) @ to_np(b).T, rtol=tol, atol=tol)


def test_binary_ops_promote_and_others_follow_inputs(device):
    a = _param((4, 4), 2, device)
    with gm.autocast(device, dtype=gm.float16):
        h = a @ a
        assert (h + a).dtype == gm.float32  # float16 + float32 promotes
        assert (h * 2.0).dtype == gm.float16  # follows its input
        assert h.abs().dtype == gm.float16


@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16])
def test_the_policy_table_on_every_op_it_names(device, dtype):
    # PyTorch's tables: low precision for convolution, transposed convolution, linear and matmul on both devices;
    # float32 for the losses on both; float32 for softmax, log_softmax, reductions, exp and log on CUDA only (on
    # the CPU they follow their input, as PyTorch's CPU autocast leaves them); the rest follows its input. Each
    # result is checked against float64 NumPy at its dtype's precision.
    F = gm.nn.functional
    rng = np.random.default_rng(8)

    def t(*shape):
        return gm.from_numpy(rng.standard_normal(shape).astype(np.float32), device=device)
    x, w, wt, lw = t(2, 3, 6, 6), t(4, 3, 3, 3), t(3, 2, 2, 2), t(5, 6)
    tol = 1e-2 if dtype == gm.float16 else 6e-2
    with gm.autocast(device, dtype=dtype):
        h = F.conv2d(x, w, padding=1)
        up = F.conv_transpose2d(x, wt, stride=2)
        lin = F.linear(x, lw)
        low = {"conv2d": h, "conv_transpose2d": up, "linear": lin, "matmul": x @ x, "relu": h.relu(),
               "max_pool2d": F.max_pool2d(h, 2), "view": h.reshape(2, -1)}
        high = {"softmax": F.softmax(h, 1), "log_softmax": F.log_softmax(h, 1), "mse_loss": F.mse_loss(h, h * 0.5),
                "sum": h.sum(), "mean": h.mean(), "var": h.var(), "exp": h.exp(), "log": h.abs().log(),
                "cross_entropy": F.cross_entropy(lin.reshape(-1, 5), gm.zeros(36, dtype=gm.int64, device=device)),
                "batch_norm mean": F.batch_norm(h, None, None, training=True).mean()}
    for name, r in low.items():
        assert r.dtype == dtype and r.device == x.device, f"{name}: {r.dtype} on {r.device}"
    cuda = device.startswith("cuda")
    for name, r in high.items():
        want = gm.float32 if cuda or name in ("mse_loss", "cross_entropy") else dtype
        assert r.dtype == want and r.device == x.device, f"{name}: {r.dtype} on {r.device}"
    h64 = to_np(h)
    ref = np.zeros((2, 4, 6, 6))
    xp = np.pad(to_np(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + 6, j:j + 6], to_np(w)[:, :, i, j])
    np.testing.assert_allclose(h64, ref, rtol=tol, atol=tol * 4)
    np.testing.assert_allclose(to_np(lin), to_np(x) @ to_np(lw).T, rtol=tol, atol=tol * 4)
    # float32 ops compute on the low-precision values widened exactly: float32 accuracy on those values
    # (on the CPU the results are rounded to the low-precision dtype once: its precision)
    rt = 1e-6 if cuda else tol
    finite = np.exp(h64) < (6e4 if dtype == gm.float16 else np.inf)  # float16's exp overflows past 65504
    np.testing.assert_allclose(to_np(high["exp"])[finite], np.exp(h64)[finite], rtol=rt, atol=0 if cuda else 1e-5)
    np.testing.assert_allclose(to_np(high["sum"]), h64.sum(), rtol=max(rt, 1e-5))
    e = np.exp(h64 - h64.max(1, keepdims=True))
    np.testing.assert_allclose(to_np(high["softmax"]), e / e.sum(1, keepdims=True), rtol=max(rt, 1e-5),
                               atol=1e-7 if cuda else tol)


def test_autocast_restores_state_nested_and_on_exceptions():
    assert not amp_state.enabled
    with gm.autocast("cpu", dtype=gm.float16):
        with gm.autocast("cpu", dtype=gm.bfloat16):
            assert amp_state.dtype == gm.bfloat16
        assert amp_state.dtype == gm.float16
        with gm.autocast("cpu", enabled=False):
            assert not amp_state.enabled
            a = _param((2, 2), 3)
            assert (a @ a).dtype == gm.float32
        assert amp_state.enabled
    assert not amp_state.enabled
    with pytest.raises(KeyError):
        with gm.autocast("cpu", dtype=gm.float16):
            raise KeyError
    assert not amp_state.enabled and amp_state.depth == 0 and not amp_state.cache


def test_autocast_as_decorator(device):
    @gm.autocast(device, dtype=gm.bfloat16)
    def f(a):
        return a @ a
    assert f(_param((3, 3), 4, device)).dtype == gm.bfloat16
    assert not amp_state.enabled


def test_autocast_applies_to_its_own_device_only(device):
    # a region for the other device type leaves this device's tensors alone; one for this device lowers them
    other = "cpu" if is_cuda(device) else "cuda"
    a = _param((4, 4), 6, device)
    with gm.autocast(other, dtype=gm.float16):
        assert (a @ a).dtype == gm.float32
        assert a.softmax(1).dtype == gm.float32
    assert gm.amp.is_autocast_enabled() is False
    with gm.autocast(device, dtype=gm.float16):
        assert gm.amp.is_autocast_enabled(device) and not gm.amp.is_autocast_enabled(other)
        assert gm.amp.get_autocast_dtype(device) == gm.float16 == gm.amp.get_autocast_dtype()
        assert gm.amp.get_autocast_dtype(other) == (gm.bfloat16 if other == "cpu" else gm.float16)  # its default
        assert (a @ a).dtype == gm.float16
    with gm.autocast(device, dtype=gm.bfloat16):
        assert gm.amp.get_autocast_dtype(device) == gm.bfloat16
    assert gm.amp.get_autocast_dtype() is None
    assert gm.amp.get_autocast_dtype("cuda") == gm.float16 and gm.amp.get_autocast_dtype("cpu") == gm.bfloat16
    with pytest.raises(ValueError, match="device_type"):
        gm.amp.get_autocast_dtype("tpu")


def test_parameter_casts_are_cached_for_the_outermost_region(device):
    w = _param((32, 32), 5, device)
    x = gm.ones(4, 32, device=device)
    with gm.autocast(device, dtype=gm.float16):
        y1 = x @ w
        n_after_first = len(amp_state.cache)
        y2 = (x * 2.0) @ w
        with gm.autocast(device, dtype=gm.float16):
            y3 = x @ w
        assert len(amp_state.cache) == n_after_first == 1  # one float16 copy of w, reused
        assert y1.grad_fn.next_functions[1][0] is y2.grad_fn.next_functions[1][0] is \
            y3.grad_fn.next_functions[1][0]
    assert not amp_state.cache  # released with the outermost region
    (y1.sum() + y2.sum() + y3.sum()).backward()
    np.testing.assert_allclose(to_np(w.grad), np.full((32, 32), 16.0), rtol=1e-3)


def test_autocast_bad_arguments():
    with pytest.raises(ValueError, match="device_type"):
        gm.autocast("tpu")
    # a dtype autocast has no policy for: PyTorch's warning, and the region runs without autocast (opacus enters
    # autocast(dtype=activations.dtype), which is int64 for an Embedding's input)
    for dtype in (gm.float64, gm.float32, gm.int64):
        with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported"):
            region = gm.autocast("cpu", dtype=dtype)
        with region:
            assert not gm.is_autocast_enabled("cpu")
            assert (gm.ones(2, 2) @ gm.ones(2, 2)).dtype == gm.float32
    with pytest.raises(TypeError):
        gm.autocast("cpu", dtype="complex64")


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_autocast_halves_saved_matmul_inputs(device_type):
    # The activation a linear layer saves for backward takes half the bytes under float16 autocast. Meta tensors
    # count as being on every device: the estimate follows the policy of the device type of the region.
    x = gm.ones(64, 256, device="meta", requires_grad=True)
    w = gm.ones(256, 256, device="meta", requires_grad=True)

    def saved_by_matmul(**autocast):
        h = x * 1.0  # an intermediate, 64 KiB in float32
        base = gm.memory.memory_stats("meta")["by_category"]["activation"]["current"]
        if autocast:
            with (cuda_autocast if device_type == "cuda" else functools.partial(gm.autocast, "cpu"))(**autocast):
                y = h @ w
        else:
            y = h @ w
        return gm.memory.memory_stats("meta")["by_category"]["activation"]["current"] - base, y

    fp32_bytes, y1 = saved_by_matmul()
    half_bytes, y2 = saved_by_matmul(dtype=gm.float16)
    assert fp32_bytes == 64 * 256 * 4
    # the float16 copy of h (half of fp32_bytes) plus the float16 copy of w, made once per autocast region
    assert half_bytes == fp32_bytes // 2 + 256 * 256 * 2
    del x, w, y1, y2


# ---- GradScaler --------------------------------------------------------------------------------------------
def _model(seed=0, device="cpu"):
    w = _param((4, 3), seed, device)
    return w, gm.optim.SGD([w], lr=0.1)


def _loss(w, x):
    return ((x @ w) ** 2).mean()


def test_scale_and_unscale_are_exact(device):
    w, opt = _model(device=device)
    scaler = gm.amp.GradScaler(device.split(":")[0], init_scale=1024.0)
    x = gm.ones(2, 4, device=device)
    loss = _loss(w, x)
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(loss.item() * 1024.0)
    scaled.backward()
    g_scaled = to_np(w.grad).astype(np.float32)
    scaler.unscale_(opt)
    assert w.grad.device == w.device
    np.testing.assert_array_equal(to_np(w.grad), (g_scaled / np.float32(1024.0)).astype(np.float32))
    with pytest.raises(RuntimeError, match="already called"):
        scaler.unscale_(opt)
    before = to_np(w)
    scaler.step(opt)
    np.testing.assert_allclose(to_np(w), before - 0.1 * g_scaled / 1024.0, rtol=1e-6)
    scaler.update()
    assert scaler.get_scale() == 1024.0


def test_injected_inf_skips_the_step_and_halves_the_scale(device):
    w, opt = _model(device=device)
    x = gm.ones(2, 4, device=device)
    scaler = gm.amp.GradScaler(device.split(":")[0], init_scale=2.0 ** 16)
    scaler.scale(_loss(w, x)).backward()
    with gm.no_grad():
        w.grad[0, 0] = float("inf")
    before = to_np(w)
    assert scaler.step(opt) is None
    np.testing.assert_array_equal(to_np(w), before)  # untouched
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 15
    opt.zero_grad()
    scaler.scale(_loss(w, x)).backward()
    with gm.no_grad():
        w.grad[1, 1] = float("nan")
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 14
    np.testing.assert_array_equal(to_np(w), before)
    # a clean step afterwards does update the parameters
    opt.zero_grad()
    scaler.scale(_loss(w, x)).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 14 and not np.array_equal(to_np(w), before)


def test_scale_grows_after_growth_interval_clean_steps(device):
    w, opt = _model(device=device)
    scaler = gm.amp.GradScaler(device.split(":")[0], init_scale=8.0, growth_factor=2.0, growth_interval=3)
    scales = []
    for _ in range(7):
        opt.zero_grad()
        scaler.scale(_loss(w, gm.ones(2, 4, device=device))).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [8.0, 8.0, 16.0, 16.0, 16.0, 32.0, 32.0]


def test_state_dict_round_trip(tmp_path, device):
    scaler = gm.amp.GradScaler(device.split(":")[0], init_scale=128.0, growth_interval=5)
    w, opt = _model(device=device)
    for _ in range(2):
        scaler.scale(_loss(w, gm.ones(2, 4, device=device))).backward()
        scaler.step(opt)
        scaler.update()
    state = scaler.state_dict()
    assert state == {"scale": 128.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 5,
                     "_growth_tracker": 2}
    gm.save({"scaler": state}, tmp_path / "ckpt.safetensors")
    other = gm.amp.GradScaler(device.split(":")[0])
    other.load_state_dict(gm.load(tmp_path / "ckpt.safetensors")["scaler"])
    assert other.state_dict() == state
    with pytest.raises(KeyError, match="missing"):
        other.load_state_dict({"scale": 1.0})


def test_misuse_gives_clear_errors():
    w, opt = _model()
    scaler = gm.amp.GradScaler("cpu")
    with pytest.raises(RuntimeError, match="before scale"):
        scaler.step(opt)
    with pytest.raises(ValueError, match="init_scale"):
        gm.amp.GradScaler(init_scale=0)
    with pytest.raises(ValueError, match="growth_interval"):
        gm.amp.GradScaler(growth_interval=0)
    disabled = gm.amp.GradScaler(enabled=False)
    loss = _loss(w, gm.ones(2, 4))
    assert disabled.scale(loss) is loss and disabled.get_scale() == 1.0


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16])
def test_story_002_accumulation_loop_runs_as_written(device, dtype):
    """The loop of story 002 with gm names: autocast, scale(loss / accumulation_steps).backward(), and
    step/update/zero_grad every accumulation_steps micro-batches. Its update equals one full-batch step."""
    rng = np.random.default_rng(7)
    data = [(gm.from_numpy(rng.standard_normal((2, 4)).astype(np.float32), device=device),
             gm.from_numpy(rng.standard_normal((2, 3)).astype(np.float32), device=device)) for _ in range(4)]
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    w = gm.from_numpy(w0.copy(), device=device).requires_grad_()  # from_numpy shares w0's memory, as PyTorch's
    opt = gm.optim.SGD([w], lr=0.5)
    # float16 tops out at 65504: at the default scale 2**16 this matmul's float16 weight gradient (entries near
    # 1) overflows, and GradScaler rightly skips the step (the skip is tested above); 2**10 leaves it finite.
    # bfloat16 has float32's range and takes the default.
    kind = device.split(":")[0]
    scaler = gm.amp.GradScaler(kind) if dtype == gm.bfloat16 else gm.amp.GradScaler(kind, init_scale=2.0 ** 10)
    accumulation_steps = 4
    for i, (image, target) in enumerate(data):
        with gm.autocast(device, dtype=dtype):
            out = image @ w
            train_loss = ((out - target) ** 2).mean()
        train_loss = train_loss / accumulation_steps
        scaler.scale(train_loss).backward()
        if (i + 1) % accumulation_steps == 0:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    # reference: one float64 step on the full batch
    x = np.concatenate([to_np(d[0]) for d in data])
    y = np.concatenate([to_np(d[1]) for d in data])
    grad = 2 * x.T @ (x @ w0 - y) / y.size
    assert w.device == data[0][0].device
    np.testing.assert_allclose(to_np(w), w0 - 0.5 * grad, rtol=0.05, atol=0.02)
    assert w.grad is None


def test_torch_cuda_amp_spelling():
    """Story 002 imports `from torch.cuda.amp import autocast, GradScaler`: the same names under gm.cuda.amp are
    gm.autocast("cuda", float16 by default) and gm.amp.GradScaler("cuda"), with torch.cuda.amp's arguments."""
    from gpumemnet.cuda.amp import GradScaler, autocast
    if not gm.cuda.is_available():  # without CUDA they warn and disable themselves (tests/test_first_hour.py)
        pytest.skip("needs CUDA (emulated or real): without it torch.cuda.amp's names disable themselves")
    a = autocast()
    assert (a.device_type, a.dtype, a.enabled) == ("cuda", gm.float16, True)
    assert autocast(dtype=gm.bfloat16, enabled=False).dtype == gm.bfloat16
    with gm.cuda.amp.autocast():
        assert gm.amp.is_autocast_enabled("cuda") and gm.amp.get_autocast_dtype("cuda") == gm.float16
        assert not gm.amp.is_autocast_enabled("cpu")
    assert not gm.amp.is_autocast_enabled("cuda")
    s = GradScaler(init_scale=2.0 ** 10, growth_interval=5)
    assert isinstance(s, gm.amp.GradScaler) and s.get_scale() == 2.0 ** 10 and s.is_enabled()
    with pytest.raises(ValueError, match="growth_interval"):
        GradScaler(growth_interval=0)


@requires_cuda
def test_story_002_loop_with_torch_cuda_amp_names_on_cuda():
    """The story's loop as written, `with gm.cuda.amp.autocast():` and `gm.cuda.amp.GradScaler()`, gives the same
    weights, bit for bit, as the current names."""
    device = "cuda"
    results = []
    for spelling in ("torch.cuda.amp", "current"):
        rng = np.random.default_rng(7)
        data = [(gm.from_numpy(rng.standard_normal((2, 4)).astype(np.float32), device=device),
                 gm.from_numpy(rng.standard_normal((2, 3)).astype(np.float32), device=device)) for _ in range(4)]
        w = gm.from_numpy(rng.standard_normal((4, 3)).astype(np.float32), device=device).requires_grad_()
        opt = gm.optim.SGD([w], lr=0.5)
        scaler = gm.cuda.amp.GradScaler(init_scale=2.0 ** 10) if spelling == "torch.cuda.amp" else \
            gm.amp.GradScaler("cuda", init_scale=2.0 ** 10)
        for i, (image, target) in enumerate(data):
            with (gm.cuda.amp.autocast() if spelling == "torch.cuda.amp" else gm.autocast("cuda", gm.float16)):
                out = image @ w
                assert out.dtype == gm.float16
                train_loss = ((out - target) ** 2).mean()
            scaler.scale(train_loss / 4).backward()
            if (i + 1) % 4 == 0:
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        results.append(to_np(w))
    np.testing.assert_array_equal(results[0], results[1])


def test_cnn_under_autocast_keeps_float32_where_the_policy_says(device):
    gm.manual_seed(0)
    net = gm.nn.Sequential(gm.nn.Conv2d(1, 4, 3, padding=1), gm.nn.BatchNorm2d(4), gm.nn.ReLU(),
                           gm.nn.MaxPool2d(2), gm.nn.Flatten(), gm.nn.Linear(4 * 4 * 4, 10)).to(device)
    x = gm.randn(8, 1, 8, 8).to(device)
    y = gm.tensor(np.arange(8) % 10).to(device)
    loss32 = gm.nn.functional.cross_entropy(net(x), y)
    for dtype in (gm.bfloat16, gm.float16):
        with gm.autocast(device, dtype=dtype):
            h = net[0](x)
            assert h.dtype == dtype and h.device == x.device  # convolution in low precision
            logits = net(x)
            assert logits.dtype == dtype  # linear in low precision
            # softmax: float32 on CUDA, its input's dtype on the CPU (PyTorch's two lists)
            assert logits.softmax(1).dtype == (gm.float32 if device.startswith("cuda") else dtype)
            loss = gm.nn.functional.cross_entropy(logits, y)
            assert loss.dtype == gm.float32  # losses in float32
            assert net[1](h).dtype == dtype  # batch norm: float32 statistics, output in its input's dtype
        assert abs(loss.item() - loss32.item()) < 0.05
        loss.backward()
        assert net[0].weight.grad.dtype == gm.float32
        net.zero_grad()
