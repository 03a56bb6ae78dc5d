"""One training step of the demo's digits CNN, small enough to run under valgrind's memcheck (tools/memcheck.sh).

It walks the paths a notebook user's first step walks: build, forward (conv, batch norm, ReLU, pooling, global
average pool, linear), cross-entropy, backward, Adam, a checkpointed forward/backward, no_grad evaluation, a save
and a load of the state. Prints the loss so that a wrong result is visible too."""
import os
import sys
import tempfile

import numpy as np

import gpumemnet as gm
from gpumemnet.demo import make_model
from gpumemnet.utils.checkpoint import checkpoint


def main():
    gm.manual_seed(0)
    model = make_model(width=8)
    opt = gm.optim.Adam(model.parameters(), lr=1e-3)
    x = gm.tensor(np.random.default_rng(0).random((4, 1, 8, 8), dtype=np.float32))
    y = gm.tensor(np.array([0, 1, 2, 3]))
    loss = gm.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    loss2 = gm.nn.functional.cross_entropy(checkpoint(model, x, use_reentrant=False), y)
    loss2.backward()
    opt.step()
    with gm.no_grad():
        model.eval()
        pred = model(x).argmax(dim=1)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "step.safetensors")
        gm.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
        back = gm.load(path)
    assert set(back["model"]) == set(model.state_dict())
    print(f"memcheck step: loss {loss.item():.4f} then {loss2.item():.4f}, predictions {pred.tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
