"""torch.jit as PyTorch code sees it on gpumemnet: nothing is scripted or traced; code runs eagerly.

`@torch.jit.script` and friends return what they decorate, so a model that scripts a helper still runs (as
Python); `is_scripting()` and `is_tracing()` are False, which is what eager PyTorch answers."""
import typing

Final = typing.Final


def is_scripting():
    return False


def is_tracing():
    return False


def _identity_decorator(fn=None, **_):
    return fn if fn is not None else (lambda f: f)


unused = ignore = export = _script_if_tracing = _overload_method = _overload = interface = _identity_decorator


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
