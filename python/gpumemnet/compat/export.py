"""torch.export: whole-program capture into an ExportedProgram. gpumemnet does not trace programs: the names are
here for annotations and imports (transformers' executorch integration), and export() raises."""

__all__ = ["export", "ExportedProgram", "Dim"]


class ExportedProgram:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.export.ExportedProgram: gpumemnet does not export programs")


def export(*args, **kwargs):
    raise NotImplementedError("torch.export.export: gpumemnet does not trace programs (export with PyTorch)")


def Dim(name, *, min=None, max=None):  # noqa: N802,A002 - PyTorch's names
    raise NotImplementedError("torch.export.Dim: gpumemnet does not export programs")
