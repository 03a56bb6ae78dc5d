"""Training-loop idioms of real PyTorch code that gpumemnet got wrong or refused, each against PyTorch: train()
overrides in submodules (frozen BatchNorm, LoRA merging on eval), `p.data = other` (EMA apply / restore), grad
modes on generator functions, DataLoader workers seeding their own random state, a torch.Generator deciding the
sampler's order, random_split's split for a seed, load_state_dict(assign=True), pruning code reading hook dicts,
checkpoint(use_reentrant=True), optimizer step hooks, SparseAdam, Embedding(scale_grad_by_freq=True), torch.compile's
_orig_mod, legacy constructors of a range, torch.add(number, tensor)."""
import random
import sys
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")
import torch.nn.utils.prune  # noqa: E402,F401  (submodules the tests reach through both libraries)
import torch.optim.optimizer  # noqa: E402,F401
import gpumemnet.nn.utils.prune  # noqa: E402,F401
import gpumemnet.optim.optimizer  # noqa: E402,F401


def _both(fn):
    return fn(gm), fn(torch)


def test_train_calls_each_childs_own_train():
    def run(lib):
        class FrozenBN(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = lib.nn.BatchNorm1d(3)

            def train(self, mode=True):
                super().train(mode)
                self.bn.eval()
                return self
        m = lib.nn.Sequential(FrozenBN(), lib.nn.Linear(3, 3))
        m.train()
        return m[0].bn.training, m[0].training, m[1].training, m.eval()[1].training
    assert _both(run)[0] == _both(run)[1] == (False, True, True, False)


def test_data_assignment_swaps_memory_for_ema_restore():
    def run(lib):
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        backup = p.data
        p.data = lib.tensor([10.0, 20.0])
        during, kept = p.tolist(), backup.tolist()
        p.data = backup
        lin = lib.nn.Linear(4, 3)
        lin.weight.data = lib.zeros(2, 4, dtype=lib.float64)
        return during, kept, p.tolist(), p.requires_grad, tuple(lin.weight.shape), str(lin.weight.dtype)[-7:]
    got, want = _both(run)
    assert got == want


def test_grad_mode_decorators_on_generators():
    def run(lib):
        w = lib.ones(2, requires_grad=True)

        @lib.no_grad()
        def sample():
            for _ in range(2):
                yield w * 2

        @lib.inference_mode()
        def sample2():
            yield w * 3
        return [t.requires_grad for t in sample()], [t.requires_grad for t in sample2()], lib.is_grad_enabled()
    got, want = _both(run)
    assert got == want == ([False, False], [False], True)


def test_worker_init_fn_seeding_does_not_repeat_the_training_loops_randomness():
    def wif(wid):
        np.random.seed(42 + wid)
        random.seed(42 + wid)
        gm.manual_seed(42 + wid)
    gm.manual_seed(0)
    loader = gm.utils.data.DataLoader(list(range(16)), batch_size=16, shuffle=True, num_workers=2, worker_init_fn=wif)
    orders, masks, draws = [], [], []
    for _ in range(3):
        for batch in loader:
            orders.append(batch.tolist())
        masks.append(gm.nn.functional.dropout(gm.ones(32), 0.5).tolist())
        draws.append(np.random.rand())
    assert orders[0] != orders[1] != orders[2] and masks[0] != masks[1] and draws[0] != draws[1]


def test_worker_state_is_the_workers_own():
    seen = []

    class Data(gm.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            info = gm.utils.data.get_worker_info()
            seen.append((info.id, gm.initial_seed() == info.seed))
            return gm.tensor(float(np.random.rand()))
    loader = gm.utils.data.DataLoader(Data(), batch_size=2, num_workers=2)
    first = [b.tolist() for b in loader]
    second = [b.tolist() for b in loader]
    # batch k comes from worker k mod 2, each with its own seed, as PyTorch's worker processes
    assert seen == [(0, True), (0, True), (1, True), (1, True)] * 2
    assert first != second  # a new pass has a fresh worker seed
    assert gm.utils.data.get_worker_info() is None  # the main process is not a worker


def test_generator_decides_each_epochs_order_and_resumes():
    g = gm.Generator().manual_seed(3)
    sampler = gm.utils.data.RandomSampler(list(range(10)), generator=g)
    e1 = list(sampler)
    g.manual_seed(3)
    assert list(sampler) == e1
    state = g.get_state()
    e3 = list(sampler)
    g.set_state(state)
    assert list(sampler) == e3 != e1


def test_random_split_of_a_seeded_generator_is_pytorchs_split():
    def run(lib):
        a, b = lib.utils.data.random_split(list(range(50)), [0.8, 0.2], generator=lib.Generator().manual_seed(42))
        lib.manual_seed(7)
        c, d = lib.utils.data.random_split(list(range(30)), [25, 5])
        return list(b), list(d)
    got, want = _both(run)
    assert got == want


def test_load_state_dict_assign_onto_a_meta_model():
    src = gm.nn.Linear(3, 2)
    with gm.device("meta"):
        m = gm.nn.Linear(3, 2)
    m.load_state_dict(src.state_dict(), assign=True)
    assert m.weight.device.type == "cpu" and m.weight.requires_grad and gm.equal(m.weight, src.weight)
    m(gm.ones(1, 3)).sum().backward()
    assert m.weight.grad.shape == (2, 3)


def test_pruning_code_reads_hooks_as_a_dict():
    def run(lib):
        lin = lib.nn.Linear(3, 3)
        lib.nn.utils.prune.l1_unstructured(lin, "weight", 0.3)
        found = [type(h).__name__ for k, h in lin._forward_pre_hooks.items()
                 if isinstance(h, lib.nn.utils.prune.BasePruningMethod)]
        return found
    assert _both(run)[0] == _both(run)[1] == ["L1Unstructured"]


def test_reentrant_checkpoint_rules():
    lin = gm.nn.Linear(3, 3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = gm.utils.checkpoint.checkpoint(lin, gm.ones(2, 3), use_reentrant=True)
    assert not out.requires_grad and any("requires_grad=True" in str(x.message) for x in w)
    x = gm.ones(2, 3, requires_grad=True)
    gm.utils.checkpoint.checkpoint(lin, x, use_reentrant=True).sum().backward()
    assert lin.weight.grad is not None and x.grad is not None
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        gm.utils.checkpoint.checkpoint(lambda a, b=1: a, x, b=2, use_reentrant=True)


def test_optimizer_step_hooks():
    def run(lib):
        m = lib.nn.Linear(2, 1)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        log = []
        h1 = opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
        opt.register_step_post_hook(lambda o, a, k: log.append("post"))
        h3 = sys.modules[lib.__name__ + ".optim.optimizer"].register_optimizer_step_pre_hook(
            lambda o, a, k: log.append("global"))
        m(lib.ones(1, 2)).sum().backward()
        opt.step()
        h1.remove()
        h3.remove()
        opt.step()
        return log
    assert _both(run)[0] == _both(run)[1] == ["global", "pre", "post", "post"]


def test_sparse_adam_and_embedding_gradient_options():
    def run(lib):
        e = lib.nn.Embedding(6, 3, sparse=True)
        f = lib.nn.Embedding(5, 2, scale_grad_by_freq=True, padding_idx=0)
        with lib.no_grad():
            e.weight.copy_(lib.arange(18.0).view(6, 3) / 10)
            f.weight.copy_(lib.arange(10.0).view(5, 2))
        opt = lib.optim.SparseAdam(e.parameters(), lr=0.1)
        for idx in ([[1, 2, 1]], [[3, 1]], [[5]]):
            opt.zero_grad()
            (e(lib.tensor(idx)) ** 2).sum().backward()
            opt.step()
        (f(lib.tensor([[1, 1, 2], [0, 3, 1]])) * lib.arange(12.0).view(2, 3, 2)).sum().backward()
        return e.weight.detach().numpy(), f.weight.grad.numpy()
    got, want = _both(run)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_small_compatibility_forms():
    lin = gm.nn.Linear(2, 2)
    m = gm.compile(lin)
    tm = torch.compile(torch.nn.Linear(2, 2))
    assert m._orig_mod is lin and list(m.state_dict()) == list(tm.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert m.in_features == 2 and gm.equal(m(gm.ones(1, 2)), lin(gm.ones(1, 2)))
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    assert gm.LongTensor(range(4)).tolist() == [0, 1, 2, 3]
    assert gm.add(2, gm.tensor([1, 3]), alpha=3).tolist() == torch.add(2, torch.tensor([1, 3]), alpha=3).tolist()
    assert gm.sub(2, gm.tensor([1.0, 3.0])).tolist() == [1.0, -1.0]
    assert gm.tensor([[1.0, 2.0]]).split(split_size=1, dim=1)[1].tolist() == [[2.0]]
    with pytest.raises(RuntimeError, match="stack|same shape|equal size"):  # RuntimeError, as PyTorch's
        gm.utils.data.default_collate([gm.ones(2), gm.ones(3)])
