"""torch.multiprocessing: Python's multiprocessing (PyTorch's adds shared-memory tensor passing, which gpumemnet does
not: a tensor sent to another process is pickled, a copy), with PyTorch's sharing-strategy queries and spawn."""
import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403

_STRATEGY = ["file_descriptor"]


def get_all_sharing_strategies():
    return {"file_descriptor", "file_system"}


def get_sharing_strategy():
    return _STRATEGY[0]


def set_sharing_strategy(new_strategy):
    if new_strategy not in get_all_sharing_strategies():
        raise ValueError(f"invalid sharing strategy {new_strategy!r}")
    _STRATEGY[0] = new_strategy


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """fn(i, *args) in nprocs new processes (i = 0 .. nprocs - 1), as PyTorch's; joined unless join is False."""
    ctx = _mp.get_context(start_method)
    procs = [ctx.Process(target=fn, args=(i,) + tuple(args), daemon=daemon) for i in range(nprocs)]
    for p in procs:
        p.start()
    if not join:
        return procs
    for p in procs:
        p.join()
    failed = [i for i, p in enumerate(procs) if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"process {failed[0]} terminated with exit code {procs[failed[0]].exitcode}")
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    return start_processes(fn, args, nprocs, join, daemon, start_method)
