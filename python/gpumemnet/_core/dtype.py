"""dtype and device objects. C sees dtypes as integer codes (kernels/common.h) and devices as strings."""

import threading

from .. import _C


# The package name dtypes, memory formats and Size print with: "torch" under the drop-in alias (dropin.as_torch),
# where PyTorch code compares str(x.dtype) with "torch.float16" or rebuilds a dtype from its name.
DISPLAY = ["gpumemnet"]


class dtype:
    __slots__ = ("name", "code", "itemsize", "is_floating_point")

    def __init__(self, name, code, itemsize, is_floating_point):
        self.name = name
        self.code = code
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point

    def __repr__(self):
        return f"{DISPLAY[0]}.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def is_complex(self):
        return self.name.startswith("complex")

    @property
    def is_signed(self):
        return not self.name.startswith("uint") and self.name != "bool"


float32 = dtype("float32", 0, 4, True)
float64 = dtype("float64", 1, 8, True)
float16 = dtype("float16", 2, 2, True)
bfloat16 = dtype("bfloat16", 3, 2, True)
int64 = dtype("int64", 4, 8, False)
bool_ = dtype("bool", 5, 1, False)

# PyTorch's narrower integer dtypes are storage dtypes (kernels/common.h GM_U8..GM_I32): tensors of them are
# made, filled, cast both ways, copied, viewed, indexed, concatenated, compared, and move to NumPy and back; other
# ops (arithmetic, reductions, nn ops) raise TypeError naming the op and the dtype: cast with .long()/.float().
uint8 = dtype("uint8", 6, 1, False)
int8 = dtype("int8", 7, 1, False)
int16 = dtype("int16", 8, 2, False)
int32 = dtype("int32", 9, 4, False)
DTYPES = (float32, float64, float16, bfloat16, int64, bool_, uint8, int8, int16, int32)  # indexed by code
# (lowest, highest, C type name) of the integer dtypes by code, as PyTorch checks a Python number written into one
# (c10's overflows(): an unsigned type takes a negative integer down to -max, which wraps)
_INT_LIMITS = {4: (-2 ** 63, 2 ** 63 - 1, "int64_t"), 6: (-255, 255, "uint8_t"), 7: (-128, 127, "int8_t"),
               8: (-2 ** 15, 2 ** 15 - 1, "int16_t"), 9: (-2 ** 31, 2 ** 31 - 1, "int")}
# the smallest magnitude that rounds to inf in float32, float16 and bfloat16 (the largest finite value plus half
# its ulp: round-to-even goes up there), and the C type names PyTorch's overflow error gives them
_FLOAT_INF = {0: (2 - 2 ** -24) * 2.0 ** 127, 2: 65520.0, 3: (2 - 2 ** -8) * 2.0 ** 127}
_FLOAT_LIMITS = {0: "float", 2: "c10::Half", 3: "c10::BFloat16"}


def fitting(value, code, ctype=True, floats=True):
    """value, a Python number to be written into a tensor of dtype code: PyTorch's RuntimeError when it does not
    fit an integer dtype (full, fill_, x[i] = v; tensor() names the dtype, ctype=False), instead of wrapping, or,
    with floats, when a finite number would round to inf in a floating dtype (full(..., 1e39), masked_fill of a
    half tensor with -1e9), instead of writing inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    top = _FLOAT_INF.get(code) if floats else None
    if top is not None:
        if abs(value) >= top and value - value == 0:  # (finite: inf and NaN are written as they are)
            raise RuntimeError(f"value cannot be converted to type {_FLOAT_LIMITS[code]} without overflow")
        return value
    lim = _INT_LIMITS.get(code)
    if lim is None:
        return value
    lo = lim[0] if isinstance(value, int) or code != 6 else 0  # a float's range is the type's own
    if not lo <= value <= lim[1]:  # (NaN and inf are refused too: no integer holds them)
        name = lim[2] if ctype else DTYPES[code].name
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    return value


# PyTorch's ScalarType names, as its error messages give dtypes ("result type Float can't be cast to ... Long")
SCALAR_TYPE_NAMES = {0: "Float", 1: "Double", 2: "Half", 3: "BFloat16", 4: "Long", 5: "Bool", 6: "Byte", 7: "Char",
                     8: "Short", 9: "Int"}
# PyTorch's complex dtypes exist as names (libraries build tables of every dtype: safetensors.torch's sizes), and
# no tensor has one: as_dtype refuses them
complex32 = dtype("complex32", None, 4, False)
complex64 = dtype("complex64", None, 8, False)
complex128 = dtype("complex128", None, 16, False)
# likewise PyTorch's unsigned integers past uint8 (torchvision's _max_value compares dtypes with them)
# the complex dtype whose parts are of each floating dtype (_core/complex.py; torch.tensor([1j]) takes the default's)
COMPLEX_OF = {float16: complex32, float32: complex64, float64: complex128}
uint16 = dtype("uint16", None, 2, False)
uint32 = dtype("uint32", None, 4, False)
uint64 = dtype("uint64", None, 8, False)
# and its 8-bit (and packed 4-bit) floats: names only (Hugging Face's quantization tables and cache classes build
# finfo of them at import), no tensor has one
float8_e4m3fn = dtype("float8_e4m3fn", None, 1, True)
float8_e5m2 = dtype("float8_e5m2", None, 1, True)
float8_e4m3fnuz = dtype("float8_e4m3fnuz", None, 1, True)
float8_e5m2fnuz = dtype("float8_e5m2fnuz", None, 1, True)
float8_e8m0fnu = dtype("float8_e8m0fnu", None, 1, True)
float4_e2m1fn_x2 = dtype("float4_e2m1fn_x2", None, 1, True)
# and its quantized integers (tensordict's dtype tables name them at import): names only
qint8 = dtype("qint8", None, 1, False)
quint8 = dtype("quint8", None, 1, False)
qint32 = dtype("qint32", None, 4, False)
quint4x2 = dtype("quint4x2", None, 1, False)
quint2x4 = dtype("quint2x4", None, 1, False)
# finfo of those: (eps, max, tiny), PyTorch's values (resolution 1.0 for each)
_FLOAT8_INFO = {float8_e4m3fn: (0.125, 448.0, 2.0 ** -6), float8_e5m2: (0.25, 57344.0, 2.0 ** -14),
                float8_e4m3fnuz: (0.125, 240.0, 2.0 ** -7), float8_e5m2fnuz: (0.25, 57344.0, 2.0 ** -15),
                float8_e8m0fnu: (1.0, 1.7014118346046923e38, 2.0 ** -127)}
_ALIASES = {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32, "short": int16,
            "char": int8, "byte": uint8}


def _by_name(name):
    for d in DTYPES:
        if d.name == name:
            return d
    if name in _ALIASES:
        return _ALIASES[name]
    raise TypeError(f"unknown dtype {name!r}; expected one of " + ", ".join(d.name for d in DTYPES))


def as_dtype(obj, argname="dtype"):
    """Accept a gpumemnet dtype, its name, a NumPy dtype or a Python type (float -> float64, int -> int64, bool, as
    PyTorch maps them: `torch.zeros(2, dtype=float)` is float64 whatever the default dtype)."""
    if isinstance(obj, dtype):
        if obj.code is None:
            kind = "complex" if obj.is_complex else obj.name
            raise TypeError(f"{argname}: gpumemnet has no {kind} tensors ({obj})")
        return obj
    if isinstance(obj, str):
        return _by_name(obj)
    if obj is float:
        return float64
    if obj is int:
        return int64
    if obj is bool:
        return bool_
    try:
        import numpy as np
        npd = np.dtype(obj)
    except TypeError:
        raise TypeError(f"{argname}: expected a gpumemnet dtype, got {obj!r}") from None
    table = {d.name: d for d in DTYPES}
    if npd.name in table:
        return table[npd.name]
    raise TypeError(f"{argname}: NumPy dtype {npd} has no gpumemnet equivalent")


_default = [float32]


def get_default_dtype():
    """The dtype of tensors made from Python floats and of factories given no dtype (float32 at start)."""
    return _default[0]


def set_default_dtype(d):
    """Set get_default_dtype(); only a floating-point dtype is allowed (TypeError otherwise), as in PyTorch. It is
    also what a Python float with an integer tensor, an integer tensor's true division and the float functions of
    integer tensors give (the C promotion rule reads it: _C._set_default_float)."""
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the default type, got "
                        f"{d!r}")
    _C._set_default_float(d.code)
    _default[0] = d


class iinfo:
    """Machine limits of an integer dtype (bits, min, max), as torch.iinfo."""

    def __init__(self, type):
        if not isinstance(type, dtype) or type.is_floating_point:
            raise TypeError(f"iinfo: expected an integer dtype, got {type!r}")
        self.dtype = type.name
        if type is bool_:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            self.bits = 8 * type.itemsize
            signed = type is not uint8
            self.min = -(1 << (self.bits - 1)) if signed else 0
            self.max = (1 << (self.bits - 1)) - 1 if signed else (1 << self.bits) - 1

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


class finfo:
    """Machine limits of a float dtype (bits, eps, max, min, tiny/smallest_normal, resolution), as torch.finfo.
    finfo() is that of the default dtype."""

    def __init__(self, type=None):
        type = _default[0] if type is None else type
        if isinstance(type, dtype) and type.is_complex:  # a complex dtype's parts: PyTorch's answer
            type = {4: float16, 8: float32}.get(type.itemsize, float64)
        if not isinstance(type, dtype) or not type.is_floating_point:
            raise TypeError(f"finfo: expected a floating-point dtype, got {type!r}")
        self.dtype = type.name
        self.bits = 8 * type.itemsize
        if type is bfloat16:  # 8 exponent bits like float32, 7 mantissa bits
            self.eps, self.max, self.tiny, self.resolution = 2.0 ** -7, 3.3895313892515355e38, 2.0 ** -126, 0.01
        elif type.code is None:
            if type not in _FLOAT8_INFO:
                raise TypeError(f'"epsilon" not implemented for \'{type.name}\'')
            (self.eps, self.max, self.tiny), self.resolution = _FLOAT8_INFO[type], 1.0
        else:
            import numpy as np
            fi = np.finfo(type.name)
            self.eps, self.max, self.tiny, self.resolution = (float(fi.eps), float(fi.max), float(fi.tiny),
                                                              float(fi.resolution))
        self.min = -self.max
        self.smallest_normal = self.tiny

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class memory_format:
    """A memory format (PyTorch's torch.memory_format). gpumemnet keeps every tensor in NCHW (row-major) order
    whatever format is asked for: Module.to(memory_format=...) changes nothing, and a tensor's to() / contiguous()
    copy where PyTorch's would (format_copy), so that writes into the result never reach the original, but lay the
    copy out NCHW. (The conv kernels are written for NCHW; channels_last would be a speed choice.)"""
    __slots__ = ("name", "ndim")

    def __init__(self, name, ndim):
        self.name, self.ndim = name, ndim

    def __repr__(self):
        return f"{DISPLAY[0]}.{self.name}"

    def __reduce__(self):
        return (getattr, (memory_format, self.name))


memory_format.contiguous_format = memory_format("contiguous_format", None)
memory_format.preserve_format = memory_format("preserve_format", None)
memory_format.channels_last = memory_format("channels_last", 4)
memory_format.channels_last_3d = memory_format("channels_last_3d", 5)
contiguous_format = memory_format.contiguous_format
preserve_format = memory_format.preserve_format
channels_last = memory_format.channels_last
channels_last_3d = memory_format.channels_last_3d


def format_copy(t, fmt, to=False):
    """t.contiguous(memory_format=fmt) (to=False) or t.to(memory_format=fmt): t itself, or a copy where PyTorch
    makes one (its copy laid out in fmt, gpumemnet's NCHW): contiguous() with contiguous_format copies a tensor
    that is not, to() only one whose layout PyTorch reads as channels_last; channels_last copies a tensor whose
    strides do not fit it, and to() also one that fits both layouts (a (1, 1, H, W) tensor: PyTorch reads NCHW)."""
    if fmt.ndim is not None and t.ndim != fmt.ndim:
        raise RuntimeError(f"required rank {fmt.ndim} tensor to use {fmt.name} format")
    if fmt.name == "contiguous_format":
        if not to:
            return t if t.is_contiguous() else t.clone()
        cl = {4: channels_last, 5: channels_last_3d}.get(t.ndim)
        return t.clone() if cl is not None and t.is_contiguous(memory_format=cl) and not t.is_contiguous() else t
    if fmt.ndim is not None and (not t.is_contiguous(memory_format=fmt) or (to and t.is_contiguous())):
        return t.clone()
    return t


# PyTorch's other device types (Apple's MPS, Intel's XPU, Habana's HPU, TPUs through XLA, ...): a device object of
# these constructs and compares as in PyTorch (libraries probe `torch.device("mps")`), but gpumemnet has no kernels
# for them, so a tensor cannot be put there (the operation that tries says so).
OTHER_DEVICE_TYPES = ("mps", "xpu", "hpu", "mtia", "xla", "privateuseone", "ipu", "maia", "lazy", "vulkan", "ve",
                      "fpga", "hip", "mkldnn", "opengl", "opencl", "ideep")


class device:
    """A device: 'cpu', 'meta', or 'cuda:N' (or one of PyTorch's other types, OTHER_DEVICE_TYPES, which holds no
    tensor here). Compares equal to its string form."""
    __slots__ = ("type", "index")

    def __init__(self, spec, index=None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if isinstance(spec, int) and not isinstance(spec, bool):  # torch.device(0): CUDA device 0, as PyTorch
            if spec < 0:
                raise _C.ArgumentError(f"device: device index must not be negative, got {spec}")
            spec, index = "cuda", spec
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a str such as 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda", "meta") and kind not in OTHER_DEVICE_TYPES:
            raise _C.ArgumentError(f"device: unknown device {spec!r}; expected 'cpu', 'meta', 'cuda' or 'cuda:N'")
        if idx:
            if not idx.isdigit():
                raise ValueError(f"device: bad device index in {spec!r}")
            index = int(idx)
        if kind in OTHER_DEVICE_TYPES:
            if index is not None and (not isinstance(index, int) or index < 0):
                raise _C.ArgumentError(f"device: bad device index {index!r} for {kind}")
            self.type, self.index = kind, index
            return
        if kind == "cuda" and index is None:  # the thread's current device (gm.cuda.set_device), as it is now
            index = _C._cuda_current_device()
        if kind != "cuda" and index not in (None, 0):
            raise ValueError(f"device: {kind} has no index {index}")
        self.type = kind
        self.index = index if kind == "cuda" else None

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}'" + (")" if self.index is None else f", index={self.index})")

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (TypeError, ValueError):
                return False
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash(str(self))


_device_cache = {}


def device_of(s):
    d = _device_cache.get(s)
    if d is None:
        d = device(s)
        if s != "cuda":  # a bare "cuda" names the thread's current device, which set_device changes
            _device_cache[s] = d
    return d


def device_str(obj, argname="device"):
    if obj is None:
        return "cpu"
    return str(device(obj) if not isinstance(obj, device) else obj)


# The device factories use when given none: gm.set_default_device, or `with gm.device("meta"):`. Per thread, as in
# PyTorch (whose default device context is thread-local).
_thread_device = threading.local()


def factory_device(obj, unset="cpu"):
    """device_str for a factory's device= argument: None is the thread's default device, `unset` when none is set."""
    if obj is None:
        return getattr(_thread_device, "device", None) or unset
    return str(device(obj) if not isinstance(obj, device) else obj)


def set_default_device(dev):
    """torch.set_default_device: where factories (zeros, randn, tensor, nn layers' parameters...) put tensors
    when given no device=, in this thread; None goes back to the CPU."""
    _thread_device.device = None if dev is None else device_str(dev)


def get_default_device():
    return device_of(factory_device(None))


def _enter_device(self):
    """`with gm.device("meta"): model = Net()`: the device is the thread's default inside the block."""
    stack = getattr(_thread_device, "stack", None)
    if stack is None:
        stack = _thread_device.stack = []
    stack.append(getattr(_thread_device, "device", None))
    _thread_device.device = str(self)
    return self


def _exit_device(self, *exc):
    _thread_device.device = _thread_device.stack.pop()


device.__enter__, device.__exit__ = _enter_device, _exit_device
