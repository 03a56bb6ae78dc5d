"""The layers of gpumemnet.nn, one family per file; see gpumemnet/nn/__init__.py for the public names."""
from .module import Module  # noqa: F401
from .container import Sequential, ModuleList, ModuleDict  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .conv import Conv2d, ConvTranspose2d  # noqa: F401
from .pooling import MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, GlobalAvgPool2d, GlobalMaxPool2d  # noqa: F401
from .activation import ReLU, LeakyReLU, Sigmoid, Tanh, GELU  # noqa: F401
from .dropout import Dropout, Dropout2d  # noqa: F401
from .batchnorm import BatchNorm2d  # noqa: F401
from .loss import CrossEntropyLoss, MSELoss, L1Loss, BCEWithLogitsLoss  # noqa: F401
from .misc import Flatten, Upsample  # noqa: F401

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "Identity", "Linear", "Conv2d", "ConvTranspose2d",
           "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "GlobalAvgPool2d", "GlobalMaxPool2d", "ReLU", "LeakyReLU",
           "Sigmoid", "Tanh", "GELU", "Dropout", "Dropout2d", "BatchNorm2d", "CrossEntropyLoss", "MSELoss", "L1Loss",
           "BCEWithLogitsLoss", "Flatten", "Upsample"]

# issue 12, nn layers and losses (helper "nnlayers"): kept on their own lines so merges stay clean
from .loss import NLLLoss, SmoothL1Loss, HuberLoss, BCELoss, KLDivLoss  # noqa: F401,E402
__all__ += ["NLLLoss", "SmoothL1Loss", "HuberLoss", "BCELoss", "KLDivLoss"]
from .padding import *  # noqa: F401,F403,E402
from .padding import __all__ as _padding_all  # noqa: E402
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401,E402
from .misc import UpsamplingNearest2d, UpsamplingBilinear2d  # noqa: F401,E402
from .sparse import Embedding  # noqa: F401,E402
from .dropout import Dropout1d, Dropout3d, AlphaDropout, FeatureAlphaDropout  # noqa: F401,E402
from .pooling import (  # noqa: F401,E402
    MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d)
__all__ += _padding_all + ["PixelShuffle", "PixelUnshuffle", "UpsamplingNearest2d", "UpsamplingBilinear2d",
                            "Embedding", "Dropout1d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
                            "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]
