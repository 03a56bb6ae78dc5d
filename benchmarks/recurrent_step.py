"""Sequence layers: one forward and backward of a 2-layer LSTM and GRU (batch 32, 50 steps, 64 -> 128,
batch_first) and of a 2-layer TransformerEncoder (d_model 128, 4 heads, feed-forward 512, GELU, batch 32 x 50),
gpumemnet against PyTorch, float32 on the CPU.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/recurrent_step.py [--rounds 3]

Each library runs in a process of its own (PyTorch's OpenMP workers, spinning after its ops, would slow the other
library's threads in a shared process), 2 threads each; a round runs both, one after the other, and the ratio is
taken within the round, so a burst of load hits both alike. Printed: the median over rounds of each library's
median step time, and of the per-round ratio, with the ratios' spread."""
import argparse
import statistics
import subprocess
import sys

CODE = """
import time, sys
lib_name, cls, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
if lib_name == "torch":
    import torch as lib
    lib.set_num_threads(2)
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
times = []
for i in range(steps + 2):
    t = time.perf_counter()
    out = m(x)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    times.append(time.perf_counter() - t)
times = sorted(times[2:])
print(times[len(times) // 2])
"""


def step_seconds(lib, cls, steps):
    r = subprocess.run([sys.executable, "-c", CODE, lib, cls, str(steps)], capture_output=True, text=True,
                       check=True)
    return float(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    try:
        import scipy_openblas32
        print("OpenBLAS:", scipy_openblas32.get_openblas_config())
    except Exception:  # noqa: BLE001 - the figure is informative only
        pass
    for cls in ("LSTM", "GRU", "TransformerEncoder"):
        gm_t, torch_t, ratios = [], [], []
        for _ in range(args.rounds):
            a, b = step_seconds("gpumemnet", cls, args.steps), step_seconds("torch", cls, args.steps)
            gm_t.append(a)
            torch_t.append(b)
            ratios.append(a / b)
        print(f"{cls} 2 layers of 128, batch 32 x 50, forward + backward: gpumemnet "
              f"{statistics.median(gm_t) * 1e3:.1f} ms, PyTorch {statistics.median(torch_t) * 1e3:.1f} ms, "
              f"ratio {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
