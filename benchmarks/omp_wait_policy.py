"""Step time of a small UNet under OpenMP's two wait policies, on an idle machine and beside busy processes.

gpumemnet sets OMP_WAIT_POLICY=PASSIVE at import unless the user set a policy (python/gpumemnet/_loader.py). This
prints why: each configuration runs in a fresh process (libgomp reads the policy when it loads), first with the
machine otherwise idle, then with --load busy-looping processes beside it (a data loader, a second notebook).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/omp_wait_policy.py [--load 6] [--steps 7]
"""
import argparse
import multiprocessing
import os
import subprocess
import sys

STEP = r"""
import os, sys, statistics, time
sys.path.insert(0, os.path.join({here!r}, "..", "examples"))
import gpumemnet as gm, gpumemnet.nn.functional as F
from seed002_unet import UNet, make_shapes
x, y = make_shapes(16, 32, seed=0)
x, y = gm.from_numpy(x), gm.from_numpy(y)
gm.manual_seed(0)
m = UNet(3, 3, 8, 3)
opt = gm.optim.Adam(m.parameters())
ts = []
for i in range({steps} + 1):
    t = time.perf_counter()
    F.cross_entropy(m(x), y).backward()
    opt.step()
    opt.zero_grad()
    if i:
        ts.append(time.perf_counter() - t)
print(statistics.median(ts) * 1e3)
"""


def spin():
    while True:
        pass


# name -> environment. libgomp without a policy spins 300000 times, then sleeps; ACTIVE with that spin count is
# the same thing, spelled so that gpumemnet's import (which fills in PASSIVE only when no policy is set) keeps it.
POLICIES = {"ACTIVE (spin)": {"OMP_WAIT_POLICY": "ACTIVE"},
            "libgomp default": {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "300000"},
            "PASSIVE (sleep)": {"OMP_WAIT_POLICY": "PASSIVE"}}


def step_ms(policy_env, steps):
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    env.update(policy_env)
    code = STEP.format(here=os.path.dirname(os.path.abspath(__file__)), steps=steps)
    return float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                text=True).stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--load", type=int, default=6, help="busy processes beside the step in the second run")
    p.add_argument("--steps", type=int, default=7)
    args = p.parse_args()
    import gpumemnet as gm
    print(f"UNet (width 8, depth 3), batch 16 of 3x32x32, one Adam step; {gm.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs; median of {args.steps} steps, ms")
    print(f"  {'machine':<28}" + "".join(f"{name:>18}" for name in POLICIES))
    for load in (0, args.load):
        procs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(load)]
        for q in procs:
            q.start()
        try:
            ms = [step_ms(env, args.steps) for env in POLICIES.values()]
        finally:
            for q in procs:
                q.terminate()
        name = "idle" if not load else f"{load} busy processes beside"
        print(f"  {name:<28}" + "".join(f"{v:>18.1f}" for v in ms))


if __name__ == "__main__":
    main()
