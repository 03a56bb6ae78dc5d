"""The convolution layers' padding against PyTorch's: padding_mode 'reflect' / 'replicate' / 'circular' (F.pad
first, as PyTorch does) and padding='same' with even kernels (asymmetric) on Conv1d, Conv2d and Conv3d — outputs,
input and weight gradients, reprs and _reversed_padding_repeated_twice — and the refusals PyTorch makes."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

LAYERS = {"Conv1d": (2, 3, 9), "Conv2d": (2, 3, 7, 8), "Conv3d": (1, 3, 5, 6, 6)}
CASES = [("Conv1d", 3, 2, 1), ("Conv1d", 4, "same", 1), ("Conv2d", 3, 1, 1), ("Conv2d", (2, 4), "same", 1),
         ("Conv2d", 3, (1, 2), 2), ("Conv2d", 3, "valid", 1), ("Conv3d", 2, "same", 1), ("Conv3d", 3, 1, 2)]


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("name,kernel,padding,stride", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in CASES])
def test_padding_like_pytorch(name, kernel, padding, stride, mode, device):
    ref = getattr(torch.nn, name)(3, 4, kernel, stride=stride, padding=padding, padding_mode=mode).double()
    ours = getattr(gm.nn, name)(3, 4, kernel, stride=stride, padding=padding, padding_mode=mode).double().to(device)
    ours.load_state_dict({k: gm.tensor(v.detach().numpy(), device=device) for k, v in ref.state_dict().items()})
    assert repr(ours) == repr(ref)
    assert ours._reversed_padding_repeated_twice == list(ref._reversed_padding_repeated_twice)
    x = np.random.RandomState(3).randn(*LAYERS[name])
    gx, tx = gm.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, want = ours(gx), ref(tx)
    np.testing.assert_allclose(to_np(out), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = np.random.RandomState(4).randn(*want.shape)
    (out * gm.tensor(w, device=device)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(to_np(gx.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(to_np(ours.weight.grad), ref.weight.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lib", ["gm", "torch"])
def test_refusals_as_pytorch(lib):
    nn = gm.nn if lib == "gm" else torch.nn
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv1d(3, 4, 3, stride=2, padding="same", padding_mode="reflect")
