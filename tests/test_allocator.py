"""The caching allocator, in exact bytes: rounding, pools, split and merge, cache release, limits and the
OutOfMemoryError, categories, and the meta device making the same decisions as the CPU.

The policy under test (csrc/allocator.c): requests round up to 512 B; <= 1 MiB from 2 MiB small segments;
< 10 MiB from 20 MiB large segments; larger requests get their own segment rounded to 2 MiB."""
import gc

import numpy as np
import pytest

import gpumemnet as gm

KiB, MiB = 1024, 1024 * 1024


def rounded(nbytes):
    return max(512, -(-nbytes // 512) * 512)


@pytest.fixture
def meta():
    """A clean meta allocator: nothing live, nothing cached, peaks reset, no limit."""
    gc.collect()
    gm.memory.empty_cache("meta")
    gm.memory.reset_peak_memory_stats("meta")
    assert gm.memory.memory_allocated("meta") == 0, "a meta tensor leaked from another test"
    assert gm.memory.memory_reserved("meta") == 0
    yield "meta"
    gm.memory.set_limit("meta", None)
    gc.collect()
    gm.memory.empty_cache("meta")


def f32(n, device="meta"):
    return gm.empty(n, dtype=gm.float32, device=device)


@pytest.mark.parametrize("n_floats", [0, 1, 128, 129, 1000, 262144, 262145, 3_000_000])
def test_allocated_is_request_rounded_to_512_and_returns_to_baseline(n_floats):
    base = gm.memory.memory_allocated("cpu")
    t = f32(n_floats, "cpu")
    assert gm.memory.memory_allocated("cpu") - base == rounded(4 * n_floats)
    del t
    assert gm.memory.memory_allocated("cpu") == base


def test_peak_and_reset(meta):
    a = f32(256)  # 1 KiB
    b = f32(512)  # 2 KiB
    del a
    c = f32(128)  # 512 B
    assert gm.memory.memory_allocated(meta) == 2 * KiB + 512
    assert gm.memory.max_memory_allocated(meta) == 3 * KiB
    gm.memory.reset_peak_memory_stats(meta)
    assert gm.memory.max_memory_allocated(meta) == 2 * KiB + 512
    del b, c
    assert gm.memory.max_memory_allocated(meta) == 2 * KiB + 512
    assert gm.memory.memory_allocated(meta) == 0


def test_small_pool_packs_blocks_in_one_2mib_segment(meta):
    segments = gm.memory.memory_stats(meta)["num_segment_allocs"]
    a, b = f32(128), f32(128)
    assert gm.memory.memory_reserved(meta) == 2 * MiB
    assert b._data_ptr - a._data_ptr == 512
    assert gm.memory.memory_stats(meta)["num_segment_allocs"] == segments + 1


def test_large_pool_segments(meta):
    b = f32(3 * MiB)  # 12 MiB: a segment of its own, rounded to 2 MiB (here exact)
    assert gm.memory.memory_reserved(meta) == 12 * MiB
    a = f32(MiB // 2)  # 2 MiB request: large pool, a new 20 MiB segment
    assert gm.memory.memory_reserved(meta) == 32 * MiB
    c = f32(MiB // 2)  # fits in the rest of the 20 MiB segment, right after a
    assert c._data_ptr - a._data_ptr == 2 * MiB
    assert gm.memory.memory_reserved(meta) == 32 * MiB
    d = f32(13 * MiB // 4)  # 13 MiB: best fit takes the 16 MiB left in the 20 MiB segment
    assert gm.memory.memory_reserved(meta) == 32 * MiB
    e = f32(13 * MiB // 4)  # now nothing fits: own segment rounded up to 14 MiB
    assert gm.memory.memory_reserved(meta) == 46 * MiB
    del a, b, c, d, e
    gm.memory.empty_cache(meta)
    # the peak of reserved bytes (torch.cuda.max_memory_reserved's) outlives the release until a reset
    assert (gm.memory.memory_reserved(meta), gm.memory.max_memory_reserved(meta)) == (0, 46 * MiB)
    gm.memory.reset_peak_memory_stats(meta)
    assert gm.memory.max_memory_reserved(meta) == 0


def test_split_and_merge_reuse_addresses(meta):
    a, b, c = f32(128), f32(128), f32(128)
    pa, pb = a._data_ptr, b._data_ptr
    del b
    d = f32(128)  # best fit: the 512 B hole b left, not the big tail
    assert d._data_ptr == pb
    del d, a
    # a and b's blocks merged into one free 1 KiB block, the smallest that fits 1 KiB
    e = f32(256)
    assert e._data_ptr == pa
    del c, e
    st = gm.memory.memory_stats(meta)
    assert st["largest_free_block"] == 2 * MiB  # everything merged back into the whole segment
    assert st["cached_free"] == 2 * MiB


def test_empty_cache_releases_only_unused_segments(meta):
    keep = f32(128)
    big = f32(3 * MiB)
    del big
    assert gm.memory.memory_reserved(meta) == 2 * MiB + 12 * MiB
    assert gm.memory.empty_cache(meta) == 12 * MiB
    assert gm.memory.memory_reserved(meta) == 2 * MiB
    del keep
    assert gm.memory.empty_cache(meta) == 2 * MiB
    st = gm.memory.memory_stats(meta)
    assert st["reserved"]["current"] == 0 and st["num_segment_frees"] >= 2


def test_limit_raises_oom_then_recovers_on_cpu():
    dev = "cpu"
    gc.collect()
    gm.memory.empty_cache(dev)
    keep = gm.tensor(np.arange(1000, dtype=np.float32))  # an earlier tensor that must survive the OOM
    st0 = gm.memory.memory_stats(dev)
    limit = st0["reserved"]["current"] + 4 * MiB
    gm.memory.set_limit(dev, limit)
    try:
        with pytest.raises(gm.OutOfMemoryError) as info:
            gm.empty(8 * MiB // 4, dtype=gm.float32, device=dev)
        err = info.value
        assert isinstance(err, RuntimeError)
        text = str(err)
        assert "out of memory" in text and "CUDA" not in text
        assert "on cpu" in text and "8.00 MiB" in text and "limit" in text
        assert err.requested_bytes == 8 * MiB
        assert err.limit == limit
        assert err.device == "cpu"
        assert err.allocated_bytes == gm.memory.memory_allocated(dev)
        assert sum(err.by_category.values()) == err.allocated_bytes
        st = gm.memory.memory_stats(dev)
        assert st["num_ooms"] == st0["num_ooms"] + 1
        assert st["num_retries"] == st0["num_retries"] + 1
        # the earlier tensor still works, and a request under the limit succeeds
        np.testing.assert_array_equal(keep.numpy(), np.arange(1000, dtype=np.float32))
        small = gm.full((MiB // 4,), 2.0, device=dev)
        assert float(small.sum()) == 2.0 * (MiB // 4)
    finally:
        gm.memory.set_limit(dev, None)
    assert gm.memory.get_limit(dev) is None


def test_limit_falls_back_to_an_exact_segment(meta):
    # 2 MiB request: its 20 MiB segment would cross a 5 MiB limit, so a 2 MiB segment is made instead.
    gm.memory.set_limit(meta, 5 * MiB)
    a = f32(MiB // 2)
    assert gm.memory.memory_reserved(meta) == 2 * MiB
    with pytest.raises(gm.OutOfMemoryError):
        f32(MiB)  # 4 MiB more would make 6 MiB
    del a


def test_oom_frees_the_cache_before_giving_up(meta):
    gm.memory.set_limit(meta, 16 * MiB)
    a = f32(3 * MiB)  # 12 MiB segment
    del a  # cached, not released
    assert gm.memory.memory_reserved(meta) == 12 * MiB
    retries = gm.memory.memory_stats(meta)["num_retries"]
    b = f32(13 * MiB // 4)  # 13 MiB: its 14 MiB segment only fits once the cached 12 MiB are released
    assert gm.memory.memory_reserved(meta) == 14 * MiB
    assert gm.memory.memory_stats(meta)["num_retries"] == retries + 1
    del b


def test_set_limit_bad_values():
    with pytest.raises(ValueError, match="positive"):
        gm.memory.set_limit("cpu", -5)
    with pytest.raises(ValueError, match=r"fraction .* \(0, 1\], got 1.5"):
        gm.memory.set_limit("cpu", 1.5)
    with pytest.raises(ValueError, match="fraction"):
        gm.memory.set_limit("cpu", 0.0)
    with pytest.raises(TypeError, match="nbytes must be"):
        gm.memory.set_limit("cpu", "1GB")
    with pytest.raises(ValueError, match="unknown device"):
        gm.memory.set_limit("tpu", 100)


def test_set_limit_as_a_fraction_of_the_capacity():
    cap = gm.memory.capacity("meta")
    try:
        gm.memory.set_limit("meta", 0.25)
        assert gm.memory.get_limit("meta") == int(0.25 * cap)
    finally:
        gm.memory.set_limit("meta", None)


def test_overflowing_sizes_are_errors_not_wraps():
    with pytest.raises(ValueError, match="overflow"):
        gm.empty(2**40, 2**40, device="meta")
    with pytest.raises(ValueError, match="overflow"):
        gm.empty(2**62, dtype=gm.float64, device="meta")
    with pytest.raises(RuntimeError, match="larger than any device"):
        gm.empty(2**59, dtype=gm.float32, device="meta")
    with pytest.raises(ValueError, match="non-negative"):
        gm.empty(3, -1)


def test_meta_capacity_is_enforced(meta):
    with pytest.raises(gm.OutOfMemoryError):
        gm.empty(2**50, dtype=gm.float32, device=meta)  # 4 PiB > 1 PiB pretend capacity


def test_categories_current_and_peak(meta):
    with gm.memory.category("parameter"):
        w = f32(1000)
        with gm.memory.category("gradient"):
            g = f32(1000)
        assert gm.memory.memory_stats(meta)["by_category"]["gradient"]["current"] == 4096
        o = f32(1000)
    x = f32(10)
    cats = gm.memory.memory_stats(meta)["by_category"]
    assert cats["parameter"]["current"] == 2 * 4096
    assert cats["other"]["current"] == 512
    assert w._category == "parameter" and x._category == "other"
    o._category = "optimizer"  # re-tagging moves the bytes
    cats = gm.memory.memory_stats(meta)["by_category"]
    assert cats["parameter"]["current"] == 4096 and cats["optimizer"]["current"] == 4096
    assert cats["parameter"]["peak"] == 2 * 4096
    with pytest.raises(ValueError, match="unknown memory category"):
        with gm.memory.category("weights"):
            pass
    del w, g, o, x


def test_category_and_scope_restore_on_exception():
    before = gm._C.get_category(), gm._C.get_scope()
    with pytest.raises(KeyError):
        with gm.memory.category("input"), gm.memory.scope("features.3 forward"):
            assert gm._C.get_scope() == "features.3 forward"
            raise KeyError
    assert (gm._C.get_category(), gm._C.get_scope()) == before


def test_oom_message_names_scope_and_categories(meta):
    gm.memory.set_limit(meta, 4 * MiB)
    with gm.memory.category("parameter"):
        w = f32(MiB // 4)  # 1 MiB of parameters
    with gm.memory.scope("fc1 forward"), gm.memory.category("activation"):
        with pytest.raises(gm.OutOfMemoryError) as info:
            f32(2 * MiB)
    text = str(info.value)
    assert "fc1 forward" in text and "activation" in text and "parameter 1.00 MiB" in text
    assert info.value.scope == "fc1 forward" and info.value.category == "activation"
    assert info.value.by_category["parameter"] == MiB
    del w


def test_backward_releases_saved_tensors_exactly():
    base = gm.memory.memory_allocated("cpu")
    x = gm.rand(64, 64, requires_grad=True)  # 16 KiB
    w = gm.rand(64, 64, requires_grad=True)
    loss = ((x @ w).exp() * 3.0).sum()
    loss.backward()
    del loss
    # what remains: the two leaves and their gradients, each 16 KiB
    assert gm.memory.memory_allocated("cpu") - base == 4 * 16 * KiB
    assert x.grad._category == "gradient"
    del x, w
    assert gm.memory.memory_allocated("cpu") == base


def test_saved_intermediates_are_tagged_activation(meta):
    x = gm.empty(256, device=meta, requires_grad=True)
    y = x * 2.0  # intermediate (512+ bytes)
    z = y * y  # saves y -> activation
    assert y._category == "activation"
    assert x._category == "other"  # a leaf saved for backward keeps its own tag
    assert gm.memory.memory_stats(meta)["by_category"]["activation"]["current"] == 1024
    e = z.exp()  # exp's backward keeps its own output
    assert e._category == "activation"
    s = e.sum()  # sum keeps nothing
    assert s._category == "other"
    assert gm.memory.memory_stats(meta)["by_category"]["activation"]["current"] == 2048
    del x, y, z, e, s


def _program(device):
    """A small program mixing creation, views, elementwise, reductions, matmul, cat and autograd."""
    a = gm.ones(32, 48, device=device, requires_grad=True)
    b = gm.zeros(48, 16, device=device)
    c = (a @ b + 1.0).exp()
    d = gm.cat([c, c[:, :8]], dim=1).transpose(0, 1)
    e = d.sum(dim=0, keepdim=True) * d.mean()
    loss = e.sum()
    loss.backward()
    shapes = [tuple(t.shape) for t in (a, b, c, d, e, loss, a.grad)]
    return shapes


def test_meta_makes_the_same_allocations_as_cpu(meta):
    gc.collect()
    results = {}
    for dev in ("cpu", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        st0 = gm.memory.memory_stats(dev)
        shapes = _program(dev)
        gc.collect()
        st1 = gm.memory.memory_stats(dev)
        results[dev] = (shapes, st1["allocated"]["peak"] - st0["allocated"]["current"],
                        st1["allocated"]["current"] - st0["allocated"]["current"],
                        st1["num_allocs"] - st0["num_allocs"],
                        {k: st1["by_category"][k]["peak"] - st0["by_category"][k]["current"]
                         for k in st1["by_category"]})
    assert results["cpu"] == results["meta"]
    assert results["cpu"][1] > 0


@pytest.mark.skipif(gm.cuda.is_available(), reason="a CUDA device is present: tests/test_cuda_allocator.py covers it")
def test_cuda_tensors_without_a_device_give_a_clear_error():
    why = "no CUDA support" if not gm.cuda.is_built() else "no CUDA device is available"
    with pytest.raises(RuntimeError, match=f"cuda:0.*{why}"):
        gm.empty(3, device="cuda")


def test_peak_composition_and_the_allocation_that_reached_it(meta):
    with gm.memory.scope("fc1 forward"), gm.memory.category("activation"):
        a = f32(1000)  # 4096 B
    with gm.memory.scope("fc2 forward"):
        b = f32(10)  # 512 B: this one sets the peak
    del a
    c = f32(100)  # 512 B, below the peak
    at = gm.memory.memory_stats(meta)["at_peak"]
    assert at["by_category"]["activation"] == 4096 and at["by_category"]["other"] == 512
    assert sum(at["by_category"].values()) == gm.memory.max_memory_allocated(meta)
    assert at["scope"] == "fc2 forward" and at["category"] == "other" and at["request"] == 40
    gm.memory.reset_peak_memory_stats(meta)
    assert gm.memory.memory_stats(meta)["at_peak"]["by_category"]["other"] == 1024
    del b, c


def test_oom_lists_the_largest_live_tensors_by_name(meta):
    w = f32(MiB)  # 4 MiB
    w._name = "fc1.weight"
    g = f32(MiB // 2)  # 2 MiB
    g._name = "fc1.weight.grad"
    with gm.memory.scope("features.3 forward"), gm.memory.category("activation"):
        a = f32(MiB // 4)  # 1 MiB, unnamed: described by category and scope
    small = f32(10)
    gm.memory.set_limit(meta, gm.memory.memory_reserved(meta))
    with pytest.raises(gm.OutOfMemoryError) as info:
        f32(8 * MiB)
    err = info.value
    assert err.largest_tensors[:3] == [("fc1.weight", 4 * MiB), ("fc1.weight.grad", 2 * MiB),
                                       ("activation from features.3 forward", MiB)]
    assert len(err.largest_tensors) == 4 and err.largest_tensors[3][1] == 512
    assert "largest tensors: fc1.weight 4.00 MiB · fc1.weight.grad 2.00 MiB · activation from features.3 " \
           "forward 1.00 MiB" in str(err)
    del w, g, a, small


def test_module_parameters_and_their_gradients_carry_names_into_oom_reports(meta):
    net = gm.nn.Sequential(gm.nn.Linear(512, 1024, device="meta"), gm.nn.ReLU(), gm.nn.Linear(1024, 10, device="meta"))
    net(gm.ones(4, 512, device="meta")).sum().backward()
    gm.memory.set_limit(meta, gm.memory.memory_reserved(meta))
    with pytest.raises(gm.OutOfMemoryError) as info:
        f32(8 * MiB)
    names = [n for n, _ in info.value.largest_tensors[:2]]
    assert names == ["0.weight", "0.weight.grad"]
    del net


def test_saved_activations_are_named_after_the_module_that_keeps_them(meta):
    class Net(gm.nn.Module):
        def __init__(self):
            super().__init__()
            nn = gm.nn
            self.features = nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                                          nn.BatchNorm2d(16), nn.ReLU())

        def forward(self, x):
            return self.features(x).mean()

    net = Net().to("meta")
    out = net(gm.empty(8, 4, 64, 64, device="meta"))
    gm.memory.set_limit(meta, gm.memory.memory_reserved(meta))
    with pytest.raises(gm.OutOfMemoryError) as info:
        f32(16 * MiB)
    act = 8 * 16 * 64 * 64 * 4  # one (8, 16, 64, 64) float32 map: 2 MiB
    # ReLU keeps its output, BatchNorm keeps its input (the second conv's output): each is named by who keeps it
    assert sorted(info.value.largest_tensors[:3]) == [("activation saved by features.1 (ReLU)", act),
                                                      ("activation saved by features.3 (BatchNorm2d)", act),
                                                      ("activation saved by features.4 (ReLU)", act)]
    assert "activation saved by features.3 (BatchNorm2d) 2.00 MiB" in str(info.value)
    # a parameter keeps its own name even where an op saves it for backward
    assert ("features.2.weight", 9216) in info.value.largest_tensors
    del net, out


def test_oom_suggestions_follow_what_holds_the_memory(meta):
    # parameters and optimizer state dominate: the global-pooling-head advice comes first
    with gm.memory.category("parameter"):
        w = f32(2 * MiB)  # 8 MiB
    with gm.memory.category("optimizer"):
        s = f32(2 * MiB)
    with gm.memory.category("activation"):
        a = f32(MiB // 2)  # 2 MiB
    gm.memory.set_limit(meta, gm.memory.memory_reserved(meta))
    with pytest.raises(gm.OutOfMemoryError) as info:
        f32(4 * MiB)
    sug = info.value.suggestions
    assert len(sug) == 1 and sug[0].startswith("parameters, gradients and optimizer state are 89% of use")
    assert "GlobalAvgPool2d" in sug[0] and "suggestions:\n    - parameters" in str(info.value)
    gm.memory.set_limit(meta, None)
    del w, s
    # now activations dominate: checkpointing / autocast / accumulation come first
    with gm.memory.category("activation"):
        b = f32(2 * MiB)
    with gm.memory.category("parameter"):
        p = f32(MiB // 4)
    gm.memory.set_limit(meta, gm.memory.memory_reserved(meta))
    with pytest.raises(gm.OutOfMemoryError) as info:
        f32(16 * MiB)
    sug = info.value.suggestions
    assert sug[0].startswith("activations saved for backward are 91% of use") and "checkpoint" in sug[0]
    del a, b, p
