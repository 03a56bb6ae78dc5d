"""torch.utils.weak: dictionaries keyed by objects' identity, held weakly. Tensors compare elementwise, so a
WeakKeyDictionary (which compares keys with ==) cannot hold them; these compare by `is` and drop an entry when its
key is collected (tensordict keeps per-tensor data in one)."""
import collections.abc
import weakref

__all__ = ["WeakIdRef", "WeakIdKeyDictionary", "WeakTensorKeyDictionary"]


class WeakIdRef(weakref.ref):
    """A weak reference hashed by its referent's id and equal to another only for the same live referent."""
    __slots__ = ["_id"]

    def __init__(self, key, callback=None):
        self._id = id(key)
        super().__init__(key, callback)

    def __hash__(self):
        return self._id

    def __eq__(self, other):
        a, b = self(), other()
        return a is b if a is not None and b is not None else self is other


class WeakIdKeyDictionary(collections.abc.MutableMapping):
    def __init__(self, dict=None, ref_type=WeakIdRef):  # noqa: A002 - PyTorch's name
        self.data, self.ref_type = {}, ref_type

        def remove(ref, selfref=weakref.ref(self)):
            owner = selfref()
            if owner is not None:
                owner.data.pop(ref, None)
        self._remove = remove
        if dict is not None:
            self.update(dict)

    def __getitem__(self, key):
        return self.data[self.ref_type(key)]

    def __setitem__(self, key, value):
        self.data[self.ref_type(key, self._remove)] = value

    def __delitem__(self, key):
        del self.data[self.ref_type(key)]

    def __contains__(self, key):
        try:
            return self.ref_type(key) in self.data
        except TypeError:  # an object no weak reference can point at
            return False

    def __iter__(self):
        for ref in list(self.data):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self):
        return sum(1 for ref in list(self.data) if ref() is not None)

    def __repr__(self):
        return f"<{type(self).__name__} at {id(self):#x}>"


WeakTensorKeyDictionary = WeakIdKeyDictionary
