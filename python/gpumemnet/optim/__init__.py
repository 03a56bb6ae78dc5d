"""gpumemnet.optim (layer 2, a library over _core): fused in-place optimizers (SGD, Adam, AdamW, RMSprop, Adagrad,
Adadelta; Adamax, NAdam, RAdam, Rprop, ASGD, Adafactor and Muon from in-place tensor ops; LBFGS) with PyTorch's API
and state_dict format, and learning-rate schedulers (gpumemnet.optim.lr_scheduler). A step allocates nothing once
the state exists; the state is tagged "optimizer" in the allocator."""
from . import lr_scheduler  # noqa: F401
from . import swa_utils  # noqa: F401
from .adadelta import Adadelta  # noqa: F401
from .adafactor import Adafactor  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adam_variants import Adamax, NAdam, RAdam  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .muon import Muon  # noqa: F401
from .optimizer import NoGradientWarning, Optimizer  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .rprop import ASGD, Rprop  # noqa: F401
from .sgd import SGD  # noqa: F401
from .sparse_adam import SparseAdam  # noqa: F401

__all__ = ["Optimizer", "NoGradientWarning", "SGD", "SparseAdam", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
           "Adamax", "NAdam", "RAdam", "LBFGS", "Rprop", "ASGD", "Adafactor", "Muon", "lr_scheduler", "swa_utils"]
