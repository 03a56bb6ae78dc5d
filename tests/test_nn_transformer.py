"""nn/modules/transformer.py against PyTorch itself: each layer is built in PyTorch (float64), its state_dict loaded
into gpumemnet's, and both run on the same inputs in train mode (dropout 0) and eval mode; outputs, the gradients of
the inputs and of every parameter after a weighted-sum backward agree (rtol 1e-10). Also the state_dict keys and
repr, masks (causal, bool, float, key padding), unbatched input, batch_first, PyTorch's nested-tensor inference path
(zeros at padded positions), and a few Adam steps of a small encoder. Error cases: error_inputs_transformer.py."""
import warnings

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
import cuda_util
from cuda_util import to_np

torch = pytest.importorskip("torch")
TF = torch.nn.functional

D, H, FF = 8, 2, 16      # d_model, nhead, dim_feedforward
S, T, N = 5, 4, 3        # source length, target length, batch
RTOL, ATOL = 1e-10, 1e-12
device = cuda_util.device  # the fixture: each test runs on the CPU and on CUDA (skipped without it)


def _lib(L, device):
    """(library, functional, tensor factory on the test's device) for torch or gpumemnet."""
    if L is torch:
        return torch, TF, lambda a, **kw: torch.tensor(a, **kw)
    return gm, F, lambda a, **kw: gm.tensor(a, device=device, **kw)


def _build(make, device):
    """make(L, F, dtype, device_kwargs) -> module, in both libraries, with PyTorch's parameters loaded into ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TransformerEncoder's enable_nested_tensor notice, compared elsewhere
        theirs = make(torch, TF, torch.float64, {})
        ours = make(gm, F, gm.float64, {"device": device})
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return theirs, ours


def _compare(theirs, ours, arrays, call, device, mode="train", grad=True):
    """call(module, L, tensors) in both libraries; same output and, with grad, the same gradients of the inputs
    and of every parameter after a random weighting of the output is summed and back-propagated."""
    out = {}
    for mod, L in ((theirs, torch), (ours, gm)):
        getattr(mod, mode)()
        mod.zero_grad()
        _, _, tensor = _lib(L, device)
        ts = [tensor(a, requires_grad=grad) for a in arrays]
        y = call(mod, L, ts)
        out[L] = (y, ts)
    (yb, tb), (ya, ta) = out[torch], out[gm]
    assert tuple(ya.shape) == tuple(yb.shape)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=RTOL, atol=ATOL)
    if not grad:
        return
    w = np.random.RandomState(7).randn(*yb.shape)
    (yb * torch.tensor(w)).sum().backward()
    (ya * gm.tensor(w, device=device)).sum().backward()
    for i, (a, b) in enumerate(zip(ta, tb)):
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"input {i}")
    mine = dict(ours.named_parameters())
    assert list(mine) == [n for n, _ in theirs.named_parameters()]
    for n, p in theirs.named_parameters():
        if p.grad is None:
            assert mine[n].grad is None or not to_np(mine[n].grad).any(), n
        else:
            np.testing.assert_allclose(to_np(mine[n].grad), p.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=n)


def _seq(length, batch_first, unbatched=False, seed=0):
    r = np.random.RandomState(seed)
    if unbatched:
        return r.randn(length, D)
    return r.randn(N, length, D) if batch_first else r.randn(length, N, D)


def _mask(kind, L, device, rows, cols, seed=1):
    """An attention mask (rows, cols) or key padding mask (N, cols) of the kind, in library L."""
    _, _, tensor = _lib(L, device)
    r = np.random.RandomState(seed)
    if kind == "causal":
        return L.nn.Transformer.generate_square_subsequent_mask(rows, dtype=L.float64,
                                                                **({} if L is torch else {"device": device}))
    if kind == "bool":
        m = r.rand(rows, cols) > 0.6
        m[:, 0] = False  # every query keeps a key
        return tensor(m)
    if kind == "float":
        return tensor(r.randn(rows, cols))
    if kind == "float3":
        return tensor(r.randn(N * H, rows, cols))
    m = np.zeros((N, cols), bool)
    m[1, cols - 2:] = True
    m[2, 1] = True
    if kind == "kpm":
        return tensor(m)
    if kind == "kpm_float":
        return tensor(np.where(m, -np.inf, 0.0) + r.rand(N, cols) * 0.1)
    raise ValueError(kind)


def _act(kind, L):
    return {"relu": "relu", "gelu": "gelu", "callable": lambda x: L.nn.functional.gelu(x, approximate="tanh"),
            "module": L.nn.GELU(), "F.relu": L.nn.functional.relu}[kind]


def _enc_layer(L, FF_, dtype, dev, norm_first=False, batch_first=False, activation="relu", bias=True):
    return L.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=_act(activation, L), norm_first=norm_first,
                                        batch_first=batch_first, bias=bias, dtype=dtype, **dev)


def _dec_layer(L, FF_, dtype, dev, norm_first=False, batch_first=False, activation="relu", bias=True):
    return L.nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, activation=_act(activation, L), norm_first=norm_first,
                                        batch_first=batch_first, bias=bias, dtype=dtype, **dev)


CONFIGS = [(nf, bf, act) for nf in (False, True) for bf in (False, True) for act in ("relu", "gelu", "callable")]
CONFIG_IDS = [f"norm_first={nf}-batch_first={bf}-{act}" for nf, bf, act in CONFIGS]


# ---- layers ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("norm_first,batch_first,act", CONFIGS, ids=CONFIG_IDS)
def test_encoder_layer_matches_pytorch(norm_first, batch_first, act, mode, device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _enc_layer(L, FF_, dt, dev, norm_first, batch_first, act), device)
    _compare(theirs, ours, [_seq(S, batch_first)], lambda m, L, ts: m(ts[0]), device, mode)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("norm_first,batch_first,act", CONFIGS, ids=CONFIG_IDS)
def test_decoder_layer_matches_pytorch(norm_first, batch_first, act, mode, device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _dec_layer(L, FF_, dt, dev, norm_first, batch_first, act), device)
    _compare(theirs, ours, [_seq(T, batch_first), _seq(S, batch_first, seed=1)],
             lambda m, L, ts: m(ts[0], ts[1]), device, mode)


ENC_MASKS = {
    "causal": {"src_mask": "causal"}, "causal is_causal": {"src_mask": "causal", "is_causal": True},
    "bool": {"src_mask": "bool"}, "float": {"src_mask": "float"}, "float 3-D": {"src_mask": "float3"},
    "key padding": {"src_key_padding_mask": "kpm"}, "float key padding": {"src_key_padding_mask": "kpm_float"},
    "bool and key padding": {"src_mask": "bool", "src_key_padding_mask": "kpm"},
    "causal and key padding": {"src_mask": "causal", "src_key_padding_mask": "kpm_float", "is_causal": True},
}


def _mask_kwargs(spec, L, device, rows, cols):
    kw = {}
    for name, kind in spec.items():
        kw[name] = kind if isinstance(kind, bool) else _mask(kind, L, device, rows, cols)
    return kw


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", list(ENC_MASKS))
def test_encoder_layer_masks_match_pytorch(masks, mode, device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _enc_layer(L, FF_, dt, dev, batch_first=True), device)
    _compare(theirs, ours, [_seq(S, True)], lambda m, L, ts: m(ts[0], **_mask_kwargs(ENC_MASKS[masks], L, device,
                                                                                       S, S)), device, mode)


DEC_MASKS = {
    "tgt causal": {"tgt_mask": ("causal", T, T), "tgt_is_causal": True},
    "tgt bool, memory float": {"tgt_mask": ("bool", T, T), "memory_mask": ("float", T, S)},
    "key padding": {"tgt_key_padding_mask": ("kpm", T, T), "memory_key_padding_mask": ("kpm_float", T, S)},
    "everything": {"tgt_mask": ("causal", T, T), "memory_mask": ("bool", T, S),
                   "tgt_key_padding_mask": ("kpm", T, T), "memory_key_padding_mask": ("kpm", T, S)},
}


def _dec_mask_kwargs(spec, L, device):
    return {k: v if isinstance(v, bool) else _mask(v[0], L, device, v[1], v[2]) for k, v in spec.items()}


@pytest.mark.filterwarnings("ignore:Support for mismatched")  # mixed mask types, checked below
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", list(DEC_MASKS))
def test_decoder_layer_masks_match_pytorch(masks, mode, device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _dec_layer(L, FF_, dt, dev, norm_first=True), device)
    _compare(theirs, ours, [_seq(T, False), _seq(S, False, seed=1)],
             lambda m, L, ts: m(ts[0], ts[1], **_dec_mask_kwargs(DEC_MASKS[masks], L, device)), device, mode)


def test_layers_take_unbatched_input(device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _enc_layer(L, FF_, dt, dev, activation="module"), device)
    _compare(theirs, ours, [_seq(S, False, unbatched=True)],
             lambda m, L, ts: m(ts[0], src_key_padding_mask=_mask("kpm", L, device, N, S)[1]), device)
    theirs, ours = _build(lambda L, FF_, dt, dev: _dec_layer(L, FF_, dt, dev, batch_first=True), device)
    _compare(theirs, ours, [_seq(T, True, unbatched=True), _seq(S, True, unbatched=True, seed=1)],
             lambda m, L, ts: m(ts[0], ts[1], tgt_mask=_mask("causal", L, device, T, T)), device, "eval")


def test_mixed_mask_types_warn_as_pytorch():
    """A bool padding mask with a float attention mask: PyTorch's deprecation warning, from the same modules."""
    for make, call in ((lambda L: L.nn.TransformerEncoderLayer(D, H, FF, dtype=L.float64),
                        lambda m, L: m(L.zeros(S, N, D, dtype=L.float64), src_mask=L.zeros(S, S, dtype=L.float64),
                                       src_key_padding_mask=L.zeros(N, S, dtype=L.bool))),
                       (lambda L: L.nn.TransformerEncoder(L.nn.TransformerEncoderLayer(D, H, FF, dtype=L.float64), 1,
                                                          enable_nested_tensor=False),
                        lambda m, L: m(L.zeros(S, N, D, dtype=L.float64), mask=L.zeros(S, S, dtype=L.bool),
                                       src_key_padding_mask=L.zeros(N, S, dtype=L.float64)))):
        got = {}
        for L in (torch, gm):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                call(make(L), L)
            got[L] = sorted({str(x.message) for x in w})
        assert got[gm] == got[torch] and got[gm]


# ---- stacks --------------------------------------------------------------------------------------------------------
def _encoder(L, FF_, dt, dev, batch_first=True, norm=True, **kw):
    layer = _enc_layer(L, FF_, dt, dev, batch_first=batch_first)
    return L.nn.TransformerEncoder(layer, 2, L.nn.LayerNorm(D, dtype=dt, **dev) if norm else None, **kw)


def _decoder(L, FF_, dt, dev, norm=True):
    return L.nn.TransformerDecoder(_dec_layer(L, FF_, dt, dev), 2, L.nn.LayerNorm(D, dtype=dt, **dev) if norm else None)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", ["none", "causal", "causal is_causal", "bool", "key padding", "float key padding"])
@pytest.mark.parametrize("norm", [True, False], ids=["norm", "no norm"])
def test_encoder_matches_pytorch(norm, masks, mode, device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _encoder(L, FF_, dt, dev, norm=norm), device)
    spec = {"none": {}, **{k: {("mask" if a == "src_mask" else a): v for a, v in ENC_MASKS[k].items()}
                           for k in ENC_MASKS}}[masks]
    _compare(theirs, ours, [_seq(S, True)], lambda m, L, ts: m(ts[0], **_mask_kwargs(spec, L, device, S, S)),
             device, mode)
    assert ours.layers[0] is not ours.layers[1] and ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", list(DEC_MASKS))
def test_decoder_matches_pytorch(masks, mode, device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _decoder(L, FF_, dt, dev), device)
    spec = dict(DEC_MASKS[masks])
    spec.pop("tgt_is_causal", None)  # the decoder detects the causal mask itself
    _compare(theirs, ours, [_seq(T, False), _seq(S, False, seed=1)],
             lambda m, L, ts: m(ts[0], ts[1], **_dec_mask_kwargs(spec, L, device)), device, mode)


KPM_LAYOUTS = {"left-aligned": [[0, 0, 0, 0, 0], [0, 0, 0, 1, 1], [0, 1, 1, 1, 1]],
               "not left-aligned": [[0, 0, 0, 0, 0], [1, 0, 0, 1, 0], [0, 1, 1, 0, 1]],
               "a sequence all padding": [[0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1]],
               "float": [[0, 0, 0, 0, 0], [0, 0, 0, -1e9, -np.inf], [0, 0.5, -np.inf, -np.inf, -np.inf]]}


@pytest.mark.parametrize("mask_check", [True, False])
@pytest.mark.parametrize("layout", list(KPM_LAYOUTS))
def test_encoder_inference_with_padding_matches_pytorchs_nested_path(layout, mask_check, device):
    """Eval mode under no_grad: PyTorch runs the padded batch as a nested tensor, which gives zeros at the padded
    positions (before the final norm, whose bias they then take); gpumemnet returns the same values."""
    theirs, ours = _build(lambda L, FF_, dt, dev: _encoder(L, FF_, dt, dev, mask_check=mask_check), device)
    with torch.no_grad():  # give the final norm a nonzero bias, so that the padded positions show it
        theirs.norm.bias.copy_(torch.linspace(-1, 1, D, dtype=torch.float64))
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    theirs.eval()
    ours.eval()
    kpm = np.array(KPM_LAYOUTS[layout])
    kpm = kpm.astype(bool) if layout != "float" else kpm.astype(np.float64)
    x = _seq(S, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's "nested tensors are in prototype stage"
        with torch.no_grad():
            yb = theirs(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm)).numpy()
    with gm.no_grad():
        ya = ours(gm.tensor(x, device=device), src_key_padding_mask=gm.tensor(kpm, device=device))
    np.testing.assert_allclose(to_np(ya), yb, rtol=RTOL, atol=ATOL)
    if layout != "not left-aligned" or not mask_check:
        assert (yb[1, -1] == theirs.norm.bias.detach().numpy()).all()  # the nested path was taken
    # and the layer's own fused path (no nested tensors) on bool masks
    with torch.no_grad():
        lb = theirs.layers[0](torch.tensor(x), src_key_padding_mask=torch.tensor(kpm != 0)).numpy()
    with gm.no_grad():
        la = ours.layers[0](gm.tensor(x, device=device), src_key_padding_mask=gm.tensor(kpm != 0, device=device))
    if layout == "a sequence all padding":  # PyTorch's fused kernel gives that sequence NaN, its attention zeros
        assert np.isnan(lb[1]).all() and np.isfinite(to_np(la)).all()
        la, lb = gm.tensor(to_np(la)[[0, 2]]), lb[[0, 2]]
    np.testing.assert_allclose(to_np(la), lb, rtol=RTOL, atol=ATOL)


def test_encoder_nested_tensor_notice_as_pytorch():
    """enable_nested_tensor=True with a layer PyTorch's nested path cannot take warns the same way."""
    cases = [dict(batch_first=False), dict(batch_first=True, norm_first=True), dict(batch_first=True, bias=False),
             dict(batch_first=True, activation="callable"), dict(batch_first=True)]
    for kw in cases:
        got = {}
        for L in (torch, gm):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                enc = L.nn.TransformerEncoder(_enc_layer(L, None, L.float64, {}, **kw), 2)
            got[L] = ([str(x.message) for x in w if "nested" in str(x.message)], enc.use_nested_tensor)
        assert got[gm] == got[torch], kw
    odd = {L: L.nn.TransformerEncoder(L.nn.TransformerEncoderLayer(9, 3, 8, batch_first=True), 1,
                                      enable_nested_tensor=False) for L in (torch, gm)}
    assert odd[gm].use_nested_tensor is odd[torch].use_nested_tensor is False
    assert odd[gm].enable_nested_tensor is False and odd[gm].mask_check is True


# ---- Transformer -------------------------------------------------------------------------------------------------
def _transformer(L, FF_, dt, dev, batch_first=False, norm_first=False):
    return L.nn.Transformer(D, H, 2, 1, FF, dropout=0.0, batch_first=batch_first, norm_first=norm_first, dtype=dt,
                            **dev)


TRANSFORMER_CASES = {
    "plain": {}, "batch_first": {"batch_first": True}, "norm_first": {"norm_first": True},
    "masks": {"masks": True}, "batch_first masks": {"batch_first": True, "masks": True},
    "unbatched": {"unbatched": True, "masks": True},
}


@pytest.mark.filterwarnings("ignore:Support for mismatched")  # a float tgt_mask with a bool key padding mask
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", list(TRANSFORMER_CASES))
def test_transformer_end_to_end_matches_pytorch(case, mode, device):
    opts = TRANSFORMER_CASES[case]
    bf, ub = opts.get("batch_first", False), opts.get("unbatched", False)
    theirs, ours = _build(lambda L, FF_, dt, dev: _transformer(L, FF_, dt, dev, bf, opts.get("norm_first", False)),
                          device)

    def call(m, L, ts):
        kw = {}
        if opts.get("masks"):
            kpm = (lambda k, c: _mask(k, L, device, N, c)[1] if ub else _mask(k, L, device, N, c))
            kw = {"tgt_mask": _mask("causal", L, device, T, T), "src_mask": _mask("bool", L, device, S, S),
                  "memory_mask": _mask("float", L, device, T, S, seed=3), "src_key_padding_mask": kpm("kpm", S),
                  "tgt_key_padding_mask": kpm("kpm", T), "memory_key_padding_mask": kpm("kpm", S)}
        return m(ts[0], ts[1], **kw)
    _compare(theirs, ours, [_seq(S, bf, ub), _seq(T, bf, ub, seed=1)], call, device, mode)


def test_transformer_custom_encoder_decoder_and_init(device):
    theirs, ours = _build(lambda L, FF_, dt, dev: L.nn.Transformer(
        D, H, dim_feedforward=FF, dropout=0.0, dtype=dt, custom_encoder=_encoder(L, FF_, dt, dev, False),
        custom_decoder=_decoder(L, FF_, dt, dev, norm=False), **dev), device)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _compare(theirs, ours, [_seq(S, False), _seq(T, False, seed=1)], lambda m, L, ts: m(ts[0], ts[1]), device)
    gm.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the enable_nested_tensor notice (batch_first=False)
        m = gm.nn.Transformer(16, 2, 1, 1, 32)  # every matrix re-initialised Xavier-uniform, biases kept
    w = to_np(m.encoder.layers[0].linear1.weight)
    bound = np.sqrt(6.0 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not to_np(m.decoder.layers[0].self_attn.in_proj_bias).any()
    assert (m.d_model, m.nhead, m.batch_first) == (16, 2, False)


def test_generate_square_subsequent_mask_as_pytorch():
    for kw in ({}, {"dtype": "float64"}, {"dtype": "bool"}):
        a = gm.nn.Transformer.generate_square_subsequent_mask(4, **{k: getattr(gm, v) for k, v in kw.items()})
        b = torch.nn.Transformer.generate_square_subsequent_mask(4, **{k: getattr(torch, v) for k, v in kw.items()})
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_array_equal(to_np(a), b.numpy().astype(to_np(a).dtype))


# ---- names, repr ---------------------------------------------------------------------------------------------------
MODULES = {
    "encoder layer": lambda L, dt: _enc_layer(L, None, dt, {}),
    "encoder layer, module activation, no bias": lambda L, dt: _enc_layer(L, None, dt, {}, activation="module",
                                                                          bias=False),
    "decoder layer": lambda L, dt: _dec_layer(L, None, dt, {}, norm_first=True),
    "encoder": lambda L, dt: _encoder(L, None, dt, {}),
    "decoder": lambda L, dt: _decoder(L, None, dt, {}),
    "transformer": lambda L, dt: L.nn.Transformer(D, H, 2, 2, FF),
    "transformer, no bias": lambda L, dt: L.nn.Transformer(D, H, 1, 1, FF, bias=False, activation="gelu"),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_state_dict_keys_and_repr_as_pytorch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs, ours = MODULES[name](torch, torch.float64), MODULES[name](gm, gm.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [tuple(v.shape) for v in ours.state_dict().values()] == [tuple(v.shape) for v in
                                                                    theirs.state_dict().values()]
    assert repr(ours) == repr(theirs)
    assert type(ours).__name__ == type(theirs).__name__
    assert getattr(ours, "activation_relu_or_gelu", None) == getattr(theirs, "activation_relu_or_gelu", None)
    assert isinstance(gm.nn.modules.transformer.Transformer, type) and "Transformer" in gm.nn.__all__


# ---- training ----------------------------------------------------------------------------------------------------
def test_adam_training_loss_sequence_matches_pytorch(device):
    theirs, ours = _build(lambda L, FF_, dt, dev: _encoder(L, FF_, dt, dev), device)
    x, target = _seq(S, True), np.random.RandomState(5).randn(N, S, D)
    kpm = np.zeros((N, S))
    kpm[1, -1] = -np.inf  # a float padding mask, like the float causal mask (mixing them warns)
    losses = {}
    for mod, L in ((theirs, torch), (ours, gm)):
        _, _, tensor = _lib(L, device)
        opt = L.optim.Adam(mod.parameters(), lr=1e-2)
        mod.train()
        seq = []
        for _ in range(4):
            opt.zero_grad()
            y = mod(tensor(x), mask=_mask("causal", L, device, S, S), src_key_padding_mask=tensor(kpm))
            loss = ((y - tensor(target)) ** 2).mean()
            loss.backward()
            opt.step()
            seq.append(float(loss.item()))
        losses[L] = seq
    assert losses[gm][0] != losses[gm][-1]
    np.testing.assert_allclose(losses[gm], losses[torch], rtol=1e-10)


# ---- meta ----------------------------------------------------------------------------------------------------------
def test_meta_run_takes_the_cpu_path_and_bytes():
    """On meta there are no values: a mask of the causal shape counts as causal (PyTorch fails there) and the
    encoder's padded inference path is taken without the left-alignment check, so a meta run allocates what the CPU
    run does, byte for byte (what gm.memory's estimates rely on)."""
    peaks = {}
    for dev in ("cpu", "meta"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = gm.nn.Transformer(D, H, 2, 2, FF, dropout=0.0, batch_first=True, device=dev)
        src, tgt = gm.zeros(N, S, D, device=dev), gm.zeros(N, T, D, device=dev)
        mask = gm.nn.Transformer.generate_square_subsequent_mask(T, device=dev)
        kpm = gm.tensor(np.arange(S)[None, :] >= np.array([[S], [S - 2], [1]]), device=dev)
        seen = []
        for mode in ("train", "eval"):
            getattr(t, mode)()
            gm.memory.reset_peak_memory_stats(dev)
            base = gm.memory.memory_allocated(dev)
            with gm.set_grad_enabled(mode == "train"):
                y = t(src, tgt, tgt_mask=mask, src_key_padding_mask=kpm)
                if mode == "train":
                    y.sum().backward()
            assert tuple(y.shape) == (N, T, D)
            seen.append(gm.memory.max_memory_allocated(dev) - base)
            del y
        peaks[dev] = seen
    assert peaks["meta"] == peaks["cpu"]
