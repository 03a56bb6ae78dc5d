"""gm.einsum against torch.einsum: values and gradients of the equations training code writes (attention,
bilinear pooling, batched products, traces, transposes, '...' broadcasting), on the CPU and on CUDA."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

CASES = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii->i", [(3, 3)]),
         ("ii", [(3, 3)]), ("ij->", [(3, 4)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
         ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]), ("bhdn,bhen->bhde", [(2, 3, 4, 5), (2, 3, 6, 5)]),
         ("b h i d, b h j d -> b h i j", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
         ("ijk->kji", [(2, 3, 4)]), ("bn,bn->b", [(4, 6), (4, 6)]), ("...i,...i->...", [(2, 3, 4), (2, 3, 4)]),
         ("ij,ij->ij", [(3, 4), (1, 4)]), ("iij->ij", [(3, 3, 2)]), ("ba,ca", [(2, 3), (4, 3)]),
         ("...ij->...ji", [(2, 2, 3, 4)]), ("bij->b", [(2, 3, 4)]), ("bchw,bdhw->bcd", [(2, 3, 4, 4), (2, 5, 4, 4)]),
         ("...ij->ij", [(2, 3, 4)])]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0].replace(" ", "") for c in CASES])
def test_einsum_matches_pytorch(equation, shapes, device):
    r = np.random.RandomState(len(equation))
    arrays = [r.randn(*s) for s in shapes]
    ours = [gm.tensor(a, dtype=gm.float64, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    ya, yb = gm.einsum(equation, *ours), torch.einsum(equation, *theirs)
    assert tuple(ya.shape) == tuple(yb.shape)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = r.randn(*yb.shape)
    (ya * gm.tensor(w, device=device)).sum().backward()
    (yb * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_operands_as_a_list_and_float32(device):
    a, b = gm.randn(3, 4, device=device), gm.randn(4, 2, device=device)
    out = gm.einsum("ij,jk->ik", [a, b])
    assert out.dtype == gm.float32
    np.testing.assert_allclose(to_np(out), to_np(a @ b), rtol=1e-6, atol=1e-6)


def test_meta_prices_the_shape():
    out = gm.einsum("bhdn,bhen->bhde", gm.empty(2, 3, 4, 5, device="meta"), gm.empty(2, 3, 6, 5, device="meta"))
    assert tuple(out.shape) == (2, 3, 4, 6) and out.device.type == "meta"
