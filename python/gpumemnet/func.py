"""gpumemnet.func: torch.func's functional_call (a module called with parameters and buffers given for that one
call: nn/utils/stateless.py) and its transforms grad, grad_and_value, vjp, jacrev, jacfwd, hessian and vmap
(_func_transforms.py: on gpumemnet's reverse-mode autograd; vmap is a loop)."""
from collections.abc import Sequence

from ._func_transforms import grad, grad_and_value, hessian, jacfwd, jacrev, vjp, vmap  # noqa: F401
from .nn.utils.stateless import _functional_call

__all__ = ["functional_call", "grad", "grad_and_value", "vjp", "jacrev", "jacfwd", "hessian", "vmap"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the tensors of parameter_and_buffer_dicts (a dict of name -> tensor, or a
    sequence of such dicts with no key in two of them) in place of the module's own parameters and buffers, for
    this call only; the module's tensors are restored afterwards, even on error. args: a tuple, or one argument."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        seen, repeated = set(), []
        for d in parameter_and_buffer_dicts:
            for k in d:
                if k in seen and k not in repeated:
                    repeated.append(k)
                seen.add(k)
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                             f"ambiguous")
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    return _functional_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)
