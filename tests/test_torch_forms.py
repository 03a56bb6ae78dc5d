"""Forms of PyTorch ops and utilities that real code uses and gpumemnet got wrong or refused, each against PyTorch:
std's gradient where std is 0, cdist of many rows (PyTorch's matrix-product form, without the P x R x M
differences), broadcasting masked_fill and take_along_dim, negative indices refused by embedding / index_select /
index_add, regression losses broadcasting with a warning, 1-D area interpolation, spectral norm under bf16
autocast, old weight_norm checkpoints into the parametrized form, complex data to tensors, the legacy sparse
constructor's dtype, module extra state, and torch.save writing PyTorch's own format."""
import io
import warnings

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet._serialization_torch_write import save as torch_format_save

torch = pytest.importorskip("torch")

R = np.random.RandomState(3)


def _grad_pair(fn, *arrays):
    out = []
    for lib in (gm, torch):
        xs = [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays]
        y = fn(lib, *xs)
        y.backward()
        out.append((y.item(), [x.grad.numpy() for x in xs]))
    return out


def _close(fn, *arrays, rtol=1e-10):
    (v, g), (tv, tg) = _grad_pair(fn, *arrays)
    assert v == pytest.approx(tv, rel=rtol)
    for a, b in zip(g, tg):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


def test_std_gradient_is_zero_where_std_is_zero():
    x = np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 5.0]])
    _close(lambda L, t: L.std(t, 0).sum() + t.std(1).sum() + (t - t.mean(0)).div(t.std(0) + 1e-5).pow(2).sum(), x)


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_matches_pytorch(mode):
    a, b = R.randn(30, 5), R.randn(2, 40, 5)
    _close(lambda L, x, y: (L.cdist(x, y, compute_mode=mode) * L.arange(40.0, dtype=L.float64)).sum(), a, b)
    same = np.vstack([a[:3], a[:3]])
    (v, g), _ = _grad_pair(lambda L, x: L.cdist(x, x, compute_mode=mode).sum(), same)
    assert not np.isnan(g[0]).any()  # zero distances have a zero gradient


def test_cdist_of_many_rows_does_not_hold_the_differences():
    x, y = gm.randn(300, 64), gm.randn(400, 64)
    gm.memory.reset_peak_memory_stats("cpu")
    before = gm.memory.memory_allocated("cpu")
    d = gm.cdist(x, y)
    peak = gm.memory.max_memory_allocated("cpu") - before
    assert d.shape == (300, 400)
    assert peak < 300 * 400 * 64 * 4 // 8  # the differences would be 300 * 400 * 64 floats


def test_broadcasting_forms():
    got, want = [], []
    for lib, out in ((gm, got), (torch, want)):
        causal = ~lib.tril(lib.ones(4, 4, dtype=lib.bool))
        out.append(lib.zeros(3, 1, 1, 4).masked_fill(causal[None, None], -1.0).numpy())
        x = lib.arange(40.0).view(2, 5, 4)
        out.append(lib.take_along_dim(x, lib.tensor([[[2]], [[4]]]), 1).numpy())
        out.append(lib.take_along_dim(x, lib.tensor([7, 0])).numpy())
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("call", [lambda L, W: L.nn.functional.embedding(L.tensor([-1]), W),
                                  lambda L, W: W.index_select(0, L.tensor([-1])),
                                  lambda L, W: L.zeros(3).index_add(0, L.tensor([-1]), L.ones(1))])
def test_negative_indices_are_refused_as_in_pytorch(call):
    for lib in (gm, torch):
        with pytest.raises(IndexError, match="index out of range"):
            call(lib, lib.arange(10.0).view(5, 2))


@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_losses_broadcast_with_a_warning(loss):
    x = np.array([[0.5], [1.5]])
    for lib in (gm, torch):
        with pytest.warns(UserWarning, match="different to the input size"):
            getattr(lib.nn.functional, loss)(lib.tensor(x), lib.tensor(1.0))
    _close(lambda L, t: getattr(L.nn.functional, loss)(t, L.tensor([1.0, 2.0, 0.0], dtype=L.float64)), x)


def test_area_interpolation_of_signals():
    _close(lambda L, t: (L.nn.functional.interpolate(t, size=3, mode="area") ** 2).sum(),
           np.arange(14.0).reshape(1, 2, 7))


def test_spectral_norm_under_bf16_autocast():
    for sn in (gm.nn.utils.spectral_norm, gm.nn.utils.parametrizations.spectral_norm):
        d = sn(gm.nn.Conv1d(1, 4, 3))
        with gm.autocast("cpu", dtype=gm.bfloat16):
            assert d(gm.ones(1, 1, 8)).dtype == gm.bfloat16


def test_old_weight_norm_checkpoint_loads_into_the_parametrized_form():
    old = gm.nn.utils.weight_norm(gm.nn.Conv1d(3, 4, 3))
    new = gm.nn.utils.parametrizations.weight_norm(gm.nn.Conv1d(3, 4, 3))
    assert str(new.load_state_dict(old.state_dict())) == "<All keys matched successfully>"
    x = gm.randn(1, 3, 5)
    np.testing.assert_allclose(old(x).detach().numpy(), new(x).detach().numpy(), rtol=1e-6)


def test_complex_data_to_tensors():
    a = np.array([1 + 2j, 3 - 1j])
    for lib in (gm, torch):
        assert str(lib.tensor(a).dtype).endswith("complex128")
        assert str(lib.tensor([1 + 2j]).dtype).endswith("complex64")
        assert str(lib.from_numpy(a.astype(np.complex64)).dtype).endswith("complex64")
        np.testing.assert_array_equal(lib.tensor([1.0, 2.0], dtype=lib.cfloat).numpy(), [1, 2])


def test_legacy_sparse_constructor_keeps_a_tensors_dtype():
    i = [[0, 1], [1, 0]]
    for lib in (gm, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = lib.sparse.FloatTensor(lib.tensor(i), lib.tensor([1.0, 2.0], dtype=lib.float64), (2, 2))
        assert str(s.dtype).endswith("float64")


def test_module_extra_state_round_trips():
    class Counter(gm.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.count = gm.nn.Linear(2, 2), 0

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]
    a, b = Counter(), Counter()
    a.count = 7
    sd = a.state_dict()
    assert "_extra_state" in sd and b.load_state_dict(sd) and b.count == 7
    with pytest.raises(RuntimeError, match="_extra_state"):
        b.load_state_dict({k: v for k, v in sd.items() if k != "_extra_state"})


def test_torch_save_format_loads_in_pytorch_and_back():
    lin = gm.nn.Linear(3, 4)
    w = gm.randn(4, 6)
    ck = {"model": lin.state_dict(), "view": w[:, 1:3], "full": w, "t": w.t(), "epoch": 3, "dt": gm.float16,
          "size": gm.Size([2, 3]), "bf": gm.ones(3, dtype=gm.bfloat16) * 1.5, "i": gm.arange(5, dtype=gm.int32),
          "z": gm.polar(gm.ones(3), gm.arange(3.0)), "nested": [gm.zeros(2), {"b": gm.tensor([True, False])}]}
    buf = io.BytesIO()
    torch_format_save(ck, buf)
    buf.seek(0)
    back = torch.load(buf)  # weights_only, PyTorch's default
    np.testing.assert_array_equal(back["model"]["weight"].numpy(), lin.weight.detach().numpy())
    assert back["view"].data_ptr() == back["full"].data_ptr() + 4 and torch.equal(back["t"], back["full"].t())
    assert back["dt"] is torch.float16 and back["size"] == torch.Size([2, 3]) and back["epoch"] == 3
    assert back["bf"].dtype == torch.bfloat16 and back["i"].dtype == torch.int32 and back["z"].dtype == torch.complex64
    np.testing.assert_allclose(back["z"].numpy(), ck["z"].numpy())
    m = torch.nn.Linear(3, 4)
    m.load_state_dict(back["model"])
    buf.seek(0)
    mine = gm.load(buf)
    assert gm.equal(mine["t"], mine["full"].t()) and mine["z"].dtype == gm.complex64 and mine["dt"] is gm.float16


def test_torch_save_of_parameters_and_whole_modules_loads_back():
    """torch.save(model) and lists of Parameters (miniai's learner, optimizers' param lists): each Parameter is
    written as _rebuild_parameter over a rebuilt tensor, which PyTorch reads too."""
    lin = gm.nn.Linear(2, 3)
    p = gm.nn.Parameter(gm.arange(3.0))
    buf = io.BytesIO()
    torch_format_save({"p": p, "ps": [p, gm.ones(2, requires_grad=True)]}, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    assert isinstance(back["p"], torch.nn.Parameter) and back["p"].tolist() == [0.0, 1.0, 2.0]
    assert back["ps"][0] is back["p"] or torch.equal(back["ps"][0], back["p"])
    assert not isinstance(back["ps"][1], torch.nn.Parameter) and back["ps"][1].requires_grad
    buf.seek(0)
    mine = gm.load(buf, weights_only=False)
    assert isinstance(mine["p"], gm.nn.Parameter) and mine["p"].tolist() == [0.0, 1.0, 2.0]
    buf = io.BytesIO()
    gm.save(lin, buf)
    buf.seek(0)
    again = gm.load(buf, weights_only=False)
    assert isinstance(again, gm.nn.Linear) and isinstance(again.weight, gm.nn.Parameter)
    assert gm.equal(again.weight, lin.weight) and gm.equal(again.bias, lin.bias)


def test_pytorch_rng_state_is_accepted_with_a_warning():
    state = gm.tensor(np.frombuffer(torch.get_rng_state().numpy().tobytes(), dtype=np.uint8).copy())
    with pytest.warns(UserWarning, match="MT19937"):
        gm.set_rng_state(state)
    a = gm.rand(3)
    with pytest.warns(UserWarning):
        gm.set_rng_state(state)
    assert gm.equal(a, gm.rand(3))  # deterministic from the state


def test_int32_indices_are_taken_where_pytorch_takes_them():
    got = []
    for lib in (gm, torch):
        W, i = lib.arange(10.0).view(5, 2), lib.tensor([1, 2], dtype=lib.int32)
        got.append([lib.nn.functional.embedding(i, W).numpy(), W.index_select(0, i).numpy(),
                    lib.zeros(5).index_add(0, i, lib.ones(2)).numpy(), W.gather(0, i.view(2, 1)).numpy(),
                    lib.zeros(5).scatter_add(0, i, lib.ones(2)).numpy()])
        with pytest.raises(RuntimeError):
            lib.zeros(5).index_copy(0, i, lib.ones(2))  # PyTorch's index_copy alone wants int64
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def test_a_parameter_rebuilt_through_its_type():
    p = gm.nn.Parameter(gm.ones(3))
    q = type(p)(gm.zeros(3), requires_grad=False)  # accelerate's set_module_tensor_to_device
    assert isinstance(q, gm.nn.Parameter) and not q.requires_grad and q.tolist() == [0.0, 0.0, 0.0]


def test_median_shares_its_gradient_among_ties():
    _close(lambda L, t: L.median(t) * 2 + t.median() ** 2, np.array([3.0, 1.0, 2.0, 2.0, 5.0, 2.0]))
