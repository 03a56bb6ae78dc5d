"""Autograd: the backward of every op of the core.

Each op case is described once (CASES) and feeds three checks, as STYLE.md asks: the forward against NumPy,
the float64 gradient against finite differences (tests/gradcheck.py), and, where PyTorch is importable,
values and gradients against PyTorch. A case's `fn(m, *xs)` is written once for gpumemnet and torch (m is the
module); its NumPy reference is `np_fn(*arrays)`. Float64 ndarrays become inputs requiring grad; int/bool
ndarrays become index tensors/masks that do not. Then the checker itself (it catches a wrong backward), and the
gradients finite differences cannot check: casts, ties, bounds, duplicate indices, partly used outputs."""

import numpy as np
import pytest

import gpumemnet as gm
from autograd_util import MASK, NZ, P, R
from gradcheck import assert_close, check_against_numpy, check_against_torch, gradcheck, to_numpy


class Case:
    def __init__(self, name, fn, arrays, np_fn=None, torch=True, atol=1e-5, rtol=1e-4):
        self.name, self.fn, self.arrays = name, fn, arrays
        self.np_fn = np_fn if np_fn is not None else (lambda *a: fn(np, *a))
        self.torch = torch
        self.atol, self.rtol = atol, rtol

    def __repr__(self):
        return self.name


def _np_var(x, axis=None, ddof=0, keepdims=False):
    return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)


CASES = [
    # ---- binary, with broadcasting and Python numbers ----
    Case("add", lambda m, a, b: a + b, [R(3, 4), R(3, 4)]),
    Case("add_bcast_row", lambda m, a, b: a + b, [R(3, 4), R(4)]),
    Case("add_bcast_both", lambda m, a, b: a + b, [R(2, 1, 4), R(3, 1)]),
    Case("add_number", lambda m, a: a + 2.5, [R(3, 4)]),
    Case("radd_number", lambda m, a: 2.5 + a, [R(3, 4)]),
    Case("add_0d", lambda m, a, b: a + b, [R(), R(2, 3)]),
    Case("sub", lambda m, a, b: a - b, [R(3, 4), R(3, 1)]),
    Case("sub_number", lambda m, a: a - 1.5, [R(3, 4)]),
    Case("rsub_number", lambda m, a: 1.5 - a, [R(3, 4)]),
    Case("mul", lambda m, a, b: a * b, [R(3, 4), R(3, 4)]),
    Case("mul_bcast", lambda m, a, b: a * b, [R(2, 3, 1), R(1, 4)]),
    Case("mul_number", lambda m, a: a * -3.0, [R(3, 4)]),
    Case("rmul_number", lambda m, a: -3.0 * a, [R(3, 4)]),
    Case("mul_self", lambda m, a: a * a, [R(3, 4)]),
    Case("div", lambda m, a, b: a / b, [R(3, 4), NZ(3, 4)]),
    Case("div_bcast", lambda m, a, b: a / b, [R(2, 3), NZ(3)]),
    Case("div_number", lambda m, a: a / 4.0, [R(3, 4)]),
    Case("rdiv_number", lambda m, a: 2.0 / a, [NZ(3, 4)]),
    Case("pow_number", lambda m, a: a ** 2.5, [P(3, 4)]),
    Case("pow_int", lambda m, a: a ** 3, [R(3, 4)]),
    Case("pow_neg_exponent", lambda m, a: a ** -1.5, [P(3, 4)]),
    Case("rpow_number", lambda m, a: 2.0 ** a, [R(3, 4)]),
    Case("pow_tensor", lambda m, a, b: a ** b, [P(3, 4), R(3, 4)]),
    Case("pow_tensor_bcast", lambda m, a, b: a ** b, [P(2, 1, 4), R(3, 1)]),
    Case("maximum", lambda m, a, b: m.maximum(a, b), [R(3, 4), R(3, 4)]),
    Case("maximum_bcast", lambda m, a, b: m.maximum(a, b), [R(3, 4), R(4)]),
    Case("minimum", lambda m, a, b: m.minimum(a, b), [R(3, 4), R(3, 4)]),
    Case("minimum_bcast", lambda m, a, b: m.minimum(a, b), [R(2, 1, 4), R(3, 1)]),
    Case("max_tensor_method", lambda m, a, b: a.max(b), [R(3, 4), R(3, 4)], np_fn=np.maximum),
    # ---- unary ----
    Case("neg", lambda m, a: -a, [R(3, 4)]),
    Case("neg_method", lambda m, a: a.neg(), [R(3, 4)], np_fn=np.negative),
    Case("exp", lambda m, a: m.exp(a), [R(3, 4)]),
    Case("log", lambda m, a: m.log(a), [P(3, 4)]),
    Case("sqrt", lambda m, a: m.sqrt(a), [P(3, 4)]),
    Case("abs", lambda m, a: m.abs(a), [NZ(3, 4)]),
    Case("abs_builtin", lambda m, a: abs(a), [NZ(3, 4)], np_fn=np.abs),
    Case("clamp_min", lambda m, a: a.clamp(min=-0.3), [R(4, 5)], np_fn=lambda a: np.maximum(a, -0.3)),
    Case("clamp_max", lambda m, a: a.clamp(max=0.2), [R(4, 5)], np_fn=lambda a: np.minimum(a, 0.2)),
    Case("clamp_both", lambda m, a: m.clamp(a, -0.4, 0.5), [R(4, 5)], np_fn=lambda a: np.clip(a, -0.4, 0.5)),
    Case("clip", lambda m, a: a.clip(-0.4, 0.5), [R(4, 5)], np_fn=lambda a: np.clip(a, -0.4, 0.5)),
    Case("where", lambda m, c, a, b: m.where(c, a, b), [MASK(3, 4), R(3, 4), R(3, 4)]),
    Case("where_bcast", lambda m, c, a, b: m.where(c, a, b), [MASK(3, 4), R(4), R(3, 1)]),
    Case("where_number", lambda m, c, a: m.where(c, a, 0.5), [MASK(3, 4), R(3, 4)]),
    # ---- reductions ----
    Case("sum_all", lambda m, a: a.sum(), [R(3, 4)], np_fn=np.sum),
    Case("sum_dim", lambda m, a: a.sum(dim=1), [R(3, 4)], np_fn=lambda a: a.sum(axis=1)),
    Case("sum_neg_dim", lambda m, a: a.sum(-1), [R(2, 3, 4)], np_fn=lambda a: a.sum(axis=-1)),
    Case("sum_dims_keepdim", lambda m, a: a.sum(dim=(0, 2), keepdim=True), [R(2, 3, 4)],
         np_fn=lambda a: a.sum(axis=(0, 2), keepdims=True)),
    Case("sum_0d", lambda m, a: a.sum(), [R()], np_fn=np.sum),
    Case("mean_all", lambda m, a: a.mean(), [R(3, 4)], np_fn=np.mean),
    Case("mean_dim", lambda m, a: m.mean(a, 0), [R(3, 4)], np_fn=lambda a: a.mean(axis=0)),
    Case("mean_dims_keepdim", lambda m, a: a.mean(dim=(1, 2), keepdim=True), [R(2, 3, 4)],
         np_fn=lambda a: a.mean(axis=(1, 2), keepdims=True)),
    Case("amax_all", lambda m, a: m.amax(a), [R(3, 4)], np_fn=np.amax),
    Case("amax_dim", lambda m, a: a.amax(dim=1), [R(3, 4)], np_fn=lambda a: a.max(axis=1)),
    Case("amax_dims_keepdim", lambda m, a: a.amax(dim=(0, 2), keepdim=True), [R(2, 3, 4)],
         np_fn=lambda a: a.max(axis=(0, 2), keepdims=True)),
    Case("amin_all", lambda m, a: a.amin(), [R(3, 4)], np_fn=np.amin),
    Case("amin_dim_keepdim", lambda m, a: a.amin(dim=-1, keepdim=True), [R(3, 4)],
         np_fn=lambda a: a.min(axis=-1, keepdims=True)),
    Case("max_full", lambda m, a: a.max(), [R(3, 4)], np_fn=np.max),
    Case("min_full", lambda m, a: m.min(a), [R(3, 4)], np_fn=np.min),
    Case("max_dim", lambda m, a: a.max(dim=1)[0], [R(3, 4)], np_fn=lambda a: a.max(axis=1)),
    Case("max_dim_tuple", lambda m, a: a.max(1), [R(3, 4)],
         np_fn=lambda a: (a.max(axis=1), a.argmax(axis=1))),
    Case("max_dim_keepdim", lambda m, a: a.max(dim=0, keepdim=True)[0], [R(3, 4)],
         np_fn=lambda a: a.max(axis=0, keepdims=True)),
    Case("min_dim", lambda m, a: a.min(dim=-1)[0], [R(2, 3, 4)], np_fn=lambda a: a.min(axis=-1)),
    Case("min_dim_keepdim", lambda m, a: m.min(a, 1, keepdim=True)[0], [R(2, 3, 4)],
         np_fn=lambda a: a.min(axis=1, keepdims=True)),
    Case("var_all", lambda m, a: a.var(), [R(3, 4)], np_fn=lambda a: _np_var(a, ddof=1)),
    Case("var_all_c0", lambda m, a: a.var(correction=0), [R(3, 4)], np_fn=lambda a: _np_var(a)),
    Case("var_dim_c1", lambda m, a: a.var(dim=1, correction=1), [R(3, 5)],
         np_fn=lambda a: _np_var(a, axis=1, ddof=1)),
    Case("var_dims_c0_keepdim", lambda m, a: m.var(a, dim=(0, 2), correction=0, keepdim=True), [R(2, 3, 4)],
         np_fn=lambda a: _np_var(a, axis=(0, 2), keepdims=True)),
    Case("var_unbiased_false", lambda m, a: a.var(0, unbiased=False), [R(4, 3)],
         np_fn=lambda a: _np_var(a, axis=0)),
    Case("std_dim", lambda m, a: a.std(dim=1), [R(3, 5)], np_fn=lambda a: np.std(a, axis=1, ddof=1)),
    # ---- matmul ----
    Case("matmul_dot", lambda m, a, b: a @ b, [R(5), R(5)]),
    Case("matmul_mv", lambda m, a, b: a @ b, [R(3, 5), R(5)]),
    Case("matmul_vm", lambda m, a, b: a @ b, [R(5), R(5, 4)]),
    Case("matmul_mm", lambda m, a, b: m.matmul(a, b), [R(3, 5), R(5, 4)]),
    Case("matmul_batched", lambda m, a, b: a @ b, [R(2, 3, 5), R(2, 5, 4)]),
    Case("matmul_batched_bcast", lambda m, a, b: a @ b, [R(2, 1, 3, 5), R(3, 5, 4)]),
    Case("matmul_batched_mat", lambda m, a, b: a @ b, [R(2, 3, 5), R(5, 4)]),
    Case("matmul_mat_batched", lambda m, a, b: a @ b, [R(3, 5), R(2, 5, 4)]),
    Case("matmul_vec_batched", lambda m, a, b: a @ b, [R(5), R(2, 5, 4)]),
    Case("matmul_batched_vec", lambda m, a, b: a @ b, [R(2, 3, 5), R(5)]),
    Case("matmul_transposed_operand", lambda m, a, b: a.t() @ b, [R(5, 3), R(5, 4)],
         np_fn=lambda a, b: a.T @ b),
    # ---- shape ops and views ----
    Case("reshape", lambda m, a: a.reshape(4, 3) * 1.5, [R(2, 6)], np_fn=lambda a: a.reshape(4, 3) * 1.5),
    Case("reshape_neg1", lambda m, a: m.reshape(a, (-1, 2)), [R(2, 3, 2)], np_fn=lambda a: a.reshape(-1, 2)),
    Case("reshape_noncontig", lambda m, a: a.transpose(0, 1).reshape(-1), [R(3, 4)],
         np_fn=lambda a: a.T.reshape(-1)),
    Case("view", lambda m, a: a.view(3, 2, 2), [R(2, 6)], np_fn=lambda a: a.reshape(3, 2, 2)),
    Case("flatten", lambda m, a: a.flatten(), [R(2, 3, 2)], np_fn=lambda a: a.reshape(-1)),
    Case("flatten_dims", lambda m, a: m.flatten(a, 1), [R(2, 3, 2)], np_fn=lambda a: a.reshape(2, -1)),
    Case("transpose", lambda m, a: a.transpose(0, 2), [R(2, 3, 4)], np_fn=lambda a: a.transpose(2, 1, 0)),
    Case("transpose_neg", lambda m, a: m.transpose(a, -1, -2), [R(2, 3, 4)], np_fn=lambda a: a.swapaxes(-1, -2)),
    Case("permute", lambda m, a: a.permute(2, 0, 1), [R(2, 3, 4)], np_fn=lambda a: a.transpose(2, 0, 1)),
    Case("permute_tuple", lambda m, a: a.permute((1, 2, 0)), [R(2, 3, 4)], np_fn=lambda a: a.transpose(1, 2, 0)),
    Case("expand", lambda m, a: a.expand(2, 3, 4), [R(3, 1)], np_fn=lambda a: np.broadcast_to(a, (2, 3, 4))),
    Case("expand_neg1", lambda m, a: a.expand(-1, 4), [R(3, 1)], np_fn=lambda a: np.broadcast_to(a, (3, 4))),
    Case("unsqueeze", lambda m, a: a.unsqueeze(1), [R(3, 4)], np_fn=lambda a: a[:, None]),
    Case("unsqueeze_neg", lambda m, a: m.unsqueeze(a, -1), [R(3, 4)], np_fn=lambda a: a[..., None]),
    Case("squeeze_all", lambda m, a: a.squeeze(), [R(3, 1, 4, 1)], np_fn=np.squeeze),
    Case("squeeze_dim", lambda m, a: a.squeeze(1), [R(3, 1, 4)], np_fn=lambda a: a.squeeze(1)),
    Case("t", lambda m, a: a.t(), [R(3, 4)], np_fn=lambda a: a.T),
    Case("t_1d", lambda m, a: a.t() * 2.0, [R(4)], np_fn=lambda a: a * 2.0),
    Case("T", lambda m, a: a.T, [R(2, 3, 4)], np_fn=lambda a: a.T, torch=False),  # torch deprecates .T on 3-D
    Case("T_2d", lambda m, a: a.T, [R(3, 4)], np_fn=lambda a: a.T),
    Case("view_chain", lambda m, a: a.t().unsqueeze(0).expand(2, 4, 3).sum(0), [R(3, 4)],
         np_fn=lambda a: 2 * a.T),
    # ---- indexing ----
    Case("index_int", lambda m, a: a[1], [R(3, 4)]),
    Case("index_neg_int", lambda m, a: a[-1, 2], [R(3, 4)]),
    Case("index_slice", lambda m, a: a[:, 1:3], [R(3, 4)]),
    Case("index_slice_step", lambda m, a: a[::2, 1::3], [R(5, 7)]),
    Case("index_slice_neg", lambda m, a: a[-3:-1, :-2], [R(5, 4)]),
    Case("index_none", lambda m, a: a[None, 1, None], [R(3, 4)]),
    Case("index_ellipsis", lambda m, a: a[..., 0], [R(2, 3, 4)]),
    Case("index_ellipsis_mid", lambda m, a: a[1, ..., 1:3], [R(2, 3, 4)]),
    Case("index_list_dup", lambda m, a: a[[0, 2, 0, 0]], [R(3, 4)]),
    Case("index_tensor_dup", lambda m, a, i: a[:, i], [R(3, 4), np.array([1, 1, 3, -1])]),
    Case("index_tensor_2d", lambda m, a, i: a[i], [R(3, 4), np.array([[0, 2], [2, 2]])]),
    Case("index_slice_then_list", lambda m, a: a[1:, [3, 0, 3]], [R(3, 4)]),
    Case("index_bool_mask", lambda m, a, mk: a[mk], [R(3, 4), MASK(3, 4)]),
    Case("index_bool_rows", lambda m, a, mk: a[mk], [R(4, 3), MASK(4)]),
    Case("index_bool_after_slice", lambda m, a, mk: a[:, mk], [R(3, 5), MASK(5)]),
    # ---- cat, stack, casts, copies ----
    Case("cat0", lambda m, a, b: m.cat([a, b]), [R(2, 3), R(4, 3)], np_fn=lambda a, b: np.concatenate([a, b])),
    Case("cat1", lambda m, a, b, c: m.cat((a, b, c), dim=1), [R(2, 3), R(2, 1), R(2, 2)],
         np_fn=lambda a, b, c: np.concatenate([a, b, c], axis=1)),
    Case("cat_neg_dim", lambda m, a, b: m.cat([a, b], -1), [R(2, 2, 3), R(2, 2, 1)],
         np_fn=lambda a, b: np.concatenate([a, b], axis=-1)),
    Case("cat_same_twice", lambda m, a: m.cat([a, a * 2.0]), [R(2, 3)],
         np_fn=lambda a: np.concatenate([a, a * 2.0])),
    Case("stack0", lambda m, a, b: m.stack([a, b]), [R(2, 3), R(2, 3)], np_fn=lambda a, b: np.stack([a, b])),
    Case("stack_last", lambda m, a, b, c: m.stack([a, b, c], dim=-1), [R(2, 3), R(2, 3), R(2, 3)],
         np_fn=lambda a, b, c: np.stack([a, b, c], axis=-1)),
    Case("clone", lambda m, a: a.clone() * 3.0, [R(3, 4)], np_fn=lambda a: a * 3.0),
    Case("contiguous", lambda m, a: a.t().contiguous() * 3.0, [R(3, 4)], np_fn=lambda a: a.T * 3.0),
    Case("to_same_dtype", lambda m, a: a.to(m.float64) * 2.0, [R(3, 4)], np_fn=lambda a: a * 2.0),
    # ---- compositions: several nodes, a value used by several consumers ----
    Case("softmax_like", lambda m, a: m.exp(a - a.amax(dim=1, keepdim=True))
         / m.exp(a - a.amax(dim=1, keepdim=True)).sum(dim=1, keepdim=True), [R(3, 5)],
         np_fn=lambda a: np.exp(a - a.max(1, keepdims=True))
         / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True)),
    Case("mlp_like", lambda m, x, w, b: m.maximum((x @ w + b), x[:, :1] * 0.0).mean(0), [R(4, 3), R(3, 5), R(5)],
         np_fn=lambda x, w, b: np.maximum(x @ w + b, x[:, :1] * 0.0).mean(0)),
    Case("diamond", lambda m, a: (a * 2.0).exp() * (a * 2.0).sqrt(), [P(2, 3)],
         np_fn=lambda a: np.exp(a * 2.0) * np.sqrt(a * 2.0)),
]

_IDS = [c.name for c in CASES]
assert len(set(_IDS)) == len(_IDS), "duplicate case names"


def _inputs(case):
    """float arrays -> float64 leaves requiring grad; int/bool arrays -> tensors without grad."""
    return [gm.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
            for a in case.arrays]


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_forward_matches_numpy(case):
    check_against_numpy(lambda *xs: case.fn(gm, *xs), case.np_fn, case.arrays, atol=1e-12, rtol=1e-12,
                        dtype=gm.float64, what=case.name)


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_gradcheck(case):
    gradcheck(lambda *xs: case.fn(gm, *xs), _inputs(case), atol=case.atol, rtol=case.rtol, what=case.name)


@pytest.mark.parametrize("case", [c for c in CASES if c.torch], ids=[c.name for c in CASES if c.torch])
def test_against_torch(case):
    torch = pytest.importorskip("torch")
    check_against_torch(lambda *xs: case.fn(gm, *xs), lambda *xs: case.fn(torch, *xs), case.arrays,
                        what=case.name)


# ---- the checker itself ------------------------------------------------------------------------------------------
class _WrongSquare(gm.autograd.Function):
    """x**2 with a backward that is wrong in one element: gradcheck must catch it."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return gm._C.binary(2, a, a)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        out = to_numpy(g) * 2 * to_numpy(a)
        out[1, 2] += 0.01
        return gm.tensor(out)


def test_gradcheck_catches_wrong_backward_and_names_the_index():
    x = gm.tensor(R(3, 4), requires_grad=True)
    gradcheck(lambda a: a * a, [x])
    with pytest.raises(AssertionError, match=r"1 of 12 elements .*\n  at \(1, 2\): analytic="):
        gradcheck(lambda a: _WrongSquare.apply(a), [x], what="wrong")


def test_gradcheck_every_output_element_matters():
    """A backward that ignores the incoming gradient (returns the gradient of out.sum()) must fail: the random
    weights make sum(out * W) differ from sum(out)."""
    class IgnoresG(gm.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return gm._C.binary(2, a, 3.0)

        @staticmethod
        def backward(ctx, g):
            return gm.full_like(g, 3.0)
    with pytest.raises(AssertionError, match="analytic"):
        gradcheck(lambda a: IgnoresG.apply(a), [gm.tensor(R(4), requires_grad=True)])


# ---- gradients where finite differences do not apply ----------------------------------------------------------
def test_cast_round_trip_float32_leaf():
    """float32 leaf -> float64 -> loss: the gradient comes back as float32 and has the leaf's shape."""
    x = gm.tensor(R(3, 4).astype(np.float32), requires_grad=True)
    gradcheck(lambda a: a.to(gm.float64) ** 2 * 0.5, [x], eps=1e-3, atol=1e-5, rtol=1e-4, what="f32->f64")
    gradcheck(lambda a: a.double().exp(), [x], eps=1e-3, atol=1e-5, rtol=2e-4, what="f32->double()")
    x = gm.tensor(R(3, 4).astype(np.float32), requires_grad=True)
    y = x.to(gm.float64)
    assert y.dtype == gm.float64 and y.grad_fn is not None
    (y * 3.0).sum().backward()
    assert x.grad.dtype == gm.float32
    assert_close(x.grad, np.full((3, 4), 3.0, np.float32), 0, 0, what="cast grad")


def test_cast_float64_to_float32_and_back():
    a = R(3, 4)
    x = gm.tensor(a, requires_grad=True)
    y = x.float()
    assert y.dtype == gm.float32
    (y.double() * gm.tensor(a)).sum().backward()
    assert x.grad.dtype == gm.float64
    assert_close(x.grad, a.astype(np.float32).astype(np.float64), 0, 0, what="f64->f32->f64 grad")


def test_amax_ties_share_gradient():
    x = gm.tensor(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]]), requires_grad=True)
    x.amax(dim=1).sum().backward()
    assert_close(x.grad, [[0, 0.5, 0.5], [0.5, 0, 0.5]], 0, 0, what="amax ties")
    x = gm.tensor(np.array([1.0, 3.0, 3.0, 3.0]), requires_grad=True)
    x.max().backward()
    assert_close(x.grad, [0, 1 / 3, 1 / 3, 1 / 3], 1e-15, 0, what="max() ties")


def test_maximum_ties_split_gradient():
    a = gm.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    b = gm.tensor(np.array([1.0, 5.0, 0.0]), requires_grad=True)
    gm.maximum(a, b).sum().backward()
    assert_close(a.grad, [0.5, 0, 1], 0, 0, what="maximum ties a")
    assert_close(b.grad, [0.5, 1, 0], 0, 0, what="maximum ties b")


def test_max_dim_gradient_goes_to_returned_index():
    x = gm.tensor(np.array([[1.0, 4.0, 4.0], [7.0, 0.0, 1.0]]), requires_grad=True)
    values, idx = x.max(dim=1)
    assert not idx.requires_grad and idx.grad_fn is None
    values.sum().backward()
    expect = np.zeros((2, 3))
    expect[np.arange(2), to_numpy(idx)] = 1.0
    assert_close(x.grad, expect, 0, 0, what="max(dim) grad")


def test_clamp_gradient_at_number_bounds_is_pytorchs():
    """PyTorch 2.15 passes no gradient at a number bound (0 at x == min and x == max; earlier releases passed
    it): the reference is PyTorch itself where it is installed."""
    torch = pytest.importorskip("torch")
    xs = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    x = gm.tensor(xs, requires_grad=True)
    x.clamp(0.0, 1.0).sum().backward()
    t = torch.tensor(xs, requires_grad=True)
    t.clamp(0.0, 1.0).sum().backward()
    assert_close(x.grad, t.grad.numpy(), 0, 0, what="clamp at bounds")


def test_abs_gradient_at_zero_is_zero():
    x = gm.tensor(np.array([-2.0, 0.0, 3.0]), requires_grad=True)
    x.abs().sum().backward()
    assert_close(x.grad, [-1, 0, 1], 0, 0, what="abs grad")


def test_pow_tensor_exponent_zero_base():
    """d(a**b)/db at a == 0 is taken as 0 (PyTorch's convention), not NaN."""
    a = gm.tensor(np.array([0.0, 2.0]), requires_grad=True)
    b = gm.tensor(np.array([2.0, 3.0]), requires_grad=True)
    (a ** b).sum().backward()
    assert_close(b.grad, [0.0, 8.0 * np.log(2.0)], 1e-12, 1e-12, what="pow db at 0")
    assert_close(a.grad, [0.0, 12.0], 1e-12, 1e-12, what="pow da")


def test_index_duplicates_accumulate():
    x = gm.tensor(np.zeros((3, 2)), requires_grad=True)
    x[[0, 2, 0, 0]].sum().backward()
    assert_close(x.grad, [[3, 3], [0, 0], [1, 1]], 0, 0, what="index duplicates")


def test_only_some_inputs_require_grad():
    a = gm.tensor(R(3, 4), requires_grad=True)
    b = gm.tensor(R(3, 4))
    (a * b + b).sum().backward()
    assert b.grad is None
    assert_close(a.grad, to_numpy(b), 0, 0, what="a.grad")
    c = gm.tensor(R(2, 3), requires_grad=True)
    gm.cat([gm.tensor(R(1, 3)), c]).sum().backward()
    assert_close(c.grad, np.ones((2, 3)), 0, 0, what="cat with a constant")


def test_backward_with_explicit_gradient():
    x = gm.tensor(R(2, 3), requires_grad=True)
    g = R(2, 3)
    (x * 2.0).backward(gm.tensor(g))
    assert_close(x.grad, 2 * g, 1e-15, 0, what="explicit gradient")
    with pytest.raises(ValueError, match="shape"):
        (x * 2.0).backward(gm.tensor(R(3, 2)))


def test_grad_of_multi_output_used_partially():
    x = gm.tensor(R(3, 4), requires_grad=True)
    v, i = x.min(dim=0)
    (v * 2.0).sum().backward()
    expect = np.zeros((3, 4))
    expect[to_numpy(i), np.arange(4)] = 2.0
    assert_close(x.grad, expect, 0, 0, what="min(dim)")
