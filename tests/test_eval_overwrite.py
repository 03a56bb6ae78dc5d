"""Under no_grad, a Sequential lets BatchNorm (eval) and the activations write over an intermediate that nothing
else holds (nn/modules/_donation.py). What a user relies on: the values are PyTorch's; the eval forward's peak is
one tensor lower, byte-exact, and the estimate's inference peak says so; and no tensor anybody can still see is
ever overwritten (hooks, stored outputs, views, NumPy arrays, the Sequential's own input, subclasses)."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.nn.modules import _donation
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")


def _chain(nn):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6(), nn.LeakyReLU(0.2), nn.SiLU(), nn.Hardswish(),
        nn.Hardsigmoid(), nn.Mish(), nn.ELU(0.7), nn.Hardtanh(-0.3, 0.4), nn.Flatten(), nn.Linear(8 * 36, 5),
        nn.BatchNorm1d(5), nn.ReLU())


def _twins(build, device, seed=0):
    """The same module in PyTorch (float64) and gpumemnet (float64, on device), with random running statistics."""
    theirs = build(torch.nn).double()
    r = np.random.RandomState(seed)
    with torch.no_grad():
        for name, t in theirs.state_dict().items():
            if t.is_floating_point():
                v = r.standard_normal(t.shape)
                t.copy_(torch.from_numpy(np.abs(v) + 0.5 if name.endswith("running_var") else v))
    ours = build(gm.nn).to(device=device, dtype=gm.float64)
    ours.load_state_dict({k: gm.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return theirs.eval(), ours.eval()


def _run(theirs, ours, x, device):
    with torch.no_grad():
        want = theirs(torch.from_numpy(x))
    with gm.no_grad():
        got = ours(gm.tensor(x, device=device))
    return to_np(got), want.numpy()


def test_values_are_pytorchs(device):
    theirs, ours = _twins(_chain, device)
    x = np.random.RandomState(1).standard_normal((2, 3, 6, 6))
    got, want = _run(theirs, ours, x, device)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _peak_of_forward(model, x, device):
    gm.memory.reset_peak_memory_stats(device)
    base = gm.memory.memory_allocated(device)
    with gm.no_grad():
        out = model(x)
    del out
    return gm.memory.max_memory_allocated(device) - base


def _peaks_granted_and_blocked(model, x, device):
    """The forward's peak as it runs, and with the overwrites blocked (a global forward hook blocks every grant)."""
    granted = _peak_of_forward(model, x, device)
    handle = gm.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        return granted, _peak_of_forward(model, x, device)
    finally:
        handle.remove()


def test_peak_is_one_tensor_lower(device):
    """Linear -> BatchNorm1d -> ReLU on a (16, 32) float32 batch: each output is 2048 bytes, a whole number of the
    allocator's 512-byte units. Without a grant (a global forward hook blocks it) BatchNorm allocates a new output
    beside the Linear's; with it, it writes over the Linear's, so the peak is exactly 2048 bytes lower."""
    model = gm.nn.Sequential(gm.nn.Linear(8, 32), gm.nn.BatchNorm1d(32), gm.nn.ReLU()).to(device).eval()
    x = gm.randn(16, 8, device=device)
    out_bytes = 16 * 32 * 4
    granted, blocked = _peaks_granted_and_blocked(model, x, device)
    assert blocked - granted == out_bytes, (blocked, granted)


def test_estimate_counts_the_overwrite():
    """The estimate's inference forward runs the same Sequential on meta: its peak is the measured one."""
    model = gm.nn.Sequential(gm.nn.Conv2d(3, 16, 3, padding=1, bias=False), gm.nn.BatchNorm2d(16),
                             gm.nn.ReLU(), gm.nn.Conv2d(16, 16, 1), gm.nn.BatchNorm2d(16), gm.nn.ReLU6(),
                             gm.nn.AdaptiveAvgPool2d(1), gm.nn.Flatten(), gm.nn.Linear(16, 4))
    est = gm.memory.estimate(model, (4, 3, 16, 16), optimizer=False)
    model.eval()
    x = gm.randn(4, 3, 16, 16)
    gm.memory.empty_cache()
    assert _peak_of_forward(model, x, "cpu") == est.inference_peak


# ---- what must not be overwritten ---------------------------------------------------------------------------
def _hooked_capture(device):
    """A forward hook on the BatchNorm keeps its input: it must still be the convolution's output afterwards."""
    theirs, ours = _twins(lambda nn: nn.Sequential(nn.Conv2d(2, 4, 1), nn.BatchNorm2d(4), nn.ReLU()), device)
    kept = {}
    theirs[1].register_forward_hook(lambda m, i, o: kept.__setitem__("torch", i[0]))
    ours[1].register_forward_hook(lambda m, i, o: kept.__setitem__("gm", i[0]))
    return theirs, ours, kept


class _Keep:
    """A module that keeps what it returns (a cache, a feature map for a later loss)."""

    @staticmethod
    def build(nn):
        class Keep(nn.Module):
            def forward(self, x):
                self.kept = x * 2
                return self.kept
        return nn.Sequential(nn.Conv2d(2, 4, 1), Keep(), nn.BatchNorm2d(4), nn.ReLU())


class _Slice:
    """A module returning a view of a tensor it holds: the view is the only reference, its storage is not."""

    @staticmethod
    def build(nn):
        class Slice(nn.Module):
            def forward(self, x):
                self.whole = x * 3
                return self.whole[:, :2]
        return nn.Sequential(nn.Conv2d(2, 4, 1), Slice(), nn.ReLU(), nn.Hardtanh(-0.1, 0.1))


class _Twice:
    """A subclass whose forward reads its input again after BatchNorm's forward ran."""

    @staticmethod
    def build(nn):
        class Twice(nn.BatchNorm2d):
            def forward(self, x):
                return super().forward(x) + x
        return nn.Sequential(nn.Conv2d(2, 4, 1), Twice(4), nn.ReLU())


def test_a_hooks_input_is_not_overwritten(device):
    theirs, ours, kept = _hooked_capture(device)
    x = np.random.RandomState(2).standard_normal((2, 2, 3, 3))
    got, want = _run(theirs, ours, x, device)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(to_np(kept["gm"]), kept["torch"].numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", [_Keep, _Slice, _Twice], ids=["kept output", "view of a kept tensor", "subclass"])
def test_held_tensors_are_not_overwritten(case, device):
    theirs, ours = _twins(case.build, device)
    x = np.random.RandomState(3).standard_normal((2, 2, 3, 3))
    got, want = _run(theirs, ours, x, device)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    held = "kept" if case is _Keep else "whole" if case is _Slice else None
    if held:
        np.testing.assert_allclose(to_np(getattr(ours[1], held)), getattr(theirs[1], held).numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_a_numpy_view_is_not_overwritten():
    class Share(gm.nn.Module):
        def forward(self, x):
            out = x + 1
            self.array = out.numpy()  # shares the tensor's memory
            return out
    model = gm.nn.Sequential(gm.nn.Identity(), Share(), gm.nn.ReLU())
    x = gm.tensor([[-2.0, 3.0]])
    with gm.no_grad():
        out = model(x)
    np.testing.assert_array_equal(model[1].array, [[-1.0, 4.0]])
    np.testing.assert_array_equal(to_np(out), [[0.0, 4.0]])


def test_the_sequentials_own_input_is_not_overwritten(device):
    x = gm.tensor([[-1.0, 2.0, -3.0]], device=device)
    model = gm.nn.Sequential(gm.nn.ReLU(), gm.nn.ReLU6())
    with gm.no_grad():
        out = model(x)
        temp = model(x * 1)  # a temporary the caller does not keep is not handed over either: nobody can tell
    np.testing.assert_array_equal(to_np(x), [[-1.0, 2.0, -3.0]])
    np.testing.assert_array_equal(to_np(out), [[0.0, 2.0, 0.0]])
    np.testing.assert_array_equal(to_np(temp), [[0.0, 2.0, 0.0]])


def test_with_grad_on_nothing_is_overwritten(device):
    """Training-mode semantics are untouched: outputs and input gradients are PyTorch's."""
    theirs, ours = _twins(_chain, device)
    x = np.random.RandomState(4).standard_normal((2, 3, 6, 6))
    xt = torch.from_numpy(x).requires_grad_()
    theirs(xt).pow(2).sum().backward()
    xg = gm.tensor(x, device=device, requires_grad=True)
    ours(xg).pow(2).sum().backward()
    # rtol 1e-7: PyTorch's Hardsigmoid backward multiplies by 1/6 rounded to float32, even in float64
    np.testing.assert_allclose(to_np(xg.grad), xt.grad.numpy(), rtol=1e-7, atol=1e-12)


def test_a_failing_child_leaves_no_grant():
    """A grant the child did not use (it raised first) is cleared: a later tensor at the same address is not
    found granted."""
    from gpumemnet._core.state import state
    model = gm.nn.Sequential(gm.nn.Linear(2, 3), gm.nn.BatchNorm2d(3)).eval()  # 2-D input: BatchNorm2d refuses
    with gm.no_grad(), pytest.raises(ValueError, match="expected 4D input"):
        model(gm.randn(4, 2))
    assert state.overwritable is None


# ---- layers that compute over their input slice by slice (Conv2d, Linear of one width) -------------------------
def _same_shape_chain(nn):
    """Every layer after the first keeps the shape: each conv and the Linear may compute over its input. The inner
    Sequential is torchvision's ConvNormActivation: its first child gets the input only if the grant is passed on."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.Conv2d(16, 16, 1), nn.Conv2d(16, 16, 3, padding=2, dilation=2),
        nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU6()),
        nn.Conv2d(16, 16, 4, padding="same"), nn.Conv2d(16, 16, 3, padding=1, padding_mode="reflect"),
        nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.Flatten(), nn.Linear(16 * 8 * 8, 1024), nn.Tanh(),
        nn.Linear(1024, 1024), nn.Linear(1024, 1024, bias=False))


def test_sliced_layers_give_pytorchs_values(device, monkeypatch):
    """Batches of 16 and 33 float64 16x16x16 maps (512 KiB: two slices; 1056 KiB: four, the last one shorter)
    through convs of every padding form; rows of 1024 are too small to cut (they are computed as usual)."""
    from gpumemnet.nn.modules import conv
    sliced = []

    def counted(x, fn):
        out = _donation.over_slices(x, fn)
        sliced.append(out is not None)
        return out
    monkeypatch.setattr(conv, "over_slices", counted)
    theirs, ours = _twins(_same_shape_chain, device)
    for n in (16, 33):
        x = np.random.RandomState(5).standard_normal((n, 3, 16, 16))
        got, want = _run(theirs, ours, x, device)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # per batch: the 3x3, the 1x1, the dilated, the depthwise (a grant passed on) and the 'same' conv
    assert sliced == [True] * 10, sliced


def _rows(inner):
    """Linear(64, 64) -> ReLU -> Linear(64, 64) on (4096, 64) float32 rows (1 MiB: four slices of 256 KiB); with
    inner=True the second Linear is the first child of an inner Sequential, reached by a grant passed on."""
    nn = gm.nn
    tail = nn.Sequential(nn.Linear(64, 64)) if inner else nn.Linear(64, 64)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), tail)


@pytest.mark.parametrize("inner", [False, True], ids=["flat", "nested"])
def test_a_sliced_layers_peak_is_its_input_and_one_slice(inner, device):
    """Without a grant the second Linear's 1 MiB output stands beside its 1 MiB input; with it, one 256 KiB slice's
    result does: the step's peak is exactly 768 KiB lower, and exactly the input plus a slice."""
    model = _rows(inner).to(device).eval()
    x = gm.randn(4096, 64, device=device)
    out_bytes, slice_bytes = 4096 * 64 * 4, 1024 * 64 * 4
    assert _peaks_granted_and_blocked(model, x, device) == (out_bytes + slice_bytes, 2 * out_bytes)


def test_estimate_counts_the_slices():
    model = gm.nn.Sequential(gm.nn.Conv2d(3, 16, 3, padding=1), gm.nn.BatchNorm2d(16), gm.nn.ReLU(),
                             gm.nn.Conv2d(16, 16, 3, padding=1, bias=False), gm.nn.BatchNorm2d(16), gm.nn.ReLU(),
                             gm.nn.Conv2d(16, 16, 1))
    est = gm.memory.estimate(model, (16, 3, 32, 32), optimizer=False)
    model.eval()
    x = gm.randn(16, 3, 32, 32)
    gm.memory.empty_cache()
    assert _peak_of_forward(model, x, "cpu") == est.inference_peak


class _BatchMixingConv:
    """A Conv2d subclass whose _conv_forward standardises its input over the whole batch: computed slice by slice
    it would give other values, so it is not sliced."""

    @staticmethod
    def build(nn):
        class Standardised(nn.Conv2d):
            def _conv_forward(self, input, weight, bias):
                return super()._conv_forward(input - input.mean(0, keepdim=True), weight, bias)
        return nn.Sequential(nn.Conv2d(2, 16, 1), nn.ReLU(), Standardised(16, 16, 3, padding=1))


def test_a_batch_mixing_subclass_is_not_sliced(device):
    theirs, ours = _twins(_BatchMixingConv.build, device)
    x = np.random.RandomState(6).standard_normal((16, 2, 16, 16))
    got, want = _run(theirs, ours, x, device)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_autocast_output_dtype_is_kept():
    """Under autocast the second conv's input is float32 (512 KiB: two slices), its output bfloat16: it is not
    written over the input."""
    def build(nn):
        class Float(nn.Module):
            def forward(self, x):
                return x.float()
        return nn.Sequential(nn.Conv2d(3, 16, 1), Float(), nn.Conv2d(16, 16, 3, padding=1)).eval()
    model, tmodel = build(gm.nn), build(torch.nn)
    tmodel.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in model.state_dict().items()})
    x = np.random.RandomState(7).standard_normal((32, 3, 16, 16)).astype(np.float32)
    with gm.no_grad(), gm.autocast("cpu"):
        got = model(gm.tensor(x))
    with torch.no_grad(), torch.autocast("cpu"):
        want = tmodel(torch.from_numpy(x))
    assert got.dtype == gm.bfloat16 and want.dtype == torch.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-2, atol=2e-2)


def test_a_parametrized_weight_is_computed_once(device):
    """spectral_norm's parametrization runs a power iteration each time the weight is read (in training mode):
    a sliced Linear under no_grad must read it once, as PyTorch's forward does, or u and v move further."""
    def build(nn):
        torch_like = torch if nn is torch.nn else gm
        lin = torch_like.nn.utils.parametrizations.spectral_norm(nn.Linear(256, 256))
        return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), lin)
    theirs, ours = _twins(build, device)
    theirs.train(), ours.train()
    x = np.random.RandomState(8).standard_normal((512, 256))  # float64: 1 MiB, four slices
    got, want = _run(theirs, ours, x, device)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(to_np(ours[2].parametrizations.weight[0]._u),
                               theirs[2].parametrizations.weight[0]._u.numpy(), rtol=1e-10, atol=1e-12)


# ---- round 15: what else can still see an intermediate ------------------------------------------------------------
def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _vals(ts):
    return [np.asarray(t.tolist()) for t in ts]


def test_an_instance_forward_and_an_overriding_subclass_are_not_granted():
    """A forward set on the instance (a LoRA patch adding x @ A @ B to a square Linear, a recorder), a subclass's
    own __call__ keeping its input, a BatchNorm subclass whose _check_input_dim keeps it: each reads or keeps the
    input after or beside the layer's own write, so none may be handed the input."""
    r = np.random.RandomState(9)
    w, a = r.standard_normal((64, 64)) / 8, r.standard_normal((64, 64)) / 8
    x0 = r.standard_normal((2048, 64))  # float64: 1 MiB, four slices for the Linear

    def run(L):
        nn = L.nn

        class Recording(nn.ReLU):
            def __call__(self, x):
                self.kept = x
                return super().__call__(x)

        class Lenient(nn.BatchNorm1d):
            def _check_input_dim(self, x):
                self.kept = x

        lin, first = nn.Linear(64, 64).double(), nn.Linear(64, 64).double()
        with L.no_grad():
            for m in (lin, first):
                m.weight.copy_(L.tensor(w)), m.bias.zero_()
        base = lin.forward
        lin.forward = lambda x: base(x) + x @ L.tensor(a)  # LoRA-style
        rec, bn = Recording(), Lenient(64).double().eval()
        with L.no_grad():
            out = nn.Sequential(first, lin)(L.tensor(x0))
            nn.Sequential(first, rec)(L.tensor(x0))
            nn.Sequential(first, bn)(L.tensor(x0))
        return _vals([out, rec.kept, bn.kept])
    for got, want in zip(*reversed(_both(run))):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_replaced_functional_sees_pytorchs_calls():
    """Code that replaces F.silu or F.linear (activation recorders, FLOP counters) sees what it would under
    PyTorch while the replacement stands: inplace=False, whole batches, and the inputs it keeps intact."""
    x0 = np.random.RandomState(10).standard_normal((2048, 64))

    def run(L):
        F, nn, seen = L.nn.functional, L.nn, []
        silu, linear = F.silu, F.linear
        F.silu = lambda x, inplace=False: (seen.append((x, inplace)), silu(x, inplace=inplace))[1]
        F.linear = lambda x, w, b=None: (seen.append((x, None)), linear(x, w, b))[1]
        try:
            model = nn.Sequential(nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 64)).double()
            with L.no_grad():
                for p in model.parameters():
                    p.fill_(0.01)
                out = model(L.tensor(x0))
        finally:
            F.silu, F.linear = silu, linear
        return [(tuple(x.shape), flag) for x, flag in seen], _vals([out] + [x for x, _ in seen])
    (calls_t, vals_t), (calls_g, vals_g) = _both(run)
    assert calls_g == calls_t
    for got, want in zip(vals_g, vals_t):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert not gm.nn.functional.__class__.replaced  # put back: the overwrites are granted again


def test_numpy_memory_is_not_overwritten():
    """A child returning torch.from_numpy(...) over memory a NumPy array holds (a module's table, the caller's
    input through .numpy(), an array passed to forward directly): the next child must not write into it."""
    def run(L):
        nn = L.nn

        class Table(nn.Module):
            def __init__(self):
                super().__init__()
                self.table = np.array([[-1.0, 2.0]])

            def forward(self, x):
                return L.from_numpy(self.table)

        class ViaNumpy(nn.Module):
            def forward(self, x):
                return L.from_numpy(x.numpy())
        t, x, arr = Table(), L.tensor([[-1.0, 2.0]]), np.array([[-1.0, 2.0]])
        with L.no_grad():
            nn.Sequential(t, nn.ReLU())(L.zeros(1))
            nn.Sequential(ViaNumpy(), nn.ReLU())(x)
            nn.Sequential(nn.Dropout(0.1), nn.ReLU()).eval().forward(L.from_numpy(arr))
        return t.table.tolist(), x.tolist(), arr.tolist()
    ref, got = _both(run)
    assert got == ref == ([[-1.0, 2.0]],) * 3


def test_an_expanded_view_reaches_activations_and_batchnorm():
    """A broadcast (expand) view shares memory between its elements: it is not handed over (SiLU and ReLU raised
    on it), and the values are PyTorch's."""
    def run(L):
        nn = L.nn

        class Broadcast(nn.Module):
            def forward(self, x):
                return x.mean((2, 3), keepdim=True).expand(-1, -1, 4, 4)
        x = L.tensor(np.arange(32.0).reshape(1, 2, 4, 4))
        with L.no_grad():
            return [nn.Sequential(Broadcast(), act)(x).tolist()
                    for act in (nn.SiLU(), nn.ReLU(), nn.BatchNorm2d(2).double().eval())]
    ref, got = _both(run)
    np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-12)
