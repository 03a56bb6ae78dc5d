"""Training-step time and peak memory of two CNNs, gpumemnet beside PyTorch (CPU, same thread count, same
weights) when torch is importable.

  (a) the demo's digits CNN (python -m gpumemnet.demo), batch 64 of 1 x 8 x 8
  (b) seed 000's network scaled down: the same eight 3x3 convolutions and five 2x2 pools, channels divided by
      `--scale`, and a global-average-pool head instead of fc1/fc2 (the fix the seed's author landed on), at
      2 x 96 x 96, batch 8

A step is zero_grad + forward + cross-entropy + backward + Adam.step on fixed random data. Time: median of
--steps steps after --warmup. Peak: gpumemnet's max_memory_allocated over the timed steps (parameters, Adam
state, gradients, activations, workspace), with its split by category; PyTorch keeps no CPU allocator statistics.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/train_step.py
"""
import argparse
import statistics
import time

import numpy as np

import gpumemnet as gm
import gpumemnet.nn as gnn
import gpumemnet.optim as goptim


# ---- the two networks, written once for gpumemnet.nn and torch.nn ------------------------------------------------
def digits_cnn(nn, width=32, classes=10):
    """The demo's model (gpumemnet/demo.py make_model)."""
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.MaxPool2d(2)]
    return nn.Sequential(*block(1, width // 2), *block(width // 2, width), *_gap(nn), nn.Linear(width, classes))


def story_gap(nn, scale=8, classes=1000):
    """Seed 000's convolutions (64, 128, 256, 512 channels, divided by `scale`) with a global-average-pool head."""
    c1, c2, c3, c4 = (64 // scale, 128 // scale, 256 // scale, 512 // scale)
    layers = []
    for group in ([(2, c1)], [(c1, c2)], [(c2, c3), (c3, c3)], [(c3, c4), (c4, c4)], [(c4, c4), (c4, c4)]):
        for cin, cout in group:
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]
        layers.append(nn.MaxPool2d(2, 2))
    return nn.Sequential(*layers, nn.Dropout2d(0.5), *_gap(nn), nn.Linear(c4, classes))


def _gap(nn):
    # torch has no GlobalAvgPool2d: AdaptiveAvgPool2d(1) + Flatten is the same map
    return [nn.GlobalAvgPool2d()] if nn is gnn else [nn.AdaptiveAvgPool2d(1), nn.Flatten()]


# ---- timing ------------------------------------------------------------------------------------------------------
def median_ms(step, warmup, steps):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def run_gm(model, x, y, warmup, steps):
    opt = goptim.Adam(model.parameters(), lr=1e-3)
    crit = gnn.CrossEntropyLoss()
    xt, yt = gm.from_numpy(x), gm.from_numpy(y)

    def step():
        opt.zero_grad()
        crit(model(xt), yt).backward()
        opt.step()
    step()  # Adam's state exists from here on: the timed steps are the steady state
    gm.memory.reset_peak_memory_stats("cpu")
    ms = median_ms(step, warmup, steps)
    return ms, gm.memory.memory_stats("cpu")


def run_torch(torch, model, x, y, warmup, steps):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    crit = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        crit(model(xt), yt).backward()
        opt.step()
    return median_ms(step, warmup, steps)


def copy_weights(torch, src, dst):
    """gpumemnet -> torch, parameters and buffers in order (the two heads differ in module count, not tensors)."""
    pairs = list(zip(list(src.parameters()) + list(src.buffers()), list(dst.parameters()) + list(dst.buffers())))
    with torch.no_grad():
        for a, b in pairs:
            assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
            b.copy_(torch.from_numpy(np.array(a.detach().numpy())))


def fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--scale", type=int, default=8, help="divide seed 000's channel counts by this")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        gm.set_num_threads(args.threads)
    threads = gm.get_num_threads()
    try:
        import torch
        torch.set_num_threads(threads)
    except ImportError:
        torch = None

    info = gm._C._build_info()
    print(f"gpumemnet {gm.__version__}, {threads} threads, BLAS {info.get('blas')} "
          f"({info.get('blas_package', '')})".replace(" ()", ""))
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads" if torch else "torch not installed")

    rng = np.random.default_rng(0)
    cases = [
        ("digits CNN, batch 64, 1x8x8", digits_cnn, {}, (64, 1, 8, 8), 10),
        (f"story-000 convs / {args.scale} + GAP head, batch 8, 2x96x96", story_gap, {"scale": args.scale},
         (8, 2, 96, 96), 1000),
    ]
    for title, build, kw, shape, classes in cases:
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, classes, shape[0]).astype(np.int64)
        gm.manual_seed(0)
        model = build(gnn, **kw)
        n_params = sum(t.numel() for t in model.parameters())
        print(f"\n{title}: {n_params:,} parameters")
        ms, stats = run_gm(model, x, y, args.warmup, args.steps)
        peaks = ", ".join(f"{k} {fmt(v['peak'])}" for k, v in stats["by_category"].items() if v["peak"])
        print(f"  gpumemnet  {ms:9.2f} ms/step   peak allocated {fmt(stats['allocated']['peak'])} ({peaks})")
        if torch is not None:
            tmodel = build(torch.nn, **kw)
            copy_weights(torch, model, tmodel)
            tms = run_torch(torch, tmodel, x, y, args.warmup, args.steps)
            print(f"  PyTorch    {tms:9.2f} ms/step   (gpumemnet / PyTorch time: {ms / tms:.2f}x)")
        del model


if __name__ == "__main__":
    main()
