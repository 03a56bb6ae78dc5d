"""The backward walk's order is PyTorch's (csrc/autograd_engine.c): a node runs once every edge into it has
delivered its gradient, the ready node made last in the forward first, AccumulateGrad before any other; leaf
post-accumulate hooks have their own slot and run right after .grad is written; gradients meeting at one input are
summed in place when nothing else reads them."""
import numpy as np
import pytest

import gpumemnet as gm


def _events(lib, build):
    """Run build(lib, log) -> loss, backward, and return the log of hook events in the order they fired."""
    log = []
    build(lib, log)[0].backward()
    return log


def _dag(lib, log):
    """A graph with fan-out, a skip connection and two leaves used at different depths."""
    x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = lib.tensor([1.5, 0.25, -0.5], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t: log.append("x"))
    w.register_post_accumulate_grad_hook(lambda t: log.append("w"))
    names = {}

    def tag(t, name):
        t.register_hook(lambda g: log.append(name))
        names[name] = t
        return t

    a = tag(x * w, "a")
    b = tag(a.exp(), "b")
    c = tag(a.sigmoid(), "c")
    d = tag(b * c, "d")
    e = tag(d + a, "e")          # skip: a feeds e directly and through b, c, d
    f = tag(e.tanh() * w, "f")   # w again, deep in the graph
    return (f.sum(),)


def test_node_and_leaf_order_match_torch():
    torch = pytest.importorskip("torch")
    want = _events(torch, _dag)
    got = _events(gm, _dag)
    assert got == want
    # not the old depth-first order's: w (used last in the forward) is complete only after a's node has run
    assert got.index("w") > got.index("a")


def _two_roots(lib, log):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t: log.append(("x", t.grad.tolist())))
    y = x * 3
    y.register_hook(lambda g: log.append("y"))
    z = y * y
    z.register_hook(lambda g: log.append("z"))
    return y, z


def test_a_root_below_another_root_waits_for_it():
    """backward([z, y]) with z made from y: y's node runs once, after z's has delivered (PyTorch's GraphRoot)."""
    torch = pytest.importorskip("torch")
    logs = []
    for lib in (torch, gm):
        log = []
        y, z = _two_roots(lib, log)
        lib.autograd.backward([z.sum(), y.sum()])
        logs.append(log)
    assert logs[1] == logs[0]
    assert logs[1] == ["z", "y", ("x", [21.0, 39.0])]


def _conv_net(lib, log):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(4)
            self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(4)

        def forward(self, x):
            return (self.bn2(self.conv2(self.bn1(self.conv1(x)).relu())) + x).relu()

    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), Block(), Block(), nn.Conv2d(4, 2, 1))
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda t, name=name: log.append(name))
    x = lib.tensor(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    return (model(x).square().sum(),)


def test_parameter_order_matches_torch_on_a_residual_net():
    """The order leaves' gradients are complete in (what DDP's buckets wait for): PyTorch's, tie-breaks included
    (a convolution's weight and bias are ready at once; libstdc++'s heap decides which goes first)."""
    torch = pytest.importorskip("torch")
    want = _events(torch, _conv_net)
    got = _events(gm, _conv_net)
    assert len(got) == 18
    assert got == want


def test_sequence_numbers():
    x = gm.tensor([1.0], requires_grad=True)
    a = x * 2
    b = a.exp()
    assert b.grad_fn._sequence_nr() > a.grad_fn._sequence_nr()
    acc = a.grad_fn.next_functions[0][0]
    assert acc._sequence_nr() == 2 ** 64 - 1  # AccumulateGrad: PyTorch's UINT64_MAX, runs first when ready


def test_post_accumulate_hooks_have_their_own_slot():
    w = gm.tensor([1.0, 2.0], requires_grad=True)
    pre, post = [], []
    w.register_hook(lambda g: pre.append(g.tolist()))
    h = w.register_post_accumulate_grad_hook(lambda t: post.append(t.grad.tolist()))
    assert w._hooks is not None and len(w._hooks) == 1  # the pre-hook only
    assert len(w._post_acc_hooks) == 1
    (w * 3).sum().backward()
    assert pre == [[3.0, 3.0]] and post == [[3.0, 3.0]]
    h.remove()
    (w * 3).sum().backward()
    assert post == [[3.0, 3.0]] and pre == [[3.0, 3.0], [3.0, 3.0]]


def test_post_accumulate_hook_sees_the_grad_freed_by_the_walk():
    """When the hook runs, the walk holds no reference to the incoming gradient: replacing .grad frees it."""
    w = gm.tensor(np.ones(4096, np.float32), requires_grad=True)
    seen = []

    def hook(t):
        before = gm.memory.memory_allocated()
        t.grad = None
        seen.append(before - gm.memory.memory_allocated())

    w.register_post_accumulate_grad_hook(hook)
    (w * 2).sum().backward()
    assert seen == [4096 * 4]


def test_a_hook_error_propagates():
    w = gm.tensor([1.0], requires_grad=True)

    def bad(t):
        raise ValueError("from the hook")

    w.register_post_accumulate_grad_hook(bad)
    with pytest.raises(ValueError, match="from the hook"):
        (w * 2).sum().backward()


def test_gradients_meeting_at_an_input_are_summed_in_place():
    """y feeds two products: their gradients meet at y's node. The second is added into the first (nothing else
    holds it) instead of into a third buffer: backward's peak holds two gradient-sized buffers beside y's own
    input, not three."""
    n = 1 << 16
    x = gm.tensor(np.linspace(-1, 1, n, dtype=np.float32), requires_grad=True)
    y = x.exp()
    loss = ((y * 2.0) + (y * 3.0)).sum()
    gm.memory.reset_peak_memory_stats()
    base = gm.memory.memory_allocated()
    loss.backward()
    peak = gm.memory.max_memory_allocated() - base
    np.testing.assert_allclose(x.grad.numpy(), 5 * np.exp(x.detach().numpy()), rtol=1e-6)
    # the sum's backward hands on an expanded one-element tensor; the products' backwards make 2*g and 3*g (n floats
    # each), the second added into the first; exp's backward makes x's gradient from it, which .grad takes. Out of
    # place, the sum would be a third buffer of n floats (the old walk's peak: 3n floats).
    assert peak <= 2 * n * 4 + 4096, peak


def test_in_place_sum_leaves_a_held_gradient_alone():
    """A gradient someone else holds (a hook kept it) is not written over by the sum."""
    x = gm.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    kept = []
    a = y * 2.0
    a.register_hook(lambda g: kept.append(g))
    b = y * 3.0
    (a + b).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]
    assert kept[0].tolist() == [1.0, 1.0]


def test_accumulate_grad_takes_a_free_gradient_without_a_copy():
    """PyTorch's AccumulateGrad steals the incoming gradient for a .grad that is None when nothing else holds it:
    no clone, so backward never holds the gradient twice; it is re-tagged 'gradient' and named after the leaf."""
    n = 1 << 16
    w = gm.tensor(np.ones(n, np.float32), requires_grad=True)
    w._name = "w"
    loss = (w * 3.0).sum()
    gm.memory.reset_peak_memory_stats()
    base = gm.memory.memory_allocated()
    loss.backward()
    peak = gm.memory.max_memory_allocated() - base
    assert w.grad.tolist()[:2] == [3.0, 3.0]
    assert w.grad._category == "gradient"
    assert w.grad._name == "w.grad"
    assert peak < 2 * n * 4, peak  # one gradient-sized buffer (a copy would make two)


def test_accumulate_grad_copies_a_gradient_someone_holds():
    """A hook kept the incoming gradient: .grad must not alias it (writing .grad would change the kept one)."""
    w = gm.tensor([1.0, 2.0], requires_grad=True)
    kept = []
    w.register_hook(lambda g: kept.append(g))
    (w * 3.0).sum().backward()
    assert w.grad._storage_id != kept[0]._storage_id
    w.grad.mul_(0)
    assert kept[0].tolist() == [3.0, 3.0]
