"""The live objects of some classes, found among those the garbage collector tracks, safely beside other threads."""
from .. import _C


def _subclasses(classes):
    seen, todo = set(), list(classes)
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo.extend(c.__subclasses__())
    return seen


def live_objects(*classes, exclude=()):
    """The objects gc tracks that are instances of `classes` (found by exact type among their subclasses, less
    `exclude` and its subclasses), in gc's order.

    Not `[o for o in gc.get_objects() if ...]`: while that list is alive every object has one more reference, and a
    tuple another thread is building from a generator (`tuple(f(t) for t in ts)` resizes it, which needs its only
    reference) fails with "SystemError: bad argument to internal function" (a training thread crashed so beside an
    estimate in another). _C._live_of_types keeps the list inside one C call, which lets no other thread run."""
    return _C._live_of_types(_subclasses(classes) - _subclasses(exclude))
