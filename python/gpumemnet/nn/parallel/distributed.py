"""DistributedDataParallel: PyTorch's data parallel wrapper over gpumemnet.distributed (MPI / NCCL).

Every rank holds the whole model and runs its own micro-batch; gradients are averaged over the ranks during
backward, so every replica takes the same optimizer step. As in PyTorch (Li et al., VLDB 2020):
- at construction the parameters and buffers are broadcast from rank 0, and the buffers again before each forward
  (broadcast_buffers=True); BatchNorm's batch statistics stay per rank (use SyncBatchNorm to share them);
- gradients are packed into buckets in reverse parameter order (the order backward produces them) of
  bucket_cap_mb (25 MiB), the first one of 1 MiB when bucket_cap_mb is left at its default; a bucket's averaging
  all-reduce is launched, asynchronously, as soon as its last gradient has been accumulated
  (Tensor.register_post_accumulate_grad_hook), so communication overlaps the rest of backward as far as the
  autograd engine accumulates leaves early (gpumemnet's current engine accumulates them in forward order, so on a
  plain Sequential the buckets complete near the end of backward). Buckets are launched in index order on every
  rank (collectives must be issued in the same order everywhere); the last one waits for all and writes the
  averages back into .grad;
- no_sync() skips the reduction (gradients accumulate locally; the next synchronised backward reduces the sum);
- find_unused_parameters=True walks the graph after forward and marks the parameters it does not reach ready.
Not done: PyTorch starts with a single bucket and rebuilds the buckets after the first iteration in the order the
gradients arrived; ours are those limits applied in reverse parameter order from the start. Comm hooks,
static_graph (accepted, no effect).

Memory: the bucket buffers are allocator blocks of category "communication" (one copy of the gradients, held for
the wrapper's lifetime). With gradient_as_bucket_view=True the gradients are views into them instead of a second
copy: .grad then costs nothing beyond the buckets. gm.memory.estimate(..., world_size=N) runs this same code on
meta with a simulated group (gpumemnet.distributed._comm), so its figures include the buckets."""
import contextlib
import weakref

from ... import _C
from ..._core.autograd import AccumulateGrad, is_grad_enabled, no_grad
from ..._core.scope import category, scope
from ...distributed import _comm
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024  # PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES: the first all-reduce starts early


class _Bucket:
    __slots__ = ("buffer", "params", "views", "pending", "work")

    def __init__(self, buffer, params, views):
        self.buffer, self.params, self.views = buffer, params, views
        self.pending = len(params)
        self.work = None


def _assign_buckets(params, cap_bytes, first_cap_bytes=None):
    """[[index]] of params in buckets: reverse order, one dtype/device per bucket, the first closed at
    first_cap_bytes (default cap_bytes) and the others at cap_bytes (PyTorch's
    _compute_bucket_assignment_by_size)."""
    if first_cap_bytes is None:
        first_cap_bytes = cap_bytes
    open_, limits, out = {}, {}, []
    for i in reversed(range(len(params))):
        p = params[i]
        key = (p._dtype, p._device)
        cur = open_.setdefault(key, [[], 0])
        cur[0].append(i)
        cur[1] += p.numel() * p.element_size()
        if cur[1] >= limits.get(key, first_cap_bytes):
            out.append(cur[0])
            open_[key] = [[], 0]
            limits[key] = cap_bytes
    out += [cur[0] for cur in open_.values() if cur[0]]
    return out


def _leaves_reached(outputs):
    """The ids of the leaves whose gradients backward from outputs would accumulate (find_unused_parameters)."""
    stack, seen, leaves = [], set(), set()

    def add(o):
        if isinstance(o, _C.TensorBase):
            if o.grad_fn is not None:
                stack.append(o.grad_fn)
            elif o.requires_grad:
                leaves.add(id(o))
        elif isinstance(o, (list, tuple)):
            for x in o:
                add(x)
        elif isinstance(o, dict):
            for x in o.values():
                add(x)
    add(outputs)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            leaves.add(id(node.variable))
            continue
        for e in node.next_functions:
            if e is not None:
                stack.append(e[0])
    return leaves


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        first_cap = None
        if bucket_cap_mb is None:  # PyTorch's default: 25 MiB, and a first bucket of 1 MiB to start early
            bucket_cap_mb = 25
            first_cap = _FIRST_BUCKET_BYTES
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be a positive number, got {bucket_cap_mb!r}")
        self.module = module
        comm = _comm.world(process_group)
        object.__setattr__(self, "_comm", comm)  # not a submodule, not in state_dict
        self.device_ids = None if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        object.__setattr__(self, "_first_cap", first_cap)
        self.require_backward_grad_sync = True
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        with no_grad(), scope("DistributedDataParallel init"):
            for t in list(module.parameters()) + self._buffers_to_sync():
                comm.broadcast(t, 0)
        object.__setattr__(self, "_params", params)
        self._build_buckets(params)
        object.__setattr__(self, "_armed", False)   # a synchronised backward is expected
        object.__setattr__(self, "_next", 0)        # the next bucket to launch
        me = weakref.ref(self)  # the parameters hold the hooks: a strong reference back would be a cycle

        def hook(p):
            ddp = me()
            if ddp is not None:
                ddp._grad_ready(p)
        object.__setattr__(self, "_handles", [p.register_post_accumulate_grad_hook(hook) for p in params])

    def _buffers_to_sync(self):
        return [b for b in self.module.buffers() if b is not None] if self.broadcast_buffers else []

    def _build_buckets(self, params):
        buckets, slot = [], {}
        with category(_comm.CATEGORY), scope("DistributedDataParallel buckets"), no_grad():
            for idx in _assign_buckets(params, self.bucket_bytes_cap, self._first_cap):
                ps = [params[i] for i in idx]
                n = sum(p.numel() for p in ps)
                buf = _C.empty((n,), ps[0]._dtype, ps[0]._device)
                _C.fill_(buf, 0)
                views, off = [], 0
                for p in ps:
                    strides = tuple(_contiguous_strides(p.shape))
                    views.append(buf._as_strided(tuple(p.shape), strides, off))
                    off += p.numel()
                b = _Bucket(buf, ps, views)
                for j, p in enumerate(ps):
                    slot[id(p)] = (len(buckets), j)
                buckets.append(b)
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_slot", slot)
        if self.gradient_as_bucket_view:
            for b in buckets:
                for p, v in zip(b.params, b.views):
                    if p.grad is not None:
                        _C.copy_(v, p.grad)
                    p.grad = v

    # ---- forward ------------------------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if self._armed and is_grad_enabled():
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                "`gpumemnet.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function "
                "outputs participate in calculating loss. Parameters that got no gradient: " +
                ", ".join(self._unready_names()))
        bufs = self._buffers_to_sync()
        if bufs and self._comm.size > 1:
            with no_grad(), scope("DistributedDataParallel buffers"):
                for b in bufs:
                    self._comm.broadcast(b, 0)
        out = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            self._arm()
            if self.find_unused_parameters:
                reached = _leaves_reached(out)
                for p in self._params:
                    if id(p) not in reached:
                        self._mark_unused(p)
        return out

    def _unready_names(self):
        names = {id(p): n for n, p in self.module.named_parameters()}
        return [names.get(id(p), "?") for b in self._buckets if b.pending for p in b.params][:10]

    def _arm(self):
        for b in self._buckets:
            b.pending = len(b.params)
            b.work = None
        object.__setattr__(self, "_ready", set())
        object.__setattr__(self, "_unused", set())
        object.__setattr__(self, "_next", 0)
        object.__setattr__(self, "_armed", True)

    # ---- backward: buckets --------------------------------------------------------------------------------
    def _mark_unused(self, p):
        bi, j = self._slot[id(p)]
        b = self._buckets[bi]
        with no_grad():
            _C.fill_(b.views[j], 0)  # it contributes nothing here; other ranks may have used it
        self._unused.add(id(p))
        self._mark_ready(p, b)

    def _grad_ready(self, p):
        if not self._armed or not self.require_backward_grad_sync:
            return
        bi, j = self._slot[id(p)]
        b = self._buckets[bi]
        if id(p) in self._ready:
            raise RuntimeError("DistributedDataParallel: a parameter's gradient was accumulated twice in one "
                               "synchronised iteration (a second backward before the reduction finished, or a "
                               "parameter marked unused that produced a gradient); this is not supported")
        view = b.views[j]
        with no_grad():
            g = p.grad
            if g._storage_id != view._storage_id or g._offset != view._offset:
                _C.copy_(view, g)
                if self.gradient_as_bucket_view:
                    p.grad = view  # from now on backward accumulates into the bucket itself
        self._mark_ready(p, b)
        self._progress()

    def _progress(self):
        """Let the launched all-reduces move on: MPI progresses a non-blocking collective only inside MPI calls, so
        each gradient's hook asks the ones in flight (a test, never a wait)."""
        for b in self._buckets[:self._next]:
            if b.work is not None:
                b.work.is_completed()

    def _mark_ready(self, p, b):
        self._ready.add(id(p))
        b.pending -= 1
        if b.pending == 0:
            self._launch_ready()

    def _launch_ready(self):
        buckets, comm = self._buckets, self._comm
        i = self._next
        with no_grad(), scope("DistributedDataParallel all_reduce"):
            while i < len(buckets) and buckets[i].pending == 0:
                b = buckets[i]
                if comm.size > 1:
                    b.buffer.div_(comm.size)  # SUM of gradients / N = the average (PyTorch divides first too)
                b.work = comm.all_reduce_sum(b.buffer, async_op=True)
                i += 1
        object.__setattr__(self, "_next", i)
        if i == len(buckets):
            self._finish()

    def _finish(self):
        """Every bucket is launched: wait for them and put the averages in .grad."""
        with no_grad(), scope("DistributedDataParallel all_reduce"):
            for b in self._buckets:
                if b.work is not None:
                    b.work.wait()
                    b.work = None
                for p, v in zip(b.params, b.views):
                    g = p.grad
                    if g is None:  # unused here, maybe used elsewhere: the average applies on every replica
                        with category("gradient"):
                            p.grad = v.clone() if not self.gradient_as_bucket_view else v
                    elif g._storage_id != v._storage_id or g._offset != v._offset:
                        _C.copy_(g, v)
        object.__setattr__(self, "_armed", False)

    # ---- the rest of PyTorch's API --------------------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally without communicating; the first synchronised
        backward after it reduces the accumulated sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    @property
    def process_group(self):
        return self._comm

    def bucket_sizes(self):
        """Bytes of each gradient bucket, in launch order (what one synchronised backward all-reduces)."""
        return [b.buffer.numel() * b.buffer.element_size() for b in self._buckets]


def _contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(tuple(shape)):
        strides.append(acc)
        acc *= s
    return list(reversed(strides))
