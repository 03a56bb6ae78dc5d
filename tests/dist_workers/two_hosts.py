"""Worker of tests/test_distributed_netns.py: a 4 MiB all_reduce and a broadcast between two "hosts"; prints
'OK rank r' and the host name it ran on."""
import socket

import gpumemnet as gm
import gpumemnet.distributed as dist

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
t = gm.full((1 << 20,), float(rank + 1))
dist.all_reduce(t)
assert t[:3].tolist() == [world * (world + 1) / 2] * 3, t[:3].tolist()
b = gm.full((5,), float(rank))
dist.broadcast(b, 1)
assert b.tolist() == [1.0] * 5
dist.destroy_process_group()
print(f"OK rank {rank} on {socket.gethostname()}", flush=True)
