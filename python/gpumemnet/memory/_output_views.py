"""How run mode (first_step.py) recognises the model's output in what a script's loss reads: the output itself, a
view of it (a reshape, a permutation, a slice) or a cast, replayed on the meta output the same way."""
import weakref


class Output:
    """One tensor of a watched model's output: its path in the output, the tensor and its graph node (weakly), and
    its layout, by which a view of it is still recognised once the output tensor itself is gone
    (F.cross_entropy(model(x).transpose(1, 2), y): nothing holds the output after the transpose)."""
    __slots__ = ("path", "ref", "node", "storage", "shape", "stride", "offset", "numel", "contiguous")

    def __init__(self, path, t):
        self.path, self.ref = path, weakref.ref(t)
        self.node = weakref.ref(t.grad_fn) if t.grad_fn is not None else None
        self.storage, self.offset, self.numel = t._storage_id, t.storage_offset(), t.numel()
        self.shape, self.stride, self.contiguous = tuple(t.shape), tuple(t.stride()), t.is_contiguous()

    def view(self, value):
        """How tensor value is a view of this output (its storage, and its graph reaches the output's node), to be
        replayed on the meta output: ("reshape", shape) (out.view(-1, C)), ("permute", dims) (out.transpose(1,
        2): a reshape would lay it out otherwise, and the loss would copy where the script's does not, or the
        other way), or ("strided", shape, stride, offset) (a slice); None when it is not one."""
        if value._storage_id != self.storage or not derived(value, self.node):
            return None
        shape, stride, offset = tuple(value.shape), tuple(value.stride()), value.storage_offset() - self.offset
        if offset == 0 and value.numel() == self.numel:
            if self.contiguous and value.is_contiguous():
                return ("reshape", shape)
            dims = permutation(self.shape, self.stride, shape, stride)
            if dims is not None:
                return ("permute", dims)
        return ("strided", shape, stride, offset)


def derived(value, node, hops=4):
    """Whether value's graph reaches node (a weakref) within `hops` nodes: one node per view op. The storage alone
    does not say it once the output is gone: its storage id may have been reused."""
    target = node() if node is not None else None
    level = [value.grad_fn]
    for _ in range(hops + 1):
        if target is None or not level:
            return False
        if any(n is target for n in level):
            return True
        level = [e[0] for n in level for e in (getattr(n, "_edges", ()) or ()) if e is not None and e[0] is not None]
    return False


def permutation(shape, stride, vshape, vstride):
    """dims such that permute(*dims) of a tensor of this shape and stride has vshape and vstride (a size-1 dim's
    stride does not matter), or None."""
    if len(shape) != len(vshape):
        return None
    free, dims = list(range(len(shape))), []
    for size, st in zip(vshape, vstride):
        j = next((j for j in free if shape[j] == size and (stride[j] == st or size == 1)), None)
        if j is None:
            return None
        free.remove(j)
        dims.append(j)
    return tuple(dims)


def viewed(o, how):
    """The meta output o seen as Output.view said the script's loss saw it."""
    if not how:
        return o
    if how[0] == "reshape":
        return o.reshape(how[1])
    if how[0] == "cast":
        return o.to(how[1])
    if how[0] == "permute":
        return o.permute(*how[1])
    return o.as_strided(how[1], how[2], o.storage_offset() + how[3])
