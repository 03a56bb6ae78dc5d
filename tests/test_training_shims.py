"""Small PyTorch names training scripts touch: gm.utils.model_zoo.load_url (no network: NotImplementedError, as
gm's hub), nn.DataParallel as a one-device pass-through with PyTorch's "module." state_dict keys,
gm.backends.cudnn's flags, and gm.compile returning the model unchanged."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn

torch = pytest.importorskip("torch")


def test_model_zoo_load_url_says_no_network():
    from gpumemnet.utils import model_zoo
    with pytest.raises(NotImplementedError, match="does not download"):
        model_zoo.load_url("https://download.pytorch.org/models/resnet18-f37072fd.pth", progress=False)
    import torch.utils.model_zoo as tz
    assert model_zoo.load_url.__name__ == tz.load_url.__name__


def _pair():
    gm.manual_seed(0)
    g = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
    t = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(4 * 6 * 6, 2))
    return g, t


def test_data_parallel_is_a_pass_through_with_torch_keys():
    g, t = _pair()
    dg, dt = nn.DataParallel(g), torch.nn.DataParallel(t)
    assert nn.parallel.DataParallel is nn.DataParallel
    assert dg.module is g
    # the attributes are PyTorch's on this machine (without CUDA: device_ids [] and no output_device / dim)
    for name in ("device_ids", "output_device", "dim"):
        assert getattr(dg, name, "absent") == getattr(dt, name, "absent"), name
    assert list(dg.state_dict()) == list(dt.state_dict())
    assert [n for n, _ in dg.named_parameters()] == [n for n, _ in dt.named_parameters()]
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    dg.eval()
    np.testing.assert_array_equal(dg(gm.tensor(x)).detach().numpy(), g(gm.tensor(x)).detach().numpy())
    # a checkpoint of a DataParallel model loads into another DataParallel model (the keys match)
    dg2 = nn.DataParallel(_pair()[0], device_ids=[0], output_device=0)
    dg2.load_state_dict(dg.state_dict())
    dt2 = torch.nn.DataParallel(_pair()[1], device_ids=[0], output_device=0)
    assert [getattr(dg2, n, "absent") for n in ("device_ids", "output_device")] == \
        [getattr(dt2, n, "absent") for n in ("device_ids", "output_device")]
    assert nn.parallel.data_parallel(g, gm.tensor(x)).shape == (2,) + tuple(g(gm.tensor(x)).shape[1:])
    dg2.eval()
    np.testing.assert_array_equal(dg2(gm.tensor(x)).detach().numpy(), dg(gm.tensor(x)).detach().numpy())
    loss = dg(gm.tensor(x)).sum()
    loss.backward()
    assert g[0].weight.grad is not None
    with pytest.raises(TypeError, match="nn.Module"):
        nn.DataParallel(lambda x: x)


def test_cudnn_flags():
    import gpumemnet.backends.cudnn as cudnn
    assert gm.backends.cudnn is cudnn
    for name in ("benchmark", "deterministic", "enabled", "allow_tf32"):
        assert type(getattr(cudnn, name)) is type(getattr(torch.backends.cudnn, name))
    assert (cudnn.benchmark, cudnn.deterministic, cudnn.enabled) == (False, False, True)
    cudnn.benchmark = True
    try:
        assert gm.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=True, benchmark=False, deterministic=True):
            assert cudnn.deterministic and not cudnn.benchmark
        assert cudnn.benchmark and not cudnn.deterministic
    finally:
        cudnn.benchmark = False
    built = gm._C._build_info()["cudnn"]
    assert cudnn.is_available() is (built is not None)
    if built is None:
        assert cudnn.version() is None
    else:
        major, minor, patch = (int(v) for v in built.split("."))
        assert cudnn.version() == major * 10000 + minor * 100 + patch
    assert cudnn.is_acceptable(gm.zeros(2)) is False  # a CPU tensor


def test_compile_wraps_the_model_as_pytorch_does():
    """A module comes back in PyTorch's OptimizedModule (state_dict keys with `_orig_mod.`), run as it is; a
    function comes back unchanged."""
    g, _ = _pair()
    c = gm.compile(g)
    assert c._orig_mod is g and all(k.startswith("_orig_mod.") for k in c.state_dict())
    x = gm.randn(2, 3, 8, 8)
    assert gm.equal(c(x), g(x))
    assert gm.compile(g, mode="max-autotune", fullgraph=True, dynamic=False, backend="inductor")._orig_mod is g
    assert gm.compile(g, disable=True) is g

    @gm.compile(mode="reduce-overhead")
    def f(x):
        return x + 1

    assert f(1) == 2
    assert gm.compile(f) is f


# A training script in the style of torchvision's reference train.py, run unchanged under the torch alias: the
# names of this slice resolve and work together (cudnn flags, init, DataParallel, compile, RMSprop, warm-up +
# cosine SequentialLR, a sampler and workers, default_collate from torch.utils.data.dataloader, clipping).
SCRIPT = """
import gpumemnet as gm
gm.as_torch()
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
from torch.utils.data.dataloader import default_collate
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset
cudnn.benchmark = True
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 4))
for m in model.modules():
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    elif isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02); nn.init.zeros_(m.bias)
model = torch.nn.DataParallel(model)
model = torch.compile(model)
opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4, eps=0.0316, alpha=0.9)
main = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=2)
sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[warm, main], milestones=[2])
x = torch.randn(32, 3, 8, 8); y = (torch.rand(32) * 4).long()
ds = TensorDataset(x, y)
dl = DataLoader(ds, batch_size=8, sampler=RandomSampler(ds), num_workers=2, pin_memory=False, drop_last=True,
                collate_fn=default_collate, persistent_workers=True)
crit = nn.CrossEntropyLoss()
lrs = []
for epoch in range(3):
    for xb, yb in dl:
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    sched.step()
    lrs.append(sched.get_last_lr()[0])
import gpumemnet.dropin as d
print(repr((lrs, list(model.state_dict())[:2], d.missing_names(), float(loss))))
"""


def test_reference_style_script_runs_under_the_alias(tmp_path):
    import ast
    import os
    import subprocess
    import sys
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(gm.__file__)))
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lrs, keys, missing, loss = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    # PyTorch's keys for torch.compile(DataParallel(model)): the wrapper's prefix, then DataParallel's
    assert missing == [] and keys == ["_orig_mod.module.0.weight", "_orig_mod.module.0.bias"]
    o = torch.optim.RMSprop([torch.zeros(1, requires_grad=True)], lr=0.01)
    s = torch.optim.lr_scheduler.SequentialLR(o, [torch.optim.lr_scheduler.LinearLR(o, 0.01, total_iters=2),
                                                  torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=8)], [2])
    want = []
    for _ in range(3):
        o.step()
        s.step()
        want.append(s.get_last_lr()[0])
    assert lrs == pytest.approx(want, rel=1e-12)
    assert loss == loss  # finite training
