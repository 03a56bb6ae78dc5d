"""PyTorch semantics that scripts written for PyTorch rely on (stop 45: the gaps left by rounds 15-16 and what
round 17 of the hunts found), each checked against PyTorch itself: the same function run under both libraries
and the results compared."""
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _autocast_trace(L):
    """What a script sees of autocast's state when it switches it by hand (torch.set_autocast_enabled / dtype, as
    PyTorch's own autocast.__enter__ does) and nests regions for other device types: the dtypes of a product and
    the queries' answers, step by step."""
    a, b = L.ones(4, 4), L.ones(4, 4)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # autocast("cuda") on a machine without CUDA: warned and off in both
        with L.autocast("cpu", dtype=L.bfloat16):
            with L.autocast("cuda", enabled=False):  # another device type's region leaves the CPU's on
                seen.append((L.mm(a, b).dtype, L.is_autocast_enabled("cpu")))
            with L.autocast("cuda"):
                seen.append((L.mm(a, b).dtype, L.is_autocast_enabled("cpu")))
            with L.autocast("cpu", enabled=False):
                seen.append(L.mm(a, b).dtype)
            L.set_autocast_enabled("cpu", False)
            seen.append((L.mm(a, b).dtype, L.is_autocast_enabled("cpu")))
            L.set_autocast_enabled("cpu", True)
            L.set_autocast_dtype("cpu", L.float16)
            seen.append((L.mm(a, b).dtype, L.get_autocast_dtype("cpu")))
        seen.append((L.get_autocast_dtype("cpu"), L.is_autocast_enabled("cpu"), L.is_autocast_cache_enabled()))
        L.set_autocast_dtype("cpu", L.float16)  # a region that names no dtype takes the one set
        try:
            with L.autocast("cpu"):
                seen.append(L.mm(a, b).dtype)
        finally:
            L.set_autocast_dtype("cpu", L.bfloat16)
        L.set_autocast_enabled(True)  # the legacy one-argument form: CUDA's
        seen.append((L.is_autocast_enabled(), L.is_autocast_enabled("cuda"), L.is_autocast_enabled("cpu")))
        L.set_autocast_enabled(False)
        seen.append(L.is_autocast_enabled())
        with L.autocast("cpu", cache_enabled=False) as ac:
            seen.append((L.is_autocast_cache_enabled(), ac.device, ac.fast_dtype, ac._enabled, ac._cache_enabled))
        seen.append(L.is_autocast_cache_enabled())
    seen.append([L.autocast_increment_nesting(), L.autocast_increment_nesting(), L.autocast_decrement_nesting(),
                 L.autocast_decrement_nesting()])
    L.clear_autocast_cache()
    seen.append([L.amp.is_autocast_available(d) for d in ("cpu", "cuda", "xpu", "meta", "lazy")])
    return seen


def test_autocast_state_functions_and_nested_device_types():
    t, g = _both(_autocast_trace)
    assert repr(g) == repr(t).replace("torch.", "gpumemnet.")


def test_autocast_mode_module_and_bad_device_type():
    """torch.amp.autocast_mode is importable with its names; an unknown device type is PyTorch's RuntimeError."""
    import gpumemnet.amp.autocast_mode as gm_mode
    import torch.amp.autocast_mode as torch_mode
    for name in ("autocast", "custom_fwd", "custom_bwd", "is_autocast_available"):
        assert hasattr(gm_mode, name) and hasattr(torch_mode, name)
    for L in (torch, gm):
        with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
            L.amp.is_autocast_available("foo")
        with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
            L.set_autocast_enabled("foo", True)


def test_autocast_cache_disabled_still_casts_each_use():
    """autocast(cache_enabled=False): each use of a parameter casts it again (no cached copy outlives the op), and
    the values and gradients are the cached run's."""
    w0 = np.random.RandomState(0).standard_normal((8, 8)).astype(np.float32)

    def run(L, cache):
        w = L.tensor(w0, requires_grad=True)
        x = L.ones(2, 8)
        with L.autocast("cpu", dtype=L.bfloat16, cache_enabled=cache):
            y = (x @ w) @ w
        y.float().sum().backward()
        return y.float().detach().numpy(), w.grad.numpy()

    for cache in (True, False):
        (ty, tg), (gy, gg) = run(torch, cache), run(gm, cache)
        np.testing.assert_allclose(gy, ty, rtol=1e-2)
        np.testing.assert_allclose(gg, tg, rtol=2e-2, atol=1e-2)
    np.testing.assert_array_equal(run(gm, False)[0], run(gm, True)[0])
    from gpumemnet._core.autocast import _state
    w = gm.ones(8, 8, requires_grad=True)
    for cache, kept in ((False, 0), (True, 1)):
        with gm.autocast("cpu", dtype=gm.bfloat16, cache_enabled=cache):
            gm.ones(2, 8) @ w
            assert len(_state.cache) == kept  # the one bfloat16 copy of w, kept for the region's other uses
