"""Paired rounds of whole training steps, one worker process per configuration (bf16_step.py, recurrent_step.py...): a
round asks every worker for one step in turn, so the machine's load moves all sides alike. The worker side is
serve_steps; the parent side paired_step_times."""
import subprocess
import sys
import time


def print_blas_config():
    """The OpenBLAS build and kernel in use, where the wheel says (the figures depend on it)."""
    try:
        import scipy_openblas32
        print("OpenBLAS:", scipy_openblas32.get_openblas_config())
    except Exception:  # noqa: BLE001 - the figure is informative only
        pass


def serve_steps(step, warmup=2):
    """Worker: run step warmup times, say "ready", then time one step per "step" line on stdin (ms on stdout)."""
    for _ in range(warmup):
        step()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "step":
            break
        t = time.perf_counter()
        step()
        print(f"{(time.perf_counter() - t) * 1e3:.3f}", flush=True)


def paired_step_times(workers, rounds):
    """workers: {config: (argv, env)} of processes that call serve_steps; {config: [ms per round]}."""
    procs = {c: subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for c, (argv, env) in workers.items()}
    try:
        for p in procs.values():
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a worker stopped before its first step (exit {p.wait()})")
        times = {c: [] for c in workers}
        for _ in range(rounds):
            for c, p in procs.items():
                p.stdin.write("step\n")
                p.stdin.flush()
                times[c].append(float(p.stdout.readline()))
        return times
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
