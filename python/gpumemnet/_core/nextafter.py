"""torch.nextafter(input, other) and Tensor.nextafter / nextafter_: the next floating-point value after input in the
direction of other, elementwise (broadcast; float16, bfloat16, float32, float64; the operands promoted as an
arithmetic op's). Not differentiable: the result is a new tensor outside the graph. The steps are taken in NumPy on
the host (np.nextafter; bfloat16, which NumPy lacks, by its bit pattern) and the result copied back once: code calls
it on a few values (torchdiffeq's step-size bounds), not in a model's hot loop."""
import numpy as np

from .. import _C
from .creation import empty, tensor as _tensor
from .creation_more import broadcast_shapes
from .dtype import as_dtype
from .tensor import Tensor
from .tensor_bitwise import check_castable
from .tensor_misc import result_type

__all__ = ["nextafter"]

_FLOATS = ("float16", "bfloat16", "float32", "float64")
_LEGACY = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _check(input, other):
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"nextafter(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not isinstance(other, _C.TensorBase):
        raise TypeError(f"nextafter(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    dt = result_type(input, other)
    name = str(dt).split(".")[-1]
    if name not in _FLOATS:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{_LEGACY.get(name, name)}'")
    return dt, name


def _host(t, dt, shape):
    """t as a float NumPy array (bfloat16 read as float32: exact), broadcast to shape."""
    t = t.detach().to(dtype=dt)
    if t.device.type != "cpu":
        t = t.cpu()
    a = (t.float() if dt == as_dtype("bfloat16") else t).numpy()
    return np.broadcast_to(a, shape)


def _bf16_nextafter(x, y):
    """nextafter in bfloat16, on bfloat16 values held exactly in float32 arrays: a step of one in the 16-bit
    pattern (sign and magnitude), away from zero when moving outwards."""
    x, y = np.ascontiguousarray(x, np.float32), np.ascontiguousarray(y, np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.int32)
    outward = (y > x) == (x > 0)
    bits = np.where(outward, bits + 1, bits - 1)
    bits = np.where(x == 0, np.where(np.signbit(y), 0x8001, 0x0001), bits)  # the smallest subnormal, towards y
    out = (bits.astype(np.uint32) << 16).view(np.float32)
    out = np.where(x == y, y, out)
    return np.where(np.isnan(x) | np.isnan(y), np.float32(np.nan), out)


def nextafter(input, other, *, out=None):
    """The next representable value after input towards other, elementwise (PyTorch's torch.nextafter)."""
    dt, name = _check(input, other)
    shape = tuple(broadcast_shapes(tuple(input.shape), tuple(other.shape)))
    device = input.device if input.ndim or not other.ndim else other.device
    if "meta" in (input.device.type, other.device.type):
        result = empty(shape, dtype=dt, device="meta")
    else:
        x, y = _host(input, dt, shape), _host(other, dt, shape)
        values = _bf16_nextafter(x, y) if name == "bfloat16" else np.nextafter(x, y)
        result = _tensor(np.ascontiguousarray(values), dtype=dt, device=device)
    if out is not None:
        from .out_arg import write_out
        return write_out("nextafter", result, out, stacklevel=3)
    return result


def _nextafter_method(self, other):
    return nextafter(self, other)


def _nextafter_inplace(self, other):
    """self set to nextafter(self, other), in place (other broadcast to self's shape; self's dtype kept)."""
    result = nextafter(self, other)
    check_castable(self, result._dtype, "nextafter_")  # a float result into an integer tensor: refused
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    return self.copy_(result.to(dtype=self.dtype))


Tensor.nextafter, Tensor.nextafter_ = _nextafter_method, _nextafter_inplace
