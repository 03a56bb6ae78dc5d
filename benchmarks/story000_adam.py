"""Story 000's network, one fp32 training step at batch 1, predicted on meta against the story's 15.92 GiB card:
with gpumemnet's fused Adam, and with a PyTorch-style Adam (gm.memory.TorchStyleAdam: the single-tensor loop of
PyTorch 1.5-1.7 that the story's traceback shows, weight decay on: a gradient copy, the sqrt temporary and the
quotient per parameter). Nothing real is allocated; it runs in about a second on a laptop.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/story000_adam.py
"""
import functools
import time

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F

GiB = 1 << 30
CARD = int(15.92 * GiB)  # "GPU 0; 15.92 GiB total capacity"


class Story000(nn.Module):
    """The torchsummary table of the story: eight 3x3 convolutions, five 2x2 max pools, Dropout2d, two huge
    Linear layers (fc1: 583.7M parameters, fc2: 361.0M), input 2 x 384 x 160."""

    def __init__(self):
        super().__init__()
        widths = [(2, 64), (64, 128), (128, 256), (256, 256), (256, 512), (512, 512), (512, 512), (512, 512)]
        for i, (a, b) in enumerate(widths, 1):
            setattr(self, f"conv{i}", nn.Conv2d(a, b, 3, padding=1, device="meta"))
        self.pool = nn.MaxPool2d(2, 2)
        self.dropout = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(512 * 12 * 5, 19000, device="meta")
        self.fc2 = nn.Linear(19000, 19000, device="meta")

    def forward(self, x):
        r, p = F.relu, self.pool
        x = p(r(self.conv1(x)))
        x = p(r(self.conv2(x)))
        x = p(r(self.conv4(r(self.conv3(x)))))
        x = p(r(self.conv6(r(self.conv5(x)))))
        x = p(r(self.conv8(r(self.conv7(x)))))
        return self.fc2(r(self.fc1(self.dropout(x).flatten(1))))


def main():
    model = Story000()
    rows = [("gpumemnet fused Adam", None),
            ("PyTorch-style Adam (weight_decay)", functools.partial(gm.memory.TorchStyleAdam, weight_decay=1e-4))]
    print(f"story-000 net, fp32, batch 1, one training step with Adam's first step; card {CARD / GiB:.2f} GiB")
    for name, opt in rows:
        t = time.perf_counter()
        est = gm.memory.estimate(model, (1, 2, 384, 160), optimizer=opt)
        dt = time.perf_counter() - t
        print(f"  {name:36s} predicted peak {est.total / GiB:6.2f} GiB (in {est.peak_scope}): "
              f"{est.verdict(CARD)}   [estimate took {dt:.2f} s]")


if __name__ == "__main__":
    main()
