"""Data parallel figures (issue 16), measured on this machine with MPI (pip install mpich):

  1. scaling from 1 to 2 ranks of the digits CNN (global batch 64, 1x8x8) and the story-000 GAP net (seed 000's
     convolutions with channels / 8 and a global-average-pool head, global batch 8, 2x96x96): time per sample
     (median step time / global batch; one thread per rank, so 2 ranks use 2 cores where 1 rank uses 1) and peak
     allocated bytes per rank. 1 rank is the plain model; 2 ranks wrap it in DistributedDataParallel;
  2. bytes handed to MPI per step per rank (counted at gpumemnet.distributed's collectives), and what a rank then
     sends with the bandwidth-optimal ring algorithms (computed from those payloads: MPICH picks its own algorithm
     per message size, and its shared-memory traffic on one host is not observable from here), against the
     minimum 2 (N-1)/N x gradient bytes a rank must send to average the gradients;
  3. per-rank optimizer bytes (allocator category "optimizer") under ZeRO-1 and ZeRO-2 against plain Adam.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/ddp_scaling.py [--rounds 5] [--steps 10]

The driver launches `mpiexec -n 1` and `mpiexec -n 2` in alternation (paired rounds: machine load hits both
sides alike) and prints medians with their spread (min-max over rounds). Bytes are exact; times are as noisy as
the machine."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- worker (runs under mpiexec) --------------------------------------------------------------------------------
def worker(args):
    import gpumemnet.nn.functional as F
    from gpumemnet.distributed.optim import ZeroRedundancyOptimizer
    from gpumemnet.nn.parallel import DistributedDataParallel as DDP
    sys.path.insert(0, HERE)
    from _ddp_nets import NETS, rank_batches, start_rank

    gm, dist, rank, world = start_rank()
    sent = {"bytes": 0, "ring": 0.0}

    def counting(fn, arg, ring):
        def wrapped(*a, **kw):
            t = a[arg]
            n = t.numel() * t.element_size()
            sent["bytes"] += n
            sent["ring"] += ring * n
            return fn(*a, **kw)
        return wrapped
    # The payload of each collective DDP and ZeRO start (all-reduce's tensor, reduce-scatter's input, all-gather's
    # output), and what a rank sends for it with the bandwidth-optimal ring algorithms: 2(N-1)/N of an
    # all-reduce's payload, (N-1)/N of a reduce-scatter's or an all-gather's.
    dist.all_reduce = counting(dist.all_reduce, 0, 2 * (world - 1) / world)
    dist.reduce_scatter_tensor = counting(dist.reduce_scatter_tensor, 1, (world - 1) / world)
    dist.all_gather_into_tensor = counting(dist.all_gather_into_tensor, 0, (world - 1) / world)

    out = []
    for name, build, x, y in rank_batches(gm, rank, world, ("digits", "gap")):
        for zero in ((0,) if args.timing_only else (0, 1, 2)):
            gm.manual_seed(0)
            model = build()
            grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
            wrapped = model if (world == 1 and zero == 0) or zero == 2 else DDP(model)
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=gm.optim.Adam, stage=zero) \
                if zero else gm.optim.Adam(model.parameters())

            def step():
                opt.zero_grad()
                F.cross_entropy(wrapped(x), y).backward()
                opt.step()
            for _ in range(args.warmup):
                step()
            gm.memory.reset_peak_memory_stats("cpu")
            sent["bytes"], sent["ring"] = 0, 0.0
            times = []
            for _ in range(args.steps):
                dist.barrier()
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
            stats = gm.memory.memory_stats("cpu")
            out.append(dict(net=name, zero=zero, world=world, rank=rank, step_s=statistics.median(times),
                            batch=NETS[name][1][0], peak=stats["allocated"]["peak"],
                            optimizer=stats["by_category"]["optimizer"]["current"],
                            comm_at_peak=stats["at_peak"]["by_category"]["communication"],
                            sent_per_step=sent["bytes"] // args.steps, ring_per_step=sent["ring"] / args.steps,
                            grad_bytes=grad_bytes))
            del wrapped, opt, model
    for r in range(world):
        if r == rank:
            for row in out:
                print("ROW " + json.dumps(row), flush=True)
        dist.barrier()
    dist.destroy_process_group()


# ---- driver ----------------------------------------------------------------------------------------------------
def mpiexec():
    for d in (os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")):
        if os.access(os.path.join(d, "mpiexec"), os.X_OK):
            return os.path.join(d, "mpiexec")
    import shutil
    exe = shutil.which("mpiexec")
    if not exe:
        raise SystemExit("no mpiexec: pip install mpich")
    return exe


def launch(n, args, timing_only):
    cmd = [mpiexec(), "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(args.steps),
           "--warmup", str(args.warmup)] + (["--timing-only"] if timing_only else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]


def fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def spread(xs, scale=1.0, unit=""):
    xs = [x * scale for x in xs]
    return f"{statistics.median(xs):.3f}{unit} [{min(xs):.3f}-{max(xs):.3f}]"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--timing-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    import gpumemnet as gm
    info = gm._C._build_info()
    print(f"gpumemnet {gm.__version__}, 1 thread per rank, BLAS {info.get('blas')} core {info.get('blas_core')}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    full = {n: launch(n, args, False) for n in (1, 2)}  # bytes and memory (exact), and a first timing
    times = {(n, net): [] for n in (1, 2) for net in ("digits", "gap")}
    for r in range(args.rounds):
        for n in ((1, 2) if r % 2 == 0 else (2, 1)):
            rows = launch(n, args, True) if r else [row for row in full[n] if row["zero"] == 0]
            for net in ("digits", "gap"):
                times[(n, net)].append(max(row["step_s"] for row in rows if row["net"] == net))

    names = {"digits": "digits CNN, global batch 64", "gap": "story-000 GAP net (/8), global batch 8"}
    print(f"\n1. scaling 1 -> 2 ranks: ms per sample, median [min-max] over {args.rounds} paired rounds of "
          f"{args.steps} steps; peak allocated per rank")
    for net in ("digits", "gap"):
        batch = next(row["batch"] for row in full[1] if row["net"] == net)
        t1 = [t / batch for t in times[(1, net)]]
        t2 = [t / batch for t in times[(2, net)]]
        ratios = [a / b for a, b in zip(t1, t2)]
        peak = {n: max(row["peak"] for row in full[n] if row["net"] == net and row["zero"] == 0) for n in (1, 2)}
        print(f"  {names[net]}: 1 rank {spread(t1, 1e3, ' ms')}, 2 ranks {spread(t2, 1e3, ' ms')}; "
              f"speed-up {spread(ratios)}; peak per rank {fmt(peak[1])} (1 rank) vs {fmt(peak[2])} (2 ranks)")
    print("\n2. per step and rank (2 ranks): payload handed to MPI, and what the rank sends with ring algorithms, vs "
          "the minimum for averaging the gradients, 2(N-1)/N x gradient bytes")
    for net in ("digits", "gap"):
        for zero in (0, 1, 2):
            row = next(r for r in full[2] if r["net"] == net and r["zero"] == zero and r["rank"] == 0)
            g = row["grad_bytes"]
            what = {0: "DDP all-reduce", 1: "ZeRO-1: DDP all-reduce + all-gather",
                    2: "ZeRO-2: reduce-scatter + all-gather"}[zero]
            low = 2 * (2 - 1) / 2 * g
            print(f"  {names[net]}, {what}: payload {fmt(row['sent_per_step'])}, sent {fmt(row['ring_per_step'])} "
                  f"= {row['ring_per_step'] / low:.3f} x the minimum {fmt(low)} (gradients {fmt(g)})")
    print("\n3. optimizer state per rank (allocator 'optimizer'), 2 ranks, Adam")
    for net in ("digits", "gap"):
        rows = {z: [r for r in full[2] if r["net"] == net and r["zero"] == z] for z in (0, 1, 2)}
        plain = rows[0][0]["optimizer"]
        parts = ", ".join(f"ZeRO-{z}: " + " / ".join(fmt(r["optimizer"]) for r in sorted(rows[z],
                          key=lambda r: r["rank"])) + f" ({max(r['optimizer'] for r in rows[z]) / plain:.3f} x)"
                          for z in (1, 2))
        peaks = ", ".join(f"zero={z} peak {fmt(max(r['peak'] for r in rows[z]))}" for z in (0, 1, 2))
        print(f"  {names[net]}: plain Adam {fmt(plain)}; {parts}; {peaks}")


if __name__ == "__main__":
    main()
