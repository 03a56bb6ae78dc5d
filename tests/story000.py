"""Story 000's network (../shared/seeds/000_*.txt) and the torchsummary table the story prints for it: what gm.nn
must reproduce (tests/test_nn_story.py), what the estimates and OOM predictions are tested on
(tests/test_estimate.py, tests/test_oom_predictions.py) and what the example prints (tests/test_examples.py)."""
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F

STORY_000_TABLE = """\
            Conv2d-1         [-1, 64, 384, 160]           1,216
         MaxPool2d-2          [-1, 64, 192, 80]               0
            Conv2d-3         [-1, 128, 192, 80]          73,856
         MaxPool2d-4          [-1, 128, 96, 40]               0
            Conv2d-5          [-1, 256, 96, 40]         295,168
            Conv2d-6          [-1, 256, 96, 40]         590,080
         MaxPool2d-7          [-1, 256, 48, 20]               0
            Conv2d-8          [-1, 512, 48, 20]       1,180,160
            Conv2d-9          [-1, 512, 48, 20]       2,359,808
        MaxPool2d-10          [-1, 512, 24, 10]               0
           Conv2d-11          [-1, 512, 24, 10]       2,359,808
           Conv2d-12          [-1, 512, 24, 10]       2,359,808
        MaxPool2d-13           [-1, 512, 12, 5]               0
        Dropout2d-14           [-1, 512, 12, 5]               0
           Linear-15                [-1, 19000]     583,699,000
           Linear-16                [-1, 19000]     361,019,000"""


def _build_story(self, m, widths=(64, 128, 256, 512), in_hw=(384, 160), hidden=19000, classes=19000,
                 device=None):
    """The network behind seed 000's torchsummary table: VGG-like 3x3 convolutions padded by 1 with ReLU applied
    functionally (torchsummary lists no ReLU rows), five 2x2 max pools, Dropout2d, and two huge Linear layers.
    Input 2 x 384 x 160 (the first row's output is 64 x 384 x 160). `m` is gpumemnet.nn or torch.nn, so that one
    definition serves both."""
    c1, c2, c3, c4 = widths
    convs = [(2, c1), (c1, c2), (c2, c3), (c3, c3), (c3, c4), (c4, c4), (c4, c4), (c4, c4)]
    for i, (a, b) in enumerate(convs, 1):
        setattr(self, f"conv{i}", m.Conv2d(a, b, kernel_size=3, padding=1, device=device))
    for i in range(1, 6):
        setattr(self, f"pool{i}", m.MaxPool2d(2, 2))
    self.dropout = m.Dropout2d(0.5)
    self.fc1 = m.Linear(c4 * (in_hw[0] // 32) * (in_hw[1] // 32), hidden, device=device)
    self.fc2 = m.Linear(hidden, classes, device=device)


def _story_forward(self, x, relu):
    x = self.pool1(relu(self.conv1(x)))
    x = self.pool2(relu(self.conv2(x)))
    x = self.pool3(relu(self.conv4(relu(self.conv3(x)))))
    x = self.pool4(relu(self.conv6(relu(self.conv5(x)))))
    x = self.pool5(relu(self.conv8(relu(self.conv7(x)))))
    x = self.dropout(x)
    return self.fc2(relu(self.fc1(x.flatten(1))))


class Story000(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        _build_story(self, nn, **kw)

    def forward(self, x):
        return _story_forward(self, x, F.relu)


def _torch_story(torch, **kw):
    class TorchStory000(torch.nn.Module):
        def __init__(self):
            super().__init__()
            _build_story(self, torch.nn, **kw)

        def forward(self, x):
            return _story_forward(self, x, torch.nn.functional.relu)
    return TorchStory000()
