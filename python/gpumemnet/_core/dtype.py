"""dtype and device objects. C sees dtypes as integer codes (kernels/common.h) and devices as strings."""


class dtype:
    __slots__ = ("name", "code", "itemsize", "is_floating_point")

    def __init__(self, name, code, itemsize, is_floating_point):
        self.name = name
        self.code = code
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point

    def __repr__(self):
        return "gpumemnet." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


float32 = dtype("float32", 0, 4, True)
float64 = dtype("float64", 1, 8, True)
float16 = dtype("float16", 2, 2, True)
bfloat16 = dtype("bfloat16", 3, 2, True)
int64 = dtype("int64", 4, 8, False)
bool_ = dtype("bool", 5, 1, False)

DTYPES = (float32, float64, float16, bfloat16, int64, bool_)
_ALIASES = {"float": float32, "double": float64, "half": float16, "long": int64}


def _by_name(name):
    for d in DTYPES:
        if d.name == name:
            return d
    if name in _ALIASES:
        return _ALIASES[name]
    raise TypeError(f"unknown dtype {name!r}; expected one of " + ", ".join(d.name for d in DTYPES))


def as_dtype(obj, argname="dtype"):
    """Accept a gpumemnet dtype, its name, a NumPy dtype or a Python type (float -> float32 as in PyTorch)."""
    if isinstance(obj, dtype):
        return obj
    if obj is float:
        return float32
    if obj is int:
        return int64
    if obj is bool:
        return bool_
    if isinstance(obj, str):
        return _by_name(obj)
    try:
        import numpy as np
        npd = np.dtype(obj)
    except TypeError:
        raise TypeError(f"{argname}: expected a gpumemnet dtype, got {obj!r}") from None
    table = {"float32": float32, "float64": float64, "float16": float16, "int64": int64, "bool": bool_}
    if npd.name in table:
        return table[npd.name]
    raise TypeError(f"{argname}: NumPy dtype {npd} has no gpumemnet equivalent")


class device:
    """A device: 'cpu', 'meta', or 'cuda:N'. Compares equal to its string form."""
    __slots__ = ("type", "index")

    def __init__(self, spec, index=None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a str such as 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda", "meta"):
            raise ValueError(f"device: unknown device {spec!r}; expected 'cpu', 'meta', 'cuda' or 'cuda:N'")
        if idx:
            if not idx.isdigit():
                raise ValueError(f"device: bad device index in {spec!r}")
            index = int(idx)
        if kind == "cuda" and index is None:
            index = 0
        if kind != "cuda" and index not in (None, 0):
            raise ValueError(f"device: {kind} has no index {index}")
        self.type = kind
        self.index = index if kind == "cuda" else None

    def __str__(self):
        return f"cuda:{self.index}" if self.type == "cuda" else self.type

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.type == "cuda" else ")")

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
        d = _device_cache[s] = device(s)
    return d


def device_str(obj, argname="device"):
    if obj is None:
        return "cpu"
    return str(device(obj) if not isinstance(obj, device) else obj)
