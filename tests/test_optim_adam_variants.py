"""Adamax, NAdam and RAdam against PyTorch's, from the same parameters and gradients, over enough steps to cross
RAdam's switch (rho_t > 5 from step 6 with the default betas): the parameters after each step agree in float64."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

CONFIGS = [("Adamax", {}), ("Adamax", dict(weight_decay=0.1, maximize=True)), ("NAdam", {}),
           ("NAdam", dict(weight_decay=0.05, decoupled_weight_decay=True, momentum_decay=0.01)),
           ("NAdam", dict(weight_decay=0.05)), ("RAdam", {}), ("RAdam", dict(weight_decay=0.1)),
           ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, betas=(0.8, 0.99)))]


@pytest.mark.parametrize("name,kw", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_matches_pytorch_step_by_step(name, kw, device):
    r = np.random.RandomState(0)
    w0 = r.randn(3, 4)
    a = gm.nn.Parameter(gm.tensor(w0, device=device))
    b = torch.nn.Parameter(torch.tensor(w0))
    oa = getattr(gm.optim, name)([a], lr=0.01, **kw)
    ob = getattr(torch.optim, name)([b], lr=0.01, **kw)
    # PyTorch keeps NAdam's mu_product as a float32 scalar even for float64 parameters (its scalar dtype), so its
    # steps carry ~1e-8 of relative error; gpumemnet's is float64 (test_nadam_matches_float64_reference)
    rtol = 1e-7 if name == "NAdam" else 1e-12
    for step in range(10):
        g = r.randn(3, 4)
        a.grad, b.grad = gm.tensor(g, device=device), torch.tensor(g)
        oa.step()
        ob.step()
        np.testing.assert_allclose(to_np(a), b.detach().numpy(), rtol=rtol, atol=1e-14,
                                   err_msg=f"{name} step {step + 1}")
    assert oa.state[a]["step"] == 10


def test_nadam_matches_float64_reference():
    """Dozat's NAdam as PyTorch documents it, in NumPy float64, with PyTorch's mu_product: a tensor of its scalar
    dtype (float32 under the default dtype), so each product is rounded to float32."""
    r = np.random.RandomState(2)
    w = r.randn(5)
    p = gm.nn.Parameter(gm.tensor(w))
    opt = gm.optim.NAdam([p], lr=0.02, weight_decay=0.01)
    m = v = np.zeros(5)
    mu_prod, b1, b2, psi, eps = 1.0, 0.9, 0.999, 4e-3, 1e-8
    for t in range(1, 8):
        g = r.randn(5)
        p.grad = gm.tensor(g)
        opt.step()
        g = g + 0.01 * w
        mu, mu_next = b1 * (1 - 0.5 * 0.96 ** (t * psi)), b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        mu_prod = float(np.float32(mu_prod) * np.float32(mu))
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2 ** t)) + eps
        w = w - 0.02 * (1 - mu) / (1 - mu_prod) * g / denom - 0.02 * mu_next / (1 - mu_prod * mu_next) * m / denom
        np.testing.assert_allclose(p.detach().numpy(), w, rtol=1e-13, atol=1e-15, err_msg=f"step {t}")


def test_state_dict_round_trip_continues_the_same():
    r = np.random.RandomState(1)
    p = gm.nn.Parameter(gm.tensor(r.randn(4)))
    opt = gm.optim.NAdam([p], lr=0.1)
    for _ in range(3):
        p.grad = gm.tensor(r.randn(4))
        opt.step()
    q = gm.nn.Parameter(p.detach().clone())
    opt2 = gm.optim.NAdam([q], lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    g = gm.tensor(r.randn(4))
    p.grad, q.grad = g, g.clone()
    opt.step()
    opt2.step()
    assert gm.equal(p.detach(), q.detach())


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam"])
def test_bad_arguments_are_refused(name):
    p = gm.nn.Parameter(gm.zeros(2))
    with pytest.raises(ValueError, match="beta"):
        getattr(gm.optim, name)([p], betas=(1.5, 0.9))
    with pytest.raises(ValueError, match="lr"):
        getattr(gm.optim, name)([p], lr=-1)
