"""How early DistributedDataParallel launches each bucket's all-reduce during backward (issue 16's overlap), on 2
ranks under MPI (pip install mpich):

  for the story-000 GAP net (seed 000's convolutions, channels / 8, global batch 8 of 2x96x96) and the digits CNN,
  wrapped in DDP with small buckets (so that there are several), each bucket's launch time as a share of the
  backward (0 %: when loss.backward() was called, 100 %: when it returned), and the backward time left after the
  launch: what the all-reduce can overlap. The backward walk decides it: a bucket is launched when the last of its
  parameters' gradients is accumulated (its post-accumulate hook), so the earlier the walk writes leaf gradients,
  the more backward is left to overlap with.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/ddp_overlap.py [--steps 5] [--bucket-kb 64]

Compare two builds by running it under each (PYTHONPATH=<tree>/python). Times are medians over steps after a
warm-up; one thread per rank."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(args):
    import gpumemnet.nn.functional as F
    from gpumemnet.nn.parallel import DistributedDataParallel as DDP
    sys.path.insert(0, HERE)
    from _ddp_nets import rank_batches, start_rank

    gm, dist, rank, world = start_rank()
    out = []
    for name, build, x, y in rank_batches(gm, rank, world, ("gap", "digits")):
        gm.manual_seed(0)
        ddp = DDP(build(), bucket_cap_mb=args.bucket_kb / 1024)
        launches = []

        class Timed:
            """DDP's communicator, with the time of each all-reduce launch noted."""
            def __init__(self, inner):
                self.inner = inner

            def __getattr__(self, k):
                return getattr(self.inner, k)

            def all_reduce_sum(self, *a, **kw):
                launches.append(time.perf_counter())
                return self.inner.all_reduce_sum(*a, **kw)
        object.__setattr__(ddp, "_comm", Timed(ddp._comm))
        opt = gm.optim.Adam(ddp.parameters())
        rows = []
        for s in range(args.warmup + args.steps):
            opt.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            launches.clear()
            dist.barrier()
            t0 = time.perf_counter()
            loss.backward()
            t1 = time.perf_counter()
            opt.step()
            if s >= args.warmup:
                rows.append([(t - t0) / (t1 - t0) for t in launches] + [t1 - t0])
        nb = len(rows[0]) - 1
        back = statistics.median(r[-1] for r in rows)
        share = [statistics.median(r[i] for r in rows) for i in range(nb)]
        out.append(dict(net=name, rank=rank, buckets=nb, backward_s=back, launch_share=share,
                        sizes=ddp.bucket_sizes() if hasattr(ddp, "bucket_sizes") else None))
    for r in range(world):
        if r == rank:
            for row in out:
                print("ROW " + json.dumps(row), flush=True)
        dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--bucket-kb", type=float, default=64.0, help="bucket_cap_mb, in KiB (default 64)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    import shutil
    exe = next((os.path.join(d, "mpiexec") for d in (os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin"))
                if os.access(os.path.join(d, "mpiexec"), os.X_OK)), None) or shutil.which("mpiexec")
    if not exe:
        raise SystemExit("no mpiexec: pip install mpich")
    cmd = [exe, "-n", "2", sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--bucket-kb", str(args.bucket_kb)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    import gpumemnet as gm
    print(f"gpumemnet from {os.path.dirname(gm.__file__)}; 2 ranks, 1 thread each; buckets of {args.bucket_kb:g} KiB; "
          f"medians over {args.steps} steps; load average {os.getloadavg()[0]:.1f}")
    for line in proc.stdout.splitlines():
        if not line.startswith("ROW "):
            continue
        row = json.loads(line[4:])
        if row["rank"] != 0:
            continue
        b = row["backward_s"]
        shares = ", ".join(f"{s * 100:.0f}%" for s in row["launch_share"])
        left = [(1 - s) * b * 1e3 for s in row["launch_share"]]
        print(f"  {row['net']}: backward {b * 1e3:.1f} ms, {row['buckets']} buckets launched at {shares} of it; "
              f"backward left to overlap per bucket {', '.join(f'{v:.1f}' for v in left)} ms "
              f"(mean {statistics.mean(left):.1f} ms = {statistics.mean(left) / (b * 1e3) * 100:.0f}% of backward)")


if __name__ == "__main__":
    main()
