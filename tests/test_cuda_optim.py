"""CUDA optimizer steps (kernels/cuda/optim.cu: multi-tensor SGD, Adam, AdamW) against the CPU kernels from the
same start: every option, several steps, parameters of different sizes (crossing the kernels' chunk boundaries)
and dtypes in one group, groups larger than one launch's table, bit-identical results (both backends round every
operation the same way), nothing allocated by a step, device errors; then the Python optimizers end to end."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.optim as optim
from gpumemnet import _C

from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda

F32, F64, F16, BF16 = range(4)
NP = {F32: np.float32, F64: np.float64, F16: np.float16, BF16: np.float32}
# sizes cross the chunk size (1000 elements in the emulator, 65536 on a GPU) and include an empty tensor
SIZES = [1, 7, 0, 1000, 2501, 70000]
DTYPES = [F32, F64, F16, BF16, F32, F16]


def T(a, dtype, device):
    return _C.from_numpy(np.asarray(a, NP[dtype]), dtype=dtype, device=device)


def N(t):
    if t._dtype == BF16:
        f = _C.empty(t.shape, F32, "cpu")
        _C.copy_(f, t.cpu())
        return np.array(f.numpy())
    return np.array(t.cpu().numpy())


class Run:
    """A group of parameters with state on one device, stepped with the same gradients as its twin."""

    def __init__(self, device, sizes, dtypes, seed, states):
        rng = np.random.default_rng(seed)
        self.device, self.dtypes = device, dtypes
        self.p = [T(rng.standard_normal(n), dt, device) for n, dt in zip(sizes, dtypes)]
        self.grad_seed = seed + 1
        self.state = {k: [T(np.zeros(n), dt, device) for n, dt in zip(sizes, dtypes)] for k in states}
        self.sizes = sizes

    def grads(self, step):
        rng = np.random.default_rng(self.grad_seed + 1000 * step)
        return [T(rng.standard_normal(n) * 3, dt, self.device) for n, dt in zip(self.sizes, self.dtypes)]

    def tensors(self):
        return self.p + [t for k in sorted(self.state) for t in self.state[k]]


def assert_same_runs(rg, rc):
    for tg, tc in zip(rg.tensors(), rc.tensors()):
        assert tg._device.startswith("cuda")
        np.testing.assert_array_equal(N(tg), N(tc))


ADAM_OPTS = [dict(), dict(weight_decay=0.1), dict(weight_decay=0.1, decoupled=True), dict(amsgrad=True),
             dict(maximize=True, amsgrad=True, decoupled=True, weight_decay=0.01), dict(beta1=0.3, eps=1e-3)]


@pytest.mark.parametrize("opts", ADAM_OPTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_adam_steps_are_bit_identical_to_the_cpu(opts):
    opts = dict(opts)
    ams = opts.pop("amsgrad", False)
    decoupled = opts.pop("decoupled", False)
    h = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, maximize=False)
    h.update(opts)
    states = ["m", "v"] + (["vmax"] if ams else [])
    runs = [Run(dev, SIZES, DTYPES, 7, states) for dev in ("cuda:0", "cpu")]
    for step in range(1, 4):
        for r in runs:
            _C.adam_step_(r.p, r.grads(step), r.state["m"], r.state["v"], r.state["vmax"] if ams else None,
                          [step] * len(r.p), h["lr"], h["beta1"], h["beta2"], h["eps"], h["weight_decay"],
                          decoupled, ams, h["maximize"])
    assert_same_runs(*runs)


SGD_OPTS = [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True, weight_decay=0.01),
            dict(momentum=0.5, dampening=0.3, maximize=True), dict(weight_decay=0.1, maximize=True)]


@pytest.mark.parametrize("opts", SGD_OPTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_sgd_steps_are_bit_identical_to_the_cpu(opts):
    h = dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False)
    h.update(opts)
    use_buf = h["momentum"] != 0
    runs = [Run(dev, SIZES, DTYPES, 11, ["buf"]) for dev in ("cuda:0", "cpu")]
    for step in range(1, 4):
        for r in runs:
            _C.sgd_step_(r.p, r.grads(step), r.state["buf"] if use_buf else None,
                         [step == 1] * len(r.p) if use_buf else None, 0.05, h["momentum"], h["dampening"],
                         h["weight_decay"], h["nesterov"], h["maximize"])
    assert_same_runs(*runs)


def test_groups_larger_than_one_launch():
    # 130 tensors: more than one kernel's table holds (Adam 48, SGD 64), so several launches per dtype
    sizes, dtypes = [3 + i % 5 for i in range(130)], [F32 if i % 3 else F16 for i in range(130)]
    runs = [Run(dev, sizes, dtypes, 3, ["m", "v", "buf"]) for dev in ("cuda:0", "cpu")]
    for step in (1, 2):
        for r in runs:
            g = r.grads(step)
            _C.adam_step_(r.p, g, r.state["m"], r.state["v"], None, [step] * 130, 1e-2, 0.9, 0.99, 1e-8)
            _C.sgd_step_(r.p, g, r.state["buf"], [step == 1] * 130, 0.1, 0.9)
    assert_same_runs(*runs)


def test_per_parameter_step_counts():
    # bias corrections follow each parameter's own step count
    runs = [Run(dev, [5, 9], [F32, F32], 5, ["m", "v"]) for dev in ("cuda:0", "cpu")]
    for r in runs:
        _C.adam_step_(r.p, r.grads(1), r.state["m"], r.state["v"], None, [1, 7], 1e-2, 0.9, 0.999)
    assert_same_runs(*runs)


def test_a_step_allocates_nothing_on_cuda():
    r = Run("cuda:0", SIZES, DTYPES, 1, ["m", "v", "vmax", "buf"])
    g = r.grads(1)
    mem = gm.memory
    before = mem.memory_allocated("cuda:0")
    mem.reset_peak_memory_stats("cuda:0")
    _C.adam_step_(r.p, g, r.state["m"], r.state["v"], r.state["vmax"], [1] * len(r.p), 1e-3, 0.9, 0.999,
                  amsgrad=True)
    _C.sgd_step_(r.p, g, r.state["buf"], [True] * len(r.p), 0.1, 0.9)
    assert mem.max_memory_allocated("cuda:0") == before


def test_non_contiguous_parameter_goes_through_a_copy():
    def run(dev):
        w = T(np.arange(12.0).reshape(3, 4), F32, dev)._transpose(0, 1)
        g = T(np.ones((4, 3)), F32, dev)
        _C.sgd_step_([w], [g], None, None, 0.5)
        return w

    np.testing.assert_array_equal(N(run("cuda:0")._transpose(0, 1)), N(run("cpu")._transpose(0, 1)))


def test_mixing_devices_is_a_clear_error():
    pg, pc = T(np.zeros(3), F32, "cuda:0"), T(np.zeros(3), F32, "cpu")
    with pytest.raises(RuntimeError, match=r"params\[1\] is on cpu but params\[0\] is on cuda:0"):
        _C.sgd_step_([pg, pc], [T(np.zeros(3), F32, "cuda:0"), T(np.zeros(3), F32, "cpu")], None, None, 0.1)
    with pytest.raises(RuntimeError, match=r"grads\[0\] is on cpu but params\[0\] is on cuda:0"):
        _C.sgd_step_([T(np.zeros(3), F32, "cuda:0")], [pc], None, None, 0.1)
    with pytest.raises(RuntimeError, match=r"exp_avgs\[0\] is on cpu"):
        _C.adam_step_([pg], [T(np.zeros(3), F32, "cuda:0")], [pc], [T(np.zeros(3), F32, "cuda:0")], None, [1],
                      1e-3, 0.9, 0.999)


# ---- the Python optimizers end to end ------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=1e-2), lambda ps: optim.AdamW(ps, lr=1e-2),
                                  lambda ps: optim.Adam(ps, lr=1e-2, amsgrad=True, weight_decay=0.1),
                                  lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
                                  lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)],
                         ids=["adam", "adamw", "adam-amsgrad-wd", "sgd-nesterov", "sgd-momentum-wd"])
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
