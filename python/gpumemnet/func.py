"""gpumemnet.func: torch.func's functional_call (a module called with parameters and buffers given for that one
call: nn/utils/stateless.py) and its transforms grad, grad_and_value, vjp, jacrev, jacfwd, hessian and vmap
(_func_transforms.py: on gpumemnet's reverse-mode autograd; vmap is a loop), jvp and linearize, and the helpers of
model ensembling: stack_module_state, replace_all_batch_norm_modules_."""
from collections.abc import Sequence

from ._core.tensor_more import _stack
from ._func_transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap  # noqa: F401
from .nn.utils.stateless import _functional_call

__all__ = ["functional_call", "grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian",
           "vmap", "stack_module_state", "functionalize", "replace_all_batch_norm_modules_"]


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


def stack_module_state(models):
    """({name: parameters of every model stacked along a new dim 0}, {name: buffers likewise}) for vmap over
    functional_call (model ensembling). Stacked parameters are new leaves that require grad when the models' do."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named):
        lists = [dict(n) for n in named]
        out = {}
        for k in lists[0]:
            ts = [d[k] for d in lists]
            t = _stack([x.detach() for x in ts])
            out[k] = t.requires_grad_() if all(x.requires_grad for x in ts) else t
        return out
    return (stacked(m.named_parameters() for m in models), stacked(m.named_buffers() for m in models))


def functionalize(func, *, remove="mutations"):
    """func itself: functionalize changes how PyTorch's compilers see in-place ops, never the values; gpumemnet
    runs the ops as they are."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           f"Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           f"removed from the program, and replaced with their out-of-place equivalents.\n     "
                           f"remove='mutations_and_views': In addition to the above, all aliasing operators "
                           f"{{view}} will be replaced with their non-aliasing counterparts, {{view}}_copy.\n")
    return func


def replace_all_batch_norm_modules_(root):
    """Every BatchNorm in root stops tracking running statistics (running_mean / running_var /
    num_batches_tracked become None, track_running_stats False), so that it normalises by the batch's statistics
    under vmap, as PyTorch's; returns root."""
    from .nn.modules.batchnorm import _BatchNorm  # noqa: E402  (nn's modules import what imports func)
    for m in root.modules():
        if isinstance(m, _BatchNorm):
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root
