"""The bfloat16 GEMM (kernels/cpu/gemm_bf16.c, called through ctypes: it is an exported symbol of gpumemnet._C)
beside our float32 matmul (OpenBLAS sgemm) and PyTorch's bfloat16 and float32 matmul (oneDNN, AMX where the CPU
has it), in GFLOP/s, interleaved in one process (paired rounds: median and spread of each side).

Shapes: square, and the conv-like products of the bfloat16 convolutions (M = output channels, K = Cin x kh x kw,
N = positions), in the layouts kernels/cpu/conv_half.c passes: forward W @ cols (bf16 C), the input-gradient
W^T @ dY (A transposed, float32 C), the weight-gradient dY @ cols^T (B transposed, float32 C, beta 1); and the
linear layer's x @ w^T (B transposed, bf16 C).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/gemm_bf16.py [--reps 15] [--threads 2]
        [--mode native|avx512|portable]   (GPUMEMNET_GEMM_BF16 for this process)
        [--baseline OTHER/_C.so]          (another build's gemm_bf16 beside ours in the same rounds: before/after)

Both sides run with OMP_WAIT_POLICY=PASSIVE (gpumemnet's default, which it sets at import unless the user set a
policy); PyTorch's bfloat16 figures are lower under it than with its own default (spinning threads).
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

# (label, M, K, N, A transposed, B transposed, C bf16, beta)
SHAPES = [("square", 1024, 1024, 1024, 0, 0, 1, 0),
          ("conv fwd", 64, 576, 4096, 0, 0, 1, 0),
          ("conv fwd", 16, 144, 4096, 0, 0, 1, 0),
          ("conv fwd", 128, 1152, 256, 0, 0, 1, 0),
          ("conv fwd", 256, 2304, 196, 0, 0, 1, 0),
          ("conv fwd", 512, 4608, 64, 0, 0, 1, 0),
          ("bwd data W^T", 576, 64, 4096, 1, 0, 0, 0),
          ("bwd data W^T", 2304, 256, 196, 1, 0, 0, 0),
          ("bwd wgt cols^T", 64, 4096, 576, 0, 1, 0, 1),
          ("bwd wgt cols^T", 256, 196, 2304, 0, 1, 0, 1),
          ("linear x w^T", 256, 1024, 1000, 0, 1, 1, 0)]


class BMat(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p), ("rs", ctypes.c_int64), ("cs", ctypes.c_int64)]


def _lib(path=None):
    if path is None:
        from gpumemnet import _C
        path = _C.__file__
    lib = ctypes.CDLL(path)
    lib.gemm_bf16.argtypes = [ctypes.c_int64] * 3 + [BMat, BMat, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64,
                                                     ctypes.c_int, ctypes.c_int]
    lib.gemm_bf16.restype = ctypes.c_int
    return lib


def bf16_bits(x):
    """float32 array -> bfloat16 bits (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def aligned(shape, dtype):
    """A zeroed array at a 64-byte boundary, as gpumemnet's allocator places tensors (NumPy's large arrays start
    16 bytes past a page: a float32 C whose rows straddle cache lines took 1.6x as long to store)."""
    n, item = int(np.prod(shape)), np.dtype(dtype).itemsize
    buf = np.zeros(n + 64 // item, dtype)
    off = (-buf.ctypes.data % 64) // item
    return buf[off:off + n].reshape(shape)


def operand(rng, rows, cols, trans):
    """A bfloat16 (rows, cols) matrix, stored transposed when trans; returns (bits array, rs, cs)."""
    shape = (cols, rows) if trans else (rows, cols)
    s = aligned(shape, np.uint16)
    s[...] = bf16_bits(rng.standard_normal(shape).astype(np.float32))
    return (s, 1, rows) if trans else (s, cols, 1)


def timed(f):
    s = time.perf_counter()
    f()
    return time.perf_counter() - s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=min(2, len(os.sched_getaffinity(0))))
    ap.add_argument("--mode", default=None)
    ap.add_argument("--baseline", default=None, help="another build's _C .so: its gemm_bf16 timed beside ours")
    a = ap.parse_args()
    if a.mode:
        os.environ["GPUMEMNET_GEMM_BF16"] = a.mode
    import gpumemnet as gm
    from gpumemnet import _C
    gm.set_num_threads(a.threads)
    lib = _lib()
    base = _lib(a.baseline) if a.baseline else None
    try:
        import torch
        torch.set_num_threads(a.threads)
    except ImportError:
        torch = None
    print(f"OpenBLAS core {_C._build_info().get('blas_core')}; {a.threads} threads; gemm_bf16 path "
          f"{os.environ.get('GPUMEMNET_GEMM_BF16', 'native')}; torch {torch.__version__ if torch else 'absent'}; "
          f"GFLOP/s, median [min-max] of {a.reps} paired rounds")
    print(f"{'shape':<16}{'M,K,N':<16}{'gm bf16':<20}{'gm f32':<20}{'torch bf16':<20}{'torch f32':<20}"
          + (f"{'baseline bf16':<20}" if base else ""))
    rng = np.random.default_rng(0)
    for label, M, K, N, ta, tb, cb, beta in SHAPES:
        A, ars, acs = operand(rng, M, K, ta)
        B, brs, bcs = operand(rng, K, N, tb)
        C = aligned((M, N), np.uint16 if cb else np.float32)
        am, bm = BMat(A.ctypes.data, ars, acs), BMat(B.ctypes.data, brs, bcs)

        def product(lib):
            def f():
                st = lib.gemm_bf16(M, N, K, am, bm, beta, C.ctypes.data, N, cb, a.threads)
                assert st == 0, st
            return f
        ours = product(lib)

        fa = gm.randn(K, M).t() if ta else gm.randn(M, K)
        fb = gm.randn(N, K).t() if tb else gm.randn(K, N)
        sides = [ours, lambda: fa @ fb]
        if torch is not None:
            xa = torch.randn(K, M).t() if ta else torch.randn(M, K)
            xb = torch.randn(N, K).t() if tb else torch.randn(K, N)
            ya, yb = xa.bfloat16(), xb.bfloat16()
            sides += [lambda: ya @ yb, lambda: xa @ xb]
        else:
            sides += [None, None]
        if base:
            sides.append(product(base))
        for f in sides:
            if f:
                f()
        rounds = [[timed(f) if f else None for f in sides] for _ in range(a.reps)]
        fl = 2.0 * M * K * N / 1e9
        cells = []
        for i in range(len(sides)):
            if sides[i] is None:
                cells.append("-")
                continue
            g = [fl / r[i] for r in rounds]
            cells.append(f"{statistics.median(g):.0f} [{min(g):.0f}-{max(g):.0f}]")
        print(f"{label:<16}{f'{M},{K},{N}':<16}" + "".join(f"{c:<20}" for c in cells))


if __name__ == "__main__":
    main()
