"""gpumemnet.optim.lr_scheduler against torch.optim.lr_scheduler: the same construction on both sides, the lr (and
the cycled momentum / beta1) of every group compared over many steps, state_dict round trips, and the errors."""
import math

import pytest

import gpumemnet as gm
from gpumemnet import optim
from gpumemnet.optim import lr_scheduler as gsched

torch = pytest.importorskip("torch")
# The optimizers here only carry the lr: their steps have no gradients on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::gpumemnet.optim.NoGradientWarning")


def _gm_opt(kind="SGD", lrs=(0.1, 0.01)):
    groups = [{"params": [gm.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs]
    if kind == "Adam":
        return optim.Adam(groups, lr=1.0)
    return optim.SGD(groups, lr=1.0, momentum=0.9)


def _torch_opt(kind="SGD", lrs=(0.1, 0.01)):
    groups = [{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs]
    if kind == "Adam":
        return torch.optim.Adam(groups, lr=1.0)
    return torch.optim.SGD(groups, lr=1.0, momentum=0.9)


def _trace(opt, sched, steps, metric=None):
    """Per step: every group's lr and momentum-like value, and get_last_lr()."""
    out = []
    for i in range(steps):
        mom = [g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups]
        out.append(([g["lr"] for g in opt.param_groups], mom, list(sched.get_last_lr())))
        opt.step()
        if metric is None:
            sched.step()
        else:
            sched.step(metric(i))
    return out


def _compare(make, steps=60, kind="SGD", metric=None, rel=1e-12):
    """make(module, optimizer) -> scheduler, for both libraries."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to = _torch_opt(kind)
        want = _trace(to, make(torch.optim.lr_scheduler, to), steps, metric)
    go = _gm_opt(kind)
    got = _trace(go, make(gsched, go), steps, metric)
    for i, (w, g) in enumerate(zip(want, got)):
        for wl, gl in zip(w, g):
            for a, b in zip(wl, gl):
                if a is None or b is None:
                    assert a is b, (i, w, g)
                else:
                    assert float(b) == pytest.approx(float(a), rel=rel, abs=1e-15), (i, w, g)
    return go


CASES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.3),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.5),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.93),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=9),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.01, end_factor=0.9, total_iters=13),
    "LinearLR-defaults": lambda m, o: m.LinearLR(o),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=40, power=2.0),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=17, eta_min=1e-4),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95 if e % 2 else 0.99),
    "LambdaLR": lambda m, o: m.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)]),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=1e-5),
    "CosineAnnealingWarmRestarts-1": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=7),
    "CyclicLR": lambda m, o: m.CyclicLR(o, base_lr=0.001, max_lr=[0.1, 0.05], step_size_up=6, step_size_down=4),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(o, 0.001, 0.1, step_size_up=5, mode="triangular2"),
    "CyclicLR-exp_range": lambda m, o: m.CyclicLR(o, 0.001, 0.1, step_size_up=5, mode="exp_range", gamma=0.97,
                                                  cycle_momentum=False),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=[0.3, 0.1], total_steps=60),
    "OneCycleLR-three-linear": lambda m, o: m.OneCycleLR(o, max_lr=0.2, epochs=6, steps_per_epoch=10,
                                                         anneal_strategy="linear", three_phase=True,
                                                         pct_start=0.25, div_factor=10.0, final_div_factor=100.0),
    # torchvision's references/classification/train.py with --lr-warmup-method linear, --lr-scheduler cosineannealinglr
    "warmup+cosine": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.01, total_iters=5),
                                                     m.CosineAnnealingLR(o, T_max=50)], milestones=[5]),
    "warmup(constant)+step": lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, factor=0.1, total_iters=3),
                                                             m.StepLR(o, step_size=10, gamma=0.2)], milestones=[3]),
    "Sequential-3": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, total_iters=4), m.ExponentialLR(o, 0.9),
                                                    m.MultiStepLR(o, [10, 20])], milestones=[4, 20]),
    "Chained": lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.1, total_iters=4),
                                                m.ExponentialLR(o, gamma=0.9)]),
    "Chained-warmup-cosine": lambda m, o: m.ChainedScheduler([m.LinearLR(o, 0.05, total_iters=8),
                                                              m.CosineAnnealingLR(o, T_max=30)], optimizer=o),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lr_sequence_matches_torch(name):
    _compare(CASES[name], steps=60)


@pytest.mark.parametrize("name", ["OneCycleLR", "CyclicLR"])
def test_cycles_beta1_of_adam(name):
    _compare(CASES[name], steps=60, kind="Adam")


def test_one_cycle_past_total_steps_raises():
    opt = _gm_opt()
    s = gsched.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        s.step()
    with pytest.raises(ValueError, match="total steps is 3"):
        s.step()


@pytest.mark.parametrize("mode,threshold_mode,cooldown", [("min", "rel", 0), ("min", "abs", 2), ("max", "rel", 1),
                                                           ("max", "abs", 0)])
def test_reduce_lr_on_plateau_matches_torch(mode, threshold_mode, cooldown):
    metrics = [1.0, 0.9, 0.95, 0.95, 0.94, 0.96, 0.97, 0.5, 0.5, 0.5, 0.5, 0.5, 0.6, 0.4] * 4
    _compare(lambda m, o: m.ReduceLROnPlateau(o, mode=mode, factor=0.5, patience=2, threshold=0.01,
                                              threshold_mode=threshold_mode, cooldown=cooldown, min_lr=[1e-3, 1e-4]),
             steps=len(metrics), metric=lambda i: metrics[i])


def test_step_with_epoch_uses_closed_form():
    for name in ("StepLR", "MultiStepLR", "ExponentialLR", "LinearLR", "CosineAnnealingLR", "PolynomialLR",
                 "ConstantLR"):
        to, go = _torch_opt(), _gm_opt()
        ts, gs = CASES[name](torch.optim.lr_scheduler, to), CASES[name](gsched, go)
        for epoch in (3, 11, 2, 25):
            with pytest.warns(UserWarning):
                ts.step(epoch)
            with pytest.warns(UserWarning, match="deprecated"):
                gs.step(epoch)
            assert gs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12), name


def test_warm_restarts_fractional_epochs():
    to, go = _torch_opt(), _gm_opt()
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(to, T_0=3, T_mult=2)
    gs = gsched.CosineAnnealingWarmRestarts(go, T_0=3, T_mult=2)
    for i in range(40):
        e = i * 0.37
        ts.step(e)
        gs.step(e)
        assert gs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)


@pytest.mark.parametrize("name", ["warmup+cosine", "OneCycleLR", "CyclicLR", "MultiStepLR", "Chained",
                                  "CosineAnnealingWarmRestarts", "LambdaLR"])
def test_state_dict_resumes(name):
    """Half the run, save both state_dicts, rebuild in a fresh optimizer, load, and continue: the same lrs as an
    uninterrupted run. The keys are torch's."""
    opt = _gm_opt()
    sched = CASES[name](gsched, opt)
    for _ in range(20):
        opt.step()
        sched.step()
    sd, osd = sched.state_dict(), opt.state_dict()
    assert "optimizer" not in sd
    opt2 = _gm_opt()
    sched2 = CASES[name](gsched, opt2)
    opt2.load_state_dict(osd)
    sched2.load_state_dict(sd)
    for _ in range(20):
        opt.step()
        sched.step()
        opt2.step()
        sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()
    to = _torch_opt()
    tsd = CASES[name](torch.optim.lr_scheduler, to).state_dict()
    # torch also keeps the flag of its get_lr() warning (not a schedule state)
    assert set(sd) == set(tsd)


def test_plateau_state_dict_keys():
    opt, to = _gm_opt(), _torch_opt()
    assert set(gsched.ReduceLROnPlateau(opt).state_dict()) == \
        set(torch.optim.lr_scheduler.ReduceLROnPlateau(to).state_dict())


def test_errors_like_torch():
    opt = _gm_opt()
    with pytest.raises(ValueError, match="between 0 and 1"):
        gsched.ConstantLR(opt, factor=1.5)
    with pytest.raises(ValueError, match="greater than 0"):
        gsched.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Factor|factor"):
        gsched.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="unknown"):
        gsched.ReduceLROnPlateau(opt, mode="up")
    with pytest.raises(ValueError, match="min_lrs"):
        gsched.ReduceLROnPlateau(opt, min_lr=[0.1])
    with pytest.raises(ValueError, match="total_steps OR"):
        gsched.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="pct_start"):
        gsched.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=1)
    with pytest.raises(ValueError, match="T_0"):
        gsched.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="max_lr must have the same length"):
        gsched.CyclicLR(opt, 0.01, [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="mode is invalid"):
        gsched.CyclicLR(opt, 0.01, 0.1, mode="square")
    with pytest.raises(ValueError, match="momentum"):
        gsched.CyclicLR(_no_momentum_opt(), 0.01, 0.1)
    with pytest.raises(ValueError, match="one more"):
        gsched.SequentialLR(opt, [gsched.ExponentialLR(opt, 0.9)], milestones=[3])
    with pytest.raises(ValueError, match="same optimizer"):
        gsched.SequentialLR(opt, [gsched.ExponentialLR(_gm_opt(), 0.9)], milestones=[])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        gsched.ChainedScheduler([gsched.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="at least one"):
        gsched.ChainedScheduler([])


def _no_momentum_opt():
    class NoMomentum(optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, dict(lr=0.1))
    return NoMomentum([gm.zeros(1, requires_grad=True)])


def test_old_private_base_name():
    assert gsched._LRScheduler is gsched.LRScheduler
    assert math.isclose(gsched.StepLR(_gm_opt(), 3).get_last_lr()[0], 0.1)
