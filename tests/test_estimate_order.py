"""An estimate lays out the model's meta copy in the order its tensors were allocated, not in the order of
model.modules(): torchvision's ResNet makes each block's downsample before the block and registers it after, and
when parameters share the allocator's 20 MiB segments that order decides where the step's gradients and optimizer
state fit. In registration order the estimate of this bottleneck net was 917,504 bytes low (resnet152's: 3.4 MB)."""
import gc

import gpumemnet as gm
from gpumemnet import nn


class Bottleneck(nn.Module):
    def __init__(self, c, w, downsample):
        super().__init__()
        self.conv1 = nn.Conv2d(c, w, 1, bias=False)
        self.conv2 = nn.Conv2d(w, w, 3, padding=1, bias=False)  # 1.3 MB of weights: the allocator's large pool
        self.conv3 = nn.Conv2d(w, c, 1, bias=False)
        self.downsample = downsample  # made before the block, registered after it (as torchvision's _make_layer)

    def forward(self, x):
        return (self.conv3(self.conv2(self.conv1(x).relu()).relu()) + self.downsample(x)).relu()


def _net(c=768, w=192, blocks=6):
    layers = [Bottleneck(c, w, nn.Conv2d(c, c, 1, bias=False)) for _ in range(blocks)]
    return nn.Sequential(*layers, nn.GlobalAvgPool2d(), nn.Linear(c, 10))


def test_estimate_equals_measured_when_tensors_were_made_out_of_registration_order():
    gm.manual_seed(0)
    model = _net()
    x, y = gm.randn(2, 768, 4, 4), gm.tensor([1, 7])

    def make_opt(params):
        return gm.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4)

    est = gm.memory.estimate(model, (768, 4, 4), batch_size=2, loss_fn=nn.CrossEntropyLoss(), optimizer=make_opt,
                             target=y)
    opt = make_opt(model.parameters())
    gc.collect()
    gm.memory.empty_cache("cpu")
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    for step in range(3):  # the highest of three steps: the momentum buffers are live from the second on
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad()
        if step == 0:
            assert est.first_step_peak == gm.memory.max_memory_allocated("cpu") - base
    assert est.peak == gm.memory.max_memory_allocated("cpu") - base


def test_alloc_serial_counts_allocations_in_order():
    a = gm.empty(10)
    b = gm.empty(10)
    assert 0 < a._alloc_serial < b._alloc_serial
    assert a[2:]._alloc_serial == a._alloc_serial  # a view shares its storage's block
