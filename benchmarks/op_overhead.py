"""Per-op overhead of a small op from Python: `a + b` on 16 floats, with and without autograd recording,
side by side with NumPy and (when importable) PyTorch, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/op_overhead.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/op_overhead.py --callgrind

Timings: paired rounds (gpumemnet and PyTorch interleaved), median and spread. `--callgrind` counts CPU
instructions per op under `valgrind --tool=callgrind` instead, which a busy machine does not disturb: each case
runs N and then 2N ops in one process, and the difference of the two counts over N is one op's cost (the
loop's fixed costs and the imports cancel). The functions here are importable (`python -m benchmarks` calls
`timed_rows` and `callgrind_rows`).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import timeit

# Each case: (library, name, setup, statement). The setup runs once; the statement is one op.
CASES = [
    ("gpumemnet", "a + b", "a, b = gm.rand(16), gm.rand(16)", "a + b"),
    ("gpumemnet", "a + b (recording grad)",
     "a, b = gm.rand(16, requires_grad=True), gm.rand(16, requires_grad=True)", "a + b"),
    ("gpumemnet", "a * b (recording grad, saves a and b)",
     "a, b = gm.rand(16, requires_grad=True), gm.rand(16, requires_grad=True)", "a * b"),
    ("gpumemnet", "(a + b).sum().backward()",
     "a, b = gm.rand(16, requires_grad=True), gm.rand(16, requires_grad=True)", "(a + b).sum().backward()"),
    ("torch", "a + b", "a, b = torch.rand(16), torch.rand(16)", "a + b"),
    ("torch", "a + b (recording grad)",
     "a, b = torch.rand(16, requires_grad=True), torch.rand(16, requires_grad=True)", "a + b"),
    ("torch", "a * b (recording grad, saves a and b)",
     "a, b = torch.rand(16, requires_grad=True), torch.rand(16, requires_grad=True)", "a * b"),
    ("torch", "(a + b).sum().backward()",
     "a, b = torch.rand(16, requires_grad=True), torch.rand(16, requires_grad=True)", "(a + b).sum().backward()"),
]

_IMPORT = {"gpumemnet": "import gpumemnet as gm; gm.set_num_threads(2)",
           "torch": "import torch; torch.set_num_threads(2)"}


def _available(lib):
    try:
        __import__(lib)
        return True
    except ImportError:
        return False


def per_call_us(stmt, number, globals_=None):
    """Best of 5 repeats of `number` calls: the least disturbed measurement of a fixed cost."""
    return min(timeit.repeat(stmt, number=number, repeat=5, globals=globals_)) / number * 1e6


def timed_rows(number=20000, rounds=5, libs=("gpumemnet", "torch")):
    """[(library, case, median µs, spread µs)]; every round measures every case once, interleaved, so a
    burst of load on the machine hits both libraries alike."""
    libs = [lib for lib in libs if _available(lib)]
    envs = {}
    for lib in libs:
        env = {}
        exec(_IMPORT[lib], env)
        envs[lib] = env
    cases = [c for c in CASES if c[0] in libs]
    stmts = []
    for lib, name, setup, stmt in cases:
        g = dict(envs[lib])
        exec(setup, g)
        per_call_us(stmt, number // 10, g)  # warm up (CPU clock, caches)
        stmts.append((lib, name, stmt, g))
    samples = {(lib, name): [] for lib, name, _, _ in stmts}
    for _ in range(rounds):
        for lib, name, stmt, g in stmts:
            samples[(lib, name)].append(per_call_us(stmt, number, g))
    return [(lib, name, statistics.median(s), max(s) - min(s)) for (lib, name), s in samples.items()]


# The imports run uninstrumented (--instr-atstart=no; PyTorch's take many minutes under callgrind otherwise);
# callgrind_control turns instrumentation on before the first case.
_CHILD_HEAD = """
import os, subprocess, sys
{imp}
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
"""

_CHILD_CASE = """
{setup}
def run(n):
    for _ in range(n):
        {stmt}
run(10)
os.getppid()
run({n})
os.getppid()
run({n2})
os.getppid()
"""


def callgrind_instructions(lib, cases, n=2000, python=sys.executable):
    """Instructions of one op for each (setup, stmt) of `cases`, all in one process under callgrind (the
    imports are paid once): (count of 2n ops - count of n ops) / n. os.getppid() marks the boundaries:
    callgrind dumps and resets its counters whenever it is entered."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise RuntimeError("callgrind mode needs valgrind and callgrind_control on PATH")
    code = _CHILD_HEAD.format(imp=_IMPORT[lib]) + "".join(
        _CHILD_CASE.format(setup=setup, stmt=stmt, n=n, n2=2 * n) for setup, stmt in cases)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                        "--dump-before=os_getppid",
                        python, "-c", code], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        totals = []
        # cg.out.1, cg.out.2, ... in order, then cg.out (the dump at exit)
        for f in sorted(os.listdir(tmp), key=lambda s: int(s.rsplit(".", 1)[1]) if s[-1].isdigit() else 1 << 30):
            with open(os.path.join(tmp, f)) as fh:
                for line in fh:
                    if line.startswith("totals:") or line.startswith("summary:"):
                        totals.append(int(line.split()[1]))
                        break
    # per case three dumps: [setup and warm-up], [n ops], [2n ops]
    if len(totals) < 3 * len(cases):
        raise RuntimeError(f"callgrind gave {len(totals)} dumps, expected {3 * len(cases) + 1}")
    return [(totals[3 * k + 2] - totals[3 * k + 1]) / n for k in range(len(cases))]


def callgrind_rows(n=2000, libs=("gpumemnet", "torch")):
    """[(library, case, instructions per op)]: one valgrind process per library."""
    rows = []
    for lib in libs:
        if not _available(lib):
            continue
        cases = [c for c in CASES if c[0] == lib]
        counts = callgrind_instructions(lib, [(setup, stmt) for _, _, setup, stmt in cases], n)
        rows += [(lib, name, count) for (_, name, _, _), count in zip(cases, counts)]
    return rows


def _print_pairs(rows, unit, fmt):
    by = {(lib, name): rest for lib, name, *rest in rows}
    names = list(dict.fromkeys(name for _, name, *_ in rows))
    print(f"{'op on 16 float32':42s} {'gpumemnet':>12s} {'torch':>12s} {'ratio':>7s}   ({unit})")
    for name in names:
        g, t = by.get(("gpumemnet", name)), by.get(("torch", name))
        ratio = f"{g[0] / t[0]:7.2f}" if g and t else ""
        print(f"{name:42s} {fmt(g):>12s} {fmt(t):>12s} {ratio}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--number", type=int, default=20000, help="calls per timed repeat")
    p.add_argument("--rounds", type=int, default=5, help="paired rounds")
    p.add_argument("--callgrind", action="store_true", help="count instructions under valgrind instead")
    p.add_argument("--n", type=int, default=2000, help="ops per callgrind segment")
    p.add_argument("--libs", default="gpumemnet,torch")
    args = p.parse_args()
    import gpumemnet as gm
    info = gm._C._build_info() if hasattr(gm._C, "_build_info") else {}
    print(f"gpumemnet {gm.__version__}; BLAS: {info.get('blas', '?')}; threads 2")
    libs = tuple(args.libs.split(","))
    if args.callgrind:
        _print_pairs(callgrind_rows(args.n, libs), "instructions per op", lambda r: f"{r[0]:.0f}" if r else "-")
    else:
        _print_pairs(timed_rows(args.number, args.rounds, libs), "µs per op, median ± spread",
                     lambda r: f"{r[0]:.2f}±{r[1]:.2f}" if r else "-")


if __name__ == "__main__":
    main()
