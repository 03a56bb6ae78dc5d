"""torch.multiprocessing: Python's multiprocessing, with PyTorch's sharing-strategy queries and spawn.

Tensors moved to shared memory (Tensor.share_memory_, Module.share_memory) are shared as in PyTorch: a child
forked afterwards writes the parent's memory (hogwild training), and multiprocessing's pickling (a spawn or
forkserver child's arguments, a Queue, a Pipe) sends the shared memory's file descriptor, so the receiver maps the
same memory (the "file_descriptor" strategy; "file_system" is accepted and does the same). Any other tensor sent
is pickled: the receiver gets a copy. CUDA tensors are copied too (PyTorch passes CUDA IPC handles). Under the
torch alias (`python -m gpumemnet run`, gm.as_torch()), spawn and forkserver children get the alias before they
re-import the main module (gpumemnet.dropin)."""
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
