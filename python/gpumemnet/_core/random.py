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
    """The generator's (seed, offset), enough to replay every random number drawn after this point, as a uint8
    tensor of 16 bytes (two little-endian 64-bit words), the type PyTorch's state has (code clones it, saves it in
    checkpoints and hands it back to set_rng_state)."""
    return state_tensor(_C.get_rng_state())


def state_tensor(state):
    import numpy as np
    words = np.array([v % (1 << 64) for v in state], dtype="<u8")
    return _C.from_numpy(words.view(np.uint8).copy(), 6, "cpu")


_TORCH_CPU_STATE_BYTES = 5056


def state_pair(state, op):
    """(seed, offset) from get_rng_state()'s tensor, or from the pair itself (what earlier versions returned)."""
    if isinstance(state, (tuple, list)) and len(state) == 2 and all(isinstance(v, int) for v in state):
        return int(state[0]), int(state[1])
    if isinstance(state, _C.TensorBase) and state._dtype == 6 and state.numel() == 16:
        seed, offset = (int(v) for v in state.cpu().numpy().reshape(-1).view("<u8"))
        return seed, offset
    if isinstance(state, _C.TensorBase) and state._dtype == 6 and state.numel() == _TORCH_CPU_STATE_BYTES:
        # PyTorch's CPU generator state (MT19937), from a checkpoint PyTorch wrote (HF Trainer's rng_state.pth):
        # gpumemnet's Philox cannot continue that stream, so it is seeded from the state's bytes, deterministically
        import hashlib
        import warnings
        warnings.warn(f"{op}: this is PyTorch's generator state (MT19937), which gpumemnet's generator cannot "
                      f"continue; seeding from it instead (random numbers after the resume differ from PyTorch's)",
                      UserWarning, stacklevel=3)
        digest = hashlib.sha256(bytes(state.cpu().numpy().reshape(-1))).digest()
        return int.from_bytes(digest[:8], "little") >> 1, 0
    raise TypeError(f"{op}: expected the state get_rng_state() returned (a uint8 tensor of 16 bytes), got "
                    f"{type(state).__name__}" + (f" of shape {tuple(state.shape)} and dtype {state.dtype}"
                                                 if isinstance(state, _C.TensorBase) else ""))


def set_rng_state(state):
    _C.set_rng_state(*state_pair(state, "set_rng_state"))


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
    take and give that (seed, offset) as a 16-byte uint8 tensor, as get_rng_state does."""

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
        return state_tensor(self._state)

    def set_state(self, state):
        self._state = state_pair(state, "Generator.set_state")
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


def numpy_generator(generator=None):
    """A NumPy Generator seeded by one 128-bit draw of gpumemnet's Philox (the global stream, or generator's): for
    the draws NumPy makes (samplers' permutations, Poisson samples), reproducible under gm.manual_seed."""
    import numpy as np
    with drawing_from(generator):
        bits = _C.TensorBase.numpy(_C.rand((2,), 1, "cpu")).view(np.uint64)
    return np.random.default_rng([int(b) for b in bits])


def drawing_from(generator):
    """The context a factory's draw runs in: generator's stream, or the global one for None."""
    if generator is None:
        return contextlib.nullcontext()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator: expected a gpumemnet.Generator, got {type(generator).__name__}")
    return generator.drawing()
