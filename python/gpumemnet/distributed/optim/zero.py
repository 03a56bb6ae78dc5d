"""ZeroRedundancyOptimizer: the optimizer state (stage 1), and also the reduced gradients (stage 2), of each
rank's shard only (Rajbhandari et al., SC 2020), with PyTorch's API: the rank's local optimizer is `.optim`,
`consolidate_state_dict(to=0)` and `state_dict()` give rank `to` the state a plain optimizer would have.

Sharding is flat, per bucket: the parameters are laid out in buckets in reverse order (as DistributedDataParallel
lays out its gradients, bucket_cap_mb each), and each bucket's elements are cut into world_size equal ranges.
Rank r owns range r of every bucket, whatever parameters it crosses: its local optimizer steps "pieces",
contiguous 1-D views of those parameters (so the update writes the real parameters in place), and creates state
for them only. Every rank therefore holds 1/N of the optimizer state up to one element of padding per bucket, even
when one tensor dominates the model (PyTorch's ZeRO gives whole tensors to ranks, which cannot balance such a
model). After the local step each bucket is all-gathered into every rank's parameters.

- stage=1: wrap the model in DistributedDataParallel as usual (it averages the gradients); the step reads each
  piece's gradient as a view of the parameter's .grad.
- stage=2: use the bare model (this takes DDP's place, and broadcasts the parameters from rank 0 at construction):
  during backward each gradient is copied into its bucket as soon as it is accumulated and then dropped, and a full
  bucket is reduce-scattered (averaged) asynchronously into this rank's shard of the gradients, the only gradient
  memory kept until the step. Parameters' .grad stay None. Every parameter must get a gradient in every backward.

PyTorch's parameters_as_bucket_view is accepted and changes nothing (the gathered buckets are copied into the
parameters); overlap_with_ddp=True is refused (stage 2 overlaps its reduce-scatter with backward itself). Stage 1
must run under DDP when world_size > 1: it does not average the gradients (as PyTorch's ZeRO does not).

Memory (what gm.memory.estimate(..., world_size=N, zero=1|2) runs on meta with a simulated group): the state is
category "optimizer"; stage 2's gradient shards "gradient"; bucket, send and gather buffers "communication", freed
when their collective has finished."""
import weakref

import numpy as np

from ... import _C
from ..._core.autograd import no_grad
from ..._core.creation import tensor as _tensor
from ..._core.scope import category, scope
from ...nn.parallel.distributed import _assign_buckets
from ...optim import Adam
from ...optim.optimizer import Optimizer
from .. import _comm

__all__ = ["ZeroRedundancyOptimizer"]


def _flat(t, start, n):
    """Elements [start, start + n) of contiguous t as a 1-D view."""
    return t._as_strided((n,), (1,), t._offset + start)


class _ShardBucket:
    """One bucket of the layout: its parameters with their offsets, its shard size and this rank's pieces."""
    __slots__ = ("params", "offsets", "numel", "shard", "pieces", "pending", "buffer", "out", "work", "grad")

    def __init__(self, params, rank, size):
        self.params = params
        self.offsets, off = [], 0
        for p in params:
            self.offsets.append(off)
            off += p.numel()
        self.numel = off
        self.shard = -(-off // size)  # ceil: ranks' ranges are equal, the last one padded
        lo, hi = rank * self.shard, min((rank + 1) * self.shard, off)
        self.pieces = []  # (param, start in the param, length, position in the shard)
        for p, o in zip(params, self.offsets):
            a, b = max(lo, o), min(hi, o + p.numel())
            if a < b:
                self.pieces.append((p, a - o, b - a, a - lo))
        self.pending = len(params)
        self.buffer = self.out = self.work = self.grad = None


class ZeroRedundancyOptimizer(Optimizer):
    def __init__(self, params, optimizer_class=Adam, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, *, stage=1, bucket_cap_mb=25, **defaults):
        if stage not in (1, 2):
            raise ValueError(f"ZeroRedundancyOptimizer: stage must be 1 or 2, got {stage!r}")
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer: overlap_with_ddp=True is not supported; use "
                                      "stage=2, which overlaps its reduce-scatter with backward")
        super().__init__(params, defaults)
        self._comm = comm = _comm.world(process_group)
        self.stage = stage
        self.optimizer_class = optimizer_class
        self.rank, self.world_size = comm.rank, comm.size
        self._all = [p for g in self.param_groups for p in g["params"]]
        for p in self._all:
            if not p.is_contiguous():
                raise ValueError("ZeroRedundancyOptimizer: parameters must be contiguous")
        group_of = {id(p): i for i, g in enumerate(self.param_groups) for p in g["params"]}
        cap = int(bucket_cap_mb * 1024 * 1024)
        self._buckets = [_ShardBucket([self._all[i] for i in idx], comm.rank, comm.size)
                         for idx in _assign_buckets(self._all, cap)]
        # The local optimizer: one group per group of ours, holding this rank's pieces of its parameters.
        local = [{"params": []} for _ in self.param_groups]
        self._pieces = []  # (piece Parameter, bucket, (param, start, n, pos))
        for b in self._buckets:
            for pc in b.pieces:
                p, start, n, _ = pc
                view = _flat(p, start, n)
                view.requires_grad = True
                view._is_param = True
                if p._name:
                    view._name = f"{p._name}[{start}:{start + n}]"
                local[group_of[id(p)]]["params"].append(view)
                self._pieces.append((view, b, pc))
        for g, lg in zip(self.param_groups, local):
            lg.update({k: v for k, v in g.items() if k != "params"})
        self.optim = optimizer_class(local, **defaults)
        self._armed = False
        self._next = 0
        if stage == 2:
            with no_grad(), scope("ZeroRedundancyOptimizer init"):
                for p in self._all:
                    comm.broadcast(p, 0)
            self._slot = {id(p): (k, j) for k, b in enumerate(self._buckets) for j, p in enumerate(b.params)}
            me = weakref.ref(self)

            def hook(p):
                z = me()
                if z is not None:
                    z._grad_ready(p)
            self._handles = [p.register_post_accumulate_grad_hook(hook) for p in self._all]

    # ---- stage 2: reduce-scatter during backward --------------------------------------------------------------
    def _grad_ready(self, p):
        if not self._armed:
            for b in self._buckets:
                b.pending = len(b.params)
            self._next = 0
            self._armed = True
        k, j = self._slot[id(p)]
        b = self._buckets[k]
        with no_grad(), scope("ZeroRedundancyOptimizer reduce_scatter"):
            if b.buffer is None:
                with category(_comm.CATEGORY):
                    b.buffer = _C.empty((b.shard * self.world_size,), p._dtype, p._device)
                pad = b.shard * self.world_size - b.numel
                if pad:
                    _C.fill_(_flat(b.buffer, b.numel, pad), 0)
            g = p.grad if p.grad.is_contiguous() else p.grad.contiguous()
            _C.copy_(_flat(b.buffer, b.offsets[j], p.numel()), _flat(g, 0, p.numel()))
        p.grad = None  # the bucket holds it now: the full gradient is not kept
        b.pending -= 1
        if b.pending == 0:
            self._launch_ready()
        for done in self._buckets[:self._next]:  # MPI progresses only inside its calls (see DDP's _progress)
            if done.work is not None:
                done.work.is_completed()

    def _launch_ready(self):
        buckets, comm = self._buckets, self._comm
        i = self._next
        with no_grad(), scope("ZeroRedundancyOptimizer reduce_scatter"):
            while i < len(buckets) and buckets[i].pending == 0:
                b = buckets[i]
                if comm.size > 1:
                    b.buffer.div_(comm.size)  # the average, as DDP's
                # a first backward reduces straight into the shard's gradient; a later one (accumulation) into a
                # temporary that is added when it has arrived
                cat = "gradient" if b.grad is None else _comm.CATEGORY
                with category(cat):
                    b.out = _C.empty((b.shard,), b.buffer._dtype, b.buffer._device)
                b.work = comm.reduce_scatter_sum(b.out, b.buffer, async_op=True)
                i += 1
        self._next = i
        if i == len(buckets):
            self._finish_reduce()

    def _finish_reduce(self):
        with no_grad(), scope("ZeroRedundancyOptimizer reduce_scatter"):
            for b in self._buckets:
                b.work.wait()
                b.work = None
                b.buffer = None
                if b.grad is None:
                    b.grad = b.out
                else:
                    _C.binary(0, b.grad, b.out, b.grad)
                b.out = None
        self._armed = False

    # ---- the step ---------------------------------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        super().zero_grad(set_to_none)
        for b in self._buckets:
            if b.grad is not None:
                if set_to_none:
                    b.grad = None
                else:
                    _C.fill_(b.grad, 0)

    def _piece_grads(self):
        for view, b, (p, start, n, pos) in self._pieces:
            if self.stage == 2:
                view.grad = None if b.grad is None else _flat(b.grad, pos, n)
            else:
                g = p.grad
                if g is not None and not g.is_contiguous():
                    g = g.contiguous()
                view.grad = None if g is None else _flat(g, start, n)

    def step(self, closure=None):
        """The local optimizer's step on this rank's pieces, then every bucket all-gathered into the parameters."""
        if self._armed:
            missing = [p._name or tuple(p.shape) for b in self._buckets if b.pending for p in b.params]
            raise RuntimeError(f"ZeroRedundancyOptimizer(stage=2): backward did not produce a gradient for every "
                               f"parameter, so the reduce-scatter could not run (missing: {missing[:10]}); every "
                               f"parameter given to it must be used in the loss")
        for g, lg in zip(self.param_groups, self.optim.param_groups):  # lr schedulers change ours
            lg.update({k: v for k, v in g.items() if k != "params"})
        self._piece_grads()
        loss = None
        if self._pieces:
            loss = self.optim.step(closure)
        for view, _, _ in self._pieces:
            view.grad = None  # the views would keep the full gradients' storage alive
        self._all_gather()
        return loss

    def _all_gather(self):
        comm = self._comm
        with no_grad(), scope("ZeroRedundancyOptimizer all_gather"):
            for b in self._buckets:
                p0 = b.params[0]
                with category(_comm.CATEGORY):
                    send = _C.empty((b.shard,), p0._dtype, p0._device)
                    recv = _C.empty((b.shard * comm.size,), p0._dtype, p0._device)
                for p, start, n, pos in b.pieces:
                    _C.copy_(_flat(send, pos, n), _flat(p, start, n))
                comm.all_gather_into_tensor(recv, send)
                for p, off in zip(b.params, b.offsets):
                    _C.copy_(_flat(p, 0, p.numel()), _flat(recv, off, p.numel()))
                send = recv = None

    # ---- state_dict ------------------------------------------------------------------------------------------
    def _local_state(self):
        """[(global param index, start, {key: numpy array or number})] of this rank's pieces."""
        index = {id(p): i for i, p in enumerate(self._all)}
        out = []
        for view, _, (p, start, n, _) in self._pieces:
            st = self.optim.state.get(view)
            if st:
                out.append((index[id(p)], start, {k: (v.numpy().copy() if isinstance(v, _C.TensorBase) else v)
                                                  for k, v in st.items()}))
        return out

    def consolidate_state_dict(self, to=0):
        """Gather every rank's shard of the state on rank `to` (a collective: every rank calls it)."""
        parts = [None] * self.world_size
        self._comm.all_gather_object(parts, self._local_state())
        self._consolidated = parts if self.rank == to else None

    def state_dict(self):
        """On the rank consolidate_state_dict() gathered to: the state_dict of a plain optimizer_class over the
        same parameters (so gm.save writes one file, and a plain optimizer or a ZeRO one of any world size loads
        it). Elsewhere it raises, as in PyTorch."""
        parts = getattr(self, "_consolidated", None)
        if parts is None:
            raise RuntimeError("ZeroRedundancyOptimizer.state_dict(): call consolidate_state_dict(to=rank) on every "
                               "rank first; the state is then available on that rank only")
        full = {}
        for part in parts:
            for i, start, st in part:
                p = self._all[i]
                dst = full.setdefault(i, {})
                for k, v in st.items():
                    if isinstance(v, np.ndarray):
                        if k not in dst:
                            dst[k] = np.zeros(p.numel(), dtype=v.dtype)
                        dst[k][start:start + v.size] = v
                    else:
                        dst[k] = v
        state = {}
        for i in sorted(full):
            shape = tuple(self._all[i].shape)
            with category("optimizer"):
                state[i] = {k: (_tensor(v.reshape(shape)) if isinstance(v, np.ndarray) else v)
                            for k, v in full[i].items()}
        plain = Optimizer.state_dict(self)
        plain["state"] = state
        return plain

    def load_state_dict(self, state_dict):
        """Load a consolidated (or plain optimizer's) state_dict, given on every rank: each rank keeps its pieces."""
        Optimizer.load_state_dict(self, {"state": {}, "param_groups": state_dict["param_groups"]})
        index = {id(p): i for i, p in enumerate(self._all)}
        local_state = {}
        for view, _, (p, start, n, _) in self._pieces:
            st = state_dict["state"].get(index[id(p)])
            if st is None:
                continue
            local_state[view] = {k: (_flat(v.contiguous(), start, n) if isinstance(v, _C.TensorBase) and k != "step"
                                     else v) for k, v in st.items()}
        lsd = self.optim.state_dict()
        pid = {id(view): i for i, view in enumerate(v for lg in self.optim.param_groups for v in lg["params"])}
        lsd["state"] = {pid[id(v)]: st for v, st in local_state.items()}
        for g, lg in zip(self.param_groups, lsd["param_groups"]):
            lg.update({k: v for k, v in g.items() if k != "params"})
        self.optim.load_state_dict(lsd)
