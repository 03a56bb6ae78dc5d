"""Where a benchmark step's time goes, op by op: every gpumemnet._C function is wrapped with a timer (nested calls
count once, in the outermost), keyed by name and the dtype of its first tensor argument, and one model's step of
benchmarks/_models.py runs a few times. What is not listed (step time minus the tracked total) is Python, the
autograd walk, and the ops the C engine calls without going through _C's Python names (the convolutions'
backward among them). Timings on a busy machine are noisy: compare dtypes and modes within one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/op_profile.py unet autocast [steps]
"""
import collections
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {0: "f32", 1: "f64", 2: "f16", 3: "bf16"}


def main():
    sys.path.insert(0, os.path.dirname(HERE))
    import gpumemnet as gm
    from gpumemnet import _C
    gm.as_torch()
    import torch
    from benchmarks import _models

    name, mode = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    stats = collections.defaultdict(lambda: [0, 0.0])
    depth = [0]

    def dtype_of(args):
        for a in args:
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, _C.TensorBase):
                    return DTYPES.get(t._dtype, str(t._dtype))
        return "-"

    def wrap(fname, f):
        def timed(*a, **k):
            if depth[0]:
                return f(*a, **k)
            depth[0] += 1
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                depth[0] -= 1
                s = stats[(fname, dtype_of(a))]
                s[0] += 1
                s[1] += time.perf_counter() - t
        return timed

    # the backward walk is a container: the ops it calls through Python are what count
    skip = {"_run_backward", "set_scope", "get_scope", "set_category", "get_category"}
    for n in dir(_C):
        f = getattr(_C, n)
        if callable(f) and not isinstance(f, type) and not n.startswith("__") and n not in skip:
            setattr(_C, n, wrap(n, f))
    torch.set_num_threads(int(os.environ.get("THREADS", os.cpu_count())))
    model = _models.build(torch, name)
    x, y = _models.batch(name)
    step = _models.make_step(torch, name, model, torch.from_numpy(x), torch.from_numpy(y), mode, "cpu")
    for _ in range(2):
        step()
    stats.clear()
    ts = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t)
    total = sum(ts)
    print(f"{name} {mode}: step median {np.median(ts) * 1e3:.1f} ms over {steps} steps")
    for (n, d), (c, t) in sorted(stats.items(), key=lambda kv: -kv[1][1])[:30]:
        print(f"  {n:28s} {d:5s} calls/step {c / steps:6.1f}  ms/step {t / steps * 1e3:7.2f}  {100 * t / total:5.1f}%")
    print(f"  tracked {sum(v[1] for v in stats.values()) / steps * 1e3:.1f} ms/step of {total / steps * 1e3:.1f}")


if __name__ == "__main__":
    main()
