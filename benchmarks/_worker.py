"""One side of `python -m benchmarks`: `python benchmarks/_worker.py torch|gm --threads N --device cpu|cuda`.
`gm` is gpumemnet under its torch alias (gm.as_torch(), before anything imports torch): the models and steps of
benchmarks/_models.py then run the same lines on both sides. Real PyTorch and the alias cannot share a process.

It serves requests, one JSON object per line on stdin, and answers each with one JSON line on the descriptor
given by --reply (prints of library code go to stderr, so they cannot garble the protocol). Requests:
  {"task": "info"}
  {"task": "setup", "model", "mode", "init": npz or null, "save_init": npz or null}   build one case
  {"task": "steps", "n"}          run n steps: {"seconds": [...], "loss0": the first step's loss}
  {"task": "peak"}                one step's peak memory (see peak())
  {"task": "teardown"}
  {"task": "op_overhead", "n", "number", "repeat"}; {"task": "adam", "numel", "reps"};
  {"task": "conv", "shape": [...], "repeat"}
"""
import gc
import json
import os
import sys
import time
import timeit
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _models  # noqa: E402

BACKEND = sys.argv[1] if __name__ == "__main__" else "torch"
GM = BACKEND == "gm"
torch = None  # the module the worker runs on (gpumemnet's alias when GM)
DEVICE = "cpu"
CASE = {}


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _cpu_bf16():
    """The CPU's bfloat16 products, which decide the autocast figures: "AMX", "AVX512-BF16 (no AMX)" or "none"
    (read from /proc/cpuinfo's flags; "unknown" where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf8") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return "unknown"
    return "AMX" if "amx_bf16" in flags else "AVX512-BF16 (no AMX)" if "avx512_bf16" in flags else "none"


def info(req):
    out = {"backend": BACKEND, "threads": torch.get_num_threads(), "device": DEVICE,
           "cuda_available": bool(torch.cuda.is_available())}
    if GM:
        import gpumemnet as gm
        b = gm._C._build_info()
        out.update(version=gm.__version__, blas=b.get("blas"), blas_core=b.get("blas_core"),
                   blas_threads=b.get("blas_threads"), openmp_threads=b.get("openmp_threads"), cpu_bf16=_cpu_bf16())
    else:
        cfg = torch.__config__.show()
        blas = [ln.split("=", 1)[1].strip(", ") for ln in cfg.replace(",", "\n").splitlines() if "BLAS_INFO" in ln]
        out.update(version=torch.__version__, blas=blas[0] if blas else None,
                   cpu_capability=torch.backends.cpu.get_cpu_capability(),
                   interop_threads=torch.get_num_interop_threads())
    if DEVICE == "cuda" and out["cuda_available"]:
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def setup(req):
    name, mode = req["model"], req["mode"]
    model = _models.build(torch, name)
    if req.get("init"):
        with np.load(req["init"]) as f:
            _models.load_state(torch, model, {k: f[k] for k in f.files})
    if req.get("save_init"):
        np.savez(req["save_init"], **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    if mode == "checkpoint":
        model = _models.enable_checkpointing(torch, name, model)
    model = model.to(DEVICE)
    x, y = _models.batch(name)
    x, y = torch.from_numpy(x).to(DEVICE), torch.from_numpy(y).to(DEVICE)
    CASE.clear()
    CASE.update(model=model, x=x, y=y, step=_models.make_step(torch, name, model, x, y, mode, DEVICE), loss0=None)
    return {"params": int(sum(p.numel() for p in model.parameters()))}


def steps(req):
    seconds = []
    for _ in range(req["n"]):
        sync()
        t = time.perf_counter()
        loss = CASE["step"]()
        sync()
        seconds.append(time.perf_counter() - t)
        if CASE["loss0"] is None:
            CASE["loss0"] = float(loss.float().item())
    return {"seconds": seconds, "loss0": CASE["loss0"]}


def _live_bytes():
    """Bytes of the tensors that stay between steps: parameters, gradients, buffers, optimizer state, the batch
    (each storage once). Only for PyTorch on the CPU, which keeps no allocator statistics."""
    seen, total = set(), 0
    model, opt = CASE["model"], getattr(CASE["step"], "optimizer", None)
    tensors = [CASE["x"], CASE["y"], *model.parameters(), *model.buffers()]
    tensors += [p.grad for p in model.parameters() if p.grad is not None]
    if opt is not None:
        tensors += [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


def peak(req):
    """One step's peak memory: {"step": the peak above the bytes allocated before the step, "total": the peak
    including them, "measure": how}. gpumemnet: its allocator's max_memory_allocated (exact, blocks round to
    512 B), by category too. PyTorch on the CPU: the running sum of the allocation and free events torch.profiler
    records (every allocation through c10's CPU allocator) for the step, plus _live_bytes() for the total.
    On CUDA both: the library's caching allocator's max_memory_allocated."""
    step = CASE["step"]
    gc.collect()
    if GM:
        import gpumemnet as gm
        dev = DEVICE
        gm.memory.reset_peak_memory_stats(dev)
        before = gm.memory.memory_allocated(dev)
        cats = gm.memory.memory_stats(dev)["by_category"]
        step()
        sync()
        after = gm.memory.memory_stats(dev)["by_category"]
        top = gm.memory.max_memory_allocated(dev)
        return {"step": top - before, "total": top, "measure": "allocator max_memory_allocated",
                "by_category": {k: after[k]["peak"] - cats[k]["current"] for k in after}}
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        sync()
        top = torch.cuda.max_memory_allocated()
        return {"step": top - before, "total": top, "measure": "allocator max_memory_allocated"}
    top = profiler_peak(step)
    return {"step": top, "total": top + _live_bytes(), "measure": "profiler allocation events"}


def profiler_peak(fn):
    """The peak of the running sum of the allocation and free events real PyTorch's profiler records while fn()
    runs (every allocation through c10's CPU allocator; oneDNN's private scratch, if any, is not seen)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    current = top = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        current += e.nbytes()
        top = max(top, current)
    return top


def teardown(req):
    CASE.clear()
    gc.collect()
    if GM:
        import gpumemnet as gm
        gm.memory.empty_cache(DEVICE)
    return {}


def op_overhead(req):
    """µs per call of `a + b` on n float32: plain, recording grad, requires_grad under no_grad (best of repeat)."""
    n, number, repeat = req["n"], req["number"], req["repeat"]

    def us(fn):
        fn()
        return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6
    a, b = torch.rand(n, device=DEVICE), torch.rand(n, device=DEVICE)
    ag = torch.rand(n, device=DEVICE, requires_grad=True)
    bg = torch.rand(n, device=DEVICE, requires_grad=True)
    out = {"no_grad": us(lambda: a + b), "grad": us(lambda: ag + bg)}
    with torch.no_grad():
        out["requires_grad_under_no_grad"] = us(lambda: ag + bg)
    return out


def _interleaved(fns, repeat, settle=None, rotate=()):
    """{name: best seconds of `repeat` calls}, the calls of every fn taken in turn, so that a kernel and the
    ceiling it is compared with meet the same machine (a drift or a busy neighbour hits both). settle: {name:
    seconds} to sleep (untimed) after that fn's calls, so that the next call does not start while its idle threads
    still spin (see conv). rotate: names (consecutive in fns) that take turns at the head of their run, one step
    per repeat, so that none is always the one timed right after a settle (see conv)."""
    settle = settle or {}
    for fn in fns.values():
        fn()
    sync()
    best = dict.fromkeys(fns, float("inf"))
    names = list(fns)
    for r in range(repeat):
        order = names
        if rotate:
            i = names.index(rotate[0])
            k = r % len(rotate)
            order = names[:i] + list(rotate[k:]) + list(rotate[:k]) + names[i + len(rotate):]
        for name in order:
            fn = fns[name]
            t = time.perf_counter()
            fn()
            sync()
            best[name] = min(best[name], time.perf_counter() - t)
            if name in settle:
                time.sleep(settle[name])
    return best


def adam(req):
    """Seconds of one Adam step over numel float32 parameters (in 4 tensors; it reads param, grad, exp_avg,
    exp_avg_sq and writes param, exp_avg, exp_avg_sq: 28 bytes per parameter), and of a copy of as many floats
    (8 bytes each: read + write)."""
    numel, reps = req["numel"], req["reps"]
    params = [torch.zeros(numel // 4, device=DEVICE, requires_grad=True) for _ in range(4)]
    for p in params:
        p.grad = torch.rand(numel // 4, device=DEVICE)
    opt = torch.optim.Adam(params, lr=1e-3)
    opt.step()  # the state exists from here on
    src, dst = torch.rand(numel, device=DEVICE), torch.empty(numel, device=DEVICE)
    t = _interleaved({"adam": opt.step, "copy": lambda: dst.copy_(src)}, reps)
    t_adam, t_copy = t["adam"], t["copy"]
    return {"adam_s": t_adam, "copy_s": t_copy, "adam_bytes_per_s": 28 * numel / t_adam,
            "copy_bytes_per_s": 8 * numel / t_copy}


def conv(req):
    """GFLOP/s of conv2d forward, backward to the input and backward to the weight, and of one sgemm of the same
    FLOPs in the im2col GEMM's own shape (G, K/G, C/G*R*S) @ (G, C/G*R*S, N*P*Q): the ceiling."""
    xs, ws, stride, padding = req["shape"]
    repeat = req["repeat"]
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal(xs, dtype=np.float32)).to(DEVICE)
    w = torch.from_numpy(rng.standard_normal(ws, dtype=np.float32)).to(DEVICE)
    with torch.no_grad():
        out = F.conv2d(x, w, None, stride, padding)
    n, k, p, q = out.shape
    crs = ws[1] * ws[2] * ws[3]
    flop = 2.0 * n * k * p * q * crs
    g = torch.from_numpy(rng.standard_normal(tuple(out.shape), dtype=np.float32)).to(DEVICE)
    if GM:
        import gpumemnet as gm
        ctx = (stride, padding, 1, 1)
        bd = lambda: gm._C.conv2d_backward(g, None, w, *ctx, (True, False, False), tuple(xs))  # noqa: E731
        bw = lambda: gm._C.conv2d_backward(g, x, None, *ctx, (False, True, False), None, tuple(ws))  # noqa: E731
    else:
        def bwd(mask):
            return lambda: torch.ops.aten.convolution_backward(g, x, w, None, [stride] * 2, [padding] * 2, [1, 1],
                                                               False, [0, 0], 1, mask)
        bd, bw = bwd([True, False, False]), bwd([False, True, False])
    a = torch.from_numpy(rng.standard_normal((1, k, crs), dtype=np.float32)).to(DEVICE)
    b = torch.from_numpy(rng.standard_normal((1, crs, n * p * q), dtype=np.float32)).to(DEVICE)
    # settle: the ceiling's sgemm runs on the BLAS's own thread pool; gpumemnet's OpenBLAS worker then spins for
    # OPENBLAS_THREAD_TIMEOUT (2^20 cycles, ~0.4 ms) and, on 2 cores, took one from the forward timed right after
    # it: the 1x1 128->128 28x28 forward (0.23 ms in a loop of its own, 220 GFLOP/s) measured 118-137 so, 170-180
    # with 2 ms between the sgemm and it. The sleep is untimed, after the ceiling only, the same on both sides; the
    # three passes still follow each other as a network's layers do. They take turns at the head (rotate): the
    # pass timed first after the sleep paid for it, the same gpumemnet code 10-15 % slower there than second
    # (1x1 128->128 28x28 forward, batch 2, 2 threads: 51 against 58 %, 90 against 99 % of sgemm, medians of
    # 100 rounds), and with a fixed order that was always the forward.
    with torch.no_grad():
        t = _interleaved({"fwd": lambda: F.conv2d(x, w, None, stride, padding), "bwd_data": bd, "bwd_weight": bw,
                          "sgemm": lambda: torch.matmul(a, b)}, repeat, settle={"sgemm": 0.002},
                         rotate=("fwd", "bwd_data", "bwd_weight"))
    return {"gflop": flop / 1e9, **{f"{k}_gflops": flop / v / 1e9 for k, v in t.items()}}


TASKS = {"info": info, "setup": setup, "steps": steps, "peak": peak, "teardown": teardown,
         "op_overhead": op_overhead, "adam": adam, "conv": conv}


def main():
    global torch, DEVICE
    args = sys.argv[2:]
    threads = int(args[args.index("--threads") + 1])
    DEVICE = args[args.index("--device") + 1]
    reply = os.fdopen(int(args[args.index("--reply") + 1]), "w", buffering=1)
    os.dup2(2, 1)  # prints (and C-level writes) go to stderr from now on
    sys.stdout = sys.stderr
    if GM:
        import gpumemnet as gm
        gm.as_torch()
    import torch as _torch
    torch = _torch
    torch.set_num_threads(threads)
    if GM:
        import gpumemnet as gm
        gm.set_num_threads(threads)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            answer = dict(ok=True, **TASKS[req["task"]](req))
        except Exception as e:  # noqa: BLE001 - the driver reports it
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"[:400], "traceback": traceback.format_exc()}
        reply.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
