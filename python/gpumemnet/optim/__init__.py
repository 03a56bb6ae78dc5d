"""gpumemnet.optim (layer 2, a library over _core): fused in-place optimizers (SGD, Adam, AdamW) with PyTorch's
API and state_dict format, and learning-rate schedulers (gpumemnet.optim.lr_scheduler). A step allocates nothing
once the state exists; the state is tagged "optimizer" in the allocator."""
from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import NoGradientWarning, Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Optimizer", "NoGradientWarning", "SGD", "Adam", "AdamW", "lr_scheduler"]
