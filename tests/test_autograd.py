"""Autograd: the backward of every op of the core, and the engine's behaviour.

Each op case is described once (CASES) and feeds three checks, as STYLE.md asks: the forward against NumPy,
the float64 gradient against finite differences (tests/gradcheck.py), and, where PyTorch is importable,
values and gradients against PyTorch. A case's `fn(m, *xs)` is written once for gpumemnet and torch (m is the
module); its NumPy reference is `np_fn(*arrays)`. Float64 ndarrays become inputs requiring grad; int/bool
ndarrays become index tensors/masks that do not. The engine tests below cover accumulation, retain_graph,
autograd.grad, hooks, retain_grad, grad modes, in-place rules and version counters, saved-tensor hooks and
the freeing of saved tensors (by exact allocator bytes)."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from gradcheck import assert_close, check_against_numpy, check_against_torch, gradcheck, to_numpy

_rng = np.random.default_rng(20240611)


def R(*shape):
    """Standard normal float64 data."""
    return _rng.standard_normal(shape)


def P(*shape):
    """Positive data away from 0 (log, sqrt, division, pow bases)."""
    return _rng.uniform(0.5, 2.0, shape)


def NZ(*shape):
    """Data away from 0 on both sides (abs, denominators)."""
    return _rng.uniform(0.3, 2.0, shape) * _rng.choice([-1.0, 1.0], shape)


def MASK(*shape):
    m = _rng.random(shape) < 0.5
    m.flat[0], m.flat[-1] = True, False  # never all-False nor all-True
    return m


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


def test_clamp_gradient_at_bounds_passes():
    x = gm.tensor(np.array([-1.0, 0.0, 0.5, 1.0, 2.0]), requires_grad=True)
    x.clamp(0.0, 1.0).sum().backward()
    assert_close(x.grad, [0, 1, 1, 1, 0], 0, 0, what="clamp at bounds")


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


# ---- the engine ---------------------------------------------------------------------------------------------
def test_gradients_accumulate_across_backward_calls():
    x = gm.tensor(R(3), requires_grad=True)
    (x * 2.0).sum().backward()
    (x * x).sum().backward()
    assert_close(x.grad, 2.0 + 2 * to_numpy(x), 1e-15, 0, what="accumulated")
    x.grad = None
    (x * 3.0).sum().backward()
    assert_close(x.grad, np.full(3, 3.0), 0, 0, what="after reset")


def test_second_backward_without_retain_graph_raises():
    x = gm.tensor(R(3), requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_retain_graph_allows_second_backward():
    x = gm.tensor(R(3), requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward(retain_graph=True)
    g1 = to_numpy(x.grad)
    loss.backward()
    assert_close(x.grad, 2 * g1, 1e-14, 1e-14, what="twice")
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_autograd_grad_returns_without_touching_grad():
    x = gm.tensor(R(3), requires_grad=True)
    y = gm.tensor(R(3), requires_grad=True)
    out = (x * x * y).sum()
    gx, gy = gm.autograd.grad(out, [x, y])
    assert x.grad is None and y.grad is None
    assert_close(gx, 2 * to_numpy(x) * to_numpy(y), 1e-14, 1e-14, what="gx")
    assert_close(gy, to_numpy(x) ** 2, 1e-14, 1e-14, what="gy")
    (g,) = gm.autograd.grad((x * 3.0).sum(), x)
    assert_close(g, np.full(3, 3.0), 0, 0, what="single input")


def test_autograd_grad_non_leaf_input():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    (gh,) = gm.autograd.grad((h * h).sum(), [h])
    assert_close(gh, 2 * to_numpy(h), 1e-14, 0, what="d/dh")
    assert x.grad is None


def test_autograd_grad_unused_input():
    x = gm.tensor(R(3), requires_grad=True)
    z = gm.tensor(R(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        gm.autograd.grad((x * 2.0).sum(), [x, z], retain_graph=True)
    gx, gz = gm.autograd.grad((x * 2.0).sum(), [x, z], allow_unused=True)
    assert gz is None
    assert_close(gx, np.full(3, 2.0), 0, 0, what="gx")
    assert x.grad is None and z.grad is None


def test_autograd_grad_with_grad_outputs():
    x = gm.tensor(R(2, 3), requires_grad=True)
    w = R(2, 3)
    (g,) = gm.autograd.grad(x * x, [x], grad_outputs=gm.tensor(w))
    assert_close(g, 2 * to_numpy(x) * w, 1e-14, 1e-14, what="grad_outputs")


def test_autograd_grad_input_without_grad_raises():
    x = gm.tensor(R(3), requires_grad=True)
    c = gm.tensor(R(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        gm.autograd.grad((x * c).sum(), [c])


def test_hook_on_leaf_sees_and_replaces_gradient():
    x = gm.tensor(R(3), requires_grad=True)
    seen = []

    def hook(g):
        seen.append(to_numpy(g))
        return g * 10.0
    h = x.register_hook(hook)
    (x * 2.0).sum().backward()
    assert len(seen) == 1
    assert_close(seen[0], np.full(3, 2.0), 0, 0, what="hook saw")
    assert_close(x.grad, np.full(3, 20.0), 0, 0, what="hook replaced")
    h.remove()
    x.grad = None
    (x * 2.0).sum().backward()
    assert len(seen) == 1
    assert_close(x.grad, np.full(3, 2.0), 0, 0, what="after remove")
    h.remove()  # a second remove is harmless


def test_hook_on_non_leaf_replaces_gradient_flowing_on():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    seen = []
    h.register_hook(lambda g: seen.append(to_numpy(g)))  # returns None: gradient unchanged
    h.register_hook(lambda g: g * 0.5)
    (h * 3.0).sum().backward()
    assert_close(seen[0], np.full(3, 3.0), 0, 0, what="non-leaf hook saw")
    assert_close(x.grad, np.full(3, 3.0), 0, 0, what="x.grad after halving")  # 3 * 0.5 * 2
    assert h.grad is None  # a non-leaf keeps no .grad unless retain_grad()


def test_hook_removed_on_non_leaf():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    handle = h.register_hook(lambda g: g * 100.0)
    handle.remove()
    h.sum().backward()
    assert_close(x.grad, np.full(3, 2.0), 0, 0, what="removed")


def test_register_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        gm.tensor(R(3)).register_hook(lambda g: g)


def test_retain_grad_on_non_leaf():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    out = (h * h).sum()
    out.backward(retain_graph=True)
    assert_close(h.grad, 2 * to_numpy(h), 1e-14, 0, what="h.grad")
    out.backward()
    assert_close(h.grad, 4 * to_numpy(h), 1e-14, 0, what="h.grad accumulates")
    x.retain_grad()  # no-op on a leaf
    assert_close(x.grad, 16 * to_numpy(x), 1e-14, 1e-14, what="x.grad")


def test_leaf_used_twice_gets_summed_gradient_and_one_hook_call():
    x = gm.tensor(R(3), requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(to_numpy(g)))
    (x * 2.0 + x * 3.0 + x.exp()).sum().backward()
    assert len(calls) == 1
    expect = 5.0 + np.exp(to_numpy(x))
    assert_close(calls[0], expect, 1e-14, 1e-14, what="hook got the sum")
    assert_close(x.grad, expect, 1e-14, 1e-14, what="x.grad")


def test_backward_on_tensor_without_grad_explains():
    x = gm.tensor(R(3), requires_grad=True)
    with gm.no_grad():
        loss = (x * 2.0).sum()
    with pytest.raises(RuntimeError) as ei:
        loss.backward()
    msg = str(ei.value)
    assert "no_grad" in msg and "detach" in msg, msg
    rewrapped = gm.tensor((x * 2.0).sum().detach())
    with pytest.raises(RuntimeError, match="no_grad"):
        rewrapped.backward()
    with pytest.raises(RuntimeError, match="no_grad"):
        gm.autograd.backward([loss])


def test_backward_on_non_scalar_without_gradient_raises():
    x = gm.tensor(R(2, 3), requires_grad=True)
    with pytest.raises(RuntimeError, match="single-element"):
        (x * 2.0).backward()
    (x[0, 0] * 2.0).backward()  # one element, any ndim: fine
    (x.sum(dim=(0, 1), keepdim=True)).backward()
    assert_close(x.grad, np.array([[3, 1, 1], [1, 1, 1]], float), 0, 0, what="single-element outputs")


def test_backward_gradient_as_number_and_multiple_roots():
    x = gm.tensor(R(3), requires_grad=True)
    (x * 2.0).sum().backward(3.0)
    assert_close(x.grad, np.full(3, 6.0), 0, 0, what="backward(3.0)")
    x.grad = None
    a, b = x * 2.0, x * x
    gm.autograd.backward([a, b], [gm.ones(3, dtype=gm.float64), gm.full((3,), 0.5, dtype=gm.float64)])
    assert_close(x.grad, 2.0 + to_numpy(x), 1e-15, 1e-15, what="two roots")
    (g,) = gm.autograd.grad((x * 2.0).sum(), [x], grad_outputs=0.5)
    assert_close(g, np.full(3, 1.0), 0, 0, what="grad_outputs number")


def test_backward_gradient_count_must_match():
    x = gm.tensor(R(3), requires_grad=True)
    with pytest.raises(ValueError, match="2 outputs but 1 gradients"):
        gm.autograd.backward([x * 2.0, x * 3.0], gm.ones(3, dtype=gm.float64))
    with pytest.raises(ValueError, match="1 outputs but 2 gradients"):
        gm.autograd.backward([x * 2.0], [gm.ones(3, dtype=gm.float64)] * 2)


def test_mixed_dtype_ops_give_grads_in_input_dtypes():
    a = gm.tensor(R(2, 3).astype(np.float32), requires_grad=True)
    b = gm.tensor(R(3), requires_grad=True)
    y = a * b
    assert y.dtype == gm.float64
    y.sum().backward()
    assert a.grad.dtype == gm.float32 and b.grad.dtype == gm.float64
    assert_close(a.grad, np.broadcast_to(to_numpy(b), (2, 3)).astype(np.float32), 0, 0, what="a.grad")
    assert_close(b.grad, to_numpy(a).astype(np.float64).sum(0), 1e-6, 1e-6, what="b.grad")
    c = gm.tensor(R(4).astype(np.float32), requires_grad=True)
    s = c.sum(dtype=gm.float64)
    assert s.dtype == gm.float64
    s.backward()
    assert c.grad.dtype == gm.float32
    assert_close(c.grad, np.ones(4, np.float32), 0, 0, what="sum(dtype=) grad")


def test_leaf_hook_persists_across_graphs():
    x = gm.tensor(R(3), requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(1))
    (x * 2.0).sum().backward()
    (x * 3.0).sum().backward()
    assert len(calls) == 2
    assert_close(x.grad, np.full(3, 5.0), 0, 0, what="x.grad")


def test_backward_on_leaf_itself():
    x = gm.tensor(R(), requires_grad=True)
    x.backward()
    assert_close(x.grad, np.array(1.0), 0, 0, what="leaf backward")


# ---- grad modes -------------------------------------------------------------------------------------------------
def test_no_grad_context_records_nothing_and_restores():
    x = gm.tensor(R(3), requires_grad=True)
    assert gm.is_grad_enabled()
    with gm.no_grad():
        assert not gm.is_grad_enabled()
        y = x * 2.0
        with gm.enable_grad():
            assert gm.is_grad_enabled()
            z = x * 2.0
        assert not gm.is_grad_enabled()
    assert gm.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None


@pytest.mark.parametrize("make", [lambda: gm.no_grad(), lambda: gm.inference_mode(),
                                  lambda: gm.set_grad_enabled(False), lambda: gm.autograd.no_grad()],
                         ids=["no_grad", "inference_mode", "set_grad_enabled", "autograd.no_grad"])
def test_disabling_context_restores_on_exception(make):
    assert gm.is_grad_enabled()
    with pytest.raises(KeyError):
        with make():
            assert not gm.is_grad_enabled()
            raise KeyError("boom")
    assert gm.is_grad_enabled()


def test_enable_grad_context_restores_on_exception():
    with gm.no_grad():
        with pytest.raises(KeyError):
            with gm.enable_grad():
                assert gm.is_grad_enabled()
                raise KeyError("boom")
        assert not gm.is_grad_enabled()
    assert gm.is_grad_enabled()


@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_function_and_context(mode):
    try:
        gm.set_grad_enabled(mode)
        assert gm.is_grad_enabled() is mode
    finally:
        gm.set_grad_enabled(True)
    with gm.no_grad():
        with gm.set_grad_enabled(True):
            assert gm.is_grad_enabled()
        assert not gm.is_grad_enabled()
    assert gm.is_grad_enabled()


def test_inference_mode_false_keeps_grad():
    with gm.no_grad():
        with gm.inference_mode(False):
            assert gm.is_grad_enabled()
        assert not gm.is_grad_enabled()


_DECORATORS = {  # name: (make the decorator, mode expected inside the decorated function)
    "no_grad": (lambda: gm.no_grad(), False), "enable_grad": (lambda: gm.enable_grad(), True),
    "inference_mode": (lambda: gm.inference_mode(), False),
    "inference_mode_T": (lambda: gm.inference_mode(True), False),
    "inference_mode_F": (lambda: gm.inference_mode(False), True),
    "set_grad_enabled_F": (lambda: gm.set_grad_enabled(False), False),
    "set_grad_enabled_T": (lambda: gm.set_grad_enabled(True), True)}


@pytest.mark.parametrize("outer", [True, False], ids=["outer_grad", "outer_no_grad"])
@pytest.mark.parametrize("name", list(_DECORATORS))
def test_decorators_set_mode_and_restore_even_on_exception(name, outer):
    make, inside = _DECORATORS[name]
    with gm.set_grad_enabled(outer):
        # (set_grad_enabled(...) acts when made, as in PyTorch; applying it as a decorator undoes that.)
        @make()
        def f(fail):
            """doc"""
            seen = gm.is_grad_enabled()
            if fail:
                raise ValueError("boom")
            return seen

        assert gm.is_grad_enabled() is outer, "decorating changed the grad mode"
        assert f.__name__ == "f" and f.__doc__ == "doc"
        assert f(False) is inside
        assert gm.is_grad_enabled() is outer
        with pytest.raises(ValueError):
            f(True)
        assert gm.is_grad_enabled() is outer
    assert gm.is_grad_enabled()


def test_no_grad_decorator_output_has_no_graph():
    x = gm.tensor(R(3), requires_grad=True)

    @gm.no_grad()
    def double(t):
        return t * 2.0
    y = double(x)
    assert not y.requires_grad and y.grad_fn is None


def test_decorated_function_reentrant():
    @gm.no_grad()
    def rec(n):
        assert not gm.is_grad_enabled()
        return 0 if n == 0 else 1 + rec(n - 1)
    assert rec(3) == 3
    assert gm.is_grad_enabled()


# ---- detach, requires_grad --------------------------------------------------------------------------------------
def test_detach_shares_storage_and_has_no_grad():
    x = gm.tensor(R(3), requires_grad=True)
    y = x * 2.0
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert d._storage_id == y._storage_id and d._data_ptr == y._data_ptr
    d += 1.0  # not part of any graph: allowed, and visible through y
    assert_close(to_numpy(y), to_numpy(x) * 2.0 + 1.0, 0, 0, what="shared storage")
    xd = x.detach()
    assert not xd.requires_grad and xd._data_ptr == x._data_ptr


def test_requires_grad_on_int_tensor_raises():
    t = gm.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad = True
    with pytest.raises(RuntimeError, match="floating point"):
        gm.tensor([1, 2, 3], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        gm.zeros(3, dtype=gm.int64).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        gm.zeros(3, dtype=gm.bool).requires_grad_()


def test_integer_and_bool_results_do_not_require_grad():
    x = gm.tensor(R(3, 4), requires_grad=True)
    assert not (x > 0).requires_grad
    assert not x.argmax().requires_grad
    assert not x.max(dim=1)[1].requires_grad


# ---- in-place and the version counter -----------------------------------------------------------------------------
def test_inplace_modification_of_saved_tensor_raises():
    x = gm.tensor(R(3), requires_grad=True)
    a = x * 1.0
    b = a * x  # Mul saves a and x
    a += 1.0
    with pytest.raises(RuntimeError, match="in-place"):
        b.sum().backward()


def test_inplace_on_saved_constant_raises():
    x = gm.tensor(R(3), requires_grad=True)
    c = gm.tensor(R(3))
    y = x * c
    c += 1.0  # c requires no grad, so this is allowed; but Mul saved it
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        y.sum().backward()


def test_inplace_on_saved_output_raises():
    x = gm.tensor(R(3), requires_grad=True)
    y = x.exp()  # Exp saves its output
    y += 1.0
    with pytest.raises(RuntimeError, match="in-place"):
        y.sum().backward()


def test_inplace_on_view_of_saved_tensor_raises():
    x = gm.tensor(R(2, 3), requires_grad=True)
    c = gm.tensor(R(2, 3))
    y = x * c
    with gm.no_grad():
        c[0] = 5.0  # writes through a view of c's storage
    with pytest.raises(RuntimeError, match="in-place"):
        y.sum().backward()


def test_inplace_add_on_non_leaf_gives_correct_gradients():
    def f(x, y):
        h = x * 2.0
        h += y
        h -= x * y
        return h * h
    gradcheck(f, [gm.tensor(R(3, 4), requires_grad=True), gm.tensor(R(4), requires_grad=True)], what="iadd")
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    h2 = h
    h += 1.0
    assert h is h2 and h.grad_fn is not None
    h.sum().backward()
    assert_close(x.grad, np.full(3, 2.0), 0, 0, what="h += 1")


def test_inplace_add_grad_tensor_into_plain_tensor():
    w = gm.tensor(R(3), requires_grad=True)
    a = gm.zeros(3, dtype=gm.float64)
    a += w
    assert a.requires_grad and a.grad_fn is not None
    (a * 2.0).sum().backward()
    assert_close(w.grad, np.full(3, 2.0), 0, 0, what="w.grad")
    assert a.grad is None  # a is not a leaf: PyTorch leaves its .grad None


def test_inplace_on_view_of_non_leaf_is_refused_or_correct():
    x = gm.tensor(np.ones((2, 3)), requires_grad=True)
    y = gm.tensor(np.ones(3), requires_grad=True)
    h = x * 1.0
    v = h[0]
    try:
        v += y
    except RuntimeError:
        return  # refusing is acceptable
    h.sum().backward()
    assert y.grad is not None, "y's gradient through the view was silently dropped"
    assert_close(y.grad, np.ones(3), 0, 0, what="y.grad")


def test_inplace_on_leaf_requiring_grad():
    x = gm.tensor(R(3), requires_grad=True)
    v = x._version
    with pytest.raises(RuntimeError, match="no_grad"):
        x += 1.0
    with pytest.raises(RuntimeError, match="no_grad"):
        x.mul_(2.0)
    with pytest.raises(RuntimeError):
        x.fill_(0.0)
    with pytest.raises(RuntimeError):
        x[0] = 1.0
    before = to_numpy(x)
    with gm.no_grad():
        x += 1.0
        x.mul_(2.0)
        x[0] = 7.0
    assert x._version > v
    expect = (before + 1.0) * 2.0
    expect[0] = 7.0
    assert_close(x, expect, 0, 0, what="in-place under no_grad")
    assert x.requires_grad and x.is_leaf
    (x * 3.0).sum().backward()
    assert_close(x.grad, np.full(3, 3.0), 0, 0, what="grad after update")


def test_version_counter_bumps_on_inplace():
    t = gm.tensor(R(3))
    v0 = t._version
    t += 1.0
    t.mul_(2.0)
    t.fill_(0.0)
    assert t._version >= v0 + 3


# ---- saved-tensor hooks ------------------------------------------------------------------------------------------
def test_saved_tensor_hooks_see_every_saved_tensor():
    x = gm.tensor(R(3, 4), requires_grad=True)
    w = gm.tensor(R(4, 2), requires_grad=True)
    packed, unpacked = [], []

    def pack(t):
        packed.append((tuple(t.shape), to_numpy(t)))
        return len(packed) - 1, t

    def unpack(obj):
        unpacked.append(obj[0])
        return obj[1]
    with gm.autograd.graph.saved_tensors_hooks(pack, unpack):
        h = x.exp()          # saves its output (3, 4)
        y = h @ w            # saves h (3, 4) and w (4, 2)
        z = (y * y).sum()    # Mul saves y twice (2 x (3, 2))
    shapes = sorted(s for s, _ in packed)
    assert shapes == sorted([(3, 4), (3, 4), (4, 2), (3, 2), (3, 2)]), shapes
    assert unpacked == []
    assert_close(packed[0][1], np.exp(to_numpy(x)), 1e-15, 1e-15, what="pack saw exp's output")
    z.backward()
    assert sorted(unpacked) == list(range(len(packed)))
    g = 2 * to_numpy(y) @ to_numpy(w).T * np.exp(to_numpy(x))
    assert_close(x.grad, g, 1e-12, 1e-12, what="grad through hooks")
    # Outside the context nothing is packed.
    n = len(packed)
    (x.exp() * 2.0).sum().backward()
    assert len(packed) == n


def test_saved_tensor_hooks_unpack_result_is_used():
    """A pack that keeps a NumPy copy (host offload) and an unpack that rebuilds the tensor."""
    x = gm.tensor(P(5), requires_grad=True)
    with gm.autograd.graph.saved_tensors_hooks(lambda t: to_numpy(t), lambda a: gm.tensor(a * 2.0)):
        y = x.log()  # saves x; backward uses 1 / x, so unpack's doubling halves the gradient
    y.sum().backward()
    assert_close(x.grad, 0.5 / to_numpy(x), 1e-15, 1e-15, what="unpack used")


def test_saved_tensor_hooks_nest_and_restore_on_exception():
    calls = []
    outer = gm.autograd.graph.saved_tensors_hooks(lambda t: calls.append("outer") or t, lambda t: t)
    inner = gm.autograd.graph.saved_tensors_hooks(lambda t: calls.append("inner") or t, lambda t: t)
    x = gm.tensor(R(3), requires_grad=True)
    with outer:
        with pytest.raises(KeyError):
            with inner:
                x.exp()
                raise KeyError("boom")
        x.exp()
    x.exp()
    assert calls == ["inner", "outer"]


# ---- memory: saved tensors are freed after backward ----------------------------------------------------------------
def _block(nbytes):
    return -(-nbytes // 512) * 512


def _alloc():
    return gm.memory.memory_allocated("cpu")


@pytest.fixture
def no_gc():
    """Freeing must not depend on the cycle collector: a reference cycle would show up as leaked bytes."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_saved_tensors_freed_after_backward(no_gc):
    base = _alloc()
    x = gm.tensor(R(64, 32), requires_grad=True)   # 16384 B
    w = gm.tensor(R(32, 16), requires_grad=True)   # 4096 B
    leaves = _block(64 * 32 * 8) + _block(32 * 16 * 8)
    assert _alloc() - base == leaves
    h = (x @ w).exp()          # (64, 16): 8192 B, Matmul saves x and w; Exp saves h
    y = h * h                  # Mul saves h twice
    loss = y.mean()
    act = _block(64 * 16 * 8)
    # Exactly h, y and the loss: the matmul result is not saved by anyone (Exp keeps its output), and saving
    # a leaf or h costs nothing (an alias of its storage).
    assert _alloc() - base == leaves + 2 * act + _block(8)
    loss.backward()
    grads = leaves  # x.grad and w.grad have the leaves' sizes
    assert _alloc() - base == leaves + grads + 2 * act + _block(8)  # backward's temporaries are all gone
    del h, y
    # What remains: the leaves, their grads and the 0-d loss (whose graph holds no saved tensor any more).
    assert _alloc() - base == leaves + grads + _block(8)
    del loss
    assert _alloc() - base == leaves + grads
    del x, w
    assert _alloc() == base


def test_saved_tensors_kept_with_retain_graph_until_graph_dies(no_gc):
    base = _alloc()
    x = gm.tensor(R(64, 32), requires_grad=True)
    h = x.exp()                # saved by Exp: must stay while the graph is retained
    loss = (h * 2.0).sum()
    del h
    loss.backward(retain_graph=True)
    kept = _alloc() - base
    assert kept == 2 * _block(64 * 32 * 8) + _block(8) + _block(64 * 32 * 8), kept  # x, x.grad, loss, exp out
    loss.backward()            # frees now
    assert _alloc() - base == 2 * _block(64 * 32 * 8) + _block(8)
    del loss, x
    assert _alloc() == base


def test_graph_without_backward_frees_when_dropped(no_gc):
    base = _alloc()
    x = gm.tensor(R(16, 16), requires_grad=True)
    loss = (x.exp() * x).sum()
    # x, exp's output (saved by Exp and Mul) and the loss; the product x.exp() * x is freed (Sum saves nothing)
    assert _alloc() - base == 2 * _block(16 * 16 * 8) + _block(8)
    del loss
    assert _alloc() - base == _block(16 * 16 * 8)
    del x
    assert _alloc() == base


def test_autograd_grad_frees_saved_tensors(no_gc):
    base = _alloc()
    x = gm.tensor(R(32, 32), requires_grad=True)
    loss = (x.exp() * x).sum()
    (g,) = gm.autograd.grad(loss, [x])
    del loss
    assert _alloc() - base == 2 * _block(32 * 32 * 8)
    del g, x
    assert _alloc() == base


def test_hooks_and_indexing_graph_free_without_gc(no_gc):
    base = _alloc()
    x = gm.tensor(R(16, 8), requires_grad=True)
    x.register_hook(lambda g: g * 1.0)
    loss = (x[[0, 3, 3]] * x[1:4]).sum()
    loss.backward()
    del loss
    assert _alloc() - base == 2 * _block(16 * 8 * 8)
    del x
    assert _alloc() == base


def test_retain_grad_frees_without_gc(no_gc):
    base = _alloc()
    x = gm.tensor(R(16, 8), requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    h.sum().backward()
    del h
    assert _alloc() - base == 2 * _block(16 * 8 * 8)
