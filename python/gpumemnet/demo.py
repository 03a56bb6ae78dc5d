"""python -m gpumemnet.demo — train a small CNN on the 8x8 handwritten digits that ship with scikit-learn, then
show where the memory went.

The network is (Conv 3x3 -> BatchNorm -> ReLU -> MaxPool 2x2) x 2 -> global average pool -> Linear, trained
with gpumemnet.optim.Adam (cosine-annealed rate) on batches from gpumemnet.utils.data.DataLoader. The global
average pool keeps the classifier at 32 x 10 weights (what seed 000 learned the hard way). The same model built
with device="meta" is how gpumemnet estimates memory before a run. Needs the [demo] extra (scikit-learn, tqdm).
Like a user's script, it sits on top of the package (the top layer) and imports only public names."""
import argparse
import time

import numpy as np

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.optim as optim
from gpumemnet.utils.data import DataLoader, TensorDataset


def load_digits(seed=0):
    """(x_train, y_train), (x_test, y_test): 1797 images, 1 x 8 x 8 in [0, 1], an 80/20 split."""
    try:
        from sklearn.datasets import load_digits as sk_load
    except ImportError:
        raise SystemExit('the demo needs scikit-learn: pip install ".[demo]"') from None
    data = sk_load()
    x = (data.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return (x[:split], y[:split]), (x[split:], y[split:])


def make_model(width=32, classes=10, device=None):
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False, device=device), nn.BatchNorm2d(cout, device=device),
                nn.ReLU(inplace=True), nn.MaxPool2d(2)]
    return nn.Sequential(*block(1, width // 2), *block(width // 2, width), nn.GlobalAvgPool2d(),
                         nn.Linear(width, classes, device=device))


def evaluate(model, x, y, batch_size=512):
    model.eval()
    correct = 0
    with gm.no_grad():
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=batch_size):
            correct += int((model(xb).argmax(dim=1) == yb).sum().item())
    model.train()
    return correct / len(x)


def train(epochs=10, batch_size=64, lr=0.01, width=32, seed=0, progress=False):
    """Train on the digits; returns (test accuracy in [0, 1], memory_stats("cpu") taken after training)."""
    gm.manual_seed(seed)
    (xtr, ytr), (xte, yte) = load_digits(seed)
    model = make_model(width)
    opt = optim.Adam(model.parameters(), lr=lr)
    # Annealing the rate to 0 lets the last epoch settle: a constant 0.01 can end on a noisy step.
    schedule = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=batch_size, shuffle=True, generator=seed)
    bar = None
    if progress:
        try:
            from tqdm import tqdm
            bar = tqdm(total=epochs * len(loader), desc="training", unit="batch")
        except ImportError:
            pass
    gm.memory.reset_peak_memory_stats("cpu")
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
            if bar is not None:
                bar.update()
                bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        schedule.step()
    if bar is not None:
        bar.close()
    stats = gm.memory.memory_stats("cpu")
    return evaluate(model, xte, yte), stats


def fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--width", type=int, default=32, help="channels of the second conv block")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    print(make_model(args.width))
    start = time.perf_counter()
    acc, stats = train(args.epochs, args.batch_size, args.lr, args.width, args.seed, progress=True)
    elapsed = time.perf_counter() - start
    print(f"test accuracy {acc * 100:.1f}% after {args.epochs} epochs ({elapsed:.1f} s, "
          f"{gm.get_num_threads()} threads)")
    print(f"peak allocated {fmt(stats['allocated']['peak'])}, reserved {fmt(stats['reserved']['peak'])}; "
          f"peak by category:")
    for name, st in stats["by_category"].items():
        if st["peak"]:
            print(f"  {name:15s} {fmt(st['peak']):>12s}")


if __name__ == "__main__":
    main()
