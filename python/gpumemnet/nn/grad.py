"""torch.nn.grad: the gradients of a convolution with respect to its input and its weight, as functions (bindsnet's
learning rules): each the backward of the convolution, run by autograd on a zero input or weight of the given
size."""
from .._core.autograd import enable_grad, grad
from .._core.creation import zeros
from . import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]


def _input_grad(conv, input_size, weight, grad_output, *args):
    with enable_grad():
        x = zeros(tuple(input_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
        return grad(conv(x, weight.detach(), None, *args), x, grad_output)[0]


def _weight_grad(conv, input, weight_size, grad_output, *args):
    with enable_grad():
        w = zeros(tuple(weight_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
        return grad(conv(input.detach(), w, None, *args), w, grad_output)[0]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _input_grad(F.conv1d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _weight_grad(F.conv1d, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _input_grad(F.conv2d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _weight_grad(F.conv2d, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _input_grad(F.conv3d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _weight_grad(F.conv3d, input, weight_size, grad_output, stride, padding, dilation, groups)
