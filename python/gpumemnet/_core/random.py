"""The global Philox generator: counter-based, state = (seed, offset), the same streams on CPU and CUDA; and
Generator, PyTorch's torch.Generator: a (seed, offset) of its own that factories given generator= draw from."""
import contextlib
import os

from .. import _C
from .dtype import device_of, device_str

_DEFAULT_SEED = 67280421310721  # PyTorch's default seed, so initial_seed() agrees before any manual_seed


def _check_seed(seed, op):
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{op}: seed must be an int, got {type(seed).__name__}")
    return seed


def manual_seed(seed):
    """Seed the generator (and reset its offset to 0). Returns the default generator, as PyTorch does."""
    _C.manual_seed(_check_seed(seed, "manual_seed"))
    return default_generator


def get_rng_state():
    """(seed, offset): enough to replay every random number drawn after this point."""
    return _C.get_rng_state()


def set_rng_state(state):
    if not (isinstance(state, (tuple, list)) and len(state) == 2 and all(isinstance(v, int) for v in state)):
        raise TypeError(f"set_rng_state: state must be the (seed, offset) pair of ints get_rng_state() returned, "
                        f"got {type(state).__name__}")
    seed, offset = state
    _C.set_rng_state(seed, offset)


def initial_seed():
    return _C.get_rng_state()[0]


def seed():
    """Seed the default generator from the OS's entropy; returns the seed."""
    s = int.from_bytes(os.urandom(8), "little") >> 1
    manual_seed(s)
    return s


class Generator:
    """A random stream of its own: gm.rand(..., generator=g) draws from g and leaves the global generator (and
    every other Generator) where it was. Its state is (seed, offset) of the same Philox generator, so the same
    seed gives the same numbers as the global generator would, on CPU and CUDA alike. get_state()/set_state()
    take and give that (seed, offset) tuple (PyTorch's give a byte tensor)."""

    def __init__(self, device="cpu"):
        self.device = device_of(device_str(device))
        self._state = (_DEFAULT_SEED, 0)

    def manual_seed(self, seed):
        self._state = (_check_seed(seed, "Generator.manual_seed"), 0)
        return self

    def seed(self):
        s = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._state[0]

    def get_state(self):
        return tuple(self._state)

    def set_state(self, state):
        seed_, offset = state
        self._state = (int(seed_), int(offset))
        return self

    @contextlib.contextmanager
    def drawing(self):
        """Within: the global generator is this one's stream (what a factory given generator= runs under)."""
        saved = _C.get_rng_state()
        _C.set_rng_state(*self._state)
        try:
            yield
        finally:
            self._state = _C.get_rng_state()
            _C.set_rng_state(*saved)

    def __repr__(self):
        return f"<gpumemnet.Generator device={self.device} seed={self._state[0]} offset={self._state[1]}>"


class _DefaultGenerator(Generator):
    """The global generator as a Generator object (gm.default_generator, what manual_seed returns)."""

    def __init__(self):
        self.device = device_of("cpu")

    @property
    def _state(self):
        return _C.get_rng_state()

    @_state.setter
    def _state(self, state):
        _C.set_rng_state(*state)

    @contextlib.contextmanager
    def drawing(self):
        yield


default_generator = _DefaultGenerator()


def drawing_from(generator):
    """The context a factory's draw runs in: generator's stream, or the global one for None."""
    if generator is None:
        return contextlib.nullcontext()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator: expected a gpumemnet.Generator, got {type(generator).__name__}")
    return generator.drawing()
