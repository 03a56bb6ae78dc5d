"""Every byte at a model's peak (issue 14's "leaner peaks"): one step of a `python -m benchmarks` model on gpumemnet
(under its torch alias, the same model files and batch), after a first step so that the optimizer state exists; the
allocator's history of the second step is replayed up to its peak, and the bytes alive there are printed by
category and by the scope that allocated them ("inc.body.1 forward": BatchNorm's input, saved for its backward).

    python benchmarks/peak_accounting.py [--model unet] [--mode fp32|checkpoint|autocast|eval] [--min-kib 64]

With --mode eval it also prints the floor of an inference forward that gives every layer a new output: the largest
input + output of one leaf module (workspace aside), beside the measured step peak. gpumemnet's Sequential can go
below it: under no_grad, BatchNorm and the activations write over an intermediate nothing else holds
(nn/modules/_donation.py). The floor's own run does not: its forward hook, which may keep inputs, stops that.

Run from the repository root."""
import argparse
import collections
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="unet")
    p.add_argument("--mode", default="fp32", choices=("fp32", "checkpoint", "autocast", "eval"))
    p.add_argument("--min-kib", type=float, default=64.0, help="leave out (category, scope) rows below this")
    args = p.parse_args()
    import gpumemnet as gm
    gm.as_torch()
    import torch

    from benchmarks import _models
    model = _models.build(torch, args.model)
    if args.mode == "checkpoint":
        model = _models.enable_checkpointing(torch, args.model, model)
    x, y = _models.batch(args.model)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    step = _models.make_step(torch, args.model, model, x, y, args.mode, "cpu")
    step()
    gc.collect()
    gm.memory.reset_peak_memory_stats()
    before = gm.memory.memory_allocated()
    gm.memory.record_history(True, 1_000_000)
    step()
    events = gm.memory.history()
    gm.memory.record_history(False)
    at = gm.memory.memory_stats()["at_peak"]
    top = gm.memory.max_memory_allocated()
    i = max(range(len(events)), key=lambda k: events[k]["allocated"])
    print(f"{args.model} {args.mode}: peak {top / 2**20:.3f} MiB ({(top - before) / 2**20:.3f} MiB above the bytes "
          f"held between steps), reached in {events[i]['scope']!r}")
    print("  by category at the peak:")
    for c, v in sorted(at["by_category"].items(), key=lambda cv: -cv[1]):
        if v:
            print(f"    {c:16s} {v / 2**20:9.3f} MiB")
    # bytes the step allocated and had not freed when the peak was reached, by where they were allocated; what
    # was held before the step (parameters, optimizer state, the batch) is in the categories above
    live = collections.Counter()
    for e in events[:i + 1]:
        live[(e["category"], e["scope"])] += e["delta"]
    print("  the step's own bytes alive at the peak, by category and allocating scope:")
    for (c, s), v in sorted(live.items(), key=lambda kv: -kv[1]):
        if v >= args.min_kib * 1024:
            print(f"    {c:16s} {s:40s} {v / 2**20:9.3f} MiB")
    freed = -sum(v for v in live.values() if v < 0)  # blocks of the previous step the step freed (zero_grad)
    print(f"  (and {freed / 2**20:.3f} MiB held before the step were freed before its peak)")
    if args.mode == "eval":
        print_eval_floor(gm, model, x, top - before)


def print_eval_floor(gm, model, x, step_peak):
    """The largest input + output bytes of one leaf module under no_grad (allocator blocks: 512-byte rounding), in
    a forward where every layer allocates its output."""
    rows = []

    def hook(m, inputs, out):
        if not m._modules:  # each storage once (an in-place ReLU's output is its input)
            held = {t._storage_id: t._storage_nbytes for t in (*inputs, out) if hasattr(t, "_storage_nbytes")}
            rows.append((sum(-(-n // 512) * 512 for n in held.values()), m._path or type(m).__name__))
    handle = gm.nn.register_module_forward_hook(hook)
    try:
        with gm.no_grad():
            model(x)
    finally:
        handle.remove()
    floor, where = max(rows)
    print(f"  eval floor with a new output per layer: {floor / 2**20:.3f} MiB (input + output of {where}); step peak "
          f"{step_peak / 2**20:.3f} MiB "
          f"= {step_peak / floor:.2f}x the floor")


if __name__ == "__main__":
    main()
