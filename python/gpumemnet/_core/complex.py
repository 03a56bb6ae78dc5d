"""Complex tensors, as far as real training code uses them: LLaMA's rotary embeddings (torch.polar,
view_as_complex, a complex product, view_as_real) and the spectra of torch.fft (abs, angle, products, slicing).

A ComplexTensor holds its real and imaginary parts side by side in a real tensor of shape (..., 2): the layout
of PyTorch's view_as_real, whose memory view_as_complex shares. Every op on it is made of real ops on that
tensor, so autograd records them as usual, and the gradients are PyTorch's (for a real loss, PyTorch's gradient
of a complex value is dL/d(real) + i dL/d(imag): the gradient of the real pair).

It is not a gm.Tensor: an op that has no complex form here raises TypeError naming it, where handing the (..., 2)
tensor to a real kernel would give a silently wrong answer. What exists is listed in METHODS below."""
import builtins
import sys

import numpy as np

from .. import _C
from . import creation as _c
from . import autocast as _amp
from . import hooks
from .complex_math import ComplexMath, complex_dim as _dim
from .dtype import COMPLEX_OF as _COMPLEX_OF, dtype as _dtype, get_default_dtype
from .size import Size

_PY_COMPLEX = builtins.complex  # complex() below is torch.complex
_REAL_OF = {v.name: k for k, v in _COMPLEX_OF.items()}


def real_dtype(dt):
    """The real dtype of a complex dtype's parts (complex64 -> float32)."""
    return _REAL_OF[dt.name]


def is_complex_dtype(dt):
    return getattr(dt, "name", None) in _REAL_OF


def _parts(x):
    """(real, imag) of a ComplexTensor, or (x, None) of a real tensor or a real number."""
    if isinstance(x, ComplexTensor):
        return x._r[..., 0], x._r[..., 1]
    if isinstance(x, _PY_COMPLEX):
        return x.real, x.imag
    if isinstance(x, (_C.TensorBase, int, float)) or isinstance(x, np.generic):
        return x, None
    raise TypeError(f"complex tensor op: unsupported operand of type {type(x).__name__}; expected a complex or "
                    f"real Tensor or a number")


def _make(re, im):
    """The ComplexTensor of two real parts (tensors or numbers), broadcast together."""
    if not isinstance(re, _C.TensorBase):
        re = _c.full_like(im, re) if isinstance(im, _C.TensorBase) else _c.tensor(float(re))
    if not isinstance(im, _C.TensorBase):
        im = _c.full_like(re, im)
    if re.shape != im.shape:
        re, im = re.expand(_broadcast(re, im)), im.expand(_broadcast(re, im))
    return ComplexTensor(_c.stack([re, im], -1))


def _broadcast(a, b):
    return tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))


def _index(idx):
    """A complex tensor's index as an index of its (..., 2) real tensor: an Ellipsis would take in the parts' axis."""
    t = idx if isinstance(idx, tuple) else (idx,)
    return t + (slice(None),) if any(i is Ellipsis for i in t) else t


class ComplexTensor(ComplexMath):
    __slots__ = ("_r", "__weakref__")
    __array_priority__ = 1000  # numpy scalar * complex tensor comes here
    _tensor_like = True  # torch.exp(z) ... call the method (creation.tensor_like_has)

    def __init__(self, r):
        if not isinstance(r, _C.TensorBase) or r.ndim == 0 or r.shape[-1] != 2 or not r.dtype.is_floating_point:
            raise ValueError("ComplexTensor: expected a floating point tensor whose last dimension has size 2")
        self._r = r

    # ---- what it is -----------------------------------------------------------------------------------------
    shape = property(lambda self: Size(self._r.shape[:-1]))
    dtype = property(lambda self: _COMPLEX_OF[self._r.dtype])
    device = property(lambda self: self._r.device)
    ndim = property(lambda self: self._r.ndim - 1)
    is_cuda = property(lambda self: self._r.is_cuda)
    is_leaf = property(lambda self: self._r.is_leaf)
    grad_fn = property(lambda self: self._r.grad_fn)
    real = property(lambda self: self._r[..., 0])
    imag = property(lambda self: self._r[..., 1])
    requires_grad = property(lambda self: self._r.requires_grad,
                             lambda self, v: setattr(self._r, "requires_grad", v))

    @property
    def grad(self):
        g = self._r.grad
        return None if g is None else ComplexTensor(g)

    @grad.setter
    def grad(self, g):  # None, as zero_grad(set_to_none=True) sets it, or a complex tensor of the same shape
        if g is not None and not (isinstance(g, ComplexTensor) and g.shape == self.shape):
            raise RuntimeError(f"assigned grad has data of a different type or size: expected a complex tensor of "
                               f"shape {tuple(self.shape)}, got {type(g).__name__} of shape {tuple(g.shape)}")
        self._r.grad = None if g is None else g._r

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):  # the last two dims swapped (a batch of matrices)
        return self.transpose(-2, -1)

    @property
    def H(self):  # the conjugate transpose of a matrix
        return self.T.conj()

    @property
    def mH(self):
        return self.mT.conj()

    def dim(self):
        return self.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        return self._r.numel() // 2

    def element_size(self):
        return self.dtype.itemsize

    def is_complex(self):
        return True

    def is_floating_point(self):
        return False

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ",
                               formatter={"complex_kind": lambda v: f"{v.real:.4f}{v.imag:+.4f}j"})
        default = self.dtype is _COMPLEX_OF[get_default_dtype()]  # PyTorch's repr leaves the default dtype out
        return f"tensor({body})" if default else f"tensor({body}, dtype={self.dtype!r})"

    def numpy(self):
        a = np.asarray(self._r.detach().cpu().numpy(), order="C")
        return a.view(np.complex64 if a.dtype == np.float32 else np.complex128)[..., 0]

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        return _PY_COMPLEX(self.numpy().item())

    # ---- autograd, devices, copies ------------------------------------------------------------------------
    def requires_grad_(self, flag=True):
        self._r.requires_grad_(flag)
        return self

    def detach(self):
        return ComplexTensor(self._r.detach())

    def clone(self):
        return ComplexTensor(self._r.clone())

    def contiguous(self):
        return ComplexTensor(self._r.contiguous())

    def backward(self, gradient=None, **kw):
        if gradient is None:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs")
        self._r.backward(view_as_real(gradient), **kw)

    def to(self, *args, **kwargs):
        """Moves between devices; a complex dtype keeps it complex (complex64 <-> complex128), a real one takes
        the real part, as PyTorch does (it warns that the imaginary part is discarded)."""
        dt, rest = kwargs.pop("dtype", None), []
        for a in args:
            if isinstance(a, ComplexTensor):
                dt, a = a.dtype, a.device
            elif isinstance(a, _dtype):
                dt, a = a, None
            if a is not None:
                rest.append(a)
        if dt is not None and not is_complex_dtype(dt):
            return self.real.to(*rest, dtype=dt, **kwargs)
        r = self._r.to(*rest, dtype=None if dt is None else real_dtype(dt), **kwargs)
        return self if r is self._r else ComplexTensor(r)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return ComplexTensor(self._r.cuda(device, non_blocking=non_blocking))

    def type_as(self, other):
        return self.to(dtype=other.dtype)

    # ---- shapes (the parts' axis stays last) ------------------------------------------------------------------
    def view(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return ComplexTensor(self._r.view(*shape, 2))

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return ComplexTensor(self._r.reshape(*shape, 2))

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        return ComplexTensor(self._r.flatten(_dim(start_dim, self.ndim), _dim(end_dim, self.ndim)))

    def unsqueeze(self, dim):
        return ComplexTensor(self._r.unsqueeze(_dim(dim, self.ndim + 1)))

    def squeeze(self, dim=None):
        if dim is None:
            return self.view(*[s for s in self.shape if s != 1])
        return ComplexTensor(self._r.squeeze(_dim(dim, self.ndim)))

    # in-place view changes (MONAI's HilbertTransform: x.unsqueeze_(0)): this object takes the new view
    def unsqueeze_(self, dim):
        self._r = self.unsqueeze(dim)._r
        return self

    def squeeze_(self, dim=None):
        self._r = self.squeeze(dim)._r
        return self

    def transpose_(self, d0, d1):
        self._r = self.transpose(d0, d1)._r
        return self

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return ComplexTensor(self._r.permute(*[_dim(d, self.ndim) for d in dims], self.ndim))

    def transpose(self, d0, d1):
        return ComplexTensor(self._r.transpose(_dim(d0, self.ndim), _dim(d1, self.ndim)))

    def expand(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return ComplexTensor(self._r.expand(*shape, 2))

    def repeat(self, *reps):
        reps = tuple(reps[0]) if len(reps) == 1 and isinstance(reps[0], (tuple, list)) else reps
        return ComplexTensor(self._r.repeat(*reps, 1))

    def __getitem__(self, idx):
        return ComplexTensor(self._r[_index(idx)])

    def __setitem__(self, idx, value):
        re, im = _parts(value)
        self._r[_index(idx)] = _make(re, 0.0 if im is None else im)._r

    # ---- arithmetic -----------------------------------------------------------------------------------------
    def __add__(self, o):
        (a, b), (c, d) = _parts(self), _parts(o)
        return _make(a + c, b if d is None else b + d)

    __radd__ = __add__

    def __sub__(self, o):
        (a, b), (c, d) = _parts(self), _parts(o)
        return _make(a - c, b if d is None else b - d)

    def __rsub__(self, o):
        return (-self) + o

    def __neg__(self):
        return ComplexTensor(-self._r)

    def __mul__(self, o):
        if not isinstance(o, ComplexTensor) and not isinstance(o, _PY_COMPLEX):
            _parts(o)  # checks the operand
            return ComplexTensor(self._r * (o.unsqueeze(-1) if isinstance(o, _C.TensorBase) else o))
        (a, b), (c, d) = _parts(self), _parts(o)
        return _make(a * c - b * d, a * d + b * c)

    __rmul__ = __mul__

    def __truediv__(self, o):
        if not isinstance(o, ComplexTensor) and not isinstance(o, _PY_COMPLEX):
            _parts(o)
            return ComplexTensor(self._r / (o.unsqueeze(-1) if isinstance(o, _C.TensorBase) else o))
        return self * _reciprocal(o)

    def __rtruediv__(self, o):
        return _reciprocal(self) * o

    def __matmul__(self, o):
        return matmul(self, o)

    def __rmatmul__(self, o):
        return matmul(o, self)

    def __pow__(self, n):
        if isinstance(n, (float, np.floating)) or isinstance(n, int) and n < 0:
            return self._real_power(float(n))  # the principal value, |z|^n e^(i n arg z)
        if not isinstance(n, int):
            raise TypeError(f"complex tensor ** {n!r}: only real number powers are supported")
        out = _make(_c.ones_like(self.real), 0.0)
        for _ in range(n):
            out = out * self
        return out

    def __eq__(self, o):
        (a, b), (c, d) = _parts(self), _parts(o)
        return (a == c) & (b == (0 if d is None else d))

    def __ne__(self, o):
        return ~(self == o)

    __hash__ = object.__hash__

    def mul(self, o):
        return self * o

    def add(self, o, alpha=1):
        return self + o * alpha

    def sub(self, o, alpha=1):
        return self - o * alpha

    def div(self, o):
        return self / o

    def conj(self):
        return _make(self.real, -self.imag)

    conj_physical = conj

    def resolve_conj(self):
        """Itself: gpumemnet's conj() computes the conjugate (PyTorch's lazy conj bit is resolved already)."""
        return self

    def is_conj(self):
        return False

    def abs(self):
        return self._r.norm(dim=-1)  # its gradient at 0 is 0, as PyTorch's complex abs

    __abs__ = abs  # abs(torch.fft.rfft(x)): TimesNet's period finding

    def __pos__(self):
        return self

    # In-place forms: the new values computed out of place, written into the real pairs (a graph records the
    # write as the real tensor's copy_).
    def copy_(self, src):
        re, im = _parts(src)
        self._r.copy_(_make(re, 0.0 if im is None else im)._r)
        return self

    def _assign(self, new):
        """self takes new's values in place: written into its real pairs; or, where new needs a gradient (and self
        is no leaf that does, whose in-place writes copy_ refuses), its pairs replaced by new's, since new's own
        backward may read self's old values (a.mul_(c) with c needing grad: linear_operator's Toeplitz products in
        gpytorch's KISS-GP) and writing over them is refused. Views taken of self before do not see that write."""
        if new._r.requires_grad and not (self._r.requires_grad and self._r.is_leaf):
            self._r = new._r
            return self
        return self.copy_(new)

    def mul_(self, o):
        return self._assign(self * o)

    def div_(self, o):
        return self._assign(self / o)

    def add_(self, o, alpha=1):
        return self._assign(self + o * alpha)

    def sub_(self, o, alpha=1):
        return self._assign(self - o * alpha)

    def zero_(self):
        self._r.zero_()
        return self

    __imul__, __itruediv__ = mul_, div_

    def __iadd__(self, o):
        return self.add_(o)

    def __isub__(self, o):
        return self.sub_(o)

    def angle(self):
        re, im = self.real, self.imag
        zero = (re == 0) & (im == 0)
        # atan2's gradient at (0, 0) is 0/0: PyTorch's angle gives 0 there
        return _c.where(zero, _c.zeros_like(re), _c.atan2(_c.where(zero, _c.zeros_like(im), im),
                                                          _c.where(zero, _c.ones_like(re), re)))

    def istft(self, *args, **kwargs):
        """torch.istft(self, ...) (gpumemnet.fft)."""
        return hooks.get("fft").istft(self, *args, **kwargs)

    def exp(self):
        m = self.real.exp()
        return _make(m * self.imag.cos(), m * self.imag.sin())

    def sum(self, dim=None, keepdim=False):
        if dim is None:
            return ComplexTensor(self._r.reshape(-1, 2).sum(0))
        dims = [_dim(d, self.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
        return ComplexTensor(self._r.sum(dims, keepdim=keepdim))

    def mean(self, dim=None, keepdim=False):
        n = self.numel() if dim is None else int(np.prod([self.shape[d] for d in
                                                           (dim if isinstance(dim, (tuple, list)) else (dim,))]))
        return self.sum(dim, keepdim) / n

    # ---- what spectrogram code does with a complex STFT (masks, phases, frames) --------------------------
    def pow(self, n):
        return self ** n

    def square(self):
        return self * self

    def reciprocal(self):
        return _reciprocal(self)

    def sgn(self):
        """z / |z|, 0 where z is 0 (PyTorch's sgn of a complex tensor)."""
        m = self.abs()
        safe = _c.where(m == 0, 1.0, m)
        return _make(_c.where(m == 0, 0.0, self.real / safe), _c.where(m == 0, 0.0, self.imag / safe))

    def isnan(self):
        return self.real.isnan() | self.imag.isnan()

    def isinf(self):
        return self.real.isinf() | self.imag.isinf()

    def isfinite(self):
        return self.real.isfinite() & self.imag.isfinite()

    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        return _make(self.real.nan_to_num(nan, posinf, neginf), self.imag.nan_to_num(nan, posinf, neginf))

    def masked_fill(self, mask, value):
        v = builtins.complex(value.item() if hasattr(value, "item") else value)
        return _make(self.real.masked_fill(mask, v.real), self.imag.masked_fill(mask, v.imag))

    def flip(self, *dims):
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return ComplexTensor(self._r.flip([_dim(d, self.ndim) for d in dims]))

    def roll(self, shifts, dims=None):
        if dims is None:  # over the flattened tensor, as PyTorch's
            return ComplexTensor(self._r.reshape(-1, 2).roll(shifts, 0).reshape(self._r.shape))
        dims = dims if isinstance(dims, (tuple, list)) else (dims,)
        return ComplexTensor(self._r.roll(shifts, [_dim(d, self.ndim) for d in dims]))

    def narrow(self, dim, start, length):
        return ComplexTensor(self._r.narrow(_dim(dim, self.ndim), start, length))

    def index_select(self, dim, index):
        return ComplexTensor(self._r.index_select(_dim(dim, self.ndim), index))

    def chunk(self, chunks, dim=0):
        return tuple(ComplexTensor(r) for r in self._r.chunk(chunks, _dim(dim, self.ndim)))

    def split(self, split_size, dim=0):
        return tuple(ComplexTensor(r) for r in self._r.split(split_size, _dim(dim, self.ndim)))

    def unbind(self, dim=0):
        return tuple(ComplexTensor(r) for r in self._r.unbind(_dim(dim, self.ndim)))

    def expand_as(self, other):
        return self.expand(*other.shape)

    def __getattr__(self, name):
        if name.startswith("__"):  # a protocol probed (copy, pickle, NumPy): not there
            raise AttributeError(name)
        raise UnsupportedAttributeError(
            f"complex tensors in gpumemnet have no '{name}'; they support {', '.join(METHODS)} (view_as_real gives "
            f"the real and imaginary parts as a real tensor for anything else)")


METHODS = sorted(n for n in dir(ComplexTensor) if not n.startswith("_"))


class UnsupportedAttributeError(AttributeError, TypeError):
    """A method a complex or sparse tensor lacks: an AttributeError, so that hasattr() and getattr(t, name,
    default) answer as for any missing attribute (library code probes tensors so), and a TypeError, as it has
    always been raised."""


def _reciprocal(o):
    a, b = _parts(o)
    if b is None:
        return 1.0 / a
    den = a * a + b * b
    return _make(a / den, -b / den)


@_amp.float32_op  # on CPU autocast's float32 list, as polar
def view_as_complex(input):
    """The complex tensor over a real tensor's last dimension of size 2 (real, imaginary), sharing its memory."""
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"view_as_complex(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError(f"view_as_complex: Tensor must have a last dimension of size 2, got shape "
                           f"{tuple(input.shape)}")
    if input.dtype not in _COMPLEX_OF:
        raise NotImplementedError(f"view_as_complex is only supported for half, float and double tensors, but got a "
                                  f"tensor of scalar type: {input.dtype}")
    if input.stride(-1) != 1:
        raise RuntimeError("view_as_complex: Tensor must have a last dimension with stride 1")
    return ComplexTensor(input)


def view_as_real(input):
    """The real tensor (..., 2) of a complex tensor's real and imaginary parts, sharing its memory."""
    if not isinstance(input, ComplexTensor):
        raise TypeError("view_as_real is only supported for complex tensors, got "
                           f"{getattr(input, 'dtype', type(input).__name__)}")
    return input._r


@_amp.float32_op
def polar(abs, angle):
    """abs * (cos(angle) + i sin(angle))."""
    for name, t in (("abs", abs), ("angle", angle)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"polar(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if abs.dtype not in _COMPLEX_OF or angle.dtype not in _COMPLEX_OF:
        raise NotImplementedError(f"polar(): expected both inputs to be Half, Float or Double tensors but got "
                                  f"{abs.dtype} and {angle.dtype}")
    if abs.dtype != angle.dtype:
        raise TypeError(f"polar(): expected abs and angle of the same dtype, got {abs.dtype} and {angle.dtype}")
    return _make(abs * angle.cos(), abs * angle.sin())


def complex(real, imag):
    """real + i imag, of real tensors of one floating dtype."""
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"complex(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if real.dtype != imag.dtype or real.dtype not in _COMPLEX_OF:
        raise NotImplementedError(f"complex(): expected both inputs to be Half, Float or Double tensors of one dtype, "
                                  f"got {real.dtype} and {imag.dtype}")
    return _make(real, imag)


def from_real(x, dt):
    """Real tensor x as a complex tensor of dtype dt (x.to(torch.complex64)): x's values, a zero imaginary part;
    the gradient reaching x is the real part's, as PyTorch's."""
    return _make(x.to(real_dtype(dt)), 0.0)


def matmul(a, b):
    """The complex product of matrices: (A + iB)(C + iD) = (AC - BD) + i(AD + BC)."""
    (p, q), (r, s) = _parts(a), _parts(b)
    if q is None:
        return _make(p @ r, p @ s)
    if s is None:
        return _make(p @ r, q @ r)
    return _make(p @ r - q @ s, p @ s + q @ r)


def einsum(real_einsum, equation, operands):
    """einsum with complex operands: the product expanded over the operands' real and imaginary parts (einsum is
    linear in each operand)."""
    terms = [((), 0)]  # (real operands chosen so far, power of i)
    for t in operands:
        re, im = _parts(t)
        with_im = [] if im is None else [(ops + (im,), k + 1) for ops, k in terms]
        terms = [(ops + (re,), k) for ops, k in terms] + with_im
    parts = [None, None]
    for ops, k in terms:
        v = real_einsum(equation, *ops) * (-1 if k % 4 >= 2 else 1)
        parts[k % 2] = v if parts[k % 2] is None else parts[k % 2] + v
    return _make(parts[0], 0.0 if parts[1] is None else parts[1])


def cat(tensors, dim=0):
    """torch.cat of complex tensors (and real ones, taken as complex with imaginary part 0)."""
    ts = [t if isinstance(t, ComplexTensor) else _make(t, 0.0) for t in tensors]
    return ComplexTensor(_c.cat([t._r for t in ts], _dim(dim, ts[0].ndim)))


def stack(tensors, dim=0):
    ts = [t if isinstance(t, ComplexTensor) else _make(t, 0.0) for t in tensors]
    return ComplexTensor(_c.stack([t._r for t in ts], _dim(dim, ts[0].ndim + 1)))


def zeros(shape, dtype, device=None, requires_grad=False):
    """A complex tensor of zeros (torch.zeros(..., dtype=torch.cfloat))."""
    r = _c.zeros(*shape, 2, dtype=real_dtype(dtype), device=device)
    return ComplexTensor(r.requires_grad_(requires_grad))


def random(fn, shape, dtype, device=None, generator=None, requires_grad=False):
    """torch.rand / torch.randn with a complex dtype: rand draws both parts uniform in [0, 1); randn draws each
    part with variance 1/2 (so that the complex value has variance 1), as PyTorch does."""
    r = fn(*shape, 2, dtype=real_dtype(dtype), device=device, generator=generator)
    if fn is _c.randn:
        r = r * (0.5 ** 0.5)
    return ComplexTensor(r.requires_grad_(requires_grad))


# ---- torch.real / imag / angle / conj / abs, for real and complex tensors --------------------------------------
def real(input):
    """The real part: a view of a complex tensor's; a real tensor itself."""
    return input.real if isinstance(input, ComplexTensor) else _c._need_tensor("real", input) or input


def imag(input):
    if isinstance(input, ComplexTensor):
        return input.imag
    _c._need_tensor("imag", input)
    raise TypeError("imag is not implemented for tensors with non-complex dtypes.")


def angle(input):
    """The argument of a complex value; of a real one, 0 where it is >= 0 and pi where it is negative (NaN kept)."""
    if isinstance(input, ComplexTensor):
        return input.angle()
    _c._need_tensor("angle", input)
    x = input if input.dtype.is_floating_point else input.to(get_default_dtype())
    zero = _c.where(x.isinf(), 0.0, x * 0)  # (x * 0 keeps x's graph, zero gradient, and NaN where x is NaN)
    return _c.where(x < 0, _c.full_like(x, np.pi), zero)


def conj(input):
    """The complex conjugate; a real tensor itself (PyTorch's conj is a view, so is this)."""
    return input.conj() if isinstance(input, ComplexTensor) else _c._need_tensor("conj", input) or input


def binary(op, a, b):
    """a op b for a real tensor a and a complex b (a ComplexTensor or a Python complex), op one of "add", "sub",
    "mul", "div", "rsub" (b - a), "rdiv" (b / a): Tensor's operators hand these here. An integer or bool a
    counts in the default dtype (1j * torch.arange(3) is complex64, as PyTorch's: e3nn's su2_generators)."""
    z = _make(a if a.dtype.is_floating_point else a.to(get_default_dtype()), 0.0)
    return {"add": z.__add__, "sub": z.__sub__, "mul": z.__mul__, "div": z.__truediv__, "rsub": z.__rsub__,
            "rdiv": z.__rtruediv__}[op](b)


def is_complex_operand(x):
    return isinstance(x, (ComplexTensor, _PY_COMPLEX))


hooks.register("complex", sys.modules[__name__])
