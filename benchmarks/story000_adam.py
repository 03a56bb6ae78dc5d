"""Story 000's network, one fp32 training step at batch 1, predicted on meta against the story's 15.92 GiB card:
with gpumemnet's fused Adam, and with a PyTorch-style Adam (gm.memory.TorchStyleAdam: the single-tensor loop of
PyTorch 1.5-1.7 that the story's traceback shows, weight decay on: a gradient copy, the sqrt temporary and the
quotient per parameter). Nothing real is allocated; it runs in about a second on a laptop.

--offload (issue 15's figures): the device and host peaks of the step for a CUDA card under fp32 Adam, offloaded
Adam (Adam(offload="cpu")) and offloaded Adam with bfloat16 parameters, each offloaded one also with its gradient
copies overlapped with backward (overlap_grad_copies()), and fp32 Adam with the activations saved on the host
(save_on_cpu(pin_memory=True)): predicted at full size on meta, and at a
reduced size (--div, --height, --width) predicted and measured on CUDA (a GPU, or the emulator of a
GPUMEMNET_CUDA=emu build) when one is there, with the step time of each configuration measured there (median of
--steps) beside the slowdown the planner's cost model predicts for it (its fixed factors, or with --calibrate
the rates gm.memory.calibrate() measures: host link, CPU Adam).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/story000_adam.py [--offload [--div 16 ...]]
"""
import contextlib
import functools
import time

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F

GiB = 1 << 30
CARD = int(15.92 * GiB)  # "GPU 0; 15.92 GiB total capacity"


class Story000(nn.Module):
    """The torchsummary table of the story: eight 3x3 convolutions, five 2x2 max pools, Dropout2d, two huge
    Linear layers (fc1: 583.7M parameters, fc2: 361.0M), input 2 x 384 x 160. div divides the channels and the
    Linear width, height and width the input (multiples of 32), for runs at a reduced size."""

    def __init__(self, div=1, height=384, width=160, device="meta"):
        super().__init__()
        c = [2] + [w // div for w in (64, 128, 256, 256, 512, 512, 512, 512)]
        for i in range(1, 9):
            setattr(self, f"conv{i}", nn.Conv2d(c[i - 1], c[i], 3, padding=1, device=device))
        self.pool = nn.MaxPool2d(2, 2)
        self.dropout = nn.Dropout2d(0.5)
        hidden = 19000 // div
        self.fc1 = nn.Linear(c[8] * (height // 32) * (width // 32), hidden, device=device)
        self.fc2 = nn.Linear(hidden, hidden, device=device)

    def forward(self, x):
        r, p = F.relu, self.pool
        x = p(r(self.conv1(x)))
        x = p(r(self.conv2(x)))
        x = p(r(self.conv4(r(self.conv3(x)))))
        x = p(r(self.conv6(r(self.conv5(x)))))
        x = p(r(self.conv8(r(self.conv7(x)))))
        return self.fc2(r(self.fc1(self.dropout(x).flatten(1))))


CONFIGS = [  # (name, optimizer factory, parameter dtype, activations saved on the host)
    ("fp32 Adam", lambda ps: gm.optim.Adam(ps), None, False),
    ("fp32 Adam, activations on host", lambda ps: gm.optim.Adam(ps), None, True),  # save_on_cpu(pin_memory=True)
    ("offloaded Adam", lambda ps: gm.optim.Adam(ps, offload="cpu"), None, False),
    ("offloaded Adam + bf16 params", lambda ps: gm.optim.Adam(ps, offload="cpu"), gm.bfloat16, False),
    # the gradients go down during backward (overlap_grad_copies): the host holds them all until the step
    ("offloaded Adam, overlapped", lambda ps: gm.optim.Adam(ps, offload="cpu").overlap_grad_copies(), None, False),
    ("offloaded Adam + bf16, overlapped", lambda ps: gm.optim.Adam(ps, offload="cpu").overlap_grad_copies(),
     gm.bfloat16, False),
]


def _predict(model, shape, opt, dtype, k=1, on_host=False):
    est = gm.memory.estimate(model, shape, F.mse_loss, optimizer=opt, batch_size=k, device="cuda", param_dtype=dtype,
                             accumulation_steps=k, save_on_cpu=on_host)
    return est


def _measure(div, height, width, opt, dtype, steps, k=1, on_host=False):
    """One configuration on CUDA: device and host (pinned) peaks of the steps, the bytes the last one moved across
    the bus, and their median time."""
    import statistics
    from gpumemnet._core import offload as _off
    gm.manual_seed(0)
    model = Story000(div, height, width, device="cuda")
    if dtype is not None:
        model = model.to(dtype)
    x = gm.randn(k, 2, height, width).to("cuda", dtype or gm.float32)  # k micro-batches of 1
    with gm.no_grad():
        y = gm.zeros_like(model(x))
    o = opt(model.parameters())
    gm.cuda.synchronize()
    for dev in ("cuda", "cpu-pinned"):
        gm.memory.reset_peak_memory_stats(dev)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        _off.reset_bytes_moved()
        o.zero_grad()
        for i in range(k):
            with gm.autograd.graph.save_on_cpu(pin_memory=True) if on_host else contextlib.nullcontext():
                loss = F.mse_loss(model(x[i:i + 1]), y[i:i + 1])
            (loss / k if k > 1 else loss).backward()
            loss = None
        o.step()
        gm.cuda.synchronize()
        times.append(time.perf_counter() - t)
    r = {"device_peak": gm.memory.max_memory_allocated("cuda"),
         "host_peak": gm.memory.max_memory_allocated("cpu-pinned"),
         "step_s": statistics.median(times[1:] or times), "moved": sum(_off.bytes_moved().values())}
    del model, o, x, y
    return r


def offload(args):
    MiB = 1 << 20
    model = Story000()
    n = sum(p.numel() for p in model.parameters())
    print(f"story-000 net, batch 1, for a CUDA card, predicted on meta (full size, {n / 1e6:.1f}M parameters):")
    for name, opt, dtype, on_host in CONFIGS:
        est = _predict(model, (2, 384, 160), opt, dtype, on_host=on_host)
        print(f"  {name:34s} device peak {est.total / GiB:6.2f} GiB, host peak {est.host_peak / GiB:6.2f} GiB, "
              f"{est.bytes_moved / GiB:5.2f} GiB across the bus per step")
    # The full-size model's 3.6 GiB of meta parameters go before the reduced estimates: an estimate's blocks may
    # land in the free rest of a segment that another live meta tensor holds, and then count differently (the
    # bf16 row below read 6.31 MiB instead of 5.87 with it alive).
    del model, est
    gm.memory.empty_cache("meta")
    if not gm.cuda.is_available():
        print("no CUDA (build with GPUMEMNET_CUDA=emu for the emulator): the measured rows are skipped")
        return
    d, h, w, k = args.div, args.height, args.width, args.accumulation_steps
    small = Story000(d, h, w)
    n = sum(p.numel() for p in small.parameters())
    print(f"reduced size (channels and width / {d}, input 2 x {h} x {w}, {n / 1e6:.2f}M parameters"
          f"{f', {k} micro-batches of 1 per step' if k > 1 else ''}) on {gm.cuda.get_device_name(0)}: "
          f"predicted (meta) / measured")
    base = None
    for name, opt, dtype, on_host in CONFIGS:
        est = _predict(small, (2, h, w), opt, dtype, k, on_host)
        m = _measure(d, h, w, opt, dtype, args.steps, k, on_host)
        base = base or m["step_s"]
        rates = gm.memory.calibrate() if args.calibrate else None
        timing = rates and "host_link" in rates and dict(bandwidth=rates["host_link"], cpu_adam=rates["cpu_adam"],
                                                          step_seconds=base)
        cost = gm.memory.planner.offload_cost("offload" in name, on_host, est if timing else None, timing or None,
                                              overlap_grad_copies=est.overlap_grad_copies)
        print(f"  {name:34s} device {est.total / MiB:6.2f} / {m['device_peak'] / MiB:6.2f} MiB, host "
              f"{est.host_peak / MiB:6.2f} / {m['host_peak'] / MiB:6.2f} MiB, bus {est.bytes_moved / MiB:5.2f} / "
              f"{m['moved'] / MiB:5.2f} MiB; step {m['step_s'] * 1e3:7.1f} ms "
              f"({m['step_s'] / base:.2f}x; cost model {cost:.2f}x)")


def main():
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--offload", action="store_true")
    p.add_argument("--div", type=int, default=16)
    p.add_argument("--height", type=int, default=64)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--accumulation-steps", type=int, default=1,
                   help="--offload's measured rows: micro-batches of 1 per step (an overlapped optimizer sends the "
                        "gradients down once per micro-batch)")
    p.add_argument("--calibrate", action="store_true",
                   help="the cost model from gm.memory.calibrate()'s rates (measured once, cached), not fixed factors")
    args = p.parse_args()
    if args.offload:
        return offload(args)
    model = Story000()
    rows = [("gpumemnet fused Adam", None),
            ("PyTorch-style Adam (weight_decay)", functools.partial(gm.memory.TorchStyleAdam, weight_decay=1e-4))]
    print(f"story-000 net, fp32, batch 1, training steps with Adam (the highest: from the second on its state is "
          f"alive in backward); card {CARD / GiB:.2f} GiB")
    for name, opt in rows:
        t = time.perf_counter()
        est = gm.memory.estimate(model, (1, 2, 384, 160), optimizer=opt)
        dt = time.perf_counter() - t
        print(f"  {name:36s} predicted peak {est.total / GiB:6.2f} GiB (in {est.peak_scope}; step 1: "
              f"{est.first_step_total / GiB:.2f} GiB): "
              f"{est.verdict(CARD)}   [estimate took {dt:.2f} s]")


if __name__ == "__main__":
    main()
