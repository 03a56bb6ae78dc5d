"""Gradients of gradients (backward/grad with create_graph=True) against PyTorch itself: for each op with a
create_graph formula (_core/graph_backward.py, nn/_graph_backward.py), the first gradients and the gradients of a
penalty on them agree in float64, on the CPU and on CUDA; then the programs people write with them: a WGAN-GP
critic step, a physics-informed loss with second derivatives, a MAML meta-gradient, torch.autograd.functional's
hessian / vhp / hvp / jvp. An op without a formula says so by name."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)
from double_backward_util import _tensors, check_second_order

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
X, Y = R.randn(3, 4), R.randn(3, 4)
POS = R.rand(3, 4) + 0.5
IMG, KER = R.randn(2, 3, 6, 6), R.randn(4, 3, 3, 3)


def _check(fn, arrs, device, rtol=1e-9):
    check_second_order(torch, fn, arrs, device, rtol)


def _F(lib):
    return lib.nn.functional


def _inplace_ops(L, a, b):
    y = a * b
    y += a  # a residual sum, as ResNet blocks write it
    y *= 2.0
    y = _F(L).leaky_relu(y, 0.2, inplace=True)
    z = (a - b) * 3.0
    z -= b
    z.tanh_()
    return (y ** 3).sum() + (z ** 2).sum() + (_F(L).silu(a * 2, inplace=True) ** 2).sum()


# name -> (fn(lib, *tensors) -> a scalar, the inputs)
CASES = {
    "in-place activations and arithmetic": (_inplace_ops, (X, Y)),
    "mul add sub": (lambda L, a, b: (a * b - a + b * 2.0 + 3.0 - a).sum(), (X, Y)),
    "div both ways": (lambda L, a, b: (a / b + 2.0 / b + a / 3.0).sum(), (X, POS)),
    "pow by a number and a tensor": (lambda L, a, b: ((a ** 3) + b ** a + a ** b).sum(), (POS, POS + 0.2)),
    "exp log sqrt abs neg": (lambda L, a: (a.exp() + a.log() * a.sqrt() - a.abs() * (-a)).sum(), (POS,)),
    "rsub and broadcasting": (lambda L, a, b: ((1.0 - a) * b[:1] + a * b.sum(0)).sum(), (X, Y)),
    "maximum minimum clamp where": (lambda L, a, b: (L.maximum(a, b) * L.minimum(a, b) + a.clamp(-0.5, 0.5) * b
                                                    + L.where(a > 0, a * b, b * b)).sum(), (X, Y)),
    "tanh sigmoid relu": (lambda L, a, b: (a.tanh() * b.sigmoid() + (a * b).relu() ** 2).sum(), (X, Y)),
    "leaky_relu elu silu": (lambda L, a: (_F(L).leaky_relu(a, 0.2) ** 2 + _F(L).elu(a) ** 2
                                          + _F(L).silu(a) ** 2).sum(), (X,)),
    # (hardsigmoid has a formula too; PyTorch has none to compare with)
    "softplus gelu hardtanh relu6": (lambda L, a: (_F(L).softplus(a, 2.0) ** 2 + _F(L).gelu(a) ** 2
                                                   + _F(L).hardtanh(a * 2) ** 2 + _F(L).relu6(a * 4) ** 2).sum(),
                                     (X,)),
    "softmax log_softmax": (lambda L, a, b: (a.softmax(1) * b + _F(L).log_softmax(a * b, 0) ** 2).sum(), (X, Y)),
    "sum mean over dims": (lambda L, a: (a.sum(1) ** 2).sum() + (a.mean(0, keepdim=True) ** 3).sum()
                           + a.mean() ** 2, (X,)),
    "matmul shapes": (lambda L, a, b, v: ((a @ b.t()) ** 2).sum() + ((a @ v) ** 2).sum() + (v @ v) ** 2
                      + ((a.reshape(3, 2, 2) @ b.reshape(3, 2, 2)[:1]) ** 2).sum(), (X, Y, R.randn(4))),
    "views and cat": (lambda L, a, b: (L.cat([a.reshape(6, 2).t(), b.permute(1, 0)[:2, :3].expand(2, 3)], 1) ** 2
                                       ).sum() + (L.cat([a[:, :2], b[1:3, 1:].unsqueeze(0).squeeze(0)[:, :2]], 0)
                                                  .reshape(2, 5) ** 3).sum(), (X, Y)),
    "to dtype": (lambda L, a: (a.float().double() ** 3).sum(), (X,)),
    "linear": (lambda L, a, w, b: (_F(L).linear(a, w, b).tanh() ** 2).sum(), (X, R.randn(5, 4), R.randn(5))),
    "linear 3-D input": (lambda L, a, w: (_F(L).linear(a.reshape(3, 2, 2), w) ** 3).sum(), (X, R.randn(3, 2))),
    "conv2d": (lambda L, x, w, b: (_F(L).conv2d(x, w, b, padding=1).tanh() ** 2).sum(), (IMG, KER, R.randn(4))),
    "conv2d stride dilation groups": (lambda L, x, w: (_F(L).conv2d(x, w, stride=2, padding=2, dilation=2,
                                                                    groups=2) ** 3).sum(),
                                      (R.randn(2, 4, 7, 7), R.randn(6, 2, 3, 3))),
    "conv2d unbatched": (lambda L, x, w: (_F(L).conv2d(x, w) ** 2).sum(), (IMG[0], KER)),
    "mse_loss l1_loss": (lambda L, a, b: _F(L).mse_loss(a.tanh(), b) + _F(L).mse_loss(a, b, reduction="sum")
                         + _F(L).l1_loss(a * b, b) * 2 + _F(L).mse_loss(a, b, reduction="none")[0, 1], (X, Y)),
    "cross_entropy": (lambda L, a, w: _F(L).cross_entropy(a @ w, L.tensor([0, 2, 1]).to(a.device)),
                      (X, R.randn(4, 3))),
    "cross_entropy weight ignore smoothing": (lambda L, a, w: _F(L).cross_entropy(
        a @ w, L.tensor([0, 2, -100]).to(a.device),
        weight=L.tensor([1.0, 2.0, 0.5], dtype=L.float64).to(a.device), label_smoothing=0.1),
        (X, R.randn(4, 3))),
    "cross_entropy weight, sum": (lambda L, a, w: _F(L).cross_entropy(
        a @ w, L.tensor([0, 2, 1]).to(a.device),
        weight=L.tensor([1.0, 2.0, 0.5], dtype=L.float64).to(a.device), reduction="sum"),
        (X, R.randn(4, 3))),
    "cross_entropy smoothing, ignore": (lambda L, a, w: _F(L).cross_entropy(
        a @ w, L.tensor([0, 5, 1]).to(a.device), ignore_index=5, label_smoothing=0.3), (X, R.randn(4, 3))),
    "cross_entropy none, spatial": (lambda L, x, w: (_F(L).cross_entropy(
        _F(L).conv2d(x, w), L.tensor(np.arange(32).reshape(2, 4, 4) % 4).to(x.device),
        reduction="none") ** 2).sum(),
        (IMG, R.randn(4, 3, 3, 3))),
    "layer_norm": (lambda L, a, w, b: (_F(L).layer_norm(a * 2, (4,), w, b).tanh() ** 2).sum(),
                   (X, R.rand(4) + 0.5, R.randn(4))),
    "layer_norm over two dims, no affine": (lambda L, x: (_F(L).layer_norm(x, (6, 6)) ** 3).sum(), (IMG,)),
    "group_norm": (lambda L, x, w, b: (_F(L).group_norm(x, 2, w, b) ** 3).sum(),
                   (R.randn(2, 4, 3, 3), R.rand(4) + 0.5, R.randn(4))),
    "instance_norm": (lambda L, x: (_F(L).instance_norm(x) ** 3).sum(), (IMG,)),
    "batch_norm training": (lambda L, x, w, b: (_F(L).batch_norm(x, None, None, w, b, training=True) ** 3).sum(),
                            (IMG, R.rand(3) + 0.5, R.randn(3))),
    "batch_norm training 2-D": (lambda L, x, w: (_F(L).batch_norm(x, None, None, w, None, True).tanh() ** 2).sum(),
                                (X, R.rand(4) + 0.5)),
    "batch_norm eval": (lambda L, x, w, b: (_F(L).batch_norm(
        x, L.tensor([0.1, -0.2, 0.3], dtype=L.float64).to(x.device), L.tensor([1.5, 0.5, 2.0], dtype=L.float64).to(
            x.device), w, b) ** 3).sum(), (IMG, R.rand(3) + 0.5, R.randn(3))),
    "max_pool2d": (lambda L, x: (_F(L).max_pool2d(x * 1.5, 2) ** 3).sum(), (IMG,)),
    "max_pool2d of a relu, padded, strided": (lambda L, x: (_F(L).max_pool2d(x.relu(), 3, 2, 1) ** 3).sum(), (IMG,)),
    "max_pool2d of an input, dilated, ceil_mode": (lambda L, x: (_F(L).max_pool2d(
        x, 2, 2, dilation=2, ceil_mode=True) ** 3).sum(), (IMG,)),
    "max_pool2d with indices": (lambda L, x: (_F(L).max_pool2d(x * 2, 2, return_indices=True)[0] ** 3).sum(),
                                (IMG,)),
    "adaptive_max_pool2d global": (lambda L, x: (_F(L).adaptive_max_pool2d(x * 2, 1) ** 3).sum(), (IMG,)),
    "avg_pool2d": (lambda L, x: (_F(L).avg_pool2d(x * 2, 3, 2, 1, count_include_pad=False) ** 3).sum(), (IMG,)),
    "adaptive_avg_pool2d": (lambda L, x: (_F(L).adaptive_avg_pool2d(x * 2, (2, 3)) ** 3).sum()
                            + (_F(L).adaptive_avg_pool2d(x, 1) ** 3).sum(), (IMG,)),
    "pad constant reflect replicate circular": (lambda L, x: sum((_F(L).pad(x * 2, (1, 2, 2, 1), mode=m) ** 3).sum()
                                                                for m in ("constant", "reflect", "replicate",
                                                                          "circular")), (IMG,)),
    "interpolate bilinear nearest": (lambda L, x: (_F(L).interpolate(x * 2, scale_factor=2, mode="bilinear") ** 3
                                                   ).sum() + (_F(L).interpolate(x, size=(9, 4)) ** 3).sum(), (IMG,)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_second_order_gradients_match_pytorch(case, device):
    fn, arrs = CASES[case]
    _check(fn, arrs, device)


def _critic(lib):
    """A WGAN-GP critic in the style of the common implementations: strided convolutions, LeakyReLU, Linear."""
    return lib.nn.Sequential(lib.nn.Conv2d(1, 4, 4, 2, 1), lib.nn.LeakyReLU(0.2), lib.nn.Conv2d(4, 8, 4, 2, 1),
                             lib.nn.LeakyReLU(0.2), lib.nn.Flatten(), lib.nn.Linear(8 * 2 * 2, 1)).double()


def _wgan_gp_steps(lib, critic, real, fake, alpha, steps=2):
    opt = lib.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        out = critic(interp)
        grads = lib.autograd.grad(outputs=out, inputs=interp, grad_outputs=lib.ones_like(out), create_graph=True,
                                  retain_graph=True, only_inputs=True)[0]
        gp = ((grads.view(grads.size(0), -1).norm(2, dim=1) - 1) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + 10 * gp
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_wgan_gp_critic_steps_match_pytorch():
    theirs, ours = _critic(torch), _critic(gm)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    real, fake, alpha = R.randn(4, 1, 8, 8), R.randn(4, 1, 8, 8), R.rand(4, 1, 1, 1)
    lb = _wgan_gp_steps(torch, theirs, *(torch.tensor(a) for a in (real, fake, alpha)))
    la = _wgan_gp_steps(gm, ours, *(gm.tensor(a) for a in (real, fake, alpha)))
    np.testing.assert_allclose(la, lb, rtol=1e-9)
    mine = dict(ours.named_parameters())
    for n, p in theirs.named_parameters():
        np.testing.assert_allclose(to_np(mine[n]), p.detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=n)


def test_physics_informed_second_derivative_matches_pytorch():
    """u(x, t) by an MLP with tanh; the residual u_t - 0.1 u_xx from autograd.grad twice; its mean square's
    gradient with respect to every parameter."""
    def run(lib, model, xt):
        u = model(xt)
        du = lib.autograd.grad(u, xt, grad_outputs=lib.ones_like(u), create_graph=True)[0]
        u_x, u_t = du[:, 0:1], du[:, 1:2]
        u_xx = lib.autograd.grad(u_x, xt, grad_outputs=lib.ones_like(u_x), create_graph=True)[0][:, 0:1]
        loss = ((u_t - 0.1 * u_xx) ** 2).mean()
        loss.backward()
        return loss.item()

    def mlp(lib):
        return lib.nn.Sequential(lib.nn.Linear(2, 8), lib.nn.Tanh(), lib.nn.Linear(8, 8), lib.nn.Tanh(),
                                 lib.nn.Linear(8, 1)).double()
    theirs, ours = mlp(torch), mlp(gm)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    pts = R.rand(10, 2)
    lb = run(torch, theirs, torch.tensor(pts, requires_grad=True))
    la = run(gm, ours, gm.tensor(pts, requires_grad=True))
    np.testing.assert_allclose(la, lb, rtol=1e-10)
    mine = dict(ours.named_parameters())
    for n, p in theirs.named_parameters():
        if p.grad is None:  # the last bias: no derivative of u depends on it (PyTorch leaves .grad None too)
            assert mine[n].grad is None, n
            continue
        np.testing.assert_allclose(to_np(mine[n].grad), p.grad.numpy(), rtol=1e-9, atol=1e-13, err_msg=n)


def test_maml_meta_gradient_matches_pytorch():
    """One inner SGD step on fast weights kept in the graph (create_graph=True), the query loss's gradient with
    respect to the initial weights: the meta-gradient."""
    def run(lib, w1, b1, w2, xs, ys, xq, yq):
        F = lib.nn.functional
        params = [w1, b1, w2]

        def net(x, p):
            return F.linear(F.relu(F.linear(x, p[0], p[1])), p[2])
        inner = F.cross_entropy(net(xs, params), ys)
        grads = lib.autograd.grad(inner, params, create_graph=True)
        fast = [p - 0.5 * g for p, g in zip(params, grads)]
        outer = F.cross_entropy(net(xq, fast), yq)
        outer.backward()
        return [p.grad for p in params]

    arrs = [R.randn(6, 3), R.randn(6), R.randn(2, 6)]
    data = [R.randn(5, 3), np.array([0, 1, 1, 0, 1]), R.randn(4, 3), np.array([1, 0, 0, 1])]
    ga = run(gm, *_tensors(gm, arrs, "cpu"), *(gm.tensor(d) for d in data))
    gb = run(torch, *_tensors(torch, arrs, None), *(torch.tensor(d) for d in data))
    for a, b in zip(ga, gb):
        np.testing.assert_allclose(to_np(a), b.numpy(), rtol=1e-9, atol=1e-13)


def test_maml_conv4_with_batch_norm_and_max_pool_matches_pytorch():
    """The conv-4 network of MAML's few-shot image experiments (conv, batch norm in training mode, ReLU,
    max-pool), functional over its weights: the second-order meta-gradient after one inner step."""
    def run(lib, params, xs, ys, xq, yq):
        F = lib.nn.functional

        def net(x, p):
            for i in range(2):
                x = F.conv2d(x, p[4 * i], p[4 * i + 1], padding=1)
                x = F.batch_norm(x, None, None, p[4 * i + 2], p[4 * i + 3], training=True)
                x = F.max_pool2d(F.relu(x), 2)
            return F.linear(x.flatten(1), p[8], p[9])
        inner = F.cross_entropy(net(xs, params), ys)
        grads = lib.autograd.grad(inner, params, create_graph=True)
        outer = F.cross_entropy(net(xq, [p - 0.4 * g for p, g in zip(params, grads)]), yq)
        outer.backward()
        return [p.grad for p in params]

    shapes = [(4, 1, 3, 3), (4,), (4,), (4,), (4, 4, 3, 3), (4,), (4,), (4,), (3, 4 * 2 * 2), (3,)]
    arrs = [R.randn(*s) * 0.5 + (1.0 if i in (2, 6) else 0.0) for i, s in enumerate(shapes)]
    data = [R.randn(6, 1, 8, 8), np.array([0, 1, 2, 0, 1, 2]), R.randn(3, 1, 8, 8), np.array([2, 1, 0])]
    ga = run(gm, _tensors(gm, arrs, "cpu"), *(gm.tensor(d) for d in data))
    gb = run(torch, _tensors(torch, arrs, None), *(torch.tensor(d) for d in data))
    for i, (a, b) in enumerate(zip(ga, gb)):
        np.testing.assert_allclose(to_np(a), b.numpy(), rtol=1e-8, atol=1e-12, err_msg=f"parameter {i}")


def test_dropout_second_order_uses_the_forward_mask(device):
    """The gradient of dropout is g * mask / (1 - p), linear in g: its gradient with respect to what g depends on
    goes through the same mask (PyTorch's masks differ from ours, so the mask is read off the output)."""
    x = gm.tensor(R.rand(4, 5) + 0.5, dtype=gm.float64, device=device, requires_grad=True)
    y = gm.nn.functional.dropout(x, 0.5)
    keep = to_np(y) != 0
    (g,) = gm.autograd.grad((y ** 3).sum(), x, create_graph=True)
    np.testing.assert_allclose(to_np(g), keep * 3 * (2 * to_np(x)) ** 2 * 2)
    (g ** 2).sum().backward()
    xs = to_np(x)  # g = 24 x^2 where kept: d/dx sum(g^2) = 2 * 24^2 * 2 x^3
    np.testing.assert_allclose(to_np(x.grad), keep * 2 * 24 ** 2 * 2 * xs ** 3, rtol=1e-12)


def test_backward_with_create_graph_leaves_differentiable_grads(device):
    x = gm.tensor([1.0, -2.0, 3.0], dtype=gm.float64, device=device, requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    np.testing.assert_allclose(to_np(x.grad), 3 * np.array([1.0, 4.0, 9.0]))
    (second,) = gm.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(to_np(second), 6 * np.array([1.0, -2.0, 3.0]))
    # accumulated out of place into the graph-carrying .grad
    (x * x).sum().backward(create_graph=True)
    np.testing.assert_allclose(to_np(x.grad), 3 * np.array([1.0, 4.0, 9.0]) + 2 * np.array([1.0, -2.0, 3.0]))
    assert x.grad.grad_fn is not None
    # without create_graph nothing changes: a plain gradient, no graph
    y = gm.tensor([2.0], requires_grad=True)
    (y ** 2).sum().backward()
    assert not y.grad.requires_grad and y.grad.grad_fn is None


def test_op_without_a_formula_is_named():
    x = gm.rand(3, 3, dtype=gm.float64, requires_grad=True)
    y = gm.linalg.pinv(x).sum()
    name = y.grad_fn.next_functions[0][0].name()
    with pytest.raises(NotImplementedError, match=f"create_graph=True: {name} has no backward formula"):
        gm.autograd.grad(y, x, create_graph=True)
    gm.autograd.grad(gm.linalg.pinv(x).sum(), x)  # the first-order gradient still works


def test_i0_has_a_second_derivative():
    """i0's derivative is i1 (gpumemnet.special's, differentiable), so I0Backward0 (PyTorch's name) records."""
    x = gm.tensor([0.0, 0.5, -1.5], dtype=gm.float64, requires_grad=True)
    y = x.i0().sum()
    assert y.grad_fn.next_functions[0][0].name() == "I0Backward0"
    g, = gm.autograd.grad(y, x, create_graph=True)
    h, = gm.autograd.grad(g.sum(), x)
    # I0'' = I1' = I0 - I1 / x (1/2 at 0)
    i0, i1 = gm.special.i0(x.detach()).numpy(), gm.special.i1(x.detach()).numpy()
    xs = x.detach().numpy()
    expect = np.where(xs == 0, 0.5, i0 - i1 / np.where(xs == 0, 1, xs))
    np.testing.assert_allclose(h.numpy(), expect, rtol=1e-13)


def _flat(z):
    if isinstance(z, (tuple, list)):
        return [w for q in z for w in _flat(q)]
    return [z]


FUNCTIONAL = {
    "hessian": lambda L, F, a, b, v, w: F.hessian(lambda x: (x.tanh() ** 3).sum() + (x.exp() * x).sum(), a),
    "hessian of two inputs": lambda L, F, a, b, v, w: F.hessian(
        lambda x, y: ((y @ x).sigmoid() ** 2).sum() + (x * x).sum(), (a, b)),
    "vhp": lambda L, F, a, b, v, w: F.vhp(lambda x: (x.tanh() ** 3).sum(), a, v),
    "hvp of two inputs": lambda L, F, a, b, v, w: F.hvp(lambda x, y: ((y @ x).sigmoid() ** 2).sum(), (a, b), (v, w)),
    "jvp": lambda L, F, a, b, v, w: F.jvp(lambda x: (x ** 2).tanh() * 3, a, v),
    "jacobian create_graph": lambda L, F, a, b, v, w: F.jacobian(lambda x: (x ** 2).tanh(), a, create_graph=True),
    "vjp create_graph": lambda L, F, a, b, v, w: F.vjp(lambda x: (x ** 2).tanh(), a, v, create_graph=True),
}


@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_autograd_functional_second_order_matches_pytorch(name):
    arrs = [R.randn(3), R.randn(2, 3), R.randn(3), R.randn(2, 3)]
    a = FUNCTIONAL[name](torch, torch.autograd.functional, *(torch.tensor(x) for x in arrs))
    b = FUNCTIONAL[name](gm, gm.autograd.functional, *(gm.tensor(x) for x in arrs))
    for p, q in zip(_flat(a), _flat(b)):
        assert tuple(q.shape) == tuple(p.shape)
        np.testing.assert_allclose(to_np(q), p.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_autograd_functional_errors_as_pytorchs():
    for lib in (torch, gm):
        F = lib.autograd.functional
        with pytest.raises(RuntimeError, match="The function given to hessian should return a single Tensor"):
            F.hessian(lambda x: (x.sum(), x.sum()), lib.tensor([1.0]))
        with pytest.raises(RuntimeError, match="should contain a single element"):
            F.vhp(lambda x: x * 2, lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0]))
        with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the user-provided "
                                               "function is a single Tensor with a single element"):
            F.vhp(lambda x: x.sum(), lib.tensor([1.0, 2.0]))
