"""A user's autograd.Function behaves as PyTorch's does (gpumemnet/_core/custom_function.py), each case against
PyTorch itself: zeros for an output no gradient reached, mark_non_differentiable by tensor, mark_dirty, an input
returned unchanged, ctx attributes without grad, the setup_context style, double backward through it (its backward
differentiated again under create_graph), once_differentiable, gradgradcheck, and the node's name."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _classes(L):
    class TwoOut(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):  # g2 is zeros when only the first output is used
            return g1 * 2 + g2 * 3

    class Cube(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            y = x ** 3 * k
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 3 * ctx.k * x * x + 0 * y, None

    class SortFn(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            v, i = x.sort()
            ctx.mark_non_differentiable(i)
            ctx.save_for_backward(i)
            return v, i

        @staticmethod
        def backward(ctx, gv, gi):
            i, = ctx.saved_tensors
            return gv.new_zeros(gv.shape).scatter(0, i, gv)

    class AddOne_(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    class Same(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    class Scale(L.autograd.Function):  # the setup_context style
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None
    return TwoOut, Cube, SortFn, AddOne_, Same, Scale


X = np.array([0.5, -1.5, 2.0])


def _run(L):
    TwoOut, Cube, SortFn, AddOne_, Same, Scale = _classes(L)
    res = {}
    x = L.tensor(X, requires_grad=True)
    TwoOut.apply(x)[0].sum().backward()
    res["unused output"] = x.grad
    x = L.tensor(X, requires_grad=True)
    v, i = SortFn.apply(x)
    res["sort requires_grad"] = np.array([v.requires_grad, i.requires_grad])
    (v * L.tensor([1.0, 2.0, 3.0], dtype=L.float64)).sum().backward()
    res["sort grad"] = x.grad
    x = L.tensor(X, requires_grad=True)
    y = x * 1.0
    z = AddOne_.apply(y)
    res["dirty is the input"] = np.array([z is y])
    (z * z).sum().backward()
    res["dirty grad"] = x.grad
    x = L.tensor(X, requires_grad=True)
    s = Same.apply(x)
    res["same leaves the input a leaf"] = np.array([x.is_leaf, x.grad_fn is None, s is not x])
    s.sum().backward()
    res["same grad"] = x.grad
    with L.no_grad():
        res["no grad"] = Cube.apply(L.tensor(X), 2.0)
    x = L.tensor(X, requires_grad=True)
    g, = L.autograd.grad(Cube.apply(x, 2.0).sum(), x, create_graph=True)
    res["first"] = g
    g.pow(2).sum().backward()
    res["double backward"] = x.grad
    x = L.tensor(X, requires_grad=True)
    Scale.apply(x, 4.0).sum().backward()
    res["setup_context"] = x.grad
    res["gradgradcheck"] = np.array([L.autograd.gradgradcheck(lambda t: Cube.apply(t, 2.0),
                                                              (L.tensor(X, requires_grad=True),))])
    return {k: (v.detach().numpy() if hasattr(v, "detach") else v) for k, v in res.items()}


def test_custom_functions_behave_as_pytorchs():
    ours, ref = _run(gm), _run(torch)
    for k in ref:
        np.testing.assert_allclose(ours[k], ref[k], rtol=1e-12, err_msg=k)


def test_node_name_and_once_differentiable():
    from gpumemnet.autograd.function import once_differentiable
    _, Cube, *_ = _classes(gm)
    x = gm.tensor(X, requires_grad=True)
    assert Cube.apply(x, 1.0).grad_fn.name() == "CubeBackward"

    class Frozen(gm.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            t, = ctx.saved_tensors
            return 2 * t * g
    x = gm.tensor(X, requires_grad=True)
    g, = gm.autograd.grad(Frozen.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), 2 * X)
    assert not g.requires_grad


def test_dirty_leaf_is_refused():
    _, _, _, AddOne_, _, _ = _classes(gm)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        AddOne_.apply(gm.tensor(X, requires_grad=True))


def test_gradgradcheck_catches_a_wrong_second_derivative():
    class Detached(gm.autograd.Function):  # right first derivative, but its backward cuts x from the graph
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x.detach() ** 2
    x = gm.tensor(X, requires_grad=True)
    assert gm.autograd.gradcheck(Detached.apply, (x,))
    assert not gm.autograd.gradgradcheck(Detached.apply, (x,), raise_exception=False)


def test_saved_inputs_come_back_as_the_graphs_tensors():
    """torchdiffeq's adjoint: backward takes a gradient with respect to a saved parameter under enable_grad(); the
    unpacked parameter is the parameter itself (PyTorch's), a saved intermediate input is linked to its node, and an
    integer output comes back as it is."""
    def run(L):
        w = L.nn.Parameter(L.tensor([2.0, 3.0], dtype=L.float64))
        seen = []

        class F(L.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                idx = L.tensor([1, 0])
                ctx.save_for_backward(x, w, idx)
                ctx.mark_non_differentiable(idx)
                return x * w, idx

            @staticmethod
            def backward(ctx, g, gi):
                x, w_saved, idx = ctx.saved_tensors
                seen.extend([w_saved is w, x.requires_grad, idx.requires_grad])
                with L.enable_grad():
                    gw, = L.autograd.grad((x.detach() * w_saved * w_saved).sum(), (w_saved,))
                return g * w_saved, gw * g

        x = L.tensor([1.0, 4.0], dtype=L.float64, requires_grad=True)
        F.apply(x * 1.0, w)[0].sum().backward()
        return seen, x.grad.tolist(), w.grad.tolist()
    assert run(gm) == run(torch)


def test_a_gradient_of_the_broadcast_shape_is_summed_to_the_input():
    """gpytorch's RBFCovariance returns the lengthscale's gradient at the covariance's shape: PyTorch's engine sums
    a gradient expandable from the input's shape down to it (a leaf, and an input made by another op)."""
    def run(L):
        class Scale(L.autograd.Function):
            @staticmethod
            def forward(ctx, x, s):
                ctx.save_for_backward(x)
                return x * s

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return None, g * x

        raw = L.zeros(1, 1, dtype=L.float64, requires_grad=True)
        leaf = L.ones(4, dtype=L.float64, requires_grad=True)
        x = L.arange(12.0, dtype=L.float64).reshape(3, 4)
        (Scale.apply(x, L.nn.functional.softplus(raw)).sum() + Scale.apply(x, leaf).sum()).backward()
        return raw.grad.tolist(), leaf.grad.tolist()
    assert run(gm) == run(torch)
