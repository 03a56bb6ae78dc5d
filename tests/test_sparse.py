"""torch.sparse's COO tensors (gpumemnet/sparse.py) against PyTorch in float64: Kipf's pygcn trained with
Adam on a normalised sparse adjacency, and the COO operations graph code calls (coalesce, indices, values,
to_dense, transposes, products with dense matrices and vectors, sums)."""
import math

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

R = np.random.RandomState(7)
N, FEAT, CLASSES = 20, 6, 3
ADJ = (R.rand(N, N) < 0.2).astype(np.float64)
ADJ = np.maximum(ADJ, ADJ.T) + np.eye(N)
ADJ = ADJ / ADJ.sum(1, keepdims=True)


def _adjacency(lib):
    rows, cols = np.nonzero(ADJ)
    indices = lib.from_numpy(np.vstack((rows, cols)).astype(np.int64))
    values = lib.from_numpy(ADJ[rows, cols])
    return lib.sparse_coo_tensor(indices, values, lib.Size(ADJ.shape))


def _gcn(lib):
    nn = lib.nn

    class GraphConvolution(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.weight = nn.Parameter(lib.empty(fin, fout, dtype=lib.float64))
            self.bias = nn.Parameter(lib.empty(fout, dtype=lib.float64))

        def forward(self, x, adj):
            return lib.spmm(adj, lib.mm(x, self.weight)) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.gc1, self.gc2 = GraphConvolution(FEAT, 8), GraphConvolution(8, CLASSES)

        def forward(self, x, adj):
            x = nn.functional.dropout(nn.functional.relu(self.gc1(x, adj)), 0.0, self.training)
            return nn.functional.log_softmax(self.gc2(x, adj), dim=1)
    return GCN()


def test_pygcn_trains_as_in_pytorch():
    x, y = R.randn(N, FEAT), R.randint(0, CLASSES, N)
    weights = [R.randn(FEAT, 8) / math.sqrt(8), R.randn(8) * 0.1, R.randn(8, CLASSES) / 2, R.randn(CLASSES) * 0.1]
    losses = {}
    for lib in (gm, torch):
        model, adj = _gcn(lib), _adjacency(lib)
        with lib.no_grad():
            for p, w in zip(model.parameters(), weights):
                p.copy_(lib.tensor(w))
        opt = lib.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
        out = []
        for _ in range(5):
            opt.zero_grad()
            loss = lib.nn.functional.nll_loss(model(lib.tensor(x), adj)[:12], lib.tensor(y)[:12])
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[lib] = out
    np.testing.assert_allclose(losses[gm], losses[torch], rtol=1e-11)


def test_coo_operations_match_pytorch():
    idx, vals = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]], [3.0, 4.0, 5.0, 1.0, -2.0]
    dense, vec = R.randn(3, 4), R.randn(3)
    got = {}
    for lib in (gm, torch):
        a = lib.sparse_coo_tensor(idx, vals, (3, 3), dtype=lib.float64)
        c = a.coalesce()
        got[lib] = [c.indices().numpy(), c.values().numpy(), a.to_dense().numpy(), a.t().to_dense().numpy(),
                    lib.sparse.mm(a, lib.tensor(dense)).numpy(), (a @ lib.tensor(vec)).numpy(),
                    (lib.tensor(dense).T @ a).numpy(), lib.sparse.sum(a).item(), a._nnz(), tuple(a.shape),
                    c.is_coalesced(), (a * 2.0).to_dense().numpy(), lib.mm(a, lib.tensor(dense)).numpy()]
    for g, t in zip(got[gm], got[torch]):
        np.testing.assert_allclose(g, t, rtol=1e-12)


def test_gradients_reach_the_values_and_the_dense_operand():
    idx, vals, dense = [[0, 1, 2, 2], [1, 0, 2, 0]], R.randn(4), R.randn(3, 2)
    grads = {}
    for lib in (gm, torch):
        v = lib.tensor(vals, requires_grad=True)
        d = lib.tensor(dense, requires_grad=True)
        out = lib.sparse.mm(lib.sparse_coo_tensor(lib.tensor(idx), v, (3, 3)), d)
        (out ** 2).sum().backward()
        grads[lib] = (v.grad.numpy(), d.grad.numpy())
    for g, t in zip(grads[gm], grads[torch]):
        np.testing.assert_allclose(g, t, rtol=1e-12)


def test_sparse_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        gm.sparse_coo_tensor([[0, 3]], [1.0, 2.0], (3,))
    a = gm.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    with pytest.raises(RuntimeError, match="uncoalesced"):
        a.indices()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        gm.spmm(a, gm.ones(3, 2))
    with pytest.raises(TypeError, match="sparse tensors in gpumemnet have no 'relu'.*to_dense"):
        a.relu()
