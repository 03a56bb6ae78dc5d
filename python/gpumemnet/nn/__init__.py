"""gpumemnet.nn (layer 2, a library over _core): modules, parameters, initialisation and the functional ops, with
PyTorch's names.

    import gpumemnet as gm
    import gpumemnet.nn as nn
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                          nn.GlobalAvgPool2d(), nn.Linear(16, 10))
    model(gm.randn(8, 1, 8, 8))

Every module call runs under the allocator scope "<path> forward" (e.g. "features.3 forward"), so memory
statistics and out-of-memory errors name the layer. Layers take device= and dtype= like PyTorch's factory
arguments: device="meta" builds a model of any size without allocating data, for estimates."""
from .parameter import Buffer, Parameter  # noqa: F401
from . import init  # noqa: F401
from . import functional  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .modules.module import register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from . import utils  # noqa: F401
from . import parallel  # noqa: F401
from . import attention  # noqa: F401
from .parallel import DataParallel  # noqa: F401
from . import _graph_backward  # noqa: F401  (create_graph's formulas for linear, conv2d and the losses)

__all__ = ["Buffer", "Parameter", "init", "functional", "register_module_forward_hook",
           "register_module_forward_pre_hook", "utils", "parallel", "DataParallel"] + _modules_all
