"""gpumemnet.Tensor: the Python face of _C.TensorBase — operators, methods and autograd dispatch.

The fast path of every op is one check (grad mode on and an input requiring grad?) and one C call; only when
autograd must record does the call go through a Function."""

import numpy as np

from .. import _C
from . import activation
from . import autocast as _amp
from . import autograd, autograd_hooks
from . import functions as F
from . import hooks
from .autograd import check_inplace as _check_inplace, needs_grad as _needs_grad, refuse_inplace
from . import tensor_str as _tensor_str
from .dtype import DTYPES, as_dtype, device_of, device_str, dtype as _dtype_cls, fitting, format_copy
from . import indexing_multi
from .inplace_binary import _InplaceBinary
from .indexing import (IndexFn, IndexPutFn, apply_plan, assigned_copy, check_put_dtypes, make_plan, put_plan,
                       rebase_views, sequence_as_tuple, write_graph_view, write_plain_shared, write_plain_view,
                       write_recorded)
from .random import drawing_from
from .size import Size
from .arg_forms import _NO, PLAIN_DIMS, dim_args, install as _install_numpy_forms, required_dim, squeeze_dims
from .tensor_compose import ComposeMethods
from .tensor_more import MoreMethods
from .tensor_math import (ATAN2, FLOORDIV, FMOD, REMAINDER, Atan2, FloorDiv, Fmod, MathMethods, Remainder,
                          OPERANDS, _alpha_scaled, defer_to_foreign_operands, half_alpha_add, matmul_tensors,
                          warn_scalar_of_grad_tensor)
from .tensor_methods import TensorMethods, _Rounding, _check_format
from .tensor_bitwise import check_castable
from .tensor_select import SelectMethods
from .tensor_special import SpecialMethods
from .tensor_products import ProductMethods
from .tensor_misc import MiscMethods, random_fill_target, random_filled
from .tensor_decomp import DecompMethods
from .tensor_reduce import ReduceMethods

_amp_state = _amp._state


_COMPARABLE = (_C.TensorBase, int, float, np.ndarray, np.generic)  # what eq / ne take (_check_number)


def _check_number(x, op):
    if isinstance(x, (_C.TensorBase, int, float)):
        return x
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        return _C.from_numpy(np.asarray(x)) if isinstance(x, np.ndarray) else x.item()
    raise TypeError(f"{op}: unsupported operand of type {type(x).__name__}; expected a Tensor or a number")


def _binary(fn, op, a, b, name):
    b = _check_number(b, name)
    if _needs_grad(a, b):
        return fn.apply(a, b)
    return _C.binary(op, a, b)


def _refuse_shared(t, what, value_of):
    """A value that requires grad written into a plain tensor whose memory others share: its views take the graph
    (write_plain_view, write_plain_shared: True when done); an alias that is no view (detach()) or t.data's takes
    it alone, as in PyTorch (False: the caller records the write on t). Refused where views of the memory are
    alive that cannot be re-derived (another dtype, a root that is not the whole memory)."""
    if t._storage_refs - t._saved_refs > 1 and not (t._unversioned or t.__dict__.get("_data_alias")):
        if write_plain_view(t, value_of) or write_plain_shared(t, value_of):
            return True
        if not t._has_base and not any(v._base is t for v in t._graph_views):
            return False  # an alias that is no view (p.detach().copy_(avg): Lightning's SWA) takes the graph alone
        raise RuntimeError(f"{what}: writing a value that requires grad into a tensor that shares its memory with "
                           f"another (a view, or a tensor with views): the other would not get the gradient; write "
                           f"into the base tensor itself")


def _inplace(fn, op, a, b, name):
    b = _check_number(b, name)
    # A slice of a tensor in a graph: recorded on its base. The product reads a clone, which its backward may
    # keep: the slice itself is about to be overwritten (PyTorch keeps the original self likewise).
    if autograd.is_graph_view(a) and write_graph_view(a, lambda v: _binary(fn, op, v.clone(), b, name.rstrip("_"))):
        return a
    in_graph = _check_inplace(a, name)
    if not in_graph and _needs_grad(b):
        check_castable(a, b._dtype, name)  # before anything is written (an int view *= a float in a graph)
        if _refuse_shared(a, name, lambda v: _binary(fn, op, v.clone(), b, name.rstrip("_"))):
            return a
        if fn.saves:  # a plain tensor takes b's graph through a recorded assignment of the new values
            a[...] = _binary(fn, op, a.clone(), b, name.rstrip("_"))
            return a
    if in_graph or _needs_grad(b):
        if fn.saves and (op not in (F.MUL, F.DIV) or _needs_grad(b)):
            # its gradient needs a's old value (y *= s with s in the graph): computed out of place from a clone
            # (PyTorch keeps the original self likewise), then written into a, which takes the new node
            out = _binary(fn, op, a.clone(), b, name.rstrip("_"))
            _C.copy_(a, out)  # bumps a's version: a node that saved the old a raises at backward
            a.grad_fn, a._output_nr = out.grad_fn, out._output_nr
            if a._root_has_views:
                rebase_views(a)
            return a
        return _InplaceBinary.apply(a, b, op, fn)  # `a` becomes the node's output
    _C.binary(op, a, b, a)
    return a


_SLOT_FUNCTIONS = {F.ADD: (F.Add, "add"), F.SUB: (F.Sub, "sub"), F.MUL: (F.Mul, "mul"), F.DIV: (F.Div, "div")}


def _binary_slot(op, a, b):
    """tensor op b where the C operator has no fast path: b is not a tensor or a plain number (a NumPy value,
    a bool, something refused), or saved-tensor hooks are active."""
    fn, name = _SLOT_FUNCTIONS[op]
    cx = hooks.get("complex")
    if cx is not None and cx.is_complex_operand(b):  # x * 1j, x * z: a complex result (_core/complex.py)
        return cx.binary(name, a, b)
    if getattr(type(b), "is_sparse", False) is True and name in ("add", "sub"):  # dense +- sparse: dense (sparse.py)
        return b.__radd__(a) if name == "add" else b.__rsub__(a)
    if not isinstance(b, OPERANDS):  # a type of its own (a sympy symbol: pykan): its reflected operator decides
        return NotImplemented
    return _binary(fn, op, a, b, name)


def _rsub(self, o):
    """o - self for a non-tensor o."""
    cx = hooks.get("complex")
    if cx is not None and cx.is_complex_operand(o):
        return cx.binary("rsub", self, o)
    if not isinstance(o, OPERANDS):
        return NotImplemented
    o = _check_number(o, "sub")
    if isinstance(o, _C.TensorBase):
        return _binary(F.Sub, F.SUB, o, self, "sub")
    return F.RSub.apply(self, o) if _needs_grad(self) else _C.binary(F.SUB, o, self)


def _rtruediv(self, o):
    """o / self for a non-tensor o."""
    cx = hooks.get("complex")
    if cx is not None and cx.is_complex_operand(o):
        return cx.binary("rdiv", self, o)
    if not isinstance(o, OPERANDS):
        return NotImplemented
    o = _check_number(o, "div")
    return F.Div.apply(o, self) if _needs_grad(self) else _C.binary(F.DIV, o, self)


_C._autograd_setup(
    autograd.grad_mode, autograd.AccumulateGrad, autograd.state, autograd._label_saved,
    {op: (fn, 0 if not fn.saves else 2 if fn.saves == "out" else 1) for op, (fn, _) in _SLOT_FUNCTIONS.items()},
    _binary_slot, _rsub, _rtruediv)


class Tensor(_C.TensorBase):
    """A multi-dimensional array on a device, with autograd. Create with gpumemnet.tensor, zeros, ...

    No __slots__: scripts set their own attributes on tensors and parameters (Informer's `pe.require_grad = False`,
    fastai's `p.grad_avg`, `p.no_weight_decay = True`), as PyTorch's tensors allow. CPython allocates the
    instance dict only when one is set."""
    __hash__ = object.__hash__
    __array_priority__ = 1000  # make NumPy defer to our reflected operators

    # ---- metadata ---------------------------------------------------------------------------------------
    @property
    def dtype(self):
        return DTYPES[self._dtype]

    @property
    def device(self):
        return device_of(self._device)

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def is_cuda(self):
        return self._device.startswith("cuda")

    @property
    def data(self):
        d = self.detach()
        d._data_alias = True  # in-place writes of graph values into it are allowed (_refuse_shared)
        d._unversioned = True  # and do not count as writes of self, whose saved copies stay valid (PyTorch's)
        return d

    @data.setter
    def data(self, value):
        """t.data = v: t takes v's memory, shape and dtype, keeping its identity and requires_grad (PyTorch's swap:
        an EMA's `p.data = shadow` ... `p.data = backup` restores; a copy into t's old memory would not)."""
        if not isinstance(value, _C.TensorBase):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}")
        self._set_data(value.detach())
        if self._is_param:
            self._category = "parameter"  # the memory reports count the new memory as this parameter's

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[_C_wrap(dim, self.ndim)]

    def dim(self):
        return self.ndim

    def element_size(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is ambiguous; use "
                               f".any() / .all() style reductions")
        return bool(self.item())

    def __float__(self):
        if self.requires_grad:
            warn_scalar_of_grad_tensor()
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only a one-element integer tensor can be used as an index")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):  # np.asarray(t) refuses what t.numpy() does, as PyTorch's
        """The tensor's memory (np.asarray: shared, as PyTorch's), or a copy where NumPy asks for one (np.array(t):
        writes to it changed the tensor) or the dtype differs."""
        a = self.numpy() if self._dtype != 3 else self.float().numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def tolist(self):
        if self.numel() == 0:  # no data to read: nested empty lists of the shape (NumPy cannot hold (0, 2**62))
            return _tensor_str.empty_list(tuple(self.shape))
        t = self.detach()  # PyTorch's tolist reads a tensor that requires grad too
        return _C.TensorBase.numpy(t.float() if t._dtype == 3 else t).tolist()

    def numpy(self, *, force=False):
        """The values as a NumPy array sharing this CPU tensor's memory. force=True (PyTorch's) reads any tensor:
        one that requires grad is detached, one on CUDA copied to the host (a copy, no longer shared)."""
        if force:
            return _C.TensorBase.numpy(self.detach().cpu())
        if autograd.is_grad_enabled() and self.requires_grad:
            raise RuntimeError("numpy: this tensor requires grad; call .detach().numpy() to read its values")
        return _C.TensorBase.numpy(self)

    def __repr__(self, *, tensor_contents=None):  # (a subclass's repr names its class, as PyTorch's)
        return _tensor_str.tensor_repr(self, type(self) is not Tensor and type(self).__name__, tensor_contents)

    def __deepcopy__(self, memo):
        """A copy with its own storage, keeping requires_grad, the parameter flag, the category, the name and (a
        tensor that is not a Parameter, as in PyTorch) a copy of .grad: what copy.deepcopy(model) needs."""
        if self.grad_fn is not None:
            raise RuntimeError("deepcopy: only leaf tensors can be deep-copied (PyTorch's rule); detach() first")
        if id(self) in memo:
            return memo[id(self)]
        with autograd.no_grad():
            out = F.Clone.forward(autograd._NO_CTX, self)
        out._category = self._category
        out._is_param = self._is_param
        out._name = self._name
        out.requires_grad = self.requires_grad
        memo[id(self)] = out
        import copy
        if self.grad is not None and not self._is_param:  # PyTorch's Parameter.__deepcopy__ leaves .grad behind
            out.grad = copy.deepcopy(self.grad, memo)
        if getattr(self, "__dict__", None):  # the script's own attributes (p.no_weight_decay), as PyTorch copies them
            out.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return out

    # ---- autograd -----------------------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        autograd.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    def detach(self):
        d = self._as_strided(self.shape, self._strides, self._offset)
        d._base = None  # PyTorch's detach() is no view (x[0].detach()._base is None)
        return d

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def requires_grad_(self, requires_grad=True):
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("requires_grad_: only leaf tensors can stop requiring grad; use detach()")
        self.requires_grad = requires_grad
        return self

    def register_hook(self, hook):
        return autograd_hooks.register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        return autograd_hooks.register_post_accumulate_grad_hook(self, hook)

    # ---- arithmetic ------------------------------------------------------------------------------------------
    # +, -, * and / (and their reflections) are TensorBase's number slots, in C (csrc/autograd_node.c): they
    # record their node without a Python frame, and call _binary_slot, _rsub and _rtruediv below for the rest.
    def __pow__(self, o):
        if isinstance(o, int) and o < 0 and not isinstance(o, bool) and not self.dtype.is_floating_point:
            # PyTorch's rule (and error): an integer result cannot hold 1 / x**n
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        return _binary(F.Pow, F.POW, self, o, "pow")
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)

    def __rpow__(self, o):
        o = _check_number(o, "pow")
        return F.Pow.apply(o, self) if _needs_grad(self) else _C.binary(F.POW, o, self)

    def __neg__(self):
        return F.Neg.apply(self) if _needs_grad(self) else _C.unary(F.NEG, self)

    def __abs__(self):
        return self.abs()

    def __pos__(self):
        return self

    def __iadd__(self, o): return _inplace(F.Add, F.ADD, self, o, "add_")
    def __isub__(self, o): return _inplace(F.Sub, F.SUB, self, o, "sub_")
    def __imul__(self, o): return _inplace(F.Mul, F.MUL, self, o, "mul_")
    def __itruediv__(self, o): return _inplace(F.Div, F.DIV, self, o, "div_")
    mul_ = __imul__
    def div_(self, other, *, rounding_mode=None):  # rounding: torchvision's box-format conversions pass None
        if rounding_mode is None:
            return _inplace(F.Div, F.DIV, self, other, "div_")
        return self.copy_(self.div(other, rounding_mode=rounding_mode))

    # `other`, `exponent`: PyTorch's names, which scripts pass by keyword (torch.add(input=x, other=y))
    def add_(self, other, *args, alpha=1):
        r = half_alpha_add(self, other, args, alpha)
        return self.copy_(r) if r is not None else self.__iadd__(_alpha_scaled(self, other, args, alpha, "add_"))

    def sub_(self, other, *args, alpha=1):
        r = half_alpha_add(self, other, args, -alpha if alpha != 1 else 1)
        return self.copy_(r) if r is not None else self.__isub__(_alpha_scaled(self, other, args, alpha, "sub_"))

    def add(self, other, *args, alpha=1):
        r = half_alpha_add(self, other, args, alpha)
        return r if r is not None else self + _alpha_scaled(self, other, args, alpha, "add")

    def sub(self, other, *args, alpha=1):
        r = half_alpha_add(self, other, args, -alpha if alpha != 1 else 1)
        return r if r is not None else self - _alpha_scaled(self, other, args, alpha, "sub")

    def mul(self, other): return self * other
    def pow(self, exponent): return self ** exponent
    def pow_(self, e): return _inplace(F.Pow, F.POW, self, e, "pow_")
    __ipow__ = pow_  # (x **= 2 is in place: views and aliases see it)

    # fmod, %, // and atan2: C ops of their own (exact for integers; tensor_math.py has their gradients)
    def fmod(self, o): return _binary(Fmod, FMOD, self, o, "fmod")
    def remainder(self, o): return _binary(Remainder, REMAINDER, self, o, "remainder")
    def floor_divide(self, o): return _binary(FloorDiv, FLOORDIV, self, o, "floor_divide")
    def atan2(self, o): return _binary(Atan2, ATAN2, self, o, "atan2")
    __mod__, __floordiv__, arctan2 = remainder, floor_divide, atan2
    def fmod_(self, o): return _inplace(Fmod, FMOD, self, o, "fmod_")
    def remainder_(self, o): return _inplace(Remainder, REMAINDER, self, o, "remainder_")
    def floor_divide_(self, o): return _inplace(FloorDiv, FLOORDIV, self, o, "floor_divide_")
    def atan2_(self, o): return _inplace(Atan2, ATAN2, self, o, "atan2_")
    __imod__, __ifloordiv__ = remainder_, floor_divide_

    def __rmod__(self, o):
        o = _check_number(o, "remainder")
        return Remainder.apply(o, self) if _needs_grad(self) else _C.binary(REMAINDER, o, self)

    def __rfloordiv__(self, o):
        o = _check_number(o, "floor_divide")
        return FloorDiv.apply(o, self) if _needs_grad(self) else _C.binary(FLOORDIV, o, self)

    def maximum(self, other): return _binary(F.Maximum, F.MAXIMUM, self, other, "maximum")
    def minimum(self, other): return _binary(F.Minimum, F.MINIMUM, self, other, "minimum")

    # comparisons (never differentiable)
    def eq(self, o): return _C.binary(F.EQ, self, _check_number(o, "eq"))
    def ne(self, o): return _C.binary(F.NE, self, _check_number(o, "ne"))
    def __lt__(self, o): return _C.binary(F.LT, self, _check_number(o, "lt"))
    def __le__(self, o): return _C.binary(F.LE, self, _check_number(o, "le"))
    def __gt__(self, o): return _C.binary(F.GT, self, _check_number(o, "gt"))
    def __ge__(self, o): return _C.binary(F.GE, self, _check_number(o, "ge"))
    lt, le, gt, ge = __lt__, __le__, __gt__, __ge__

    # `t == None`, `t != "a"`: NotImplemented lets Python try the other operand (a complex tensor) and then fall
    # back to identity (False / True), as PyTorch's operators give; the methods eq / ne refuse such operands with a
    # TypeError, as torch.eq does
    def __eq__(self, o):
        return self.eq(o) if isinstance(o, _COMPARABLE) else NotImplemented

    def __ne__(self, o):
        return self.ne(o) if isinstance(o, _COMPARABLE) else NotImplemented

    def logical_not(self):
        return _C.unary(F.LOGICAL_NOT, self)

    def sign(self):
        # in a graph: PyTorch's sign is recorded, with a zero derivative (a straight-through or sign(x) * |x| term
        # then gets zeros, not None, and backward from it alone runs)
        return _Rounding.apply(self, F.SIGN) if _needs_grad(self) and self.is_floating_point() else \
            _C.unary(F.SIGN, self)

    def exp(self):
        x = _amp.fp32_on_cuda(self)[0] if _amp_state.enabled else self
        return F.Exp.apply(x) if _needs_grad(x) else _C.unary(F.EXP, x)

    def log(self):
        x = _amp.fp32_on_cuda(self)[0] if _amp_state.enabled else self
        return F.Log.apply(x) if _needs_grad(x) else _C.unary(F.LOG, x)

    def sqrt(self): return F.Sqrt.apply(self) if _needs_grad(self) else _C.unary(F.SQRT, self)
    def abs(self): return F.Abs.apply(self) if _needs_grad(self) else _C.unary(F.ABS, self)
    def neg(self): return -self

    # neural-network ops, as methods (_core/activation.py does the work; nn.functional re-exports it)
    def relu(self): return activation.relu(self)
    def relu_(self): return activation.relu_(self)
    def sigmoid(self): return activation.sigmoid(self)
    def sigmoid_(self): return activation.sigmoid_(self)
    def tanh(self): return activation.tanh(self)
    def tanh_(self): return activation.tanh_(self)
    def prelu(self, weight): return activation.prelu(self, weight)
    def softmax(self, dim=None, dtype=None, *, axis=_NO):
        if axis is not _NO or dim.__class__ is not int:
            dim = required_dim("softmax", dim, axis)
        return activation.softmax(self, dim, dtype=dtype)

    def log_softmax(self, dim=None, dtype=None, *, axis=_NO):
        if axis is not _NO or dim.__class__ is not int:
            dim = required_dim("log_softmax", dim, axis)
        return activation.log_softmax(self, dim, dtype=dtype)

    def clamp(self, min=None, max=None):
        """min(max(self, min), max). In a graph, a tensor bound is a maximum / minimum (the bound gets the gradient
        where it wins, a tie splits it: PyTorch's rule); at a number bound the gradient is 0 (F.Clamp)."""
        if min is None and max is None:
            raise _C.ArgumentError("clamp: at least one of 'min' or 'max' must not be None")
        fitting(min, self._dtype), fitting(max, self._dtype)  # a bound past float32's range: PyTorch's error
        tensor_bound = isinstance(min, _C.TensorBase) or isinstance(max, _C.TensorBase)
        if tensor_bound and (_needs_grad(self) or _needs_grad(min) or _needs_grad(max)):
            out = self
            if min is not None:
                out = _binary(F.Maximum, F.MAXIMUM, out, min, "clamp") if isinstance(min, _C.TensorBase) else \
                    F.Clamp.apply(out, min, None)
            if max is not None:
                out = _binary(F.Minimum, F.MINIMUM, out, max, "clamp") if isinstance(max, _C.TensorBase) else \
                    F.Clamp.apply(out, None, max)
            return out
        return F.Clamp.apply(self, min, max) if _needs_grad(self) else _C.clamp(self, min, max)

    clip = clamp

    def clamp_(self, min=None, max=None):
        fitting(min, self._dtype), fitting(max, self._dtype)
        if write_recorded(self, "clamp_", (min, max), lambda x: x.clamp(min, max)):
            return self
        _C.clamp(self, min, max, self)
        return self

    def zero_(self):
        return self.fill_(0)

    def fill_(self, value):
        """In place. On a tensor in a graph it is recorded as self[...] = value (no entry keeps its gradient); on
        a slice of one, as base[slice] = value (write_graph_view), as PyTorch records both."""
        if autograd.is_graph_view(self) and write_graph_view(self, lambda v: value):
            return self
        if _check_inplace(self, "fill_") or _needs_grad(value):
            self[...] = value
            return self
        _C.fill_(self, fitting(value, self._dtype))
        return self

    def copy_(self, src, non_blocking=False):
        """src's values (cast, broadcast, from any device) into self. Recorded where self is in a graph or src
        requires grad (as self[...] = src; on a slice of a tensor in a graph, on its base), as PyTorch's.
        non_blocking is accepted: the copy is complete when copy_ returns."""
        if isinstance(src, (bool, int, float)):  # a Python number, as PyTorch's (torchrl: traj_id.copy_(n + 1))
            return self.fill_(src)
        if isinstance(src, _C.TensorBase) and src._device == self._device:
            if autograd.is_graph_view(self) and write_graph_view(self, lambda v: src):
                return self
            if _check_inplace(self, "copy_") or _needs_grad(src):
                self[...] = src
                return self
        refuse_inplace(self, "copy_", "; copy into a new tensor (src.clone(), or where() to mix)")
        _C.copy_(self, src)
        return self

    # ---- random fills in place (issue 12, helper "nnlayers"): the Philox generator (_C.uniform_ / normal_), so
    # the numbers are the same on CPU and CUDA and gm.set_rng_state replays them; generator= draws from its own
    # stream (random.py's Generator) -------------------------------------------------------------------------
    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        t = random_fill_target(self, "uniform_")
        with drawing_from(generator):
            _C.uniform_(t, float(a), float(b))
        return random_filled(self, t)

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        t = random_fill_target(self, "normal_")
        with drawing_from(generator):
            _C.normal_(t, float(mean), float(std))
        return random_filled(self, t)

    def bernoulli_(self, p=0.5, *, generator=None):
        """1 with probability p (a number, or a tensor of probabilities broadcast to self), else 0: a uniform
        draw u in [0, 1) per element, 1 where u < p (torchvision's StochasticDepth: empty(size).bernoulli_(q))."""
        t = random_fill_target(self, "bernoulli_", floats_only=False)
        if not isinstance(p, _C.TensorBase) and not 0.0 <= p <= 1.0:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        if isinstance(p, _C.TensorBase) and p.device.type != "meta":  # meta has no values to check
            q = p.detach()
            if not bool(((q >= 0) & (q <= 1)).all()):  # NaN fails both comparisons, as in PyTorch
                raise RuntimeError(f"bernoulli_ expects every probability in p to be in [0, 1], got p of shape "
                                   f"{tuple(p.shape)} with values outside it")
        u = t if t.is_floating_point() else _C.empty(tuple(t.shape), 0, t._device)
        with drawing_from(generator):
            _C.uniform_(u, 0.0, 1.0)
        _C.copy_(t, u < p)  # the comparison's bool tensor is the one temporary
        return random_filled(self, t)

    def bernoulli(self, p=None, *, generator=None):
        """A new tensor of 0/1 draws with probabilities self (or p), in self's dtype."""
        out = _C.empty(tuple(self.shape), self._dtype, self._device)
        return Tensor.bernoulli_(out, self if p is None else p, generator=generator)

    def matmul(self, o):
        return matmul(self, o)

    # ---- shape -------------------------------------------------------------------------------------------
    def view(self, *shape, dtype=None, size=None):  # size=: PyTorch's keyword for the shape
        if size is not None:
            shape = (size,)
        if dtype is not None or (len(shape) == 1 and isinstance(shape[0], _dtype_cls)):
            return self._view_as_dtype(dtype if dtype is not None else shape[0])
        shape = _shape_arg(shape)
        return F.View.apply(self, shape) if _needs_grad(self) else self._view(shape)

    def reshape(self, *shape_, shape=None):  # shape=: PyTorch's keyword
        shape = _shape_arg(shape_) if shape is None else tuple(shape)
        return F.Reshape.apply(self, shape) if _needs_grad(self) else F.reshape_nograd(self, shape)

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        s, e = _C_wrap(start_dim, self.ndim), _C_wrap(end_dim, self.ndim)
        if s > e:
            raise _C.ArgumentError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        if s == e:  # nothing to flatten: the tensor itself, as PyTorch's
            return self
        shape = tuple(self.shape[:s]) + (-1,) + tuple(self.shape[e + 1:])
        if self.numel() == 0:
            n = 1
            for x in self.shape[s:e + 1]:
                n *= x
            shape = tuple(self.shape[:s]) + (n,) + tuple(self.shape[e + 1:])
        return self.reshape(shape)

    def transpose(self, dim0, dim1):
        return F.Transpose.apply(self, dim0, dim1) if _needs_grad(self) else self._transpose(dim0, dim1)

    def t(self):
        if self.ndim > 2:
            raise _C.ArgumentError(f"t() expects a tensor with <= 2 dimensions, got shape {tuple(self.shape)}")
        return self.view(tuple(self.shape)) if self.ndim < 2 else self.transpose(0, 1)  # (a view, as PyTorch's)

    def permute(self, *dims_, dims=None):  # x.permute(dims=(2, 0, 1)) too, as PyTorch
        dims = _shape_arg(dims_) if dims is None else tuple(dims)
        return F.Permute.apply(self, dims) if _needs_grad(self) else self._permute(dims)

    def expand(self, *shape, size=None):  # x.expand(size=...) too, as PyTorch
        shape = _shape_arg(shape) if size is None else tuple(size)
        return F.Expand.apply(self, shape) if _needs_grad(self) else self._expand(shape)

    def expand_as(self, other):
        return self.expand(other.shape)

    def unsqueeze(self, dim=None, *, axis=_NO):
        if axis is not _NO or dim.__class__ is not int:
            dim = required_dim("unsqueeze", dim, axis)
        return F.Unsqueeze.apply(self, dim) if _needs_grad(self) else self._unsqueeze(dim)

    def squeeze(self, dim=None, *, axis=_NO):
        if axis is not _NO or dim.__class__ not in PLAIN_DIMS:
            dim = dim_args("squeeze", dim, False, axis)[0]
            if isinstance(dim, (tuple, list)):  # several dims (PyTorch >= 2.0)
                return squeeze_dims(self, dim)
        return F.Squeeze.apply(self, dim) if _needs_grad(self) else self._squeeze(dim)

    def clone(self, *, memory_format=None):  # memory_format: accepted, NCHW kept (as .to(memory_format=) does)
        return F.Clone.apply(self) if _needs_grad(self) else F.Clone.forward(autograd._NO_CTX, self)

    def __getitem__(self, idx):
        if self.ndim and not _needs_grad(self):  # x[i] and x[a:b], the commonest, as make_plan's steps would do
            if type(idx) is int:
                return self._select(0, idx)
            if type(idx) is slice:
                return self._slice(0, idx.start, idx.stop, 1 if idx.step is None else idx.step)
        idx = sequence_as_tuple(idx)
        plan = make_plan(self, idx)
        if plan is None:
            return indexing_multi.getitem(self, idx if isinstance(idx, tuple) else (idx,))
        if _needs_grad(self):
            return IndexFn.apply(self, plan)
        return apply_plan(self, plan)

    def __setitem__(self, idx, value):
        """self[idx] = value, recorded (IndexPutFn; on a graph view's base) where PyTorch records it (CopySlices)."""
        if not isinstance(value, (_C.TensorBase, int, float, bool)):
            value = _C.from_numpy(np.asarray(value), dtype=self._dtype, device=self._device)
        idx = sequence_as_tuple(idx)
        check_put_dtypes(self, idx, value)
        if isinstance(value, _C.TensorBase) and value.ndim == 0 and value._dtype != self._dtype:
            value = value.to(self.dtype)  # a 0-d value casts, as a number does (y[y > 1] = torch.tensor(2.5))
        if autograd.is_graph_view(self) and write_graph_view(self, lambda v: assigned_copy(v, idx, value)):
            return  # a view of a tensor in a graph (d2l's masked_softmax: X = x.reshape(...); X[~mask] = -1e6)
        in_graph = _check_inplace(self, "index assignment")
        if not in_graph and _needs_grad(value) and \
                _refuse_shared(self, "index assignment", lambda v: assigned_copy(v, idx, value)):
            return
        plan = make_plan(self, idx)
        if plan is None:
            if in_graph or _needs_grad(value):
                indexing_multi.setitem_recorded(self, idx, value)
            else:
                indexing_multi.setitem(self, idx if isinstance(idx, tuple) else (idx,), value)
            return
        if in_graph or _needs_grad(value):
            IndexPutFn.apply(self, value, plan)
            return
        put_plan(self, plan, value, accumulate=False)

    # ---- conversion -----------------------------------------------------------------------------------------
    def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False, memory_format=None):
        """A tensor of the given dtype and/or on the given device (self when nothing changes).

        memory_format (gpumemnet.channels_last, contiguous_format, preserve_format): a copy where PyTorch makes one,
        laid out NCHW (gpumemnet keeps NCHW: gpumemnet.channels_last; _core/dtype.py's format_copy).

        non_blocking=True: a copy to CUDA from pinned memory (pin_memory()) returns before it ran, overlapping
        the host's next work; the pinned source may be dropped at once (its memory is not reused before the copy
        ran), but writing into it before gm.cuda.synchronize() races the copy, as in PyTorch. Other copies are
        synchronous whatever the flag: from pageable memory the source is staged before the call returns, and a
        copy to the host waits for the data."""
        for a in args:
            if isinstance(a, _C.TensorBase):
                dtype, device = a.dtype, a.device
            elif isinstance(a, bool):
                non_blocking = a  # to(device, dtype, non_blocking) positionally, as PyTorch allows
            elif isinstance(a, str) or type(a).__name__ == "device":
                device = a
            elif isinstance(a, int):  # x.to(0): CUDA device 0, as PyTorch
                device = f"cuda:{a}"
            else:
                dtype = a
        fmt = None if memory_format is None else _check_format(memory_format, "to")
        out = self
        if isinstance(dtype, _dtype_cls) and dtype.is_complex:  # a real tensor made complex (_core/complex.py)
            return hooks.get("complex").from_real(self if device is None else self.to(device=device), dtype)
        if dtype is not None:
            dt = as_dtype(dtype, "to: dtype")
            if dt.code != self._dtype:
                out = F.ToDtype.apply(out, dt.code) if _needs_grad(out) else F.cast(out, dt.code)
        if device is not None:
            dev = device_str(device)
            if dev != out._device:
                out = _to_device(out, dev, non_blocking)
        if copy and out is self:
            out = self.clone()
        if fmt is not None and fmt.name != "preserve_format" and out is self:
            out = format_copy(self, fmt, to=True)
        return out

    def type_as(self, other):
        if not isinstance(other, _C.TensorBase) and not getattr(type(other), "_tensor_like", False):
            raise TypeError(f"type_as(): argument 'other' must be Tensor, not {type(other).__name__}")
        return self.to(other.dtype)

    def cpu(self): return self.to(device="cpu")

    def cuda(self, device=None, non_blocking=False):
        """A copy on CUDA device `device` (None: the thread's current one, gm.cuda.set_device)."""
        device = "cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device
        return self.to(device=device, non_blocking=non_blocking)

    def pin_memory(self):
        """A copy of this CPU tensor in pinned (page-locked) host memory, or self when it is pinned already.

        Uploads from pinned memory run at the bus's full speed and can be asynchronous (.cuda(non_blocking=True)).
        Its bytes are counted under the pseudo-device "cpu-pinned" (gm.memory.memory_stats("cpu-pinned")), not
        under "cpu". Needs CUDA: RuntimeError without a CUDA device, as in PyTorch."""
        if self.is_pinned():
            return self
        if _needs_grad(self):
            return _PinMemory.apply(self)
        return _C._pin_memory(self)

    def is_pinned(self):
        """Whether this tensor lives in pinned host memory (pin_memory())."""
        return self._is_pinned

    def record_stream(self, stream):
        """Accepted for PyTorch code: every stream of a device is its one compute stream in gpumemnet, so memory
        freed after use on it is never reused before that use has run (gpumemnet/cuda/_streams.py)."""
        if self._device.split(":")[0] != "cuda":
            raise RuntimeError(f"record_stream: expected a CUDA tensor, got one on {self._device}")

    def float(self): return self.to(dtype="float32")
    def double(self): return self.to(dtype="float64")
    def half(self): return self.to(dtype="float16")
    def bfloat16(self): return self.to(dtype="bfloat16")
    def long(self): return self.to(dtype="int64")
    def bool(self): return self.to(dtype="bool")
    # storage-only integer dtypes (_core/dtype.py says which ops take them)
    def int(self): return self.to(dtype="int32")
    def short(self): return self.to(dtype="int16")
    def char(self): return self.to(dtype="int8")
    def byte(self): return self.to(dtype="uint8")


# The mixins' methods are copied into Tensor, not inherited: isinstance(x, TensorBase), which every op checks,
# walks the class's MRO, so each base class costs every op (7 more bases cost 4 % of the instructions of an a + b).
# Precedence is what inheritance gave: Tensor's own names, then the mixins in this order, each before its bases.
for _mixin in (ReduceMethods, TensorMethods, MathMethods, ComposeMethods, SelectMethods, MoreMethods, SpecialMethods,
               ProductMethods, MiscMethods, DecompMethods):
    for _klass in _mixin.__mro__[:-1]:
        for _name, _value in vars(_klass).items():
            if _name not in ("__dict__", "__weakref__", "__slots__", "__module__", "__doc__", "__qualname__") \
                    and _name not in vars(Tensor):
                setattr(Tensor, _name, _value)
del _mixin, _klass, _name, _value
_install_numpy_forms(Tensor, skip=("size",))  # axis= / keepdims= / NumPy int dims on the other methods with a dim


def _C_wrap(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"dimension {dim} is out of range for a tensor with {ndim} dimensions")
    return dim % n


def _shape_arg(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _to_device(t, dev, non_blocking=False):
    """Copy across devices (recorded by autograd: the gradient flows back to the source device). A meta tensor
    has no data, so meta -> cpu/cuda is refused rather than inventing values."""
    if t._device == "meta" and dev != "meta":
        raise RuntimeError(f"to: a meta tensor has no data to copy to {dev}")
    if _needs_grad(t):
        return F.ToDevice.apply(t, dev, bool(non_blocking))
    return _C._to_device(t, dev, bool(non_blocking))


class _PinMemory(autograd.Function):
    """pin_memory() of a tensor that requires grad: a copy; the gradient passes through unchanged."""

    @staticmethod
    def forward(ctx, a):
        return _C._pin_memory(a)

    @staticmethod
    def backward(ctx, g):
        return g


def matmul(a, b):
    if not isinstance(a, _C.TensorBase) or not isinstance(b, _C.TensorBase):
        if getattr(type(a), "_tensor_like", False):  # a complex or sparse tensor (creation.tensor_like_has)
            return a.__matmul__(b)
        if getattr(type(b), "_tensor_like", False):
            return b.__rmatmul__(a)
        raise TypeError(f"matmul: expected two tensors, got {type(a).__name__} and {type(b).__name__}")
    return matmul_tensors(a, b)


defer_to_foreign_operands(Tensor)
_C._set_tensor_class(Tensor)
_C._set_size_class(Size)  # the type of .shape and .size()
autograd.set_tensor_class(Tensor)
