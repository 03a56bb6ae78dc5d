"""Per-op overhead of a small op from Python: `a + b` on 16 floats, with and without autograd recording,
side by side with NumPy and (when importable) PyTorch, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/op_overhead.py
"""
import argparse
import timeit

import numpy as np

import gpumemnet as gm


def per_call_us(stmt, number):
    # best of 5 repeats: the least disturbed measurement of a fixed cost
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16, help="elements per operand")
    p.add_argument("--number", type=int, default=20000, help="calls per repeat")
    args = p.parse_args()
    info = gm._C._build_info() if hasattr(gm._C, "_build_info") else {}
    print(f"gpumemnet {gm.__version__}; BLAS: {info.get('blas', '?')}; threads {gm.get_num_threads()}")

    rows = []
    a, b = gm.rand(args.n), gm.rand(args.n)
    per_call_us(lambda: a + b, args.number)  # warm up (CPU clock, caches) before the first measured row
    rows.append(("gpumemnet a + b", per_call_us(lambda: a + b, args.number)))
    ag, bg = gm.rand(args.n, requires_grad=True), gm.rand(args.n, requires_grad=True)
    rows.append(("gpumemnet a + b (recording grad)", per_call_us(lambda: ag + bg, args.number)))
    with gm.no_grad():
        rows.append(("gpumemnet a + b (requires_grad, no_grad)", per_call_us(lambda: ag + bg, args.number)))
    rows.append(("gpumemnet a * 2.0", per_call_us(lambda: a * 2.0, args.number)))
    rows.append(("gpumemnet a.sum()", per_call_us(lambda: a.sum(), args.number)))
    na, nb = np.random.rand(args.n).astype(np.float32), np.random.rand(args.n).astype(np.float32)
    rows.append(("numpy a + b", per_call_us(lambda: na + nb, args.number)))
    rows.append(("numpy a.sum()", per_call_us(lambda: na.sum(), args.number)))
    try:
        import torch
        torch.set_num_threads(gm.get_num_threads())
        ta, tb = torch.rand(args.n), torch.rand(args.n)
        rows.append(("torch a + b", per_call_us(lambda: ta + tb, args.number)))
        tag, tbg = torch.rand(args.n, requires_grad=True), torch.rand(args.n, requires_grad=True)
        rows.append(("torch a + b (recording grad)", per_call_us(lambda: tag + tbg, args.number)))
        rows.append(("torch a.sum()", per_call_us(lambda: ta.sum(), args.number)))
    except ImportError:
        rows.append(("torch", None))
    base = rows[0][1]
    print(f"{'op on ' + str(args.n) + ' float32':44s} {'µs/call':>9s} {'× gpumemnet a+b':>16s}")
    for name, us in rows:
        if us is None:
            print(f"{name:44s} {'not installed':>9s}")
        else:
            print(f"{name:44s} {us:9.2f} {us / base:16.2f}")


if __name__ == "__main__":
    main()
