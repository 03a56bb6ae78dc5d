"""Estimate against measurement for optimizer offload with and without overlapped gradient copies (issue 15): Adam,
AdamW and SGD with momentum (offload="cpu"), fp32 and bf16 parameters, synchronous copies or overlap_grad_copies(),
three steps of 1 or 2 micro-batches. Each row: the device peak of the steps (above what was live before them),
the pinned host peak, the bytes down and up in one step, the bytes down in one micro-batch, the bytes down on the copy stream,
as estimate() predicts them on meta / as the step on CUDA measures them. Byte counts, exact on the emulator of a
GPUMEMNET_CUDA=emu build (tests/test_cuda_estimate_overlap.py asserts them); timings are not taken.

    python benchmarks/offload_overlap_estimate.py     (needs CUDA: a GPU, or the emulator build on PYTHONPATH)
"""
import gc

import numpy as np

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet._core import offload as _off

DEV, PIN, BATCH = "cuda", "cpu-pinned", 4
OPTS = {
    "adam": lambda ps: gm.optim.Adam(ps, lr=1e-2, offload="cpu"),
    "adamw": lambda ps: gm.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, offload="cpu"),
    "sgd_momentum": lambda ps: gm.optim.SGD(ps, lr=1e-2, momentum=0.9, offload="cpu"),
}


def _net(dtype):
    gm.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 5, 7),
                      nn.ReLU(), nn.Linear(7, 3)).to(DEV)
    return m.to(dtype) if dtype is not None else m


def _clean():
    gc.collect()
    for d in (DEV, PIN, "cpu"):
        gm.memory.empty_cache(d)


def _measure(factory, dtype, k):
    model = _net(dtype)
    rng = np.random.default_rng(1)
    with gm.memory.category("input"):
        x = gm.tensor(rng.standard_normal((BATCH, 2, 6, 5)).astype(np.float32)).to(DEV, dtype or gm.float32)
        y = gm.tensor(rng.standard_normal((BATCH, 3)).astype(np.float32)).to(DEV, dtype or gm.float32)
    opt = factory(model.parameters())
    gc.collect()
    for d in (DEV, PIN):
        gm.memory.reset_peak_memory_stats(d)
    d0, h0 = gm.memory.memory_allocated(DEV), gm.memory.memory_allocated(PIN)
    m = BATCH // k
    for _ in range(3):  # the peaks are the steps' highest (as the estimate's); the bytes moved, the last step's
        _off.reset_bytes_moved()
        for i in range(k):
            loss = F.mse_loss(model(x[i * m:(i + 1) * m]), y[i * m:(i + 1) * m])
            (loss / k if k > 1 else loss).backward()
            loss = None
            if i == 0:
                first = _off.bytes_moved()["to_host"]
        opt.step()
        opt.zero_grad()
    r = (gm.memory.max_memory_allocated(DEV) - d0, gm.memory.max_memory_allocated(PIN) - h0, _off.bytes_moved(),
         first, _off.bytes_overlapped()["to_host"])
    del model, opt, x, y
    _clean()
    return r


def main():
    if not gm.cuda.is_available():
        print("no CUDA (build with GPUMEMNET_CUDA=emu for the emulator)")
        return
    print(f"on {gm.cuda.get_device_name(0)}, batch {BATCH}; bytes, estimate / measured")
    print(f"{'optimizer':13s} {'dtype':5s} {'copies':7s} k | device peak     | host peak       | to host       "
          f"| to device     | one micro-batch | copy stream")
    for name, make in OPTS.items():
        for dtype in (None, gm.bfloat16):
            for overlap in (False, True):
                for k in (1, 2):
                    factory = (lambda ps, make=make: make(ps).overlap_grad_copies()) if overlap else make
                    target = gm.empty(BATCH, 3, dtype=dtype or gm.float32, device="meta")
                    est = gm.memory.estimate(_net(dtype), (2, 6, 5), loss_fn=F.mse_loss, optimizer=factory,
                                             batch_size=BATCH, device=DEV, target=target, param_dtype=dtype,
                                             accumulation_steps=k)
                    _clean()
                    d, h, moved, first, ov = _measure(factory, dtype, k)
                    print(f"{name:13s} {'bf16' if dtype else 'fp32':5s} {'overlap' if overlap else 'sync':7s} {k} | "
                          f"{est.peak:6d} / {d:6d} | {est.host_peak:6d} / {h:6d} | {est.bytes_to_host:5d} / "
                          f"{moved['to_host']:5d} | {est.bytes_to_device:5d} / {moved['to_device']:5d} | "
                          f"{est.micro_batch_to_host:5d} / {first:5d}   | {est.overlapped_to_host:5d} / {ov:5d}")


if __name__ == "__main__":
    main()
