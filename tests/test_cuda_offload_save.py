"""gm.save / gm.load of an offloaded optimizer's state (issue 15 item 2: "state_dict() and gm.save are unchanged
for the user"): the state lives in pinned host memory and saves as any CPU tensor does; loaded into a fresh
offloading optimizer, or into a plain one on the device, training continues exactly as it would have. On CUDA (a
GPU, or the emulator of a GPUMEMNET_CUDA=emu build)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from cuda_util import requires_cuda, to_np

pytestmark = requires_cuda
DEV = "cuda"


def _net():
    gm.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 2)).to(DEV)


def _data():
    rng = np.random.default_rng(3)
    return (gm.tensor(rng.standard_normal((5, 6)).astype(np.float32)).to(DEV),
            gm.tensor(rng.standard_normal((5, 2)).astype(np.float32)).to(DEV))


def _train(model, opt, steps):
    x, y = _data()
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()


@pytest.mark.parametrize("make", [lambda ps, **k: gm.optim.Adam(ps, lr=1e-2, amsgrad=True, **k),
                                  lambda ps, **k: gm.optim.SGD(ps, lr=1e-2, momentum=0.9, **k)],
                         ids=["adam_amsgrad", "sgd_momentum"])
@pytest.mark.parametrize("overlap", [False, True], ids=["sync", "overlap"])
def test_gm_save_and_load_round_trip_offloaded_state(tmp_path, make, overlap):
    ref = _net()
    ref_opt = make(ref.parameters(), offload="cpu")
    _train(ref, ref_opt, 4)  # the run without a save: 4 steps
    model = _net()
    opt = make(model.parameters(), offload="cpu").overlap_grad_copies(overlap)
    _train(model, opt, 2)
    # gm.save takes CPU tensors: the model's are moved; the optimizer's state is host memory already, as is
    gm.save({k: v.cpu() for k, v in model.state_dict().items()}, tmp_path / "model.safetensors")
    gm.save(opt.state_dict(), tmp_path / "opt.safetensors")
    sd = gm.load(tmp_path / "opt.safetensors")
    assert sd["state"].keys() == opt.state_dict()["state"].keys()
    # a fresh process's view: a new model and optimizer, loaded, continue where the first left off
    model2 = _net()
    model2.load_state_dict(gm.load(tmp_path / "model.safetensors"))
    opt2 = make(model2.parameters(), offload="cpu").overlap_grad_copies(overlap)
    opt2.load_state_dict(sd)
    _train(model2, opt2, 2)
    # and a plain optimizer on the device takes the same file
    model3 = _net()
    model3.load_state_dict(gm.load(tmp_path / "model.safetensors"))
    opt3 = make(model3.parameters())
    opt3.load_state_dict(gm.load(tmp_path / "opt.safetensors"))
    _train(model3, opt3, 2)
    for (n, a), b, c in zip(ref.named_parameters(), model2.parameters(), model3.parameters()):
        np.testing.assert_array_equal(to_np(b), to_np(a), err_msg=n)
        np.testing.assert_array_equal(to_np(c), to_np(a), err_msg=n)
