"""Under no_grad, a Sequential lets BatchNorm (eval) and the activations write over an intermediate that nothing
else holds (nn/modules/_donation.py). What a user relies on: the values are PyTorch's; the eval forward's peak is
one tensor lower, byte-exact, and the estimate's inference peak says so; and no tensor anybody can still see is
ever overwritten (hooks, stored outputs, views, NumPy arrays, the Sequential's own input, subclasses)."""
import numpy as np
import pytest

import gpumemnet as gm
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


def test_peak_is_one_tensor_lower(device):
    """Linear -> BatchNorm1d -> ReLU on a (16, 32) float32 batch: each output is 2048 bytes, a whole number of the
    allocator's 512-byte units. Without a grant (a global forward hook blocks it) BatchNorm allocates a new output
    beside the Linear's; with it, it writes over the Linear's, so the peak is exactly 2048 bytes lower."""
    model = gm.nn.Sequential(gm.nn.Linear(8, 32), gm.nn.BatchNorm1d(32), gm.nn.ReLU()).to(device).eval()
    x = gm.randn(16, 8, device=device)
    out_bytes = 16 * 32 * 4
    granted = _peak_of_forward(model, x, device)
    handle = gm.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        blocked = _peak_of_forward(model, x, device)
    finally:
        handle.remove()
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
