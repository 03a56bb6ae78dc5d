"""Tensor.untyped_storage() / storage(), Tensor.view(dtype) and the complex dtype names, against PyTorch; and
safetensors.torch (which finds shared tensors by storage and loads through UntypedStorage.from_file, asarray and
view(dtype)) saving and loading a model under the torch alias."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_storages_describe_the_memory_as_pytorchs_do():
    for L in (torch, gm):
        t = L.tensor(A)
        s, v = t.untyped_storage(), t[1, 1:].untyped_storage()
        assert s.nbytes() == v.nbytes() == 96 and s.data_ptr() == v.data_ptr() == t.data_ptr()
        assert t[1].data_ptr() == s.data_ptr() + 48
        assert t.clone().untyped_storage().data_ptr() != s.data_ptr()
        with warnings.catch_warnings():  # PyTorch warns once per process: whichever test asked first saw it
            warnings.simplefilter("ignore")
            ts = t.storage()
        assert ts.size() == 24 and ts.element_size() == 4 and ts.dtype == L.float32 and ts.data_ptr() == s.data_ptr()
        assert s[8:12].nbytes() == 4 and s[8:12].data_ptr() == s.data_ptr() + 8
        assert L.asarray(s[4:8], dtype=L.uint8).view(L.float32).item() == 1.0  # element 1 of A, through its bytes
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        gm.ones(2).storage()


VIEWS = {"same size": lambda L, t: t.view(L.int32), "to bytes": lambda L, t: t.view(L.uint8),
         "to halves": lambda L, t: t.view(L.int16)[1, 2], "slice to halves": lambda L, t: t[:, 1:].view(L.float16),
         "dtype keyword": lambda L, t: t.view(dtype=L.float32),
         "bytes back": lambda L, t: t.view(L.uint8)[..., 4:8].view(L.float32),
         "bytes to int64": lambda L, t: t.view(L.uint8).view(L.int64)}


@pytest.mark.parametrize("case", VIEWS)
def test_view_as_a_dtype_matches_pytorch(case):
    want, got = VIEWS[case](torch, torch.tensor(A)), VIEWS[case](gm, gm.tensor(A))
    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.float().numpy() if got.dtype == gm.float16 else got.numpy(),
                                  want.float().numpy() if want.dtype == torch.float16 else want.numpy())
    t = gm.tensor(A)
    assert VIEWS[case](gm, t).data_ptr() >= t.data_ptr()  # a view: the same memory


def test_view_as_a_dtype_refuses_what_pytorch_refuses():
    for L in (torch, gm):
        with pytest.raises(RuntimeError, match="stride"):
            L.tensor(A).transpose(1, 2).view(L.uint8)
        with pytest.raises(RuntimeError, match="divisible"):
            L.tensor(A)[..., :3].contiguous().view(L.int64)
    with pytest.raises(RuntimeError, match="requires grad"):
        gm.tensor(A, requires_grad=True).view(gm.int32)


def test_complex_dtypes_are_those_of_complex_tensors():
    assert gm.complex64.is_complex and gm.cfloat is gm.complex64 and not gm.float32.is_complex
    assert gm.complex64.itemsize == torch.complex64.itemsize
    assert gm.zeros(2, dtype=gm.complex64).dtype is gm.complex64  # _core/complex.py
    assert gm.ones(2, dtype=gm.complex64).tolist() == [1 + 0j, 1 + 0j]
    with pytest.raises(TypeError, match="no complex tensors"):  # the C core's tensors are real
        gm.arange(3, dtype=gm.complex64)


def test_safetensors_saves_and_loads_a_model_under_the_alias(tmp_path):
    pytest.importorskip("safetensors")
    script = textwrap.dedent(f"""
        import gpumemnet as gm
        gm.as_torch()
        import torch, torch.nn as nn
        from safetensors.torch import save_file, load_file, save_model, load_model
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))
        m(torch.randn(2, 3, 3, 3))
        path = {str(tmp_path / "m.safetensors")!r}
        save_file(m.state_dict(), path, metadata={{"epoch": "3"}})
        sd = load_file(path)
        ref = m.state_dict()
        assert set(sd) == set(ref)
        for k in ref:
            assert sd[k].dtype == ref[k].dtype and torch.equal(sd[k], ref[k]), k
        m2 = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))
        m2.load_state_dict(sd)
        save_model(m2, path + "2")
        missing, unexpected = load_model(m, path + "2")
        assert not missing and not unexpected
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
