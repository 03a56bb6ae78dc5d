"""One model's autocast step beside its fp32 step, as `python -m benchmarks` defines both (benchmarks/_models.py:
autocast = bfloat16 autocast + GradScaler + the model's accumulated micro-batches; fp32 = one plain step), for
gpumemnet and PyTorch, in paired rounds (benchmarks/_paired.py): the question of issue 14 item 2, "is our autocast
step faster than our own fp32 step", with both sides under the same load.

--before DIR adds a third gpumemnet worker importing the package from DIR (another checkout's python/ folder, built
in place), for a before/after of a change in the same rounds; --no-torch leaves PyTorch out (its bfloat16 workers
are slow on a busy 2-core machine and widen everyone's spread).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/autocast_vs_fp32.py resnet18 --rounds 21 \\
        [--before /work/main/python] [--no-torch]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _paired import paired_step_times, print_blas_config, serve_steps  # noqa: E402


def worker(lib, name, mode, threads):
    sys.path.insert(0, os.path.dirname(HERE))
    if lib != "torch":
        import gpumemnet as gm
        gm.as_torch()
    import torch
    torch.set_num_threads(threads)
    from benchmarks import _models
    model = _models.build(torch, name)
    x, y = _models.batch(name)
    serve_steps(_models.make_step(torch, name, model, torch.from_numpy(x), torch.from_numpy(y), mode, "cpu"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="resnet18")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--before", metavar="DIR", help="python/ folder of another gpumemnet build")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--worker", nargs=3, metavar=("LIB", "MODEL", "MODE"))
    a = ap.parse_args()
    if a.worker:
        return worker(*a.worker, a.threads)
    print_blas_config()
    cfgs = [("gm", "autocast"), ("gm", "fp32")]
    if a.before:
        cfgs.append(("gm-before", "autocast"))
    if not a.no_torch:
        cfgs += [("torch", "autocast"), ("torch", "fp32")]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as bf16_step.py: PyTorch's spinning libgomp costs it seconds
    before_env = dict(env, PYTHONPATH=a.before or "")
    workers = {c: ([sys.executable, __file__, "--worker", c[0], a.model, c[1], "--threads", str(a.threads)],
                   before_env if c[0] == "gm-before" else env) for c in cfgs}
    t = paired_step_times(workers, a.rounds)
    print(f"{a.model}: median ms (min-max) over {a.rounds} paired rounds, {a.threads} threads")
    for c in cfgs:
        print(f"  {c[0]:9s} {c[1]:8s} {statistics.median(t[c]):7.1f} ({min(t[c]):.1f}-{max(t[c]):.1f})")
    for p, q in [(("gm", "autocast"), ("gm", "fp32")), (("gm", "autocast"), ("gm-before", "autocast")),
                 (("gm", "autocast"), ("torch", "autocast")), (("gm", "fp32"), ("torch", "fp32"))]:
        if p in t and q in t:
            r = [x / y for x, y in zip(t[p], t[q])]
            print(f"  {p[0]} {p[1]} / {q[0]} {q[1]}: {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})")


if __name__ == "__main__":
    main()
