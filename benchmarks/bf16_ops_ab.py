"""bfloat16 elementwise, pooling and norm kernels (kernels/cpu/nn_bf16.c, pool_2x2.c) switched on and off in one
run: the same model's autocast and float32 steps with the AVX-512 paths (fast: nn_bf16.c, pool_2x2.c, norm_f32.c)
and with the generic loops (GPUMEMNET_NN_BF16=portable, what ran before them), in paired rounds. Each configuration is
its own worker process; a round asks each worker for one step in turn, so the machine's load moves all alike.
Printed: median step time (min-max) per configuration and the median over rounds of each round's ratio.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bf16_ops_ab.py [--rounds 15] [--models unet,resnet18,mobilenet_v2]
"""
import argparse
import os
import statistics
import sys

from _paired import paired_step_times, serve_steps

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = (("fast", "autocast"), ("portable", "autocast"), ("fast", "fp32"), ("portable", "fp32"))


def worker(model, mode, threads):
    import gpumemnet as gm
    gm.as_torch()
    import torch
    sys.path.insert(0, os.path.dirname(HERE))
    from benchmarks import _models
    torch.set_num_threads(threads)
    net = _models.build(torch, model)
    x, y = _models.batch(model)
    step = _models.make_step(torch, model, net, torch.from_numpy(x), torch.from_numpy(y), mode, "cpu")
    serve_steps(step)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--models", default="unet,resnet18,mobilenet_v2")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "MODE"))
    a = ap.parse_args()
    if a.worker:
        return worker(*a.worker, a.threads)
    env0 = dict(os.environ)
    env0.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for model in a.models.split(","):
        workers = {(kind, mode): ([sys.executable, __file__, "--worker", model, mode, "--threads", str(a.threads)],
                                  dict(env0, GPUMEMNET_NN_BF16=kind)) for kind, mode in CONFIGS}
        times = paired_step_times(workers, a.rounds)
        print(f"\n{model}: median ms (min-max) over {a.rounds} paired rounds, {a.threads} threads")
        for c in CONFIGS:
            t = times[c]
            print(f"  {c[1]:8s} {c[0]:8s}: {statistics.median(t):8.1f} ({min(t):.1f}-{max(t):.1f})")

        def ratio(p, q):
            r = [x / y for x, y in zip(times[p], times[q])]
            return f"{statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})"
        print(f"  autocast fast / autocast portable: {ratio(CONFIGS[0], CONFIGS[1])}   "
              f"fp32 fast / fp32 portable: {ratio(CONFIGS[2], CONFIGS[3])}\n"
              f"  autocast / fp32, fast: {ratio(CONFIGS[0], CONFIGS[2])}   "
              f"autocast / fp32, portable: {ratio(CONFIGS[1], CONFIGS[3])}", flush=True)


if __name__ == "__main__":
    main()
