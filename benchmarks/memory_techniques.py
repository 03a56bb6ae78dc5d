"""Peak memory and step time of each memory-saving technique, gpumemnet beside PyTorch (CPU, same thread count,
same weights, same data) when torch is importable.

Models: the demo's digits CNN (gpumemnet.demo.make_model; batch 64 of 1 x 8 x 8) and story 002's UNet
(examples/seed002_unet.py; batch 16 of 3 x 64 x 64). Techniques, applied to one Adam step over the same batch:
  fp32         plain
  checkpoint   the UNet's encoder/decoder blocks (UNet(checkpointing=True)); the digits CNN through
               checkpoint_sequential(model, 2, x), the same call in both libraries
  autocast     bfloat16 (CPU autocast's default) with a GradScaler, as in story 002
  accum x4     four micro-batches of a quarter of the batch, gradients accumulated
  all          all of the above together

"step peak" is the peak allocated during a step above what stays allocated between steps (parameters, Adam's
state, the batch): activations, gradients, workspace and temporaries, i.e. what the techniques act on.
  gpumemnet: exact allocator bytes (max_memory_allocated - memory_allocated before the step; blocks round to 512 B).
  PyTorch:   it keeps no CPU allocator statistics, so the step runs once under torch.profiler with
             profile_memory=True and the allocation/free events it records (every tensor allocation through
             c10's CPU allocator) are summed in time order; oneDNN's private scratch, if any, is not seen.
Time: median of --steps steps after --warmup, without the profiler; the models of every technique and library
step in turn (round-robin), so that the ratios are measured side by side.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/memory_techniques.py
"""
import argparse
import functools
import gc
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import gpumemnet as gm  # noqa: E402
from gpumemnet.demo import make_model as digits_model  # noqa: E402
from gpumemnet.utils.checkpoint import checkpoint_sequential as gm_checkpoint_sequential  # noqa: E402
from seed002_unet import UNet, make_shapes, unet_class  # noqa: E402
from train_step import copy_weights, digits_cnn  # noqa: E402

TECHNIQUES = {"fp32": (False, False, 1), "checkpoint": (True, False, 1), "autocast": (False, True, 1),
              "accum x4": (False, False, 4), "all": (True, True, 4)}  # (checkpoint, autocast, micro-batches)


# ---- one step, written for both libraries through a small adapter --------------------------------------------------
class Lib:
    """What differs between gpumemnet and torch for a training step: autocast, the scaler, checkpointing."""

    def __init__(self, name, mod):
        self.name, self.mod = name, mod

    def autocast(self, enabled):
        return self.mod.autocast("cpu", dtype=self.mod.bfloat16, enabled=enabled)

    def scaler(self, enabled):
        return self.mod.amp.GradScaler("cpu", enabled=enabled)  # the same spelling in both

    def cross_entropy(self, out, y):
        return self.mod.nn.functional.cross_entropy(out, y)

    def checkpoint_sequential(self, model, segments, x):
        if self.name == "gpumemnet":
            return gm_checkpoint_sequential(model, segments, x, use_reentrant=False)
        from torch.utils.checkpoint import checkpoint_sequential
        return checkpoint_sequential(model, segments, x, use_reentrant=False)


def make_step(lib, model, x, y, technique, sequential):
    """A closure running one optimizer step of `model` over (x, y) under the technique."""
    ckpt, amp, micro_batches = TECHNIQUES[technique]
    if hasattr(model, "checkpointing"):
        model.checkpointing = ckpt
    forward = (lambda xb: lib.checkpoint_sequential(model, 2, xb)) if ckpt and sequential else model
    opt = lib.mod.optim.Adam(model.parameters(), lr=1e-3)
    scaler = lib.scaler(amp)
    micro = x.shape[0] // micro_batches

    def step():
        for i in range(micro_batches):
            with lib.autocast(amp):
                loss = lib.cross_entropy(forward(x[i * micro:(i + 1) * micro]), y[i * micro:(i + 1) * micro])
            scaler.scale(loss / micro_batches).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    return step


def step_times(steps_by_key, warmup, steps):
    """{key: [ms of each round]}. The steps run round-robin (one of each key per round), so that a machine
    whose speed drifts over the run (other tenants, clocks) slows every technique alike and the ratios hold."""
    for step in steps_by_key.values():
        for _ in range(warmup):
            step()
    times = {key: [] for key in steps_by_key}
    for _ in range(steps):
        for key, step in steps_by_key.items():
            t = time.perf_counter()
            step()
            times[key].append((time.perf_counter() - t) * 1e3)
    return times


def gm_step_peak(step):
    """(peak above the bytes allocated before the step, each category's peak above its level before)."""
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    before = gm.memory.memory_allocated("cpu")
    cats = gm.memory.memory_stats("cpu")["by_category"]
    step()
    after = gm.memory.memory_stats("cpu")["by_category"]
    return (gm.memory.max_memory_allocated("cpu") - before,
            {k: after[k]["peak"] - cats[k]["current"] for k in after})


def torch_step_peak(torch, step):
    """The running sum of the allocation events torch.profiler records during one step: its peak (the measure
    python -m benchmarks applies to PyTorch on the CPU)."""
    from _worker import profiler_peak
    gc.collect()
    return profiler_peak(step)


# ---- the two models --------------------------------------------------------------------------------------------------
def build(which, lib, args):
    if which == "digits":
        if lib.name == "gpumemnet":
            return digits_model(32, 10)
        return digits_cnn(lib.mod.nn, 32, 10)
    if lib.name == "gpumemnet":
        return UNet(3, 3, args.unet_width, 3)
    torch = lib.mod
    TorchUNet = unet_class(torch.nn, torch.cat,
                           functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False))
    return TorchUNet(3, 3, args.unet_width, 3)


def data(which, args):
    if which == "digits":
        rng = np.random.default_rng(0)
        return rng.random((64, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, 64).astype(np.int64)
    return make_shapes(args.unet_batch, args.unet_size, seed=0)


def fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def run_model(which, title, libs, args):
    x, y = data(which, args)
    print(f"\n{title}")
    rows, by_cat, steps = {}, {}, {}
    for lib in libs:
        tensor = (lambda a: gm.from_numpy(a)) if lib.name == "gpumemnet" else lib.mod.from_numpy
        xt, yt = tensor(x), tensor(y)
        for technique in TECHNIQUES:
            gm.manual_seed(0)
            ref = build(which, Lib("gpumemnet", gm), args)  # one set of weights for both libraries
            model = ref if lib.name == "gpumemnet" else build(which, lib, args)
            if model is not ref:
                copy_weights(lib.mod, ref, model)
            del ref
            step = make_step(lib, model, xt, yt, technique, sequential=(which == "digits"))
            step()  # Adam's state exists from here on
            if lib.name == "gpumemnet":
                peak, by_cat[technique] = gm_step_peak(step)
            else:
                peak = torch_step_peak(lib.mod, step)
            rows.setdefault(technique, {})[lib.name] = [peak, None]
            steps[(technique, lib.name)] = step
    times = step_times(steps, args.warmup, args.steps)
    for (technique, name), ms in times.items():
        rows[technique][name][1] = statistics.median(ms)
    del steps
    names = [lib.name for lib in libs]
    head = f"  {'technique':<11}" + "".join(f"{n + ' step peak':>22}{'vs fp32':>9}" for n in names) + \
        "".join(f"{n + ' ms':>16}{'vs fp32':>9}" for n in names)
    print(head)
    for technique, r in rows.items():
        line = f"  {technique:<11}"
        for n in names:
            line += f"{fmt(r[n][0]):>22}{r[n][0] / rows['fp32'][n][0]:>8.2f}x"
        for n in names:
            line += f"{r[n][1]:>16.2f}{r[n][1] / rows['fp32'][n][1]:>8.2f}x"
        print(line)
    cats = [c for c in ("activation", "gradient", "workspace", "other") if any(v[c] for v in by_cat.values())]
    print("  gpumemnet step peak by category: " + "; ".join(
        f"{t} " + ", ".join(f"{c} {fmt(v[c])}" for c in cats) for t, v in by_cat.items()))
    if len(names) == 2:
        # The target: a technique saves at least what PyTorch's saves, counted from the same starting point (the
        # plain step's memory in PyTorch), i.e. with each technique the step peak is at most PyTorch's with it.
        absolute = [t for t, r in rows.items() if r[names[0]][0] > r[names[1]][0]]
        print(f"  target, step peak at most PyTorch's with the same technique: "
              f"{'yes' if not absolute else 'no: ' + ', '.join(absolute)}")
        # For information: the share of each library's own fp32 peak. It rises as our fp32 peak falls (a leaner
        # plain step leaves a technique less of its own to save), so it is not the target.
        share = [t for t, r in rows.items() if t != "fp32" and
                 r[names[0]][0] / rows["fp32"][names[0]][0] > r[names[1]][0] / rows["fp32"][names[1]][0] + 0.01]
        print(f"  (share of its own fp32 peak at most PyTorch's + 0.01: "
              f"{'yes' if not share else 'no: ' + ', '.join(share)})")
    for name in names:  # the median of the rounds' own ratios: each pairs two steps run one after the other
        ck = statistics.median(c / f for c, f in zip(times[("checkpoint", name)], times[("fp32", name)]))
        print(f"  {name} checkpoint step time, median of {args.steps} paired rounds: {ck:.2f}x fp32"
              + (" (target <= 1.4x)" if name == "gpumemnet" else ""))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--unet-size", type=int, default=64)
    p.add_argument("--unet-width", type=int, default=16)
    p.add_argument("--unet-batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        gm.set_num_threads(args.threads)
    threads = gm.get_num_threads()
    libs = [Lib("gpumemnet", gm)]
    if not args.no_torch:
        os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's start/stop chatter
        try:
            import torch
            import torch.utils.checkpoint  # noqa: F401
            torch.set_num_threads(threads)
            libs.append(Lib("torch", torch))
        except ImportError:
            pass
    info = gm._C._build_info()
    print(f"gpumemnet {gm.__version__}, {threads} threads, BLAS {info.get('blas')} (core {info.get('blas_core')})")
    print(f"PyTorch {libs[1].mod.__version__}, {libs[1].mod.get_num_threads()} threads" if len(libs) == 2
          else "PyTorch not used")
    run_model("digits", "digits CNN (gpumemnet.demo), batch 64 of 1x8x8", libs, args)
    run_model("unet", f"UNet (examples/seed002_unet.py, width {args.unet_width}, depth 3), batch {args.unet_batch} "
              f"of 3x{args.unet_size}x{args.unet_size}", libs, args)


if __name__ == "__main__":
    main()
