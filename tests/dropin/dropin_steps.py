"""The training the conformance suite runs, written as PyTorch code: every function takes the `torch` module it
runs on as an argument and uses nothing else, so the same lines run on real PyTorch and, under gpumemnet's alias
(gm.as_torch()), on gpumemnet. Nothing here imports torch or gpumemnet itself.

The loop is the one torchvision's reference scripts (references/classification/train.py,
references/segmentation/train.py) run: SGD with momentum 0.9 and weight decay 1e-4, CrossEntropyLoss with label
smoothing 0.1 (classification) or ignore_index=255 (segmentation), an LR scheduler stepped after each optimizer
step, then an evaluation forward under no_grad. Two deliberate departures, both applied identically on both sides:

- Dropout and StochasticDepth get p=0 after building: their masks come from each library's own generator, so two
  libraries can never draw the same ones. Batch norm stays in train mode, as it is.
- GoogLeNet and Inception v3 return their auxiliary logits in train mode; the reference script has no code for
  them, so the loss is the main loss plus 0.4 x each auxiliary loss (the papers' weighting). Segmentation models
  are built with aux_loss=True where they have one, and the loss is out + 0.5 x aux, as the segmentation
  reference script's criterion does.
"""
import time

import numpy as np

STEP_SECONDS = []  # wall time of each training step of the last train() (forward to optimizer step)


def build(torch, spec):
    """The model of spec (dropin_models.Spec), seeded, with dropout off (see the module's docstring)."""
    import torchvision
    torch.manual_seed(0)
    kwargs = dict(weights=None, num_classes=spec.classes)
    if spec.kind == "seg":
        kwargs.update(weights_backbone=None)
        if spec.aux:
            kwargs.update(aux_loss=True)
    kwargs.update(spec.kwargs)
    model = torchvision.models.get_model_builder(spec.name)(**kwargs)
    return model


def load_state(torch, model, arrays):
    """load_state_dict of {key: array}, with the module versions of the model's own state_dict (MNASNet's
    _load_from_state_dict refuses a state without them)."""
    own = model.state_dict()
    state = type(own)((k, torch.from_numpy(np.array(v))) for k, v in arrays.items())
    if hasattr(own, "_metadata"):
        state._metadata = own._metadata
    model.load_state_dict(state)


def no_dropout(torch, model):
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout) or type(m).__name__ == "StochasticDepth":
            m.p = 0.0
    return model


def batch(torch, spec, step, dtype):
    """Step `step`'s input and target, the same numbers in every process (NumPy's generator, not torch's)."""
    rng = np.random.default_rng(1000 + step)
    x = rng.standard_normal(spec.input).astype(np.float32)
    n, _, h, w = spec.input
    if spec.kind == "seg":
        y = rng.integers(0, spec.classes, size=(n, h, w))
    else:
        y = rng.integers(0, spec.classes, size=(n,))
    x = torch.from_numpy(x.astype(np.float64) if dtype == "float64" else x)
    return x, torch.from_numpy(y.astype(np.int64))


def criterion(torch, spec):
    """loss_fn(output, target) for the model's training-mode output (a tensor, a namedtuple or a dict)."""
    nn = torch.nn
    if spec.kind == "seg":
        ce = nn.CrossEntropyLoss(ignore_index=255)

        def seg_loss(out, y):
            loss = ce(out["out"], y)
            return loss + 0.5 * ce(out["aux"], y) if "aux" in out else loss
        return seg_loss
    ce = nn.CrossEntropyLoss(label_smoothing=0.1)

    def cls_loss(out, y):
        if isinstance(out, tuple):  # GoogLeNetOutputs / InceptionOutputs: (logits, aux...)
            loss = ce(out[0], y)
            for aux in out[1:]:
                if aux is not None:
                    loss = loss + 0.4 * ce(aux, y)
            return loss
        return ce(out, y)
    return cls_loss


def outputs(out):
    """{name: tensor} of a model's output, whatever its container."""
    if isinstance(out, dict):
        return dict(out)
    if isinstance(out, tuple):
        return {f"{i}": o for i, o in enumerate(out) if o is not None}
    return {"0": out}


def optimizer(torch, spec, params):
    return torch.optim.SGD(params, lr=spec.lr, momentum=0.9, weight_decay=1e-4)


def scheduler(torch, spec, opt, steps):
    sched = torch.optim.lr_scheduler
    if spec.kind == "seg":  # the segmentation reference's polynomial decay, as its LambdaLR wrote it
        return sched.LambdaLR(opt, lambda it: (1 - it / (steps + 1)) ** 0.9)
    if spec.scheduler == "step":
        return sched.StepLR(opt, step_size=1, gamma=0.5)
    return sched.CosineAnnealingLR(opt, T_max=steps + 1)


def to_numpy(t):
    """float64 stays float64; everything else (bfloat16, int64 counters) is compared as float32 (half the disk)."""
    t = t.detach()
    return t.numpy() if str(t.dtype).endswith("float64") else t.float().numpy()


def train(torch, spec, init, mode, steps, progress=None):
    """Run `steps` training steps and one eval forward; return ({key: array} to compare, the initial state).

    init: {state_dict key: array} to load (None: keep the seeded build and return its state).
    mode: "float32", "float64", "amp" (torch.autocast("cpu", bfloat16) + torch.amp.GradScaler("cpu")) or
    "cuda_amp" (the reference script's torch.cuda.amp.autocast() + torch.cuda.amp.GradScaler(), which on a machine
    without CUDA PyTorch disables with a warning: the run is a float32 run).
    progress: a list the stages reached are appended to (build, load, train, eval), to say where a failure was."""
    progress = [] if progress is None else progress
    progress.append("build")
    model = no_dropout(torch, build(torch, spec))
    state = None
    progress.append("load")
    if init is None:
        state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    else:
        load_state(torch, model, init)
    dtype = "float64" if mode == "float64" else "float32"
    if dtype == "float64":
        model.double()
    model.train()
    loss_fn = criterion(torch, spec)
    opt = optimizer(torch, spec, model.parameters())
    sched = scheduler(torch, spec, opt, steps)
    scaler = None
    if mode == "amp":
        amp_ctx = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
        scaler = torch.amp.GradScaler("cpu")
    elif mode == "cuda_amp":
        amp_ctx = lambda: torch.cuda.amp.autocast()  # noqa: E731
        scaler = torch.cuda.amp.GradScaler()
    else:
        amp_ctx = None
    got = {}
    progress.append("train")
    named = dict(model.named_parameters())
    STEP_SECONDS.clear()
    for step in range(steps):
        x, y = batch(torch, spec, step, dtype)
        t0 = time.perf_counter()
        opt.zero_grad()
        if amp_ctx is not None:
            with amp_ctx():
                out = model(x)
                loss = loss_fn(out, y)
        else:
            out = model(x)
            loss = loss_fn(out, y)
        for k, o in outputs(out).items():
            got[f"step{step}/out/{k}"] = to_numpy(o)
        got[f"step{step}/loss"] = np.array(loss.item())
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if step == 0:
            for k, p in named.items():
                if p.grad is not None:
                    got[f"grad/{k}"] = to_numpy(p.grad)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sched.step()
        STEP_SECONDS.append(time.perf_counter() - t0)  # includes the copies to NumPy, alike on both sides
    for k, v in model.state_dict().items():
        got[f"state/{k}"] = to_numpy(v)
    progress.append("eval")
    model.eval()
    x, _ = batch(torch, spec, steps, dtype)
    with torch.no_grad():
        for k, o in outputs(model(x)).items():
            got[f"eval/out/{k}"] = to_numpy(o)
    return got, state
