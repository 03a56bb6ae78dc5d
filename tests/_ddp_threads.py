"""An in-process stand-in for a process group, for unit tests of DDP and ZeRO logic without MPI: N threads, each a
rank, whose collectives meet at a barrier and exchange NumPy copies. (The real runs, over MPI with mpiexec, are
tests/test_ddp_mpi.py and tests/test_zero_mpi.py.)"""
import threading

import numpy as np

import gpumemnet as gm


_SEEDING = threading.Lock()


def seeded(seed, make):
    """make() right after gm.manual_seed(seed), under one lock: the global generator is one per process (as
    PyTorch's), so ranks building their models in threads would otherwise draw from each other's seeds."""
    with _SEEDING:
        gm.manual_seed(seed)
        return make()


class _Done:
    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


class ThreadWorld:
    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size)
        self.slots = [None] * size
        self.log = []  # (rank, collective, nbytes)

    def comm(self, rank):
        return _ThreadComm(self, rank)

    def run(self, fn):
        """fn(comm) on every rank, each in its own thread; returns the results by rank; re-raises the first error."""
        out, errs = [None] * self.size, []

        def body(r):
            try:
                out[r] = fn(self.comm(r))
            except BaseException as e:  # noqa: BLE001 - surfaced in the test
                errs.append(e)
                self.barrier.abort()
        ts = [threading.Thread(target=body, args=(r,)) for r in range(self.size)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        if errs:
            raise errs[0]
        return out


class _ThreadComm:
    simulated = False

    def __init__(self, world, rank):
        self.w, self.rank, self.size = world, rank, world.size

    def _exchange(self, arr):
        self.w.slots[self.rank] = arr
        self.w.barrier.wait()
        got = list(self.w.slots)
        self.w.barrier.wait()
        return got

    def _set(self, t, arr):
        t.copy_(gm.tensor(np.ascontiguousarray(arr).reshape(tuple(t.shape))))

    def all_reduce_sum(self, t, async_op=False):
        self.w.log.append((self.rank, "all_reduce", t.numel() * t.element_size()))
        got = self._exchange(t.numpy().copy())
        self._set(t, sum(got[1:], got[0]))
        return _Done() if async_op else None

    def broadcast(self, t, src=0):
        got = self._exchange(t.numpy().copy())
        self._set(t, got[src])

    def all_gather_into_tensor(self, out, inp, async_op=False):
        self.w.log.append((self.rank, "all_gather", out.numel() * out.element_size()))
        got = self._exchange(inp.numpy().copy())
        self._set(out, np.concatenate(got))
        return _Done() if async_op else None

    def reduce_scatter_sum(self, out, inp, async_op=False):
        self.w.log.append((self.rank, "reduce_scatter", inp.numel() * inp.element_size()))
        got = self._exchange(inp.numpy().copy())
        n = out.numel()
        self._set(out, sum(g[self.rank * n:(self.rank + 1) * n] for g in got))
        return _Done() if async_op else None

    def broadcast_object_list(self, objs, src=0):
        got = self._exchange(list(objs))
        objs[:] = got[src]

    def all_gather_object(self, out, obj):
        got = self._exchange(obj)
        out[:] = got
