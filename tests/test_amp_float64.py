"""Autocast leaves float64 tensors alone, as PyTorch's does (its is_eligible: floating and not double): a
model.double() run inside an autocast region (a script's --double reference run with its --amp on) stays float64.
Found by tests/dropin's unet_amp float64 diagnosis: gpumemnet cast the float64 run to bfloat16."""
import numpy as np
import pytest

import gpumemnet as gm


def _ops(lib, x, conv, lin):
    with lib.autocast("cpu"):
        y = conv(x)
        return [y, lin(y.flatten(1)), y @ y.transpose(2, 3)]


def test_float64_stays_float64_under_autocast():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6))
    conv, lin = gm.nn.Conv2d(3, 4, 3).double(), gm.nn.Linear(64, 2).double()
    outs = _ops(gm, gm.tensor(x), conv, lin)
    assert [o.dtype for o in outs] == [gm.float64] * 3
    # and float32 next to it is still lowered
    with gm.autocast("cpu"):
        assert gm.nn.Conv2d(3, 4, 3)(gm.tensor(x, dtype=gm.float32)).dtype == gm.bfloat16
    torch = pytest.importorskip("torch")
    tconv, tlin = torch.nn.Conv2d(3, 4, 3).double(), torch.nn.Linear(64, 2).double()
    with torch.no_grad():
        for t, g in ((tconv, conv), (tlin, lin)):
            t.weight.copy_(torch.from_numpy(g.weight.detach().numpy()))
            t.bias.copy_(torch.from_numpy(g.bias.detach().numpy()))
    touts = _ops(torch, torch.from_numpy(x), tconv, tlin)
    assert [str(o.dtype) for o in touts] == ["torch.float64"] * 3
    for o, t in zip(outs, touts):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
