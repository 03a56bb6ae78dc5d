"""The global Philox generator: counter-based, state = (seed, offset), the same streams on CPU and CUDA."""
from .. import _C


def manual_seed(seed):
    """Seed the generator (and reset its offset to 0)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__}")
    _C.manual_seed(seed)


def get_rng_state():
    """(seed, offset): enough to replay every random number drawn after this point."""
    return _C.get_rng_state()


def set_rng_state(state):
    seed, offset = state
    _C.set_rng_state(seed, offset)
