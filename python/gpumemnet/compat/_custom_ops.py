"""torch._custom_ops: the older spelling of custom-operator registration (torchvision's _meta_registrations uses
it). Registrations are accepted and unused, as in torch.library here; `get_ctx()` is only called from inside a
fake kernel, which gpumemnet never runs."""
from .library import _accept

impl_abstract = impl = impl_backward = impl_save_for_backward = _accept


def custom_op(*args, **kwargs):
    return _accept(*args, **kwargs)


def get_ctx():
    raise RuntimeError("torch._custom_ops.get_ctx(): gpumemnet runs no fake (meta) kernels of custom operators")
