"""python -m gpumemnet.demo — train a small classifier on the handwritten digits that ship with scikit-learn,
then show where the memory went.

The network is a two-layer perceptron written with the core ops (matmul, maximum, exp/log, reductions) and
plain SGD on .grad: the gpumemnet.nn and gpumemnet.optim layers will shorten this to a few lines, and the
demo to a CNN."""
import argparse
import time

import numpy as np

import gpumemnet as gm


def load_digits(seed):
    try:
        from sklearn.datasets import load_digits as sk_load
    except ImportError:
        raise SystemExit('the demo needs scikit-learn: pip install ".[demo]"') from None
    data = sk_load()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return (x[:split], y[:split]), (x[split:], y[split:])


def cross_entropy(logits, onehot):
    """Mean negative log-likelihood of softmax(logits), stabilised by subtracting the row maximum."""
    shifted = logits - logits.amax(dim=1, keepdim=True).detach()
    log_z = shifted.exp().sum(dim=1, keepdim=True).log()
    return -((shifted - log_z) * onehot).sum(dim=1).mean()


def fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    try:
        from tqdm import trange
    except ImportError:
        trange = range

    gm.manual_seed(args.seed)
    (xtr, ytr), (xte, yte) = load_digits(args.seed)
    classes = gm.arange(10)

    with gm.memory.category("parameter"):
        # PyTorch's nn.Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        w1 = ((gm.rand(64, args.hidden) * 2 - 1) / 8.0).requires_grad_()
        b1 = gm.zeros(args.hidden, requires_grad=True)
        w2 = ((gm.rand(args.hidden, 10) * 2 - 1) / args.hidden ** 0.5).requires_grad_()
        b2 = gm.zeros(10, requires_grad=True)
    params = [w1, b1, w2, b2]

    def forward(x):
        return gm.maximum(x @ w1 + b1, 0.0) @ w2 + b2

    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    gm.memory.reset_peak_memory_stats("cpu")
    for _ in trange(args.epochs, desc="training"):
        order = rng.permutation(len(xtr))
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            with gm.memory.category("input"):
                x, y = gm.from_numpy(xtr[idx]), gm.from_numpy(ytr[idx])
            loss = cross_entropy(forward(x), (y.unsqueeze(1) == classes).float())
            loss.backward()
            with gm.no_grad():
                for prm in params:
                    prm -= args.lr * prm.grad
                    prm.grad = None
    elapsed = time.perf_counter() - start

    with gm.no_grad():
        pred = forward(gm.from_numpy(xte)).argmax(dim=1).numpy()
    stats = gm.memory.memory_stats("cpu")
    print(f"test accuracy {np.mean(pred == yte) * 100:.1f}% on {len(yte)} digits "
          f"after {args.epochs} epochs ({elapsed:.1f} s)")
    print(f"peak allocated {fmt(stats['allocated']['peak'])}, reserved {fmt(stats['reserved']['peak'])}; "
          f"peak by category:")
    for name, st in stats["by_category"].items():
        if st["peak"]:
            print(f"  {name:10s} {fmt(st['peak']):>12s}")


if __name__ == "__main__":
    main()
