"""gpumemnet.nn.utils.parametrizations: weight_norm and spectral_norm written as parametrizations (parametrize.py),
as torch.nn.utils.parametrizations. Their state_dict keys are PyTorch's new ones: weight_norm keeps
parametrizations.weight.original0 (g) and original1 (v); spectral_norm keeps parametrizations.weight.original and
the power-iteration vectors parametrizations.weight.0._u and ._v. (The older hook forms, with keys weight_g /
weight_orig, are nn.utils.weight_norm and spectral_norm: weight_norms.py.) orthogonal is in _orthogonal.py."""
from ... import _C
from ..._core.autograd import no_grad
from ..._core.scope import category
from .. import functional as F
from ..modules.conv import ConvTranspose1d, ConvTranspose2d
from ..modules.module import Module
from . import parametrize
from ._orthogonal import orthogonal  # noqa: F401
from .weight_norms import _norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _conv_transposes():
    from .. import modules
    return tuple(c for c in (ConvTranspose1d, ConvTranspose2d, getattr(modules, "ConvTranspose3d", None)) if c)


class _WeightNorm(Module):
    """(g, v) -> v * g / ||v||, the norm over every dim but `dim` (dim None or -1: one norm of the whole)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.<name> = g * v / ||v|| (Salimans and Kingma) as a parametrization, as
    torch.nn.utils.parametrizations.weight_norm; g and v are parametrizations.<name>.original0 and original1."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def compat(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # a checkpoint of the older nn.utils.weight_norm (HiFi-GAN, WaveGlow): weight_g / weight_v are g and v
        # (PyTorch's _weight_norm_compat_hook)
        g, v = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g in state_dict and v in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v)
    module._register_load_state_dict_pre_hook(compat)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma its largest singular value estimated by power iteration on the buffers _u and _v
    (n_power_iterations per training forward, none in eval; 15 at registration). A 1-D weight is normalised."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got "
                             f"{dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                             f"{n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._matrix(weight)
            h, w = mat.shape
            with no_grad(), category("parameter"):  # model state, as BatchNorm's running statistics
                self.register_buffer("_u", F.normalize(mat.new_empty(h).normal_(0, 1), dim=0, eps=eps))
                self.register_buffer("_v", F.normalize(mat.new_empty(w).normal_(0, 1), dim=0, eps=eps))
            self._power_method(mat, 15)

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n):
        with no_grad():  # u and v are written in place (they are buffers: state_dict holds them)
            for _ in range(n):
                _C.copy_(self._u, F.normalize(mat.mv(self._v), dim=0, eps=self.eps))
                _C.copy_(self._v, F.normalize(mat.t().mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = self._matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()  # this forward's values, whatever later steps write into _u, _v
        return weight / u.dot(mat.mv(v))

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide module.<name> by its spectral norm (Miyato et al.) as a parametrization, as
    torch.nn.utils.parametrizations.spectral_norm (dim None: 1 for transposed convolutions, else 0)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.TensorBase):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _conv_transposes()) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
