"""Where a CUDA training step's time goes, gpumemnet beside PyTorch, in one run (issue 14, item 6).

    python benchmarks/cuda_step_anatomy.py [--models mobilenet_v2 resnet18] [--batches 4 32] [--steps 20]
        [--json PATH]

Each side runs in its own process (gpumemnet's torch alias and PyTorch cannot share one) and reports:
  1. per-op host cost on CUDA: `a + b` on 16 floats, with and without grad, launched back to back (µs per op);
  2. the convolution passes of benchmarks' conv shapes (--conv-batches, 8 and 64): forward, input and weight
     gradient, in TF32-off and TF32-on math, and for gpumemnet the cuDNN algorithm it picked (algo, math, workspace bytes);
  3. each model's fp32 step time at every batch: a step whose time barely grows with the batch is bound by the
     host (launches, per-op cost, synchronisations), not by the GPU;
  4. a profile of one model's steps: gpumemnet's by cProfile (each C call's own time is its host cost, a
     synchronisation included), PyTorch's by torch.profiler (self CPU time per op, kernels per step, GPU time);
  5. at --phase-batch (64), where the GPU's work dominates: forward, backward and optimizer step apart, and the
     forward per module type (a synchronisation around each leaf module).
A step whose host part (until its last launch returns) is close to its whole time is bound by the host."""
import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CONV = [  # name, input (N at batch 8), weight, stride, padding
    ("3x3 64->64 56x56", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("3x3 256->256 14x14", (8, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    ("1x1 128->128 28x28", (8, 128, 28, 28), (128, 128, 1, 1), 1, 0),
    ("7x7/2 3->64 112x112", (8, 3, 112, 112), (64, 3, 7, 7), 2, 3),
]


def _best(fn, sync, repeat=20):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def _per_op(torch, sync, n=2000):
    out = {}
    for grad in (False, True):
        a = torch.rand(16, device="cuda", requires_grad=grad)
        b = torch.rand(16, device="cuda")
        for _ in range(100):
            a + b
        sync()
        t = time.perf_counter()
        for _ in range(n):
            a + b
        sync()
        out["grad" if grad else "no_grad"] = (time.perf_counter() - t) / n * 1e6
    return out


def _conv(torch, gm, sync, batches, repeat):
    import numpy as np
    rows = []
    rng = np.random.default_rng(0)
    for name, xs0, ws, stride, pad in CONV:
        for batch in batches:
            xs = (batch,) + xs0[1:]
            x = torch.from_numpy(rng.standard_normal(xs, dtype=np.float32)).to("cuda")
            w = torch.from_numpy(rng.standard_normal(ws, dtype=np.float32)).to("cuda")
            with torch.no_grad():
                y = torch.nn.functional.conv2d(x, w, None, stride, pad)
            g = torch.from_numpy(rng.standard_normal(tuple(y.shape), dtype=np.float32)).to("cuda")
            flop = 2.0 * y.numel() * ws[1] * ws[2] * ws[3]
            for tf32, bench in ((False, False), (True, False), (True, True)):
                if gm:
                    gm.backends.cudnn.benchmark = bench  # recorded only, until gpumemnet times its candidates
                    gm.backends.cuda.matmul.allow_tf32 = tf32  # today it also decides the convolutions' math
                    gm.backends.cudnn.allow_tf32 = tf32
                    ctx = (stride, pad, 1, 1)
                    passes = {
                        "fwd": lambda: torch.nn.functional.conv2d(x, w, None, stride, pad),
                        "bwd_data": lambda: gm._C.conv2d_backward(g, None, w, *ctx, (True, False, False), tuple(xs)),
                        "bwd_weight": lambda: gm._C.conv2d_backward(g, x, None, *ctx, (False, True, False), None,
                                                                    tuple(ws))}
                else:
                    torch.backends.cudnn.allow_tf32 = tf32
                    torch.backends.cudnn.benchmark = bench

                    def bwd(mask):
                        return lambda: torch.ops.aten.convolution_backward(g, x, w, None, [stride] * 2, [pad] * 2,
                                                                           [1, 1], False, [0, 0], 1, mask)
                    passes = {"fwd": lambda: torch.nn.functional.conv2d(x, w, None, stride, pad),
                              "bwd_data": bwd([True, False, False]), "bwd_weight": bwd([False, True, False])}
                row = {"shape": name, "batch": batch, "tf32": tf32, "benchmark": bench}
                with torch.no_grad():
                    for pname, fn in passes.items():
                        s = _best(fn, sync, repeat)
                        row[pname + "_us"] = s * 1e6
                        row[pname + "_tflops"] = flop / s / 1e12
                        if gm:
                            row[pname + "_algo"] = gm._C._conv_algo_last()
                rows.append(row)
    return rows


def _step_times(torch, models, batches, steps, sync):
    import _models
    out = {}
    for name in models:
        for batch in batches:
            spec = _models.MODELS[name]
            model = _models.build(torch, name).to("cuda")
            x, y = _models.batch(name)
            reps = -(-batch // x.shape[0])
            import numpy as np
            x, y = np.concatenate([x] * reps)[:batch], np.concatenate([y] * reps)[:batch]
            x, y = torch.from_numpy(x).to("cuda"), torch.from_numpy(y).to("cuda")
            step = _models.make_step(torch, name, model, x, y, "fp32", "cuda")
            for _ in range(3):
                step()
            sync()
            ts, hs = [], []
            for _ in range(steps):
                t = time.perf_counter()
                step()
                hs.append(time.perf_counter() - t)  # the host's part: until the last launch returned
                sync()
                ts.append(time.perf_counter() - t)
            out[f"{name} b{batch}"] = {"median_ms": statistics.median(ts) * 1e3, "host_ms": statistics.median(hs) * 1e3,
                                       "input": [batch] + list(spec.input[1:])}
            del step, model
    return out


def _profile(torch, gm, name, sync, steps=10):
    import _models
    model = _models.build(torch, name).to("cuda")
    x, y = _models.batch(name)
    x, y = torch.from_numpy(x).to("cuda"), torch.from_numpy(y).to("cuda")
    step = _models.make_step(torch, name, model, x, y, "fp32", "cuda")
    for _ in range(3):
        step()
    sync()
    if gm:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(steps):
            step()
        sync()
        pr.disable()
        s = io.StringIO()
        st = pstats.Stats(pr, stream=s)
        st.sort_stats("tottime").print_stats(30)
        return s.getvalue()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync()
    ev = prof.key_averages()
    text = ev.table(sort_by="self_cpu_time_total", row_limit=30)
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    gpu_us = sum(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total for e in kernels)
    return text + f"\nkernels per step: {len(kernels) / steps:.0f}, their GPU time per step: {gpu_us / steps / 1e3:.2f} ms\n"


def _phases(torch, models, batch, sync, reps=5):
    """At a batch where the GPU's work dominates: a training step's forward, backward and optimizer step apart (a
    synchronisation between them), and the forward per module type (a synchronisation around each leaf module:
    its launches plus its GPU time), in milliseconds per step."""
    import numpy as np
    import _models
    out = {}
    for name in models:
        model = _models.build(torch, name).to("cuda")
        x, y = _models.batch(name)
        reps_x = -(-batch // x.shape[0])
        x = torch.from_numpy(np.concatenate([x] * reps_x)[:batch]).to("cuda")
        y = torch.from_numpy(np.concatenate([y] * reps_x)[:batch]).to("cuda")
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        per_type, t_start = {}, {}

        def pre(m, inp):
            sync()
            t_start[id(m)] = time.perf_counter()

        def post(m, inp, outp):
            sync()
            k = type(m).__name__
            per_type[k] = per_type.get(k, 0.0) + time.perf_counter() - t_start[id(m)]

        phase = {"forward": 0.0, "backward": 0.0, "step": 0.0}
        for r in range(reps + 2):
            timed = r >= 2
            hooks = [m.register_forward_pre_hook(pre) for m in model.modules() if not list(m.children())] if timed \
                else []
            hooks += [m.register_forward_hook(post) for m in model.modules() if not list(m.children())] if timed \
                else []
            opt.zero_grad()
            sync()
            t0 = time.perf_counter()
            loss = loss_fn(model(x), y)
            sync()
            t1 = time.perf_counter()
            for h in hooks:
                h.remove()
            loss.backward()
            sync()
            t2 = time.perf_counter()
            opt.step()
            sync()
            t3 = time.perf_counter()
            if timed:
                for k, v in (("forward", t1 - t0), ("backward", t2 - t1), ("step", t3 - t2)):
                    phase[k] += v
        if not per_type:
            per_type = {"(none)": 0.0}
        out[f"{name} b{batch}"] = {"phases_ms": {k: v / reps * 1e3 for k, v in phase.items()},
                                   "forward_by_module_ms": {k: v / reps * 1e3 for k, v in per_type.items()}}
        del model, opt
    return out


def side(args):
    gm = None
    if args.side == "gm":
        import gpumemnet as gm
        torch = gm.as_torch()
    else:
        import torch
    sync = torch.cuda.synchronize
    res = {"side": args.side}
    for part, fn in (("per_op_us", lambda: _per_op(torch, sync)),
                     ("conv", lambda: _conv(torch, gm, sync, args.conv_batches, args.repeat)),
                     ("steps", lambda: _step_times(torch, args.models, args.batches, args.steps, sync)),
                     ("profile", lambda: _profile(torch, gm, args.models[0], sync)),
                     ("phases", lambda: _phases(torch, args.models, args.phase_batch, sync))):
        if part not in args.parts:
            continue
        try:
            res[part] = fn()
        except Exception as e:  # noqa: BLE001 - one part's failure must not lose the others
            res[part] = f"failed: {type(e).__name__}: {e}"
        print(f"[{args.side}] {part} done", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump(res, f)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet18"])
    p.add_argument("--batches", nargs="+", type=int, default=[4, 32])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--conv-batches", nargs="+", type=int, default=[8, 64])
    p.add_argument("--repeat", type=int, default=20, help="timed calls per conv pass (the best counts)")
    p.add_argument("--parts", nargs="+", default=["per_op_us", "conv", "steps", "profile", "phases"])
    p.add_argument("--phase-batch", type=int, default=64)
    p.add_argument("--json")
    p.add_argument("--sides", nargs="+", default=["torch", "gm"], help=argparse.SUPPRESS)
    p.add_argument("--side", choices=("gm", "torch"), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        return side(args)
    results = {}
    common = ["--models", *args.models, "--batches", *map(str, args.batches), "--steps", str(args.steps),
              "--conv-batches", *map(str, args.conv_batches), "--repeat", str(args.repeat), "--parts", *args.parts, "--phase-batch", str(args.phase_batch)]
    for s in args.sides:
        out = f"/tmp/anatomy_{s}.json"
        if os.path.exists(out):
            os.remove(out)
        try:
            rc = subprocess.run([sys.executable, __file__, "--side", s, "--out", out, *common], timeout=400).returncode
        except subprocess.TimeoutExpired:
            rc = "timed out"
        results[s] = json.load(open(out)) if os.path.exists(out) else {"rc": rc}
    for s in results:
        r = results[s]
        print(f"== {s}: per-op host cost (µs): {r.get('per_op_us')}")
        print(f"== {s}: steps: {json.dumps(r.get('steps'), indent=1)}")
    t, g = results.get("torch", {}).get("conv"), results.get("gm", {}).get("conv")
    if isinstance(t, list) and isinstance(g, list):
        print("== conv passes, µs (TFLOP/s): shape batch tf32 | torch fwd bwd_data bwd_weight | gm ... | gm algo")
        for a, b in zip(t, g):
            cells = []
            for r in (a, b):
                cells.append(" ".join(f"{r[k + '_us']:.0f}({r[k + '_tflops']:.1f})"
                                      for k in ("fwd", "bwd_data", "bwd_weight")))
            algos = " ".join(str({k: b[p + "_algo"].get(k) for k in ("algo", "math", "workspace", "cached")})
                             if isinstance(b.get(p + "_algo"), dict) else "-" for p in ("fwd", "bwd_data", "bwd_weight"))
            print(f"{a['shape']:22s} b{a['batch']:<3d} tf32={int(a['tf32'])} bench={int(a['benchmark'])} | {cells[0]} | {cells[1]} | {algos}")
    else:
        print("== conv:", t, g)
    tp, gp = results.get("torch", {}).get("phases"), results.get("gm", {}).get("phases")
    if isinstance(tp, dict) and isinstance(gp, dict):
        for case in tp:
            if case not in gp:
                continue
            print(f"== phases of {case} (ms per step): torch {tp[case]['phases_ms']} | gm {gp[case]['phases_ms']}")
            a, b = tp[case]["forward_by_module_ms"], gp[case]["forward_by_module_ms"]
            for k in sorted(set(a) | set(b), key=lambda k: -max(a.get(k, 0), b.get(k, 0))):
                print(f"   forward {k:24s} torch {a.get(k, 0):8.2f}   gm {b.get(k, 0):8.2f}")
    else:
        print("== phases:", tp, gp)
    for s in results:
        print(f"== {s}: profile of {args.models[0]}\n{results[s].get('profile')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
