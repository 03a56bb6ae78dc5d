"""spectral_norm and weight_norm (torch.nn.utils's hook forms): the layer's weight is recomputed before each
forward from parameters of their own, as PyTorch's are, under the same names (weight_orig, weight_u, weight_v;
weight_g, weight_v), so state_dicts load both ways.

spectral_norm divides the weight by its largest singular value, estimated by power iteration on the buffers u and
v (one step per training forward, none in eval, under no_grad as PyTorch's); weight_norm writes the weight as
g * v / ||v||, the norm over every dim but `dim`."""
from ... import _C
from ..._core.autograd import no_grad
from .. import functional as F
from ..modules.conv import ConvTranspose1d, ConvTranspose2d
from ..parameter import Parameter

__all__ = ["spectral_norm", "remove_spectral_norm", "weight_norm", "remove_weight_norm"]


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
                    _C.copy_(v, F.normalize(mat.t().matmul(u), dim=0, eps=self.eps))
                    _C.copy_(u, F.normalize(mat.matmul(v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()  # the values this forward used, whatever later steps write into u, v
        sigma = u.dot(mat.matmul(v))
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
    for hook in module._forward_pre_hooks:
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
    fn = _SpectralNorm(name, n_power_iterations, dim, eps)
    mat = fn._matrix(weight.detach())
    h, w = mat.shape
    with no_grad():
        u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
        v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", Parameter(weight.detach()))
    object.__setattr__(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    for hook in list(module._forward_pre_hooks):
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute(module, do_power_iteration=False)
            module._forward_pre_hooks.remove(hook)
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            object.__delattr__(module, name)
            module.register_parameter(name, Parameter(weight.detach()))
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")


def _norm_except_dim(v, dim):
    if dim is None or dim == -1 and v.ndim == 0:
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
    for hook in module._forward_pre_hooks:
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
    fn = _WeightNorm(name, dim)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight.detach(), dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    object.__setattr__(module, name, fn.compute(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    for hook in list(module._forward_pre_hooks):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute(module)
            module._forward_pre_hooks.remove(hook)
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            object.__delattr__(module, name)
            module.register_parameter(name, Parameter(weight.detach()))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
