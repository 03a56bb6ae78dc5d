"""torch.jit as PyTorch code sees it on gpumemnet: nothing is scripted or traced; code runs eagerly.

`@torch.jit.script` and friends return what they decorate, so a model that scripts a helper still runs (as
Python); `is_scripting()` and `is_tracing()` are False, which is what eager PyTorch answers. isinstance(obj, type)
is TorchScript's type refinement as eager PyTorch runs it: typing generics (List[Tensor], Dict[str, int],
Optional[...], Tuple[...]) are checked element by element."""
import builtins
import collections.abc
import types
import typing
import warnings

Final = typing.Final


def is_scripting():
    return False


def is_tracing():
    return False


def _identity_decorator(fn=None, **_):
    return fn if fn is not None else (lambda f: f)


unused = ignore = export = _script_if_tracing = script_if_tracing = _overload_method = _overload = interface = \
    _identity_decorator


def script(obj, *args, **kwargs):
    """Returns obj unchanged: gpumemnet runs it eagerly."""
    return obj


def annotate(the_type, the_value):
    return the_value


class Error(RuntimeError):
    pass


class ScriptModule:
    """PyTorch's compiled module class: gpumemnet never scripts, so no module is one (isinstance is False;
    torchinfo and fvcore test it)."""


class ScriptFunction:
    """PyTorch's compiled function class: never made here."""


RecursiveScriptModule = ScriptModule


class TracerWarning(Warning):
    pass


# The bare container types, which TorchScript refuses without their element types
_BARE = {dict: "dict", list: "list", tuple: "tuple", typing.Dict: "Dict", typing.List: "List",
         typing.Optional: "Optional", typing.Tuple: "Tuple"}


def _need_args(target_type):
    name = _BARE.get(target_type)
    if name is None:
        return
    if name.endswith("ict"):
        raise RuntimeError(f"Attempted to use {name} without contained types. Please add contained type, e.g. "
                           f"{name}[int, int]")
    raise RuntimeError(f"Attempted to use {name} without a contained type. Please add a contained type, e.g. "
                       f"{name}[int]")


def _element_is(obj, target_type):
    return _container_is(obj, target_type) if typing.get_origin(target_type) else builtins.isinstance(obj, target_type)


def _warn_if_empty(obj):
    if obj == [] or obj == {} or obj == ():
        warnings.warn("The inner type of a container is lost when calling torch.jit.isinstance in eager mode. For "
                      "example, List[int] would become list and therefore falsely return True for List[float] or "
                      "List[str].", stacklevel=4)


def _container_is(obj, target_type):
    """PyTorch's container_checker: List / Dict / Tuple / Union (Optional) checked element by element."""
    origin, args = typing.get_origin(target_type), typing.get_args(target_type)
    _need_args(target_type)
    if origin is list:
        _warn_if_empty(obj)
        return builtins.isinstance(obj, list) and all(_element_is(el, args[0]) for el in obj)
    if origin is dict:
        _warn_if_empty(obj)
        return builtins.isinstance(obj, dict) and all(
            builtins.isinstance(k, args[0]) and _element_is(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        _warn_if_empty(obj)
        return builtins.isinstance(obj, tuple) and len(obj) == len(args) and all(
            _element_is(el, t) for el, t in zip(obj, args))
    if origin is typing.Union or origin is types.UnionType:
        if obj is None:  # None fits every Optional
            return True
        for t in args:
            if typing.get_origin(t):  # PyTorch decides by the first container type it meets
                return _container_is(obj, t)
            if builtins.isinstance(obj, t):
                return True
    return False


def isinstance(obj, target_type):  # noqa: A001 - PyTorch's name
    """Whether obj is of target_type: a type, a typing generic (List[Tensor], Dict[str, Tensor], Optional[Tensor],
    Tuple[int, str]) or a tuple of them."""
    if builtins.isinstance(target_type, collections.abc.Container):
        if not builtins.isinstance(target_type, tuple):
            raise RuntimeError("The second argument to `torch.jit.isinstance` must be a type or a tuple of types")
        return any(isinstance(obj, t) for t in target_type)
    if typing.get_origin(target_type):
        return _container_is(obj, target_type)
    _need_args(target_type)
    return builtins.isinstance(obj, target_type)


def _get_trace_graph(*args, **kwargs):
    """(mmengine's FLOP counter imports it; gpumemnet has no tracer.)"""
    raise NotImplementedError("torch.jit._get_trace_graph: gpumemnet does not trace programs")
