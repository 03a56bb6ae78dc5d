"""gpumemnet.memory (layer 3): the memory intelligence, above the libraries it reasons about.

  stats.py       memory_allocated, memory_stats, set_limit, capacity...: the allocator's figures and limits
  timeline.py    record_history, dump_history, plot_timeline, memory_summary
  policy.py      set_fallback (host memory or files when a device is full), set_allocator ("expandable")
  calibration.py calibrate: this machine's bandwidths and rates, measured once and cached (the time model)
  estimator.py   estimate: training steps run on meta (the first, and the steady one)
  summary_table.py  summary (gm.summary): estimate's figures as torchsummary's table
  planner.py     max_batch_size, plan: searches over estimates for a budget
  oom.py         what an OutOfMemoryError says would have fitted (registered into the core's hooks)
  torch_adam.py  TorchStyleAdam: PyTorch's Adam allocations, for estimate(optimizer=TorchStyleAdam)
category and scope (tag allocations) live in the core (_core/scope.py), where the libraries use them.

Importing this package registers its functions into gpumemnet._core.hooks: the lower layers (autograd, the
optimizer, nn.Module, gm.cuda) reach them only through there."""
from .._core import hooks as _hooks
from .._core.scope import category, scope  # noqa: F401
from .stats import (  # noqa: F401
    PINNED, META_HOST, CATEGORIES, CATEGORY_DOCS, format_bytes, memory_allocated, max_memory_allocated, memory_reserved,
    max_memory_reserved, reset_peak_memory_stats,
    empty_cache, memory_stats, set_limit, get_limit, capacity)
from .timeline import (  # noqa: F401
    record_history, history, dump_history, plot_timeline, memory_summary, MemorySummary, Timeline)
from .policy import (  # noqa: F401
    set_fallback, get_fallback, set_allocator, get_allocator, fragmentation)
from .calibration import calibrate  # noqa: F401
from .estimator import estimate, Estimate  # noqa: F401
from .summary_table import summary, Summary  # noqa: F401
from .planner import max_batch_size, plan  # noqa: F401
from .torch_adam import TorchStyleAdam  # noqa: F401
from . import oom as _oom

_hooks.register("explain_oom", _oom.attach)
_hooks.register("explain_oom_last_root", _oom.attach_last_root)
_hooks.register("memory_summary", memory_summary)
_hooks.register("set_limit", set_limit)
