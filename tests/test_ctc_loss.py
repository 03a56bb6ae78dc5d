"""F.ctc_loss and nn.CTCLoss against PyTorch itself: losses and the gradients of the logits in float64 (padded and
concatenated targets, repeated labels, empty targets, shorter inputs, a blank other than 0, every reduction,
zero_infinity on an impossible alignment, unbatched input), float32, and a few steps of a CRNN-style model
(convolutions, a bidirectional LSTM over the columns, CTC) trained in both libraries."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

# name -> (T, N, C, target lengths, input lengths, padded targets, reduction, zero_infinity, blank)
CASES = {
    "mean, padded": (6, 3, 5, [2, 3, 1], [6, 5, 4], True, "mean", False, 0),
    "none, concatenated, an empty target": (6, 3, 5, [2, 3, 0], [6, 6, 3], False, "none", False, 0),
    "sum, blank is the last class": (8, 2, 4, [3, 3], [8, 8], True, "sum", False, 3),
    "impossible alignment, zero_infinity": (4, 2, 4, [4, 2], [4, 4], True, "none", True, 0),
    "impossible alignment is inf": (4, 2, 4, [4, 2], [4, 4], True, "none", False, 0),
    "longer sequences": (30, 4, 7, [5, 9, 1, 12], [30, 25, 10, 28], True, "mean", False, 0),
}


def _targets(rng, n, width, classes, blank):
    labels = [c for c in range(classes) if c != blank]
    t = rng.choice(labels, (n, width))
    t[0, :2] = t[0, 0]  # a repeated label: the alignment must pass a blank between them
    return t


def _run(lib, dev, case, x, t, w):
    T, N, C, tl, il, padded, red, zi, blank = case
    kw = {} if lib is torch else {"device": dev}
    xs = lib.tensor(x, requires_grad=True, **kw)
    tg = t if padded else np.concatenate([t[i, :n] for i, n in enumerate(tl)])
    loss = lib.nn.functional.ctc_loss(xs.log_softmax(-1), lib.tensor(tg, **kw), lib.tensor(il), lib.tensor(tl),
                                      blank=blank, reduction=red, zero_infinity=zi)
    finite = lib.isfinite(loss)
    (lib.where(finite, loss, lib.zeros_like(loss)) * lib.tensor(w[:loss.numel()].reshape(tuple(loss.shape)),
                                                               **kw)).sum().backward()
    return loss, xs.grad


@pytest.mark.parametrize("name", list(CASES))
def test_ctc_loss_matches_pytorch(name, device):
    case = CASES[name]
    rng = np.random.default_rng(len(name))
    T, N, C, tl, il, _, _, _, blank = case
    x, t, w = rng.standard_normal((T, N, C)), _targets(rng, N, max(tl) + 1, C, blank), rng.random(8) + 0.5
    la, ga = _run(gm, device, case, x, t, w)
    lb, gb = _run(torch, None, case, x, t, w)
    assert tuple(la.shape) == tuple(lb.shape)
    np.testing.assert_allclose(to_np(la), lb.detach().numpy(), rtol=1e-10)
    if name != "impossible alignment is inf":  # PyTorch's gradient of an infinite loss is not meaningful
        np.testing.assert_allclose(to_np(ga), gb.numpy(), rtol=1e-8, atol=1e-12)


def test_unbatched_and_float32_and_module():
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((7, 5)), np.array([1, 2, 2])
    la = gm.nn.functional.ctc_loss(gm.tensor(x).log_softmax(-1), gm.tensor(t), gm.tensor(7), gm.tensor(3))
    lb = torch.nn.functional.ctc_loss(torch.tensor(x).log_softmax(-1), torch.tensor(t), torch.tensor(7),
                                      torch.tensor(3))
    assert la.ndim == 0
    np.testing.assert_allclose(to_np(la), lb.numpy(), rtol=1e-10)
    x32 = rng.standard_normal((9, 2, 6)).astype(np.float32)
    args = ([[1, 2, 3], [4, 4, 0]], [9, 8], [3, 2])
    la = gm.nn.CTCLoss(reduction="sum")(gm.tensor(x32).log_softmax(2), gm.tensor(args[0]), args[1], args[2])
    lb = torch.nn.CTCLoss(reduction="sum")(torch.tensor(x32).log_softmax(2), torch.tensor(args[0]), args[1], args[2])
    assert la.dtype == gm.float32
    np.testing.assert_allclose(to_np(la), lb.numpy(), rtol=1e-5)
    assert repr(gm.nn.CTCLoss(blank=2)) == repr(torch.nn.CTCLoss(blank=2))


def test_crnn_trains_as_pytorch():
    """Convolutions over a text-line image, a bidirectional LSTM over its columns, log-softmax and CTC: five Adam
    steps give PyTorch's losses in float64."""
    def build(lib):
        class CRNN(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.cnn = lib.nn.Sequential(lib.nn.Conv2d(1, 4, 3, padding=1), lib.nn.ReLU(), lib.nn.MaxPool2d((2, 1)),
                                             lib.nn.Conv2d(4, 8, 3, padding=1), lib.nn.BatchNorm2d(8), lib.nn.ReLU(),
                                             lib.nn.AdaptiveAvgPool2d((1, None)))
                self.rnn = lib.nn.LSTM(8, 6, bidirectional=True)
                self.fc = lib.nn.Linear(12, 5)

            def forward(self, x):
                f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # (W, N, C): one step per column
                out, _ = self.rnn(f)
                return self.fc(out).log_softmax(2)
        return CRNN().double()

    theirs, ours = build(torch), build(gm)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(1)
    images, targets = rng.standard_normal((3, 1, 4, 12)), np.array([[1, 2, 3], [4, 4, 0], [2, 0, 0]])
    lengths = [3, 2, 1]
    losses = {}
    for lib, model in ((torch, theirs), (gm, ours)):
        opt = lib.optim.Adam(model.parameters(), lr=0.02)
        crit = lib.nn.CTCLoss(zero_infinity=True)
        losses[lib] = []
        for _ in range(5):
            opt.zero_grad()
            lp = model(lib.tensor(images))
            loss = crit(lp, lib.tensor(targets), lib.tensor([lp.shape[0]] * 3), lib.tensor(lengths))
            loss.backward()
            opt.step()
            losses[lib].append(loss.item())
    np.testing.assert_allclose(losses[gm], losses[torch], rtol=1e-9)
    assert losses[gm][-1] < losses[gm][0]


def test_cpu_kernel_in_float32_with_gradient_at_log_probs_and_empty_inputs():
    """The CPU kernel keeps log_alpha in float32 for float32 input, as PyTorch does: a longer input matches it to
    float32's precision; the gradient is taken at log_probs themselves (PyTorch's closed form, not the true
    gradient); an input of length 0 has loss 0 for an empty target and inf otherwise, and no gradient."""
    rng = np.random.default_rng(3)
    T, N, C = 120, 5, 12
    x = (rng.standard_normal((T, N, C)) * 2).astype(np.float32)
    t = rng.integers(1, C, (N, 30))
    il, tl = [120, 90, 0, 0, 60], [30, 11, 0, 4, 25]

    def run(lib):
        lp = lib.tensor(x).log_softmax(2).detach().requires_grad_()
        loss = lib.nn.functional.ctc_loss(lp, lib.tensor(t), il, tl, reduction="none")
        (lib.where(lib.isfinite(loss), loss, lib.zeros_like(loss)) * lib.arange(1, N + 1)).sum().backward()
        return np.asarray(loss.tolist()), np.asarray(lp.grad.tolist())
    (la, ga), (lb, gb) = run(gm), run(torch)
    np.testing.assert_allclose(la, lb, rtol=2e-5)
    assert la[2] == 0 and la[3] == np.inf
    np.testing.assert_allclose(ga, gb, atol=2e-4)
    assert not ga[:, 2:4].any()


def test_meta_allocates_what_the_cpu_does():
    """An estimate on meta takes the kernel's allocations (log_alpha kept for the backward, its scratch, the
    gradient) at the same points as the CPU run: the same peak and the same bytes held after the forward."""
    rng = np.random.default_rng(4)
    targets = rng.integers(1, 7, (3, 6))
    figures = {}
    for dev in ("cpu", "meta"):
        x = gm.tensor(rng.standard_normal((25, 3, 7)), device=dev, requires_grad=True)
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_allocated(dev)
        loss = gm.nn.functional.ctc_loss(x.log_softmax(2), gm.tensor(targets, device=dev), [25, 20, 9], [6, 3, 2])
        held = gm.memory.memory_allocated(dev) - base
        loss.backward()
        figures[dev] = (held, gm.memory.max_memory_allocated(dev) - base)
    assert figures["meta"] == figures["cpu"]
    assert figures["cpu"][0] >= 3 * 25 * 13 * 8  # log_alpha (N, T, 2L + 1) in float64 is held for the backward
