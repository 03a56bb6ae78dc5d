"""gpumemnet.nn.utils: what training loops call between backward() and step(), with PyTorch's names: gradient
clipping (clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_; clip_grad_norm is the deprecated alias) and
flattening parameters to one vector and back (parameters_to_vector, vector_to_parameters); the weight
reparametrisations spectral_norm and weight_norm (hook forms: weight_norms.py) and the submodules parametrize and
parametrizations (PyTorch's newer forms); conv/linear + batch-norm fusion (fusion.py); stateless.functional_call;
skip_init; convert_conv2d/3d_weight_memory_format; rnn (PackedSequence and the padding helpers); prune."""
from . import parametrize, parametrizations, prune, rnn, stateless  # noqa: F401
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, get_total_norm  # noqa: F401
from .clip_with_norm import clip_grads_with_norm_  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa: F401
from .init import skip_init  # noqa: F401
from .memory_format import convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format  # noqa: F401
from . import spectral_norm as _spectral_norm_module, weight_norm as _weight_norm_module  # noqa: F401 (the modules)
from .weight_norms import spectral_norm, remove_spectral_norm, weight_norm, remove_weight_norm  # noqa: F401,E402

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "spectral_norm", "remove_spectral_norm", "weight_norm",
           "remove_weight_norm", "parametrize", "parametrizations", "prune", "rnn", "stateless", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights", "skip_init",
           "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]
