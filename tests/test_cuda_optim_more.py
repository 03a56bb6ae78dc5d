"""CUDA RMSprop, Adagrad and Adadelta steps (kernels/cuda/optim.cu) against the CPU kernels from the same start:
every option, several steps, sizes crossing the chunk boundaries, all float dtypes in one group, groups larger
than one launch's table, bit-identical results, nothing allocated by a step; then the Python optimizers end to
end. The Run helpers are test_cuda_optim's."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.optim as optim
from gpumemnet import _C

from cuda_util import assert_close, requires_cuda
from test_cuda_optim import DTYPES, F16, F32, SIZES, Run, assert_same_runs

pytestmark = requires_cuda

RMSPROP_OPTS = [dict(), dict(momentum=0.9), dict(centered=True), dict(momentum=0.5, centered=True, maximize=True,
                                                                      weight_decay=0.1), dict(alpha=0.3, eps=1e-3)]


@pytest.mark.parametrize("opts", RMSPROP_OPTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_rmsprop_bit_identical_to_the_cpu(opts):
    h = dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, maximize=False)
    h.update(opts)
    runs = [Run(dev, SIZES, DTYPES, 5, ["sq", "buf", "ga"]) for dev in ("cuda:0", "cpu")]
    for step in range(1, 4):
        for r in runs:
            _C.rmsprop_step_(r.p, r.grads(step), r.state["sq"], r.state["buf"] if h["momentum"] > 0 else None,
                             r.state["ga"] if h["centered"] else None, h["lr"], h["alpha"], h["eps"],
                             h["weight_decay"], h["momentum"], h["centered"], h["maximize"])
    assert_same_runs(*runs)


@pytest.mark.parametrize("opts", [dict(), dict(lr_decay=0.1, weight_decay=0.1), dict(maximize=True, eps=1e-3)],
                         ids=["plain", "decay", "maximize"])
def test_adagrad_bit_identical_to_the_cpu(opts):
    h = dict(lr=1e-1, lr_decay=0.0, weight_decay=0.0, eps=1e-10, maximize=False)
    h.update(opts)
    runs = [Run(dev, SIZES, DTYPES, 9, ["sum"]) for dev in ("cuda:0", "cpu")]
    for step in range(1, 4):
        for r in runs:
            steps = [step + i % 3 for i in range(len(r.p))]  # per-parameter step counts
            _C.adagrad_step_(r.p, r.grads(step), r.state["sum"], steps, h["lr"], h["lr_decay"], h["weight_decay"],
                             h["eps"], h["maximize"])
    assert_same_runs(*runs)


@pytest.mark.parametrize("opts", [dict(), dict(rho=0.5, weight_decay=0.1), dict(maximize=True, eps=1e-3)],
                         ids=["plain", "rho-wd", "maximize"])
def test_adadelta_bit_identical_to_the_cpu(opts):
    h = dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False)
    h.update(opts)
    runs = [Run(dev, SIZES, DTYPES, 13, ["sq", "acc"]) for dev in ("cuda:0", "cpu")]
    for step in range(1, 4):
        for r in runs:
            _C.adadelta_step_(r.p, r.grads(step), r.state["sq"], r.state["acc"], h["lr"], h["rho"], h["eps"],
                              h["weight_decay"], h["maximize"])
    assert_same_runs(*runs)


def test_groups_larger_than_one_launch():
    sizes, dtypes = [3 + i % 5 for i in range(130)], [F32 if i % 3 else F16 for i in range(130)]
    runs = [Run(dev, sizes, dtypes, 3, ["sq", "buf", "ga", "sum", "acc"]) for dev in ("cuda:0", "cpu")]
    for step in (1, 2):
        for r in runs:
            g = r.grads(step)
            _C.rmsprop_step_(r.p, g, r.state["sq"], r.state["buf"], r.state["ga"], 1e-2, 0.9, 1e-8, 0.0, 0.9, True)
            _C.adagrad_step_(r.p, g, r.state["sum"], [step] * 130, 0.1, 0.0, 0.0, 1e-10)
            _C.adadelta_step_(r.p, g, r.state["sq"], r.state["acc"], 1.0, 0.9, 1e-6, 0.0)
    assert_same_runs(*runs)


def test_a_step_allocates_nothing_on_cuda():
    r = Run("cuda:0", SIZES, DTYPES, 1, ["sq", "buf", "ga", "sum", "acc"])
    g = r.grads(1)
    before = gm.memory.memory_allocated("cuda:0")
    gm.memory.reset_peak_memory_stats("cuda:0")
    _C.rmsprop_step_(r.p, g, r.state["sq"], r.state["buf"], r.state["ga"], 1e-2, 0.99, 1e-8, 0.0, 0.9, True)
    _C.adagrad_step_(r.p, g, r.state["sum"], [1] * len(r.p), 0.1, 0.0, 0.0, 1e-10)
    _C.adadelta_step_(r.p, g, r.state["sq"], r.state["acc"], 1.0, 0.9, 1e-6, 0.0)
    assert gm.memory.max_memory_allocated("cuda:0") == before


@pytest.mark.parametrize("make", [lambda ps: optim.RMSprop(ps, lr=1e-2, momentum=0.9, centered=True),
                                  lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
                                  lambda ps: optim.Adadelta(ps, weight_decay=0.01)],
                         ids=["rmsprop", "adagrad", "adadelta"])
def test_optimizers_match_cpu_over_several_steps(make):
    rng = np.random.default_rng(3)
    shapes, dtypes = [(4, 5), (300,), (3, 3, 3)], [gm.float32, gm.float32, gm.float16]
    x0 = [rng.standard_normal(s) for s in shapes]
    runs = {}
    for dev in ("cuda:0", "cpu"):
        ps = [gm.nn.Parameter(gm.tensor(x).to(dt).to(dev)) for x, dt in zip(x0, dtypes)]
        runs[dev] = (ps, make(ps))
    for step in range(4):
        grads = [rng.standard_normal(s) for s in shapes]
        for dev, (ps, opt) in runs.items():
            for p, g, dt in zip(ps, grads, dtypes):
                p.grad = gm.tensor(g).to(dt).to(dev)
            opt.step()
    for pg, pc in zip(runs["cuda:0"][0], runs["cpu"][0]):
        assert_close(pg, pc, exact=True)
