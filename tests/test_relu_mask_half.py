"""relu's bit mask on 2-byte floats (kernels/cpu/activation.c: relu_mask_pack / relu_mask_backward, 32 elements a
step on AVX-512, the rest and other CPUs on the scalar loop): the bits are NumPy's `not (x <= 0)` packed
little-endian (NaN of either sign set, +0, -0 and negatives clear), the backward is the gradient where a bit is
set and +0 elsewhere, bit for bit; bfloat16 and float16, lengths around the 32-element step, and the portable
path (GPUMEMNET_NN_BF16=portable, in a subprocess: the switch is read once) giving the same bytes."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

LENGTHS = [1, 7, 31, 32, 33, 64, 95, 1000, 4099]


def _values(n, seed):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n).astype(np.float32)
    special = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-40, -1e-40, 3e38, -3e38], np.float32)
    idx = rng.integers(0, n, size=max(1, n // 4))
    v[idx] = special[rng.integers(0, len(special), size=len(idx))]
    return v


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("n", LENGTHS)
def test_mask_and_backward_match_numpy(dtype, n):
    t = gm.tensor(_values(n, n)).to(getattr(gm, dtype))
    x = t.float().numpy()
    want = np.packbits(~(x <= 0), bitorder="little")
    got = _C.relu_mask(t).numpy()
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    g = gm.tensor(_values(n, n + 1)).to(getattr(gm, dtype))
    dx = _C.relu_mask_backward(g, _C.relu_mask(t))
    keep = ~(x <= 0)
    got_bits = dx.float().numpy()
    ref = np.where(keep, g.float().numpy(), np.float32(0.0))
    assert np.array_equal(np.signbit(got_bits[~keep]), np.zeros((~keep).sum(), bool))  # +0, never -0
    assert np.array_equal(np.isnan(got_bits), np.isnan(ref))
    assert np.array_equal(got_bits[~np.isnan(ref)], ref[~np.isnan(ref)])


RUN = """
import numpy as np, gpumemnet as gm
from gpumemnet import _C
rng = np.random.default_rng(5)
out = []
for dt in (gm.bfloat16, gm.float16):
    for n in %r:
        v = rng.standard_normal(n).astype(np.float32)
        v[::5] = -0.0
        v[::7] = np.nan
        t = gm.tensor(v).to(dt)
        m = _C.relu_mask(t)
        out.append(m.numpy().tobytes().hex())
        out.append(_C.relu_mask_backward(t, m).float().numpy().tobytes().hex())
print(" ".join(out))
""" % (LENGTHS,)


def test_portable_path_gives_the_same_bytes():
    runs = []
    for path in (None, "portable"):
        env = dict(os.environ)
        env.pop("GPUMEMNET_NN_BF16", None)
        if path:
            env["GPUMEMNET_NN_BF16"] = path
        r = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append(r.stdout)
    assert runs[0] == runs[1]
