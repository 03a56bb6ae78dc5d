"""Activations and softmax (layer 1, core): relu, relu_, leaky_relu, sigmoid, tanh, gelu, softmax, log_softmax.

They are Tensor methods (x.relu(), x.softmax(dim)) as well as nn.functional ops, so they live below Tensor and
gpumemnet.nn.functional re-exports them. What each backward keeps is chosen for memory: relu / leaky_relu
(slope >= 0) / sigmoid / tanh / softmax / log_softmax save their OUTPUT, which the next layer usually keeps
anyway (so it costs nothing extra), and which makes relu_ possible; gelu saves its input.
"""
import warnings

from .. import _C
from . import autocast as _amp
from .autograd import Function
from .autograd import check_inplace as _check_inplace, needs_grad as _needs_grad

# op codes: csrc/ops_nnops.c
RELU, LEAKY_RELU, SIGMOID, TANH, GELU, GELU_TANH = range(6)


def _fp32(*tensors):
    """autocast's float32 ops (softmax, log_softmax, the losses): half inputs are widened first."""
    return _amp.fp32(*tensors) if _amp._state.enabled else tensors


def _check_tensor(x, op, name="input"):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


# ---- activations ----------------------------------------------------------------------------------------------
def _saves_input(op, alpha):
    return op in (GELU, GELU_TANH) or (op == LEAKY_RELU and alpha < 0)


class _Activation(Function):
    reuses_grad = True  # the input gradient may be written over the incoming one (autograd.Function)

    @staticmethod
    def forward(ctx, x, op, alpha):
        out = _C.activation(op, x, alpha)
        if ctx.needs_input_grad:
            ctx.op, ctx.alpha = op, alpha
            ctx.save_for_backward(x if _saves_input(op, alpha) else out)
        return out

    @staticmethod
    def backward(ctx, g):
        saved, = ctx.saved_tensors
        return _C.activation_backward(ctx.op, g, saved, ctx.alpha, ctx.grad_is_free(0)), None, None

    def name(self):
        return ("ReluBackward", "LeakyReluBackward", "SigmoidBackward", "TanhBackward", "GeluBackward",
                "GeluBackward")[self.op]


class _ActivationInplace(Function):
    """act_(x) recorded as a node whose output is x itself (as tensor._InplaceBinary): the edge to x's old
    producer is taken before the write, and backward reads the new values (the output)."""

    @staticmethod
    def forward(ctx, x, op, alpha):
        _C.activation(op, x, alpha, x)
        ctx.op, ctx.alpha = op, alpha
        ctx.save_for_backward(x)
        return x

    reuses_grad = True
    backward = staticmethod(_Activation.backward)
    name = _Activation.name


def _activation(x, op, alpha, inplace, opname):
    _check_tensor(x, opname)
    if inplace:
        if _check_inplace(x, opname + "_"):
            if _saves_input(op, alpha):
                raise RuntimeError(f"{opname}_: the in-place form cannot be differentiated with negative_slope="
                                   f"{alpha} (the gradient needs the input, which the write destroys); use "
                                   f"inplace=False")
            return _ActivationInplace.apply(x, op, alpha)
        _C.activation(op, x, alpha, x)
        return x
    return _Activation.apply(x, op, alpha) if _needs_grad(x) else _C.activation(op, x, alpha)


def relu(input, inplace=False):
    return _activation(input, RELU, 0.0, inplace, "relu")


def relu_(input):
    return _activation(input, RELU, 0.0, True, "relu")


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _activation(input, LEAKY_RELU, float(negative_slope), inplace, "leaky_relu")


def sigmoid(input):
    return _activation(input, SIGMOID, 0.0, False, "sigmoid")


def tanh(input):
    return _activation(input, TANH, 0.0, False, "tanh")


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _activation(input, GELU if approximate == "none" else GELU_TANH, 0.0, False, "gelu")


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
        out, = ctx.saved_tensors
        return _C.softmax_backward(g, out, ctx.dim, ctx.log, ctx.grad_is_free(0)), None, None

    def name(self):
        return "LogSoftmaxBackward" if self.log else "SoftmaxBackward"


def _softmax(input, dim, dtype, log, op):
    _check_tensor(input, op)
    if dim is None:  # PyTorch's legacy implicit choice, with its warning
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                      f"as an argument.", stacklevel=3)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if dtype is not None:
        input = input.to(dtype)
    input, = _fp32(input)
    return _Softmax.apply(input, dim, log) if _needs_grad(input) else _C.softmax(input, dim, log)


def softmax(input, dim=None, dtype=None):
    return _softmax(input, dim, dtype, False, "softmax")


def log_softmax(input, dim=None, dtype=None):
    return _softmax(input, dim, dtype, True, "log_softmax")
