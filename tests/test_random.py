"""The Philox generator (csrc/random.c, kernels/cpu/philox.{c,h}): known answers, the stream exactly as
kernels/cpu/philox.h defines it (recomputed here in pure Python), statistics, state handling, errors.
Goes through gpumemnet._C so it does not depend on the Python API being there."""
import math

import numpy as np
import pytest

from gpumemnet import _C

F32, F64, F16, BF16, I64, BOOL = range(6)
MASK = 0xFFFFFFFF


# ---- a pure-Python Philox4x32-10 and stream: the reference the C code is compared with -----------------------

def philox(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK, p1 & MASK, ((p0 >> 32) ^ c3 ^ k1) & MASK, p0 & MASK
        k0 = (k0 + 0x9E3779B9) & MASK
        k1 = (k1 + 0xBB67AE85) & MASK
    return c0, c1, c2, c3


def block(seed, b):
    b %= 2**64
    return philox((b & MASK, b >> 32, 0, 0), (seed & MASK, seed >> 32))


def ref_stream(seed, offset, n, dtype, dist):
    """Elements 0..n-1 of a fill starting at block `offset`, as Python floats (before rounding to dtype)."""
    out = []
    if dtype == F64:
        for i in range(n):
            x = block(seed, offset + i // 2)
            h = i % 2
            if dist == "uniform":
                out.append((((x[2 * h] << 32) | x[2 * h + 1]) >> 11) * 2.0**-53)
            else:
                u1 = ((((x[0] << 32) | x[1]) >> 11) + 1) * 2.0**-53
                u2 = (((x[2] << 32) | x[3]) >> 11) * 2.0**-53
                r, t = math.sqrt(-2.0 * math.log(u1)), 2 * math.pi * u2
                out.append(r * math.sin(t) if h else r * math.cos(t))
    else:
        bits = {F32: 24, F16: 11, BF16: 8}[dtype]
        for i in range(n):
            x = block(seed, offset + i // 4)
            j = i % 4
            if dist == "uniform":
                out.append((x[j] >> (32 - bits)) * 2.0**-bits)
            else:
                p = j & 2
                u1 = (x[p] + 1) * 2.0**-32
                u2 = x[p + 1] * 2.0**-32
                r, t = math.sqrt(-2.0 * math.log(u1)), 2 * math.pi * u2
                out.append(r * math.sin(t) if j & 1 else r * math.cos(t))
    return np.array(out)


def blocks(dtype, n):
    per = 2 if dtype == F64 else 4
    return -(-n // per)


def to_np(t):
    """float64 NumPy copy of any tensor (bfloat16 has no NumPy type: go through a float32 tensor)."""
    if t._dtype == BF16:
        f = _C.empty(t.shape, F32, "cpu")
        _C.copy_(f, t)
        t = f
    return np.array(t.numpy(), dtype=np.float64)


def as_dtype(values, dtype):
    """Round float64 values to dtype as the kernels do (double -> float -> 16 bits, nearest even)."""
    if dtype == F64:
        return values
    f = values.astype(np.float32)
    if dtype == F32:
        return f.astype(np.float64)
    if dtype == F16:
        return f.astype(np.float16).astype(np.float64)
    b = f.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


@pytest.fixture(autouse=True)
def keep_state():
    """Tests change the global generator; leave it as found."""
    s = _C.get_rng_state()
    yield
    _C.set_rng_state(*s)


# ---- the Philox core ------------------------------------------------------------------------------------------

KAT = [  # Random123 kat_vectors for philox4x32_10
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox_known_answers(ctr, key, expected):
    assert _C._philox_block(ctr, key) == expected
    assert philox(ctr, key) == expected  # and the Python reference used below is right too


def test_philox_block_matches_reference_on_random_inputs():
    rng = np.random.default_rng(1)
    for _ in range(50):
        ctr = tuple(int(v) for v in rng.integers(0, 2**32, 4))
        key = tuple(int(v) for v in rng.integers(0, 2**32, 2))
        assert _C._philox_block(ctr, key) == philox(ctr, key)


def test_philox_block_hook_rejects_bad_arguments():
    with pytest.raises(TypeError):
        _C._philox_block((0, 0, 0), (0, 0))


# ---- the stream, exactly -------------------------------------------------------------------------------------

SEEDS = [0, 1, 42, 2**63 + 12345, 67280421310721]


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
@pytest.mark.parametrize("seed", SEEDS)
def test_rand_stream_is_exactly_as_specified(dtype, seed):
    n = 23  # not a multiple of the block size: the last block is partly used
    _C.set_rng_state(seed, 5)
    t = _C.rand((n,), dtype, "cpu")
    assert _C.get_rng_state() == (seed, 5 + blocks(dtype, n))
    np.testing.assert_array_equal(to_np(t), ref_stream(seed, 5, n, dtype, "uniform"))


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_randn_stream_is_exactly_as_specified(dtype):
    n = 37
    _C.set_rng_state(7, 11)
    t = _C.randn((n,), dtype, "cpu")
    assert _C.get_rng_state() == (7, 11 + blocks(dtype, n))
    ref = as_dtype(ref_stream(7, 11, n, dtype, "normal"), dtype)
    # Python's math and the C kernel call the same libm: equal up to an ulp of the double
    tol = {F64: 1e-15, F32: 1e-7, F16: 1e-3, BF16: 8e-3}[dtype]
    np.testing.assert_allclose(to_np(t), ref, rtol=tol, atol=tol)


def test_stream_is_counter_based_offset_skips_blocks():
    _C.manual_seed(3)
    long = to_np(_C.rand((40,), F32, "cpu"))
    _C.set_rng_state(3, 2)  # skip two blocks = 8 float32 elements
    tail = to_np(_C.rand((32,), F32, "cpu"))
    np.testing.assert_array_equal(tail, long[8:])
    _C.set_rng_state(3, 4)  # float64 takes 2 per block
    d = to_np(_C.rand((6,), F64, "cpu"))
    np.testing.assert_array_equal(d, ref_stream(3, 4, 6, F64, "uniform"))


def test_calls_consume_whole_blocks():
    _C.manual_seed(5)
    _C.rand((5,), F32, "cpu")  # 2 blocks, the last half unused
    assert _C.get_rng_state() == (5, 2)
    b = to_np(_C.rand((4,), F32, "cpu"))
    np.testing.assert_array_equal(b, ref_stream(5, 2, 4, F32, "uniform"))
    _C.rand((0,), F32, "cpu")
    assert _C.get_rng_state() == (5, 3)
    _C.randn((3,), F64, "cpu")
    assert _C.get_rng_state() == (5, 5)


def test_multidimensional_fill_is_the_flat_stream():
    _C.manual_seed(9)
    a = to_np(_C.rand((3, 5, 2), F32, "cpu"))
    _C.manual_seed(9)
    b = to_np(_C.rand((30,), F32, "cpu"))
    np.testing.assert_array_equal(a.ravel(), b)


def test_offset_wraps_modulo_2_64():
    _C.set_rng_state(1, 2**64 - 1)
    t = to_np(_C.rand((8,), F32, "cpu"))
    assert _C.get_rng_state() == (1, 1)
    np.testing.assert_array_equal(t, ref_stream(1, 2**64 - 1, 8, F32, "uniform"))


# ---- reproducibility and state ---------------------------------------------------------------------------------

def test_same_seed_same_numbers_different_seed_or_offset_different():
    _C.manual_seed(123)
    a = to_np(_C.randn((100,), F32, "cpu"))
    _C.manual_seed(123)
    b = to_np(_C.randn((100,), F32, "cpu"))
    np.testing.assert_array_equal(a, b)
    _C.manual_seed(124)
    assert not np.array_equal(a, to_np(_C.randn((100,), F32, "cpu")))
    _C.set_rng_state(123, 1)
    assert not np.array_equal(a, to_np(_C.randn((100,), F32, "cpu")))
    c = to_np(_C.randn((100,), F32, "cpu"))  # consecutive calls continue the stream
    assert not np.array_equal(a, c)


def test_get_set_state_round_trip():
    _C.manual_seed(77)
    _C.rand((10,), F32, "cpu")
    state = _C.get_rng_state()
    assert state == (77, 3)
    x = to_np(_C.rand((50,), F64, "cpu"))
    _C.set_rng_state(*state)
    np.testing.assert_array_equal(x, to_np(_C.rand((50,), F64, "cpu")))
    _C.set_rng_state(2**64 - 1, 2**64 - 1)
    assert _C.get_rng_state() == (2**64 - 1, 2**64 - 1)


def test_manual_seed_resets_offset_and_wraps_negative_seeds():
    _C.set_rng_state(5, 100)
    _C.manual_seed(5)
    assert _C.get_rng_state() == (5, 0)
    _C.manual_seed(-1)
    assert _C.get_rng_state() == (2**64 - 1, 0)
    _C.manual_seed(np.int64(8))
    assert _C.get_rng_state() == (8, 0)


def test_default_seed_is_documented_one():
    # the import-time seed is PyTorch's default; a fresh interpreter starts at (67280421310721, 0)
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "from gpumemnet import _C; print(_C.get_rng_state())"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(67280421310721, 0)"


def test_result_does_not_depend_on_thread_count():
    n_threads = _C.get_num_threads()
    try:
        _C.set_num_threads(1)
        _C.manual_seed(2)
        a = to_np(_C.randn((100_003,), F32, "cpu"))
        _C.set_num_threads(4)
        _C.manual_seed(2)
        b = to_np(_C.randn((100_003,), F32, "cpu"))
    finally:
        _C.set_num_threads(n_threads)
    np.testing.assert_array_equal(a, b)


# ---- statistics -----------------------------------------------------------------------------------------------

N = 1_000_000


@pytest.mark.parametrize("dtype", [F32, F64])
def test_rand_range_and_moments(dtype):
    _C.manual_seed(2024)
    x = to_np(_C.rand((N,), dtype, "cpu"))
    assert x.min() >= 0.0 and x.max() < 1.0
    # 5 sigma bounds: mean sd = sqrt(1/12/N), sample variance sd = sqrt((1/80 - 1/144)/N)
    assert abs(x.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(x.var() - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / N)
    hist, _ = np.histogram(x, bins=100, range=(0, 1))
    chi2 = ((hist - N / 100) ** 2 / (N / 100)).sum()
    assert chi2 < 99 + 5 * math.sqrt(2 * 99)  # chi-square, 99 degrees of freedom


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_rand_narrow_dtypes_stay_below_one(dtype):
    _C.manual_seed(4)
    x = to_np(_C.rand((200_000,), dtype, "cpu"))
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 0.01


@pytest.mark.parametrize("dtype", [F32, F64])
def test_randn_moments_and_distribution(dtype):
    _C.manual_seed(99)
    z = to_np(_C.randn((N,), dtype, "cpu"))
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    skew = ((z - z.mean()) ** 3).mean() / z.std() ** 3
    kurt = ((z - z.mean()) ** 4).mean() / z.var() ** 2
    assert abs(skew) < 5 * math.sqrt(6 / N)
    assert abs(kurt - 3) < 5 * math.sqrt(24 / N)
    # Kolmogorov-Smirnov against the normal CDF (critical value at the 0.1% level)
    s = np.sort(z[:100_000])
    cdf = 0.5 * (1 + np.vectorize(math.erf)(s / math.sqrt(2)))
    k = np.arange(1, len(s) + 1) / len(s)
    d = max(np.abs(k - cdf).max(), np.abs(k - 1 / len(s) - cdf).max())
    assert d < 1.95 / math.sqrt(len(s))


def test_uniform_and_normal_fill_with_parameters():
    t = _C.empty((N,), F32, "cpu")
    assert _C.uniform_(t, -3.0, 5.0) is t
    x = to_np(t)
    assert x.min() >= -3 and x.max() < 5
    assert abs(x.mean() - 1) < 5 * 8 * math.sqrt(1 / 12 / N)
    assert _C.normal_(t, 2.0, 0.5) is t
    z = to_np(t)
    assert abs(z.mean() - 2) < 5 * 0.5 / math.sqrt(N)
    assert abs(z.std() - 0.5) < 5 * 0.5 * math.sqrt(1 / (2 * N))


def test_uniform_fill_values_are_the_scaled_stream():
    t = _C.empty((9,), F64, "cpu")
    _C.set_rng_state(6, 0)
    _C.uniform_(t, 2.0, 3.5)
    np.testing.assert_array_equal(to_np(t), 2.0 + 1.5 * ref_stream(6, 0, 9, F64, "uniform"))
    _C.set_rng_state(6, 0)
    _C.normal_(t, -1.0, 3.0)
    np.testing.assert_allclose(to_np(t), -1.0 + 3.0 * ref_stream(6, 0, 9, F64, "normal"), rtol=1e-14)


@pytest.mark.parametrize("dtype,eps", [(F32, 2.0**-23), (F64, 2.0**-52), (F16, 2.0**-10), (BF16, 2.0**-7)])
def test_uniform_never_returns_high_after_rounding(dtype, eps):
    # [1, 1 + eps) holds exactly one value of the dtype: 1. Round-to-nearest alone would give 1 + eps half the time.
    t = _C.empty((4000,), dtype, "cpu")
    _C.uniform_(t, 1.0, 1.0 + eps)
    assert set(np.unique(to_np(t))) == {1.0}


def test_uniform_with_low_equal_high_and_normal_with_zero_std():
    t = _C.empty((10,), F32, "cpu")
    _C.uniform_(t, 2.5, 2.5)
    assert (to_np(t) == 2.5).all()
    _C.normal_(t, -4.0, 0.0)
    assert (to_np(t) == -4.0).all()


def test_non_contiguous_fill_follows_logical_order():
    base = _C.empty((4, 6), F32, "cpu")
    tt = base._transpose(0, 1)  # shape (6, 4), strides (1, 6)
    assert not tt._is_contiguous()
    _C.manual_seed(8)
    _C.uniform_(tt)
    _C.manual_seed(8)
    ref = to_np(_C.rand((6, 4), F32, "cpu"))
    np.testing.assert_array_equal(to_np(tt), ref)
    np.testing.assert_array_equal(to_np(base), ref.T)
    assert _C.get_rng_state() == (8, 6)


def test_in_place_fill_bumps_version():
    t = _C.empty((3,), F32, "cpu")
    v = t._version
    _C.normal_(t)
    _C.uniform_(t)
    assert t._version == v + 2


# ---- meta ------------------------------------------------------------------------------------------------------

def test_meta_allocates_and_advances_like_cpu():
    _C.manual_seed(10)
    _C.rand((7, 3), F32, "cpu")
    cpu_state = _C.get_rng_state()
    _C.manual_seed(10)
    m = _C.rand((7, 3), F32, "meta")
    assert m._device == "meta" and m.shape == (7, 3) and m._dtype == F32
    assert _C.get_rng_state() == cpu_state
    # after a meta rehearsal the next real draw continues where the real run would
    x = to_np(_C.randn((5,), F64, "cpu"))
    _C.set_rng_state(*cpu_state)
    np.testing.assert_array_equal(x, to_np(_C.randn((5,), F64, "cpu")))
    t = _C.empty((5, 2), F16, "meta")
    _C.normal_(t, 0.0, 1.0)
    _C.uniform_(t._transpose(0, 1))
    assert _C.get_rng_state() == (cpu_state[0], cpu_state[1] + 2 * 3 + 3)


def test_meta_allocates_the_same_bytes():
    before = _C.memory_allocated("meta")
    m = _C.randn((128, 33), F64, "meta")
    assert _C.memory_allocated("meta") - before >= 128 * 33 * 8
    del m
    assert _C.memory_allocated("meta") == before


# ---- errors ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [I64, BOOL, "int64"])
def test_integer_dtypes_are_rejected(dtype):
    state = _C.get_rng_state()
    with pytest.raises(TypeError, match="floating-point"):
        _C.rand((3,), dtype, "cpu")
    with pytest.raises(TypeError, match="floating-point"):
        _C.randn((3,), dtype, "meta")
    t = _C.empty((3,), dtype, "cpu")
    with pytest.raises(TypeError, match="floating-point"):
        _C.uniform_(t, 0.0, 1.0)
    with pytest.raises(TypeError, match="floating-point"):
        _C.normal_(t)
    assert _C.get_rng_state() == state  # a failed call draws nothing


def test_bad_parameters():
    t = _C.empty((3,), F32, "cpu")
    state = _C.get_rng_state()
    with pytest.raises(ValueError, match="low <= high"):
        _C.uniform_(t, 2.0, 1.0)
    with pytest.raises(ValueError, match="std must be non-negative"):
        _C.normal_(t, 0.0, -1.0)
    with pytest.raises(ValueError, match="finite"):
        _C.uniform_(t, 0.0, float("inf"))
    with pytest.raises(ValueError, match="finite"):
        _C.normal_(t, float("nan"), 1.0)
    with pytest.raises(ValueError, match="does not fit float16"):
        _C.uniform_(_C.empty((3,), F16, "cpu"), 0.0, 1e6)
    with pytest.raises(ValueError, match="does not fit"):
        _C.uniform_(_C.empty((3,), F64, "cpu"), -1e308, 1e308)
    with pytest.raises(TypeError):
        _C.uniform_([1.0, 2.0], 0.0, 1.0)
    assert _C.get_rng_state() == state


def test_bad_seed_and_state():
    with pytest.raises(ValueError):
        _C.manual_seed(2**64)
    with pytest.raises(ValueError):
        _C.manual_seed(-(2**63) - 1)
    with pytest.raises(TypeError):
        _C.manual_seed("1")
    with pytest.raises(TypeError):
        _C.manual_seed(1.5)
    with pytest.raises(ValueError):
        _C.set_rng_state(-1, 0)
    with pytest.raises(ValueError):
        _C.set_rng_state(0, 2**64)
    with pytest.raises(TypeError):
        _C.set_rng_state(0)


def test_bad_shape_or_device():
    with pytest.raises(ValueError):
        _C.rand((2, -1), F32, "cpu")
    with pytest.raises(ValueError):
        _C.randn((2,), F32, "tpu")


def test_cuda_matches_cpu_stream():
    if _C._cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    for dtype in (F32, F64, F16, BF16):
        for fn, dist in ((_C.rand, "uniform"), (_C.randn, "normal")):
            _C.set_rng_state(31, 4)
            c = to_np(fn((1001,), dtype, "cpu"))
            _C.set_rng_state(31, 4)
            g = fn((1001,), dtype, "cuda:0")
            assert _C.get_rng_state() == (31, 4 + blocks(dtype, 1001))
            h = _C.empty(g.shape, dtype, "cpu")
            _C.copy_(h, g)
            if dist == "uniform":
                np.testing.assert_array_equal(to_np(h), c)
            else:  # libm and libdevice may differ in the last bit of log/sin/cos
                tol = {F64: 1e-14, F32: 1e-6, F16: 1e-3, BF16: 8e-3}[dtype]
                np.testing.assert_allclose(to_np(h), c, rtol=tol, atol=tol)
