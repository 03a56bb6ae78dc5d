"""spectral_norm and weight_norm (torch.nn.utils's hook forms): the layer's weight is recomputed before each
forward from parameters of their own, as PyTorch's are, under the same names (weight_orig, weight_u, weight_v;
weight_g, weight_v), so state_dicts load both ways.

spectral_norm divides the weight by its largest singular value, estimated by power iteration on the buffers u and
v (one step per training forward, none in eval, under no_grad as PyTorch's); weight_norm writes the weight as
g * v / ||v||, the norm over every dim but `dim`."""
import warnings

from ... import _C
from ..._core.autograd import no_grad
from .. import functional as F
from ..modules.conv import ConvTranspose1d, ConvTranspose2d
from ..parameter import Parameter

__all__ = ["spectral_norm", "remove_spectral_norm", "weight_norm", "remove_weight_norm"]


def _hook(module, cls, name):
    """The hook of kind cls that reparametrises module.<name>, or None."""
    return next((h for h in module._forward_pre_hooks if isinstance(h, cls) and h.name == name), None)


def _take_weight(module, cls, name, kind):
    """module.<name> as a parameter to reparametrise (it leaves _parameters); refused twice on one weight."""
    if _hook(module, cls, name) is not None:
        raise RuntimeError(f"Cannot register two {kind} hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
    del module._parameters[name]
    return weight


def _remove(module, cls, name, kind, compute, parameters, buffers):
    """Undo a reparametrisation: the weight as it is now becomes a plain parameter again, its own entries go."""
    hook = _hook(module, cls, name)
    if hook is None:
        raise ValueError(f"{kind} of '{name}' not found in {module}")
    with no_grad():
        weight = compute(hook)
    module._forward_pre_hooks.remove(hook)
    for key in parameters:
        del module._parameters[name + key]
    for key in buffers:
        del module._buffers[name + key]
    object.__delattr__(module, name)
    module.register_parameter(name, Parameter(weight.detach()))
    return module


class _SpectralNorm:
    def __init__(self, name, n_power_iterations, dim, eps):
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def compute(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self._matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    _C.copy_(v, F.normalize(mat.t().mv(u), dim=0, eps=self.eps))
                    _C.copy_(u, F.normalize(mat.mv(v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()  # the values this forward used, whatever later steps write into u, v
        sigma = u.dot(mat.mv(v))
        return weight / sigma

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute(module, do_power_iteration=module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Constrain module.<name>'s spectral norm to 1 (Miyato et al.), as torch.nn.utils.spectral_norm."""
    if n_power_iterations <= 0:
        raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                         f"{n_power_iterations}")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    weight = _take_weight(module, _SpectralNorm, name, "spectral_norm")
    fn = _SpectralNorm(name, n_power_iterations, dim, eps)
    mat = fn._matrix(weight.detach())
    h, w = mat.shape
    with no_grad():
        u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
        v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
    module.register_parameter(name + "_orig", Parameter(weight.detach()))
    object.__setattr__(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    return _remove(module, _SpectralNorm, name, "spectral_norm",
                   lambda hook: hook.compute(module, do_power_iteration=False), ("_orig",), ("_u", "_v"))


def _norm_except_dim(v, dim):
    if dim is None or dim == -1:  # PyTorch's weight_norm takes dim=-1 (and None) as one norm of the whole weight
        return v.norm()
    d = dim % v.ndim
    dims = tuple(i for i in range(v.ndim) if i != d)
    return v.norm(2, dims, keepdim=True) if dims else v.abs()


class _WeightNorm:
    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute(module))


def weight_norm(module, name="weight", dim=0):
    """module.<name> = g * v / ||v|| (Salimans and Kingma), as torch.nn.utils.weight_norm (dim=None: one norm)."""
    # attributed to this line, as PyTorch's to its own file (its @deprecated WeightNorm.apply): the default filter
    # then shows it once per process, not once per calling line, and "always" filters (pytest.warns) every call
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=1)
    weight = _take_weight(module, _WeightNorm, name, "weight_norm")
    fn = _WeightNorm(name, dim)
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight.detach(), dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    object.__setattr__(module, name, fn.compute(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    return _remove(module, _WeightNorm, name, "weight_norm", lambda hook: hook.compute(module), ("_g", "_v"), ())
