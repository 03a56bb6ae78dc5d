"""float32 activations with a transcendental function (sigmoid, tanh, GELU, SiLU, Mish), forward and backward,
gpumemnet against PyTorch on the CPU, 2 threads each.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/activations.py [--rounds 3]

They run on glibc's vector math functions where the build links libmvec (kernels/cpu/vec_math.h); before, each
element was a scalar libm call, about 4 ns. Each library runs in a process of its own (as benchmarks/
recurrent_step.py explains); a round runs both and the ratio is taken within the round. Printed per op and size: the
median over rounds of each library's best time of a forward plus backward, and of the per-round ratio."""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paired import print_blas_config  # noqa: E402

OPS = ("sigmoid", "tanh", "gelu", "silu", "mish")

CODE = """
import sys, timeit
lib_name = sys.argv[1]
if lib_name == "torch":
    import torch as lib
else:
    import gpumemnet as lib
lib.set_num_threads(2)
F = lib.nn.functional
for op in sys.argv[2].split(","):
    for shape in ((32, 512), (256, 4096)):
        x = lib.randn(*shape, requires_grad=True)
        g = lib.randn(*shape)
        fn = getattr(F, op)
        def step():
            fn(x).backward(g)
        step()
        print(op, shape[0], shape[1], min(timeit.repeat(step, number=20, repeat=7)) / 20)
"""


def run(lib):
    r = subprocess.run([sys.executable, "-c", CODE, lib, ",".join(OPS)], capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.split("\n"):
        if line.strip():
            op, a, b, t = line.split()
            out[(op, int(a), int(b))] = float(t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print_blas_config()
    rounds = [(run("gpumemnet"), run("torch")) for _ in range(args.rounds)]
    for key in rounds[0][0]:
        ours = statistics.median(r[0][key] for r in rounds)
        theirs = statistics.median(r[1][key] for r in rounds)
        ratio = statistics.median(r[0][key] / r[1][key] for r in rounds)
        print(f"{key[0]:8s} {key[1]}x{key[2]} float32, forward + backward: gpumemnet {ours * 1e6:8.1f} us, "
              f"PyTorch {theirs * 1e6:8.1f} us, ratio {ratio:.2f}x")


if __name__ == "__main__":
    main()
