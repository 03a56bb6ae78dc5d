"""torch.utils.hooks: RemovableHandle, the handle libraries make for hook dicts of their own (`handle =
RemovableHandle(self._hooks); self._hooks[handle.id] = hook`)."""
import itertools

__all__ = ["RemovableHandle"]

_ids = itertools.count()


class RemovableHandle:
    """Removes the entry keyed by its id from the dict(s) it was made for; `with handle:` removes on exit."""

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = hooks_dict
        self.id = next(_ids)
        extra = extra_dict if isinstance(extra_dict, (list, tuple)) else ([extra_dict] if extra_dict else [])
        self.extra_dict_ref = tuple(extra)

    def remove(self):
        for d in (self.hooks_dict_ref, *self.extra_dict_ref):
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
