"""torch.quasirandom: SobolEngine, the Sobol low-discrepancy sequence (BoTorch draws its quasi-Monte Carlo samples
and initial candidates from it).

The points come from SciPy's scipy.stats.qmc.Sobol, made for the job and using the same direction numbers (Joe and
Kuo, up to 21201 dimensions) and 30 bits as PyTorch's engine: the unscrambled sequence is PyTorch's, bit for bit. A
scrambled engine (a linear matrix scramble and a digital shift, as PyTorch's) takes its random bits from NumPy's
generator seeded with `seed` (drawn from gpumemnet's global generator when None), so for the same seed its points
differ from PyTorch's, as every random draw of gpumemnet does. SciPy is needed for this module only: it is not a
dependency of gpumemnet (`pip install scipy`)."""
import warnings

import numpy as np

from ._core.creation import randint, tensor
from ._core.dtype import get_default_dtype

__all__ = ["SobolEngine"]


class SobolEngine:
    """SobolEngine(dimension, scramble=False, seed=None): draw(n) gives the next n points of [0, 1)^dimension as an
    (n, dimension) tensor."""
    MAXBIT = 30
    MAXDIM = 21201

    def __init__(self, dimension, scramble=False, seed=None):
        if not isinstance(dimension, int) or not 1 <= dimension <= self.MAXDIM:
            raise ValueError(f"Supported range of dimensionality for SobolEngine is [1, {self.MAXDIM}] (got "
                             f"dimension={dimension!r})")
        try:
            from scipy.stats import qmc  # noqa: PLC0415  (optional: only this module needs SciPy)
        except ImportError:
            raise ImportError("torch.quasirandom.SobolEngine needs SciPy under gpumemnet (its Sobol generator makes "
                              "the points): pip install scipy") from None
        self.dimension, self.scramble, self.seed = dimension, bool(scramble), seed
        draw_seed = seed
        if self.scramble and seed is None:
            draw_seed = int(randint(0, 2 ** 62, (1,)).item())  # reproducible under gm.manual_seed
        try:
            self._engine = qmc.Sobol(dimension, scramble=self.scramble, bits=self.MAXBIT, rng=draw_seed)
        except TypeError:  # SciPy before 1.15 names it seed
            self._engine = qmc.Sobol(dimension, scramble=self.scramble, bits=self.MAXBIT, seed=draw_seed)
        self.num_generated = 0

    def draw(self, n=1, out=None, dtype=None):
        """The next n points, in dtype (the default dtype when None), written into out when given."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SciPy's note that n is not a power of 2: PyTorch's draw takes any n
            points = self._engine.random(n)
        self.num_generated += n
        result = tensor(np.asarray(points).reshape(n, self.dimension), dtype=dtype or get_default_dtype())
        if out is not None:
            out.resize_as_(result).copy_(result)
            return out
        return result

    def draw_base2(self, m, out=None, dtype=None):
        """The next 2**m points; the total drawn must stay a power of 2 (the sequence's balance), as PyTorch's."""
        n = 2 ** m
        total = self.num_generated + n
        if total & (total - 1):
            raise ValueError(f"The balance properties of Sobol' points require n to be a power of 2. "
                             f"{self.num_generated} points have been previously generated, then: "
                             f"n={self.num_generated}+2**{m}={total}. If you still want to do this, please use "
                             f"'SobolEngine.draw()' instead.")
        return self.draw(n, out, dtype)

    def reset(self):
        """Back to the first point (a scrambled engine keeps its scramble)."""
        self._engine.reset()
        self.num_generated = 0
        return self

    def fast_forward(self, n):
        """Skip the next n points."""
        self._engine.fast_forward(n)
        self.num_generated += n
        return self

    def __repr__(self):
        extra = [f"scramble={self.scramble}"] if self.scramble else []
        extra += [f"seed={self.seed}"] if self.seed is not None else []
        return f"SobolEngine({', '.join([f'dimension={self.dimension}'] + extra)})"
