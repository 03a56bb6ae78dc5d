"""Random data of the autograd tests (tests/test_autograd_*.py), drawn from one seeded stream."""
import numpy as np

_rng = np.random.default_rng(20240611)


def R(*shape):
    """Standard normal float64 data."""
    return _rng.standard_normal(shape)


def P(*shape):
    """Positive data away from 0 (log, sqrt, division, pow bases)."""
    return _rng.uniform(0.5, 2.0, shape)


def NZ(*shape):
    """Data away from 0 on both sides (abs, denominators)."""
    return _rng.uniform(0.3, 2.0, shape) * _rng.choice([-1.0, 1.0], shape)


def MASK(*shape):
    m = _rng.random(shape) < 0.5
    m.flat[0], m.flat[-1] = True, False  # never all-False nor all-True
    return m
