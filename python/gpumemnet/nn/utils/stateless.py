"""gpumemnet.nn.utils.stateless.functional_call (and the engine of gm.func.functional_call): call a module with
some of its parameters and buffers replaced, for that one call, by the tensors of a dict keyed by their
state_dict names ("fc1.weight"), as PyTorch's. The replacements go straight into the modules' _parameters /
_buffers (so plain tensors, and tensors in a graph, can stand in for parameters: gradients flow to them), and the
module's own tensors are put back afterwards, even when the call raises. tie_weights: a tensor registered under
several names (a tied embedding and decoder weight) is replaced under all of them when one is given; strict: every
parameter and buffer must be given, and nothing else."""
import contextlib
import warnings

from ... import _C
from ..modules.module import Module

__all__ = ["functional_call"]

_MISSING = object()


def _submodule(root, path):
    mod = root
    for attr in path.split(".") if path else ():
        try:
            sub = getattr(mod, attr)
        except AttributeError as ex:
            raise AttributeError(f"{mod._get_name()} has no attribute `{attr}`") from ex
        if not isinstance(sub, Module):
            raise TypeError(f"submodule `{path}`: {sub} is not an instance of gpumemnet.nn.Module")
        mod = sub
    return mod


def _swap(root, name, tensor):
    """Put tensor (or _MISSING: remove) under the dotted name; returns what was there (_MISSING if nothing)."""
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, _C.TensorBase):
        raise TypeError(f"functional_call: the value for {name!r} is {type(tensor).__name__}, not an instance of "
                        f"gpumemnet.Tensor")
    path, _, attr = name.rpartition(".")
    mod = _submodule(root, path)
    for table in (mod._parameters, mod._buffers):
        if attr in table:
            orig = table[attr]
            if tensor is _MISSING:
                del table[attr]
            else:
                table[attr] = tensor
            return orig
    orig = getattr(mod, attr) if hasattr(mod, attr) else _MISSING
    if orig is not _MISSING and orig is not None and not isinstance(orig, _C.TensorBase):
        raise TypeError(f"attribute `{attr}`: {orig} is not an instance of gpumemnet.Tensor")
    if tensor is not _MISSING:
        setattr(mod, attr, tensor)
    elif orig is not _MISSING:
        delattr(mod, attr)
    return orig


def _untie(module, given):
    """given, extended to every name of a tensor registered under several names when one of them is given."""
    names_of = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        names_of.setdefault(id(t), set()).add(name)
    tied = {n: names for names in names_of.values() if len(names) > 1 for n in names}
    out = dict(given)
    for name in [n for n in given if n in tied]:
        group = tied[name]
        values = {id(given[n]) for n in group if n in given}
        if len(values) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(group)}, which are tied. "
                             f"Consider using tie_weights=False")
        for n in group:
            out[n] = given[name]
    return out


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers, tie_weights=False, strict=False):
    values = _untie(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
            {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing, unexpected = sorted(valid - set(values)), sorted(set(values) - valid)
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise RuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(errors))
    originals = {}
    try:
        for name, t in values.items():
            originals[name] = _swap(module, name, t)
        yield
    finally:
        now = {}
        for name, orig in reversed(list(originals.items())):
            now[name] = _swap(module, name, orig)
        # what the call left in the module under a given name (a buffer it reassigned) goes back to the caller
        parameters_and_buffers.update({k: now[k] for k in parameters_and_buffers if k in now})


def _functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: module must be a gpumemnet.nn.Module, got {type(module).__name__}")
    if not isinstance(parameters_and_buffers, dict):
        raise TypeError(f"functional_call: parameters_and_buffers must be a dict of name -> tensor, got "
                        f"{type(parameters_and_buffers).__name__}")
    kwargs = {} if kwargs is None else kwargs
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with parameters_and_buffers ({name: tensor}) standing in for the module's own
    tensors for this one call. Deprecated in PyTorch in favour of torch.func.functional_call (gm.func)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed "
                  "in a future version of PyTorch. Please use `torch.func.functional_call` instead which is a "
                  "drop-in replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
