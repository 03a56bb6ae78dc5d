"""The conformance suite's machinery: a persistent worker process per library (dropin_worker.py: PyTorch, or
gpumemnet under its alias; the two cannot share a process, and starting Python + torchvision for every request
would spend CI's budget on imports) and the comparison criterion of issue 12.

Criterion, for every array compared (outputs of each step, the loss, gradients after step 1, parameters and
buffers after the last step, the eval output), with err(a, ref) = max|a - ref| / max|ref| (the largest error
relative to the array's scale: element-wise relative errors are meaningless near zero):
    err(gm, torch32) <= 1e-3,  or  err(gm, torch64) <= 3 * err(torch32, torch64)
that is, gpumemnet agrees with PyTorch to 1e-3, or it is no further from a float64 PyTorch run of the same steps
than 3x PyTorch's own float32 distance from it (a few SGD steps on random data amplify rounding, and this second
rule accepts exactly the divergence PyTorch itself shows).
"""
import json
import os
import select
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "dropin_worker.py")
RTOL = 1e-3
F64_FACTOR = 3.0

OUTCOMES = {}   # builder -> {check: "ok" | its first failure}: the closing table (conftest.py)
MISSING = {}    # builder -> PyTorch names gpumemnet lacks that its runs met first
SPEED = {}      # builder -> (gpumemnet's, PyTorch's) mean seconds per training step


def record(name, check, outcome):
    OUTCOMES.setdefault(name, {})[check] = outcome


def init_path(workdir, name):
    """Where PyTorch's run saves the model's initial state_dict, which gpumemnet's run loads."""
    return str(workdir / f"{name}.init.npz")


class Worker:
    """python dropin_worker.py <backend>, kept running across requests; restarted after a crash or a timeout."""

    def __init__(self, backend, logdir, env=None):
        self.backend, self.logdir, self.env = backend, logdir, env
        self.proc = None
        self.starts = 0

    def _start(self):
        self.starts += 1
        self.log = os.path.join(self.logdir, f"{self.backend}-worker-{self.starts}.log")
        env = dict(os.environ if self.env is None else self.env)
        self.proc = subprocess.Popen([sys.executable, WORKER, self.backend], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=open(self.log, "w"), text=True, env=env,
                                     cwd=self.logdir)

    def _log_tail(self):
        try:
            with open(self.log) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def request(self, timeout=600, **req):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if ready:  # EOF: the process died
            code = self.proc.wait()
            what = f"the {self.backend} worker died (exit status {code})"
        else:
            what = f"the {self.backend} worker took more than {timeout} s"
        self.close()
        return {"ok": False, "error": what, "stage": "crash", "traceback": self._log_tail()}

    def close(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None


def load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def err(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    if a.shape != ref.shape:
        return np.inf
    if a.size == 0:
        return 0.0
    diff = np.abs(a - ref)
    if not np.all(np.isfinite(a)):
        return np.inf
    scale = np.max(np.abs(ref))
    return float(np.max(diff) / scale) if scale > 0 else float(np.max(diff))


def compare(got, ref32, ref64=None, keys=None, rtol=RTOL):
    """[(key, why)] of the arrays of ref32 that gpumemnet's `got` does not match by the criterion (module
    docstring); [] when all match. Keys are compared in ref32's order (step by step), so the first is where the
    runs parted."""
    bad = []
    for key in (keys or ref32):
        r32 = ref32[key]
        if key not in got:
            bad.append((key, "missing in gpumemnet's run"))
            continue
        g = got[key]
        if np.shape(g) != np.shape(r32):
            bad.append((key, f"shape {np.shape(g)}, PyTorch's {np.shape(r32)}"))
            continue
        e32 = err(g, r32)
        if e32 <= rtol:
            continue
        if ref64 is not None and key in ref64:
            own = err(r32, ref64[key])
            e64 = err(g, ref64[key])
            if e64 <= F64_FACTOR * own:
                continue
            bad.append((key, f"err vs PyTorch {e32:.3g} > {rtol}; err vs float64 {e64:.3g} > "
                             f"{F64_FACTOR} x PyTorch float32's own {own:.3g}"))
        else:
            bad.append((key, f"err vs PyTorch {e32:.3g} > {rtol}"))
    return bad


def float64_diagnosis(got64, ref64, tol=1e-6):
    """Whether gpumemnet's float64 run of the same steps agrees with PyTorch's float64 run in the first forward and
    backward, before any optimizer step (to tol, each array relative to the largest of its kind: a gradient that
    is zero in exact arithmetic, such as a batch norm's bias ahead of a convolution and another batch norm, is
    rounding noise in both). Agreement there means a
    float32 difference comes from the steps' conditioning, not from gpumemnet; a disagreement is a bug.
    Returns (agrees, a sentence saying so)."""
    kind = lambda k: k.split("/")[0]  # noqa: E731 - step0, grad, state, eval
    scale = {}
    for k, v in ref64.items():
        scale[kind(k)] = max(scale.get(kind(k), 0.0), float(np.max(np.abs(v))) if np.size(v) else 0.0)
    worst = []
    for k, r in ref64.items():
        if not k.startswith(("step0/", "grad/")):
            continue  # after an optimizer step even float64 rounding is amplified (1e-7 after 3 ResNet-50 steps)
        if k not in got64 or np.shape(got64[k]) != np.shape(r):
            worst.append((np.inf, k))
            continue
        d = float(np.max(np.abs(got64[k] - r))) if np.size(r) else 0.0
        worst.append((d / max(float(np.max(np.abs(r))) if np.size(r) else 0.0, 1e-6 * scale[kind(k)], 1e-300),
                      k))
    if not worst:  # nothing from before the first step to judge by: no verdict of conditioning
        return False, "no step-1 outputs or gradients were saved to tell conditioning from a bug"
    worst.sort(reverse=True)
    e, k = worst[0]
    if e <= tol:
        return True, f"gpumemnet float64 matches PyTorch float64 in step 1's outputs and gradients (worst {e:.2g} " \
               f"in {k}): the float32 difference is the steps' conditioning"
    return False, f"gpumemnet float64 differs from PyTorch float64 too: {e:.3g} in {k} (a bug, not rounding)"


def describe(bad, limit=6):
    lines = [f"{len(bad)} array(s) differ; first where the runs parted:"]
    lines += [f"  {k}: {why}" for k, why in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"  ... and {len(bad) - limit} more")
    return "\n".join(lines)
