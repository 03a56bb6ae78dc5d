"""torch.hub: where PyTorch keeps downloads. gpumemnet downloads nothing: loading weights from a URL says so."""
import os
import re
from urllib.parse import urlparse  # noqa: F401  (torch.hub re-exports it; timm imports it from there)

_hub_dir = None
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")  # PyTorch's: the hash in a checkpoint's file name


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    raise NotImplementedError(f"download_url_to_file({url!r}): gpumemnet does not download files")


def _get_torch_home():
    # PyTorch's rule: $TORCH_HOME, else $XDG_CACHE_HOME/torch, else ~/.cache/torch
    return os.path.expanduser(os.getenv("TORCH_HOME",
                                        os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")))


def get_dir():
    return _hub_dir if _hub_dir is not None else os.path.join(_get_torch_home(), "hub")


def set_dir(d):
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def load_state_dict_from_url(url, *args, **kwargs):
    raise NotImplementedError(
        f"load_state_dict_from_url({url!r}): gpumemnet does not download or unpickle PyTorch checkpoints; save "
        "the weights with safetensors (safetensors.torch.save_file) and load them with gm.load")


def load(*args, **kwargs):
    raise NotImplementedError("torch.hub.load: gpumemnet does not fetch models from hubs")


try:  # torch.hub's own rule: tqdm's progress bar where installed, else a silent stand-in of the same shape
    from tqdm import tqdm  # noqa: F401
except ImportError:  # pragma: no cover - tqdm is installed with the test and demo extras
    class tqdm:  # noqa: N801 - PyTorch's name
        def __init__(self, total=None, disable=False, unit=None, *args, **kwargs):
            self.total, self.n = total, 0

        def update(self, n=1):
            self.n += n

        def close(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()
