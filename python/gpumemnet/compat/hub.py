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


def _hubconf(repo_dir):
    """The hubconf.py module of a local repository (imported with the directory on sys.path, as PyTorch's)."""
    import importlib.util
    import sys
    path = os.path.join(repo_dir, "hubconf.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"torch.hub: no hubconf.py in {repo_dir}")
    sys.path.insert(0, repo_dir)
    try:
        spec = importlib.util.spec_from_file_location("hubconf", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_dir)
    return module


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """torch.hub.load: from a local directory (source="local": its hubconf.py's entry point, called with the
    arguments); gpumemnet fetches nothing from GitHub."""
    if source != "local":
        raise NotImplementedError("torch.hub.load: gpumemnet does not fetch models from hubs; clone the repository "
                                  "and pass its directory with source='local'")
    entry = getattr(_hubconf(repo_or_dir), model, None)
    if not callable(entry):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return entry(*args, **kwargs)


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True):  # noqa: A001
    """The entry points of a local repository's hubconf.py (a directory: gpumemnet fetches nothing)."""
    if not os.path.isdir(github):
        raise NotImplementedError("torch.hub.list: gpumemnet does not fetch repositories; pass a local directory")
    module = _hubconf(github)
    return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


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
