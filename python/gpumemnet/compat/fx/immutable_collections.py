"""torch.fx.immutable_collections: the dict and list that torch.fx keeps arguments in, refusing changes (pytree
libraries register them: lightning-thunder)."""

__all__ = ["immutable_dict", "immutable_list"]


def _refuse(self, *args, **kwargs):
    raise TypeError(f"'{type(self).__name__}' object does not support mutation.")


class immutable_list(list):  # noqa: N801 - PyTorch's name
    __setitem__ = __delitem__ = __iadd__ = __imul__ = append = extend = insert = pop = remove = reverse = sort = \
        clear = _refuse

    def __hash__(self):
        return hash(tuple(self))

    def __reduce__(self):
        return (immutable_list, (tuple(self),))


class immutable_dict(dict):  # noqa: N801 - PyTorch's name
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self):
        return hash(tuple(self.items()))

    def __reduce__(self):
        return (immutable_dict, (tuple(self.items()),))
