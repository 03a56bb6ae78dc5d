"""torch.nn.utils.prune against PyTorch itself: the same masks (L1 and Ln-structured, global, custom, several
methods combined on one tensor), the same state_dict names, outputs and gradients, remove() making it permanent,
the random methods' counts, and PyTorch's errors."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
import torch.nn.utils.prune  # noqa: E402,F401  (a submodule PyTorch does not import by itself)

X = np.random.RandomState(0).randn(2, 1, 6, 6)


def _pair(device):
    """The same small CNN in both libraries (float64)."""
    def build(lib):
        return lib.nn.Sequential(lib.nn.Conv2d(1, 4, 3), lib.nn.ReLU(), lib.nn.Flatten(),
                                 lib.nn.Linear(4 * 4 * 4, 3)).double()
    theirs, ours = build(torch), build(gm).to(device)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _same_state(ours, theirs):
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        np.testing.assert_array_equal(to_np(ours.state_dict()[k]), v.detach().numpy(), err_msg=k)


def _same_step(ours, theirs, device):
    oa, ob = ours(gm.tensor(X, device=device)), theirs(torch.tensor(X))
    np.testing.assert_allclose(to_np(oa), ob.detach().numpy(), rtol=1e-12, atol=1e-14)
    oa.sum().backward()
    ob.sum().backward()
    for (n, p), (m, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == m
        # atol: a gradient summed from terms that nearly cancel differs by a few ulps of the terms (1e-1), not of
        # itself, when the device sums in another order (the emulator's convolution does).
        np.testing.assert_allclose(to_np(p.grad), q.grad.numpy(), rtol=1e-12, atol=1e-14, err_msg=n)


PLANS = {
    "l1_unstructured": lambda P, m, L: P.l1_unstructured(m[0], "weight", amount=0.3),
    "l1 by count, on the bias": lambda P, m, L: P.l1_unstructured(m[3], "bias", amount=2),
    "ln_structured": lambda P, m, L: P.ln_structured(m[0], "weight", amount=0.5, n=2, dim=0),
    "l1 then ln_structured then l1 again (a container)": lambda P, m, L: (
        P.l1_unstructured(m[0], "weight", amount=0.3), P.ln_structured(m[0], "weight", amount=1, n=1, dim=0),
        P.l1_unstructured(m[0], "weight", amount=5)),
    "global_unstructured": lambda P, m, L: P.global_unstructured(
        [(m[0], "weight"), (m[0], "bias"), (m[3], "weight")], pruning_method=P.L1Unstructured, amount=0.4),
    "custom_from_mask and identity": lambda P, m, L: (
        P.custom_from_mask(m[3], "bias", mask=L.tensor([1.0, 0.0, 1.0]).to(m[3].bias.device)),
        P.identity(m[0], "bias")),
    "importance_scores": lambda P, m, L: P.l1_unstructured(
        m[3], "weight", amount=0.5,
        importance_scores=L.tensor(np.random.RandomState(1).permutation(192).reshape(3, 64) * 1.0)),
}


@pytest.mark.parametrize("plan", list(PLANS))
def test_pruning_matches_pytorch(plan, device):
    ours, theirs = _pair(device)
    PLANS[plan](torch.nn.utils.prune, theirs, torch)
    PLANS[plan](gm.nn.utils.prune, ours, gm)
    _same_state(ours, theirs)
    assert gm.nn.utils.prune.is_pruned(ours)
    _same_step(ours, theirs, device)
    for m, name in ((0, "weight"), (0, "bias"), (3, "weight"), (3, "bias")):
        if hasattr(theirs[m], name + "_orig"):
            torch.nn.utils.prune.remove(theirs[m], name)
            gm.nn.utils.prune.remove(ours[m], name)
    assert not gm.nn.utils.prune.is_pruned(ours)
    _same_state(ours, theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_random_methods_prune_the_asked_amount():
    m = gm.nn.Conv2d(3, 8, 3)
    gm.nn.utils.prune.random_unstructured(m, "weight", amount=0.25)
    assert int((m.weight_mask == 0).sum()) == round(0.25 * 8 * 3 * 9)
    gm.nn.utils.prune.random_structured(m, "weight", amount=3, dim=0)
    channels = (m.weight_mask.sum((1, 2, 3)) == 0)
    assert int(channels.sum()) == 3
    container = list(m._forward_pre_hooks.values())[-1]
    assert isinstance(container, gm.nn.utils.prune.PruningContainer) and len(container) == 2
    t = gm.tensor([[3.0, -1.0], [0.5, 2.0]])
    np.testing.assert_array_equal(to_np(gm.nn.utils.prune.L1Unstructured(amount=2).prune(t)), [[3.0, 0.0], [0.0, 2.0]])


def test_errors_as_pytorchs():
    for lib in (torch, gm):
        P = lib.nn.utils.prune
        with pytest.raises(ValueError, match=r"amount=1.5 should either be a float in the range \[0, 1\] or a "
                                             r"non-negative integer"):
            P.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount=1.5)
        with pytest.raises(TypeError, match="Invalid type for amount: x. Must be int or float."):
            P.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount="x")
        with pytest.raises(ValueError, match="amount=9 should be smaller than the number of parameters to prune=4"):
            P.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount=9)
        with pytest.raises(ValueError, match="Structured pruning can only be applied to multidimensional tensors"):
            P.ln_structured(lib.nn.Linear(2, 2), "bias", amount=1, n=2, dim=0)
        with pytest.raises(ValueError, match="Parameter 'weight' of module .* has to be pruned before pruning can be "
                                             "removed"):
            P.remove(lib.nn.Linear(2, 2), "weight")
        with pytest.raises(TypeError, match="global_unstructured\\(\\): parameters is not an Iterable"):
            P.global_unstructured(3, P.L1Unstructured, amount=1)
        with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE supported'):
            P.global_unstructured([(lib.nn.Linear(2, 2), "weight")], P.LnStructured, amount=1, n=2, dim=0)
