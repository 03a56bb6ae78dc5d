"""torch.fx: symbolic tracing. gpumemnet does not trace; `@torch.fx.wrap` marks a function for tracers and
changes nothing when the code runs eagerly. The classes are here for the modules that name them at import
(torchvision.models.feature_extraction subclasses Tracer and GraphModule; fx.node.Target in annotations): making a
graph raises."""
from . import graph_module, node, proxy  # noqa: F401
from .graph_module import GraphModule  # noqa: F401
from .node import Node  # noqa: F401
from .proxy import Proxy  # noqa: F401

__all__ = ["wrap", "Tracer", "Graph", "GraphModule", "Node", "Proxy", "graph_module", "node", "proxy"]


def wrap(fn_or_name):
    return fn_or_name


class Tracer:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.Tracer: gpumemnet does not trace programs")


class Graph:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.Graph: gpumemnet does not trace programs")
