"""gm.random (the package's face, layer 4): the global Philox generator's public path.

The functions live in gpumemnet/_core/random.py, where the libraries (utils.checkpoint) reach them."""
from ._core.random import (manual_seed, get_rng_state, set_rng_state, initial_seed, seed, Generator,  # noqa: F401
                           default_generator)

__all__ = ["manual_seed", "get_rng_state", "set_rng_state", "initial_seed", "seed", "Generator",
           "default_generator"]
