"""One model's training step (benchmarks/_models.py) for two gpumemnet builds and PyTorch, in fp32 and autocast, in
paired rounds: a round asks every worker process for one step in turn, so the machine's load moves all sides
alike. For a before/after figure of a change: build the other version elsewhere (for example `git archive <rev> |
tar -x -C /tmp/base` and build it in place there) and pass its python/ folder as --base. Printed: the median step
time and spread (min-max) per configuration, and the median (min-max) over rounds of each round's ratio.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/builds_step.py --base /tmp/base/python
        [--model mobilenet_v2] [--rounds 15] [--threads 2]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _paired import paired_step_times, print_blas_config, serve_steps  # noqa: E402

MODES = ("fp32", "autocast")


def worker(lib, model, mode, threads):
    if lib != "torch":
        import gpumemnet as gm
        gm.as_torch()
    import torch
    torch.set_num_threads(threads)
    sys.path.insert(0, os.path.dirname(HERE))
    from benchmarks import _models
    net = _models.build(torch, model)
    x, y = _models.batch(model)
    serve_steps(_models.make_step(torch, model, net, torch.from_numpy(x), torch.from_numpy(y), mode, "cpu"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="python/ folder of the other gpumemnet build")
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--worker", nargs=3, metavar=("LIB", "MODEL", "MODE"))
    a = ap.parse_args()
    if a.worker:
        return worker(*a.worker, a.threads)
    print_blas_config()
    paths = {"base": os.path.abspath(a.base), "new": os.path.join(os.path.dirname(HERE), "python"), "torch": ""}
    configs = [(lib, mode) for lib in paths for mode in MODES]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # both libraries alike (see bf16_step.py)
    workers = {(lib, mode): ([sys.executable, __file__, "--base", a.base, "--threads", str(a.threads), "--worker",
                              lib, a.model, mode], dict(env, PYTHONPATH=paths[lib])) for lib, mode in configs}
    t = paired_step_times(workers, a.rounds)
    print(f"{a.model}: ms over {a.rounds} paired rounds, {a.threads} threads; base = {paths['base']}, "
          f"new = {paths['new']}")
    for c in configs:
        v = t[c]
        print(f"  {c[0]:5s} {c[1]:8s} {statistics.median(v):8.1f} ({min(v):.1f}-{max(v):.1f})")
    for p, q in ((("new", "autocast"), ("base", "autocast")), (("new", "fp32"), ("base", "fp32")),
                 (("new", "autocast"), ("new", "fp32")), (("base", "autocast"), ("base", "fp32")),
                 (("new", "autocast"), ("torch", "autocast")), (("new", "fp32"), ("torch", "fp32"))):
        r = [x / y for x, y in zip(t[p], t[q])]
        print(f"  {' '.join(p):13s} / {' '.join(q):13s} {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})")


if __name__ == "__main__":
    main()
