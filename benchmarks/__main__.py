"""python -m benchmarks: gpumemnet beside PyTorch, in one run, same initial weights, same thread count.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks [--quick] [--json PATH] [--device cpu|cuda]
        [--only NAME ...] [--threads N] [--markdown]
    python -m benchmarks --markdown-from PATH        # README.md's figures table from a saved --json, no run

Run from the repository root. See benchmarks/__init__.py for what is measured and how.
"""
import argparse
import datetime
import importlib.util
import json
import os
import shlex
import sys
import tempfile
import time

from . import _models, _report, _runner

MICRO = ("conv", "adam", "overhead", "callgrind")
README = os.path.join(_runner.REPO, "README.md")

# per run size: paired rounds, warm-up steps, conv batch / best-of / rounds, Adam floats / best-of / rounds,
# per-op calls / best-of / rounds, callgrind ops
SIZES = {
    "quick": dict(rounds=3, warmup=1, conv=(2, 3, 2), adam=(4_000_000, 3, 2), overhead=(5000, 3, 3), callgrind=500),
    "full": dict(rounds=10, warmup=2, conv=(8, 3, 3), adam=(16_000_000, 5, 3), overhead=(20000, 5, 7),
                 callgrind=2000),
}


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few rounds, small kernels: under 3 minutes on 2 cores")
    p.add_argument("--json", metavar="PATH", help="write every figure to PATH")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--only", nargs="+", metavar="NAME", default=[],
                   help=f"models {', '.join(_models.MODELS)}; modes {', '.join(_models.MODES)}; "
                        f"kernels {', '.join(MICRO)}; groups models, micro")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="threads of both libraries (default: the CPUs this process may use)")
    p.add_argument("--rounds", type=int, help="paired rounds per case (default: 3 quick, 10 full)")
    p.add_argument("--warmup", type=int, help="warm-up steps per case (default: 1 quick, 2 full)")
    p.add_argument("--no-torch", action="store_true", help="gpumemnet alone")
    p.add_argument("--markdown", action="store_true", help="write the figures table into README.md")
    p.add_argument("--markdown-from", metavar="PATH", help="write README.md's table from a saved --json; no run")
    args = p.parse_args(argv)
    known = set(_models.MODELS) | set(_models.MODES) | set(MICRO) | {"models", "micro"}
    unknown = [n for n in args.only if n not in known]
    if unknown:
        p.error(f"--only: unknown {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return args


def selection(only):
    """(models, modes, kernels) to run for --only."""
    if not only:
        return list(_models.MODELS), list(_models.MODES), list(MICRO)
    models = [m for m in _models.MODELS if m in only]
    modes = [m for m in _models.MODES if m in only]
    micro = [m for m in MICRO if m in only] or (list(MICRO) if "micro" in only else [])
    if models or modes or "models" in only:
        return models or list(_models.MODELS), modes or list(_models.MODES), micro
    return [], [], micro


def _shown(argv):
    """The command line as the README shows it: without where the output went."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--json", "--markdown"):
            skip = a == "--json"
        elif not a.startswith("--json="):
            out.append(a)
    return out


def have(module):
    return importlib.util.find_spec(module) is not None


def main(argv=None):
    args = parse(argv)
    if args.markdown_from:
        with open(args.markdown_from) as f:
            _report.update_readme(README, _report.markdown(json.load(f)))
        print(f"README.md: figures table written from {args.markdown_from}")
        return 0
    removed = [f"{k}={os.environ[k]}" for k in _runner.OPENBLAS_VARS if k in os.environ]
    if removed:
        print(f"warning: {', '.join(removed)} set in the environment; the benchmark's rule is to unset "
              f"OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE together, so its workers run without them (as "
              f"`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks`)", file=sys.stderr)
    size = dict(SIZES["quick" if args.quick else "full"])
    size.update({k: getattr(args, k) for k in ("rounds", "warmup") if getattr(args, k) is not None})
    models, modes, micro = selection(args.only)
    notes = []
    with_torch = not args.no_torch and have("torch")
    if not args.no_torch and not with_torch:
        notes.append("PyTorch is not importable: gpumemnet alone, no ratios")
    if not have("torchvision"):
        skipped = [m for m in models if m in ("resnet18", "mobilenet_v2", "vgg11")]
        if skipped:
            notes.append(f"torchvision is not importable: {', '.join(skipped)} skipped")
        models = [m for m in models if m not in skipped]
    backends = ["torch", "gm"] if with_torch else ["gm"]
    load = os.getloadavg()
    res = {"environment": {
        "command": "python -m benchmarks " + shlex.join(_shown(argv if argv is not None else sys.argv[1:])),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(), "loadavg": f"{load[0]:.1f}", "device": args.device, "quick": args.quick,
        "threads": args.threads, "rounds": size["rounds"], "warmup": size["warmup"],
        "openblas_env_removed": removed, "omp_wait_policy": _runner.worker_env()["OMP_WAIT_POLICY"],
        "notes": notes}}
    for n in notes:
        print(f"note: {n}")
    start = time.perf_counter()
    res["seconds"] = {}
    with tempfile.TemporaryDirectory(prefix="gm-bench-") as tmp:
        workers = [_runner.Worker(b, args.threads, args.device, tmp) for b in backends]
        try:
            res["environment"]["workers"] = {w.backend: w("info") for w in workers}
            for w in list(workers):
                if args.device == "cuda" and not res["environment"]["workers"][w.backend]["cuda_available"]:
                    note = f"{w.backend}: CUDA is not available, left out"
                    print(f"note: {note}")
                    notes.append(note)
                    workers.remove(w)
                    w.close()
                    del res["environment"]["workers"][w.backend]
            if not workers:
                raise SystemExit("no side can run on cuda")
            backends = [w.backend for w in workers]
            for line in _report.header(res):
                print(line)
            run_all(res, workers, models, modes, micro, size, args, tmp)
        finally:
            for w in workers:
                w.close()
    if "callgrind" in micro:
        print("counting instructions under callgrind ...", flush=True)
        t0 = time.perf_counter()
        res["callgrind"] = _runner.run_callgrind(backends, size["callgrind"])
        res["seconds"]["callgrind"] = time.perf_counter() - t0
    res["seconds"]["total"] = time.perf_counter() - start
    print()
    for line in _report.micro_lines(res):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {args.json}")
    if args.markdown:
        _report.update_readme(README, _report.markdown(res))
        print("README.md: figures table updated")
    return 1 if res.get("failed") else 0


def run_all(res, workers, models, modes, micro, size, args, tmp):
    t0 = time.perf_counter()
    if models:
        res["models"] = []
        printed_header = False
        for model in models:
            for mode in modes:
                try:
                    case = _runner.run_case(workers, model, mode, size["rounds"], size["warmup"], tmp)
                except RuntimeError as e:
                    print(f"{model} {mode}: FAILED: {str(e).splitlines()[0]}", flush=True)
                    res.setdefault("failed", []).append({"model": model, "mode": mode, "error": str(e)[:2000]})
                    for i, w in enumerate(workers):  # a worker that died is replaced; the next case goes on
                        if w.proc.poll() is not None:
                            w.close()
                            workers[i] = _runner.Worker(w.backend, args.threads, args.device, tmp)
                    continue
                res["models"].append(case)
                lines = _report.model_lines({"models": [case]})
                print("\n".join(lines if not printed_header else lines[1:]), flush=True)
                printed_header = True
        res["seconds"]["models"] = time.perf_counter() - t0
    for name, key, fn in (("conv", "conv", _runner.run_conv), ("adam", "adam", _runner.run_adam),
                          ("overhead", "op_overhead", _runner.run_overhead)):
        if name in micro:
            t0 = time.perf_counter()
            res[key] = fn(workers, *size[name])
            res["seconds"][name] = time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
