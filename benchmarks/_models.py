"""The benchmark's models and training steps, written as PyTorch code: every function takes the `torch` module it
runs on, so that the same lines run on real PyTorch and, under gpumemnet's alias (gm.as_torch()), on gpumemnet.
Nothing here imports torch or gpumemnet (the two cannot share a process; benchmarks/_worker.py picks one).

Models (what issue 14 compares):
  resnet18, mobilenet_v2   torchvision's own model files, 10 classes, batch 4 of 3x64x64, SGD as torchvision's
                           reference recipe (momentum 0.9, weight decay 1e-4)
  vgg11                    torchvision's vgg11 with a global-average-pool head (avgpool = AdaptiveAvgPool2d(1),
                           classifier = Linear(512, 10)), batch 4 of 3x64x64, SGD as above
  unet                     examples/seed002_unet.py's UNet (width 16, depth 3), batch 16 of 3x64x64, Adam
  digits                   gpumemnet/demo.py's digits CNN, batch 64 of 1x8x8, Adam
Modes: fp32; checkpoint (non-reentrant torch.utils.checkpoint over the model's stages); autocast (CPU: bfloat16,
CUDA: float16; with GradScaler, and two accumulated micro-batches for the torchvision models); eval (model.eval()
and a forward under no_grad).
"""
import ast
import os
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")
MODES = ("fp32", "checkpoint", "autocast", "eval")


@dataclass(frozen=True)
class Spec:
    input: tuple          # (N, C, H, W)
    target: str           # "class" (N,) or "mask" (N, H, W)
    classes: int
    optim: str            # "sgd" or "adam"
    accum: int            # micro-batches of the autocast mode


MODELS = {
    "resnet18": Spec((4, 3, 64, 64), "class", 10, "sgd", 2),
    "mobilenet_v2": Spec((4, 3, 64, 64), "class", 10, "sgd", 2),
    "vgg11": Spec((4, 3, 64, 64), "class", 10, "sgd", 2),
    "unet": Spec((16, 3, 64, 64), "mask", 3, "adam", 1),
    "digits": Spec((64, 1, 8, 8), "class", 10, "adam", 1),
}


def _from_source(path, names):
    """The named top-level functions of a Python file, without running the rest of it (examples/seed002_unet.py
    imports gpumemnet at its top, which the PyTorch worker must not)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    tree.body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    scope = {"np": np}
    exec(compile(tree, path, "exec"), scope)  # noqa: S102 - the repository's own example file
    return [scope[n] for n in names]


def _checkpoint(torch):
    def run(fn, *xs):
        return torch.utils.checkpoint.checkpoint(fn, *xs, use_reentrant=False)
    return run


def checkpointed(torch, module):
    """`module` whose forward is recomputed in backward (non-reentrant checkpoint), for torch's nn."""
    run = _checkpoint(torch)

    class Checkpointed(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            return run(self.inner, *xs) if self.training else self.inner(*xs)
    return Checkpointed(module)


def _grouped(torch, seq, groups):
    """A Sequential's children in `groups` contiguous checkpointed groups."""
    children = list(seq.children())
    bounds = np.linspace(0, len(children), groups + 1).round().astype(int)
    return torch.nn.Sequential(*[checkpointed(torch, torch.nn.Sequential(*children[a:b]))
                                 for a, b in zip(bounds[:-1], bounds[1:]) if b > a])


def build(torch, name):
    """The model `name`, seeded with torch.manual_seed(0), dropout off (two libraries' generators never draw the
    same masks)."""
    torch.manual_seed(0)
    nn = torch.nn
    if name in ("resnet18", "mobilenet_v2", "vgg11"):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None, num_classes=10)
        if name == "vgg11":
            model.avgpool = nn.AdaptiveAvgPool2d(1)
            model.classifier = nn.Linear(512, 10)
    elif name == "unet":
        (unet_class,) = _from_source(os.path.join(EXAMPLES, "seed002_unet.py"), ["unet_class"])
        model = unet_class(nn, torch.cat, _checkpoint(torch))(3, 3, 16, 3)
    elif name == "digits":  # gpumemnet/demo.py make_model(32, 10), GlobalAvgPool2d spelled as PyTorch spells it
        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                    nn.MaxPool2d(2)]
        model = nn.Sequential(*block(1, 16), *block(16, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    else:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def enable_checkpointing(torch, name, model):
    """Checkpoint the model's stages (after its state is loaded: the wrappers rename the state's keys)."""
    if name == "resnet18":
        for stage in ("layer1", "layer2", "layer3", "layer4"):
            setattr(model, stage, checkpointed(torch, getattr(model, stage)))
    elif name in ("mobilenet_v2", "vgg11"):
        model.features = _grouped(torch, model.features, 4)
    elif name == "unet":
        model.checkpointing = True
    elif name == "digits":
        children = list(model.children())
        model = torch.nn.Sequential(_grouped(torch, torch.nn.Sequential(*children[:8]), 2), *children[8:])
    return model


def load_state(torch, model, arrays):
    own = model.state_dict()
    state = type(own)((k, torch.from_numpy(np.array(v))) for k, v in arrays.items())
    if hasattr(own, "_metadata"):
        state._metadata = own._metadata
    model.load_state_dict(state)


def batch(name):
    """(x, y) as NumPy arrays, the same numbers in every process."""
    spec = MODELS[name]
    if name == "unet":
        (make_shapes,) = _from_source(os.path.join(EXAMPLES, "seed002_unet.py"), ["make_shapes"])
        return make_shapes(spec.input[0], spec.input[2], seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(spec.input).astype(np.float32)
    return x, rng.integers(0, spec.classes, spec.input[0]).astype(np.int64)


def make_step(torch, name, model, x, y, mode, device):
    """A closure running one step of `mode`; it returns the (first micro-batch's) loss as a tensor."""
    spec = MODELS[name]
    loss_fn = torch.nn.CrossEntropyLoss()
    if mode == "eval":
        model.eval()

        def evaluate():
            with torch.no_grad():
                return loss_fn(model(x), y)
        return evaluate
    model.train()
    if spec.optim == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    amp = mode == "autocast"
    micro = spec.accum if amp else 1
    size = x.shape[0] // micro
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    scaler = torch.amp.GradScaler(device) if amp else None

    def step():
        opt.zero_grad()
        first = None
        for i in range(micro):
            xb, yb = (x, y) if micro == 1 else (x[i * size:(i + 1) * size], y[i * size:(i + 1) * size])
            if amp:
                with torch.autocast(device, dtype=dtype):
                    loss = loss_fn(model(xb), yb)
                scaler.scale(loss / micro).backward()
            else:
                loss = loss_fn(model(xb), yb)
                loss.backward()
            first = loss.detach() if first is None else first
        if amp:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        return first
    step.optimizer = opt
    return step
