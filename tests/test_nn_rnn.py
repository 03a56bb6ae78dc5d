"""nn.RNN, nn.LSTM, nn.GRU, their cells and torch.nn.utils.rnn's packing against PyTorch itself: each layer is built
in PyTorch (float64), its state_dict loaded into ours unchanged, and outputs, final states and the gradients of the
input, the initial states and every parameter compared, for padded, batch-first, unbatched and packed input, on the
CPU and on CUDA. Also: state_dict names and repr, PackedSequence's functions, dropout between layers, a few Adam
steps of a packed-sequence classifier, and fp32 agreement."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
TU = torch.nn.utils.rnn
GU = gm.nn.utils.rnn

R = np.random.RandomState(0)
IN, HID, L, N = 4, 6, 5, 3


def _pair(cls, device, dtype="float64", **kw):
    """The same layer in PyTorch and ours, ours loaded from PyTorch's state_dict."""
    theirs = getattr(torch.nn, cls)(dtype=getattr(torch, dtype), **kw)
    ours = getattr(gm.nn, cls)(dtype=getattr(gm, dtype), device=device, **kw)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _states(out):
    """The final state(s) of a layer's result as a tuple."""
    return out if isinstance(out, tuple) else (out,)


def _compare_backward(ours, theirs, pairs, outs_a, outs_b, rtol=1e-9):
    """Backward of a random weighting of every output in both libraries; the gradients of the (gm, torch) input
    pairs and of every parameter agree."""
    loss_a, loss_b = 0, 0
    for a, b in zip(outs_a, outs_b):
        w = R.randn(*b.shape)
        loss_a = loss_a + (a * gm.tensor(w, dtype=a.dtype, device=a.device)).sum()
        loss_b = loss_b + (b * torch.tensor(w, dtype=b.dtype)).sum()
    loss_a.backward()
    loss_b.backward()
    for i, (a, b) in enumerate(pairs):
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=rtol, atol=1e-12, err_msg=f"input {i}")
    mine = dict(ours.named_parameters())
    for n, p in theirs.named_parameters():
        np.testing.assert_allclose(to_np(mine[n].grad), p.grad.numpy(), rtol=rtol, atol=1e-12, err_msg=n)


LAYER_CASES = {
    "RNN tanh": ("RNN", {}),
    "RNN relu 3 layers": ("RNN", {"nonlinearity": "relu", "num_layers": 3}),
    "RNN bidirectional batch_first": ("RNN", {"bidirectional": True, "batch_first": True}),
    "LSTM": ("LSTM", {}),
    "LSTM 2 layers bidirectional": ("LSTM", {"num_layers": 2, "bidirectional": True}),
    "LSTM no bias batch_first": ("LSTM", {"bias": False, "batch_first": True}),
    "LSTM proj_size": ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True}),
    "GRU": ("GRU", {}),
    "GRU 2 layers bidirectional batch_first": ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    "GRU no bias": ("GRU", {"bias": False}),
}


def _leaves(arrs, device):
    """Each array as a (gpumemnet, PyTorch) pair of leaves requiring grad."""
    return [(gm.tensor(a, device=device, requires_grad=True), torch.tensor(a, requires_grad=True)) for a in arrs]


def _hx(cls, pairs):
    """The initial state each library's layer takes, from the state pairs: a tensor, or (h, c) for an LSTM."""
    if cls == "LSTM":
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    return pairs[0]


def _same_outputs(outs_a, outs_b):
    for a, b in zip(outs_a, outs_b):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(to_np(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def _hidden(cls, kw, batch, batched=True):
    """Random initial state(s) of the layer's shape, as arrays."""
    rows = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    sizes = [kw.get("proj_size") or HID] + ([HID] if cls == "LSTM" else [])
    arrs = [R.randn(*((rows, batch, s) if batched else (rows, s))) for s in sizes]
    return arrs


@pytest.mark.parametrize("with_hx", [False, True], ids=["zero state", "given state"])
@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_layers_match_pytorch_on_padded_input(case, with_hx, device):
    cls, kw = LAYER_CASES[case]
    ours, theirs = _pair(cls, device, input_size=IN, hidden_size=HID, **kw)
    x = R.randn(*((N, L, IN) if kw.get("batch_first") else (L, N, IN)))
    xa, xb = gm.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    pairs = [(xa, xb)]
    ha = hb = None
    if with_hx:
        hs = _leaves(_hidden(cls, kw, N), device)
        pairs += hs
        ha, hb = _hx(cls, hs)
    oa, sa = ours(xa, ha)
    ob, sb = theirs(xb, hb)
    outs_a, outs_b = (oa,) + _states(sa), (ob,) + _states(sb)
    _same_outputs(outs_a, outs_b)
    _compare_backward(ours, theirs, pairs, outs_a, outs_b)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("case", ["RNN tanh", "LSTM 2 layers bidirectional", "LSTM proj_size",
                                  "GRU 2 layers bidirectional batch_first"])
def test_layers_match_pytorch_on_packed_sequences(case, batch_first, device):
    """Sequences of lengths 3, 5, 2 (not sorted: enforce_sorted=False), with a given initial state: the padded
    output, each sequence's last state, and every gradient."""
    cls, kw = LAYER_CASES[case]
    kw = dict(kw, batch_first=batch_first)
    ours, theirs = _pair(cls, device, input_size=IN, hidden_size=HID, **kw)
    lengths = [3, 5, 2]
    x = R.randn(*((3, 5, IN) if batch_first else (5, 3, IN)))
    xa, xb = gm.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    hs = _leaves(_hidden(cls, kw, 3), device)
    ha, hb = _hx(cls, hs)
    pa = GU.pack_padded_sequence(xa, lengths, batch_first=batch_first, enforce_sorted=False)
    pb = TU.pack_padded_sequence(xb, lengths, batch_first=batch_first, enforce_sorted=False)
    np.testing.assert_array_equal(to_np(pa.data), pb.data.detach().numpy())
    np.testing.assert_array_equal(pa.batch_sizes.numpy(), pb.batch_sizes.numpy())
    np.testing.assert_array_equal(to_np(pa.sorted_indices), pb.sorted_indices.numpy())
    np.testing.assert_array_equal(to_np(pa.unsorted_indices), pb.unsorted_indices.numpy())
    oa, sa = ours(pa, ha)
    ob, sb = theirs(pb, hb)
    assert isinstance(oa, GU.PackedSequence)
    np.testing.assert_allclose(to_np(oa.data), ob.data.detach().numpy(), rtol=1e-10, atol=1e-12)
    (ya, la), (yb, lb) = (GU.pad_packed_sequence(oa, batch_first=batch_first, total_length=6),
                          TU.pad_packed_sequence(ob, batch_first=batch_first, total_length=6))
    np.testing.assert_array_equal(la.numpy(), lb.numpy())
    outs_a, outs_b = (ya,) + _states(sa), (yb,) + _states(sb)
    _same_outputs(outs_a, outs_b)
    _compare_backward(ours, theirs, [(xa, xb)] + hs, outs_a, outs_b)


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(cls, device):
    ours, theirs = _pair(cls, device, input_size=IN, hidden_size=HID, num_layers=2)
    x = R.randn(L, IN)
    xa, xb = gm.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    hs = _leaves(_hidden(cls, {"num_layers": 2}, 1, batched=False), device)
    ha, hb = _hx(cls, hs)
    oa, sa = ours(xa, ha)
    ob, sb = theirs(xb, hb)
    outs_a, outs_b = (oa,) + _states(sa), (ob,) + _states(sb)
    _same_outputs(outs_a, outs_b)
    _compare_backward(ours, theirs, [(xa, xb)] + hs, outs_a, outs_b)


CELL_CASES = {"RNNCell": {}, "RNNCell relu no bias": {"nonlinearity": "relu", "bias": False}, "LSTMCell": {},
              "GRUCell": {}, "GRUCell no bias": {"bias": False}}


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("case", list(CELL_CASES))
def test_cells_match_pytorch(case, batched, device):
    """Three steps of a cell, the state carried (and, for the first, zeros when none is given)."""
    cls = case.split()[0]
    ours, theirs = _pair(cls, device, input_size=IN, hidden_size=HID, **CELL_CASES[case])
    xs = [R.randn(*((N, IN) if batched else (IN,))) for _ in range(3)]
    pairs = _leaves(xs, device)
    sa = sb = None
    outs_a, outs_b = [], []
    for xa, xb in pairs:
        sa, sb = ours(xa, sa), theirs(xb, sb)
        outs_a += list(_states(sa))
        outs_b += list(_states(sb))
    _same_outputs(outs_a, outs_b)
    _compare_backward(ours, theirs, pairs, outs_a, outs_b)


def test_only_some_outputs_used(device):
    """Gradients when only the last state (h_n, not the output or c_n) reaches the loss, and when only c_n does."""
    ours, theirs = _pair("LSTM", device, input_size=IN, hidden_size=HID, num_layers=2)
    x = R.randn(L, N, IN)
    for pick in (lambda out: out[1][0], lambda out: out[1][1]):
        ours.zero_grad()
        theirs.zero_grad()
        xa, xb = gm.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
        _compare_backward(ours, theirs, [(xa, xb)], [pick(ours(xa))], [pick(theirs(xb))])


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_output_changed_in_place_then_backward(bidirectional, device):
    """The LSTM runs a layer as one node (nn/_rnn_layer.py) that keeps the steps' h, not the output: the output may
    be changed in place before backward (an in-place dropout, a scaling), as PyTorch's CPU layers allow; gradients
    as PyTorch's, the final states' included."""
    ours, theirs = _pair("LSTM", device, input_size=IN, hidden_size=HID, num_layers=2, bidirectional=bidirectional)
    x = R.randn(L, N, IN)
    xa, xb = gm.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    (oa, sa), (ob, sb) = ours(xa), theirs(xb)
    oa.mul_(3.0)
    ob.mul_(3.0)
    _compare_backward(ours, theirs, [(xa, xb)], (oa,) + _states(sa), (ob,) + _states(sb))


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_float32_matches_pytorch(cls, device):
    """float32 runs the fused cells on vector sigmoid and tanh (kernels/cpu/vec_math.h): values and gradients
    within float32 rounding of PyTorch's. 37 hidden units: vector bodies and a remainder."""
    ours, theirs = _pair(cls, device, "float32", input_size=IN, hidden_size=37, num_layers=2, bidirectional=True)
    x = R.randn(7, N, IN).astype(np.float32)
    xa, xb = gm.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    oa, sa = ours(xa)
    ob, sb = theirs(xb)
    assert oa.dtype == gm.float32
    for a, b in zip((oa,) + _states(sa), (ob,) + _states(sb)):
        np.testing.assert_allclose(to_np(a), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = R.randn(*ob.shape).astype(np.float32)
    (oa * gm.tensor(w, device=device)).sum().backward()
    (ob * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(to_np(xa.grad), xb.grad.numpy(), rtol=1e-4, atol=1e-5)
    mine = dict(ours.named_parameters())
    for n, p in theirs.named_parameters():
        np.testing.assert_allclose(to_np(mine[n].grad), p.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=n)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_half_precision_layers_match_float64(cls, dtype, device):
    """A layer kept in bfloat16 or float16: the cells compute in float and round once per value, so outputs and
    gradients stay within the format's rounding of the same layer in float64 (PyTorch's CPU has no float16 LSTM to
    compare with)."""
    ours, _ = _pair(cls, device, input_size=IN, hidden_size=HID)
    x = R.randn(L, N, IN)
    outs, grads = {}, {}
    for dt in ("float64", dtype):
        m = ours.to(getattr(gm, dt))
        m.zero_grad()
        xa = gm.tensor(x, dtype=getattr(gm, dt), device=device, requires_grad=True)
        out, _ = m(xa)
        assert out.dtype == getattr(gm, dt)
        out.float().square().sum().backward()
        outs[dt], grads[dt] = to_np(out), [to_np(xa.grad)] + [to_np(p.grad) for p in m.parameters()]
    tol = 3e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(outs[dtype], outs["float64"], rtol=tol, atol=tol)
    for a, b in zip(grads[dtype], grads["float64"]):
        np.testing.assert_allclose(a, b, rtol=4 * tol, atol=4 * tol * np.abs(b).max())


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_autocast_dtypes_as_pytorch(cls):
    """Under bfloat16 autocast the projections come out in bfloat16 while the initial state is float32: as in
    PyTorch, the LSTM's output and states come out in bfloat16 and the GRU's in float32, and backward gives float32
    gradients close to PyTorch's."""
    ours, theirs = _pair(cls, "cpu", "float32", input_size=IN, hidden_size=HID, num_layers=2)
    x = R.randn(L, N, IN).astype(np.float32)
    xa, xb = gm.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    with gm.autocast("cpu", dtype=gm.bfloat16):
        oa, sa = ours(xa)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ob, sb = theirs(xb)
    for a, b in zip((oa,) + _states(sa), (ob,) + _states(sb)):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(to_np(a), b.detach().float().numpy(), atol=5e-2)
    oa.float().sum().backward()
    ob.float().sum().backward()
    assert xa.grad.dtype == gm.float32 and xb.grad.dtype == torch.float32
    np.testing.assert_allclose(to_np(xa.grad), xb.grad.numpy(), rtol=5e-2, atol=5e-2)


def test_dropout_between_layers_only_in_training(device):
    """dropout acts after every layer but the last, in training only: eval equals a dropout-free layer, and in
    training some outputs differ from it (the masks come from gpumemnet's generator, not PyTorch's)."""
    plain = gm.nn.GRU(IN, HID, num_layers=2, dtype=gm.float64, device=device)
    drop = gm.nn.GRU(IN, HID, num_layers=2, dropout=0.5, dtype=gm.float64, device=device)
    drop.load_state_dict(plain.state_dict())
    x = gm.tensor(R.randn(L, N, IN), device=device)
    ref = to_np(plain(x)[0])
    np.testing.assert_allclose(to_np(drop.eval()(x)[0]), ref, rtol=1e-12)
    gm.manual_seed(0)
    assert not np.allclose(to_np(drop.train()(x)[0]), ref)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1, but got "
                                         "dropout=0.5 and num_layers=1"):
        gm.nn.LSTM(IN, HID, dropout=0.5)


def test_parameter_names_shapes_and_init():
    """PyTorch's names and shapes, uniform(-1/sqrt(hidden), 1/sqrt(hidden)) initialisation, all_weights, and the
    flatten_parameters() that training scripts call."""
    theirs = torch.nn.LSTM(IN, 16, num_layers=2, bidirectional=True, proj_size=3)
    ours = gm.nn.LSTM(IN, 16, num_layers=2, bidirectional=True, proj_size=3)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    assert [[tuple(p.shape) for p in ws] for ws in ours.all_weights] == \
           [[tuple(p.shape) for p in ws] for ws in theirs.all_weights]
    for p in ours.parameters():
        a = to_np(p)
        assert np.abs(a).max() <= 0.25 and a.std() > 0.1  # 1/sqrt(16)
    ours.flatten_parameters()
    assert repr(gm.nn.RNN(2, 3, 1, "relu")) == repr(torch.nn.RNN(2, 3, 1, "relu"))
    assert repr(gm.nn.RNNCell(2, 3, nonlinearity="relu")) == repr(torch.nn.RNNCell(2, 3, nonlinearity="relu"))


def test_pack_and_unpack_functions():
    seqs = [R.randn(n, 2) for n in (2, 4, 1)]
    a = [gm.tensor(s, requires_grad=True) for s in seqs]
    b = [torch.tensor(s, requires_grad=True) for s in seqs]
    pa, pb = GU.pack_sequence(a, enforce_sorted=False), TU.pack_sequence(b, enforce_sorted=False)
    np.testing.assert_array_equal(to_np(pa.data), pb.data.detach().numpy())
    np.testing.assert_array_equal(pa.batch_sizes.numpy(), pb.batch_sizes.numpy())
    for ua, ub in zip(GU.unpack_sequence(pa), TU.unpack_sequence(pb)):
        np.testing.assert_array_equal(to_np(ua), ub.detach().numpy())
    # sorted input keeps no indices; the old tuple form; padding value; gradient through pack and pad
    sa = GU.pack_sequence(a[1:2] + a[:1])
    assert sa.sorted_indices is None and sa.unsorted_indices is None
    assert GU.PackedSequence((sa.data, sa.batch_sizes)).batch_sizes is sa.batch_sizes
    ya, la = GU.pad_packed_sequence(pa, batch_first=True, padding_value=-1.0)
    yb, lb = TU.pad_packed_sequence(pb, batch_first=True, padding_value=-1.0)
    np.testing.assert_array_equal(to_np(ya), yb.detach().numpy())
    np.testing.assert_array_equal(la.numpy(), lb.numpy())
    w = R.randn(*yb.shape)
    (ya * gm.tensor(w)).sum().backward()
    (yb * torch.tensor(w)).sum().backward()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(to_np(x.grad), y.grad.numpy())
    np.testing.assert_array_equal(to_np(GU.invert_permutation(gm.tensor([2, 0, 1]))),
                                  TU.invert_permutation(torch.tensor([2, 0, 1])).numpy())
    assert pa.double().data.dtype == gm.float64 and pa.float().data.dtype == gm.float32
    assert pa.to(gm.float32).sorted_indices is not None


def test_packed_classifier_trains_as_pytorch():
    """Embedding -> packed bidirectional LSTM -> Linear on the last states, cross-entropy, Adam with gradient
    clipping: the loss of five steps follows PyTorch's in float64."""
    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = lib.nn.Embedding(10, 5, padding_idx=0)
                self.rnn = lib.nn.LSTM(5, 7, num_layers=2, bidirectional=True, batch_first=True)
                self.fc = lib.nn.Linear(14, 3)

            def forward(self, tokens, lengths):
                packed = lib.nn.utils.rnn.pack_padded_sequence(self.emb(tokens), lengths, batch_first=True,
                                                               enforce_sorted=False)
                _, (h, _) = self.rnn(packed)
                return self.fc(lib.cat([h[-2], h[-1]], dim=1))
        return Net().double()

    theirs, ours = build(torch), build(gm)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    tokens = R.randint(1, 10, (4, 6))
    lengths = [6, 2, 4, 3]
    for i, n in enumerate(lengths):
        tokens[i, n:] = 0
    labels = R.randint(0, 3, 4)
    losses = {}
    for lib, model in ((torch, theirs), (gm, ours)):
        opt = lib.optim.Adam(model.parameters(), lr=0.05)
        t, y = lib.tensor(tokens), lib.tensor(labels)
        losses[lib] = []
        for _ in range(5):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(t, lib.tensor(lengths)), y)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses[lib].append(loss.item())
    np.testing.assert_allclose(losses[gm], losses[torch], rtol=1e-9)
    assert losses[gm][-1] < losses[gm][0]


def test_no_grad_records_nothing():
    m = gm.nn.LSTM(IN, HID)
    with gm.no_grad():
        out, (h, c) = m(gm.randn(L, N, IN))
    assert not out.requires_grad and out.grad_fn is None and h.grad_fn is None


def test_layers_as_torch_under_the_alias():
    """torch.nn.LSTM and torch.nn.utils.rnn's names under gm.as_torch() are these, in a fresh interpreter."""
    code = textwrap.dedent("""
        import gpumemnet as gm
        torch = gm.as_torch()
        from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
        import torch.nn as nn
        assert nn.LSTM is gm.nn.LSTM and PackedSequence is gm.nn.utils.rnn.PackedSequence
        out, _ = nn.GRU(2, 3)(pack_padded_sequence(torch.zeros(4, 2, 2), [4, 1]))
        print(tuple(pad_packed_sequence(out)[0].shape))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "(4, 2, 3)\n", r.stderr
