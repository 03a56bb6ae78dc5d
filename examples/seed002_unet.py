"""Story 002: a UNet trained for segmentation with checkpointing, autocast, GradScaler and gradient
accumulation, and what each technique saves.

    python examples/seed002_unet.py                 # 32x32 shapes, under a minute on 2 cores
    python examples/seed002_unet.py --size 128 --width 32 --depth 4 --epochs 20

The data are synthetic: noisy 3-channel images holding a few rectangles and discs; the net predicts, per pixel,
background / rectangle / disc (cross-entropy over (N, C, H, W) logits). The training loop is the story's, as
written, with gm in place of torch: autocast, scaler.scale(loss / accumulation_steps).backward(), and
scaler.step / update / zero_grad every accumulation_steps micro-batches; the encoder and decoder blocks are
checkpointed as in the story's `checkpointed_forward`.

Then one optimizer step over the same full batch is run under each technique (plain fp32, checkpoint, autocast,
accumulation x4, all combined) and its peak allocated memory is printed beside plain fp32's. Peaks are exact
allocator bytes (gm.memory), taken after a first step so that Adam's state already exists, as in training.

`UNet` lives here only: benchmarks/memory_techniques.py and tests/test_toolkit.py import it (and
`unet_class(torch.nn, ...)` builds the same architecture in PyTorch).
"""
import argparse
import functools
import gc
import statistics
import time

import numpy as np

import gpumemnet as gm
import gpumemnet.nn as gnn
import gpumemnet.nn.functional as F
from gpumemnet.utils.checkpoint import checkpoint as gm_checkpoint
from gpumemnet.utils.data import DataLoader, TensorDataset

CLASSES = ("background", "rectangle", "disc")


# ---- the network, written once for gpumemnet.nn and torch.nn ------------------------------------------------------
def unet_class(nn, cat, checkpoint):
    """The UNet class over a module namespace (gpumemnet.nn or torch.nn), its concatenation and its
    non-reentrant checkpoint function, so that one definition serves both libraries."""

    class DoubleConv(nn.Module):
        """(Conv 3x3 -> BatchNorm -> ReLU) x 2; the convs have no bias since BatchNorm's shift replaces it."""

        def __init__(self, cin, cout, device=None):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False, device=device), nn.BatchNorm2d(cout, device=device),
                nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, padding=1, bias=False, device=device), nn.BatchNorm2d(cout, device=device),
                nn.ReLU(inplace=True))

        def forward(self, x):
            return self.body(x)

    class Down(nn.Module):
        """2x2 max pool, then a double conv doubling the channels."""

        def __init__(self, cin, cout, device=None):
            super().__init__()
            self.pool = nn.MaxPool2d(2)
            self.conv = DoubleConv(cin, cout, device)

        def forward(self, x):
            return self.conv(self.pool(x))

    class Up(nn.Module):
        """Transposed 2x2 conv (stride 2) halving the channels, concatenation with the encoder's skip, double conv.
        The concatenation is inside the block so that a checkpoint of the block does not keep it."""

        def __init__(self, cin, cout, device=None):
            super().__init__()
            self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2, device=device)
            self.conv = DoubleConv(cin, cout, device)

        def forward(self, x, skip):
            return self.conv(cat([skip, self.up(x)], 1))

    class UNet(nn.Module):
        """UNet (Ronneberger et al. 2015) with `depth` poolings and `width` channels at full resolution.
        checkpointing=True recomputes every encoder/decoder block in backward (while training): only the blocks'
        outputs, which the skips and the next block need anyway, stay saved."""

        def __init__(self, in_channels=3, classes=3, width=16, depth=3, checkpointing=False, device=None):
            super().__init__()
            self.checkpointing = checkpointing
            self.inc = DoubleConv(in_channels, width, device)
            self.downs = nn.ModuleList([Down(width << i, width << (i + 1), device) for i in range(depth)])
            self.ups = nn.ModuleList([Up(width << (i + 1), width << i, device) for i in reversed(range(depth))])
            self.outc = nn.Conv2d(width, classes, 1, device=device)

        def _run(self, block, *xs):
            # the story's checkpointed_forward; eval needs no recomputation
            return checkpoint(block, *xs) if self.checkpointing and self.training else block(*xs)

        def forward(self, x):
            skips = [self._run(self.inc, x)]
            for down in self.downs:
                skips.append(self._run(down, skips[-1]))
            x = skips.pop()
            for up in self.ups:
                x = self._run(up, x, skips.pop())
            return self.outc(x)

    return UNet


UNet = unet_class(gnn, gm.cat, functools.partial(gm_checkpoint, use_reentrant=False))


# ---- synthetic data -------------------------------------------------------------------------------------------------
def make_shapes(n, size=32, seed=0):
    """(images (n, 3, size, size) float32, masks (n, size, size) int64): 1 to 3 rectangles and discs, each class
    with its own mean colour, under Gaussian noise; a later shape covers an earlier one."""
    rng = np.random.default_rng(seed)
    colours = np.array([[0.1, 0.1, 0.1], [0.9, 0.2, 0.2], [0.2, 0.3, 0.9]], np.float32)
    yy, xx = np.mgrid[:size, :size]
    masks = np.zeros((n, size, size), np.int64)
    for i in range(n):
        for _ in range(rng.integers(1, 4)):
            cls = int(rng.integers(1, 3))
            r = int(rng.integers(size // 8, size // 4 + 1))
            cy, cx = rng.integers(r, size - r, 2)
            if cls == 1:
                inside = (abs(yy - cy) <= r) & (abs(xx - cx) <= int(r * rng.uniform(0.5, 1.5)))
            else:
                inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            masks[i][inside] = cls
    images = colours[masks].transpose(0, 3, 1, 2) + 0.25 * rng.standard_normal((n, 3, size, size))
    return images.astype(np.float32), masks


# ---- one optimizer step: the story's loop body ----------------------------------------------------------------------
def optimizer_step(model, opt, scaler, images, masks, accumulation_steps=1, amp_dtype=None):
    """Forward/backward over `images` in `accumulation_steps` micro-batches, then scaler.step / update /
    zero_grad, exactly as story 002 writes it. Returns the last micro-batch's (unscaled, undivided) loss."""
    micro = images.shape[0] // accumulation_steps
    for i in range(accumulation_steps):
        image, segment_image = images[i * micro:(i + 1) * micro], masks[i * micro:(i + 1) * micro]
        with gm.autocast("cpu", dtype=amp_dtype or gm.bfloat16, enabled=amp_dtype is not None):
            out_image = model(image)
            train_loss = F.cross_entropy(out_image, segment_image)
        scaler.scale(train_loss / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    return train_loss.item()


TECHNIQUES = {  # name -> (checkpointing, autocast, accumulation steps)
    "fp32": (False, False, 1),
    "checkpoint": (True, False, 1),
    "autocast": (False, True, 1),
    "accumulation x4": (False, False, 4),
    "all combined": (True, True, 4),
}


def measure_step(technique, images, masks, width, depth, amp_dtype=gm.bfloat16, seed=0, repeats=1):
    """Peak memory and time of one optimizer step over the full batch under a technique (see TECHNIQUES).
    Returns {"peak": allocated bytes at the peak, "resident": bytes allocated before the step (parameters,
    Adam state, the batch), "by_category": each category's peak, "ms": median step time}."""
    ckpt, amp, accumulation = TECHNIQUES[technique]
    gm.manual_seed(seed)
    model = UNet(images.shape[1], len(CLASSES), width, depth, checkpointing=ckpt)
    opt = gm.optim.Adam(model.parameters(), lr=1e-3)
    # GradScaler is what float16 needs; with bfloat16 (CPU autocast's default) it is harmless and keeps the
    # story's loop unchanged
    scaler = gm.amp.GradScaler("cpu", enabled=amp)
    args = (model, opt, scaler, images, masks, accumulation, amp_dtype if amp else None)
    optimizer_step(*args)  # Adam's state exists from here on, as in every step but the first
    times = []
    for _ in range(repeats):
        gc.collect()
        gm.memory.reset_peak_memory_stats("cpu")
        resident = gm.memory.memory_allocated("cpu")
        t = time.perf_counter()
        optimizer_step(*args)
        times.append((time.perf_counter() - t) * 1e3)
    stats = gm.memory.memory_stats("cpu")
    return {"peak": stats["allocated"]["peak"], "resident": resident, "ms": statistics.median(times),
            "by_category": {k: v["peak"] for k, v in stats["by_category"].items()}}


# ---- training -------------------------------------------------------------------------------------------------------
def pixel_accuracy(model, images, masks, batch_size=32):
    model.eval()
    correct = 0
    with gm.no_grad():
        for x, y in DataLoader(TensorDataset(images, masks), batch_size=batch_size):
            correct += int((model(x).argmax(dim=1) == y).sum().item())
    model.train()
    return correct / masks.size


def train(args, log=print):
    """Story 002's loop over synthetic shapes; returns (first loss, last loss, held-out pixel accuracy)."""
    gm.manual_seed(args.seed)
    xtr, ytr = make_shapes(args.train_images, args.size, args.seed)
    xte, yte = make_shapes(max(args.train_images // 4, 8), args.size, args.seed + 1)
    net = UNet(3, len(CLASSES), args.width, args.depth, checkpointing=True)
    opt = gm.optim.Adam(net.parameters(), lr=args.lr)
    data_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size, shuffle=True, drop_last=True,
                             generator=args.seed)
    accumulation_steps = args.accumulation_steps
    scaler = gm.amp.GradScaler("cpu")
    amp_dtype = gm.float16 if args.dtype == "float16" else gm.bfloat16
    losses = []
    for epoch in range(args.epochs):
        for i, (image, segment_image) in enumerate(data_loader):
            with gm.autocast("cpu", dtype=amp_dtype):
                out_image = net(image)
                train_loss = F.cross_entropy(out_image, segment_image)
            losses.append(train_loss.item())
            train_loss = train_loss / accumulation_steps
            scaler.scale(train_loss).backward()
            if (i + 1) % accumulation_steps == 0:
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        log(f"  epoch {epoch + 1:2d}: mean loss {np.mean(losses[-len(data_loader):]):.4f}")
    return losses[0], float(np.mean(losses[-len(data_loader):])), pixel_accuracy(net, xte, yte)


def fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def technique_table(results):
    """Lines of the side-by-side table: each technique's peak (total and activations) against plain fp32's."""
    base = results["fp32"]
    lines = [f"{'technique':<17}{'peak allocated':>16}{'vs fp32':>9}{'step peak':>13}{'vs fp32':>9}"
             f"{'activations':>14}{'vs fp32':>9}{'ms/step':>10}"]
    for name, r in results.items():
        step, base_step = r["peak"] - r["resident"], base["peak"] - base["resident"]
        act, base_act = r["by_category"]["activation"], base["by_category"]["activation"]
        lines.append(f"{name:<17}{fmt(r['peak']):>16}{r['peak'] / base['peak']:>8.2f}x{fmt(step):>13}"
                     f"{step / base_step:>8.2f}x{fmt(act):>14}{act / base_act:>8.2f}x{r['ms']:>10.1f}")
    return lines


def main(argv=None, log=print):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=32, help="image height and width (a multiple of 2**depth)")
    p.add_argument("--width", type=int, default=8, help="channels at full resolution")
    p.add_argument("--depth", type=int, default=3, help="number of poolings")
    p.add_argument("--batch-size", type=int, default=4, help="micro-batch size")
    p.add_argument("--accumulation-steps", type=int, default=4)
    p.add_argument("--train-images", type=int, default=128)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16", help="autocast dtype")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--skip-training", action="store_true", help="only the memory table")
    args = p.parse_args(argv)
    if args.size % (1 << args.depth):
        p.error(f"--size {args.size} must be a multiple of 2**depth = {1 << args.depth}")
    if args.threads:
        gm.set_num_threads(args.threads)

    result = {}
    if not args.skip_training:
        log(f"training a UNet (width {args.width}, depth {args.depth}) on {args.train_images} synthetic "
            f"{args.size}x{args.size} images: checkpoint + autocast({args.dtype}) + GradScaler, micro-batch "
            f"{args.batch_size} x {args.accumulation_steps} accumulation steps")
        t = time.perf_counter()
        first, last, acc = train(args, log)
        log(f"  loss {first:.3f} -> {last:.3f}; held-out pixel accuracy {acc * 100:.1f}% "
            f"({time.perf_counter() - t:.1f} s)")
        result.update(first_loss=first, last_loss=last, accuracy=acc)

    full = args.batch_size * args.accumulation_steps
    images, masks = make_shapes(full, args.size, args.seed + 2)
    images, masks = gm.from_numpy(images), gm.from_numpy(masks)
    amp_dtype = gm.float16 if args.dtype == "float16" else gm.bfloat16
    log(f"\none optimizer step (Adam) over a full batch of {full} images {args.size}x{args.size}, "
        f"autocast {args.dtype}; 'step peak' is the peak above what stays resident between steps "
        f"(parameters, Adam state, the batch)")
    results = {name: measure_step(name, images, masks, args.width, args.depth, amp_dtype, args.seed)
               for name in TECHNIQUES}
    for line in technique_table(results):
        log(line)
    log("peak by category (bytes):")
    cats = [c for c in gm.memory.CATEGORIES if any(r["by_category"][c] for r in results.values())]
    log(f"  {'':<17}" + "".join(f"{c:>12}" for c in cats))
    for name, r in results.items():
        log(f"  {name:<17}" + "".join(f"{fmt(r['by_category'][c]):>12}" for c in cats))
    result["techniques"] = results
    return result


if __name__ == "__main__":
    main()
