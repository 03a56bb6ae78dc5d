"""Worker of tests/test_distributed_failures.py: one rank fails in the way argv[1] names while the others enter a
collective; the whole job must end (not hang), with the failing rank's error in the output.
  raise        rank 1 raises ValueError before the collective
  bad_input    rank 1 passes a non-contiguous tensor to all_reduce
  oom          rank 1 runs out of memory (a 1 MiB limit on the CPU allocator)
  exit         rank 1 calls sys.exit(3): no exception reaches the excepthook; rank 0 times out (2 s) and aborts
  timeout      rank 1 catches its own error and goes on without joining: rank 0's all_reduce times out (2 s)
  wait_timeout as timeout, with async_op and Work.wait(timeout=1)
  new_group_timeout  as timeout, but rank 0 waits in new_group (whose MPI_Comm_split has no timeout of its own)"""
import sys
import time
from datetime import timedelta

import gpumemnet as gm
import gpumemnet.distributed as dist

mode = sys.argv[1]
dist.init_process_group("mpi", timeout=timedelta(seconds=2 if "timeout" in mode or mode == "exit" else 120))
rank = dist.get_rank()
t = gm.ones(16)
print(f"started rank {rank}", flush=True)
if rank == 1:
    if mode == "raise":
        raise ValueError("rank 1 fails on purpose")
    if mode == "exit":
        sys.exit(3)
    if mode == "bad_input":
        dist.all_reduce(gm.ones(4, 4)[:, 1])
    if mode == "oom":
        gm.memory.set_limit("cpu", 1 << 20)
        gm.ones(1 << 20)
    if "timeout" in mode:
        try:
            raise ValueError("caught")
        except ValueError:
            time.sleep(60)  # never joins; rank 0's collective must give up first
if mode == "new_group_timeout":
    dist.new_group([0])
if mode == "wait_timeout":
    dist.all_reduce(t, async_op=True).wait(timeout=timedelta(seconds=1))
else:
    dist.all_reduce(t)
print(f"finished rank {rank}", flush=True)
