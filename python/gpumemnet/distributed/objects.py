"""Collectives of picklable Python objects (layer 2, distributed): PyTorch's broadcast_object_list,
all_gather_object, gather_object and scatter_object_list. Objects are pickled into uint8 CPU tensors (tagged
`communication`) that travel through the tensor collectives: first the sizes, then the bytes. As in PyTorch,
unpickling runs code chosen by the sender: use them only between ranks you trust. group= as the tensor
collectives (collectives.py): sizes and ranks are the group's, src/dst global ranks, group_src/group_dst the
group's; off the group they warn and do nothing."""
import io
import pickle

import numpy as np

from .. import _C
from .._core.creation import cat, empty, zeros
from .._core.dtype import int64, uint8
from .._core.scope import category
from . import collectives as C
from .collectives import OFF, _resolve, _root

__all__ = ["broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list"]


def _to_tensor(obj):
    buf = io.BytesIO()
    pickle.Pickler(buf).dump(obj)
    data = np.frombuffer(buf.getbuffer(), dtype=np.uint8).copy()
    with category("communication"):
        return _C.from_numpy(data, None, "cpu")  # a copy in our storage, counted under its category


def _from_bytes(t, n):
    return pickle.loads(t[:n].numpy().tobytes()) if n else None


def _bytes(n):
    with category("communication"):
        return empty((int(n),), dtype=uint8, device="cpu")


def _sizes(n):
    with category("communication"):
        return zeros((n,), dtype=int64, device="cpu")


def broadcast_object_list(object_list, src=0, group=None, device=None, group_src=None):
    """Rank src's objects into object_list on every rank (object_list has the same length everywhere)."""
    pg = _resolve(group, "broadcast_object_list")
    if pg is OFF:
        return
    src = _root(pg, src, group_src, "broadcast_object_list", "src")
    me = pg.rank()
    sizes = _sizes(len(object_list))
    if me == src:
        parts = [_to_tensor(o) for o in object_list]
        for i, p in enumerate(parts):
            sizes[i] = p.numel()
    C.broadcast(sizes, None, group=pg, group_src=src)
    n = [int(x) for x in sizes.tolist()]
    with category("communication"):
        flat = cat(parts) if me == src and parts else _bytes(sum(n))
    C.broadcast(flat, None, group=pg, group_src=src)
    if me != src:
        off = 0
        for i, k in enumerate(n):
            object_list[i] = _from_bytes(flat[off:off + k], k)
            off += k


def _gathered(pg, obj):
    """Every rank's pickled obj: (world x max bytes tensor, sizes)."""
    world = pg.size()
    mine = _to_tensor(obj)
    sizes = _sizes(world)
    one = _sizes(1)
    one[0] = mine.numel()
    C.all_gather_into_tensor(sizes, one, group=pg)
    n = [int(x) for x in sizes.tolist()]
    width = max(n)
    padded = _bytes(width)
    padded[:mine.numel()] = mine
    return padded, n, width


def all_gather_object(object_list, obj, group=None):
    """Every rank's obj, in rank order, into object_list (of world_size entries)."""
    pg = _resolve(group, "all_gather_object")
    if pg is OFF:
        return
    world = pg.size()
    if len(object_list) != world:
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries; expected world_size "
                         f"({world})")
    padded, n, width = _gathered(pg, obj)
    out = _bytes(world * width)
    C.all_gather_into_tensor(out, padded, group=pg)
    for i in range(world):
        object_list[i] = _from_bytes(out[i * width:(i + 1) * width], n[i])


def gather_object(obj, object_gather_list=None, dst=0, group=None, group_dst=None):
    """Every rank's obj, in rank order, into object_gather_list on rank dst."""
    pg = _resolve(group, "gather_object")
    if pg is OFF:
        return
    dst = _root(pg, dst, group_dst, "gather_object", "dst")
    world, me = pg.size(), pg.rank()
    if me == dst and (object_gather_list is None or len(object_gather_list) != world):
        raise ValueError(f"gather_object: rank {dst} (dst) needs an object_gather_list of world_size ({world}) "
                         f"entries")
    padded, n, width = _gathered(pg, obj)
    out = _bytes(world * width) if me == dst else None
    C._launch("gather_object", "gather", pg, out=out, inp=padded, root=dst)
    if me == dst:
        for i in range(world):
            object_gather_list[i] = _from_bytes(out[i * width:(i + 1) * width], n[i])


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None,
                        group_src=None):
    """Rank src's scatter_object_input_list[r] into rank r's scatter_object_output_list[0]."""
    pg = _resolve(group, "scatter_object_list")
    if pg is OFF:
        return
    src = _root(pg, src, group_src, "scatter_object_list", "src")
    world, me = pg.size(), pg.rank()
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a list of at least one element")
    holder = [None]
    if me == src:
        if scatter_object_input_list is None or len(scatter_object_input_list) != world:
            raise ValueError(f"scatter_object_list: rank {src} (src) needs a scatter_object_input_list of "
                             f"world_size ({world}) objects")
        holder = [list(scatter_object_input_list)]
    # simple and correct; the objects are small (configs, seeds, states)
    broadcast_object_list(holder, group=pg, group_src=src)
    scatter_object_output_list[0] = holder[0][me]
