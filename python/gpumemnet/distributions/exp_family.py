"""torch.distributions.ExponentialFamily: distributions of the form p(x; t) = exp(<t, T(x)> - F(t) + k(x))."""
from . import _ops as T
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of the exponential-family distributions: subclasses give _natural_params, _log_normalizer and
    _mean_carrier_measure, and get entropy (and KL between two of the same family) from them."""

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        """H = F(t) - <t, grad F(t)> - E[k(x)], the gradient of the log normalizer by autograd. As in PyTorch the
        natural parameters are detached copies, so the result has no gradient path to the distribution's
        parameters; the gradient of F is therefore taken as a constant (no graph of gradients is needed)."""
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        lg_normal = self._log_normalizer(*nparams)
        gradients = T.grad(lg_normal.sum(), nparams, retain_graph=True)
        result = result + lg_normal
        for p, g in zip(nparams, gradients):
            result = result - (p * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
