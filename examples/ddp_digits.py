"""Data parallel training of the digits CNN (python -m gpumemnet.demo's model) on N processes over MPI:

    pip install mpich scikit-learn
    mpiexec -n 2 python examples/ddp_digits.py              # DistributedDataParallel
    mpiexec -n 2 python examples/ddp_digits.py --zero 2     # + ZeroRedundancyOptimizer, stage 2

Every rank reads its share of each epoch (DistributedSampler, the same order PyTorch's gives), runs its half of
every batch, and the gradients are averaged in buckets during backward; each rank prints what gm.memory.estimate
said its first step and its later ones would need, before the first step, and what it measured. BatchNorm normalises each rank's
micro-batch by its own statistics (as in PyTorch without SyncBatchNorm); rank 0's running statistics are the
model's (broadcast before each forward)."""
import argparse
import time

import gpumemnet as gm
import gpumemnet.distributed as dist
import gpumemnet.nn as nn
from gpumemnet.demo import evaluate, load_digits, make_model
from gpumemnet.distributed.optim import ZeroRedundancyOptimizer
from gpumemnet.nn.parallel import DistributedDataParallel as DDP
from gpumemnet.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64, help="the global batch, split over the ranks")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--zero", type=int, default=0, choices=(0, 1, 2), help="ZeroRedundancyOptimizer stage (0: none)")
    args = ap.parse_args()

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} does not split over {world} ranks")
    per_rank = args.batch_size // world
    gm.manual_seed(rank)  # different on purpose: DDP starts every rank from rank 0's weights
    (xtr, ytr), (xte, yte) = load_digits(0)
    xtr, ytr, xte, yte = (gm.tensor(a) for a in (xtr, ytr, xte, yte))
    data_bytes = gm.memory.memory_allocated("cpu")  # the dataset: held by the script, not part of a step
    model = make_model(32)
    criterion = nn.CrossEntropyLoss()

    # Before anything is allocated for training: this rank's step, on the meta device.
    est = gm.memory.estimate(model, (1, 8, 8), loss_fn=criterion, batch_size=per_rank, world_size=world,
                             zero=args.zero, rank=rank)

    wrapped = model if args.zero == 2 else DDP(model)  # ZeRO-2 reduces the gradients itself
    if args.zero:
        opt = ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=gm.optim.Adam, stage=args.zero,
                                      lr=args.lr)
    else:
        opt = gm.optim.Adam(wrapped.parameters(), lr=args.lr)
    data = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=per_rank, sampler=sampler, drop_last=True)

    gm.memory.reset_peak_memory_stats("cpu")
    t0 = time.perf_counter()
    first = None
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new order each epoch, the same on every rank
        for xb, yb in loader:
            opt.zero_grad()
            loss = criterion(wrapped(xb), yb)
            loss.backward()
            opt.step()
            # dropped here, not held through the next step's forward (one 512-byte block at that peak): the loop
            # estimate() describes (python -m gpumemnet run estimates a script that holds it as it is)
            del loss
            if first is None:  # the first step (it creates the optimizer's state): est.first_step_total
                first = gm.memory.max_memory_allocated("cpu") - data_bytes
    seconds = time.perf_counter() - t0
    stats = gm.memory.memory_stats("cpu")
    at_peak = stats["at_peak"]["by_category"]
    fmt = gm.memory.format_bytes
    # one line per rank, in rank order
    for r in range(world):
        if r == rank:
            parts = " · ".join(f"{c} {fmt(b)}" for c, b in sorted(at_peak.items(), key=lambda cb: -cb[1]) if b)
            later = stats["allocated"]["peak"] - data_bytes
            print(f"rank {rank}/{world}: first step {first} bytes (estimated {est.first_step_total}), all steps "
                  f"{later} bytes (estimated before training {est.total}: the later steps hold the optimizer state "
                  f"during backward), beside the dataset's {fmt(data_bytes)}; at that peak: {parts}; {seconds:.1f} s",
                  flush=True)
        dist.barrier()
    if rank == 0:
        print(f"test accuracy after {args.epochs} epochs on {world} rank(s), ZeRO stage {args.zero}: "
              f"{evaluate(model, xte, yte):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
