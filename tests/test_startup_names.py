"""Names that training scripts call at start-up or in small heads, against PyTorch (skipped without it):
torch.set_float32_matmul_precision, torch.use_deterministic_algorithms, torch.backends.mps, and
F.normalize / F.cosine_similarity (values and float64 gradients)."""
import warnings

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def restore_flags():
    yield
    for lib in (gm, torch):
        lib.set_float32_matmul_precision("highest")
        lib.use_deterministic_algorithms(False)


def test_float32_matmul_precision_as_pytorch():
    for lib in (gm, torch):
        seen = [lib.get_float32_matmul_precision()]
        for p in ("high", "medium", "highest"):
            lib.set_float32_matmul_precision(p)
            seen.append((lib.get_float32_matmul_precision(), lib.backends.cuda.matmul.allow_tf32))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lib.set_float32_matmul_precision("low")
        seen.append((lib.get_float32_matmul_precision(), len(w) == 1))
        lib.backends.cuda.matmul.allow_tf32 = True
        seen.append(lib.get_float32_matmul_precision())
        lib.backends.cuda.matmul.allow_tf32 = False
        if lib is gm:
            ours = seen
    assert ours == seen


def test_deterministic_algorithms_flag_as_pytorch():
    for lib in (gm, torch):
        got = [lib.are_deterministic_algorithms_enabled()]
        lib.use_deterministic_algorithms(True, warn_only=True)
        got += [lib.are_deterministic_algorithms_enabled(), lib.is_deterministic_algorithms_warn_only_enabled(),
                lib.backends.cudnn.deterministic]
        lib.use_deterministic_algorithms(False)
        got.append(lib.are_deterministic_algorithms_enabled())
        if lib is gm:
            ours = got
    assert ours == got


def test_mps_is_absent_as_on_a_machine_without_it():
    assert gm.backends.mps.is_available() is False and gm.backends.mps.is_built() is False
    assert gm.backends.cuda.is_built() == gm.cuda.is_built()


def _both(fn, *arrays):
    """fn on gpumemnet and on PyTorch float64 tensors: (ours, theirs) outputs and input gradients."""
    out = []
    for lib in (gm, torch):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = fn(lib, *xs)
        y.backward(lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape))))
        out.append([y.detach().numpy()] + [x.grad.numpy() for x in xs])
    return out


@pytest.mark.parametrize("p, dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize_as_pytorch(p, dim):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5, 3))
    x[1] = 0.0  # a zero vector along dim 0's slice: the clamp at eps decides
    ours, theirs = _both(lambda lib, a: lib.nn.functional.normalize(a, p=p, dim=dim), x)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shapes, dim", [(((6, 8), (6, 8)), 1), (((6, 1, 8), (1, 5, 8)), -1), (((3, 4), (3, 4)), 0)])
def test_cosine_similarity_as_pytorch(shapes, dim):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(s) for s in shapes)
    ours, theirs = _both(lambda lib, u, v: lib.nn.functional.cosine_similarity(u, v, dim=dim), a, b)
    for x, y in zip(ours, theirs):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    assert F.cosine_similarity(gm.tensor(a), gm.tensor(b), dim=dim).shape == \
        torch.nn.functional.cosine_similarity(torch.tensor(a), torch.tensor(b), dim=dim).shape


@pytest.mark.parametrize("shape, dim, index_shape", [((4, 5), 1, (4, 3)), ((4, 5), 0, (6, 5)), ((3, 4, 5), -1, (2, 4, 7)),
                                                     ((3, 4, 5), 1, (3, 2, 5))])
def test_gather_as_pytorch(shape, dim, index_shape):
    """Values and float64 gradients (repeated indices add up), index smaller than input apart from dim."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    idx = rng.integers(0, shape[dim], size=index_shape)
    ours, theirs = _both(lambda lib, a: lib.gather(a, dim, lib.tensor(idx)), x)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(gm.tensor(x).gather(dim, gm.tensor(idx)).numpy(),
                                  torch.tensor(x).gather(dim, torch.tensor(idx)).numpy())


@pytest.mark.parametrize("bad", [5, -1])
def test_gather_refuses_an_index_outside_the_dim_as_pytorch(bad):
    idx = np.array([[0], [bad]])
    for lib in (gm, torch):
        with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for dimension 1 with size 5"):
            lib.gather(lib.zeros(2, 5), 1, lib.tensor(idx))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        gm.gather(gm.zeros(2, 5), 1, gm.tensor([0, 1]))


def test_take_along_dim_wraps_negative_indices_as_pytorch_and_refuses_past_the_end():
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[-1], [-3]])
    np.testing.assert_array_equal(gm.tensor(x).take_along_dim(gm.tensor(idx), 1).numpy(),
                                  torch.tensor(x).take_along_dim(torch.tensor(idx), 1).numpy())
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
        gm.tensor(x).take_along_dim(gm.tensor([[3], [0]]), 1)  # PyTorch reads the next row's first element here


@pytest.mark.parametrize("dims", [(3,), (0, 2), (-1, 1), ()])
def test_flip_as_pytorch(dims):
    """Test-time and batch augmentation (`torch.flip(x, dims=[3])`): values and gradients, a copy."""
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 5))
    ours, theirs = _both(lambda lib, a: lib.flip(a, list(dims)) * 1.0, x)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    t = gm.tensor(x)
    t.flip(list(dims)).fill_(0.0)  # a copy: the original keeps its values
    np.testing.assert_array_equal(t.numpy(), x)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        t.flip(1, -3)


@pytest.mark.parametrize("shifts, dims", [(1, 0), (-2, 3), ((1, 7), (1, 2)), (5, None), ((3,), None), (0, 2)])
def test_roll_as_pytorch(shifts, dims):
    x = np.random.default_rng(4).standard_normal((2, 3, 4, 5))
    ours, theirs = _both(lambda lib, a: lib.roll(a, shifts, dims) * 1.0, x)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        gm.tensor(x).roll((1, 2), (0,))
