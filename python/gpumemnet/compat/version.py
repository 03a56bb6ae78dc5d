"""torch.version under the alias: the CUDA version gpumemnet was built with (None without CUDA), no HIP."""
from .. import _C

_info = _C._build_info()
cuda = _info["cuda"]
hip = None
debug = False
git_version = "gpumemnet"
__version__ = _info["version"]
