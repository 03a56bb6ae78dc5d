"""One rank's data-parallel steps (three: the first and two steady ones), set up as gm.memory.estimate(...,
world_size=, zero=, rank=) describes them, with the bytes they measure: shared by test_estimate_ddp.py (a simulated
group in one process) and ddp_train.py (the ranks of a real MPI group), which compare them with the estimate."""
import gc

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet.distributed.optim import ZeroRedundancyOptimizer
from gpumemnet.nn.parallel import DistributedDataParallel as DDP


def measured_step(model, x, y, zero, process_group=None, inner=None, steps=3):
    """(bytes the DDP wrapper holds, the steps' peak above what was allocated before them, the process's peak) of
    `steps` Adam steps of model (zero_grad() after each, as estimate() runs them: the highest step counts), run
    through inner (e.g. a checkpointed wrapper of it) when given: DDP for zero 0 and 1, ZeRO's own gradient
    sharding for zero 2."""
    group = {} if process_group is None else {"process_group": process_group}
    a0 = gm.memory.memory_allocated("cpu")
    inner = model if inner is None else inner
    wrapped = inner if zero == 2 else DDP(inner, **group)
    held = gm.memory.memory_allocated("cpu") - a0
    params = list(model.parameters())
    opt = ZeroRedundancyOptimizer(params, optimizer_class=gm.optim.Adam, stage=zero, **group) if zero else \
        gm.optim.Adam(params)
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    for _ in range(steps):
        out = wrapped(x)
        loss = F.cross_entropy(out, y)
        del out
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad()
    whole = gm.memory.max_memory_allocated("cpu")
    return held, whole - base, whole
