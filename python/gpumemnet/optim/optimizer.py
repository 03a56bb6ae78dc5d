"""Optimizer: the base of gpumemnet's optimizers, with PyTorch's param_groups, state and state_dict format.

What differs from PyTorch is where the bytes go. A subclass's step hands each parameter group to one fused C
call (python/gpumemnet/optim/sgd.py, adam.py -> csrc/ops_optim.c) that updates parameters and state in place,
so `step()` allocates nothing once the state exists. The state is created lazily, on a parameter's first step,
tagged "optimizer" in the allocator; every step runs under no_grad() with the allocator scope "<Name>.step",
which is what memory reports and OOM messages show.

A step in which not one parameter has a gradient changes nothing: it warns once (NoGradientWarning), because
that is how seed 000's "fix" looked from the outside — the forward ran under no_grad() and the loss was
re-wrapped as a fresh leaf, so backward() never reached the model and nothing learned, silently.
"""
import warnings
from collections import defaultdict

from .. import _C
from .._core import hooks
from .._core.autograd import enable_grad, no_grad
from .._core.scope import category, scope
from . import _step_hooks
from ._step_hooks import register_optimizer_step_post_hook, register_optimizer_step_pre_hook  # noqa: F401
from ._private_names import (  # noqa: F401  (torch.optim.optimizer's names that optimizer libraries import)
    ParamsT, _capturable_doc, _default_to_fused_or_foreach, _differentiable_doc, _disable_dynamo_if_unsupported,
    _foreach_doc, _fused_doc, _get_capturable_supported_devices, _get_scalar_dtype, _get_value,
    _group_tensors_by_device_and_dtype, _maximize_doc, _stack_if_compiling, _use_grad_for_differentiable,
    _view_as_real)

__all__ = ["Optimizer", "NoGradientWarning"]


class NoGradientWarning(RuntimeWarning):
    """optimizer.step() found no gradient on any parameter: the model is not learning."""


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


class Step(int):
    """An optimizer's step count in its state (state[p]["step"]): an int, which the kernels read, that also
    answers what scripts ask of PyTorch's (a 0-d float32 tensor there): `state["step"].item()`, `.float()`,
    `.tolist()`, `.clone()` (copies of the state: `{k: v.clone() ...}`), `.dtype`, `.device`, `.shape`, and
    prints as PyTorch's does (`print(step)` gives "tensor(1.)", `f"{step}"` "1.0"). Adding an int keeps the kind (`st["step"] += 1`).
    state_dict() gives PyTorch's tensor."""
    __slots__ = ()

    def __add__(self, other):
        return Step(int(self) + other) if isinstance(other, int) else int(self) + other

    __radd__ = __add__

    def item(self):
        return float(self)

    tolist = item

    def _same(self, *args, **kwargs):
        return self

    float = cpu = clone = detach = to = _same

    def __format__(self, spec):
        return format(float(self), spec)

    def __repr__(self):
        return repr(_step_tensor(self))

    __str__ = __repr__

    def dim(self):
        return 0

    ndim = property(dim)

    def numel(self):
        return 1

    @property
    def shape(self):
        return _step_tensor(self).shape

    @property
    def dtype(self):
        return _step_tensor(self).dtype

    @property
    def device(self):
        return _step_tensor(self).device


def _number_lr(group):
    """group, or a copy whose lr is the number its one-element tensor holds: PyTorch takes a tensor lr, which scripts
    anneal in place (`group["lr"].copy_(lrnow)`: CleanRL's compiled variants); the steps here read a number."""
    lr = group.get("lr")
    if isinstance(lr, _C.TensorBase) and lr.numel() == 1:
        return dict(group, lr=float(lr))
    return group


# the scalars in a parameter's state that gpumemnet's own optimizers keep as numbers (NAdam's mu_product, ASGD's eta
# and mu) and PyTorch's as 0-d tensors: state_dict() gives them as PyTorch's, load_state_dict() takes either
_SCALAR_STATE = frozenset({"mu_product", "eta", "mu"})


def _step_tensor(step):
    """PyTorch's form of a saved step: a 0-d tensor of its scalar dtype (float64 under set_default_dtype(float64),
    else float32)."""
    from .._core.creation import tensor
    from .._core.dtype import get_default_dtype
    return tensor(float(step), dtype="float64" if get_default_dtype().name == "float64" else "float32")


_PARAM_SHAPED = frozenset({"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg", "sum",
                           "grad_avg", "acc_delta", "ax", "exp_inf", "prev"})


def _tensor_kind(x):
    return type(x).__name__ + ("" if not _is_tensor(x) else f" of shape {tuple(x.shape)}")


def _rounds(group):
    """Run _step_group over `group` once per round: one round with each parameter once, then, for a parameter the
    group lists k times (itertools.chain over modules that share a block: PyTorch-GAN's UNIT), k - 1 more rounds of
    such parameters alone, as PyTorch's step updates them once per listing. Parameters that share memory, one of
    them not contiguous (parametrize's unsafe right_inverse returning views of one tensor), take a round each: the
    fused step updates such a parameter in a copy written back at the end, which would undo an update of the memory
    they share. group["params"] holds each round's list while it runs and is put back after."""
    params = group["params"]
    count = {}
    for p in params:
        count[id(p)] = count.get(id(p), 0) + 1
    if len(count) == len(params):
        if len({p._storage_id for p in params}) == len(params) or all(p.is_contiguous() for p in params):
            yield group
            return
        rounds = [[p] for p in params]
    else:
        rounds = []
        for k in range(max(count.values())):
            seen, listed = set(), []
            for p in params:
                if count[id(p)] > k and id(p) not in seen:
                    seen.add(id(p))
                    listed.append(p)
            rounds.append(listed)
    try:
        for listed in rounds:
            group["params"] = listed
            yield group
    finally:
        group["params"] = params


class Optimizer:
    """Base class. `params`: an iterable of tensors, or of dicts (parameter groups) each holding "params" and
    per-group options overriding `defaults`. Subclasses implement `_step_group(group) -> bool` (whether any
    parameter of the group had a gradient)."""

    # PyTorch's implementation flags that its param groups carry (foreach, fused, ...), with their defaults: scripts
    # read them (`param_groups[0]["fused"]`); the steps here are what they are whatever the flags say. A subclass
    # that lists them in its defaults (the values given, in PyTorch's order) has those.
    _pytorch_flags = {}

    def __init__(self, params, defaults):
        self.defaults = {**defaults, **{k: v for k, v in self._pytorch_flags.items() if k not in defaults}}
        self.state = defaultdict(dict)  # parameter -> dict, keyed by the tensor object as in PyTorch
        self.param_groups = []
        self._warned_no_grad = False
        if _is_tensor(params):
            raise TypeError(f"params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got a single Tensor of shape {tuple(params.shape)}; pass [tensor] or "
                            f"model.parameters()")
        if isinstance(params, (set, frozenset)):
            raise TypeError("params argument given to the optimizer should be an iterable with a fixed order "
                            "(a list, a tuple or a generator), but got a set; its order changes between runs, "
                            "which would scramble state_dict()")
        param_groups = list(params)
        if not param_groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # ---- groups ------------------------------------------------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a group (a dict with "params" and optional per-group options; missing options take the
        optimizer's defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group.get("params")
        if params is None:
            raise ValueError("param_group must have a 'params' entry (the tensors to optimize)")
        if _is_tensor(params):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs; use a list instead")
        else:
            params = list(params)
        if any(isinstance(p, tuple) for p in params):  # model.named_parameters() (PyTorch 2.6): names kept
            if not all(isinstance(p, tuple) and len(p) == 2 for p in params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            group["param_names"] = [name for name, _ in params]
            params = [p for _, p in params]
        for i, p in enumerate(params):
            if not _is_tensor(p):
                raise TypeError(f"optimizer can only optimize Tensors, but params[{i}] is {_tensor_kind(p)}")
            if p.grad_fn is not None:
                raise ValueError(f"can't optimize a non-leaf Tensor (params[{i}], shape {tuple(p.shape)}, made by "
                                 f"{p.grad_fn.name()}); optimize the leaf it was computed from, or detach() it "
                                 f"and set requires_grad")
            if not p.dtype.is_floating_point:
                raise TypeError(f"optimizer can only optimize floating point tensors, but params[{i}] has dtype "
                                f"{p.dtype}")
        unique, seen = [], set()
        for p in params:
            if id(p) not in seen:
                seen.add(id(p))
                unique.append(p)
        if len(unique) != len(params):
            # PyTorch's warning; it keeps the duplicates and updates such a parameter once per listing (step)
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          UserWarning, stacklevel=3)
        group["params"] = list(params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter "
                                 f"{name}")
            group.setdefault(name, default)
        self._validate_group(_number_lr(group))
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & seen:
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def _validate_group(self, group):
        """Subclasses check their hyperparameters here (ValueError naming the argument)."""

    # ---- gradients -------------------------------------------------------------------------------------------
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _step_hooks.wrap_step(cls.__dict__["step"])

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) before each step; it may return (new_args, new_kwargs)."""
        return _step_hooks.register(self, "_step_pre_hooks", hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) after each step."""
        return _step_hooks.register(self, "_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) before state_dict() makes the dict."""
        return _step_hooks.register(self, "_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) after state_dict() made it; a dict it returns is returned instead."""
        return _step_hooks.register(self, "_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) before load_state_dict() loads it; a dict it returns is loaded instead."""
        return _step_hooks.register(self, "_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) after load_state_dict() loaded."""
        return _step_hooks.register(self, "_load_state_dict_post_hooks", hook, prepend)

    def _patch_step_function(self):
        """PyTorch's: wraps the class's step so that its hooks run (wrapper optimizers that skip __init__ call it:
        pytorch-optimizer's Lookahead). Here every subclass's step is wrapped when the class is defined
        (_step_hooks), so only the attributes PyTorch's sets are left to set."""
        self._zero_grad_profile_name = f"Optimizer.zero_grad#{type(self).__name__}.zero_grad"

    def zero_grad(self, set_to_none=True):
        """Reset every parameter's gradient: drop it (set_to_none=True, the default: frees its memory until the
        next backward) or fill it with zeros in place."""
        seen = hooks.get("zero_grad_called")
        if seen is not None:
            seen(set_to_none)
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad = False
                    _C.fill_(g, 0)

    # ---- stepping --------------------------------------------------------------------------------------------
    def step(self, closure=None):
        """One update of every parameter that has a gradient. `closure` (optional) re-evaluates the model and
        returns the loss; it runs with grad enabled, as in PyTorch. Returns the closure's loss (or None)."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        name = type(self).__name__
        any_grad = False
        try:
            with no_grad(), scope(f"{name}.step"):
                for group in self.param_groups:
                    group = _number_lr(group)
                    for _ in _rounds(group):
                        if self._step_group(group):
                            any_grad = True
        except _C.OutOfMemoryError as e:  # the first step creates the state: say what would have fitted
            explain = hooks.get("explain_oom_last_root")  # gpumemnet.memory's, registered when it is imported
            if explain is not None:
                explain(e)
            raise
        if not any_grad:
            self._warn_no_gradient()
        return loss

    def _step_group(self, group):
        raise NotImplementedError

    def _with_grad(self, group):
        """The group's parameters that have a gradient, and their gradients (checked like PyTorch does)."""
        params, grads = [], []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if not _is_tensor(g):
                raise TypeError(f"{type(self).__name__}.step: a parameter's .grad is {type(g).__name__}, expected "
                                f"a Tensor or None")
            params.append(p)
            grads.append(g)
        return params, grads

    def _new_state(self, p, key, zero=True):
        """A state tensor like p (zero-filled unless the step writes it first), created once and tagged
        "optimizer" (named after p for reports: "exp_avg(fc1.weight)")."""
        with category("optimizer"):
            t = _C.empty(p.shape, p._dtype, p._device)
            if zero and p._device != "meta":
                _C.fill_(t, 0)
        if p._name:
            t._name = f"{key}({p._name})"
        return t

    def _warn_no_gradient(self):
        if self._warned_no_grad:
            return
        self._warned_no_grad = True
        params = [p for g in self.param_groups for p in g["params"]]
        name = type(self).__name__
        n = len(params)
        if not any(p.requires_grad for p in params):
            why = (f"none of its {n} parameter{'s' if n != 1 else ''} requires grad (all frozen), so no gradient "
                   f"can ever reach them; set requires_grad=True on what should learn, or give the optimizer only "
                   f"trainable parameters")
        else:
            why = (f"none of its {n} parameter{'s' if n != 1 else ''} has a gradient (.grad is None), so the step "
                   f"changed nothing. Usual causes: the forward pass ran under gm.no_grad() / inference_mode(), "
                   f"or the loss was re-wrapped as a fresh leaf (e.g. loss = gm.tensor(loss, requires_grad=True)), "
                   f"so loss.backward() never reached the parameters; or backward() was not called before step(), "
                   f"or zero_grad() ran in between. Compute the loss from the model's output with grad enabled and "
                   f"call loss.backward() before step()")
        warnings.warn(f"{name}.step(): the model is not learning: {why}.", NoGradientWarning, stacklevel=3)

    # ---- state_dict ------------------------------------------------------------------------------------------
    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]} as in PyTorch: parameters
        are numbered in group order; state tensors are referenced, not copied."""
        _step_hooks.run(self, "_state_dict_pre_hooks")
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                if id(p) not in index:
                    index[id(p)] = len(index)
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        scalars = _SCALAR_STATE if self._param_shaped_state() else ()
        state = {index[id(p)]: {k: _step_tensor(v) if k == "step" and isinstance(v, Step) or k in scalars else v
                                for k, v in s.items()} for p, s in self.state.items() if id(p) in index and s}
        state = dict(sorted(state.items()))
        # entries under keys of the optimizer's own (MADGRAD's self.state["k"]) come as they are, as in PyTorch
        state.update((k, v) for k, v in self.state.items() if not _is_tensor(k))
        return _step_hooks.run(self, "_state_dict_post_hooks", {"state": state, "param_groups": groups})

    def load_state_dict(self, state_dict):
        """Load a state_dict made by state_dict() (here or by PyTorch's optimizer of the same kind). Everything is
        validated before anything changes. State tensors are copied into this optimizer's own state (into its
        existing tensors when shapes and dtypes match, so that nothing is allocated; else into new tensors tagged
        "optimizer"), never aliased: the loaded dict can be freed right after."""
        self._load_state_dict(_step_hooks.run(self, "_load_state_dict_pre_hooks", state_dict))
        _step_hooks.run(self, "_load_state_dict_post_hooks")

    def _load_state_dict(self, state_dict):
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups' (the result of "
                             "optimizer.state_dict())")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups: it has "
                             f"{len(saved_groups)}, this optimizer has {len(self.param_groups)}")
        id_map = {}
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(f"loaded state dict contains a parameter group that doesn't match the size of "
                                 f"optimizer's group: group {i} has {len(saved['params'])} parameters in the state "
                                 f"dict and {len(group['params'])} here")
            for old, p in zip(saved["params"], group["params"]):
                id_map[old] = p
        plans, own = [], {}
        for key, st in state_dict["state"].items():
            if key not in id_map:  # an entry of the optimizer's own (MADGRAD's "k"): kept as it is, as PyTorch's
                own[key] = st
                continue
            if not isinstance(st, dict):
                raise ValueError(f"loaded state dict: state of parameter {key!r} must be a dict, got "
                                 f"{type(st).__name__}")
            p = id_map[key]
            for k, v in st.items():  # (an optimizer of a library's own keeps state of any shape: Lamb, Shampoo)
                if _is_tensor(v) and k in self._param_shaped_state() and tuple(v.shape) != tuple(p.shape):
                    raise ValueError(f"loaded state dict: state {k!r} of parameter {key} has shape "
                                     f"{tuple(v.shape)} but the parameter has shape {tuple(p.shape)}")
            plans.append((p, st))

        new_state, own_step = defaultdict(dict), bool(self._param_shaped_state())
        for p, st in plans:
            old = self.state.get(p, {})
            mine = {}
            for k, v in st.items():
                # gpumemnet's optimizers count in a Step; another's keeps its own (a tensor it add_()s to, an int)
                if k == "step" and (isinstance(v, Step) or _is_tensor(v) and own_step):
                    mine[k] = Step(int(float(v)))
                elif k in _SCALAR_STATE and _is_tensor(v) and self._param_shaped_state():
                    mine[k] = float(v)
                elif _is_tensor(v):
                    mine[k] = self._adopt(p, k, v, old.get(k))
                else:
                    mine[k] = v
            new_state[p] = mine
        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            # the options an older checkpoint lacks ("maximize", "foreach") take this optimizer's defaults
            g = {**self.defaults, **saved}
            g["params"] = group["params"]
            new_groups.append(g)
        new_state.update(own)
        # through __setstate__, as PyTorch's load_state_dict: a library's optimizer fills in its own options there
        self.__setstate__({"state": new_state, "param_groups": new_groups})

    def __setstate__(self, state):
        self.__dict__.update(state)

    # PyTorch's foreach optimizers group their tensor lists by device and dtype through this (timm's ADOPT)
    _group_tensors_by_device_and_dtype = staticmethod(_group_tensors_by_device_and_dtype)

    def _param_shaped_state(self):
        """The state keys this optimizer's step reads as tensors of the parameter's shape: those of gpumemnet's
        own optimizers (their fused kernels need them so); none for a step written elsewhere."""
        step = getattr(type(self).step, "__module__", "") or ""
        return _PARAM_SHAPED if step.startswith("gpumemnet.optim") else ()

    def _adopt(self, p, key, value, existing):
        """value's data in a state tensor of its shape on p's device, in p's dtype where p is floating (PyTorch's
        policy, which casts an integer state too), else in its own."""
        dst, dtype = existing, p._dtype if p.is_floating_point() else value._dtype
        if not (_is_tensor(dst) and tuple(dst.shape) == tuple(value.shape) and dst._dtype == dtype
                and dst._device == p._device):
            with category("optimizer"):
                dst = _C.empty(tuple(value.shape), dtype, p._device)
            if p._name:
                dst._name = f"{key}({p._name})"
        if dst._device != "meta":
            if value._device == "meta":
                raise ValueError(f"load_state_dict: state {key!r} is a meta tensor (no data) but the parameter is "
                                 f"on {p._device}")
            _C.copy_(dst, value)
        return dst


Optimizer.step = _step_hooks.wrap_step(Optimizer.step)  # (subclasses: __init_subclass__)
