"""torch.autograd.profiler: the older profiler API (profile(enabled=True, ...), record_function), which
gpumemnet.profiler implements beside torch.profiler's."""
from ..profiler.autograd_profiler import *  # noqa: F401,F403
from ..profiler.autograd_profiler import __all__  # noqa: F401
