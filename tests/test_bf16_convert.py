"""float32 <-> bfloat16 casts of contiguous runs (kernels/cpu/bf16_convert.c: AVX-512 where the CPU has it, chosen at
run time) against a NumPy reference of round-to-nearest-even written here and against PyTorch: every special value
(ties both ways, the largest finite values that round to inf, subnormals, signed zeros, infs, nans with payloads),
every tail length of a 16-lane vector, strided runs (the generated loops), and both directions."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C


def rne_bf16_bits(f32):
    """float32 array -> uint16 bfloat16 bits: round to nearest even; a nan stays a quiet nan."""
    x = f32.view(np.uint32).astype(np.uint64)
    rounded = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF
    nan = (x & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (x >> 16) | 0x40, rounded).astype(np.uint16)


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38, 1e-40, -1e-40,
                    1.17549435e-38, 65504.0, 1.00390625, 1.01171875, 1.0078125 + 2 ** -9], np.float32)
PAYLOAD_NANS = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7FBFFFFF, 0xFFFFFFFF], np.uint32).view(np.float32)
TIES = (np.arange(64, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # exactly halfway: even / odd mantissas


def values(n, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n).astype(np.float32) * np.float32(10.0) ** rng.integers(-40, 38, n).astype(np.float32)
    pool = np.concatenate([SPECIAL, PAYLOAD_NANS, TIES])
    v[rng.integers(0, n, n // 4)] = rng.choice(pool, n // 4)
    return v


def bf16_bits(b):
    f = _C.empty(b.shape, 0, "cpu")
    _C.copy_(f, b)  # bfloat16 -> float32 is exact: the bits come back in the upper half
    return (np.array(f.numpy()).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("n", list(range(0, 40)) + [1000, 65537, 300001])
def test_f32_to_bf16_rounds_to_nearest_even_at_every_length(n):
    a = values(n, seed=n)
    got = bf16_bits(gm.from_numpy(a).to(gm.bfloat16))
    np.testing.assert_array_equal(got, rne_bf16_bits(a))


def test_the_specials_one_by_one():
    a = np.concatenate([SPECIAL, PAYLOAD_NANS, TIES, SPECIAL])  # 16+ lanes: the vector path
    np.testing.assert_array_equal(bf16_bits(gm.from_numpy(a).to(gm.bfloat16)), rne_bf16_bits(a))


@pytest.mark.parametrize("n", [1, 15, 16, 17, 33, 70001])
def test_bf16_to_f32_is_exact(n):
    a = values(n, seed=100 + n)
    b = gm.from_numpy(a).to(gm.bfloat16)
    back = np.array(b.to(gm.float32).numpy())
    np.testing.assert_array_equal(back.view(np.uint32), rne_bf16_bits(a).astype(np.uint32) << 16)


def test_strided_runs_match_contiguous_ones():
    a = values(4096, seed=7).reshape(64, 64)
    t = gm.from_numpy(a)
    tt = t.t()  # transposed: strided runs take the generated loops
    got = bf16_bits(tt.to(gm.bfloat16).contiguous())
    np.testing.assert_array_equal(got, rne_bf16_bits(np.ascontiguousarray(a.T)))
    back = np.array(t.to(gm.bfloat16).t().to(gm.float32).numpy())
    np.testing.assert_array_equal(back.view(np.uint32), rne_bf16_bits(np.ascontiguousarray(a.T)).astype(np.uint32)
                                  << 16)


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    a = values(100003, seed=9)
    a = a[~np.isnan(a)]  # PyTorch's nan payloads are its own business
    ours = np.array(gm.from_numpy(a).to(gm.bfloat16).to(gm.float32).numpy())
    theirs = torch.from_numpy(a).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))
