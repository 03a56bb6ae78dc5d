"""The plan's expected slowdown of a fallback against the measured one, on the CPU (issue 15 item 5: "the plan says
how much slower it expects each remedy to be, and the measured step agrees").

tests/fallback_step.py's model (Adam's moments 12 MiB each) under a budget 12 MiB short of its step: plan() puts
the blocks past it in the CPU's fallback, a file mapped from a directory (here a temporary one). Two worker
processes take turns step by step (benchmarks/_paired.py): the plain fp32 step without a limit, and the planned
step under gm.memory.set_limit("cpu", budget) with the fallback set. The parent calibrates this machine into a
temporary cache (gm.memory.calibrate(): the user's own cache is left alone), passes the plain step's median time
as step_seconds, and prints the plan's expected slowdown beside the measured one. The time model prices the CPU's
fallback at the disk's bandwidth: the worst case, a machine short of RAM whose kernel pages the file out. On a
machine with RAM to spare the file stays in the page cache and its bytes cost what memory costs: the line priced at
the host's memory bandwidth (calibrate's host_memory) is that case's expectation.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/plan_time_model.py [--rounds 15]"""
import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MiB = 1 << 20
SHAPE = (3, 16, 16)


def _setup(directory=None):
    """The model, its batch, the plan's keywords and the budget; with directory, the fallback set there."""
    sys.path[:0] = [os.path.join(ROOT, "tests")]
    import gpumemnet as gm
    import gpumemnet.nn.functional as F
    from fallback_step import build
    model, x, y = build("cpu")
    kw = dict(loss_fn=F.mse_loss, batch_size=4, target=(4, 10), device="cpu")
    budget = gm.memory.estimate(model, SHAPE, **kw).peak_reserved - 12 * MiB
    if directory is not None:
        gm.memory.set_fallback("cpu", directory, ("optimizer",))
    return gm, model, x, y, kw, budget


def worker(mode, directory):
    from benchmarks._paired import serve_steps
    gm, model, x, y, kw, budget = _setup(directory if mode == "fallback" else None)
    r_pre = gm.memory.memory_reserved("cpu")
    if mode == "fallback":
        p = gm.memory.plan(model, SHAPE, budget=budget, **kw)
        assert p.fallback, p
        opt = p.optimizer(model.parameters(), lr=1e-3)
        gm.memory.set_limit("cpu", r_pre + budget)  # the budget holds the model, its input and the step
        serve_steps(lambda: p.step(x, y, opt))
    else:
        opt = gm.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            kw["loss_fn"](model(x), y).backward()
            opt.step()
            opt.zero_grad()
        serve_steps(step)


def main(argv=None):
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--rounds", type=int, default=15)
    a = args.parse_args(argv)
    from benchmarks._paired import paired_step_times
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
        spill = os.path.join(tmp, "spill")
        os.mkdir(spill)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "python")] +
                                                          os.environ.get("PYTHONPATH", "").split(os.pathsep)))
        argv = lambda mode: [sys.executable, "-W", "ignore", os.path.abspath(__file__), "--worker", mode, spill]  # noqa
        ms = paired_step_times({m: (argv(m), env) for m in ("plain", "fallback")}, a.rounds)
        gm, model, x, y, kw, budget = _setup(spill)
        from gpumemnet.memory import planner
        rates = gm.memory.calibrate(nbytes=64 * MiB)
        plain = statistics.median(ms["plain"]) / 1e3
        p = gm.memory.plan(model, SHAPE, budget=budget, step_seconds=plain, **kw)
        ratios = sorted(f / q for f, q in zip(ms["fallback"], ms["plain"]))
        in_memory = planner.remedy_cost(fallback=True, estimate=p.estimate,
                                        timing=dict(step_seconds=plain, fallback_bandwidth=rates["host_memory"]))
        print("OpenBLAS:", _blas())
        print(f"plain step: median {plain * 1e3:.2f} ms over {a.rounds} paired rounds; fallback step: median "
              f"{statistics.median(ms['fallback']):.2f} ms; {p.predicted_fallback_peak / MiB:.1f} MiB in the file")
        print(f"calibrated: disk {rates['disk'] / 1e9:.2f} GB/s, host memory {rates['host_memory'] / 1e9:.1f} GB/s")
        print(f"measured slowdown: median {statistics.median(ratios):.2f}x (min {ratios[0]:.2f}, max {ratios[-1]:.2f})")
        print(f"expected by the plan ({p.priced_by}, the disk's rate): {p.remedy_time:.2f}x")
        print(f"expected at the host memory's rate (the file in the page cache): {in_memory:.2f}x")
        gm.memory.set_fallback("cpu", None)


def _blas():
    try:
        import scipy_openblas32
        return scipy_openblas32.get_openblas_config()
    except ImportError:
        return "scipy_openblas32 not importable: kernel not shown"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.path[:0] = [ROOT]
        worker(sys.argv[2], sys.argv[3])
    else:
        sys.path[:0] = [ROOT]
        main()
