"""torch.func's transforms (gpumemnet/_func_transforms.py) against PyTorch's: per-sample gradients as the
torch.func tutorial computes them (vmap(grad(loss)) over functional_call), grad with argnums and has_aux,
vjp, jacrev / jacfwd of several inputs and outputs, hessian, and vmap's in_dims / out_dims."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

R = np.random.default_rng(0)
X, W, B = R.standard_normal((5, 3)), R.standard_normal((4, 3)), R.standard_normal(4)
T = np.array([0, 3, 1, 2, 1])


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b):
    if isinstance(b, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    elif isinstance(b, dict):
        assert a.keys() == b.keys()
        for k in b:
            _close(a[k], b[k])
    else:
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-10, atol=1e-12)


def _per_sample_grads(L):
    model = L.nn.Linear(3, 4).double()
    with L.no_grad():
        model.weight.copy_(L.tensor(W))
        model.bias.copy_(L.tensor(B))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, t):
        out = L.func.functional_call(model, p, (x.unsqueeze(0),))
        return L.nn.functional.cross_entropy(out, t.unsqueeze(0))
    return L.func.vmap(L.func.grad(loss), in_dims=(None, 0, 0))(params, L.tensor(X), L.tensor(T))


def test_per_sample_gradients_match_pytorch():
    _close(_per_sample_grads(gm), _per_sample_grads(torch))


def _transforms(L):
    x, w = L.tensor(X[0]), L.tensor(W)

    def f(x, w):
        return (w @ x).tanh().pow(2).sum()

    def g(x, w):
        y = (w @ x).sin()
        return y, y.sum() * x
    res = {}
    res["grad"] = L.func.grad(f)(x, w)
    res["grad argnums"] = L.func.grad(f, argnums=(0, 1))(x, w)
    res["grad aux"] = L.func.grad(lambda x, w: (f(x, w), x * 2), has_aux=True)(x, w)
    res["grad_and_value"] = L.func.grad_and_value(f, argnums=1)(x, w)
    out, fn = L.func.vjp(g, x, w)
    res["vjp"] = (out, fn((L.ones(4, dtype=L.float64), L.ones(3, dtype=L.float64))))
    res["jacrev"] = L.func.jacrev(g, argnums=(0, 1))(x, w)
    res["jacfwd"] = L.func.jacfwd(lambda x: (w @ x).exp())(x)
    res["hessian"] = L.func.hessian(f)(x, w)
    res["vmap dims"] = L.func.vmap(lambda a, b: (a * b).sum(0), in_dims=(1, None), out_dims=0)(
        L.tensor(X), L.tensor(X[:, 0]))
    res["vmap out_dims"] = L.func.vmap(lambda a: a.outer(a), out_dims=1)(L.tensor(X[:2]))
    return res


def test_transforms_match_pytorch():
    ours, ref = _transforms(gm), _transforms(torch)
    for k in ref:
        _close(ours[k], ref[k])


def test_grad_refuses_a_non_scalar():
    with pytest.raises(RuntimeError, match="scalar"):
        gm.func.grad(lambda x: x * 2)(gm.ones(3))
