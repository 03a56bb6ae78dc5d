"""The memory-bound nn ops, forward and backward, gpumemnet against PyTorch on the CPU, float32, 2 threads each:
the activations with a transcendental function (sigmoid, tanh, GELU, SiLU, Mish), layer and group norm, softmax and
log_softmax over the last dim, at the sizes of a small Transformer (32 x 50 tokens of 128 or 512 features, 4 heads of
50 x 50 scores) and of a UNet's group norm.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/nn_ops.py [--rounds 3] [--only OP ...]

The activations run on glibc's vector math functions where the build links libmvec (kernels/cpu/vec_math.h); layer
and group norm and softmax's rows are `omp simd` loops (kernels/cpu/group_norm.c, softmax.c). Each library runs in a
process of its own (as benchmarks/recurrent_step.py explains); a round runs both and the ratio is taken within the
round. Printed per op and size: the median over rounds of each library's best time of a forward plus backward, and of
the per-round ratio."""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paired import print_blas_config  # noqa: E402

SHAPES = {op: ((32, 512), (256, 4096)) for op in ("sigmoid", "tanh", "gelu", "silu", "mish")}
SHAPES.update(layer_norm=((1600, 128), (1600, 512), (256, 4096)), group_norm=((16, 64, 32, 32), (8, 256, 16, 16)),
              softmax=((32, 4, 50, 50), (256, 4096)), log_softmax=((32, 4, 50, 50), (256, 4096)))

CODE = """
import sys, timeit
lib_name = sys.argv[1]
if lib_name == "torch":
    import torch as lib
else:
    import gpumemnet as lib
lib.set_num_threads(2)
F = lib.nn.functional
SHAPES = eval(sys.argv[3])


def layer(op, shape):
    if op == "layer_norm":
        return lib.nn.LayerNorm(shape[-1])
    if op == "group_norm":
        return lib.nn.GroupNorm(32, shape[1])
    if op in ("softmax", "log_softmax"):
        return lambda x: getattr(F, op)(x, dim=-1)
    return getattr(F, op)


for op in sys.argv[2].split(","):
    for shape in SHAPES[op]:
        x = lib.randn(*shape, requires_grad=True)
        g = lib.randn(*shape)
        fn = layer(op, shape)
        def step():
            fn(x).backward(g)
        step()
        print(op, "x".join(map(str, shape)), min(timeit.repeat(step, number=20, repeat=7)) / 20)
"""


def run(lib, ops):
    r = subprocess.run([sys.executable, "-c", CODE, lib, ",".join(ops), repr({op: SHAPES[op] for op in ops})],
                       capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.split("\n"):
        if line.strip():
            op, shape, t = line.split()
            out[(op, shape)] = float(t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    args = ap.parse_args()
    print_blas_config()
    rounds = [(run("gpumemnet", args.only), run("torch", args.only)) for _ in range(args.rounds)]
    for key in rounds[0][0]:
        ours = statistics.median(r[0][key] for r in rounds)
        theirs = statistics.median(r[1][key] for r in rounds)
        ratio = statistics.median(r[0][key] / r[1][key] for r in rounds)
        print(f"{key[0]:11s} {key[1]:14s} float32, forward + backward: gpumemnet {ours * 1e6:8.1f} us, "
              f"PyTorch {theirs * 1e6:8.1f} us, ratio {ratio:.2f}x")


if __name__ == "__main__":
    main()
