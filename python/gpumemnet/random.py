"""gm.random (the package's face, layer 4): the global Philox generator's public path.

The functions live in gpumemnet/_core/random.py, where the libraries (utils.checkpoint) reach them."""
from ._core.random import (manual_seed, get_rng_state, set_rng_state, initial_seed, seed, Generator,  # noqa: F401
                           default_generator)

import contextlib

__all__ = ["manual_seed", "get_rng_state", "set_rng_state", "initial_seed", "seed", "Generator",
           "default_generator", "fork_rng"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """PyTorch's torch.random.fork_rng: random numbers drawn inside do not move the generator outside (its state
    is restored on exit). gpumemnet has one generator for every device, so devices are accepted and need no list."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
