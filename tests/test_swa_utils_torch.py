"""gpumemnet.optim.swa_utils against torch.optim.swa_utils: AveragedModel (SWA by default, EMA through avg_fn as
torchvision's reference scripts subclass it, multi_avg_fn, use_buffers), update_bn, SWALR's lr sequence."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet.optim import swa_utils as S

torch = pytest.importorskip("torch")
TS = torch.optim.swa_utils


def _pair():
    rng = np.random.default_rng(0)
    g = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3))
    t = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3))
    with torch.no_grad():
        for (name, gp), tp in zip(g.state_dict().items(), t.state_dict().values()):
            v = rng.standard_normal(tuple(gp.shape)) if gp.dtype.is_floating_point else np.array(0)
            gp.copy_(gm.tensor(v, dtype=gp.dtype))
            tp.copy_(torch.tensor(v, dtype=tp.dtype))
    return g, t


def _perturb(g, t, step):
    rng = np.random.default_rng(step + 1)
    with torch.no_grad():
        for gp, tp in zip(g.state_dict().values(), t.state_dict().values()):
            if gp.dtype.is_floating_point:
                d = rng.standard_normal(tuple(gp.shape))
                gp.copy_(gp + gm.tensor(d, dtype=gp.dtype))
                tp.copy_(tp + torch.tensor(d, dtype=tp.dtype))
            else:
                gp.copy_(gp + 1)
                tp.copy_(tp + 1)


def _ema_avg(decay):
    return lambda avg, p, n: decay * avg + (1 - decay) * p


@pytest.mark.parametrize("kw", ["swa", "ema_avg_fn_buffers", "ema_multi", "swa_multi"])
def test_averaged_model_matches_torch(kw):
    make = {"swa": lambda M: {}, "ema_avg_fn_buffers": lambda M: dict(avg_fn=_ema_avg(0.9), use_buffers=True),
            "ema_multi": lambda M: dict(multi_avg_fn=M.get_ema_multi_avg_fn(0.8)),
            "swa_multi": lambda M: dict(multi_avg_fn=M.get_swa_multi_avg_fn())}[kw]
    g, t = _pair()
    ga, ta = S.AveragedModel(g, **make(S)), TS.AveragedModel(t, **make(TS))
    assert list(ga.state_dict()) == list(ta.state_dict())
    for step in range(4):
        _perturb(g, t, step)
        ga.update_parameters(g)
        ta.update_parameters(t)
    for (k, a), b in zip(ga.state_dict().items(), ta.state_dict().values()):
        np.testing.assert_allclose(a.detach().numpy().astype(np.float64), b.detach().numpy().astype(np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=k)
    assert int(ga.n_averaged.item()) == 4
    x = np.random.default_rng(9).standard_normal((2, 2, 5, 5)).astype(np.float32)
    ga.eval()
    ta.eval()
    np.testing.assert_allclose(ga(gm.tensor(x)).detach().numpy(), ta(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_torchvision_style_subclass():
    class ExponentialMovingAverage(S.AveragedModel):  # references/classification/utils.py
        def __init__(self, model, decay, device="cpu"):
            def ema_avg(avg_model_param, model_param, num_averaged):
                return decay * avg_model_param + (1 - decay) * model_param
            super().__init__(model, device, ema_avg, use_buffers=True)

    g, _ = _pair()
    ema = ExponentialMovingAverage(g, decay=0.5)
    w0 = g[0].weight.detach().numpy().copy()
    ema.update_parameters(g)
    with gm.no_grad():
        g[0].weight.copy_(g[0].weight + 2.0)
    ema.update_parameters(g)
    np.testing.assert_allclose(ema.module[0].weight.detach().numpy(), w0 + 1.0, rtol=1e-6)


def test_update_bn_matches_torch():
    g, t = _pair()
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 2, 6, 6)).astype(np.float32) for _ in range(3)]
    S.update_bn([(gm.tensor(x), 0) for x in xs], g)
    TS.update_bn([(torch.tensor(x), 0) for x in xs], t)
    for k in ("1.running_mean", "1.running_var"):
        np.testing.assert_allclose(g.state_dict()[k].numpy(), t.state_dict()[k].numpy(), rtol=1e-5, atol=1e-6)
    assert g[1].momentum == t[1].momentum == 0.1


@pytest.mark.parametrize("kw", [dict(swa_lr=0.05), dict(swa_lr=[0.01, 0.2], anneal_epochs=3, anneal_strategy="linear"),
                                dict(swa_lr=0.1, anneal_epochs=0)])
def test_swalr_matches_torch(kw):
    go = gm.optim.SGD([{"params": [gm.zeros(1, requires_grad=True)], "lr": lr} for lr in (0.5, 0.1)], lr=1.0)
    to = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in (0.5, 0.1)], lr=1.0)
    gs, ts = S.SWALR(go, **kw), TS.SWALR(to, **kw)
    for _ in range(15):
        assert gs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
        to.step()
        gs.step()
        ts.step()
    assert set(gs.state_dict()) == set(ts.state_dict())


def test_errors_like_torch():
    g, _ = _pair()
    with pytest.raises(AssertionError, match="Only one of avg_fn"):
        S.AveragedModel(g, avg_fn=_ema_avg(0.9), multi_avg_fn=S.get_ema_multi_avg_fn())
    with pytest.raises(ValueError, match="Invalid decay value 2"):
        S.get_ema_avg_fn(2)
    opt = gm.optim.SGD([gm.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        S.SWALR(opt, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs"):
        S.SWALR(opt, 0.1, anneal_epochs=-1)
