"""torch.fx: symbolic tracing. gpumemnet does not trace; `@torch.fx.wrap` marks a function for tracers and
changes nothing when the code runs eagerly."""


def wrap(fn_or_name):
    return fn_or_name


class Tracer:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.Tracer: gpumemnet does not trace programs")


class GraphModule:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.GraphModule: gpumemnet does not trace programs")


class Proxy:
    pass


class Node:
    """A node of a traced graph (named in annotations and isinstance checks: optimum); gpumemnet makes none."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.Node: gpumemnet does not trace programs")
