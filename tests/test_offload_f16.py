"""float16 conversions of the mixed-dtype CPU Adam (kernels/cpu/optim.c adam_mixed_f16_loop): where the CPU has
AVX-512F or F16C the tile widens and rounds in hardware, elsewhere in software (gm_half_to_float/gm_float_to_half).
Either way the result must be NumPy's float16 <-> float32 conversion (exact widening; round to nearest even,
subnormals kept, overflow to inf), on every half bit pattern and on the float32 values where rounding is delicate,
at lengths that leave a tail after the 16- and 8-lane blocks and the 1024-element tiles."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

HP = (1e-2, 0.9, 0.999, 1e-8, 0.0, False, False, False)


def _half(a):
    return gm.tensor(np.ascontiguousarray(a, dtype=np.float16))  # a copy: the mixed step writes into the stage


@pytest.mark.parametrize("n", [65536, 65536 + 13, 1031])
def test_every_half_gradient_widens_exactly(n):
    bits = np.arange(n, dtype=np.uint32) % 65536
    g16 = bits.astype(np.uint16).view(np.float16)
    rng = np.random.default_rng(1)
    master = gm.from_numpy(rng.standard_normal(n).astype(np.float32))
    ref = master.clone()
    m, v, rm, rv = gm.zeros(n), gm.zeros(n), gm.zeros(n), gm.zeros(n)
    stage = _half(g16)
    _C.adam_step_mixed_(stage, master, m, v, None, 1, *HP)
    _C.adam_step_([ref], [gm.from_numpy(g16.astype(np.float32))], [rm], [rv], None, [1], *HP)
    for got, want in ((master, ref), (m, rm), (v, rv)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())  # nan positions must match too


def _delicate_floats():
    """float32 values around float16's rounding boundaries: ties (odd and even), subnormal halves, the smallest
    half and half of it, the overflow threshold 65520 and its neighbours, float32 subnormals, zeros (not
    infinities: weight decay 0 still multiplies the master by 0)."""
    f = np.float32
    vals = [0.0, -0.0, 3.4e38, 65504.0, 65519.996, 65520.0, 65536.0, 1e10, 2.0 ** -24, 2.0 ** -25,
            2.0 ** -25 * 1.0000001, 2.0 ** -26, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 1e-45, 1e-40, 6e-8, 3e-8]
    # exact ties between neighbouring halves: the float32 midpoint of h and nextafter(h)
    h = np.arange(0, 0x7c00, 37, dtype=np.uint16).view(np.float16)
    h2 = np.nextafter(h, np.float16(np.inf))
    mids = ((h.astype(np.float64) + h2.astype(np.float64)) / 2).astype(f)
    near = np.concatenate([mids, np.nextafter(mids, f(np.inf)), np.nextafter(mids, f(-np.inf))])
    rng = np.random.default_rng(2)
    rand = (rng.standard_normal(4000) * np.exp(rng.uniform(-20, 12, 4000))).astype(f)
    a = np.concatenate([np.array(vals, dtype=f), near, rand])
    return np.concatenate([a, -a])


@pytest.mark.parametrize("tail", [0, 1, 7, 15])
def test_parameter_is_the_master_rounded_to_nearest_even(tail):
    """lr 0 leaves the master as it was (up to the sign of a zero), so the parameter written over the gradient
    is the master as NumPy rounds it to float16."""
    a = _delicate_floats()
    a = a[: len(a) - len(a) % 16 + tail] if len(a) % 16 >= tail else a
    n = len(a)
    master = gm.from_numpy(a.copy())
    m, v = gm.zeros(n), gm.zeros(n)
    stage = _half(np.zeros(n, dtype=np.float16))
    _C.adam_step_mixed_(stage, master, m, v, None, 1, 0.0, 0.9, 0.999)
    after = master.numpy()
    np.testing.assert_array_equal(np.abs(after), np.abs(a))
    want = after.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(stage.numpy().view(np.uint16), want)


def test_nan_master_rounds_to_a_nan():
    n = 33
    a = np.full(n, np.nan, dtype=np.float32)
    a[::2] = -np.nan
    master = gm.from_numpy(a)
    stage = _half(np.ones(n, dtype=np.float16))
    _C.adam_step_mixed_(stage, master, gm.zeros(n), gm.zeros(n), None, 1, 1e-3, 0.9, 0.999)
    assert np.isnan(stage.numpy()).all()


def test_eps_defaults_to_1e_8():
    """eps omitted is 1e-8 as documented: a zero gradient leaves the parameter as it was (with eps 0 the update
    is 0/0, a nan; the binding once left it 0)."""
    n = 40
    a = np.arange(n, dtype=np.float32)
    for dt in (np.float32, np.float16):
        master = gm.from_numpy(a.copy())
        stage = gm.from_numpy(np.zeros(n, dtype=dt))
        _C.adam_step_mixed_(stage, master, gm.zeros(n), gm.zeros(n), None, 1, 1e-3, 0.9, 0.999)
        np.testing.assert_array_equal(master.numpy(), a)
        np.testing.assert_array_equal(stage.numpy(), a.astype(dt))
