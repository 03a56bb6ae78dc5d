"""Stand-ins for the few PyTorch names that real code refers to at import time (a default argument, a base class,
`from torch.ao.quantization import prepare`) but that gpumemnet does not compute yet (compat/: quantization,
ONNX helpers). The name exists so that the import
succeeds; using it raises NotImplementedError saying it is not there yet, and `python -m gpumemnet run --report`
lists it among the missing names (through the "missing_name" hook that gpumemnet.dropin registers).

Nothing else belongs here: a name no import needs stays absent, and the alias reports it where it is looked up."""
from . import hooks


def _refuse(torch_name):
    report = hooks.get("missing_name")
    if report is not None:
        report(torch_name)
    raise NotImplementedError(f"{torch_name} is a PyTorch name gpumemnet does not have yet")


def function(torch_name):
    """A function that refuses to run."""
    def refuse(*args, **kwargs):
        _refuse(torch_name)
    refuse.__name__ = refuse.__qualname__ = torch_name.rsplit(".", 1)[-1]
    refuse.__doc__ = f"Not in gpumemnet yet: {torch_name} refuses to run (it exists so that imports succeed)."
    return refuse


def module_class(torch_name, base):
    """A subclass of base (nn.Module) that refuses to be built; code may still subclass it at import."""
    def __init__(self, *args, **kwargs):
        _refuse(torch_name)
    name = torch_name.rsplit(".", 1)[-1]
    return type(name, (base,), {"__init__": __init__, "__doc__": f"Not in gpumemnet yet: {torch_name}.",
                                "__module__": base.__module__})
