"""Sequence layers: one forward and backward of a 2-layer LSTM and GRU (batch 32, 50 steps, 64 -> 128,
batch_first) and of a 2-layer TransformerEncoder (d_model 128, 4 heads, feed-forward 512, GELU, batch 32 x 50),
gpumemnet against PyTorch, float32 on the CPU.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/recurrent_step.py [--rounds 15]

Each library and layer runs in a worker process of its own (PyTorch's OpenMP workers, spinning after its ops, would
slow the other library's threads in a shared process), 2 threads each, in paired rounds (_paired.py): a round asks
every worker for one step in turn, so a burst of load hits both alike. Printed per layer: each library's median step
time, and the median (min-max) over rounds of each round's ratio."""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _paired import paired_step_times, print_blas_config, serve_steps  # noqa: E402

LAYERS = ("LSTM", "GRU", "TransformerEncoder")


def worker(lib_name, cls):
    if lib_name == "torch":
        import torch as lib
    else:
        import gpumemnet as lib
    lib.set_num_threads(2)
    lib.manual_seed(0)
    if cls == "TransformerEncoder":
        layer = lib.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, activation="gelu", batch_first=True)
        m = lib.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        x = lib.randn(32, 50, 128)
    else:
        m = getattr(lib.nn, cls)(64, 128, num_layers=2, batch_first=True)
        x = lib.randn(32, 50, 64)

    def step():
        out = m(x)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
    serve_steps(step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--worker", nargs=2, metavar=("LIB", "LAYER"))
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker)
    print_blas_config()
    for cls in LAYERS:
        workers = {lib: ([sys.executable, __file__, "--worker", lib, cls], None) for lib in ("gpumemnet", "torch")}
        t = paired_step_times(workers, args.rounds)
        ratios = [a / b for a, b in zip(t["gpumemnet"], t["torch"])]
        print(f"{cls} 2 layers of 128, batch 32 x 50, forward + backward: gpumemnet "
              f"{statistics.median(t['gpumemnet']):.1f} ms, PyTorch {statistics.median(t['torch']):.1f} ms, "
              f"ratio {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
