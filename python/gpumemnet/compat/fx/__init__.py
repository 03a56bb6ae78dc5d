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
