"""torch.nn.utils.prune: magnitude, random and structured pruning of a module's parameters, with PyTorch's names and
mechanics, so that pruning tutorials and scripts run unchanged.

Pruning `weight` of a module moves the parameter to `weight_orig`, adds the buffer `weight_mask` (1 keeps, 0
prunes) and makes `weight` a plain attribute, weight_orig * weight_mask, recomputed by a forward pre-hook (the
pruning method itself) before every call: the state_dict holds weight_orig and weight_mask, as PyTorch's, and the
gradient reaches weight_orig through the mask. Pruning the same tensor again combines the methods in a
PruningContainer, each new one acting on the entries (or channels) still kept. remove() makes it permanent.

Random methods draw from gpumemnet's generator (not PyTorch's: the same counts, other positions); ties between
equal magnitudes may be broken differently from PyTorch's topk."""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ..._core.autograd import no_grad
from ..._core.creation import ones_like, rand, rand_like, zeros_like
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured", "l1_unstructured",
           "random_structured", "ln_structured", "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


def _pruning_hooks(module, name=None):
    return [h for h in module._forward_pre_hooks
            if isinstance(h, BasePruningMethod) and (name is None or h._tensor_name == name)]


class BasePruningMethod(ABC):
    """A way to compute a mask; also the forward pre-hook that recomputes the pruned tensor."""
    _tensor_name = None
    PRUNING_TYPE = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for tensor t (importance scores), given the mask already applied."""

    def apply_mask(self, module):
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune module.name with a new cls(*args, **kwargs), combined with any pruning already there."""
        old = _pruning_hooks(module, name)
        if len(old) > 1:
            raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. "
                                 f"Use a PruningContainer.")
        old = old[0] if old else None
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:
            module._forward_pre_hooks.remove(old)
            container = old if isinstance(old, PruningContainer) else PruningContainer(old)
            container.add_pruning_method(method)
            method = container
        orig = getattr(module, name)
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(orig.shape):
                raise ValueError(f"importance_scores should have the same shape as parameter {name} of {module}")
        else:
            importance_scores = orig
        if old is None:  # the first pruning: the parameter becomes name_orig, and nothing is pruned yet
            default_mask = ones_like(orig).detach()
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        with no_grad():
            mask = method.compute_mask(importance_scores.detach(), default_mask=default_mask)
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """t with this method's mask applied (nothing is registered anywhere)."""
        scores = importance_scores if importance_scores is not None else t
        if tuple(scores.shape) != tuple(t.shape):
            raise ValueError("importance_scores should have the same shape as tensor t")
        mask = self.compute_mask(scores, default_mask=default_mask if default_mask is not None else ones_like(t))
        return t * mask

    def remove(self, module):
        """Make the pruning permanent: module.name becomes a parameter holding weight_orig * weight_mask."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if name in module.__dict__:
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The pruning methods applied one after the other to one tensor: each acts on what the others kept."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1 and not isinstance(args[0], Iterable):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        elif len(args) == 1:
            for method in args[0]:
                self.add_pruning_method(method)
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' to "
                             f"PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The last method's mask computed on the part of t the mask still keeps, written into that part."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype).clone()
        if method.PRUNING_TYPE == "unstructured":
            slc = default_mask == 1
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to have the attribute `dim` "
                                     "defined.")
            dim = method.dim + t.ndim if method.dim < 0 else method.dim
            if dim < 0 or dim >= t.ndim:
                raise IndexError(f"Index is out of bounds for tensor of size {tuple(t.shape)}")
            keep = default_mask.sum(dim=[d for d in range(t.ndim) if d != dim]) != 0
            slc = tuple(slice(None) if d != dim else keep for d in range(t.ndim))
        elif method.PRUNING_TYPE == "global":
            slc = tuple(slice(None) for _ in range(t.ndim))
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        mask[slc] = method.compute_mask(t[slc], default_mask=default_mask[slc]).to(dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _validate_amount_init(amount):
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or \
            (not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count(amount, size):
    """How many of size entries amount prunes: an int as it is, a fraction rounded (PyTorch's round)."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return int(amount)
    return round(amount * size)


def _check_structured(t):
    if t.ndim <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of shape "
                         f"{tuple(t.shape)} with {t.ndim} dims")


def _prune_lowest(scores, default_mask, k):
    """default_mask with the k entries of the lowest scores set to 0."""
    mask = default_mask.clone()
    if k:
        mask.view(-1)[scores.reshape(-1).topk(k, largest=False).indices] = 0
    return mask


def _keep_channels(t, dim, keep, default_mask):
    """A mask of t's shape keeping the channels `keep` (indices along dim), times default_mask."""
    mask = zeros_like(t)
    slc = [slice(None)] * t.ndim
    slc[dim] = keep
    mask[tuple(slc)] = 1
    return mask * default_mask.to(dtype=mask.dtype)


class RandomUnstructured(BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _prune_lowest(rand_like(t), default_mask, _count(self.amount, t.numel()))

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _prune_lowest(t.abs(), default_mask, _count(self.amount, t.numel()))

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t)
        size = t.shape[self.dim]
        k = _count(self.amount, size)
        if k == 0:
            return default_mask
        prob = rand(size, device=t.device)
        return _keep_channels(t, self.dim, prob.topk(size - k).indices, default_mask)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t)
        dim = self.dim % t.ndim
        size = t.shape[dim]
        k = _count(self.amount, size)
        if k == 0:
            return default_mask
        norm = t.norm(p=self.n, dim=[d for d in range(t.ndim) if d != dim])
        return _keep_channels(t, dim, norm.topk(size - k, largest=True).indices, default_mask)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(f"mask of shape {tuple(self.mask.shape)} does not match the tensor's "
                                 f"{tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) pairs together: the method ranks all their entries at once (the smallest
    magnitudes of the whole model, not of each layer), and each tensor gets its part of the mask."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = tuple(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    default_mask = parameters_to_vector([getattr(m, n + "_mask", ones_like(getattr(m, n))) for m, n in parameters])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f'{pruning_method} of type {method.PRUNING_TYPE}')
    container = PruningContainer(method)
    with no_grad():
        final = container.compute_mask(scores.detach(), default_mask.detach())
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=final[start:start + param.numel()].view_as(param))
        start += param.numel()


def remove(module, name):
    """Make the pruning of module.name permanent and drop its hook, name_orig and name_mask."""
    for hook in _pruning_hooks(module, name):
        hook.remove(module)
        module._forward_pre_hooks.remove(hook)
        return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    """Whether any submodule of module has a pruned tensor."""
    return any(_pruning_hooks(m) for m in module.modules())

