"""PyTorch semantics that scripts written for PyTorch rely on (stop 41, round 8 of the hunts: GANs, sequence models
from scratch, self-supervised / metric / tabular code, and what followed), each checked against PyTorch itself: the
same function run under both libraries and the results compared."""
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _name(dtype):
    return str(dtype).split(".")[-1]


def _data(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape)


# ---- sequence models from scratch (round 8) -----------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_gradient_is_pytorchs_closed_form(reduction, zero_infinity):
    """PyTorch's gradient with respect to log_probs is exp(log_probs) - posterior: taken at log_probs themselves
    (or at raw scores) it is not the true gradient, and an impossible alignment's is NaN."""
    def run(L):
        F = L.nn.functional
        rng = np.random.RandomState(0)
        out = []
        for through_log_softmax in (True, False):
            x = L.from_numpy(rng.randn(5, 3, 4)).requires_grad_()
            lp = x.log_softmax(-1) if through_log_softmax else x
            loss = F.ctc_loss(lp, L.tensor([[1, 2, 0], [3, 3, 0], [1, 2, 3]]), L.tensor([5, 4, 2]),
                              L.tensor([2, 2, 3]), reduction=reduction, zero_infinity=zero_infinity)
            g, = L.autograd.grad(loss.sum(), x)
            out.append(([None if v != v else round(v, 9) for v in loss.reshape(-1).tolist()],
                        [None if v != v else round(v, 9) for v in g.reshape(-1).tolist()]))
        return out
    ref, got = _both(run)
    assert got == ref


def test_uint8_class_targets_unique_consecutive_dim_and_embedding_bag_options():
    def run(L):
        F = L.nn.functional
        x = L.from_numpy(np.random.RandomState(0).randn(4, 5))
        labels = L.from_numpy(np.array([1, 0, 4, 2], dtype=np.uint8))
        out = [round(F.cross_entropy(x, labels).item(), 12), round(F.nll_loss(x.log_softmax(1), labels).item(), 12)]
        with pytest.raises(RuntimeError):
            F.cross_entropy(x, labels.to(L.int32))
        m = L.tensor([[1, 1], [1, 1], [2, 0], [2, 0], [1, 1]])
        for d in (0, 1, -1):
            out.append([t.tolist() for t in L.unique_consecutive(m, return_inverse=True, return_counts=True, dim=d)])
        out.append(L.unique_consecutive(L.tensor([0, 1, 1, 0, 2, 2]), dim=-1).tolist())
        for kw in ({"mode": "sum", "scale_grad_by_freq": True}, {"mode": "mean", "scale_grad_by_freq": True},
                   {"mode": "mean", "sparse": True}):
            eb = L.nn.EmbeddingBag(10, 3, **kw)
            with L.no_grad():
                eb.weight.copy_(L.from_numpy(np.random.RandomState(1).randn(10, 3)))
            (eb(L.tensor([1, 2, 2, 5]), L.tensor([0, 2])) * L.arange(6.0).view(2, 3)).sum().backward()
            out.append([round(v, 12) for v in eb.weight.grad.to_dense().reshape(-1).tolist()])
        return out
    ref, got = _both(run)
    assert got == ref


_WHOLE = '''
import sys, torch
def pre(mod, args, kwargs):
    print("pre-hook", sorted(kwargs))
def post(mod, args, out):
    print("post-hook")
f = sys.argv[2]
if sys.argv[1] == "save":
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                            batch_first=True), 1, enable_nested_tensor=False), torch.nn.Linear(8, 2))
    m[1].register_forward_pre_hook(pre, with_kwargs=True)
    m[1].register_forward_hook(post, always_call=True)
    torch.save(m, f)
else:
    m = torch.load(f, weights_only=False)
    print(type(m[0].layers[0].self_attn.out_proj).__name__, len(m[1]._forward_pre_hooks))
    print(round(m(torch.ones(1, 3, 8)).sum().item(), 5))
'''


def test_whole_models_with_attention_and_hook_options_load_across_libraries(tmp_path):
    """torch.save(model) under one library, torch.load under the other: MultiheadAttention's
    NonDynamicallyQuantizableLinear resolves, and hooks registered with_kwargs / always_call keep their options."""
    import subprocess
    import sys
    script = tmp_path / "whole.py"
    script.write_text(_WHOLE)
    plain, gm_run = [sys.executable, str(script)], [sys.executable, "-m", "gpumemnet", "run", str(script)]
    def run(cmd, *args):
        r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        return r.stdout
    for saver in (plain, gm_run):  # what the saver's file gives, loaded by either library
        f = str(tmp_path / "m.pt")
        run(saver, "save", f)
        by_torch, by_gm = run(plain, "load", f), run(gm_run, "load", f)
        assert by_gm == by_torch and "pre-hook []" in by_torch and "post-hook" in by_torch


# ---- self-supervised, metric and tabular code (round 8) -------------------------------------------------------
def test_cdist_zero_distances_list_of_tensors_uint8_masks_and_legacy_addmm():
    def run(L):
        out = []
        x = L.zeros(30, 3)
        out.append(int((L.cdist(x, x) == 0).sum()))
        y = L.arange(90.0).view(30, 3)
        out.append(L.cdist(y, y).diagonal()[:3].tolist())
        a = L.tensor(1.0000000001, dtype=L.float64)
        out += [_name(L.tensor([a, a]).dtype), L.tensor([a, a])[0].item(), _name(L.tensor([1, a]).dtype)]
        v = L.arange(4) * 10
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(v[np.array([1, 0, 1, 1], dtype=np.uint8)].tolist())
            d, m, c = L.ones(2, 4), L.arange(6.0).view(2, 3), L.arange(12.0).view(4, 3) / 10
            out.append(d.clone().addmm_(1, -2, m, c.t()).tolist())
            out.append(d.addmm(2, m, c.t()).tolist())
            out.append(L.addmm(1, d, -2, m, c.t()).tolist())
            out.append(L.ones(2).addmv_(1, 2, L.ones(2, 3), L.ones(3)).tolist())
            out.append(L.ones(2, 3, 4).baddbmm_(1, 2, L.ones(2, 3, 5), L.ones(2, 5, 4)).sum().item())
        out.append((np.sqrt(L.tensor(4.0)).shape == (), np.exp(L.tensor([0.0])).shape == (1,)))
        return out
    ref, got = _both(run)
    assert got == ref


_HOOK_CLASSES = '''
import torch
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm
m = torch.nn.utils.spectral_norm(torch.nn.Linear(4, 2))
w = torch.nn.utils.weight_norm(torch.nn.Linear(4, 2))
print(callable(torch.nn.utils.spectral_norm), callable(torch.nn.utils.weight_norm))
print([isinstance(h, SpectralNorm) for h in m._forward_pre_hooks.values()])
print([isinstance(h, WeightNorm) for h in w._forward_pre_hooks.values()])
'''


def test_spectral_and_weight_norm_hook_classes_import_from_their_modules(tmp_path):
    """GAN repositories find the hooks by class (`from torch.nn.utils.spectral_norm import SpectralNorm`); the
    package's names stay the functions after the submodules are imported, as in PyTorch."""
    import subprocess
    import sys
    script = tmp_path / "hooks.py"
    script.write_text(_HOOK_CLASSES)
    outs = [subprocess.run(cmd + [str(script)], capture_output=True, text=True, timeout=120).stdout
            for cmd in ([sys.executable], [sys.executable, "-m", "gpumemnet", "run"])]
    assert outs[0] == outs[1] == "True True\n[True]\n[True]\n"


def test_gan_repositories_warnings_and_scheduler_state():
    def run(L):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            L.nn.L1Loss(size_average=False)
            L.nn.MSELoss(reduce=False)
            p = L.nn.Parameter(L.ones(2))
            opt = L.optim.SGD([p], lr=0.1)
            sched = L.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)
            p.grad = L.ones(2)
            opt.step()
            sched.step()
            lr = sched.get_lr()  # outside step(): PyTorch's advice to call get_last_lr()
        return [str(w.message)[:60] for w in caught], sorted(sched.state_dict()), lr
    ref, got = _both(run)
    assert got == ref


def test_adaptive_log_softmax_with_loss():
    def run(L):
        m = L.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], div_value=2.0).double()
        with L.no_grad():
            for i, (n, p) in enumerate(sorted(m.named_parameters())):
                p.copy_(L.from_numpy(np.random.RandomState(i).randn(*p.shape) * 0.3))
        x = L.from_numpy(np.random.RandomState(9).randn(6, 8)).requires_grad_()
        t = L.tensor([0, 3, 5, 9, 12, 19])
        out, loss = m(x, t)
        loss.backward()
        with pytest.raises(RuntimeError, match=r"should be in \[0, 19\]"):
            m(x, L.tensor([0, 1, 2, 3, 4, 20]))
        with pytest.raises(ValueError, match="cutoffs"):
            L.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [10, 4])
        return [sorted((n, tuple(p.shape)) for n, p in m.named_parameters()), [round(v, 10) for v in out.tolist()],
                round(loss.item(), 10), [round(v, 10) for v in x.grad.sum(1).tolist()],
                round(m.head.weight.grad.sum().item(), 10), [round(v, 8) for v in m.log_prob(x).exp().sum(1).tolist()],
                m.predict(x).tolist(), tuple(m(x[0], t[0]).output.shape)]
    ref, got = _both(run)
    assert got == ref


def test_hermitian_ffts_and_resolve_conj():
    def run(L):
        x = L.arange(8, dtype=L.float64) ** 1.5
        y = L.arange(12, dtype=L.float64).view(3, 4) ** 1.2
        z = L.tensor([1 + 2j, 3 - 1j])
        out = [L.view_as_real(z.conj().resolve_conj()).tolist(), z.conj().is_conj() and False]
        for norm in (None, "forward", "ortho"):
            out.append([round(v, 9) for v in L.fft.hfft(L.fft.rfft(x), n=8, norm=norm).tolist()])
            ih = L.view_as_real(L.fft.ihfft(x, norm=norm).resolve_conj())
            out.append([round(v, 9) for v in ih.flatten().tolist()])
        out.append([round(v, 9) for v in L.fft.hfft2(L.fft.ihfft2(y), s=(3, 4)).flatten().tolist()])
        out.append([round(v, 9) for v in L.fft.hfftn(L.fft.ihfftn(y), s=(3, 4)).flatten().tolist()])
        return out
    ref, got = _both(run)
    assert got == ref


def test_complex_spectrogram_ops():
    """What speech-enhancement code does with a complex STFT: powers, phases, masks, frames, NaN checks."""
    def run(L):
        x = L.from_numpy(np.random.RandomState(0).randn(2, 300))
        Z = L.stft(x, 64, 16, window=L.hann_window(64, dtype=L.float64), return_complex=True)
        M = L.from_numpy(np.random.RandomState(1).rand(*Z.shape)) > 0.5
        Z[0, 3, 2] = float("nan")

        def s(t):
            if isinstance(t, (tuple, list)):
                return [s(u) for u in t]
            t = L.view_as_real(t.resolve_conj()) if t.is_complex() else t
            return round(float(L.nan_to_num(t.double(), 7.0).sum()), 8), tuple(t.shape)
        return [s(v) for v in (Z.pow(2), Z.sgn(), (Z + 1).reciprocal(), L.isnan(Z), Z.masked_fill(M, 0),
                               Z.masked_fill(M, 1 + 2j), L.roll(Z, 1, -1), Z.roll(3), Z.flip(-1), Z.chunk(2, 1),
                               Z.split(10, 1), Z.narrow(1, 0, 5), Z.unbind(0), Z.index_select(1, L.tensor([0, 3])),
                               L.square(Z), Z[:, :, :1].expand_as(Z), L.nan_to_num(Z), Z.isfinite())]
    ref, got = _both(run)
    assert got == ref


_WHOLE_RNN = '''
import sys, torch
f = sys.argv[2]
if sys.argv[1] == "save":
    torch.manual_seed(0)
    torch.save({"lstm": torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True, proj_size=3),
                "gru": torch.nn.GRU(4, 5, bias=False)}, f)
else:
    d = torch.load(f, weights_only=False)
    x = torch.ones(2, 1, 4)
    print(tuple(d["lstm"](x)[0].shape), round(d["lstm"](x)[0].sum().item(), 5), round(d["gru"](x)[0].sum().item(), 5))
'''


def test_whole_recurrent_layers_pickled_here_load_in_pytorch(tmp_path):
    """PyTorch's RNNBase needs its _all_weights / _flat_weights when it unpickles a whole LSTM or GRU."""
    import subprocess
    import sys
    script = tmp_path / "rnn.py"
    script.write_text(_WHOLE_RNN)
    f = str(tmp_path / "m.pt")
    gm_run = [sys.executable, "-m", "gpumemnet", "run", str(script)]
    assert subprocess.run(gm_run + ["save", f], capture_output=True, text=True, timeout=120).returncode == 0
    outs = [subprocess.run(cmd + ["load", f], capture_output=True, text=True, timeout=120)
            for cmd in ([sys.executable, str(script)], gm_run)]
    assert outs[0].returncode == 0, outs[0].stderr
    assert outs[0].stdout == outs[1].stdout and outs[0].stdout.startswith("(2, 1, 6)")


def test_zero_norm_stays_in_the_graph_with_a_zero_gradient():
    def run(L):
        x = L.tensor([[0.0, 1.0], [2.0, 1.0]], requires_grad=True)
        d = L.cdist(x, x, p=0)
        d.sum().backward()
        n = L.linalg.vector_norm(x, 0)
        return [d.requires_grad, d.tolist(), x.grad.tolist(), x.norm(0).requires_grad, n.item(), n.requires_grad]
    ref, got = _both(run)
    assert got == ref


def test_bce_with_logits_of_mixed_dtypes_has_the_targets_dtype():
    def run(L):
        x = L.from_numpy(np.random.RandomState(0).randn(5))
        t = L.from_numpy(np.random.RandomState(1).rand(5).astype(np.float32))
        out = []
        for a, b in ((x, t), (x.float(), t.double())):
            a = a.clone().requires_grad_()
            for red in ("mean", "none"):
                r = L.nn.functional.binary_cross_entropy_with_logits(a, b, reduction=red)
                out.append((_name(r.dtype), [round(v, 6) for v in r.reshape(-1).tolist()]))
            L.nn.functional.binary_cross_entropy_with_logits(a, b).backward()
            out.append((_name(a.grad.dtype), [round(v, 6) for v in a.grad.tolist()]))
        return out
    ref, got = _both(run)
    assert got == ref


def test_instance_norm_checkpoint_with_running_stats_gets_pytorchs_advice():
    def run(L):
        m = L.nn.Sequential(L.nn.Conv2d(3, 3, 1), L.nn.InstanceNorm2d(3))
        sd = {k: v for k, v in m.state_dict().items()}
        sd.update({"1.running_mean": L.zeros(3), "1.running_var": L.ones(3)})
        with pytest.raises(RuntimeError) as e:
            m.load_state_dict(sd)
        m.load_state_dict(m.state_dict())  # its own state loads
        return str(e.value)
    ref, got = _both(run)
    assert got == ref and "saved before 0.4.0" in ref


def test_set_shares_the_source_memory():
    def run(L):
        a, b = L.ones(2, 3), L.arange(6.0)
        a.set_(b)
        b[0] = 7
        c = L.zeros(1)
        c.set_(b, 1, (2,), (2,))
        d = L.ones(3)
        d.set_()
        with pytest.raises(RuntimeError):
            L.ones(2, requires_grad=True).set_(b)
        return [a.tolist(), c.tolist(), d.tolist(), tuple(d.shape)]
    ref, got = _both(run)
    assert got == ref


def test_istft_to_a_complex_signal():
    def run(L):
        x = L.from_numpy(_data(2, 300))
        w = L.hann_window(64, dtype=L.float64)
        X = L.stft(x, 64, 16, window=w, onesided=False, return_complex=True)
        y = L.istft(X, 64, 16, window=w, onesided=False, length=300, return_complex=True)
        y2 = L.istft(X[:1] * (1 + 0.5j), 64, 16, window=w, onesided=False, return_complex=True)
        with pytest.raises(RuntimeError, match="onesided output"):
            L.istft(L.stft(x, 64, 16, window=w, return_complex=True), 64, 16, window=w, return_complex=True)
        return [_name(y.dtype), tuple(y.shape), float((y.real - x).abs().max()) < 1e-12,
                [round(v, 9) for v in L.view_as_real(y2).flatten()[:8].tolist()], tuple(y2.shape)]
    ref, got = _both(run)
    assert got == ref
