"""PyTorch calls that old and new training code make around its models, against PyTorch: the legacy constructor
torch.Tensor(...) (custom layers' `nn.Parameter(torch.Tensor(out, in))`), clone(memory_format=),
nn.utils.rnn.pad_sequence / unpad_sequence (collate functions), and nn.attention.sdpa_kernel with
torch.backends.cuda's attention switches (accepted: gpumemnet has the one math kernel)."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def test_the_legacy_constructor_matches_pytorch():
    for L in (torch, gm):
        a, b, c = L.Tensor(2, 3), L.Tensor([1, 2.5]), L.Tensor()
        assert (tuple(a.shape), tuple(b.shape), tuple(c.shape)) == ((2, 3), (2,), (0,))
        assert a.dtype == b.dtype == L.float32 and b.tolist() == [1.0, 2.5]
        assert tuple(L.Tensor(L.Size([4, 1])).shape) == (4, 1)
        longs = L.ones(2, dtype=L.int64)
        assert L.Tensor(longs).data_ptr() == longs.data_ptr()  # any tensor: its own memory
        p = L.nn.Parameter(L.Tensor(5, 4))
        L.nn.init.kaiming_uniform_(p, a=5 ** 0.5)
        assert isinstance(p, L.nn.Parameter) and p.requires_grad and tuple(p.shape) == (5, 4)
        with pytest.raises(TypeError):
            L.Tensor("abc")
    prev = gm.get_default_dtype()
    gm.set_default_dtype(gm.float64)
    try:
        assert gm.Tensor(2).dtype == gm.float64  # the default dtype, as PyTorch's default tensor type follows it
    finally:
        gm.set_default_dtype(prev)


def test_clone_takes_a_memory_format():
    x = gm.randn(1, 2, 3, 3)
    y = x.clone(memory_format=gm.channels_last)
    assert y.data_ptr() != x.data_ptr() and np.array_equal(y.numpy(), x.numpy())


@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"padding_value": -1.0, "padding_side": "left"},
                                {"batch_first": True, "padding_side": "left"}])
def test_pad_and_unpad_sequence_match_pytorch(kw):
    rng = np.random.default_rng(0)
    seqs = [rng.standard_normal((n, 3)) for n in (4, 1, 3)]
    want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], **kw)
    got = gm.nn.utils.rnn.pad_sequence([gm.tensor(s) for s in seqs], **kw)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if kw.get("padding_side", "right") == "right":
        lengths = [4, 1, 3]
        for g, t in zip(gm.nn.utils.rnn.unpad_sequence(got, gm.tensor(lengths), kw.get("batch_first", False)),
                        torch.nn.utils.rnn.unpad_sequence(want, torch.tensor(lengths), kw.get("batch_first", False))):
            np.testing.assert_array_equal(g.numpy(), t.numpy())
    with pytest.raises(ValueError, match="padding_side"):
        gm.nn.utils.rnn.pad_sequence([gm.ones(2)], padding_side="middle")


def test_attention_kernel_choices_are_accepted():
    from gpumemnet.nn.attention import SDPBackend, sdpa_kernel
    q = gm.randn(1, 2, 4, 8)
    plain = gm.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
        chosen = gm.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    with gm.backends.cuda.sdp_kernel(enable_flash=False):
        legacy = gm.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert np.array_equal(plain.numpy(), chosen.numpy()) and np.array_equal(plain.numpy(), legacy.numpy())
    assert list(SDPBackend.__members__) == list(torch.nn.attention.SDPBackend.__members__)
    assert gm.backends.cuda.math_sdp_enabled() and not gm.backends.cuda.flash_sdp_enabled()
    with pytest.raises(ValueError):
        with sdpa_kernel(["math"]):
            pass
