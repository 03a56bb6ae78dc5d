"""torch.cuda's current device and random-number names (gm.cuda re-exports them).

The current device is per thread (csrc/device.c), as the CUDA runtime's is: a bare "cuda" (`x.cuda()`,
`gm.device("cuda")`, `.to("cuda")`) names it. gpumemnet has one Philox generator for every device (the same
streams on the CPU and CUDA, gm.random), so torch.cuda's seeding names reach that generator; where no CUDA
device can be used they do nothing, as PyTorch's do (its CPU stream stays where it was)."""
from .. import _C
from .._core import random as _random

__all__ = ["current_device", "set_device", "device", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
           "is_bf16_supported", "is_initialized", "init", "OutOfMemoryError"]

OutOfMemoryError = _C.OutOfMemoryError  # torch.cuda.OutOfMemoryError; gm.OutOfMemoryError is the same class


def device_count():
    """Number of CUDA devices; 0 when not built with CUDA, or when there is no driver or no GPU."""
    return _C._cuda_device_count()


def why_none():
    """Why no CUDA device can be used here, in words."""
    if _C._build_info()["cuda"] is None:
        return "gpumemnet was built without CUDA (see README, Build)"
    reason = _C._cuda_last_error()
    return f"no CUDA device found ({reason})" if reason else "no CUDA device found"


def require(what, i=None, error=IndexError):
    """Raise RuntimeError when no CUDA device can be used, and `error` when index i is not one of them; returns i."""
    n = device_count()
    if n == 0:
        raise RuntimeError(f"{what}: " + (f"cuda:{i} requested but " if i is not None else "") + why_none())
    if i is not None and not 0 <= i < n:
        raise error(f"{what}: cuda:{i} out of range: there {'is' if n == 1 else 'are'} {n} CUDA "
                    f"device{'' if n == 1 else 's'} (cuda:0..cuda:{n - 1})")
    return i


def _index_of(dev, what):
    """The index of an int, "cuda", "cuda:N" or a gm.device (a bare "cuda" is the current device)."""
    if isinstance(dev, bool):
        raise TypeError(f"{what}: device must be an int or 'cuda:N', got bool")
    if isinstance(dev, int):
        return dev
    text = dev if isinstance(dev, str) else str(dev)
    if text == "cuda":
        return _C._cuda_current_device()
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise ValueError(f"{what}: expected a CUDA device (an index, 'cuda' or 'cuda:N'), got {dev!r}")


def current_device():
    """The index of this thread's current CUDA device (0 until set_device); raises without CUDA, as PyTorch."""
    require("current_device")
    return _C._cuda_current_device()


def set_device(device):
    """Make `device` this thread's current CUDA device: a bare "cuda" names it from now on (`model.cuda()`,
    `x.to("cuda")`). A negative index does nothing, as in PyTorch. Raises when there is no such device."""
    i = _index_of(device, "set_device")
    if i < 0:
        return
    _C._cuda_set_current_device(require("set_device", i, error=RuntimeError))


class device:
    """Context manager: the current CUDA device within (torch.cuda.device); None or a negative index changes
    nothing."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index_of(device, "device")
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.idx != self.prev_idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.prev_idx >= 0:
            _C._cuda_set_current_device(self.prev_idx)
        return False


def is_initialized():
    """Whether CUDA can be used here (gpumemnet initialises it at import)."""
    return device_count() > 0


def init():
    """Nothing to do (gpumemnet initialises CUDA at import); raises, as PyTorch does, when it cannot be used."""
    require("init")


def manual_seed(seed):
    """Seed the generator CUDA draws from (gpumemnet's one generator, gm.manual_seed); nothing without CUDA."""
    _random._check_seed(seed, "manual_seed")
    if device_count() > 0:
        _random.manual_seed(seed)


manual_seed_all = manual_seed  # one generator serves every device


def seed():
    """Seed the generator from the OS's entropy where CUDA can be used (gm.seed)."""
    if device_count() > 0:
        _random.seed()


seed_all = seed


def initial_seed():
    require("initial_seed")
    return _random.initial_seed()


def get_rng_state(device="cuda"):
    """The generator's (seed, offset) as a 16-byte uint8 tensor (gpumemnet's one state for every device)."""
    _index_of(device, "get_rng_state")
    require("get_rng_state")
    return _random.get_rng_state()


def set_rng_state(new_state, device="cuda"):
    _index_of(device, "set_rng_state")
    require("set_rng_state")
    _random.set_rng_state(new_state)


def get_rng_state_all():
    return [_random.get_rng_state() for _ in range(device_count())]


def set_rng_state_all(new_states):
    for state in new_states:
        _random.set_rng_state(state)


def is_bf16_supported(including_emulation=True):
    """Whether the current CUDA device computes in bfloat16: compute capability 8.0 (Ampere) or later, or any
    device with including_emulation (PyTorch's rule); False without CUDA."""
    if device_count() == 0:
        return False
    if including_emulation:
        return True
    return _C._cuda_get_device_properties(current_device())["major"] >= 8
