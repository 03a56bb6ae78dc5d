"""SyncBatchNorm over a process group: N ranks of batch B/N normalise, train and keep running statistics as one
process of batch B with BatchNorm (in-process ranks, tests/_ddp_threads.py; over MPI: test_ddp_mpi.py); gradients
against finite differences in float64; without a group it is the local batch norm, as before."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.distributed import _comm
from gpumemnet.nn.parallel import DistributedDataParallel as DDP

from _ddp_threads import ThreadWorld, seeded
from gradcheck import gradcheck

B = 12


def _cnn(sync_group=None):
    net = seeded(0, lambda: gm.nn.Sequential(gm.nn.Conv2d(1, 4, 3, padding=1, bias=False), gm.nn.BatchNorm2d(4),
                                             gm.nn.ReLU(), gm.nn.MaxPool2d(2), gm.nn.Flatten(),
                                             gm.nn.Linear(4 * 3 * 3, 5)))
    if sync_group is not None:
        net = gm.nn.SyncBatchNorm.convert_sync_batchnorm(net, process_group=sync_group)
    return net


def _data():
    rng = np.random.default_rng(2)
    return rng.standard_normal((B, 1, 6, 6)).astype(np.float32) + 0.5, rng.integers(0, 5, B)


def _train(model, x, y, steps=3):
    opt = gm.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        gm.nn.functional.cross_entropy(model(gm.tensor(x)), gm.tensor(y)).backward()
        opt.step()


@pytest.mark.parametrize("n", [2, 3])
def test_ranks_match_one_process_with_batchnorm(n):
    x, y = _data()
    ref = _cnn()
    _train(ref, x, y)

    def rank(comm):
        net = _cnn(sync_group=comm)
        per = B // n
        s = slice(comm.rank * per, (comm.rank + 1) * per)
        _train(DDP(net, process_group=comm), x[s], y[s])
        bn = net[1]
        return ([p.detach().numpy().copy() for p in net.parameters()],
                bn.running_mean.numpy().copy(), bn.running_var.numpy().copy(), int(bn.num_batches_tracked.item()))
    for params, rm, rv, nbt in ThreadWorld(n).run(rank):
        for a, b in zip(params, ref.parameters()):
            np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(rm, ref[1].running_mean.numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(rv, ref[1].running_var.numpy(), rtol=1e-4, atol=1e-6)
        assert nbt == 3


def test_one_rank_group_matches_batchnorm_and_gradcheck():
    """A group of one rank runs the composed path: it equals the fused batch norm, and its float64 gradients
    match finite differences."""
    gm.manual_seed(0)
    x = gm.randn(4, 3, 5, 5, dtype=gm.float64, requires_grad=True)
    sbn = gm.nn.SyncBatchNorm(3, process_group=_comm.Simulated(0, 1)).double()
    bn = gm.nn.BatchNorm2d(3).double()
    with gm.no_grad():
        sbn.weight.copy_(gm.tensor([1.0, 2.0, 0.5], dtype=gm.float64))
        bn.weight.copy_(sbn.weight)
    np.testing.assert_allclose(sbn(x).detach().numpy(), bn(x).detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(sbn.running_var.numpy(), bn.running_var.numpy(), rtol=1e-10)
    assert gradcheck(lambda t, w: gm.nn.functional.relu(sbn_fn(t, w)) * t, (x, sbn.weight))


def sbn_fn(t, w):
    from gpumemnet.nn._functional_syncbn import sync_batch_norm
    return sync_batch_norm(t, None, None, w, None, 0.0, 1e-5, _comm.Simulated(0, 1))


def test_without_a_group_it_is_local_batchnorm():
    gm.manual_seed(0)
    x = gm.randn(4, 3, 5, 5)
    sbn, bn = gm.nn.SyncBatchNorm(3), gm.nn.BatchNorm2d(3)
    np.testing.assert_array_equal(sbn(x).detach().numpy(), bn(x).detach().numpy())
    with pytest.raises(ValueError, match="expected more than 1 value per channel over all ranks"):
        gm.nn.SyncBatchNorm(3, process_group=_comm.Simulated(0, 1))(gm.randn(1, 3))
