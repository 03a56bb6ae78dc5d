"""DistributedDataParallel: PyTorch's data parallel wrapper over gpumemnet.distributed (MPI / NCCL).

Every rank holds the whole model and runs its own micro-batch; gradients are averaged over the ranks during
backward, so every replica takes the same optimizer step. As in PyTorch (Li et al., VLDB 2020):
- at construction the parameters and buffers are broadcast from rank 0, and the buffers again before each forward
  (broadcast_buffers=True); BatchNorm's batch statistics stay per rank (use SyncBatchNorm to share them);
- gradients are packed into buckets (PyTorch's compute_bucket_assignment_by_size, _bucket_assignment below). The
  first synchronised iteration runs with a single bucket of every parameter (PyTorch's parameter order need not be
  the order backward produces gradients in), records the order the gradients became ready in, and the next
  forward rebuilds the buckets in that order: the first closed at 1 MiB when bucket_cap_mb is left at its
  default, the others at bucket_cap_mb (25 MiB), rank 0's assignment broadcast so every rank agrees. With
  find_unused_parameters=True (and no static_graph) the buckets are those limits over the parameters in their
  order, reversed, and are never rebuilt; with static_graph=True the order is recorded in the second iteration;
- a bucket's averaging all-reduce is launched, asynchronously, as soon as its last gradient has been accumulated
  (Tensor.register_post_accumulate_grad_hook), so communication overlaps the rest of backward. Buckets are
  launched in index order on every rank (collectives must be issued in the same order everywhere); the last one
  waits for all and writes the averages back into .grad;
- register_comm_hook(state, hook) replaces the averaging all-reduce of each bucket by hook(state, GradBucket)
  -> Future of the reduced bucket (gpumemnet.distributed.algorithms.ddp_comm_hooks.default_hooks: allreduce,
  fp16 and bf16 compression). The bucket is then not divided by the world size first: the hook does it;
- no_sync() skips the reduction (gradients accumulate locally; the next synchronised backward reduces the sum);
- find_unused_parameters=True walks the graph after forward and marks the parameters it does not reach ready.
static_graph=True is accepted (it changes when buckets are rebuilt, as above; the graph walk stays per iteration).

Memory: the bucket buffers are allocator blocks of category "communication" (one copy of the gradients, held for
the wrapper's lifetime). With gradient_as_bucket_view=True the gradients are views into them instead of a second
copy: .grad then costs nothing beyond the buckets. A rebuild frees the old buckets before making the new ones
(with gradient_as_bucket_view after, since the gradients live in them). What a comm hook allocates (the fp16
copy of a bucket) is category "communication" too, held until the end of backward collects the result.
gm.memory.estimate(..., world_size=N) runs this same code on meta with a simulated group
(gpumemnet.distributed._comm), so its figures include the buckets (and a hook's copies: its comm_hook=)."""
import contextlib
import weakref

from ... import _C
from ..._core.autograd import AccumulateGrad, is_grad_enabled, no_grad
from ..._core.scope import category, scope
from ...distributed import _comm
from ...distributed.grad_bucket import GradBucket
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024  # PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES: the first all-reduce starts early
_NO_LIMIT = 1 << 62  # PyTorch's sys.maxsize limit: one bucket of everything


def _bucket_assignment(params, limits, order=None):
    """[[index]] of params in buckets, as PyTorch's compute_bucket_assignment_by_size: params taken in `order`
    (default: their own), one open bucket per (dtype, device) closed when it reaches its limit, the limits used in
    turn per (dtype, device) and the last one repeated; the open buckets last. Without `order` the buckets are
    sorted by their smallest index (with it, the order is the gradients' ready order and is kept)."""
    open_, step, out = {}, {}, []
    for i in (range(len(params)) if order is None else order):
        p = params[i]
        key = (p._dtype, p._device)
        cur = open_.setdefault(key, [[], 0])
        cur[0].append(i)
        cur[1] += p.numel() * p.element_size()
        k = step.setdefault(key, 0)
        if cur[1] >= limits[k]:
            out.append(cur[0])
            open_[key] = [[], 0]
            step[key] = min(k + 1, len(limits) - 1)
    out += [cur[0] for cur in open_.values() if cur[0]]
    if order is None:
        out.sort(key=min)
    return out


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
        for e in node._edges:
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
        object.__setattr__(self, "_first_cap", self.bucket_bytes_cap if first_cap is None else first_cap)
        object.__setattr__(self, "_comm_hook", None)    # (state, hook) once register_comm_hook ran
        object.__setattr__(self, "_iteration", 0)       # synchronised backward passes begun
        object.__setattr__(self, "_order", None)        # parameter indices in ready order, while recording
        object.__setattr__(self, "_rebuild", None)      # the order to rebuild the buckets in at the next forward
        object.__setattr__(self, "_rebuilt", False)
        self.require_backward_grad_sync = True
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        with no_grad(), scope("DistributedDataParallel init"):
            for t in list(module.parameters()) + self._buffers_to_sync():
                comm.broadcast(t, 0)
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_index", {id(p): i for i, p in enumerate(params)})
        if static_graph or not find_unused_parameters:
            limits = [_NO_LIMIT]  # PyTorch: one bucket until the ready order is known
        else:
            limits = [self._first_cap, self.bucket_bytes_cap] if self._first_cap < self.bucket_bytes_cap else \
                [self.bucket_bytes_cap]
        self._build_buckets(params, list(reversed(_bucket_assignment(params, limits))))
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

    def _build_buckets(self, params, assignment):
        buckets, slot = [], {}
        with category(_comm.CATEGORY), scope("DistributedDataParallel buckets"), no_grad():
            for idx in assignment:
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

    def _rebuild_buckets(self):
        """The buckets again, in the order the gradients became ready in the recorded iteration (rank 0's order on
        every rank), with the rebuild limits: PyTorch's Reducer::rebuild_buckets, run before a forward."""
        order, params = self._rebuild, self._params
        object.__setattr__(self, "_rebuild", None)
        object.__setattr__(self, "_rebuilt", True)
        limits = [self._first_cap, self.bucket_bytes_cap]
        assignment = _bucket_assignment(params, limits, order)
        if self._comm.size > 1:
            box = [assignment]
            self._comm.broadcast_object_list(box, 0)
            assignment = box[0]
        if not self.gradient_as_bucket_view:  # nothing lives in the old buckets between iterations: free them first
            object.__setattr__(self, "_buckets", [])
        self._build_buckets(params, assignment)

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
        if self._rebuild is not None and is_grad_enabled():
            self._rebuild_buckets()
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
        object.__setattr__(self, "_iteration", self._iteration + 1)
        # PyTorch records the ready order once: in the first synchronised iteration, or the second with
        # static_graph (its first runs one delayed all-reduce); never with find_unused_parameters alone.
        record = not self._rebuilt and (self.static_graph or not self.find_unused_parameters) and \
            self._iteration == (2 if self.static_graph else 1)
        object.__setattr__(self, "_order", [] if record else None)
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
        if self._order is not None:
            self._order.append(self._index[id(p)])
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
        each gradient's hook asks the ones in flight (a test, never a wait). A comm hook's futures are not asked
        (that would run their callbacks early): the group polls the collectives under them."""
        if self._comm_hook is not None:
            progress = getattr(self._comm, "progress", None)
            if progress is not None:
                progress()
            return
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
                if self._comm_hook is not None:
                    b.work = self._run_comm_hook(i, b, i == len(buckets) - 1)
                else:
                    if comm.size > 1:
                        b.buffer.div_(comm.size)  # SUM of gradients / N = the average (PyTorch divides first too)
                    b.work = comm.all_reduce_sum(b.buffer, async_op=True)
                i += 1
        object.__setattr__(self, "_next", i)
        if i == len(buckets):
            self._finish()

    def _run_comm_hook(self, index, b, last):
        state, hook = self._comm_hook
        if state is None and getattr(self._comm, "simulated", False):
            state = self._comm.process_group()  # the estimator's group: the hook must not reach the real one
        with category(_comm.CATEGORY):
            fut = hook(state, GradBucket(index, b.buffer, b.params, b.views, last))
        if not callable(getattr(fut, "wait", None)):
            raise TypeError(f"DistributedDataParallel: the communication hook {getattr(hook, '__name__', hook)!r} "
                            f"must return a Future (gpumemnet.futures.Future), got {type(fut).__name__}")
        return fut

    def _hook_result(self, b):
        """Wait for a bucket's comm hook and put its result into the bucket (PyTorch: the Future's tensor)."""
        res = b.work.wait()
        if isinstance(res, (list, tuple)) and len(res) == 1:
            res = res[0]
        if not isinstance(res, _C.TensorBase) or res.numel() != b.buffer.numel():
            raise RuntimeError(f"DistributedDataParallel: the communication hook's Future must hold one tensor of the "
                               f"bucket's {b.buffer.numel()} elements, got "
                               f"{res.numel() if isinstance(res, _C.TensorBase) else type(res).__name__}")
        if res._storage_id != b.buffer._storage_id or res._offset != b.buffer._offset:
            b.buffer.copy_(res.reshape(b.buffer.shape))

    def _finish(self):
        """Every bucket is launched: wait for them and put the averages in .grad."""
        with no_grad(), scope("DistributedDataParallel all_reduce"):
            for b in self._buckets:
                if b.work is not None:
                    if self._comm_hook is not None:
                        self._hook_result(b)
                    else:
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
        if self._order is not None:
            if len(self._order) == len(self._params):  # every parameter got its gradient: rebuild at next forward
                object.__setattr__(self, "_rebuild", self._order)
            object.__setattr__(self, "_order", None)

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

    def register_comm_hook(self, state, hook):
        """Reduce each bucket with hook(state, bucket: GradBucket) -> Future of the bucket's reduced tensor,
        instead of the averaging all-reduce (PyTorch's; the default hooks are in
        gpumemnet.distributed.algorithms.ddp_comm_hooks.default_hooks). Once per wrapper, before backward."""
        if not callable(hook):
            raise TypeError("Communication hook must be callable.")
        if self._comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        if self._armed:
            raise RuntimeError("register_comm_hook must be called before the backward of the current forward")
        object.__setattr__(self, "_comm_hook", (state, hook))

    def _set_static_graph(self):
        """static_graph=True after construction (PyTorch's private API, used by some scripts)."""
        if self.static_graph:
            import warnings
            warnings.warn("You've set static_graph to be True, no need to set it again.", stacklevel=2)
            return
        self.static_graph = True

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
