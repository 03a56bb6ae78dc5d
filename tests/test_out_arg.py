"""out= on the namespace's functions (python/gpumemnet/_core/out_arg.py), against PyTorch: the values written, the
object returned (out itself), resizing with PyTorch's warning, tuple outs, creation functions taking out's dtype,
and the errors PyTorch raises (autograd through out=, a float result into an integer out, another device)."""
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

X = np.array([[0.5, -1.5, 2.0], [3.0, -0.25, 1.0]], dtype=np.float32)
CASES = {
    "add": lambda L, x: L.add(x, 2, alpha=3, out=L.empty(2, 3)),
    "mul into its input": lambda L, x: L.mul(x, 2, out=x),
    "exp": lambda L, x: L.exp(x, out=L.empty(2, 3)),
    "clamp": lambda L, x: L.clamp(x, -1, 1, out=L.empty(2, 3)),
    "sum resized": lambda L, x: L.sum(x, 1, out=L.empty(0)),
    "mean keepdim": lambda L, x: L.mean(x, 0, keepdim=True, out=L.empty(1, 3)),
    "cat": lambda L, x: L.cat([x, x[:1]], out=L.empty(3, 3)),
    "stack": lambda L, x: L.stack([x, x], 1, out=L.empty(0)),
    "matmul": lambda L, x: L.matmul(x, x.t(), out=L.empty(2, 2)),
    "where": lambda L, x: L.where(x > 0, x, L.zeros(()), out=L.empty(2, 3)),
    "eq into int64": lambda L, x: L.eq(x, 2.0, out=L.empty(2, 3, dtype=L.int64)),
    "int result into float": lambda L, x: L.add(x.long(), 1, out=L.empty(2, 3, dtype=L.float64)),
    "argmax": lambda L, x: L.argmax(x, 1, out=L.empty(2, dtype=L.int64)),
    "zeros takes out's dtype": lambda L, x: L.zeros(2, 2, out=L.empty(0, dtype=L.int64)),
    "arange": lambda L, x: L.arange(1, 4, out=L.empty(3, dtype=L.float64)),
    "full": lambda L, x: L.full((2,), 7, out=L.empty(2, dtype=L.int64)),
}


@pytest.mark.parametrize("case", CASES)
def test_out_is_written_and_returned_as_in_pytorch(case):
    def run(L):
        x = L.tensor(X)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = CASES[case](L, x)
        return r, x, [str(m.message)[:60] for m in w]
    want, gwant, wwarn = run(torch)
    got, ggot, gwarn = run(gm)
    assert isinstance(got, gm.Tensor) and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(ggot.numpy(), gwant.numpy())  # "mul into its input" wrote x
    assert gwarn == wwarn  # PyTorch's resize warning, exactly when PyTorch gives it


def test_out_is_the_object_returned_and_tuples_are_written():
    x = gm.tensor(X)
    o = gm.empty(2, 3)
    assert gm.neg(x, out=o) is o
    values, indices = gm.empty(2), gm.empty(2, dtype=gm.int64)
    r = gm.max(x, 1, out=(values, indices))
    assert r.values is values and r.indices is indices
    np.testing.assert_array_equal(values.numpy(), X.max(1))
    np.testing.assert_array_equal(indices.numpy(), X.argmax(1))
    s, i = gm.sort(x, 1, out=(gm.empty(0), gm.empty(0, dtype=gm.int64)))
    np.testing.assert_array_equal(s.numpy(), np.sort(X, 1))
    np.testing.assert_array_equal(i.numpy(), np.argsort(X, 1))


def test_what_pytorch_refuses_with_out_is_refused():
    for L in (torch, gm):
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
            L.add(L.ones(2), 1.5, out=L.empty(2, dtype=L.int64))
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            L.mul(L.ones(2, requires_grad=True), 2, out=L.empty(2))
        with L.no_grad():  # allowed without grad mode
            assert L.mul(L.ones(2, requires_grad=True), 2, out=L.empty(2)).tolist() == [2.0, 2.0]
        with pytest.raises(TypeError):
            L.max(L.ones(2, 2), 1, out=L.empty(2))
    with pytest.raises(TypeError, match="out"):
        gm.add(gm.ones(2), 1, out=[1.0, 2.0])


def test_like_factories_take_their_keywords_and_empty_take_along_dim():
    for L in (torch, gm):
        assert L.full_like(L.ones(2, 1), fill_value=-1.5).tolist() == [[-1.5], [-1.5]]
        assert tuple(L.take_along_dim(L.zeros(0, 5), L.zeros(0, 2, dtype=L.int64), 1).shape) == (0, 2)
        assert tuple(L.zeros(3, 0).topk(0, 1).values.shape) == (3, 0)


def test_size_keyword_of_the_factories():
    for L in (torch, gm):
        for f in (L.zeros, L.ones, L.empty, L.rand, L.randn):
            assert tuple(f(size=(2, 3), dtype=L.float64).shape) == (2, 3)
