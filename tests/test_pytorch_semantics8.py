"""PyTorch semantics that scripts written for PyTorch rely on (hunt 9), each checked against PyTorch itself: the
same function run under both libraries and the results compared. Covers the DataLoader's batched fetch through
Dataset.__getitems__ (and Subset's), TensorDataset's size check, SparseAdam stepping exactly the looked-up rows of
Embedding(sparse=True), LBFGS's 0-dim tensor state, weight_norm's deprecation warning (once per process under the
default filter) and torch.segment_reduce (values, gradients, checks)."""
import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(run):
    """run(L) under PyTorch and under gpumemnet."""
    return run(torch), run(gm)


def _clean(values, digits=5):
    return [None if v != v else round(v, digits) for v in values]


# ---- data: __getitems__, Subset, TensorDataset --------------------------------------------------------------
def test_dataloader_fetches_batches_through_getitems_also_via_subset():
    def run(L):
        class DS(L.utils.data.Dataset):
            calls = []

            def __len__(self):
                return 8

            def __getitem__(self, i):
                DS.calls.append("item")
                return L.tensor(i)

            def __getitems__(self, idx):
                DS.calls.append(("items", list(idx)))
                return [L.tensor(i) for i in idx]

        class BatchOnly(L.utils.data.Dataset):
            def __len__(self):
                return 4

            def __getitems__(self, idx):
                return [L.tensor(i) for i in idx]

        class Plain(L.utils.data.Dataset):
            def __len__(self):
                return 5

            def __getitem__(self, i):
                return L.tensor(i * 10)

        out = []
        for d in (DS(), L.utils.data.Subset(DS(), [7, 6, 5, 4, 3, 2]), L.utils.data.Subset(Plain(), [4, 0, 2])):
            DS.calls.clear()
            out.append(([b.tolist() for b in L.utils.data.DataLoader(d, batch_size=3)], list(DS.calls),
                        hasattr(d, "__getitems__")))
        out.append([b.tolist() for b in L.utils.data.DataLoader(BatchOnly(), batch_size=2)])
        DS.calls.clear()  # no batching: one index at a time through __getitem__
        out.append(([b.tolist() for b in L.utils.data.DataLoader(DS(), batch_size=None)][:2], DS.calls[:2]))
        out.append(L.utils.data.Subset(Plain(), [3, 1]).__getitems__([1, 0]))
        return [repr(o) for o in out]
    ref, got = _both(run)
    assert got == ref


def test_subset_subclass_overriding_only_getitem_is_refused():
    def run(L):
        class Sub(L.utils.data.Subset):
            def __getitem__(self, i):
                return 0
        with pytest.raises(NotImplementedError) as info:
            Sub(list(range(3)), [0])
        return str(info.value).split(".")[0]
    ref, got = _both(run)
    assert got == ref


def test_tensordataset_size_mismatch_is_an_assertion_error():
    def run(L):
        with pytest.raises(AssertionError) as info:
            L.utils.data.TensorDataset(L.zeros(3), L.zeros(4))
        return str(info.value)[:29]
    ref, got = _both(run)
    assert got == ref == "Size mismatch between tensors"


# ---- SparseAdam ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("padding_idx", [None, 1])
def test_sparse_adam_steps_every_looked_up_row_even_with_a_zero_gradient(set_to_none, padding_idx):
    """A row looked up whose gradient is exactly zero (masked out of the loss) is in PyTorch's sparse gradient:
    its moments decay and it keeps moving. The padding row is not; zero_grad(set_to_none=False) empties it;
    backward twice without zero_grad lists both batches' rows."""
    def run(L):
        e = L.nn.Embedding(6, 2, sparse=True, padding_idx=padding_idx)
        with L.no_grad():
            e.weight.copy_(L.arange(12.0).view(6, 2))
        opt = L.optim.SparseAdam(e.parameters(), lr=0.1)
        out = []
        for idx, mask, zero in (([0, 1, 2], [1.0, 0.0, 1.0], True), ([1, 3], [0.0, 0.0], False),
                                ([4, 1], [1.0, 0.0], True), ([5, 5], [0.0, 0.0], True)):
            if zero:
                opt.zero_grad(set_to_none=set_to_none)
            (e(L.tensor(idx)) * L.tensor(mask)[:, None]).sum().backward()
            if idx == [4, 1]:
                (e(L.tensor([2])) * 0).sum().backward()  # a second backward into the same gradient
            opt.step()
            out.append(_clean(e.weight.detach().reshape(-1).tolist(), 6))
            out.append(_clean(opt.state[e.weight]["exp_avg"].to_dense().reshape(-1).tolist(), 6))
        opt.zero_grad(set_to_none=set_to_none)
        if not set_to_none:
            opt.step()  # an emptied gradient steps no row
            out.append(_clean(e.weight.detach().reshape(-1).tolist(), 6))
        copy.deepcopy(e)
        pickle.dumps(e.state_dict())
        return out
    ref, got = _both(run)
    assert got == ref


# ---- LBFGS --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_keeps_h_diag_ro_and_al_as_0dim_tensors(dtype, line_search_fn):
    def run(L):
        p = L.nn.Parameter(L.tensor([1.5, -0.5, 0.25], dtype=getattr(L, dtype)))
        opt = L.optim.LBFGS([p], max_iter=4, history_size=2, line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            loss = (p ** 4).sum() + p[0] * p[1] - p[2]
            loss.backward()
            return loss
        for _ in range(2):
            opt.step(closure)
        st = opt.state[p]
        kinds = {k: type(st[k]).__name__ if not isinstance(st[k], list) else
                 [type(v).__name__ for v in st[k]] for k in ("H_diag", "ro", "al") if k in st}
        tensors = [st["H_diag"]] + st["ro"] + [a for a in st.get("al", []) if a is not None]
        dtypes = [str(v.dtype).split(".")[-1] for v in tensors
                  if hasattr(v, "dtype")]
        values = [float(v) for v in [st["H_diag"]] + st["ro"]] + p.detach().tolist()
        return kinds, dtypes, values
    ref, got = _both(run)
    assert got[:2] == ref[:2]
    # ro = 1 / (y.s) near convergence: y.s is a difference of nearby float32 gradients, so its last bits (summation
    # order) show in ro's
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-4 if dtype == "float32" else 1e-12)


# ---- weight_norm's deprecation warning ----------------------------------------------------------------------
_WARN = '''
import warnings, sys
import {lib} as L
for _ in range(3):
    L.nn.utils.weight_norm(L.nn.Linear(2, 2))
L.nn.utils.weight_norm(L.nn.Linear(2, 2))
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    L.nn.utils.weight_norm(L.nn.Linear(2, 2))
    L.nn.utils.weight_norm(L.nn.Linear(2, 2))
print("always:", len(w))
'''


def test_weight_norm_warning_once_per_process_under_the_default_filter():
    def run(lib):
        r = subprocess.run([sys.executable, "-c", _WARN.format(lib=lib)], capture_output=True, text=True,
                           timeout=300)
        return r.stderr.count("FutureWarning: `torch.nn.utils.weight_norm` is deprecated"), r.stdout.strip()
    assert run("gpumemnet") == run("torch") == (1, "always: 2")


# ---- segment_reduce -----------------------------------------------------------------------------------------
_DATA = [3.0, 3.0, 1.0, float("nan"), 2.0, 0.0, 0.0, 5.0, 5.0, 5.0, -2.0, 4.0]


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod", "amax", "amin"])
@pytest.mark.parametrize("initial", [None, 3.0])
def test_segment_reduce_values_and_gradients(reduce, initial):
    """Empty segments, ties (a max / min gradient is shared only when positive, the initial value never takes a
    share), zeros and NaN in a product, lengths and offsets."""
    def run(L):
        out = []
        for kw in (dict(lengths=L.tensor([3, 2, 0, 2, 3, 2])), dict(offsets=L.tensor([0, 3, 5, 5, 7, 10, 12])),
                   dict(lengths=L.tensor([3, 2, 0, 2, 3, 2], dtype=L.int32))):
            x = L.tensor(_DATA, requires_grad=True)
            y = L.segment_reduce(x, reduce, initial=initial, **kw)
            g, = L.autograd.grad((y * L.tensor([-1.0, 2.0, 1.0, -3.0, 4.0, 0.5])).sum(), x)
            out.append((_clean(y.tolist()), _clean(g.tolist()), str(y.dtype).split(".")[-1]))
        return out
    ref, got = _both(run)
    assert got == ref


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_along_an_inner_axis_with_batched_lengths(reduce):
    def run(L):
        x = L.from_numpy(np.random.RandomState(0).randn(2, 3, 4)).requires_grad_()
        out = []
        for y in (L.segment_reduce(x, reduce, lengths=L.tensor([[1, 2, 0], [3, 0, 0]]), axis=1),
                  L.segment_reduce(x, reduce, lengths=L.tensor([[[1, 3], [2, 2], [0, 4]]] * 2), axis=-1,
                                   initial=-1.0),
                  L.segment_reduce(x, reduce, offsets=L.tensor([0, 1, 1, 2]))):
            g, = L.autograd.grad((y * y).sum(), x)
            out.append((tuple(y.shape), _clean(y.reshape(-1).tolist(), 9), _clean(g.reshape(-1).tolist(), 9)))
        return out
    ref, got = _both(run)
    assert got == ref


def test_segment_reduce_checks():
    def run(L):
        out = []
        for call in (lambda: L.segment_reduce(L.arange(3.0), "sum", lengths=L.tensor([1, 1])),
                     lambda: L.segment_reduce(L.arange(3.0), "sum"),
                     lambda: L.segment_reduce(L.arange(3.0), "sum", indices=L.tensor([0, 0, 1])),
                     lambda: L.segment_reduce(L.arange(3.0), "foo", lengths=L.tensor([3])),
                     lambda: L.segment_reduce(L.arange(3), "sum", lengths=L.tensor([3])),
                     lambda: L.segment_reduce(L.arange(3.0), "sum", lengths=L.tensor([4, -1])),
                     lambda: L.segment_reduce(L.arange(4.0), "sum", lengths=L.tensor([2.0, 2.0])),
                     lambda: L.segment_reduce(L.arange(4.0), "sum", lengths=L.tensor([2, 2]), axis=1),
                     lambda: L.segment_reduce(L.arange(4.0), "sum", lengths=L.tensor(4)),
                     lambda: L.segment_reduce(L.tensor(4.0), "sum", lengths=L.tensor([1])),
                     lambda: L.segment_reduce(L.arange(4.0), "sum", lengths=[2, 2]),
                     lambda: L.segment_reduce(L.arange(4.0), "sum", offsets=L.tensor([0, 3, 2, 4])),
                     lambda: L.segment_reduce(L.arange(8.0).view(2, 4), "sum", lengths=L.tensor([2, 2]), axis=0),
                     lambda: L.segment_reduce(L.arange(4.0).half(), "sum", lengths=L.tensor([2, 2])).float(),
                     lambda: L.segment_reduce(L.arange(4.0).bfloat16(), "mean", lengths=L.tensor([2, 2]),
                                              initial=1).float(),
                     lambda: L.segment_reduce(L.arange(0.0), "max", lengths=L.tensor([0, 0])),
                     lambda: L.segment_reduce(L.arange(4.0).double(), "mean", lengths=L.tensor([4, 0]))):
            try:
                out.append(_clean(call().tolist()))
            except Exception as e:  # noqa: BLE001  (the type and the start of the message are compared)
                out.append((type(e).__name__, str(e)[:55]))  # (PyTorch's TORCH_CHECK appends a request)
        return out
    ref, got = _both(run)
    assert got == ref
