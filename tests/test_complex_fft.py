"""Complex tensors (_core/complex.py) and torch.fft / torch.stft (fft.py) against PyTorch in float64: values and
gradients of LLaMA's complex rotary embedding, of every transform under each normalisation with cropped and padded
lengths, of spectra's abs / angle / products, of stft's framings, and a Fourier Neural Operator trained with Adam
whose spectral weights are complex Parameters."""
import gc

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

R = np.random.RandomState(5)


def _pair(fn, *arrays):
    """fn(lib, *leaf tensors) -> a scalar, for both libraries: (value, [input gradients]) of each."""
    out = []
    for lib in (gm, torch):
        xs = [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays]
        loss = fn(lib, *xs)
        loss.backward()
        out.append((float(loss), [x.grad.numpy() for x in xs]))
    return out


def _close(fn, *arrays, tol=1e-10):
    (v, gs), (tv, tgs) = _pair(fn, *arrays)
    assert v == pytest.approx(tv, rel=tol, abs=tol)
    for g, tg in zip(gs, tgs):
        np.testing.assert_allclose(g, tg, rtol=tol, atol=tol)


def _rope(lib, xq, xk):
    """Meta's LLaMA apply_rotary_emb, as its model.py writes it (float64 here)."""
    dim, end = xq.shape[-1], 12
    freqs = 1.0 / (10000.0 ** (lib.arange(0, dim, 2)[: (dim // 2)].double() / dim))
    freqs = lib.outer(lib.arange(end, dtype=lib.float64), freqs)
    freqs_cis = lib.polar(lib.ones_like(freqs), freqs)[2:2 + xq.shape[1]]
    xq_ = lib.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
    xk_ = lib.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    q = lib.view_as_real(xq_ * freqs_cis).flatten(3)
    k = lib.view_as_real(xk_ * freqs_cis).flatten(3)
    return (q @ k.transpose(-1, -2)).softmax(-1).pow(2).sum() + (q * 0.3).sum()


def test_llama_rotary_embedding_matches_pytorch():
    _close(_rope, R.randn(2, 5, 3, 8), R.randn(2, 5, 3, 8))


def test_complex_arithmetic_and_parts():
    def fn(lib, a, b, c):
        z = lib.complex(a, b)
        w = lib.view_as_complex(c)
        u = (z * w + 2.5 * z - w / (z + 3)) * z.conj() - 1
        v = lib.cat([u, z.exp()], 0).sum(0) + lib.stack([u, w], 0).mean(0).sum(0)
        return (lib.abs(u).sum() + u.angle().sum() + (u.real * u.imag).sum() + lib.view_as_real(v).pow(2).sum()
                + (z @ w.T).abs().sum() + lib.einsum("ij,kj->ik", z, w).imag.sum() + u.transpose(0, 1)[1].real.sum())
    _close(fn, R.randn(3, 4), R.randn(3, 4), R.randn(3, 4, 2))


def test_real_tensors_and_python_complex_numbers_with_complex_operands():
    def fn(lib, a, c):
        z = lib.view_as_complex(c)
        mixed = [a * z, a + z, a - z, a / z, 1j * a, a * 1j, 1j + a, a - 1j, 1j - a, a / 1j, 1j / a,
                 lib.exp(1j * a), lib.exp(z), lib.sum(z, 0), lib.mean(z * a, dim=0)]
        return sum((lib.abs(m) ** 2).sum() + lib.angle(m).sum() for m in mixed)
    _close(fn, R.rand(3, 4) + 0.5, R.randn(3, 4, 2))


def test_abs_and_angle_at_zero_have_zero_gradient():
    (v, gs), (tv, tgs) = _pair(lambda L, a: (L.view_as_complex(a).abs() + L.view_as_complex(a).angle()).sum(),
                               np.zeros((3, 2)))
    np.testing.assert_array_equal(gs[0], tgs[0])
    assert not np.isnan(gs[0]).any()


def test_real_tensor_forms_of_real_imag_angle_conj():
    x = R.randn(5)
    for lib in (gm, torch):
        t = lib.tensor(x)
        assert np.array_equal(lib.real(t).numpy(), x) and np.array_equal(lib.conj(t).numpy(), x)
    np.testing.assert_array_equal(gm.angle(gm.tensor(x)).numpy(), torch.angle(torch.tensor(x)).numpy())
    with pytest.raises(TypeError, match="imag is not implemented"):
        gm.imag(gm.tensor(x))


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_one_dimensional_transforms_and_their_gradients(norm):
    w = R.randn(3, 6)

    def fn(lib, x, y):
        X = lib.fft.rfft(x, norm=norm)
        loss = (X.abs() * lib.tensor(w)).sum() + (X.real ** 2).sum() + X.angle()[:, 1:5].sum()
        back = lib.fft.irfft(X * lib.view_as_complex(y), n=10, norm=norm)
        z = lib.fft.fft(x, n=12, norm=norm)
        zi = lib.fft.ifft(z * z, norm=norm, dim=-1)
        cropped = lib.fft.irfft(lib.fft.rfft(x, n=7, norm=norm), n=5, norm=norm)
        padded = lib.fft.ifft(lib.fft.fft(x, n=8, dim=0, norm=norm), n=3, dim=0, norm=norm)
        return (loss + (back * lib.arange(10.0, dtype=lib.float64)).sum() + lib.view_as_real(zi).pow(2).sum()
                + (cropped ** 3).sum() + padded.abs().sum())
    _close(fn, R.randn(3, 10), R.randn(6, 2))


def test_multidimensional_transforms_and_shifts():
    def fn(lib, x):
        a = lib.fft.fft2(x)
        b = lib.fft.rfftn(x, s=(4, 6), dim=(0, 2))
        c = lib.fft.irfftn(b, s=(4, 7), dim=(0, 2), norm="ortho")
        d = lib.fft.ifftn(lib.fft.fftn(x, norm="forward"), dim=(1,))
        e = lib.fft.irfft2(lib.fft.rfft2(x), s=x.shape[-2:])
        shifted = lib.fft.fftshift(a.abs(), dim=(-2, -1)) * lib.fft.ifftshift(lib.arange(6.0, dtype=lib.float64))
        return shifted.sum() + (c ** 2).sum() + d.abs().sum() + (e * x).sum() + lib.fft.ifft2(a).real.sum()
    _close(fn, R.randn(3, 5, 6))
    for n, d in ((5, 1.0), (8, 0.1)):
        np.testing.assert_allclose(gm.fft.fftfreq(n, d).numpy(), torch.fft.fftfreq(n, d).numpy())
        np.testing.assert_allclose(gm.fft.rfftfreq(n, d).numpy(), torch.fft.rfftfreq(n, d).numpy())


@pytest.mark.parametrize("kw", [dict(n_fft=64, hop_length=16, window="hann"),
                                dict(n_fft=32, win_length=20, center=False, normalized=True),
                                dict(n_fft=16, hop_length=5, window="hann", win_length=12, pad_mode="constant"),
                                dict(n_fft=16, onesided=False)])
def test_stft_matches_pytorch(kw):
    def fn(lib, x):
        args = dict(kw)
        if args.get("window") == "hann":
            args["window"] = lib.hann_window(args.get("win_length", args["n_fft"]), dtype=lib.float64)
        s = lib.stft(x, return_complex=True, **args)
        single = lib.stft(x[0], return_complex=True, **args)
        return lib.abs(s).pow(2).sum() + lib.view_as_real(single).sum()  # (angle: DC bins lie on the branch cut)
    _close(fn, R.randn(2, 200))


@pytest.mark.parametrize("kw", [dict(n_fft=64, hop_length=16, window="hann"),
                                dict(n_fft=32, win_length=24, hop_length=8, window="hann"),
                                dict(n_fft=16, hop_length=4, window="hann", normalized=True),
                                dict(n_fft=16, hop_length=4, window="hann", onesided=False)])
def test_istft_inverts_stft_as_pytorch(kw):
    def fn(lib, x):
        args = dict(kw)
        args["window"] = lib.hann_window(args.get("win_length", args["n_fft"]), dtype=lib.float64)
        s = lib.stft(x, return_complex=True, **args)
        y = lib.istft(s * (1 + 0.1j), length=300, **args)
        one = lib.istft(s[0], **args)
        return (y ** 2 * lib.arange(300.0, dtype=lib.float64)).sum() + one.sum()
    _close(fn, R.randn(2, 300))
    x = gm.tensor(R.randn(300))
    w = gm.hann_window(kw.get("win_length", kw["n_fft"]), dtype=gm.float64)
    args = {k: v for k, v in kw.items() if k != "window"}
    np.testing.assert_allclose(gm.istft(gm.stft(x, window=w, return_complex=True, **args), window=w, length=300,
                                        **args).numpy(), x.numpy(), atol=1e-12)


def test_istft_refuses_a_window_that_leaves_samples_uncovered():
    for lib in (gm, torch):
        s = lib.stft(lib.ones(100, dtype=lib.float64), 16, 4, window=lib.hann_window(16, dtype=lib.float64),
                     return_complex=True)
        with pytest.raises(RuntimeError, match="window overlap add min"):
            lib.istft(s, 16, 4, window=lib.hann_window(16, dtype=lib.float64), center=False)


class _Spectral:
    """FNO's SpectralConv2d (neuraloperator's fourier_2d.py), for either library."""

    @staticmethod
    def make(lib, cin, cout, modes):
        nn = lib.nn

        class SpectralConv2d(nn.Module):
            def __init__(self):
                super().__init__()
                self.w1 = nn.Parameter(0.1 * lib.rand(cin, cout, modes, modes, dtype=lib.cdouble))
                self.w2 = nn.Parameter(0.1 * lib.rand(cin, cout, modes, modes, dtype=lib.cdouble))

            def forward(self, x):
                x_ft = lib.fft.rfft2(x)
                out_ft = lib.zeros(x.shape[0], cout, x.size(-2), x.size(-1) // 2 + 1, dtype=lib.cdouble,
                                    device=x.device)
                out_ft[:, :, :modes, :modes] = lib.einsum("bixy,ioxy->boxy", x_ft[:, :, :modes, :modes], self.w1)
                out_ft[:, :, -modes:, :modes] = lib.einsum("bixy,ioxy->boxy", x_ft[:, :, -modes:, :modes], self.w2)
                return lib.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))

        class FNO(nn.Module):
            def __init__(self):
                super().__init__()
                self.spectral = SpectralConv2d()
                self.pointwise = nn.Conv2d(cin, cout, 1, dtype=lib.float64)

            def forward(self, x):
                return nn.functional.gelu(self.spectral(x) + self.pointwise(x))
        return FNO()


def test_fourier_neural_operator_trains_as_in_pytorch():
    x, y = R.randn(2, 3, 8, 8), R.randn(2, 3, 8, 8)
    weights = {"w1": R.randn(3, 3, 3, 3, 2) * 0.1, "w2": R.randn(3, 3, 3, 3, 2) * 0.1,
               "pointwise.weight": R.randn(3, 3, 1, 1) * 0.3, "pointwise.bias": R.randn(3) * 0.3}
    losses = {}
    for lib in (gm, torch):
        model = _Spectral.make(lib, 3, 3, 3)
        with lib.no_grad():
            lib.view_as_real(model.spectral.w1).copy_(lib.tensor(weights["w1"]))
            lib.view_as_real(model.spectral.w2).copy_(lib.tensor(weights["w2"]))
            model.pointwise.weight.copy_(lib.tensor(weights["pointwise.weight"]))
            model.pointwise.bias.copy_(lib.tensor(weights["pointwise.bias"]))
        assert model.spectral.w1.dtype == lib.complex128 and model.spectral.w1.is_complex()
        opt = lib.optim.Adam(model.parameters(), lr=0.01)
        out = []
        for _ in range(4):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            out.append(loss.item())
        losses[lib] = out + [lib.view_as_real(model.spectral.w2).detach().numpy()]
    np.testing.assert_allclose(losses[gm][:4], losses[torch][:4], rtol=1e-11)
    np.testing.assert_allclose(losses[gm][4], losses[torch][4], rtol=1e-10, atol=1e-12)


def test_complex_buffer_moves_with_the_module_and_round_trips_state_dict():
    class M(gm.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("freqs_cis", gm.polar(gm.ones(4, 2), gm.arange(8.0).view(4, 2)))
    m = M()
    before = m.freqs_cis.numpy()
    m.half().to("cpu")
    assert m.freqs_cis.dtype == gm.complex64  # half() leaves complex buffers alone, as in PyTorch
    other = M()
    with gm.no_grad():
        other.freqs_cis[0] = gm.complex(gm.zeros(2), gm.ones(2))
    m.load_state_dict(other.state_dict())
    np.testing.assert_array_equal(m.freqs_cis.numpy()[0], [1j, 1j])
    np.testing.assert_array_equal(m.freqs_cis.numpy()[1:], before[1:])


def test_estimate_of_a_spectral_model_is_byte_exact():
    """The estimate runs the transforms on meta (shapes only); its total equals a real run's peak on the CPU."""
    gm.manual_seed(0)
    gc.collect()  # (cycles other tests left, a create_graph's among them, must not be freed during the run)
    held = gm.memory.memory_allocated("cpu")  # by other tests in this process
    model = _Spectral.make(gm, 2, 2, 2)
    x, y = gm.randn(2, 2, 8, 8, dtype=gm.float64), gm.randn(2, 2, 8, 8, dtype=gm.float64)
    est = gm.memory.estimate(model, x, loss_fn=gm.nn.functional.mse_loss, target=y,
                             optimizer=lambda ps: gm.optim.Adam(ps))
    opt = gm.optim.Adam(model.parameters())
    gm.memory.reset_peak_memory_stats("cpu")
    for _ in range(3):
        loss = gm.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        del loss
    assert est.total == gm.memory.max_memory_allocated("cpu") - held


def test_unsupported_complex_ops_say_what_exists():
    z = gm.complex(gm.ones(2), gm.zeros(2))
    with pytest.raises(TypeError, match=r"complex tensors in gpumemnet have no 'sigmoid'.*view_as_real"):
        z.sigmoid()
    with pytest.raises(TypeError, match="expected a Tensor"):
        gm.atan(z)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        gm.view_as_complex(gm.ones(3, 3))
    with pytest.raises(RuntimeError, match="return_complex"):
        gm.stft(gm.ones(64), 16)
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        gm.fft.fft(gm.ones(4), norm="unit")
