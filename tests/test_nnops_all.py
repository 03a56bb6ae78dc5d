"""nn ops together: strided inputs (read through their strides, or copied once into a workspace temporary), sizes
that take the OpenMP paths (results independent of the thread count), no allocation or reference left behind by
any op and its backward, and PyTorch where it is installed."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import _functional_nn as F
from gradcheck import assert_close, gradcheck, to_numpy
from nnops_util import R, T, allocated, bn_ref, class_loss_ref, rng, softmax_ref


def test_noncontiguous_inputs():
    x = R(6, 4, 3)
    xt = T(x).transpose(0, 1)  # (4, 6, 3), strided
    rm, rv = T(np.zeros(6)), T(np.ones(6))
    assert_close(F.batch_norm(xt, rm, rv, training=True), bn_ref(x.transpose(1, 0, 2), None, None, None, None, True,
                                                                 0.1, 1e-5)[0], 1e-12, 1e-10)
    # running statistics given as strided views are updated through them
    buf = T(np.zeros((6, 2)))
    F.batch_norm(xt, buf[:, 0], buf[:, 1], training=True, momentum=1.0)
    assert_close(buf[:, 0], x.transpose(1, 0, 2).mean(axis=(0, 2)), 1e-12, 1e-10)
    t = rng.integers(0, 6, 4)
    logits = T(R(6, 4)).transpose(0, 1)
    assert_close(F.cross_entropy(logits, T(t), reduction="none"),
                 class_loss_ref(to_numpy(logits), t, None, -100, "none", 0.0, True), 1e-12, 1e-10)
    gradcheck(lambda a: F.cross_entropy(a.transpose(0, 1), T(t)), [T(R(6, 4), requires_grad=True)],
              what="cross_entropy strided")
    gradcheck(lambda a: F.batch_norm(a.transpose(0, 1), None, None, training=True), [T(R(3, 4, 2), requires_grad=True)],
              what="batch_norm strided")


def test_noncontiguous_inputs_use_workspace():
    """A transposed input is copied once into a workspace-tagged temporary, freed before the op returns."""
    x = gm.randn(64, 32).transpose(0, 1)
    _C.reset_peak_memory_stats("cpu")
    F.softmax(x, 1)
    ws = _C.memory_stats("cpu")["by_category"]["workspace"]
    assert ws["current"] == 0 and ws["peak"] == 64 * 32 * 4


# ---- sizes that take the OpenMP paths; reference counts and leaks ---------------------------------------------------
def test_large_inputs_thread_invariant():
    """Above the parallel grain (32768 elements) every kernel splits work across threads: the results match
    NumPy and do not depend on the thread count (sums are per channel / per position, never split)."""
    x = R(4, 8, 32, 40)
    t = rng.integers(0, 8, (4, 32, 40))
    prev = gm.get_num_threads()
    results = []
    try:
        for n in (1, 2):
            gm.set_num_threads(n)
            rm, rv = T(np.zeros(8)), T(np.ones(8))
            outs = [F.gelu(T(x)), F.softmax(T(x), 1), F.batch_norm(T(x), rm, rv, training=True), rv,
                    F.cross_entropy(T(x), T(t), reduction="none")]
            gm.manual_seed(3)
            outs += [F.dropout(T(x), 0.5), F.dropout2d(T(x), 0.5)]
            results.append([to_numpy(o) for o in outs])
    finally:
        gm.set_num_threads(prev)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    gelu, sm, bn, rv, ce = results[0][:5]
    assert_close(sm, softmax_ref(x, 1), 1e-14, 1e-12)
    assert_close(bn, bn_ref(x, None, None, None, None, True, 0.1, 1e-5)[0], 1e-10, 1e-10)
    assert_close(ce, class_loss_ref(x, t, None, -100, "none", 0.0, True), 1e-12, 1e-10)


def test_no_leaks():
    """Every op and its backward leave no allocation and no reference behind."""
    import sys
    x = T(R(4, 3, 2, 2), requires_grad=True)
    w, b = T(R(3), requires_grad=True), T(R(3), requires_grad=True)
    t = T(rng.integers(0, 3, (4, 2, 2)))
    y = T(R(4, 3, 2, 2))

    def step():
        loss = (F.relu(x * 1.0).sum() + F.gelu(x).sum() + F.dropout(x, 0.3).sum() + F.dropout2d(x, 0.3).sum()
                + F.batch_norm(x, None, None, w, b, training=True).sum() + F.log_softmax(x, 1).sum()
                + F.cross_entropy(x, t, weight=T(np.ones(3)), label_smoothing=0.1) + F.nll_loss(x, t)
                + F.mse_loss(x, y) + F.l1_loss(x, y)
                + F.binary_cross_entropy_with_logits(x, y, pos_weight=T(np.ones(2))))
        F.relu_(x * 1.0)
        loss.backward()
    step()
    x.grad = w.grad = b.grad = None
    before, refs = allocated(), (sys.getrefcount(x), sys.getrefcount(t), sys.getrefcount(y))
    for _ in range(3):
        step()
        x.grad = w.grad = b.grad = None
    assert allocated() == before
    assert (sys.getrefcount(x), sys.getrefcount(t), sys.getrefcount(y)) == refs


# ---- PyTorch, where installed -------------------------------------------------------------------------------------
def test_against_torch():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    from gradcheck import check_against_torch
    check_against_torch(lambda a: F.gelu(a, approximate="tanh"), lambda a: tF.gelu(a, approximate="tanh"), [R(3, 4)])
    check_against_torch(lambda a: F.log_softmax(a, 1), lambda a: tF.log_softmax(a, 1), [R(3, 4, 2)])
    check_against_torch(lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True),
                        lambda a, w, b: tF.batch_norm(a, None, None, w, b, training=True), [R(4, 3, 2, 2), R(3), R(3)])
    t = rng.integers(0, 3, (4, 2, 2))
    t[0, 0, 0] = -100
    w = rng.uniform(0.5, 2, 3)
    for red, eps in itertools.product(("mean", "sum", "none"), (0.0, 0.3)):
        check_against_torch(
            lambda a: F.cross_entropy(a, gm.tensor(t), weight=gm.tensor(w), reduction=red, label_smoothing=eps),
            lambda a: tF.cross_entropy(a, torch.tensor(t), weight=torch.tensor(w), reduction=red, label_smoothing=eps),
            [R(4, 3, 2, 2)])
    check_against_torch(lambda a: F.nll_loss(a, gm.tensor(t), weight=gm.tensor(w)),
                        lambda a: tF.nll_loss(a, torch.tensor(t), weight=torch.tensor(w)), [R(4, 3, 2, 2)])
    check_against_torch(lambda a: F.cross_entropy(a, gm.tensor(np.array(2))),
                        lambda a: tF.cross_entropy(a, torch.tensor(2)), [R(3)])
    x = R(5, 3, 4)
    rm, rv = gm.zeros(3, dtype=gm.float64), gm.ones(3, dtype=gm.float64)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    F.batch_norm(gm.tensor(x), rm, rv, training=True, momentum=0.2)
    tF.batch_norm(torch.tensor(x), trm, trv, training=True, momentum=0.2)
    assert_close(rm, trm.numpy(), 1e-14, 1e-12)
    assert_close(rv, trv.numpy(), 1e-14, 1e-12)
    pw = rng.uniform(0.5, 2, 4)
    check_against_torch(lambda a: F.binary_cross_entropy_with_logits(a, gm.tensor(np.full((3, 4), 0.3)),
                                                                     pos_weight=gm.tensor(pw)),
                        lambda a: tF.binary_cross_entropy_with_logits(a, torch.tensor(np.full((3, 4), 0.3)),
                                                                      pos_weight=torch.tensor(pw)), [R(3, 4)])
