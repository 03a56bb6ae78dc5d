"""Worker of tests/test_distributed_groups.py, run under `mpiexec -n 3`: new_group with a subset of the ranks
(PyTorch's semantics) and the collectives on it, checked on every rank against NumPy; DDP and SyncBatchNorm on a
subgroup match one process with the subgroup's whole batch. Prints 'OK rank r' when every check passed."""
import warnings

import numpy as np

import gpumemnet as gm
import gpumemnet.distributed as dist
import gpumemnet.nn.functional as F
from gpumemnet.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 3, "run with -n 3"
MEMBERS = [0, 2]  # not contiguous: group ranks differ from global ranks
inside = rank in MEMBERS


def check(got, want, what):
    got = got.numpy() if isinstance(got, gm.Tensor) else np.asarray(got)
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


def raises(exc, match, f, *a, **k):
    try:
        f(*a, **k)
    except exc as e:
        assert match in str(e), (match, str(e))
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise {exc.__name__} ({match})")


# argument checks (every rank, before any group exists): PyTorch's messages
raises(ValueError, "duplicate entries", dist.new_group, [0, 0])
raises(ValueError, "Rank 3 is out of range", dist.new_group, [0, 3])
raises(ValueError, "doesn't support use_local_synchronization", dist.new_group, [0, 1],
       use_local_synchronization=True)
raises(TypeError, "ranks must be a sequence of integers", dist.new_group, [0, "1"])

g = dist.new_group(MEMBERS)
h = dist.new_group([2, 0], sort_ranks=False)  # the list's order is the group's: global 2 is group rank 0
everyone = dist.new_group()
if inside:
    assert isinstance(g, dist.ProcessGroup), g
    assert dist.get_rank(g) == MEMBERS.index(rank) and dist.get_world_size(g) == 2
    assert dist.get_process_group_ranks(g) == MEMBERS and dist.get_process_group_ranks(h) == [2, 0]
    assert dist.get_rank(h) == [2, 0].index(rank)
    assert dist.get_group_rank(g, 2) == 1 and dist.get_global_rank(g, 1) == 2 and dist.get_global_rank(h, 1) == 0
    raises(ValueError, "Global rank 1 is not part of group", dist.get_group_rank, g, 1)
    raises(ValueError, "Group rank 2 is not part of group", dist.get_global_rank, g, 2)
else:
    assert g is dist.GroupMember.NON_GROUP_MEMBER and h is dist.GroupMember.NON_GROUP_MEMBER
    assert dist.get_rank(g) == -1 and dist.get_world_size(g) == -1  # PyTorch's answers off the group
    t = gm.full((4,), 100.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dist.all_reduce(t, group=g) is None  # nothing happens off the group
    assert "does not belong to the given group" in str(caught[0].message), caught
    check(t, [100.0] * 4, "all_reduce off the group leaves the tensor alone")
assert dist.get_world_size(everyone) == 3 and dist.get_rank(everyone) == rank

# the subgroup and the default group interleaved, and async on both at once
a = gm.full((5,), float(rank + 1))
b = gm.full((3,), float(rank + 1))
wa = dist.all_reduce(a, group=g, async_op=True) if inside else None
wb = dist.all_reduce(b, async_op=True)
assert wb.wait()
if inside:
    assert wa.wait()
    check(a, [sum(r + 1 for r in MEMBERS)] * 5, "async all_reduce on the group")
check(b, [6.0] * 3, "async all_reduce on the default group beside it")

if inside:
    me = MEMBERS.index(rank)
    t = gm.full((4,), float(rank + 1))
    dist.all_reduce(t, op=dist.ReduceOp.AVG, group=g)  # divided by the group's size, not the world's
    check(t, [2.0] * 4, "all_reduce AVG on the group")
    t = gm.arange(6, dtype=gm.float32) * (rank + 1)
    dist.broadcast(t, src=2, group=g)  # src is a global rank
    check(t, np.arange(6) * 3, "broadcast src=2 (global)")
    t = gm.arange(6, dtype=gm.float32) * (rank + 1)
    dist.broadcast(t, None, group=g, group_src=0)
    check(t, np.arange(6) * 1, "broadcast group_src=0")
    raises(ValueError, "src=1 is not in the group", dist.broadcast, gm.zeros(2), 1, group=g)
    t = gm.full((2,), float(rank + 1))
    dist.reduce(t, dst=2, group=g)
    check(t, [4.0] * 2 if rank == 2 else [1.0] * 2, "reduce dst=2")
    outs = [gm.zeros(3) for _ in range(2)]
    dist.all_gather(outs, gm.full((3,), float(rank)), group=g)
    check(outs[0], [0.0] * 3, "all_gather [0]")
    check(outs[1], [2.0] * 3, "all_gather [1]")
    raises(ValueError, "expected one per rank (world_size 2)", dist.all_gather, [gm.zeros(3)] * 3, gm.zeros(3),
           group=g)
    flat = gm.zeros(4)
    dist.all_gather_into_tensor(flat, gm.full((2,), float(rank)), group=h)  # h's order: global 2 first
    check(flat, [2.0, 2.0, 0.0, 0.0], "all_gather_into_tensor on the reordered group")
    out = gm.zeros(2)
    dist.reduce_scatter_tensor(out, gm.arange(4, dtype=gm.float32) + rank, group=g)
    check(out, (np.arange(4) * 2 + 2)[me * 2:me * 2 + 2], "reduce_scatter_tensor")
    lst = [gm.zeros(2) for _ in range(2)] if rank == 2 else None
    dist.gather(gm.full((2,), float(rank)), lst, dst=2, group=g)
    if rank == 2:
        check(lst[0], [0.0, 0.0], "gather [0]")
        check(lst[1], [2.0, 2.0], "gather [1]")
    t = gm.zeros(2)
    dist.scatter(t, [gm.full((2,), 10.0), gm.full((2,), 20.0)] if rank == 0 else None, src=0, group=g)
    check(t, [10.0 * (me + 1)] * 2, "scatter")
    dist.barrier(group=g)
    objs = [None]
    got = [None, None]
    dist.all_gather_object(got, {"rank": rank}, group=g)
    assert got == [{"rank": 0}, {"rank": 2}], got
    objs = [f"from {rank}"]
    dist.broadcast_object_list(objs, src=2, group=g)
    assert objs == ["from 2"], objs

# DDP on the subgroup: its 2 ranks with batch B/2 each match one process with batch B; rank 1 trains alone
B = 8
rng = np.random.default_rng(0)
x, y = rng.standard_normal((B, 6)).astype(np.float32), rng.integers(0, 3, B)


def model(seed):  # no bias before BatchNorm: its gradient is rounding noise, which Adam would amplify
    gm.manual_seed(seed)
    return gm.nn.Sequential(gm.nn.Linear(6, 8, bias=False), gm.nn.BatchNorm1d(8), gm.nn.ReLU(), gm.nn.Linear(8, 3))


def train(m, xs, ys):
    opt = gm.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(m(gm.tensor(xs)), gm.tensor(ys)).backward()
        opt.step()


ref = model(0)
train(ref, x, y)
if inside:
    me = MEMBERS.index(rank)
    net = gm.nn.SyncBatchNorm.convert_sync_batchnorm(model(rank), process_group=g)  # rank 0's weights win
    ddp = DDP(net, process_group=g, bucket_cap_mb=0.0001)
    train(ddp, x[me * B // 2:(me + 1) * B // 2], y[me * B // 2:(me + 1) * B // 2])
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        if not np.allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5):
            raise AssertionError(f"rank {rank}: DDP on the group: parameter {name} differs")
    for (name, b), c in zip(net.named_buffers(), ref.buffers()):
        check(b.numpy().astype(np.float64), c.numpy().astype(np.float64), f"SyncBatchNorm buffer {name}")

# destroy one group: the others stay usable; the destroyed one is refused by name
dist.destroy_process_group(g)
if inside:
    raises(ValueError, "was destroyed", dist.all_reduce, gm.zeros(2), group=g)
    t = gm.ones(2)
    dist.all_reduce(t, group=h)
    check(t, [2.0, 2.0], "all_reduce on a group beside a destroyed one")
t = gm.ones(2)
dist.all_reduce(t, group=everyone)
check(t, [3.0, 3.0], "all_reduce on new_group() of every rank")
dist.destroy_process_group()  # every group
assert not dist.is_initialized()
print(f"OK rank {rank}", flush=True)
