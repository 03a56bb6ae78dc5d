"""gpumemnet.nn.utils: what training loops call between backward() and step(), with PyTorch's names: gradient
clipping (clip_grad_norm_, clip_grad_value_; clip_grad_norm is the deprecated alias) and flattening parameters
to one vector and back (parameters_to_vector, vector_to_parameters); and the weight reparametrisations
spectral_norm and weight_norm (weight_norms.py)."""
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, get_total_norm  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from .weight_norms import spectral_norm, remove_spectral_norm, weight_norm, remove_weight_norm  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "spectral_norm", "remove_spectral_norm", "weight_norm", "remove_weight_norm"]
