"""Activations and softmax (layer 1, core): relu, relu_, leaky_relu, sigmoid, sigmoid_, tanh, tanh_, gelu, silu,
hardswish, hardsigmoid, mish, hardtanh, hardtanh_, relu6, elu, elu_, softplus, prelu, softmax, log_softmax.

They are Tensor methods (x.relu(), x.softmax(dim)) as well as nn.functional ops, so they live below Tensor and
gpumemnet.nn.functional re-exports them. What each backward keeps is chosen for memory: relu / leaky_relu
(slope >= 0) / sigmoid / tanh / hardsigmoid / hardtanh / relu6 / elu (alpha >= 0) / softmax / log_softmax save
their OUTPUT, which the next layer usually keeps anyway (so it costs nothing extra), and which makes the in-place
forms free; gelu, silu, hardswish, mish, softplus and prelu save their input (kernels/cpu/activation.h says why).
"""
import warnings

from .. import _C
from .arg_forms import as_int
from . import autocast as _amp
from .autograd import Function
from .autograd import as_activation as _as_activation
from .autograd import check_inplace as _check_inplace, needs_grad as _needs_grad
from .autograd import _SavedTensor, is_graph_view
from .indexing import write_graph_view
from .dtype import get_default_dtype
from .state import state as _state

# op codes: kernels/activation_ops.h
(RELU, LEAKY_RELU, SIGMOID, TANH, GELU, GELU_TANH, SILU, HARDSWISH, HARDSIGMOID, MISH, HARDTANH, ELU,
 SOFTPLUS) = range(13)
_NODE_NAMES = ("ReluBackward0", "LeakyReluBackward0", "SigmoidBackward0", "TanhBackward0", "GeluBackward0",
               "GeluBackward0", "SiluBackward0", "HardswishBackward0", "HardsigmoidBackward0", "MishBackward0",
               "HardtanhBackward0", "EluBackward0", "SoftplusBackward0")
_INPUT_OPS = frozenset((GELU, GELU_TANH, SILU, HARDSWISH, MISH, SOFTPLUS))
# leaky_relu and elu read their output when their slope / alpha is >= 0, else their input (and then, as in
# PyTorch, their in-place forms cannot be differentiated); the parameter's name for that error:
_SIGNED = {LEAKY_RELU: "negative_slope", ELU: "alpha"}


def _fp32(*tensors):
    """autocast's float32 ops on both devices (the losses): half inputs are widened first."""
    return _amp.fp32(*tensors) if _amp._state.enabled else tensors


def _fp32_on_cuda(*tensors):
    """autocast's float32 ops on CUDA only (softmax, log_softmax, softplus, layer_norm, group_norm): on the CPU
    they follow their input, as PyTorch's CPU autocast does."""
    return _amp.fp32_on_cuda(*tensors) if _amp._state.enabled else tensors


def _check_tensor(x, op, name="input"):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def _number(v, op, name):
    try:
        return float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}") from None


# ---- activations ----------------------------------------------------------------------------------------------
def _saves_input(op, alpha):
    return op in _INPUT_OPS or (op in _SIGNED and alpha < 0)


class _Activation(Function):
    reuses_grad = True  # the input gradient may be written over the incoming one (autograd.Function)

    @staticmethod
    def forward(ctx, x, op, alpha, beta):
        out = _C.activation(op, x, alpha, None, beta)
        if ctx.needs_input_grad:
            ctx.op, ctx.alpha, ctx.beta = op, alpha, beta
            ctx.save_for_backward(x if _saves_input(op, alpha) else out)
        return out

    @staticmethod
    def backward(ctx, g):
        saved, = ctx._unpacked
        if saved._dtype == _UINT8:  # relu's bit mask (keep_relu_mask)
            return _C.relu_mask_backward(g, saved, ctx.grad_is_free(0)), None, None, None
        return _C.activation_backward(ctx.op, g, saved, ctx.alpha, ctx.grad_is_free(0), ctx.beta), None, None, None

    def name(self):
        return _NODE_NAMES[self.op]

    @property
    def output_writable(self):
        """Whether PyTorch's op saves its input (leaky_relu, elu, hardtanh, gelu...), so that a script may write into
        the output before backward; relu, sigmoid and tanh save their result there, and such a write raises."""
        return self.op not in (RELU, SIGMOID, TANH)


class _ActivationInplace(Function):
    """act_(x) recorded as a node whose output is x itself (as tensor._InplaceBinary): the edge to x's old
    producer is taken before the write. Backward reads the new values (the output), or, for the ops whose
    gradient needs the input (silu, hardswish, mish), a copy of the input taken before the write — what
    PyTorch's silu_ & co. save too, so the in-place form then saves no memory but still runs in a graph."""

    @staticmethod
    def forward(ctx, x, op, alpha, beta):
        saved = _as_activation(x.detach().clone()) if _saves_input(op, alpha) else x
        _C.activation(op, x, alpha, x, beta)
        ctx.op, ctx.alpha, ctx.beta = op, alpha, beta
        ctx.save_for_backward(saved)
        return x

    reuses_grad = True
    backward = staticmethod(_Activation.backward)
    name = _Activation.name
    output_writable = _Activation.output_writable  # (ReLU6(inplace=True) then y += x: PyTorch's trains)


_UINT8 = 6  # dtype code (_core/dtype.py)


def keep_relu_mask(x, node=None):
    """Make the relu node that produced x (node, by default x.grad_fn) keep one bit per element (x > 0; 1/32 of
    float32 x) instead of x itself, when nothing but x and that node holds x's storage, and say whether it did.
    For a consumer that keeps only a compact form of x (max pooling's window taps, nn/_functional_pool.py), or
    that is done with x (a convolution's backward once the weight's gradient is computed): x is then freed as
    soon as the caller drops it, instead of living until the relu's backward. Left alone under saved-tensor hooks
    (checkpoint, offload: the hook decides what is kept, and counts what is saved) and after an in-place write to
    x (backward must still refuse that). The gradient is the same: relu's backward tests exactly saved > 0."""
    node = x.grad_fn if node is None else node
    if type(node) not in (_Activation, _ActivationInplace) or node.op != RELU or _state.saved_tensors_hooks or \
            x._storage_refs != 2 or not x._is_contiguous() or x._storage_nbytes != x.numel() * x.element_size():
        return False
    saved = node._saved
    if saved is None or len(saved) != 1 or saved[0].unpack is not None or saved[0].storage != x._storage_id or \
            saved[0].version != x._version:
        return False
    node._saved = (_SavedTensor(_as_activation(_C.relu_mask(x))),)
    return True


def _activation(x, op, inplace, opname, alpha=0.0, beta=0.0):
    _check_tensor(x, opname)
    if inplace:
        # a view of a tensor in a graph (torch.relu_(s[1:])): the write is recorded on its base; an op whose
        # backward reads its input (silu) reads a copy, as the write then changes the view's memory
        keep = _saves_input(op, alpha)
        if is_graph_view(x) and write_graph_view(x, lambda v: _activation(v.clone() if keep else v, op, False, opname,
                                                                          alpha, beta)):
            return x
        if _check_inplace(x, opname + "_"):
            if op in _SIGNED and alpha < 0:
                raise RuntimeError(f"{opname}_: the in-place form cannot be differentiated with {_SIGNED[op]}="
                                   f"{alpha} (the gradient needs the input, which the write destroys); use "
                                   f"inplace=False")
            return _ActivationInplace.apply(x, op, alpha, beta)
        _C.activation(op, x, alpha, x, beta)
        return x
    if _needs_grad(x):
        return _Activation.apply(x, op, alpha, beta)
    return _C.activation(op, x, alpha, None, beta)


def _integral(x):
    """Whether x is an integer tensor (not bool): relu, relu6 and hardtanh take those, as PyTorch's do (a clamp)."""
    return isinstance(x, _C.TensorBase) and not x.dtype.is_floating_point and x._dtype != 5 and \
        not getattr(type(x), "_tensor_like", False)


def _clamped(x, lo, hi, inplace):
    lo, hi = (None if v is None else int(v) for v in (lo, hi))  # the bounds in x's type, as the kernel casts them
    return x.clamp_(lo, hi) if inplace else x.clamp(lo, hi)


def relu(input, inplace=False):
    if _integral(input):
        return _clamped(input, 0, None, inplace)
    return _activation(input, RELU, inplace, "relu")


def relu_(input):
    return relu(input, True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _activation(input, LEAKY_RELU, inplace, "leaky_relu", _number(negative_slope, "leaky_relu",
                                                                           "negative_slope"))


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, True)


def _promoting(x, op, opname):
    """torch.sigmoid / tanh: of an integer or bool tensor, in the default dtype, as PyTorch's (its other
    activations refuse integers, and so do ours). Converted where the kernel refused it: no cost otherwise."""
    try:
        return _activation(x, op, False, opname)
    except TypeError:
        if isinstance(x, _C.TensorBase) and not x.dtype.is_floating_point:
            return _activation(x.to(get_default_dtype()), op, False, opname)
        raise


def sigmoid(input):
    return _promoting(input, SIGMOID, "sigmoid")


def sigmoid_(input):
    return _activation(input, SIGMOID, True, "sigmoid")


def tanh(input):
    if getattr(type(input), "_tensor_like", False) and hasattr(type(input), "tanh"):  # a complex tensor
        return input.tanh()
    return _promoting(input, TANH, "tanh")


def tanh_(input):
    return _activation(input, TANH, True, "tanh")


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise _C.ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _activation(input, GELU if approximate == "none" else GELU_TANH, False, "gelu")


def silu(input, inplace=False):
    return _activation(input, SILU, inplace, "silu")


def hardswish(input, inplace=False):
    return _activation(input, HARDSWISH, inplace, "hardswish")


def hardsigmoid(input, inplace=False):
    return _activation(input, HARDSIGMOID, inplace, "hardsigmoid")


def mish(input, inplace=False):
    return _activation(input, MISH, inplace, "mish")


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    lo, hi = _number(min_val, "hardtanh", "min_val"), _number(max_val, "hardtanh", "max_val")
    if lo > hi:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val (got min_val={lo}, max_val={hi})")
    if _integral(input):
        return _clamped(input, lo, hi, inplace)
    return _activation(input, HARDTANH, inplace, "hardtanh", lo, hi)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def relu6(input, inplace=False):
    """hardtanh(input, 0, 6), as PyTorch computes it (its gradient node is a HardtanhBackward too)."""
    if _integral(input):
        return _clamped(input, 0, 6, inplace)
    return _activation(input, HARDTANH, inplace, "relu6", 0.0, 6.0)


def elu(input, alpha=1.0, inplace=False):
    return _activation(input, ELU, inplace, "elu", _number(alpha, "elu", "alpha"))


def elu_(input, alpha=1.0):
    return elu(input, alpha, True)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, the identity where beta x > threshold. A float32 op under CUDA autocast, as in
    PyTorch (exp of a half input overflows early); under CPU autocast it follows its input, as PyTorch's does."""
    b, t = _number(beta, "softplus", "beta"), _number(threshold, "softplus", "threshold")
    _check_tensor(input, "softplus")
    input, = _fp32_on_cuda(input)
    return _activation(input, SOFTPLUS, False, "softplus", b, t)


# ---- prelu --------------------------------------------------------------------------------------------------------
class _PReLU(Function):
    reuses_grad = True

    @staticmethod
    def forward(ctx, x, weight):
        out = _C.prelu(x, weight)
        ctx.save_for_backward(x, weight)  # both gradients need the input; the input's needs the weight
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx._unpacked
        need = ctx.needs_input_grad
        return _C.prelu_backward(g, x, weight, need[0], need[1], ctx.grad_is_free(0))

    def name(self):
        return "PreluKernelBackward0"


def prelu(input, weight):
    """input > 0 ? input : weight * input, weight of 1 or input.shape[1] elements (one per channel). A
    lower-precision op under autocast, as in PyTorch."""
    _check_tensor(input, "prelu")
    _check_tensor(weight, "prelu", "weight")
    if _amp._state.enabled:
        input, weight = _amp.lower(input, weight)
    return _PReLU.apply(input, weight) if _needs_grad(input, weight) else _C.prelu(input, weight)


# ---- softmax ------------------------------------------------------------------------------------------------------
class _Softmax(Function):
    reuses_grad = True

    @staticmethod
    def forward(ctx, x, dim, log):
        out = _C.softmax(x, dim, log)
        ctx.dim, ctx.log = dim, log
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx._unpacked
        return _C.softmax_backward(g, out, ctx.dim, ctx.log, ctx.grad_is_free(0)), None, None

    def name(self):
        return "LogSoftmaxBackward0" if self.log else "SoftmaxBackward0"


def _softmax(input, dim, dtype, log, op):
    _check_tensor(input, op)
    if dim is None:  # PyTorch's legacy implicit choice, with its warning
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                      f"as an argument.", stacklevel=3)
    dim = as_int(dim)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if dtype is not None:
        input = input.to(dtype)
    input, = _fp32_on_cuda(input)
    return _Softmax.apply(input, dim, log) if _needs_grad(input) else _C.softmax(input, dim, log)


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # nn.functional's: PyTorch's _stacklevel slot is third
    return _softmax(input, dim, dtype, False, "softmax")


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _softmax(input, dim, dtype, True, "log_softmax")


def torch_softmax(input, dim=None, dtype=None):  # torch.softmax's: dtype third
    return _softmax(input, dim, dtype, False, "softmax")


def torch_log_softmax(input, dim=None, dtype=None):
    return _softmax(input, dim, dtype, True, "log_softmax")


torch_softmax.__name__, torch_log_softmax.__name__ = "softmax", "log_softmax"
