"""Module's rarer methods, as PyTorch's: type(dst_type), set_submodule, compile (a no-op: gpumemnet runs eagerly),
_call_impl, and the xpu / ipu / mtia moves (gpumemnet has none of those devices)."""


class ModuleMore:
    """Mixed into Module (module.py)."""
    call_super_init = False
    dump_patches = False

    def type(self, dst_type):
        """Every parameter and buffer cast to dst_type (a dtype or a legacy type name such as
        'torch.DoubleTensor'); torchmetrics' set_dtype calls it."""
        return self._apply(lambda t: t.type(dst_type))

    def _no_device(self, device=None):
        raise RuntimeError(f"{type(self).__name__}: gpumemnet runs on 'cpu' and 'cuda' devices only")

    xpu = ipu = mtia = _no_device

    def set_submodule(self, target, module, strict=False):
        """Replace (or, unless strict, add) the submodule at the dotted path target."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        path, _, name = target.rpartition(".")
        if not isinstance(module, ModuleMore):  # every Module is one
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self.get_submodule(path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), ModuleMore):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def compile(self, *args, **kwargs):
        """PyTorch compiles forward in place; gpumemnet runs it as written, so this changes nothing."""
        return None

    def _call_impl(self, *args, **kwargs):
        return self(*args, **kwargs)
