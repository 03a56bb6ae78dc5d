"""torch.fx.graph_module: GraphModule and the helpers torchvision's feature extraction imports (see torch.fx)."""


class GraphModule:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.GraphModule: gpumemnet does not trace programs")


_USER_PRESERVED_ATTRIBUTES_KEY = "_user_preserved_attributes"


class _CodeOnlyModule:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.graph_module._CodeOnlyModule: gpumemnet does not trace programs")


def _copy_attr(from_module, to_module, target):
    raise NotImplementedError("torch.fx.graph_module._copy_attr: gpumemnet does not trace programs")
