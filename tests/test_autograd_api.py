"""torch.autograd's public surface beyond Function and grad, against PyTorch: the legacy Variable, gradcheck
(verdicts and GradcheckError), functional.jacobian / vjp (values, nesting, strict mode), backward(inputs=...),
grad(materialize_grads=...), and the submodules importing as torch's do under the drop-in alias."""
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
A, B = R.standard_normal((2, 3)), R.standard_normal(3)


def _both(device, *arrays, grad=True):
    mine = [gm.tensor(a, dtype=gm.float64, device=device, requires_grad=grad) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=grad) for a in arrays]
    return mine, theirs


def test_variable_is_a_detached_leaf(device):
    (x,), (tx,) = _both(device, B)
    y, ty = x * 2, tx * 2
    for lib, src, dst in ((gm, x, y), (torch, tx, ty)):
        v = lib.autograd.Variable(src, requires_grad=True)
        assert v is not src and v.requires_grad and v.grad_fn is None
        assert isinstance(src, lib.autograd.Variable)
        w = lib.autograd.Variable(dst)
        assert not w.requires_grad and w.grad_fn is None
        assert tuple(lib.autograd.Variable().shape) == (0,)
        with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
            lib.autograd.Variable([1.0])
    v = gm.autograd.Variable(x)
    with gm.no_grad():
        v[0] = 5.0  # the same memory, as PyTorch's
    assert to_np(x)[0] == 5.0


class _Halved:
    """A Function whose backward is wrong by a factor of 2."""

    @staticmethod
    def make(lib):
        class Halved(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a ** 2

            @staticmethod
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                return g * a
        return Halved


FUNCS = {
    "square": lambda lib: (lambda a, b: a ** 2),
    "matmul and sum": lambda lib: (lambda a, b: (a @ b, (a * a).sum())),
    "softmax": lambda lib: (lambda a, b: lib.softmax(a, 1) * b),
}


@pytest.mark.parametrize("name", FUNCS)
def test_gradcheck_passes_correct_gradients(name, device):
    (a, b), (ta, tb) = _both(device, A, B)
    assert gm.autograd.gradcheck(FUNCS[name](gm), (a, b)) is True
    assert torch.autograd.gradcheck(FUNCS[name](torch), (ta, tb)) is True


def test_gradcheck_catches_a_wrong_backward(device):
    (a,), (ta,) = _both(device, A)
    for lib, x in ((gm, a), (torch, ta)):
        fn = _Halved.make(lib).apply
        with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0"):
            lib.autograd.gradcheck(fn, (x,))
        assert lib.autograd.gradcheck(fn, (x,), raise_exception=False) is False
    with pytest.raises(gm.autograd.GradcheckError):
        gm.autograd.gradcheck(_Halved.make(gm).apply, (a,))
    for lib, x in ((gm, a.detach()), (torch, ta.detach())):
        with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
            lib.autograd.gradcheck(lambda t: t * 2, (x,))


def _jac_cases(lib):
    return [
        (lambda a: a ** 2, "one"),
        (lambda a, b: (a * b, a.sum()), "two"),
        (lambda a: (a * 2,), "one"),
        (lambda a, b: a.exp() * b.sum(), "two"),
    ]


def _nested_np(x):
    if isinstance(x, tuple):
        return tuple(_nested_np(t) for t in x)
    return to_np(x) if not isinstance(x, torch.Tensor) else x.detach().numpy()


def _assert_nested(got, want):
    assert isinstance(got, tuple) == isinstance(want, tuple)
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _assert_nested(g, w)
    else:
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", range(4))
def test_jacobian_matches(case, device):
    fn_gm, arity = _jac_cases(gm)[case]
    fn_t, _ = _jac_cases(torch)[case]
    (a, b), (ta, tb) = _both(device, B, B[::-1].copy(), grad=False)
    args, targs = ((a,), (ta,)) if arity == "one" else ((a, b), (ta, tb))
    ins, tins = (args[0], targs[0]) if arity == "one" else (args, targs)
    _assert_nested(_nested_np(gm.autograd.functional.jacobian(fn_gm, ins)),
                   _nested_np(torch.autograd.functional.jacobian(fn_t, tins)))


def test_jacobian_and_vjp_errors(device):
    (a, b), (ta, tb) = _both(device, B, B, grad=False)
    for lib, x, y in ((gm, a, b), (torch, ta, tb)):
        F = lib.autograd.functional
        with pytest.raises(RuntimeError, match="independent of input 1"):
            F.jacobian(lambda p, q: p * 2, (x, y), strict=True)
        with pytest.raises(RuntimeError, match="does not require gradients"):
            F.jacobian(lambda p: p.detach() * 2, x, strict=True)
        with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
            F.jacobian(lambda p: [p], x)
        with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
            F.jacobian(lambda p: p, [x])
        with pytest.raises(RuntimeError, match="v can only be None"):
            F.vjp(lambda p: p ** 2, x)
    zero = gm.autograd.functional.jacobian(lambda p, q: p * 2, (a, b))[1]
    np.testing.assert_array_equal(to_np(zero), np.zeros((3, 3)))


def test_vjp_matches(device):
    (a, v), (ta, tv) = _both(device, B, B[::-1].copy(), grad=False)
    out, g = gm.autograd.functional.vjp(lambda p: p ** 3, a, v)
    tout, tg = torch.autograd.functional.vjp(lambda p: p ** 3, ta, tv)
    np.testing.assert_allclose(to_np(out), tout.numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_np(g), tg.numpy(), rtol=1e-12)
    out, g = gm.autograd.functional.vjp(lambda p, q: (p * q).sum(), (a, v))
    tout, tg = torch.autograd.functional.vjp(lambda p, q: (p * q).sum(), (ta, tv))
    for x, y in zip(g, tg):
        np.testing.assert_allclose(to_np(x), y.numpy(), rtol=1e-12)


def test_backward_into_chosen_inputs(device):
    """backward(inputs=...) accumulates into those tensors only, a non-leaf among them; twice sums."""
    (a, b), (ta, tb) = _both(device, B, B[::-1].copy())
    got = []
    for x, y in ((a, b), (ta, tb)):
        h = x * y
        h.retain_grad()
        loss = (h ** 2).sum()
        loss.backward(inputs=[x, h], retain_graph=True)
        assert h.retains_grad  # named in inputs: kept from now on
        loss.backward(inputs=[x])  # so h.grad sums this one too, as in PyTorch
        got.append((x.grad, y.grad, h.grad))
    (xg, yg, hg), (txg, tyg, thg) = got
    assert yg is None and tyg is None
    np.testing.assert_allclose(to_np(xg), txg.numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_np(hg), thg.numpy(), rtol=1e-12)
    for lib, x in ((gm, a), (torch, ta)):
        with pytest.raises(RuntimeError, match="cannot be empty"):
            (x * 2).sum().backward(inputs=[])


def test_grad_materializes_unused_inputs(device):
    (a, b), (ta, tb) = _both(device, B, B)
    for lib, x, y in ((gm, a, b), (torch, ta, tb)):
        ga, gb = lib.autograd.grad((x * 2).sum(), (x, y), materialize_grads=True)
        assert gb is not None and float(gb.abs().sum()) == 0.0
        with pytest.raises(ValueError, match="allow_unused to be True or not passed"):
            lib.autograd.grad((x * 2).sum(), (x, y), allow_unused=False, materialize_grads=True)


def test_gradients_of_gradients(device):
    """create_graph=True records the backward, as PyTorch does: d/da of the gradient of sum(a^3) is 6a
    (tests/test_double_backward.py compares every formula with PyTorch)."""
    (a,), _ = _both(device, B)
    g, = gm.autograd.grad((a ** 3).sum(), a, create_graph=True)
    np.testing.assert_allclose(to_np(g), 3 * B ** 2, rtol=1e-12)
    g.sum().backward()
    np.testing.assert_allclose(to_np(a.grad), 6 * B, rtol=1e-12)
    a.grad = None
    (a ** 3).sum().backward(create_graph=False, retain_graph=None)
    np.testing.assert_allclose(to_np(a.grad), 3 * B ** 2, rtol=1e-12)
    assert a.grad.grad_fn is None


def test_submodules_import_as_torchs():
    code = ("import gpumemnet as gm; gm.as_torch()\n"
            "import torch.autograd.graph, torch.autograd.functional\n"
            "from torch.autograd.gradcheck import GradcheckError\n"
            "from torch.autograd import Variable, gradcheck\n"
            "from torch.autograd.graph import save_on_cpu, saved_tensors_hooks\n"
            "print(torch.autograd.functional.jacobian.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "gpumemnet.autograd.functional"


def test_grad_mode_decorators_and_inference_mode():
    """@no_grad / @enable_grad / @inference_mode without parentheses, inference_mode(False) and
    is_inference_mode_enabled, nested as PyTorch nests them."""
    seen = {}
    for lib in (gm, torch):
        @lib.no_grad
        def f():
            return lib.is_grad_enabled()

        @lib.inference_mode
        def g():
            return lib.is_grad_enabled(), lib.is_inference_mode_enabled()

        @lib.inference_mode(False)
        def h():
            return lib.is_grad_enabled(), lib.is_inference_mode_enabled()

        @lib.enable_grad
        def e():
            return lib.is_grad_enabled()

        with lib.no_grad():
            inside = (h(), e(), g())
            with lib.inference_mode():
                with lib.inference_mode(False):
                    nested = (lib.is_grad_enabled(), lib.is_inference_mode_enabled())
                deep = lib.is_inference_mode_enabled()
        seen[lib] = (f(), g(), h(), inside, nested, deep, lib.is_inference_mode_enabled(), lib.is_grad_enabled())
    assert seen[gm] == seen[torch]
