"""Story 000: a VGG-style regression net whose two Linear layers hold 99% of its 953.9M parameters, the
"fix" that silently stopped it learning, and the global-pooling head that made it fit.

    python examples/seed000_regression.py           # channels / 8 at 2 x 96 x 64: trains on the CPU in seconds
    python examples/seed000_regression.py --full    # the story's network (2 x 384 x 160 -> 19000), on meta only
    python examples/seed000_regression.py --full --card 8GiB   # trains it on an 8 GiB card, by gm.memory.plan
    python examples/seed000_regression.py --full --card 6GiB   # story 002's 6 GiB laptop card (bf16 parameters)

What it prints:
  1. the torchsummary-style table of the story (Layer (type), Output Shape, Param #), from forward hooks;
  2. the peak memory, by category, of the first training step with Adam (the step where the story ran out of
     memory, inside Adam.step), and of a validation forward with and without no_grad (the story's first fix);
  3. the story's mistake: the training forward under no_grad() and the loss re-wrapped as a fresh leaf. gpumemnet
     says so: backward() on the graph-less loss raises, and optimizer.step() warns that nothing has a gradient;
  4. the correct loop, and the fix: a global average (or max) pool before one Linear instead of fc1 + fc2, side by
     side with the story's head (parameters, step peak, loss).
With --full nothing holds data: the network lives on the meta device, which runs every op's shape inference and
allocation (with the CPU allocator's policy) but no kernel, so its byte counts are what a real step would use,
without allocating 3.8 GB.

--card SIZE (8GiB, 6GiB, 1.5MiB, or bytes): the story's net does not fit such a card with Adam (14.25 GiB from its
second step on), so gm.memory.plan(..., device="cuda") chooses how to train it there, offload included: on 8 GiB
the optimizer's fp32 state moves to pinned host memory (Adam(offload="cpu"); 7.13 GiB on the device, 12.84 GiB on
the host), on 6 GiB the parameters are bfloat16 on the device too, with fp32 masters on the host (3.57 GiB on the
device). The steps
then run under gm.memory.set_limit(device, SIZE) on CUDA (a real GPU, or the emulator of a GPUMEMNET_CUDA=emu build)
or, without CUDA, on meta; it prints the planned and the measured device and host peaks.
"""
import argparse
import gc
import time
import warnings

import numpy as np

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet.optim import NoGradientWarning

GiB = 1 << 30


# ---- the network --------------------------------------------------------------------------------------------------
class Story000(nn.Module):
    """The network behind the story's table (tests/story000.py builds the same one): eight 3x3 convolutions padded
    by 1 with ReLU applied functionally (torchsummary lists no ReLU rows), five 2x2 max pools, Dropout2d, then
    the head. head="fc": fc1 (flattened features -> hidden) and fc2 (hidden -> outputs), the story's 583.7M and
    361.0M parameters; head="gap" / "gmp": a global average / max pool and one Linear (channels -> outputs)."""

    def __init__(self, widths=(64, 128, 256, 512), in_hw=(384, 160), outputs=19000, hidden=None, head="fc",
                 device=None):
        super().__init__()
        c1, c2, c3, c4 = widths
        convs = [(2, c1), (c1, c2), (c2, c3), (c3, c3), (c3, c4), (c4, c4), (c4, c4), (c4, c4)]
        for i, (a, b) in enumerate(convs, 1):
            setattr(self, f"conv{i}", nn.Conv2d(a, b, kernel_size=3, padding=1, device=device))
        for i in range(1, 6):
            setattr(self, f"pool{i}", nn.MaxPool2d(2, 2))
        self.dropout = nn.Dropout2d(0.5)
        self.head = head
        if head == "fc":
            self.fc1 = nn.Linear(c4 * (in_hw[0] // 32) * (in_hw[1] // 32), hidden or outputs, device=device)
            self.fc2 = nn.Linear(hidden or outputs, outputs, device=device)
        elif head in ("gap", "gmp"):
            self.gpool = nn.GlobalAvgPool2d() if head == "gap" else nn.GlobalMaxPool2d()
            self.fc = nn.Linear(c4, outputs, device=device)
        else:
            raise ValueError(f"Story000: head must be 'fc', 'gap' or 'gmp', got {head!r}")

    def forward(self, x):
        x = self.pool1(F.relu(self.conv1(x)))
        x = self.pool2(F.relu(self.conv2(x)))
        x = self.pool3(F.relu(self.conv4(F.relu(self.conv3(x)))))
        x = self.pool4(F.relu(self.conv6(F.relu(self.conv5(x)))))
        x = self.pool5(F.relu(self.conv8(F.relu(self.conv7(x)))))
        x = self.dropout(x)
        if self.head == "fc":
            return self.fc2(F.relu(self.fc1(x.flatten(1))))
        return self.fc(self.gpool(x))


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ---- the torchsummary table (gm.summary does not exist yet) ---------------------------------------------------------
def summary(model, input_size, device="cpu"):
    """torchsummary's table for one sample of `input_size` (C, H, W): every leaf module's call in call order,
    its output shape with the batch as -1, and its parameters. Returns the lines."""
    rows = []

    def hook(mod, args, out):
        if not mod._modules and mod is not model:
            shape = "[" + ", ".join(["-1"] + [str(s) for s in out.shape[1:]]) + "]"
            rows.append(f"{type(mod).__name__ + '-' + str(len(rows) + 1):>20}  {shape:>25} {n_params(mod):>15,}")
    handle = nn.register_module_forward_hook(hook)
    try:
        with gm.no_grad():
            model(gm.empty(1, *input_size, device=device))
    finally:
        handle.remove()
    total = n_params(model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rule, double = "-" * 64, "=" * 64
    return [rule, f"{'Layer (type)':>20}  {'Output Shape':>25} {'Param #':>15}", double, *rows, double,
            f"Total params: {total:,}", f"Trainable params: {trainable:,}",
            f"Non-trainable params: {total - trainable:,}", rule]


# ---- memory -------------------------------------------------------------------------------------------------------
def fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def first_step_memory(model, opt, x, y, device):
    """Peak allocated, and each category's peak, over the first training step (Adam's state is created in it,
    as in the story's OOM). Returns (loss, peak, {category: peak})."""
    gm.memory.reset_peak_memory_stats(device)
    loss = train_step(model, opt, x, y)
    stats = gm.memory.memory_stats(device)
    return loss, stats["allocated"]["peak"], {k: v["peak"] for k, v in stats["by_category"].items()}


def validation_peaks(model, x, device):
    """Peak above the resident bytes of one validation forward with grad enabled (every activation kept for a
    backward that never comes) and under no_grad (each freed as soon as the next layer has read it)."""
    out = {}
    model.eval()
    for name, ctx in (("with grad", gm.enable_grad), ("no_grad", gm.no_grad)):
        gm.memory.reset_peak_memory_stats(device)
        start = gm.memory.memory_allocated(device)
        with ctx():
            score = model(x)
        out[name] = gm.memory.max_memory_allocated(device) - start
        del score
    model.train()
    return out


# ---- data -----------------------------------------------------------------------------------------------------------
class Task:
    """Synthetic regression: channel c of an image is s_c times a fixed pattern plus noise, s ~ N(0, 1) per sample;
    the target is s_0 * M_0 + s_1 * M_1 for two fixed maps of `outputs` values (unit variance). It stands in for
    the story's image -> 19000-value regression: the memory of a step depends on the shapes only."""

    def __init__(self, height, width, outputs, seed=0):
        rng = np.random.default_rng(seed + 1000)
        yy, xx = np.mgrid[:height, :width] / max(height, width)
        self.patterns = np.stack([np.sin(6 * xx + 1), np.cos(5 * yy - 2 * xx)]).astype(np.float32)
        self.maps = (rng.standard_normal((2, outputs)) / np.sqrt(2)).astype(np.float32)
        self.shape = (2, height, width)

    def batch(self, rng, n):
        s = rng.standard_normal((n, 2)).astype(np.float32)
        x = s[:, :, None, None] * self.patterns + 0.1 * rng.standard_normal((n, *self.shape)).astype(np.float32)
        return gm.from_numpy(x), gm.from_numpy(s @ self.maps)


# ---- the story's mistake --------------------------------------------------------------------------------------------
def the_mistake(model, opt, x, y, log):
    """The story's "fix": forward under no_grad, loss re-wrapped as a fresh leaf. Returns what gpumemnet said."""
    log("\nthe story's \"fix\", with gm names:")
    log("    with gm.no_grad():\n        score = model(input); loss = criterion(score, target)\n"
        "    loss = gm.tensor(loss, requires_grad=True); loss.backward(); optimizer.step()")
    before = [p.detach().numpy().copy() for p in model.parameters()]
    opt.zero_grad()
    with gm.no_grad():
        score = model(x)
        loss = F.mse_loss(score, y)
    said = {}
    try:
        loss.backward()  # what the story did before re-wrapping: gpumemnet refuses
    except RuntimeError as e:
        said["backward_error"] = str(e)
        log(f"  loss.backward() on the no_grad loss -> RuntimeError: {str(e).split('. ')[0]}.")
    loss = gm.tensor(loss, requires_grad=True)  # Variable(loss, requires_grad=True)
    loss.backward()  # runs: the fresh leaf's gradient is 1, and it reaches nothing
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    warned = [w for w in caught if issubclass(w.category, NoGradientWarning)]
    said["warning"] = str(warned[0].message) if warned else None
    said["changed"] = any(not np.array_equal(a, p.detach().numpy()) for a, p in zip(before, model.parameters()))
    if warned:
        log(f"  optimizer.step() -> NoGradientWarning: {said['warning'][:160]}...")
    log(f"  parameters changed by the step: {said['changed']}")
    return said


def run_head(model, head, x, y, task, rng, args, full, device, result, log):
    """Validation peaks, the first training step's peaks, and (on the CPU) the loss over args.steps steps of one
    head; for the story's head also the mistake. The model dies with this call."""
    opt = gm.optim.Adam(model.parameters(), lr=args.lr)
    info = {"params": n_params(model)}
    info["validation"] = validation_peaks(model, x, device)
    t = time.perf_counter()
    loss, info["peak"], info["by_category"] = first_step_memory(model, opt, x, y, device)
    if not full:
        losses = [loss.item()]
        for _ in range(args.steps - 1):
            losses.append(train_step(model, opt, *task.batch(rng, x.shape[0])).item())
        info["losses"] = losses
        info["ms"] = (time.perf_counter() - t) * 1e3 / args.steps
    if head == "fc":
        fc_weight = model.fc1.weight.numel()
        log(f"\nfc1 holds {fc_weight:,} weights ({fmt(fc_weight * 4)} in float32: the story's 'Tried to "
            f"allocate 2.18 GiB' is this size at full scale); fc1 + fc2 are "
            f"{(fc_weight + model.fc2.weight.numel()) / info['params'] * 100:.0f}% of the parameters")
        if not full:
            result["mistake"] = the_mistake(model, opt, x, y, log)
    return info


# ---- a smaller card -------------------------------------------------------------------------------------------------
def parse_size(text):
    """'8GiB', '6 GiB', '1.5MiB', '512KiB' or a number of bytes -> bytes."""
    t = text.replace(" ", "")
    for unit, mult in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)):
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * mult)
    return int(t)


def card_run(build, shape, batch, outputs, card, args, log):
    """Plan the story's step for a CUDA card of `card` bytes, then run args.steps steps of it under that limit.
    Returns the plan's and the run's figures."""
    device = "cuda" if gm.cuda.is_available() else "meta"
    host = gm.memory.PINNED if device == "cuda" else gm.memory.META_HOST
    gc.collect()
    base = gm.memory.memory_allocated(device)  # the peaks below are the model's and its step's alone
    model = build("fc", device)
    plan = gm.memory.plan(model, shape, F.mse_loss, batch_size=batch, budget=card, device="cuda")
    log(f"\non a {fmt(card)} card: {plan}")
    model = plan.prepare(model)
    opt = plan.optimizer(model.parameters(), lr=args.lr)
    rng = np.random.default_rng(args.seed)
    gm.memory.set_limit(device, card)
    # On meta the ops allocate what they would on CUDA (as estimate(device="cuda") runs them): a CUDA linear on
    # bf16 takes no widened copies, where the CPU's does.
    prev_target = gm._C._set_meta_target("cuda")
    try:
        x = gm.empty(batch, *shape, device="meta") if device == "meta" else \
            gm.from_numpy(rng.standard_normal((batch, *shape)).astype(np.float32)).to(device)
        y = gm.empty(batch, outputs, device="meta") if device == "meta" else \
            gm.from_numpy(rng.standard_normal((batch, outputs)).astype(np.float32)).to(device)
        if plan.param_dtype is not None:  # the data in the parameters' dtype (Plan.step would convert it)
            x, y = x.to(plan.param_dtype), y.to(plan.param_dtype)
        gc.collect()
        gm.memory.reset_peak_memory_stats(device)
        gm.memory.reset_peak_memory_stats(host)
        host0 = gm.memory.memory_allocated(host)
        losses = [plan.step(x, y, opt) for _ in range(max(args.steps, 1))]
        dev_peak = gm.memory.max_memory_allocated(device) - base
        host_peak = gm.memory.max_memory_allocated(host) - host0
    finally:
        gm.memory.set_limit(device, None)
        gm._C._set_meta_target(*prev_target)
    log(f"  ran {len(losses)} steps on {device} under a limit of {fmt(card)}: device peak {fmt(dev_peak)} "
        f"(planned {fmt(plan.predicted_peak)}), host peak {fmt(host_peak)} (planned "
        f"{fmt(plan.predicted_host_peak)}), {fmt(plan.predicted_bytes_moved)} across the bus per step"
        + ("" if device == "meta" else f", loss {losses[0]:.4f} -> {losses[-1]:.4f}"))
    return {"device": device, "plan": plan, "device_peak": dev_peak, "host_peak": host_peak, "losses": losses}


# ---- main ---------------------------------------------------------------------------------------------------------
def main(argv=None, log=print):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="the story's sizes, on the meta device only")
    p.add_argument("--height", type=int, default=None, help="input height (a multiple of 32; default 96, full 384)")
    p.add_argument("--width", type=int, default=None, help="input width (a multiple of 32; default 64, full 160)")
    p.add_argument("--channel-div", type=int, default=None, help="divide the story's channels (default 8, full 1)")
    p.add_argument("--outputs", type=int, default=None, help="regression outputs (default height*width/4, full 19000)")
    p.add_argument("--batch-size", type=int, default=None, help="default 8, full 1 (the story's table)")
    p.add_argument("--steps", type=int, default=60, help="training steps of the correct loop (not with --full)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--head", choices=("gap", "gmp"), default="gap", help="the fix: global average or max pool")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--card", default=None, help="plan and train the story's net on a CUDA card of this size "
                   "(8GiB, 6GiB...): on CUDA when there is one, else on meta")
    args = p.parse_args(argv)
    full = args.full
    height = args.height or (384 if full else 96)
    width = args.width or (160 if full else 64)
    div = args.channel_div or (1 if full else 8)
    outputs = args.outputs or (19000 if full else height * width // 4)
    batch = args.batch_size or (1 if full else 8)
    if height % 32 or width % 32:
        p.error(f"--height and --width must be multiples of 32 (five 2x2 poolings), got {height}x{width}")
    device = "meta" if full else "cpu"
    widths = tuple(max(c // div, 1) for c in (64, 128, 256, 512))

    def build(head, where=device):
        gm.manual_seed(args.seed)
        return Story000(widths, (height, width), outputs, head=head, device=where)

    if args.card is not None:
        return card_run(build, (2, height, width), batch, outputs, parse_size(args.card), args, log)

    log(f"story 000: input 2 x {height} x {width}, {outputs} outputs, channels {widths}, batch {batch}, on "
        f"{device}" + (" (shapes and allocations only: no byte of data)" if full else ""))
    result = {"device": device}
    model = build("fc")
    table = summary(model, (2, height, width), device)
    for line in table:
        log(line)
    result["summary"] = table

    rng = np.random.default_rng(args.seed)
    task = None if full else Task(height, width, outputs, args.seed)
    if full:
        x, y = gm.empty(batch, 2, height, width, device="meta"), gm.empty(batch, outputs, device="meta")
    else:
        x, y = task.batch(rng, batch)

    del model
    heads = {}
    for head in ("fc", args.head):
        heads[head] = run_head(build(head), head, x, y, task, rng, args, full, device, result, log)
        gc.collect()  # the next head's peaks must not include this one's model
    result["heads"] = heads

    fix = args.head
    log(f"\nthe story's head (fc1 + fc2) beside the fix ({'GlobalAvgPool2d' if fix == 'gap' else 'GlobalMaxPool2d'}"
        f" + one Linear), Adam, first training step, batch {batch}:")
    log(f"  {'':<34}{'fc1 + fc2':>16}{fix + ' + Linear':>16}")
    rows = [("parameters", lambda h: f"{h['params']:,}"), ("peak allocated", lambda h: fmt(h["peak"]))]
    rows += [(f"  {c} (peak)", lambda h, c=c: fmt(h["by_category"][c])) for c in gm.memory.CATEGORIES
             if heads["fc"]["by_category"][c]]
    rows += [("validation forward, with grad", lambda h: fmt(h["validation"]["with grad"])),
             ("validation forward, no_grad", lambda h: fmt(h["validation"]["no_grad"]))]
    if not full:
        k = max(1, min(10, args.steps // 3))
        rows += [(f"loss, mean of first/last {k} steps", lambda h: f"{np.mean(h['losses'][:k]):.3f} -> "
                  f"{np.mean(h['losses'][-k:]):.3f}"),
                 ("ms per step", lambda h: f"{h['ms']:.1f}")]
    for name, cell in rows:
        log(f"  {name:<34}{cell(heads['fc']):>16}{cell(heads[fix]):>16}")
    if full:
        fits = "fits" if heads["fc"]["peak"] < 15.92 * GiB else "does not fit"
        log(f"  on the story's 15.92 GiB card: fc1 + fc2 {fits} ({heads['fc']['peak'] / GiB:.2f} GiB with gpumemnet's "
            f"in-place Adam), the fix needs {heads[fix]['peak'] / GiB:.2f} GiB")
    else:
        log("  (a global pool forgets where things are: the story's author found the GAP head's error higher, "
            "went back to a smaller FC on a downsampled output, and advised global max pooling over average)")
    return result


if __name__ == "__main__":
    main()
