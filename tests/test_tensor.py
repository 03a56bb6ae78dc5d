"""Tensors as a user meets them: creation, NumPy interop, views and their sharing, indexing, conversion, repr,
and the errors bad input gets. NumPy is the reference throughout."""
import os

import numpy as np
import pytest

import gpumemnet as gm


# ---- creation ------------------------------------------------------------------------------------------
def test_tensor_from_python_data_uses_pytorch_default_dtypes():
    assert gm.tensor([1.5, 2]).dtype == gm.float32
    assert gm.tensor([1, 2]).dtype == gm.int64
    assert gm.tensor([True, False]).dtype == gm.bool
    assert gm.tensor(3.0).shape == ()
    assert gm.tensor([[1, 2], [3, 4]], dtype=gm.float64).dtype == gm.float64
    np.testing.assert_array_equal(gm.tensor([[1, 2], [3, 4]]).numpy(), [[1, 2], [3, 4]])


@pytest.mark.parametrize("np_dtype,gm_dtype", [
    (np.float32, gm.float32), (np.float64, gm.float64), (np.float16, gm.float16), (np.int64, gm.int64),
    (np.int32, gm.int32), (np.uint8, gm.uint8), (np.int8, gm.int8), (np.int16, gm.int16), (np.uint32, gm.int64),
    (np.bool_, gm.bool)])  # narrow integers keep their type, as torch.from_numpy does; uint16/32/64 widen to int64
def test_from_numpy_dtypes(np_dtype, gm_dtype):
    a = (np.arange(12).reshape(3, 4) % 5).astype(np_dtype)
    t = gm.from_numpy(a)
    assert t.dtype == gm_dtype and t.shape == (3, 4)
    np.testing.assert_array_equal(t.numpy(), a.astype(t.numpy().dtype))


def test_from_numpy_takes_any_strides_and_byte_order():
    """Values of any layout; shared with the array (PyTorch's from_numpy) where the strides are whole elements
    and non-negative and the byte order native, copied otherwise."""
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    for a, shared in ((base[:, ::2, 1:], True), (base.transpose(2, 0, 1), True), (base.astype(">f8"), False),
                      (np.asfortranarray(base), True), (base[::-1], False)):
        t = gm.from_numpy(a)
        np.testing.assert_array_equal(t.numpy(), a)
        assert np.shares_memory(t.numpy(), a) == shared
    a = np.ones(4, dtype=np.float32)
    t = gm.from_numpy(a)
    a[0] = 7  # shared: later changes to the array reach the tensor, as in PyTorch
    assert t.numpy()[0] == 7


def test_numpy_shares_memory_with_the_tensor():
    t = gm.zeros(2, 3)
    v = t.numpy()
    v[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    w = t.transpose(0, 1).numpy()
    assert w.shape == (3, 2) and w[2, 1] == 5.0


def test_non_numeric_numpy_arrays_are_type_errors():
    for bad in (np.array(["a", "b"]), np.array([object(), 1], dtype=object)):  # (complex: a ComplexTensor)
        with pytest.raises(TypeError, match="dtype"):
            gm.from_numpy(bad)
    with pytest.raises(TypeError, match="ndarray"):
        gm.from_numpy([1, 2])
    with pytest.raises((TypeError, ValueError)):
        gm.tensor([[1, 2], [3]])


def test_filled_and_range_creation():
    np.testing.assert_array_equal(gm.zeros(2, 3).numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(gm.ones((2, 3), dtype=gm.int64).numpy(), np.ones((2, 3), np.int64))
    np.testing.assert_array_equal(gm.full((2,), 7).numpy(), [7, 7])
    assert gm.full((2,), 7).dtype == gm.int64 and gm.full((2,), 7.5).dtype == gm.float32
    assert gm.empty(4, 5).shape == (4, 5)
    np.testing.assert_array_equal(gm.arange(5).numpy(), np.arange(5))
    np.testing.assert_allclose(gm.arange(0, 1, 0.25).numpy(), np.arange(0, 1, 0.25))
    np.testing.assert_array_equal(gm.arange(10, 0, -3).numpy(), np.arange(10, 0, -3))
    assert gm.arange(0, 1, 0.25).dtype == gm.float32
    x = gm.ones(2, 3, dtype=gm.float64)
    for like in (gm.zeros_like, gm.ones_like, gm.empty_like, gm.rand_like, gm.randn_like):
        y = like(x)
        assert y.shape == (2, 3) and y.dtype == gm.float64
    assert gm.full_like(x, 3.0).numpy().tolist() == [[3.0] * 3] * 2
    with pytest.raises(ValueError, match="step"):
        gm.arange(0, 5, 0)
    with pytest.raises(ValueError, match="inconsistent"):
        gm.arange(0, 5, -1)


def test_rand_is_seeded_and_in_range():
    gm.manual_seed(123)
    a = gm.rand(1000)
    gm.manual_seed(123)
    b = gm.rand(1000)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert 0.0 <= a.numpy().min() and a.numpy().max() < 1.0
    assert not np.array_equal(a.numpy(), gm.rand(1000).numpy())


# ---- views ------------------------------------------------------------------------------------------------
def test_views_share_storage_and_match_numpy():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = gm.tensor(a)
    cases = [
        (t.view(6, 4), a.reshape(6, 4)), (t.view(-1), a.reshape(-1)), (t.transpose(0, 2), a.transpose(2, 1, 0)),
        (t.permute(1, 2, 0), a.transpose(1, 2, 0)), (t[:, 1], a[:, 1]), (t[1, ::2, 1:3], a[1, ::2, 1:3]),
        (t[..., -1], a[..., -1]), (t[None, 0], a[None, 0]), (t.unsqueeze(1), a[:, None]),
        (t[:, :1].squeeze(1), a[:, 0]), (t[:1].expand(4, 3, 4), np.broadcast_to(a[:1], (4, 3, 4))),
        (t.flatten(1), a.reshape(2, 12)), (t.T, a.T),
    ]
    for v, ref in cases:
        np.testing.assert_array_equal(v.numpy(), ref)
        assert v._storage_id == t._storage_id  # no copy
    t.view(6, 4)[0, 0] = 100.0
    assert t[0, 0, 0].item() == 100.0


def test_reshape_copies_only_when_it_must():
    t = gm.arange(12).view(3, 4)
    assert t.reshape(4, 3)._storage_id == t._storage_id
    tt = t.transpose(0, 1)
    r = tt.reshape(12)
    assert r._storage_id != tt._storage_id
    np.testing.assert_array_equal(r.numpy(), np.arange(12).reshape(3, 4).T.reshape(12))
    with pytest.raises(ValueError, match="strides"):
        tt.view(12)


def test_contiguous_and_clone():
    t = gm.arange(6).view(2, 3).transpose(0, 1)
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c._storage_id != t._storage_id
    np.testing.assert_array_equal(c.numpy(), t.numpy())
    assert c.contiguous() is c
    k = c.clone()
    k[0, 0] = 99
    assert c[0, 0].item() == 0


def test_view_errors_name_the_shapes():
    t = gm.zeros(2, 3)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        t.view(4)
    with pytest.raises(ValueError, match="only one dimension can be -1"):
        t.view(-1, -1)
    with pytest.raises(IndexError, match="out of range"):
        t.transpose(0, 2)
    with pytest.raises(ValueError, match="appears more than once"):
        t.permute(0, 0)
    with pytest.raises(ValueError, match="expand"):
        t.expand(3, 3)
    with pytest.raises(ValueError, match="step must be positive"):
        t[::-1]


# ---- indexing ----------------------------------------------------------------------------------------------
def test_advanced_indexing_matches_numpy():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = gm.tensor(a)
    idx = np.array([2, 0, 2, -1])
    np.testing.assert_array_equal(t[idx].numpy(), a[idx])
    np.testing.assert_array_equal(t[:, [1, 3]].numpy(), a[:, [1, 3]])
    np.testing.assert_array_equal(t[1, :, gm.tensor([[0, 4], [1, 1]])].numpy(), a[1][:, np.array([[0, 4], [1, 1]])])
    mask = a[:, :, 0] > 20
    np.testing.assert_array_equal(t[gm.tensor(mask)].numpy(), a[mask])
    m1 = a[:, 0, 0] > 10
    np.testing.assert_array_equal(t[gm.tensor(m1), 2].numpy(), a[m1, 2])
    np.testing.assert_array_equal(t[t > 50].numpy(), a[a > 50])


def test_setitem_matches_numpy():
    a = np.zeros((4, 5), dtype=np.float32)
    t = gm.zeros(4, 5)
    for idx, val in [((1, 2), 3.0), ((slice(None), 0), 1.0), ((2,), np.arange(5, dtype=np.float32)),
                     (([0, 3],), 7.0), ((slice(1, 3), [1, 4]), -2.0)]:
        a[idx] = val
        t[idx] = gm.tensor(val) if isinstance(val, np.ndarray) else val
        np.testing.assert_array_equal(t.numpy(), a)
    t[t > 2] = 0.5
    a[a > 2] = 0.5
    np.testing.assert_array_equal(t.numpy(), a)


def test_index_errors():
    t = gm.zeros(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        t[3]
    with pytest.raises(IndexError, match="out of range|out of bounds"):
        t[gm.tensor([0, 5])]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="integer or bool|long, int, byte or bool"):
        t[gm.tensor([0.5])]
    with pytest.raises(IndexError, match="mask"):
        t[gm.tensor([True, False])]


# ---- conversion and misc -----------------------------------------------------------------------------------
def test_to_dtype_and_item():
    t = gm.tensor([1.7, -2.2])
    assert t.to(gm.int64).numpy().tolist() == [1, -2]
    assert t.double().dtype == gm.float64 and t.half().dtype == gm.float16
    b = t.bfloat16()
    np.testing.assert_allclose(b.float().numpy(), [1.703125, -2.203125])
    assert gm.tensor([3]).item() == 3 and isinstance(gm.tensor([3]).item(), int)
    assert gm.tensor(2.5).item() == 2.5
    assert t.to(gm.float32) is t
    with pytest.raises(ValueError, match="one element"):
        t.item()
    with pytest.raises(TypeError, match="bfloat16"):
        b.numpy()


def test_repr_like_pytorch():
    assert repr(gm.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(gm.tensor([1.0, -2.0])) == "tensor([ 1., -2.])"
    assert repr(gm.tensor([[1, 2], [3, 4]])) == "tensor([[1, 2],\n        [3, 4]])"
    assert repr(gm.tensor(1e-6)) == "tensor(1.0000e-06)"
    r = repr(gm.ones(2, requires_grad=True))
    assert "requires_grad=True" in r
    assert "grad_fn=<MulBackward0>" in repr(gm.ones(2, requires_grad=True) * 2)
    assert "dtype=gpumemnet.float64" in repr(gm.zeros(1, dtype=gm.float64))
    assert repr(gm.zeros(2, 3, device="meta")) == "tensor(..., device='meta', size=(2, 3))"  # PyTorch's order


def test_meta_tensors_have_shapes_but_no_data():
    m = gm.ones(3, 4, device="meta")
    r = (m @ m.T + 1).sum(dim=0)
    assert r.shape == (3,) and r.device == "meta"
    with pytest.raises(RuntimeError, match="meta"):
        m.numpy()
    with pytest.raises(RuntimeError, match="meta"):
        r[0].item()
    with pytest.raises(RuntimeError, match="no data"):
        m.to("cpu")


def test_mixed_devices_are_refused():
    with pytest.raises(RuntimeError, match="same device"):
        gm.ones(3) + gm.ones(3, device="meta")


def test_cat_and_stack():
    a, b = np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones((1, 3), np.float32)
    np.testing.assert_array_equal(gm.cat([gm.tensor(a), gm.tensor(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(gm.stack([gm.tensor(a), gm.tensor(a)], dim=1).numpy(), np.stack([a, a], 1))
    np.testing.assert_array_equal(gm.stack([gm.tensor(a)] * 3, dim=-1).numpy(), np.stack([a] * 3, -1))
    with pytest.raises(ValueError, match="same shape"):
        gm.stack([gm.tensor(a), gm.tensor(b)])
    with pytest.raises(ValueError):
        gm.cat([gm.tensor(a), gm.tensor(b.T)])


# ---- OpenMP's wait policy --------------------------------------------------------------------------------------
@pytest.mark.parametrize("given, seen", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_import_makes_idle_openmp_threads_sleep_unless_told_otherwise(given, seen):
    """Spinning OpenMP threads make a busy machine 10-30x slower (benchmarks/omp_wait_policy.py): the import sets
    OMP_WAIT_POLICY=PASSIVE before libgomp loads, and keeps a policy the user chose."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = "import os, gpumemnet; print(os.environ['OMP_WAIT_POLICY'])"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == seen


@pytest.mark.parametrize("first, policy, warns", [("ctypes.CDLL('libgomp.so.1')", None, True),
                                                  ("ctypes.CDLL('libgomp.so.1')", "PASSIVE", False),
                                                  ("None", None, False)])
def test_import_after_another_librarys_openmp_warns_once(first, policy, warns):
    """A libgomp loaded before gpumemnet (torch imported first) keeps its own wait policy, and its spinning threads
    slowed a Linear layer 3x: the import says so, once, and names the remedies; not when the user set a policy, nor
    when gpumemnet loads libgomp itself."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    code = f"import ctypes; {first}; import gpumemnet; import gpumemnet.nn; print('imported')"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "imported", r.stderr
    said = r.stderr.count("OpenMP's library was loaded before gpumemnet")
    assert said == (1 if warns else 0), r.stderr
    if warns:
        assert "libgomp.so.1" in r.stderr and "OMP_WAIT_POLICY=PASSIVE" in r.stderr and "before torch" in r.stderr


def test_tensor_of_numpy_scalar_keeps_its_dtype():
    # PyTorch: torch.tensor(np.float64(1.5)) is float64 (a Python float would be float32)
    assert gm.tensor(np.float64(1.5)).dtype == gm.float64
    assert gm.tensor(np.float32(1.5)).dtype == gm.float32
    assert gm.tensor(1.5).dtype == gm.float32
    assert float(gm.tensor(np.float64(0.1))) == 0.1


@pytest.mark.parametrize("shape,as_list", [((0, 2 ** 62), []), ((3, 0), [[], [], []]), ((0,), []),
                                           ((2, 3, 0, 4), [[[], [], []], [[], [], []]])])
def test_repr_and_tolist_of_an_empty_tensor_read_no_data(shape, as_list):
    # gm.zeros(0, 2**62) allocates nothing, and NumPy cannot even describe such an array: PyTorch's forms
    t = gm.zeros(*shape)
    assert repr(t) == ("tensor([])" if len(shape) == 1 else f"tensor([], size={shape})")
    assert t.tolist() == as_list
