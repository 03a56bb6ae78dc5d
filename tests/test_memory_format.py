"""Memory formats: accepted everywhere PyTorch accepts them; gpumemnet keeps NCHW, so values do not change, and
copies where PyTorch copies (documented in gpumemnet.memory_format)."""
import pickle

import numpy as np
import pytest

import gpumemnet as gm


def test_formats_exist_and_pickle():
    for f in (gm.channels_last, gm.contiguous_format, gm.preserve_format, gm.channels_last_3d):
        assert isinstance(f, gm.memory_format) and pickle.loads(pickle.dumps(f)) is f
    assert repr(gm.channels_last) == "gpumemnet.channels_last"


def test_to_and_contiguous_copy_as_pytorch_does_and_keep_nchw():
    """to(memory_format=channels_last) and contiguous(memory_format=channels_last) of an NCHW tensor are copies, as
    PyTorch's (an in-place write into them reached the original): laid out NCHW, the tensor's bytes each, exactly."""
    x = gm.randn(2, 4, 4, 8)  # 1 KiB: a whole number of the allocator's 512-byte blocks
    before = gm.memory.memory_stats("cpu")["allocated"]["current"]
    y = x.to(memory_format=gm.channels_last)
    z = x.contiguous(memory_format=gm.channels_last)
    assert y is not x and z is not x and y.is_contiguous() and z.is_contiguous()
    assert gm.memory.memory_stats("cpu")["allocated"]["current"] == before + 2 * x.numel() * 4
    y.mul_(0)
    z.add_(1)
    assert float(x.abs().sum()) > 0 and not bool((z == x).all())
    assert x.to("cpu", gm.float64, memory_format=gm.contiguous_format).dtype == gm.float64
    with pytest.raises(TypeError, match="memory_format must be a gpumemnet memory format"):
        x.to(memory_format="channels_last")
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        x.contiguous(memory_format=gm.preserve_format)


def test_to_and_contiguous_alias_or_copy_where_pytorch_does():
    torch = pytest.importorskip("torch")

    def run(L):
        cl, cf = L.channels_last, L.contiguous_format
        cases = [L.arange(24.).reshape(1, 2, 3, 4), L.arange(120.).reshape(2, 4, 5, 3).permute(0, 3, 1, 2),
                 L.ones(1, 1, 3, 4), L.arange(2.).reshape(1, 2, 1, 1).expand(2, 2, 3, 3),
                 L.arange(6.).reshape(2, 3).t()]
        out = []
        for t in cases:
            for f in (lambda t: t.to(memory_format=cl), lambda t: t.to(memory_format=cf),
                      lambda t: t.contiguous(memory_format=cl), lambda t: t.contiguous(memory_format=cf)):
                try:
                    r = f(t)
                    out.append((r is t, r.data_ptr() == t.data_ptr(), r.tolist() == t.tolist()))
                except RuntimeError as e:
                    out.append(str(e))
        return out

    assert run(gm) == run(torch)


def test_is_contiguous_with_formats_against_torch():
    torch = pytest.importorskip("torch")
    for shape in ((2, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1), (2, 3), (2, 3, 4, 5, 6)):
        g, t = gm.zeros(*shape), torch.zeros(*shape)
        for gf, tf in ((gm.channels_last, torch.channels_last), (gm.channels_last_3d, torch.channels_last_3d),
                       (gm.contiguous_format, torch.contiguous_format)):
            assert g.is_contiguous(memory_format=gf) == t.is_contiguous(memory_format=tf), (shape, gf)
    assert not gm.zeros(3, 4).T.is_contiguous()


def test_module_to_memory_format():
    m = gm.nn.Conv2d(3, 4, 3)
    x = gm.randn(1, 3, 8, 8)
    ref = m(x).detach().numpy()
    assert m.to(memory_format=gm.channels_last) is m
    np.testing.assert_array_equal(m(x.to(memory_format=gm.channels_last)).detach().numpy(), ref)
    with pytest.raises(TypeError, match="memory_format must be a gpumemnet memory format"):
        m.to(memory_format=4)


def test_meta_bytes_of_rounding_equal_cpu():
    def run(dev):
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_stats(dev)["allocated"]["current"]
        x = gm.zeros(3, 5, device=dev)
        ys = [x.round(), x.floor(), x.ceil(), x.round(decimals=2), x.repeat(2, 2), x.norm(dim=1), x.prod(0)]
        stats = gm.memory.memory_stats(dev)
        out = (stats["allocated"]["current"] - base, stats["allocated"]["peak"] - base,
               [tuple(y.shape) for y in ys])
        del ys, x
        return out
    assert run("meta") == run("cpu")
