"""The layers of gpumemnet.nn, one family per file; see gpumemnet/nn/__init__.py for the public names."""
from .module import Module  # noqa: F401
from .container import Sequential, ModuleList, ModuleDict  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .conv import Conv2d, ConvTranspose2d, Conv3d  # noqa: F401
from .pooling import MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, GlobalAvgPool2d, GlobalMaxPool2d  # noqa: F401
from .activation import (  # noqa: F401
    ReLU, LeakyReLU, Sigmoid, Tanh, GELU, SiLU, Hardswish, Hardsigmoid, Mish, Hardtanh, ReLU6, ELU, Softplus, Softmax,
    LogSoftmax, Softmax2d, PReLU)
from .dropout import Dropout, Dropout2d  # noqa: F401
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm  # noqa: F401
from .normalization import GroupNorm, LayerNorm  # noqa: F401
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from .loss import CrossEntropyLoss, MSELoss, L1Loss, BCEWithLogitsLoss  # noqa: F401
from .misc import Flatten, Upsample  # noqa: F401

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "Identity", "Linear", "Conv2d", "ConvTranspose2d",
           "Conv3d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "GlobalAvgPool2d", "GlobalMaxPool2d", "ReLU", "LeakyReLU",
           "Sigmoid", "Tanh", "GELU", "SiLU", "Hardswish", "Hardsigmoid", "Mish", "Hardtanh", "ReLU6", "ELU",
           "Softplus", "Softmax", "LogSoftmax", "Softmax2d", "PReLU", "Dropout", "Dropout2d", "BatchNorm1d",
           "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "GroupNorm", "LayerNorm", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d",
           "CrossEntropyLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss", "Flatten", "Upsample"]
