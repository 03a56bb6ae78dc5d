"""parameters_to_vector / vector_to_parameters as torch.nn.utils (one flat vector of all parameters, and back)."""
from ... import _C
from ..._core import creation
from ..._core.autograd import no_grad

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param, old_device):
    if old_device is not None and param.device != old_device:
        raise TypeError(f"Found two parameters on different devices, this is currently not supported: "
                        f"{old_device} and {param.device}")
    return param.device


def parameters_to_vector(parameters):
    """A new 1-D tensor, the parameters flattened and concatenated in order (differentiable, as in PyTorch)."""
    device, flat = None, []
    for p in parameters:
        device = _check_same_device(p, device)
        flat.append(p.reshape(-1))
    return creation.cat(flat)


def vector_to_parameters(vec, parameters):
    """Each parameter's .data becomes a view of its slice of the 1-D `vec`, in order, as PyTorch's: the parameter
    objects stay (an optimizer still holds them), their values are vec's from now on (a later write into vec
    shows in them, and an earlier state_dict() snapshot keeps the old values), in vec's dtype."""
    if not isinstance(vec, _C.TensorBase):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device, pointer = None, 0
    with no_grad():
        for p in parameters:
            device = _check_same_device(p, device)
            n = p.numel()
            p.data = vec[pointer:pointer + n].view(tuple(p.shape)).data
            pointer += n
