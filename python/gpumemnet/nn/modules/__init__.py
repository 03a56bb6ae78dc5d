"""The layers of gpumemnet.nn, one family per file; see gpumemnet/nn/__init__.py for the public names."""
from .module import Module
from .container import Sequential, ModuleList, ModuleDict
from .linear import Identity, Linear
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .pooling import (MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,
                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, GlobalAvgPool2d, GlobalMaxPool2d, FractionalMaxPool2d,
                      FractionalMaxPool3d)
from .activation import (ReLU, LeakyReLU, Sigmoid, Tanh, GELU, SiLU, Hardswish, Hardsigmoid, Mish, Hardtanh, ReLU6,
                         ELU, Softplus, Softmax, LogSoftmax, Softmax2d, PReLU)
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm
from .normalization import GroupNorm, LayerNorm
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .loss import (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss, BCEWithLogitsLoss,
                   KLDivLoss, CTCLoss)
from .misc import Flatten, Upsample, UpsamplingNearest2d, UpsamplingBilinear2d
from .padding import *  # noqa: F403 - the 15 padding layers, listed in padding.py's __all__
from .padding import __all__ as _padding_all
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .sparse import Embedding
from .param_containers import ParameterList, ParameterDict
from .more import *  # noqa: F403 - activations, distances and losses of nn/_functional_more.py (more.py's __all__)
from .more import __all__ as _more_all
from .extra import *  # noqa: F403 - nn/modules/extra.py's __all__
from .extra import __all__ as _extra_all
from .volumetric import *  # noqa: F403 - the 3-D layers, volumetric.py's __all__
from .volumetric import __all__ as _volumetric_all
from .transformer import *  # noqa: F403 - the Transformer layers, transformer.py's __all__
from .transformer import __all__ as _transformer_all
from .rnn import *  # noqa: F403 - the recurrent layers and cells, rnn.py's __all__
from .rnn import __all__ as _rnn_all
from .adaptive import AdaptiveLogSoftmaxWithLoss

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "Identity", "Linear", "Conv1d", "Conv2d",
           "ConvTranspose1d", "ConvTranspose2d",
           "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "GlobalAvgPool2d", "GlobalMaxPool2d", "FractionalMaxPool2d",
           "FractionalMaxPool3d", "ReLU", "LeakyReLU",
           "Sigmoid", "Tanh", "GELU", "SiLU", "Hardswish", "Hardsigmoid", "Mish", "Hardtanh", "ReLU6", "ELU",
           "Softplus", "Softmax", "LogSoftmax", "Softmax2d", "PReLU", "Dropout", "Dropout1d", "Dropout2d",
           "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "SyncBatchNorm", "GroupNorm", "LayerNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
           "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss", "KLDivLoss", "CTCLoss", "Flatten", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d",
           "PixelShuffle", "PixelUnshuffle", "Embedding", "ParameterList", "ParameterDict",
           "AdaptiveLogSoftmaxWithLoss"] + _padding_all + _more_all \
    + _extra_all + _volumetric_all + _rnn_all + _transformer_all
