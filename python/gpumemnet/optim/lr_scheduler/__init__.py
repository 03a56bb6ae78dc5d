"""gpumemnet.optim.lr_scheduler: learning-rate schedulers with PyTorch's names, formulas and state_dict. A scheduler
writes each group's "lr" in optimizer.param_groups (CyclicLR / OneCycleLR also "momentum" or Adam's "betas"),
which the next optimizer step reads. One module per family: _base (one formula of the epoch), _composite
(schedulers of schedulers, and ReduceLROnPlateau), _cyclic (per-batch cycles and warm restarts)."""
from ._base import (ConstantLR, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR, LRScheduler,  # noqa: F401
                    MultiplicativeLR, MultiStepLR, PolynomialLR, StepLR, _LRScheduler, _enable_get_lr_call)
from ._composite import ChainedScheduler, ReduceLROnPlateau, SequentialLR  # noqa: F401
from ._cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR  # noqa: F401

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CyclicLR", "OneCycleLR", "CosineAnnealingWarmRestarts"]
