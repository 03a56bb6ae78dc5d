"""The default process group: init_process_group, ranks, Work, the timeout and the abort of every rank (layer 2).

Ranks and the world size come from the MPI launcher (`mpiexec -n N python train.py`); MPI is initialised by
init_process_group on a duplicate of MPI_COMM_WORLD (csrc/dist_mpi.c). Two rules keep a failure on one rank from
leaving the others waiting forever:
  - every collective has a deadline (init_process_group's `timeout`): Work.wait polls the non-blocking MPI
    request and raises DistBackendError naming the op, the rank and the timeout when it passes;
  - an exception that nobody catches on a rank (a bad input, an OutOfMemoryError, that DistBackendError) is
    printed, then MPI_Abort ends every rank through the launcher (an excepthook installed by
    init_process_group), as PyTorch's elastic launcher or mpi4py's `-m mpi4py` do."""
import atexit
import operator
import os
import sys
import time
from datetime import timedelta

import numpy as np

from .. import _C
from . import _mpi, _nccl

__all__ = ["DistError", "DistBackendError", "Backend", "GroupMember", "group", "ProcessGroup", "Work", "is_available",
           "is_initialized", "is_mpi_available", "is_nccl_available", "init_process_group", "destroy_process_group",
           "get_rank", "get_world_size", "get_backend", "new_group", "get_group_rank", "get_global_rank",
           "get_process_group_ranks"]

default_pg_timeout = timedelta(minutes=30)


class DistError(RuntimeError):
    """A failure of gpumemnet.distributed (PyTorch's torch.distributed.DistError)."""


class DistBackendError(DistError):
    """The communication library failed, or a collective did not complete within the process group's timeout."""


DistError.__module__ = DistBackendError.__module__ = "gpumemnet.distributed"  # where users name them


class Backend(str):
    """The backends' names, as PyTorch's dist.Backend."""
    MPI = "mpi"
    NCCL = "nccl"
    GLOO = "gloo"

    def __new__(cls, name):
        return str.__new__(cls, name.lower())


class ProcessGroup:
    """A group of ranks: the default one (every rank, init_process_group) or one made by new_group, which has its
    own MPI communicator (comm, a csrc/dist_mpi.c capsule; None for the default group's), its global ranks in
    group-rank order, and its timeout."""

    def __init__(self, rank, size, backend, ranks=None, comm=None, timeout=None):
        self._rank, self._size, self._backend = rank, size, backend
        self._ranks = list(range(size)) if ranks is None else list(ranks)
        self._comm, self._timeout = comm, timeout

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return self._backend

    def __repr__(self):
        return f"ProcessGroup(backend={self._backend!r}, rank={self._rank}, size={self._size}, ranks={self._ranks})"


class GroupMember:
    WORLD = None  # the default group once init_process_group has run
    NON_GROUP_MEMBER = -100


class _GroupMeta(type):
    @property
    def WORLD(cls):  # noqa: N802 (PyTorch's name)
        return GroupMember.WORLD


class group(metaclass=_GroupMeta):  # noqa: N801 (PyTorch's dist.group; group.WORLD is the default group)
    pass


class _State:
    pg = None             # the default ProcessGroup
    timeout = None        # seconds
    init_here = False     # whether init_process_group called MPI_Init (then destroy_process_group finalizes)
    broken = None         # why the group can no longer be used (a collective timed out)
    nccl = None           # the NCCL communicator's state, when the group uses NCCL for CUDA tensors
    prev_hook = None
    pending = set()       # Works in flight: their tensors must outlive them
    groups = []           # the groups new_group made (destroyed with the default group)
    exit_registered = False


_state = _State()


def is_available():
    """True: gpumemnet.distributed is always built; whether MPI can be found is is_mpi_available()."""
    return True


def is_mpi_available():
    return _mpi.is_available()


def is_nccl_available():
    return _nccl.is_available()


def is_initialized():
    return _state.pg is not None


def _timeout_s(timeout):
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return float(timeout)
    raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")


def _group(group, op):
    """The ProcessGroup `group` names (None: the default one), after _require; None where this rank is not in it
    (group is GroupMember.NON_GROUP_MEMBER, what new_group returned off the group): the caller then does nothing,
    as PyTorch's collectives do."""
    _require(op)
    if group is None or group is _state.pg:
        return _state.pg
    if isinstance(group, int) and not isinstance(group, bool) and group == GroupMember.NON_GROUP_MEMBER:
        return None
    if isinstance(group, ProcessGroup) and any(group is g for g in _state.groups):
        return group
    if isinstance(group, ProcessGroup):
        raise ValueError(f"{op}: {group!r} was destroyed (destroy_process_group) or belongs to an earlier "
                         f"init_process_group")
    raise ValueError(f"{op}: group must be None (the default group) or a group from new_group, got "
                     f"{type(group).__name__}")


def _warn_not_in_group(op):
    import warnings
    warnings.warn(f"Running {op} on global rank {_state.pg.rank()} which does not belong to the given group.",
                  stacklevel=3)


def _check_group(group, op):
    """_group for the ops that need a group this rank belongs to (destroy_process_group excepted)."""
    pg = _group(group, op)
    if pg is None:
        raise ValueError(f"{op}: this rank ({_state.pg.rank()}) is not in the group")
    return pg


def _require(op):
    if _state.pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    if _state.broken:
        raise DistBackendError(f"{op}: the process group is unusable since {_state.broken}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join the ranks the MPI launcher started (`mpiexec -n N python train.py`).

    backend: "mpi" (every tensor through MPI; CUDA tensors staged through host memory), "nccl" (CUDA tensors
    through NCCL, bootstrapped over MPI as llm.c does; CPU tensors through MPI), or None (NCCL for CUDA tensors
    when the build has CUDA and libnccl loads, else MPI). init_method and store are not used: MPI's launcher is
    the rendezvous; world_size and rank, when given, must equal the launcher's. timeout (a timedelta, default 30
    minutes) bounds every collective."""
    if _state.pg is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = Backend(backend or "undefined")
    if name not in ("undefined", "mpi", "nccl"):
        raise ValueError(f"init_process_group: backend {backend!r} is not supported; gpumemnet has 'mpi' and "
                         f"'nccl' (None picks them)")
    timeout_s = _timeout_s(default_pg_timeout if timeout is None else timeout)
    if timeout_s <= 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    _mpi.load()
    r, n, init_here = _C.dist_mpi_init()
    expected, var = _mpi.launcher_world_size()
    if expected is not None and expected != n:
        raise DistBackendError(
            f"init_process_group: the launcher started {expected} ranks (${var}) but MPI reports a world of {n}: the "
            f"MPI library ({_mpi.load()[0]}) is not the one of this mpiexec. Use the mpiexec that comes with it "
            f"(for the mpich wheel: {os.path.join(sys.prefix, 'bin', 'mpiexec')}) or set $GPUMEMNET_MPI_LIBRARY")
    if world_size not in (-1, None) and world_size != n:
        raise ValueError(f"init_process_group: world_size={world_size} but the MPI launcher started {n} ranks")
    if rank not in (-1, None) and rank != r:
        raise ValueError(f"init_process_group: rank={rank} but MPI gave this process rank {r}")
    _state.timeout, _state.init_here, _state.broken = timeout_s, bool(init_here), None
    _state.pg = GroupMember.WORLD = ProcessGroup(r, n, "mpi")
    if name in ("nccl", "undefined"):
        try:
            _state.nccl = _nccl.init(r, n, _mpi_min, _mpi_broadcast, device_id, required=name == "nccl")
        except BaseException:
            _state.pg = GroupMember.WORLD = None
            raise
        if _state.nccl is not None:
            _state.pg._backend = "nccl"
    if n > 1 and _state.prev_hook is None:
        _state.prev_hook = sys.excepthook
        sys.excepthook = _abort_on_uncaught
    if not _state.exit_registered:
        _state.exit_registered = True
        atexit.register(_at_exit)


def _mpi_wait(cap, op):
    if not _C.dist_mpi_wait(cap, _state.timeout):
        raise DistBackendError(f"{op}: the other ranks did not join within {_state.timeout:g} s")


def _mpi_min(value):
    """The smallest int64 value over the ranks (straight through MPI: init_process_group's own agreement)."""
    t = _C.from_numpy(np.array([value], dtype=np.int64), None, "cpu")
    _mpi_wait(_C.dist_mpi_start("all_reduce", t, None, 2, 0), "init_process_group")
    return int(t.item())


def _mpi_broadcast(data):
    """Rank 0's bytes (of the same length on every rank)."""
    t = _C.from_numpy(np.frombuffer(data, dtype=np.uint8), None, "cpu")
    _mpi_wait(_C.dist_mpi_start("broadcast", t, None, 0, 0), "init_process_group")
    return t.numpy().tobytes()


def destroy_process_group(group=None):
    """Wait for the collectives in flight and free the communicators: of `group` (one from new_group), or of every
    group (None). MPI itself stays initialised (it can start only once per process) until the interpreter exits,
    so init_process_group may run again."""
    if _state.pg is None:
        return
    if group is not None and group is not _state.pg:
        pg = _group(group, "destroy_process_group")
        if pg is not None:
            _destroy_subgroup(pg)
        return
    for g in list(_state.groups):
        _destroy_subgroup(g)
    if not _state.broken:
        for w in list(_state.pending):
            w.wait()
    if _state.nccl is not None:
        _nccl.destroy(_state.nccl, abort=bool(_state.broken))
        _state.nccl = None
    _state.pending.clear()
    _state.pg = GroupMember.WORLD = None
    if _state.prev_hook is not None:
        sys.excepthook, _state.prev_hook = _state.prev_hook, None
    _C.dist_mpi_free()


def _destroy_subgroup(pg):
    if not _state.broken:
        for w in [w for w in _state.pending if w._pg is pg]:
            w.wait()
    _state.groups = [g for g in _state.groups if g is not pg]
    _C.dist_mpi_comm_free(pg._comm)


def _at_exit():
    """MPI_Finalize (if we initialised MPI), once every rank reached its exit: a barrier with the group's timeout
    first, because MPI_Finalize waits for the other ranks without one. A rank whose peers are stuck elsewhere (or
    that exits with sys.exit(1) while they wait in a collective) then leaves without MPI_Finalize after the timeout,
    and the launcher ends the job. Nothing is finalized after a collective timed out: it is still in flight."""
    if _state.broken:
        return
    if _state.pg is not None:
        destroy_process_group()
    _C.dist_mpi_init()  # our communicator again (MPI is up), for the exit barrier
    try:
        late = not _C.dist_mpi_wait(_C.dist_mpi_start("barrier", None, None, 0, 0), _state.timeout)
    finally:
        _C.dist_mpi_free()
    if late:
        sys.stderr.write(f"gpumemnet.distributed: the other ranks did not reach their exit within {_state.timeout:g} "
                         f"s; leaving without MPI_Finalize\n")
        return
    _C.dist_mpi_finalize()


def _abort_on_uncaught(exc_type, exc, tb):
    """sys.excepthook while a group of more than one rank is up: print, then MPI_Abort, which makes the launcher
    end every rank, instead of exiting alone and leaving the others to wait for this one."""
    hook = _state.prev_hook or sys.__excepthook__
    try:
        hook(exc_type, exc, tb)
        pg = _state.pg
        who = f"rank {pg.rank()} of {pg.size()}" if pg else "a rank"
        sys.stderr.write(f"gpumemnet.distributed: {who} raised {exc_type.__name__} and did not catch it; "
                         f"MPI_Abort ends every rank\n")
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(0.5)  # the launcher forwards output through pipes: let it read this before MPI_Abort kills us
    finally:
        _C.dist_mpi_abort(1)
        os._exit(1)


def get_rank(group=None):
    """This process's rank in group; -1 off it (PyTorch's)."""
    pg = _group(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    """The number of ranks in group; -1 off it (PyTorch's)."""
    pg = _group(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    return _check_group(group, "get_backend").name()


def get_group_rank(group, global_rank):
    """global_rank's rank in group (ValueError if it is not a member)."""
    pg = _check_group(group, "get_group_rank")
    if global_rank not in pg._ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
    return pg._ranks.index(global_rank)


def get_global_rank(group, group_rank):
    """The global rank of group's rank group_rank (ValueError if the group has none)."""
    pg = _check_group(group, "get_global_rank")
    if isinstance(group_rank, bool) or not isinstance(group_rank, int) or not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
    return pg._ranks[group_rank]


def get_process_group_ranks(group):
    """group's global ranks, in group-rank order."""
    return list(_check_group(group, "get_process_group_ranks")._ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None, sort_ranks=True):
    """A group of the given global ranks (None: every rank) with its own MPI communicator (MPI_Comm_split), for the
    collectives' group= argument. As in PyTorch, every rank of the default group calls it, in the same order of
    new_group calls, and it returns GroupMember.NON_GROUP_MEMBER on the ranks outside; collectives given that do
    nothing. Ranks are sorted unless sort_ranks=False (then a rank's place in `ranks` is its group rank). The
    group's timeout defaults to the default group's. Its CUDA tensors travel staged through MPI: NCCL serves the
    default group only."""
    world = _state.pg
    _require("new_group")
    if use_local_synchronization:
        raise ValueError("MPI backend doesn't support use_local_synchronization=True")  # PyTorch's, for MPI
    if backend is not None and Backend(backend) not in ("mpi", "undefined"):
        raise ValueError(f"new_group: backend {backend!r} is not supported for groups; gpumemnet's groups use 'mpi' "
                         f"(CUDA tensors staged through host memory)")
    timeout_s = _state.timeout if timeout is None else _timeout_s(timeout)
    if timeout_s <= 0:
        raise ValueError(f"new_group: timeout must be positive, got {timeout!r}")
    n = world.size()
    if ranks is None:
        ranks = list(range(n))
    else:
        try:
            ranks = [operator.index(r) for r in ranks]
        except TypeError as error:
            raise TypeError("ranks must be a sequence of integers") from error
        if sort_ranks:
            ranks = sorted(ranks)
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"ranks list must not contain duplicate entries, got {ranks}")
        if len(ranks) > n:
            raise ValueError("the new group's world size should be less or equal to the world size set by "
                             "init_process_group")
        for r in ranks:
            if r < 0 or r >= n:
                raise ValueError(f"Rank {r} is out of range. Valid ranks are 0 to {n - 1} (world_size={n})")
    # MPI_Comm_split blocks, with no timeout, until every rank of the default group calls it: a barrier with the
    # timeout first, so a rank that never comes makes the others raise instead of hanging.
    work = Work("new_group", [_Request(_C.dist_mpi_start("barrier", None, None, 0, 0))])
    work.wait()
    me = world.rank()
    member = me in ranks
    comm = _C.dist_mpi_split(member, ranks.index(me) if member else 0)
    if not member:
        return GroupMember.NON_GROUP_MEMBER
    r, size = _C.dist_mpi_group_info(comm)
    pg = ProcessGroup(r, size, "mpi", ranks, comm, timeout_s)
    _state.groups.append(pg)
    return pg


class _Request:
    """An MPI collective in flight (a csrc/dist_mpi.c work capsule), as Work polls it."""

    def __init__(self, cap):
        self.cap = cap

    def test(self):
        return _C.dist_mpi_test(self.cap)

    def wait(self, timeout_s):
        return _C.dist_mpi_wait(self.cap, timeout_s)


class Work:
    """A collective started with async_op=True (PyTorch's Work): wait() blocks until it completed (at most the
    process group's timeout), is_completed() asks without blocking. Both drive MPI's progress."""

    def __init__(self, op, requests=(), then=None, result=None, pg=None):
        self._op, self._requests, self._then, self._result = op, list(requests), then, result
        self._pg = pg if pg is not None else _state.pg  # the group it runs on: its timeout, its ranks
        self._done = not self._requests
        if self._done:
            self._finish()
        else:
            _state.pending.add(self)

    def _finish(self):
        self._done = True
        _state.pending.discard(self)
        then, self._then, self._requests = self._then, None, []
        if then is not None:
            then()

    def _backend_error(self, e):
        _state.broken = f"{self._op} failed: {e}"
        return DistBackendError(f"{self._op}: {e}")

    def is_completed(self):
        try:
            if not self._done and all(r.test() for r in self._requests):
                self._finish()
        except DistBackendError:
            raise
        except RuntimeError as e:  # the library's own failure (MPI_Error_string, ncclGetErrorString)
            raise self._backend_error(e) from e
        return self._done

    def is_success(self):
        return self.is_completed()

    def exception(self):
        return None

    def result(self):
        self.wait()
        return self._result if self._result is not None else []

    def get_future(self):
        """A gpumemnet.futures.Future of result() (what DDP's communication hooks chain on)."""
        from ..futures import Future
        return Future._of_work(self)

    def wait(self, timeout=None):
        if self._done:
            return True
        pg = self._pg
        own = pg._timeout if pg is not None and pg._timeout is not None else _state.timeout
        limit = own if timeout is None else _timeout_s(timeout)
        deadline = time.monotonic() + limit
        for r in self._requests:
            try:
                done = r.wait(max(0.0, deadline - time.monotonic()))
            except DistBackendError:
                raise
            except RuntimeError as e:
                raise self._backend_error(e) from e
            if not done:
                _state.broken = f"{self._op} timed out on rank {pg.rank() if pg else '?'}"
                raise DistBackendError(
                    f"{self._op}: rank {pg.rank() if pg else '?'} of {pg.size() if pg else '?'} waited {limit:g} s "
                    f"(the process group's timeout) for the other ranks, which did not join: one of them failed, "
                    f"stopped, or called a different collective. The group cannot be used any more (MPI cannot "
                    f"cancel a collective)")
        self._finish()
        return True

    def __repr__(self):
        return f"Work({self._op!r}, completed={self._done})"


def prune_pending():
    """Retire the Works that completed (called at each new collective, so their tensors can be freed)."""
    for w in list(_state.pending):
        w.is_completed()
