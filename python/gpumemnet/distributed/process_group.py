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
import os
import sys
import time
from datetime import timedelta

import numpy as np

from .. import _C
from .._core.creation import from_numpy
from . import _mpi, _nccl

__all__ = ["DistError", "DistBackendError", "Backend", "GroupMember", "ProcessGroup", "Work", "is_available",
           "is_initialized", "is_mpi_available", "is_nccl_available", "init_process_group", "destroy_process_group",
           "get_rank", "get_world_size", "get_backend", "new_group"]

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
    """The group of every rank (new_group with fewer ranks is not supported yet)."""

    def __init__(self, rank, size, backend):
        self._rank, self._size, self._backend = rank, size, backend

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return self._backend

    def __repr__(self):
        return f"ProcessGroup(backend={self._backend!r}, rank={self._rank}, size={self._size})"


class GroupMember:
    WORLD = None  # the default group once init_process_group has run
    NON_GROUP_MEMBER = -100


class _State:
    pg = None             # the default ProcessGroup
    timeout = None        # seconds
    init_here = False     # whether init_process_group called MPI_Init (then destroy_process_group finalizes)
    broken = None         # why the group can no longer be used (a collective timed out)
    nccl = None           # the NCCL communicator's state, when the group uses NCCL for CUDA tensors
    prev_hook = None
    pending = set()       # Works in flight: their tensors must outlive them
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


def _check_group(group, op):
    if group is not None and group is not _state.pg:
        raise ValueError(f"{op}: only the default group (group=None) is supported; new_group is not implemented")


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
    t = from_numpy(np.array([value], dtype=np.int64))
    _mpi_wait(_C.dist_mpi_start("all_reduce", t, None, 2, 0), "init_process_group")
    return int(t.item())


def _mpi_broadcast(data):
    """Rank 0's bytes (of the same length on every rank)."""
    t = from_numpy(np.frombuffer(data, dtype=np.uint8).copy())
    _mpi_wait(_C.dist_mpi_start("broadcast", t, None, 0, 0), "init_process_group")
    return t.numpy().tobytes()


def destroy_process_group(group=None):
    """Wait for the collectives in flight and free the communicators. MPI itself stays initialised (it can start
    only once per process) until the interpreter exits, so init_process_group may run again."""
    _check_group(group, "destroy_process_group")
    if _state.pg is None:
        return
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
    _check_group(group, "get_rank")
    _require("get_rank")
    return _state.pg.rank()


def get_world_size(group=None):
    _check_group(group, "get_world_size")
    _require("get_world_size")
    return _state.pg.size()


def get_backend(group=None):
    _check_group(group, "get_backend")
    _require("get_backend")
    return _state.pg.name()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """Only the group of every rank exists: new_group(None) or new_group(all ranks) returns it."""
    _require("new_group")
    if ranks is None or sorted(ranks) == list(range(_state.pg.size())):
        return _state.pg
    raise NotImplementedError("new_group: groups of fewer than all ranks are not supported by gpumemnet yet")


class Work:
    """A collective started with async_op=True (PyTorch's Work): wait() blocks until it completed (at most the
    process group's timeout), is_completed() asks without blocking. Both drive MPI's progress."""

    def __init__(self, op, requests=(), then=None, result=None):
        self._op, self._requests, self._then, self._result = op, list(requests), then, result
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

    def wait(self, timeout=None):
        if self._done:
            return True
        limit = _state.timeout if timeout is None else _timeout_s(timeout)
        deadline = time.monotonic() + limit
        for r in self._requests:
            try:
                done = r.wait(max(0.0, deadline - time.monotonic()))
            except DistBackendError:
                raise
            except RuntimeError as e:
                raise self._backend_error(e) from e
            if not done:
                pg = _state.pg
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
