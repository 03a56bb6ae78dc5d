"""The training-loop helpers on CUDA against the CPU: clip_grad_norm_ / clip_grad_value_ on CUDA gradients (the
norm stays on the device), nn.init's host-computed initialisations written into CUDA tensors, and the same
generator draws as on the CPU."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.nn import init
from gpumemnet.nn import utils as U

from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
def test_clip_grad_norm_on_cuda_matches_cpu(norm_type):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s) for s in [(30, 20), (7,), (3, 3, 3)]]
    out = {}
    for dev in ("cuda:0", "cpu"):
        ps = [gm.zeros(*g.shape, device=dev, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = gm.tensor(g, dtype=gm.float32).to(dev)
        total = U.clip_grad_norm_(ps, 0.5, norm_type)
        assert total.device.type == dev.split(":")[0]
        U.clip_grad_value_(ps, 0.01)
        out[dev] = (total, ps)
    assert_close(out["cuda:0"][0], out["cpu"][0])
    for a, b in zip(out["cuda:0"][1], out["cpu"][1]):
        assert_close(a.grad, b.grad)


@pytest.mark.parametrize("fn,shape,args", [("orthogonal_", (12, 20), ()), ("trunc_normal_", (500,), (0.0, 0.5)),
                                           ("eye_", (4, 6), ()), ("dirac_", (4, 2, 3, 3), ()),
                                           ("sparse_", (10, 4), (0.3,))])
def test_init_on_cuda_matches_cpu(fn, shape, args):
    res = {}
    for dev in ("cuda:0", "cpu"):
        gm.manual_seed(11)
        t = gm.empty(*shape, device=dev)
        assert getattr(init, fn)(t, *args) is t
        res[dev] = t
    assert_close(res["cuda:0"], res["cpu"], rtol=1e-6, atol=1e-6)
