"""torch.distributed.fsdp.wrap: FSDP's auto-wrap policies and the enable_wrap / wrap annotations, PyTorch's own
logic (plain Python over nn.Module). Policies only decide which modules a wrapper would take; wrapping a model in
FullyShardedDataParallel itself raises here (fsdp/__init__.py says why), while wrap() outside enable_wrap returns
the module unchanged, as PyTorch's does, so models that annotate their layers build as they are."""
import contextlib
import copy

from ...nn.modules.activation import MultiheadAttention
from ...nn.modules.container import ModuleDict, ModuleList
from ...nn.modules.module import Module

__all__ = ["always_wrap_policy", "lambda_auto_wrap_policy", "transformer_auto_wrap_policy",
           "size_based_auto_wrap_policy", "enable_wrap", "wrap", "CustomPolicy", "ModuleWrapPolicy"]


def always_wrap_policy(*args, **kwargs):
    """Wrap every module."""
    return True


def _module_wrap_policy(module, recurse, nonwrapped_numel, module_classes):
    if recurse:
        return True  # always recurse
    return isinstance(module, tuple(module_classes))


def lambda_auto_wrap_policy(module, recurse, nonwrapped_numel, lambda_fn):
    """Wrap the modules for which lambda_fn(module) is true."""
    if recurse:
        return True
    return lambda_fn(module)


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls):
    """Wrap every instance of one of transformer_layer_cls."""
    return _module_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls)


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=int(1e8), force_leaf_modules=None,
                                exclude_wrap_modules=None):
    """Wrap a module once the parameters not yet wrapped reach min_num_params."""
    force_leaf_modules = (size_based_auto_wrap_policy.FORCE_LEAF_MODULES if force_leaf_modules is None
                          else force_leaf_modules)
    exclude_wrap_modules = (size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES if exclude_wrap_modules is None
                            else exclude_wrap_modules)
    is_large = nonwrapped_numel >= min_num_params
    if recurse:
        return is_large and not isinstance(module, tuple(force_leaf_modules))
    return is_large and not isinstance(module, tuple(exclude_wrap_modules))


size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = {ModuleList, ModuleDict}
size_based_auto_wrap_policy.FORCE_LEAF_MODULES = {MultiheadAttention}


class _Policy:
    """The base of the policy classes: _run_policy(root, ignored, root_kwargs) -> {module: kwargs}."""

    def _run_policy(self, root_module, ignored_modules, root_kwargs):
        raise NotImplementedError


class ModuleWrapPolicy(_Policy):
    """Wrap every module of one of module_classes, with the root's kwargs."""

    def __init__(self, module_classes):
        self._module_classes = set(module_classes)
        self._module_classes_str = str(self._module_classes)

    def _run_policy(self, root_module, ignored_modules, root_kwargs):
        classes = tuple(self._module_classes)
        return {m: copy.copy(root_kwargs) for m in root_module.modules()
                if m not in ignored_modules and isinstance(m, classes)}

    def __call__(self, module, recurse, *args, **kwargs):
        return _module_wrap_policy(module, recurse, nonwrapped_numel=-1, module_classes=self._module_classes)

    def __repr__(self):
        return super().__repr__() + f"({self._module_classes_str})"


class CustomPolicy(_Policy):
    """lambda_fn(module) -> False / True / a dict of kwargs overriding the root's, per module."""

    def __init__(self, lambda_fn):
        self._lambda_fn = lambda_fn

    def _run_policy(self, root_module, ignored_modules, root_kwargs):
        out = {}
        for module in root_module.modules():
            if module in ignored_modules:
                continue
            res = self._lambda_fn(module)
            if not isinstance(res, (dict, bool)):
                raise ValueError("The lambda_fn passed to CustomPolicy should return False/True or a kwarg dict, "
                                 f"but it returned {res}")
            if not res:
                continue
            kwargs = copy.copy(root_kwargs)
            if isinstance(res, dict):
                kwargs.update(res)
            out[module] = kwargs
        return out


class _ConfigAutoWrap:
    in_autowrap_context = False
    wrapper_cls = None
    kwargs = {}


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls, **wrapper_kwargs):
    """Inside it, wrap(module) wraps module in wrapper_cls(module, **wrapper_kwargs)."""
    if _ConfigAutoWrap.in_autowrap_context:
        raise NotImplementedError("You are already within an autowrap context and we currently do not supported "
                                  "nested autowrap.")
    _ConfigAutoWrap.in_autowrap_context, _ConfigAutoWrap.wrapper_cls = True, wrapper_cls
    _ConfigAutoWrap.kwargs = wrapper_kwargs
    try:
        yield
    finally:
        _ConfigAutoWrap.in_autowrap_context, _ConfigAutoWrap.wrapper_cls, _ConfigAutoWrap.kwargs = False, None, {}


def wrap(module, **wrap_overrides):
    """module wrapped in enable_wrap's wrapper_cls inside enable_wrap; outside, module itself."""
    if not _ConfigAutoWrap.in_autowrap_context:
        return module
    kwargs = {**_ConfigAutoWrap.kwargs, **wrap_overrides}
    if not isinstance(module, Module):
        raise TypeError(f"wrap: expected an nn.Module, got {type(module).__name__}")
    if hasattr(module, "_wrap_overrides"):
        kwargs = {**kwargs, **module._wrap_overrides}
    return _ConfigAutoWrap.wrapper_cls(module, **kwargs)
