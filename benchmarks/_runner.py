"""The driver's side of `python -m benchmarks`: the two worker processes and the paired rounds.

Every figure that compares the libraries is measured in paired rounds: each round runs one step (or one
measurement) on each side, one right after the other, the order alternating between rounds, so that a machine
whose speed drifts (other tenants, clocks) slows both alike; the ratio of a round is gm / PyTorch, and a figure is
the median of the rounds with their spread (min and max).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# Convolutions with >= 64 channels (issue 14: 3x3, 1x1, 7x7/2): name, input (N, C, H, W) without N, weight,
# stride, padding. The batch comes from the run's size.
CONV_SHAPES = [
    ("3x3 64->64 56x56", (64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("3x3 256->256 14x14", (256, 14, 14), (256, 256, 3, 3), 1, 1),
    ("1x1 128->128 28x28", (128, 28, 28), (128, 128, 1, 1), 1, 0),
    ("7x7/2 64->64 56x56", (64, 56, 56), (64, 64, 7, 7), 2, 3),
]


def worker_env():
    """The workers' environment: the benchmark's rule is that OpenBLAS picks its kernel and cache size itself
    (both variables unset together, as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`). Both sides get the same
    OpenMP wait policy: the user's OMP_WAIT_POLICY, else PASSIVE (gpumemnet's own default). PyTorch's default,
    threads spinning at a barrier, collapses when the machine has more runnable threads than cores (a digits
    step took 1.2 s instead of 30 ms with 2 threads at load 12 on the 2-core machine): that would measure the
    other tenants, not the libraries."""
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARS}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("KINETO_LOG_LEVEL", "5")  # torch.profiler's start/stop chatter
    return env


class Worker:
    """One benchmarks/_worker.py process (gpumemnet under the alias, or PyTorch), serving JSON requests."""

    def __init__(self, backend, threads, device, log_dir):
        self.backend = backend
        read_fd, write_fd = os.pipe()
        self.log_path = os.path.join(log_dir, f"{backend}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "_worker.py"), backend, "--threads", str(threads),
             "--device", device, "--reply", str(write_fd)],
            stdin=subprocess.PIPE, stdout=self.log, stderr=self.log, pass_fds=(write_fd,), env=worker_env(),
            text=True)
        os.close(write_fd)
        self.replies = os.fdopen(read_fd, "r")

    def __call__(self, task, **req):
        self.proc.stdin.write(json.dumps(dict(task=task, **req)) + "\n")
        self.proc.stdin.flush()
        line = self.replies.readline()
        if not line:
            raise RuntimeError(f"the {self.backend} worker exited ({self.proc.wait()}): {self.tail()}")
        answer = json.loads(line)
        if not answer.pop("ok"):
            raise RuntimeError(f"{self.backend} worker, {task}: {answer['error']}\n{answer['traceback']}")
        return answer

    def tail(self, n=2000):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()[-n:]

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.log.close()


def spread(values):
    """{"median", "min", "max", "n"} of a list of numbers."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def paired(workers, fn, rounds):
    """fn(worker) -> number, in `rounds` paired rounds (order alternating): {backend: [values]}."""
    got = {w.backend: [] for w in workers}
    for r in range(rounds):
        for w in (workers if r % 2 == 0 else workers[::-1]):
            got[w.backend].append(fn(w))
    return got


def _ratio_of_rounds(got, key=lambda v: v):
    if set(got) != {"gm", "torch"}:
        return None
    return spread([key(g) / key(t) for g, t in zip(got["gm"], got["torch"])])


def run_case(workers, model, mode, rounds, warmup, tmp):
    """One model in one mode on every worker: the same initial weights (PyTorch's seeded build, saved and loaded
    by gpumemnet), `warmup` steps, `rounds` paired rounds of one step each, then one step's peak memory."""
    init = os.path.join(tmp, f"{model}.npz")
    params = None
    for w in sorted(workers, key=lambda w: w.backend != "torch"):  # PyTorch first: it writes the weights
        first = w.backend == "torch" or len(workers) == 1
        params = w("setup", model=model, mode=mode, init=None if first else init,
                   save_init=init if first else None)["params"]
    loss0 = {w.backend: w("steps", n=max(1, warmup))["loss0"] for w in workers}
    times = paired(workers, lambda w: w("steps", n=1)["seconds"][0] * 1e3, rounds)
    peaks = {w.backend: w("peak") for w in workers}
    for w in workers:
        w("teardown")
    case = {"model": model, "mode": mode, "params": params, "loss0": loss0,
            "ms": {b: spread(v) for b, v in times.items()}, "ms_rounds": times,
            "ratio": _ratio_of_rounds(times), "peak": peaks}
    if "torch" in peaks and "gm" in peaks:
        case["peak_ratio"] = {k: peaks["gm"][k] / peaks["torch"][k] for k in ("step", "total")
                              if peaks["torch"][k]}
    return case


def run_conv(workers, batch, repeat, rounds):
    """Per shape, paired rounds of each side's best-of-`repeat` GFLOP/s, against each side's own sgemm of the
    same FLOPs and against the faster of the two."""
    rows = []
    for name, xs, ws, stride, padding in CONV_SHAPES:
        shape = [[batch, *xs], list(ws), stride, padding]
        got = paired(workers, lambda w: w("conv", shape=shape, repeat=repeat), rounds)
        row = {"name": name, "batch": batch, "gflop": got[workers[0].backend][0]["gflop"]}
        for backend, runs in got.items():
            side = {}
            for k in ("fwd", "bwd_data", "bwd_weight", "sgemm"):
                side[f"{k}_gflops"] = statistics.median(r[f"{k}_gflops"] for r in runs)
            for k in ("fwd", "bwd_data", "bwd_weight"):
                side[f"{k}_pct_sgemm"] = 100 * side[f"{k}_gflops"] / side["sgemm_gflops"]
            row[backend] = side
        # The ceiling is the machine's: the faster of the two sgemms (one library's sgemm of an odd shape can be
        # far below the other's; each side's share of its own stays in *_pct_sgemm)
        row["best_sgemm_gflops"] = max(row[b]["sgemm_gflops"] for b in got)
        for backend in got:
            for k in ("fwd", "bwd_data", "bwd_weight"):
                row[backend][f"{k}_pct_best_sgemm"] = 100 * row[backend][f"{k}_gflops"] / row["best_sgemm_gflops"]
        rows.append(row)
    return rows


def run_adam(workers, numel, reps, rounds):
    got = paired(workers, lambda w: w("adam", numel=numel, reps=reps), rounds)
    out = {"numel": numel}
    for backend, runs in got.items():
        adam = statistics.median(r["adam_bytes_per_s"] for r in runs)
        copy = statistics.median(r["copy_bytes_per_s"] for r in runs)
        out[backend] = {"adam_gb_s": adam / 1e9, "copy_gb_s": copy / 1e9, "pct_copy": 100 * adam / copy}
    return out


def run_overhead(workers, number, repeat, rounds):
    got = paired(workers, lambda w: w("op_overhead", n=16, number=number, repeat=repeat), rounds)
    out = {"n": 16}
    for kind in ("no_grad", "grad", "requires_grad_under_no_grad"):
        out[kind] = {b: spread([r[kind] for r in runs]) for b, runs in got.items()}
        ratio = _ratio_of_rounds(got, key=lambda r, k=kind: r[k])
        if ratio:
            out[kind]["ratio"] = ratio
    return out


# ---- instruction counts ------------------------------------------------------------------------------------------
def _callgrind_parts(prefix):
    totals = {}
    for name in os.listdir(os.path.dirname(prefix)):
        path = os.path.join(os.path.dirname(prefix), name)
        if name.startswith(os.path.basename(prefix) + "."):
            with open(path) as f:
                for line in f:
                    if line.startswith("summary:"):
                        totals[int(name.rsplit(".", 1)[1])] = int(line.split()[1])
    return totals


def callgrind_one(backend, n, tmp, timeout=600):
    """Instructions per `a + b` (with grad, without) on one side, or None with a reason (see _opcount.py)."""
    out = os.path.join(tmp, f"cg-{backend}.out")
    go = os.path.join(tmp, f"go-{backend}")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-before=getppid",
           f"--callgrind-out-file={out}", sys.executable, os.path.join(HERE, "_opcount.py"), backend, str(n), go]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=worker_env(), text=True)
    try:
        t0 = time.time()
        line = proc.stdout.readline()
        if "ready" not in line:
            return {"error": f"{backend}: no 'ready' from the callgrind run (exit {proc.wait()})"}
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True,
                       timeout=60)
        open(go, "w").close()
        proc.wait(timeout=max(10, timeout - (time.time() - t0)))
    except (subprocess.SubprocessError, OSError) as e:
        proc.kill()
        proc.wait()
        return {"error": f"{backend}: {type(e).__name__}: {e}"}
    parts = _callgrind_parts(out)
    if not all(k in parts for k in (2, 3, 4, 5)):
        return {"error": f"{backend}: callgrind wrote parts {sorted(parts)}, expected 1..5"}
    return {"grad": (parts[3] - parts[2]) / n, "no_grad": (parts[5] - parts[4]) / n}


def run_callgrind(backends, n):
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {"skipped": "valgrind is not installed: no instruction counts"}
    with tempfile.TemporaryDirectory(prefix="gm-bench-cg-") as tmp:
        out = {"n": n, "instructions": {b: callgrind_one(b, n, tmp) for b in backends}}
    g, t = out["instructions"].get("gm", {}), out["instructions"].get("torch", {})
    if "grad" in g and "grad" in t:
        out["ratio"] = {k: g[k] / t[k] for k in ("grad", "no_grad")}
    return out
