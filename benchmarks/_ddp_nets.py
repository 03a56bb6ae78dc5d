"""What each MPI rank of the data-parallel benchmarks (ddp_scaling.py, ddp_overlap.py) sets up: one thread, the
MPI process group, and the two nets with this rank's share of one global batch."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import digits_cnn, story_gap  # noqa: E402

# name -> (builder, global batch shape, classes): the digits CNN and the story-000 GAP net (channels / 8).
NETS = {"digits": (lambda gm: digits_cnn(gm.nn), (64, 1, 8, 8), 10),
        "gap": (lambda gm: story_gap(gm.nn, scale=8), (8, 2, 96, 96), 1000)}


def start_rank():
    """One thread per rank, the MPI group started: (gm, dist, rank, world)."""
    import gpumemnet as gm
    import gpumemnet.distributed as dist
    gm.set_num_threads(1)
    dist.init_process_group("mpi")
    return gm, dist, dist.get_rank(), dist.get_world_size()


def rank_batches(gm, rank, world, names):
    """(name, build, x, y) for each net in names: x, y this rank's slice of a seeded global batch (the same
    global batch for every world size, so 1 and 2 ranks train on the same samples)."""
    for name in names:
        build, shape, classes = NETS[name]
        rng = np.random.default_rng(0)
        x_all = rng.standard_normal(shape).astype(np.float32)
        y_all = rng.integers(0, classes, shape[0])
        per = shape[0] // world
        part = slice(rank * per, (rank + 1) * per)
        yield name, (lambda b=build: b(gm)), gm.tensor(x_all[part]), gm.tensor(y_all[part])
