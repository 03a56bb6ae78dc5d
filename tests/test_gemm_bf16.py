"""kernels/cpu/gemm_bf16.c called directly (ctypes: gemm_bf16 is an exported symbol of gpumemnet._C), against a
float64 product of the same bfloat16 values: every layout the callers pass (A or B transposed, both strided), sizes
that are not multiples of the tile unit's 16 / 32 (odd K, M of 1..48, N past the 256-column blocks), K past the
AMX path's 4096-element chunks, products large enough to be split among threads, products the AMX path computes
transposed (C^T = B^T A^T), beta 0 and 1, float32 and bfloat16 C, 1 and 2 threads; on every path the CPU has
(GPUMEMNET_GEMM_BF16 forces the AVX512-BF16 kernel or the portable one in a subprocess).

Sums are float32 sums of exact products: each result within K float32 roundings of float64 (bfloat16 C: plus half a
unit of bfloat16's last place). Operand memory past each row and column holds NaN, and C's padding a sentinel:
a kernel that reads past K or writes past N fails."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C


class BMat(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p), ("rs", ctypes.c_int64), ("cs", ctypes.c_int64)]


_lib = ctypes.CDLL(_C.__file__)
_lib.gemm_bf16.argtypes = [ctypes.c_int64] * 3 + [BMat, BMat, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64,
                                                  ctypes.c_int, ctypes.c_int]
_lib.gemm_bf16.restype = ctypes.c_int
_lib.gemm_bf16_native.restype = ctypes.c_int
_lib.gemm_bf16_amx.restype = ctypes.c_int
NAN16 = 0x7fc0


def bits(x):
    """float32 -> bfloat16 bits, rounded to nearest even (gm_float_to_bf16)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def value(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def operand(rng, rows, cols, layout):
    """(bits buffer, rs, cs, float64 values) of a (rows, cols) bfloat16 matrix stored as layout: 'n' rows
    contiguous, 't' transposed (columns contiguous), 's' strided both ways; padding is NaN."""
    v = bits(rng.standard_normal((rows, cols)).astype(np.float32))
    if layout == "n":
        buf = np.full((rows, cols + 3), NAN16, np.uint16)
        buf[:, :cols] = v
        rs, cs = cols + 3, 1
    elif layout == "t":
        buf = np.full((cols, rows + 5), NAN16, np.uint16)
        buf[:, :rows] = v.T
        rs, cs = 1, rows + 5
    else:
        buf = np.full((rows, 2 * cols + 1), NAN16, np.uint16)
        buf[:, :2 * cols:2] = v
        rs, cs = 2 * cols + 1, 2
    return buf, rs, cs, value(v).astype(np.float64)


def run_case(M, N, K, la, lb, c_bf16, beta, threads, seed=0):
    rng = np.random.default_rng(seed)
    A, ars, acs, a64 = operand(rng, M, K, la)
    B, brs, bcs, b64 = operand(rng, K, N, lb)
    ldc = N + 7
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    if c_bf16:
        C = np.full((M + 1, ldc), 0x1234, np.uint16)
        C[:M, :N] = bits(c0)
        cin = value(C[:M, :N]).astype(np.float64)
    else:
        C = np.full((M + 1, ldc), -7.25, np.float32)
        C[:M, :N] = c0
        cin = c0.astype(np.float64)
    guard = C.copy()
    st = _lib.gemm_bf16(M, N, K, BMat(A.ctypes.data, ars, acs), BMat(B.ctypes.data, brs, bcs), beta,
                        C.ctypes.data, ldc, c_bf16, threads)
    assert st == 0
    ref = a64 @ b64 + (cin if beta else 0)
    bound = (np.abs(a64) @ np.abs(b64) + (np.abs(cin) if beta else 0)) * (K + 2) * 2.0 ** -24 + 1e-30
    got = value(C[:M, :N]).astype(np.float64) if c_bf16 else C[:M, :N].astype(np.float64)
    if c_bf16:
        bound = bound + np.abs(ref) * 2.0 ** -8
    err = np.abs(got - ref)
    assert np.all(np.isfinite(got)), "NaN: padding was read"
    assert np.all(err <= bound), (M, N, K, la, lb, c_bf16, beta, threads, float((err / bound).max()))
    # nothing outside C's M x N block was written
    assert np.array_equal(C[:, N:], guard[:, N:]) and np.array_equal(C[M:], guard[M:])


# (M, N, K, A layout, B layout): conv forward (W @ cols), input-gradient (W^T @ dY), weight-gradient
# (dY @ cols^T), linear (x @ w^T, g^T @ x), square, tails of every size, K past one 4096 chunk
CASES = [(64, 300, 576, "n", "n"), (16, 257, 144, "n", "n"), (130, 70, 1152, "n", "n"), (33, 40, 99, "n", "n"),
         (576, 96, 64, "t", "n"), (47, 65, 33, "t", "n"), (64, 576, 300, "n", "t"), (17, 48, 31, "n", "t"),
         (40, 33, 70, "t", "t"), (1, 1, 1, "n", "n"), (5, 3, 7, "s", "s"), (48, 40, 17, "s", "n"),
         (31, 530, 16, "n", "n"), (40, 70, 9, "t", "n"), (96, 64, 5000, "n", "n"), (20, 40, 8300, "t", "t"), (128, 128, 128, "n", "n"),
         # large enough for two threads on the tile unit: C split by rows, by columns, and a bfloat16 C summed in
         # two K chunks for rows in groups (the partial sums of 320 rows x 96 columns at a time)
         (200, 130, 2600, "n", "t"), (70, 700, 1400, "t", "n"), (700, 100, 4100, "n", "n"),
         # a transposed A of many rows and few columns (and both transposed, above): computed as C^T = B^T A^T
         (300, 20, 96, "t", "n"), (2400, 48, 600, "t", "n")]


def _ids(c):
    return "x".join(map(str, c[:3])) + c[3] + c[4]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("c_bf16,beta", [(0, 0), (0, 1), (1, 0), (1, 1)], ids=["f32", "f32+C", "bf16", "bf16+C"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_gemm_bf16_against_float64(case, c_bf16, beta, threads):
    run_case(*case, c_bf16, beta, threads)


def test_gemm_bf16_empty_and_errors():
    A = np.zeros(4, np.uint16)
    C = np.full(4, 3.0, np.float32)
    am = BMat(A.ctypes.data, 2, 1)
    # K == 0: C = beta C
    assert _lib.gemm_bf16(2, 2, 0, am, am, 1, C.ctypes.data, 2, 0, 1) == 0 and np.all(C == 3.0)
    assert _lib.gemm_bf16(2, 2, 0, am, am, 0, C.ctypes.data, 2, 0, 1) == 0 and np.all(C == 0.0)
    assert _lib.gemm_bf16(-1, 2, 2, am, am, 0, C.ctypes.data, 2, 0, 1) != 0
    assert _lib.gemm_bf16(2, 2, 2, BMat(None, 2, 1), am, 0, C.ctypes.data, 2, 0, 1) != 0


def all_cases():
    for case in CASES:
        for c_bf16, beta in ((0, 0), (0, 1), (1, 0), (1, 1)):
            run_case(*case, c_bf16, beta, 2)


@pytest.mark.parametrize("path", ["native", "avx512", "portable"])
def test_gemm_bf16_each_path(path):
    """Every case on the best product this CPU has, the AVX512-BF16 kernel and the portable path (forced in a
    fresh process: the choice is made once)."""
    if path != "portable" and not _lib.gemm_bf16_native():
        pytest.skip("no AVX512-BF16 on this CPU")
    code = ("import sys; sys.path.insert(0, {!r}); import test_gemm_bf16 as t\n"
            "t.all_cases(); print('ok', t._lib.gemm_bf16_amx(), t._lib.gemm_bf16_native())").format(
                os.path.dirname(__file__))
    env = dict(os.environ, GPUMEMNET_GEMM_BF16=path)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    amx, native = r.stdout.split()[-2:]
    assert native == ("0" if path == "portable" else "1")
    assert amx == "0" or path == "native"


def test_gemm_bf16_team_smaller_than_asked():
    """Two threads asked for, one given (OMP_THREAD_LIMIT=1 here; a nested parallel region does the same): C is
    still computed whole."""
    code = ("import sys; sys.path.insert(0, {!r}); import test_gemm_bf16 as t\n"
            "t.run_case(200, 130, 2600, 'n', 't', 1, 0, 2); t.run_case(70, 700, 1400, 't', 'n', 0, 1, 2)\n"
            "print('ok')").format(os.path.dirname(__file__))
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
