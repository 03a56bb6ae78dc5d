"""Samplers with PyTorch's names, arguments and errors: the index order a DataLoader reads a map-style dataset in.

Randomness (generator=): None draws each iteration's order from gpumemnet's global generator (gm.manual_seed makes
it reproducible, as torch.manual_seed does for PyTorch); a gm.Generator likewise from its own stream, at each
iteration (so g.manual_seed(s) or g.set_state(saved) before an epoch decides that epoch's order, as in PyTorch);
an int seeds a NumPy Generator created once (epochs differ from each other, a rerun repeats them); a
numpy.random.Generator is used as given; another object with initial_seed() is taken as an int seed."""
import numbers

import numpy as np

from ... import _C
from ..._core.random import Generator, numpy_generator

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


def _resolve_generator(generator, who):
    """None, or a numpy Generator to keep (see the module docstring)."""
    if generator is None or isinstance(generator, (np.random.Generator, Generator)):
        return generator
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        return np.random.default_rng(int(generator))
    if callable(getattr(generator, "initial_seed", None)):  # a torch.Generator-like object: its seed
        return np.random.default_rng(int(generator.initial_seed()))
    raise TypeError(f"{who}: generator must be None, an int seed, a numpy.random.Generator or a Generator with "
                    f"initial_seed(), got "
                    f"{type(generator).__name__}")


def _rng(resolved):
    """The numpy Generator for one iteration: the kept one, or one seeded by one draw of gpumemnet's Philox (the
    global generator's, or a gm.Generator's)."""
    if resolved is not None and not isinstance(resolved, Generator):
        return resolved
    return numpy_generator(resolved)


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")
    return int(value)


def _check_bool(value, name, exc=ValueError):
    if not isinstance(value, (bool, np.bool_)):
        raise exc(f"{name} should be a boolean value, but got {name}={value}")
    return bool(value)


class Sampler:
    """Base class: __iter__ yields dataset indices (or, for a batch sampler, lists of them)."""

    def __init__(self, data_source=None):
        pass

    def __class_getitem__(cls, item):
        return cls

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation each iteration; replacement=True draws num_samples indices independently; without
    replacement and num_samples > len(data_source), whole permutations follow each other (PyTorch's rule)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = _check_bool(replacement, "replacement", TypeError)  # TypeError here, as in PyTorch
        self._num_samples = num_samples
        self.generator = generator
        self._gen = _resolve_generator(generator, "RandomSampler")
        _positive_int(self.num_samples, "num_samples")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, k, rng = len(self.data_source), self.num_samples, _rng(self._gen)
        if self.replacement:
            yield from rng.integers(0, n, size=k).tolist()
            return
        for _ in range(k // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[:k % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order each iteration."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator
        self._gen = _resolve_generator(generator, "SubsetRandomSampler")

    def __iter__(self):
        for i in _rng(self._gen).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probability proportional to weights (torch.multinomial's rule)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        num_samples = _positive_int(num_samples, "num_samples")
        self.replacement = _check_bool(replacement, "replacement")
        w = np.asarray(weights.detach().numpy() if isinstance(weights, _C.TensorBase) else weights,
                       dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        # a float64 tensor, as PyTorch's (curriculum and hard-example code edits it in place between epochs, or
        # assigns a new one): read again at each iteration
        self.weights = _C.from_numpy(np.ascontiguousarray(w), 1, "cpu")
        self.num_samples = num_samples
        self.generator = generator
        self._gen = _resolve_generator(generator, "WeightedRandomSampler")

    def __iter__(self):
        w = self.weights
        w = np.asarray(w.detach().cpu().numpy() if isinstance(w, _C.TensorBase) else w, dtype=np.float64)
        if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
            raise RuntimeError("invalid multinomial distribution (weights must be finite, non-negative, with a "
                               "positive sum)")
        if not self.replacement and self.num_samples > len(w):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        rng, nonzero = _rng(self._gen), np.count_nonzero(w)
        if not self.replacement and self.num_samples > nonzero:
            # the entries of weight 0 come after every other, as PyTorch's multinomial draws them
            first = rng.choice(len(w), size=nonzero, replace=False, p=w / w.sum())
            rest = rng.permutation(np.flatnonzero(w == 0))[:self.num_samples - nonzero]
            yield from np.concatenate([first, rest]).tolist()
            return
        idx = rng.choice(len(w), size=self.num_samples, replace=self.replacement, p=w / w.sum())
        yield from idx.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of batch_size (the last one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _positive_int(batch_size, "batch_size")
        self.drop_last = _check_bool(drop_last, "drop_last")
        self.sampler = sampler

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
