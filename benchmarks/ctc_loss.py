"""F.ctc_loss forward and backward (a speech model's loss: T=800 steps, batch 16, 30 classes, targets of 50-100
labels, float32), gpumemnet against PyTorch in one process, 2 threads each, alternating rounds; prints each
library's best time and the ratio.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE python benchmarks/ctc_loss.py [--rounds 5]

The loss runs in gpumemnet's kernel (kernels/cpu/ctc.c); BLAS takes no part, the log_softmax before it little."""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _paired import print_blas_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import gpumemnet as gm  # first: PyTorch's OpenMP runtime loaded before it would spin (see gm's warning)
    import torch
    print_blas_config()
    gm.set_num_threads(2)
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    T, N, C, S = 800, 16, 30, 100
    xs = rng.standard_normal((T, N, C)).astype(np.float32)
    targets, lengths = rng.integers(1, C, (N, S)), rng.integers(50, S, N)
    best = {}
    for _ in range(args.rounds):
        for lib in (gm, torch):
            x = lib.tensor(xs, requires_grad=True)
            t0 = time.perf_counter()
            loss = lib.nn.functional.ctc_loss(x.log_softmax(2), lib.tensor(targets), lib.tensor([T] * N),
                                              lib.tensor(lengths))
            loss.backward()
            best[lib.__name__] = min(best.get(lib.__name__, float("inf")), time.perf_counter() - t0)
    print(f"ctc_loss T={T} N={N} C={C}, forward + backward: gpumemnet {best['gpumemnet'] * 1e3:.1f} ms, "
          f"PyTorch {best['torch'] * 1e3:.1f} ms, ratio {best['gpumemnet'] / best['torch']:.2f}x")


if __name__ == "__main__":
    main()
