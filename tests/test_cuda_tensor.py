"""Tensors on CUDA: copies between host and device (.cuda(), .cpu(), .to(), numpy(), item(), from_numpy),
autograd across devices, and clear errors. Runs on a GPU or on the emulator build (tests/cuda_util.py)."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda, to_np

pytestmark = requires_cuda

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "bool"]


def sample(dtype, shape=(3, 5)):
    rng = np.random.default_rng(0)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype == "int64":
        return rng.integers(-1000, 1000, shape)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_keeps_every_value(dtype):
    cpu = gm.tensor(sample(dtype), dtype=getattr(gm, dtype if dtype != "bool" else "bool_"))
    dev = cpu.cuda()
    assert dev.device.type == "cuda" and dev.dtype == cpu.dtype and tuple(dev.shape) == tuple(cpu.shape)
    back = dev.cpu()
    np.testing.assert_array_equal(to_np(back), to_np(cpu))


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_from_numpy_onto_the_device_and_numpy_back(dtype):
    a = sample(dtype, (4, 6)).astype(dtype if dtype != "float16" else np.float16)
    t = gm.from_numpy(a, device="cuda")
    assert t.device.type == "cuda"
    out = t.numpy()
    np.testing.assert_array_equal(out, a)
    out[0, 0] = 99  # a copy: the device tensor is unchanged
    assert to_np(t)[0, 0] == a[0, 0]


def test_non_contiguous_sources_land_in_logical_order():
    base = gm.arange(24, dtype=gm.float32).reshape(2, 3, 4)
    view = base.permute(2, 0, 1)[1:, :, ::2]
    np.testing.assert_array_equal(to_np(view.cuda()), to_np(view))
    dview = base.cuda().permute(2, 0, 1)[1:, :, ::2]
    np.testing.assert_array_equal(to_np(dview.cpu()), to_np(view))


def test_to_with_dtype_and_device_at_once():
    x = gm.tensor([[1.5, -2.25], [3.0, 4.75]])
    y = x.to("cuda", gm.float64)
    assert y.device.type == "cuda" and y.dtype == gm.float64
    np.testing.assert_array_equal(to_np(y), to_np(x))
    assert y.to("cpu").dtype == gm.float64


def test_item_arange_and_repr():
    assert gm.tensor([2.5]).cuda().item() == 2.5
    assert gm.tensor([7]).cuda().item() == 7
    a = gm.arange(0, 10, 3, device="cuda")
    np.testing.assert_array_equal(to_np(a), [0, 3, 6, 9])
    assert "device='cuda:0'" in repr(a)


def test_copy_to_the_device_allocates_exactly_the_tensor_bytes():
    x = gm.zeros(1000, 3)  # 12000 B: one 12288-byte block (512-byte rounding)
    before = gm.memory.memory_allocated("cuda")
    y = x.cuda()
    assert gm.memory.memory_allocated("cuda") - before == 12288
    del y
    assert gm.memory.memory_allocated("cuda") == before


def test_gradient_flows_back_across_devices():
    x = gm.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.cuda()
    assert y.requires_grad and y.grad_fn is not None
    z = y.cpu()
    (z * gm.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.device.type == "cpu"
    np.testing.assert_array_equal(to_np(x.grad), [1.0, 10.0, 100.0])


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="meta tensor has no data"):
        gm.zeros(2, device="meta").cuda()
    n = gm.cuda.device_count()
    with pytest.raises(RuntimeError, match=f"cuda:{n + 3}"):
        gm.zeros(2, device=f"cuda:{n + 3}")


def test_synchronize_and_properties():
    gm.cuda.synchronize()
    p = gm.cuda.get_device_properties(0)
    free, total = gm.cuda.mem_get_info(0)
    assert p.total_memory == total and 0 <= free <= total
    assert gm.memory.capacity("cuda:0") == total
