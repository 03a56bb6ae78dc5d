"""torch.fx.node: Node and the Target / Argument annotation types (see torch.fx)."""
import typing

Target = typing.Union[typing.Callable[..., typing.Any], str]
Argument = typing.Any


class Node:
    """A node of a traced graph (named in annotations and isinstance checks: optimum); gpumemnet makes none."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.fx.Node: gpumemnet does not trace programs")
