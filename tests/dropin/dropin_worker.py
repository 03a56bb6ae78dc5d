"""One process of the conformance suite: `python dropin_worker.py torch` (real PyTorch) or `... gm` (gpumemnet
under its torch alias, gm.as_torch(), called before anything imports torch). The two cannot share a process.

It serves requests, one JSON object per line on stdin, and answers each with one JSON line on the file descriptor
given by --reply (the script's own stdout goes to stderr, so that a print in library code cannot garble the
protocol). Arrays travel through .npz files. A request:

  {"task": "train", "model": name, "mode": "float32"|"float64"|"amp"|"cuda_amp", "steps": n,
   "init": path or null, "save_init": path or null, "out": path}
  {"task": "estimate", "model": name}              (gm only)
  {"task": "forward", "model": name, "dtype": "float32"|"float64", "init": path or null, "save_init": path or null,
   "out": path}
                                                   build + one training-mode forward and its loss
  {"task": "list"}                                 torchvision's builder names

The answer: {"ok": true, ...} or {"ok": false, "error": "Type: message", "traceback": "..."}.
"""
import gc
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import dropin_models  # noqa: E402
import dropin_steps  # noqa: E402


PROGRESS = []  # the stages the request being served reached (dropin_steps.train's progress)


def load_npz(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def train(torch, req):
    spec = dropin_models.SPECS[req["model"]]
    init = load_npz(req["init"]) if req.get("init") else None
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, state = dropin_steps.train(torch, spec, init, req["mode"], req["steps"], PROGRESS)
    seconds = time.perf_counter() - t0
    if state is not None and req.get("save_init"):
        np.savez(req["save_init"], **state)
    np.savez(req["out"], **got)
    return {"seconds": seconds, "step_seconds": list(dropin_steps.STEP_SECONDS),
            "warnings": sorted({str(w.message)[:200] for w in caught})}


def forward(torch, req):
    """Build, load the state, one training-mode forward + loss: the CI tier of the builders too big to train."""
    spec = dropin_models.SPECS[req["model"]]
    PROGRESS.append("build")
    model = dropin_steps.no_dropout(torch, dropin_steps.build(torch, spec))
    PROGRESS.append("load")
    if req.get("init"):
        dropin_steps.load_state(torch, model, load_npz(req["init"]))
    elif req.get("save_init"):
        np.savez(req["save_init"], **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    dtype = req.get("dtype", "float32")
    if dtype == "float64":
        model.double()
    x, y = dropin_steps.batch(torch, spec, 0, dtype)
    PROGRESS.append("forward")
    out = model(x)
    got = {f"step0/out/{k}": dropin_steps.to_numpy(o) for k, o in dropin_steps.outputs(out).items()}
    got["step0/loss"] = np.array(dropin_steps.criterion(torch, spec)(out, y).item())
    np.savez(req["out"], **got)
    return {}


def list_builders(torch, req):
    import torchvision.models as tvm
    return {"builders": tvm.list_models(module=tvm) + tvm.list_models(module=tvm.segmentation)}


def estimate(torch, req):
    """gm.memory.estimate of training == the measured peak of three steps on the CPU (zero_grad() after each),
    measured as tests/test_estimate.py measures it: the steps' peak allocated bytes over those live before them
    (the model, the input, the target and the optimizer, whose state the first step creates)."""
    import gpumemnet as gm
    spec = dropin_models.SPECS[req["model"]]
    PROGRESS.append("build")
    model = dropin_steps.build(torch, spec)   # as built: dropout as the builder made it
    loss_fn = dropin_steps.criterion(torch, spec)
    x, y = dropin_steps.batch(torch, spec, 0, "float32")

    def make_opt(params):
        return dropin_steps.optimizer(torch, spec, params)

    PROGRESS.append("estimate")
    est = gm.memory.estimate(model, tuple(spec.input), loss_fn=loss_fn, optimizer=make_opt, target=y)
    assert all(p.grad is None for p in model.parameters()), "estimate touched the model's gradients"
    PROGRESS.append("measure")
    model.train()
    opt = make_opt(model.parameters())
    gc.collect()
    gm.memory.empty_cache("cpu")
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    seconds = None
    for _ in range(STEPS):
        t0 = time.perf_counter()
        out = model(x)
        loss = loss_fn(out, y)
        del out
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad()
        seconds = seconds or time.perf_counter() - t0  # the first step's
    peak = gm.memory.max_memory_allocated("cpu") - base
    return {"estimate": int(est.peak), "measured": int(peak), "estimate_seconds": est.seconds,
            "step_seconds": seconds, "params": int(est.params)}


# the estimate is the highest step's: the first creates the optimizer's state, the later ones run with it alive
STEPS = 3


def main():
    backend = sys.argv[1]
    reply_fd = int(sys.argv[sys.argv.index("--reply") + 1]) if "--reply" in sys.argv else None
    reply = os.fdopen(os.dup(1) if reply_fd is None else reply_fd, "w", buffering=1)
    os.dup2(2, 1)  # prints (and C-level writes) go to stderr from now on
    sys.stdout = sys.stderr
    missing = lambda: []  # noqa: E731
    if backend == "gm":
        import gpumemnet as gm
        from gpumemnet import dropin
        if os.environ.get("GPUMEMNET_DROPIN_STANDINS") == "1":
            # A survey, not a conformance run: missing names get tools/dropin_discover.py's stand-ins (which
            # compute nothing), so that a run goes on past them and shows what fails next.
            sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
            import dropin_discover
            dropin_discover._install_stand_ins()
        gm.as_torch()
        missing = dropin.missing_names
    import torch
    torch.set_num_threads(int(os.environ.get("GPUMEMNET_DROPIN_THREADS", "1")))
    tasks = {"train": train, "estimate": estimate, "forward": forward, "list": list_builders}
    for line in sys.stdin:
        req = json.loads(line)
        PROGRESS.clear()
        known = set(missing())
        try:
            answer = dict(ok=True, **tasks[req["task"]](torch, req))
        except BaseException as e:  # noqa: BLE001 - the answer says what failed; the test decides
            first = str(e).splitlines()[0] if str(e) else ""
            answer = {"ok": False, "error": f"{type(e).__name__}: {first}"[:400],
                      "stage": PROGRESS[-1] if PROGRESS else "import",
                      "traceback": traceback.format_exc()[-4000:]}
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                reply.write(json.dumps(answer) + "\n")
                raise
        answer["missing"] = sorted(set(missing()) - known)  # PyTorch names gpumemnet lacks, first met here
        gc.collect()
        reply.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
