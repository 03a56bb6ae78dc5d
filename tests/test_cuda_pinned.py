"""Pinned host memory: Tensor.pin_memory / is_pinned, the "cpu-pinned" allocator's exact bytes, uploads with
non_blocking=True that keep the pinned source from reuse until the stream passed them, DataLoader(pin_memory=True),
and the errors without CUDA. The emulator runs copies at once; gm_emu_hold_streams (_C._emu_hold_streams) keeps
their events pending as a GPU's queue would, so the deferred reuse can be observed."""
import gc
import warnings

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from cuda_util import HAVE_CUDA, requires_cuda

PINNED = "cpu-pinned"
MiB = 1 << 20
EMULATOR = gm._C._build_info()["cuda"] == "emulator"
requires_emulator = pytest.mark.skipif(not EMULATOR, reason="needs the emulator build (GPUMEMNET_CUDA=emu): "
                                                            "it holds events pending on demand")


@pytest.fixture
def clean_pinned():
    gc.collect()  # pinned staging an earlier test left in a reference cycle (an offloading optimizer and its hooks)
    gm.memory.set_limit(PINNED, None)
    gm.memory.empty_cache(PINNED)
    yield
    if EMULATOR:
        _C._emu_hold_streams(False)
    gm.memory.set_limit(PINNED, None)
    gm.memory.empty_cache(PINNED)


def R(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- without CUDA ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(HAVE_CUDA, reason="checks the error of a machine without CUDA")
def test_pin_memory_without_cuda_raises_runtime_error():
    with pytest.raises(RuntimeError, match="pin_memory: pinned host memory needs"):
        gm.ones(3).pin_memory()
    assert not gm.ones(3).is_pinned()
    with pytest.raises(RuntimeError, match="pinned host memory needs"):
        gm.empty(3, pin_memory=True)
    assert gm.memory.memory_stats(PINNED)["allocated"]["current"] == 0


@pytest.mark.skipif(HAVE_CUDA, reason="checks the fallback of a machine without CUDA")
def test_dataloader_pin_memory_without_cuda_warns_and_does_not_pin():
    ds = gm.utils.data.TensorDataset(R(4, 2))
    with pytest.warns(UserWarning, match="no CUDA device"):
        dl = gm.utils.data.DataLoader(ds, batch_size=2, pin_memory=True)
    (x,) = next(iter(dl))
    assert not x.is_pinned()


# ---- pinning -----------------------------------------------------------------------------------------------------
@requires_cuda
def test_pin_memory_copies_into_the_pinned_allocator(clean_pinned):
    a = gm.tensor(R(3, 100))
    cpu0 = gm.memory.memory_allocated("cpu")
    p0 = gm.memory.memory_stats(PINNED)
    p = a.pin_memory()
    assert p.is_pinned() and not a.is_pinned()
    assert p.device == "cpu" and p.dtype == a.dtype and tuple(p.shape) == (3, 100)
    assert p._storage_id != a._storage_id
    np.testing.assert_array_equal(p.numpy(), a.numpy())
    p1 = gm.memory.memory_stats(PINNED)
    # 1200 bytes -> one 1536-byte block in a 2 MiB small segment (the allocator's policy, as on every device)
    assert p1["allocated"]["current"] - p0["allocated"]["current"] == 1536
    assert p1["requested"]["current"] - p0["requested"]["current"] == 1200
    assert p1["reserved"]["current"] - p0["reserved"]["current"] == 2 * MiB
    assert p1["by_category"]["other"]["current"] - p0["by_category"]["other"]["current"] == 1536
    assert gm.memory.memory_allocated("cpu") == cpu0          # "cpu" does not count pinned bytes
    assert gm.cuda.host_memory_stats() == p1                   # PyTorch's name for the same statistics
    assert p.pin_memory() is p                                 # pinned already: itself
    del p
    assert gm.memory.memory_allocated(PINNED) == p0["allocated"]["current"]
    assert gm.memory.empty_cache(PINNED) == 2 * MiB


@requires_cuda
def test_creation_functions_allocate_pinned_directly(clean_pinned):
    """empty/zeros/ones/full(..., pin_memory=True): one pinned block, no pageable tensor on the way."""
    cpu0, p0 = gm.memory.memory_allocated("cpu"), gm.memory.memory_allocated(PINNED)
    gm.memory.reset_peak_memory_stats("cpu")
    made = [gm.empty(3, 100, pin_memory=True), gm.zeros(3, 100, pin_memory=True),
            gm.ones(3, 100, dtype=gm.float64, pin_memory=True), gm.full((3, 100), 2.5, pin_memory=True)]
    assert all(t.is_pinned() and t.device == "cpu" for t in made)
    assert gm.memory.memory_allocated(PINNED) - p0 == 3 * 1536 + 2560  # 1200 B -> 1536; the float64 2400 -> 2560
    assert gm.memory.max_memory_allocated("cpu") == cpu0  # nothing pageable was made first
    np.testing.assert_array_equal(made[1].numpy(), 0)
    np.testing.assert_array_equal(made[2].numpy(), 1)
    np.testing.assert_array_equal(made[3].numpy(), 2.5)
    with pytest.raises(RuntimeError, match="pin_memory=True needs device='cpu'.*got device='cuda:0'"):
        gm.zeros(3, device="cuda", pin_memory=True)
    assert not gm.empty(3).is_pinned()


@requires_cuda
def test_pinned_tensors_are_ordinary_cpu_tensors(clean_pinned):
    a, b = R(4, 5), R(4, 5, seed=1)
    pa, pb = gm.tensor(a).pin_memory(), gm.tensor(b).pin_memory()
    np.testing.assert_allclose(((pa * pb).sum(1) + pa.exp()[:, 0]).numpy(), (a * b).sum(1) + np.exp(a)[:, 0],
                               rtol=1e-6)
    view = pa[1:3, ::2]
    assert view.is_pinned()                    # a view shares the pinned storage
    assert not (pa + 1).is_pinned()            # results of ops are ordinary memory
    np.testing.assert_array_equal(view.pin_memory().numpy(), a[1:3, ::2])


@requires_cuda
def test_pin_memory_of_a_strided_view_is_contiguous(clean_pinned):
    a = R(6, 4)
    p = gm.tensor(a).t().pin_memory()
    assert p.is_pinned() and p.is_contiguous() and tuple(p.shape) == (4, 6)
    np.testing.assert_array_equal(p.numpy(), a.T)


@requires_cuda
def test_pin_memory_refuses_a_cuda_tensor():
    with pytest.raises(RuntimeError, match="cannot pin a tensor on cuda:0: only CPU tensors"):
        gm.ones(2, device="cuda").pin_memory()


@requires_cuda
def test_pin_memory_passes_the_gradient(clean_pinned):
    x = gm.tensor(R(3), requires_grad=True)
    y = x.pin_memory()
    assert y.is_pinned() and y.requires_grad
    (y * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2, np.float32))


@requires_cuda
def test_pinned_limit_raises_out_of_memory_that_names_cpu_pinned(clean_pinned):
    gm.memory.set_limit(PINNED, 4 * MiB)
    keep = gm.zeros(MiB // 2).pin_memory()   # 2 MiB: a 20 MiB segment would cross the limit, an exact one fits
    with pytest.raises(gm.OutOfMemoryError) as info:
        gm.zeros(MiB).pin_memory()             # 4 MiB more: over the 4 MiB limit
    assert str(info.value).startswith("out of memory on cpu-pinned: tried to allocate 4.00 MiB")
    assert info.value.device == "cpu-pinned"
    del keep


# ---- uploads ---------------------------------------------------------------------------------------------------
@requires_cuda
@pytest.mark.parametrize("non_blocking", [False, True])
def test_upload_from_pinned_memory_has_the_values(clean_pinned, non_blocking):
    a = R(7, 9)
    p = gm.tensor(a).pin_memory()
    d = p.cuda(non_blocking=non_blocking)
    d2 = p.to("cuda", gm.float64, non_blocking=non_blocking)      # dtype cast lands on the device
    d3 = p[:, 1::2].to("cuda:0", non_blocking=non_blocking)        # strided: packed on the host first
    gm.cuda.synchronize()
    np.testing.assert_array_equal(d.cpu().numpy(), a)
    np.testing.assert_array_equal(d2.cpu().numpy(), a.astype(np.float64))
    np.testing.assert_array_equal(d3.cpu().numpy(), a[:, 1::2])
    assert d.device == "cuda:0" and not d.cpu().is_pinned()


@requires_emulator
def test_blocking_upload_from_pinned_memory_waits_for_the_stream(clean_pinned):
    _C._emu_hold_streams(True)
    base = gm.memory.memory_allocated(PINNED)
    p = gm.tensor(R(1000)).pin_memory()
    d = p.cuda(non_blocking=True)     # queued
    del p
    assert gm.memory.memory_allocated(PINNED) == base + 4096
    q = gm.tensor(R(10)).pin_memory()
    e = q.cuda()                      # non_blocking=False: waits for the stream, so the first copy ran too
    del q
    assert gm.memory.memory_allocated(PINNED) == base + 4096   # q went at once; p waits for the next allocation
    r = gm.zeros(1).pin_memory()      # ... which finds p's copy done and frees it
    assert gm.memory.memory_allocated(PINNED) == base + 512
    del d, e, r


@requires_emulator
def test_non_blocking_upload_of_a_tensor_that_requires_grad(clean_pinned):
    """Recorded by autograd, the upload is still asynchronous (its pinned source is held after it is dropped, as
    for a plain one), and the gradient comes back to the host."""
    _C._emu_hold_streams(True)
    base = gm.memory.memory_allocated(PINNED)
    x = gm.tensor(R(1000)).requires_grad_()
    p = x.pin_memory()                # recorded: nothing but the upload below holds this copy
    d = p.cuda(non_blocking=True)     # queued
    assert d.requires_grad
    del p
    assert gm.memory.memory_allocated(PINNED) == base + 4096  # held: the copy has not run (blocking: freed)
    (d * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(1000, 3, np.float32))
    np.testing.assert_array_equal(d.detach().cpu().numpy(), R(1000))


@requires_emulator
def test_non_blocking_upload_keeps_the_pinned_block_until_the_stream_passed_it(clean_pinned):
    _C._emu_hold_streams(True)
    base = gm.memory.memory_allocated(PINNED)
    p = gm.tensor(R(1000)).pin_memory()          # 4000 B -> a 4096-byte block
    addr = p._data_ptr
    d = p.cuda(non_blocking=True)                # queued: the stream has not passed its event
    del p
    # still held: a GPU could still be reading it
    assert gm.memory.memory_allocated(PINNED) == base + 4096
    q = gm.tensor(R(1000, seed=1)).pin_memory()   # so a new pinned tensor gets other memory
    assert q._data_ptr != addr
    assert gm.memory.memory_allocated(PINNED) == base + 2 * 4096
    gm.cuda.synchronize()                          # the stream passed it: the next pinned allocation reuses it
    r = gm.tensor(R(1000, seed=2)).pin_memory()
    assert r._data_ptr == addr
    assert gm.memory.memory_allocated(PINNED) == base + 2 * 4096
    np.testing.assert_array_equal(d.cpu().numpy(), R(1000))
    del q, r, d
    assert gm.memory.memory_allocated(PINNED) == base


@requires_emulator
def test_empty_cache_releases_blocks_whose_copies_ran(clean_pinned):
    _C._emu_hold_streams(True)
    base_reserved = gm.memory.memory_reserved(PINNED)
    p = gm.zeros(3 * MiB // 4).pin_memory()     # 3 MiB: a 20 MiB large segment
    d = p.cuda(non_blocking=True)
    del p
    assert gm.memory.empty_cache(PINNED) == 0   # the copy may still read it: nothing to release
    assert gm.memory.memory_reserved(PINNED) == base_reserved + 20 * MiB
    _C._emu_hold_streams(False)
    assert gm.memory.empty_cache(PINNED) == 20 * MiB
    assert gm.memory.memory_allocated(PINNED) == 0
    del d


@requires_cuda
def test_pinned_stats_history_and_reset(clean_pinned):
    gm.memory.reset_peak_memory_stats(PINNED)
    p = gm.zeros(256).pin_memory()
    del p
    st = gm.memory.memory_stats(PINNED)
    assert st["allocated"]["peak"] - st["allocated"]["current"] == 1024
    assert st["capacity"] == gm.memory.capacity("cpu")
    assert gm.memory.get_limit(PINNED) is None


# ---- the loader ----------------------------------------------------------------------------------------------
@requires_cuda
def test_dataloader_pins_every_batch_tensor(clean_pinned):
    xs, ys = R(10, 3), np.arange(10)
    dl = gm.utils.data.DataLoader(gm.utils.data.TensorDataset(xs, ys), batch_size=4, pin_memory=True)
    seen = []
    for x, y in dl:
        assert x.is_pinned() and y.is_pinned()
        assert x._category == "input"
        seen.append(x.cuda(non_blocking=True))
    gm.cuda.synchronize()
    np.testing.assert_array_equal(np.concatenate([s.cpu().numpy() for s in seen]), xs)


@requires_cuda
def test_dataloader_pins_collated_structures(clean_pinned):
    class DictSet(gm.utils.data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return {"x": np.full(2, i, np.float32), "label": i, "name": f"s{i}"}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batch = next(iter(gm.utils.data.DataLoader(DictSet(), batch_size=3, pin_memory=True)))
    assert batch["x"].is_pinned() and batch["label"].is_pinned() and batch["name"] == ["s0", "s1", "s2"]
    np.testing.assert_array_equal(batch["label"].numpy(), [0, 1, 2])
