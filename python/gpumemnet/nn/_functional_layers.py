"""Padding, pixel (un)shuffle, embedding and one_hot: F.pad, F.pixel_shuffle, F.pixel_unshuffle, F.embedding,
F.one_hot with PyTorch's signatures (layer 2, nn), over csrc/ops_pad.c and the index ops (csrc/ops_index.c).

pad saves nothing for its backward (the input's shape and the pads are enough: the gradient of every mode is a
gather of the output gradient). pixel_shuffle and pixel_unshuffle are a reshape, a permute and a reshape, composed
from the core's differentiable shape ops: the first reshape and the permute are views, the last reshape is the
one copy (as in PyTorch), and the backward is the same composition reversed. embedding is the index ops' gather
(forward) and accumulating scatter (backward: a zeroed weight-shaped gradient, PyTorch's dense one), saving only
the indices (sparse=True also records which rows the lookups used, for SparseAdam); one_hot a zeroed int64 tensor and
one scatter."""
import math
import warnings
import weakref

from .. import _C
from .._core.arg_forms import as_int
from .._core.activation import _check_tensor
from .._core.complex import ComplexTensor as _ComplexTensor
from .._core.complex import complex as _complex
from .._core.creation import cat
from .._core.autograd import Function, check_inplace
from .._core.autograd import needs_grad as _needs_grad
from .._core.autograd import no_grad as _no_grad
from .._core.dtype import bool_ as _bool
from .._core.dtype import int64 as _int64
from .._core.functions import DIV, MAXIMUM
from .._core.tensor_methods import long_index, no_negative
from ._args import fresh as _fresh

from ._functional_nn import channel_dropout as _dropout2d

__all__ = ["pad", "pixel_shuffle", "pixel_unshuffle", "embedding", "one_hot", "dropout1d", "dropout3d",
           "alpha_dropout", "feature_alpha_dropout"]

_MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}


class _Pad(Function):
    @staticmethod
    def forward(ctx, x, pads, mode, value):
        ctx.pads, ctx.mode, ctx.shape = pads, mode, tuple(x.shape)
        return _C.pad(x, pads, mode, value)

    @staticmethod
    def backward(ctx, g):
        return _C.pad_backward(g, ctx.pads, ctx.mode, ctx.shape), None, None, None

    def name(self):
        return ("ConstantPadNdBackward0", "ReflectionPadBackward0", "ReplicationPadBackward0",
                "CircularPadBackward0")[self.mode]


def _crop(input, pads):
    """input narrowed by the negative entries of pads (a view), and pads with those entries set to 0."""
    idx = [slice(None)] * input.ndim
    for j in range(len(pads) // 2):
        lo, hi = pads[2 * j], pads[2 * j + 1]
        n = input.shape[input.ndim - 1 - j]
        idx[input.ndim - 1 - j] = slice(max(0, -lo), n - max(0, -hi))
    return input[tuple(idx)], tuple(max(0, p) for p in pads)


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad) // 2 dims: pad = (left, right, top, bottom, front, back), as PyTorch. Negative pads
    crop. mode 'constant' (fill `value`, default 0) pads up to the last 3 dims of any dtype; 'reflect',
    'replicate' and 'circular' the last 1, 2 or 3 dims of a 2-D..5-D float input, as PyTorch allows."""
    if isinstance(input, _ComplexTensor):
        return _pad_complex(input, pad, mode, value)
    _check_tensor(input, "pad")
    if not isinstance(pad, int) and isinstance(pad, (tuple, list)):  # np.int64 pads (captum's Occlusion)
        pad = tuple(as_int(p) for p in pad)
    if isinstance(pad, int) or not all(isinstance(p, int) and not isinstance(p, bool) for p in pad):
        raise TypeError(f"pad: pad must be a tuple of ints, got {pad!r}")
    code = _MODES.get(mode) if isinstance(mode, str) else None
    if code is None:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if code != 0 and value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    pads = tuple(int(p) for p in pad)
    if code == 3 and any(p < 0 for p in pads) and len(pads) % 2 == 0 and len(pads) // 2 <= input.ndim:
        input, pads = _crop(input, pads)  # PyTorch's circular padding crops first, then wraps the rest
    value = 0.0 if value is None else float(value)
    outer = pads[6:] if code == 0 and len(pads) > 6 and len(pads) % 2 == 0 and len(pads) // 2 <= input.ndim else ()
    pads = pads[:6] if outer else pads
    out = _Pad.apply(input, pads, code, value) if _needs_grad(input) else _C.pad(input, pads, code, value)
    return _pad_outer_dims(out, outer, value) if outer else out


def _pad_complex(z, pads, mode, value):
    """F.pad of a complex tensor: each part padded alike (torchaudio's phase vocoder pads a complex spectrogram);
    a complex fill value fills each part with its own."""
    fill = complex(0 if value is None else value)
    re, im = (pad(p, pads, mode, None if value is None else v) for p, v in ((z.real, fill.real), (z.imag, fill.imag)))
    return _complex(re, im)


def _pad_outer_dims(x, outer, value):
    """Constant padding of the dims before the last 3 (torchvision's Swin3D pads 4 of a 5-D input): outer holds
    the pads from the 4th last dim on. Composed of narrow (negative pads crop) and cat with blocks of `value`: the C
    kernel pads at most the last 3."""
    for j in range(len(outer) // 2):
        d = x.ndim - 4 - j
        lo, hi = outer[2 * j], outer[2 * j + 1]
        if lo < 0 or hi < 0:
            start, stop = max(0, -lo), x.shape[d] - max(0, -hi)
            x = x.narrow(d, start, max(0, stop - start))
        if lo > 0 or hi > 0:
            def block(n):
                return x.new_full(tuple(n if i == d else s for i, s in enumerate(x.shape)), value)
            x = cat(([block(lo)] if lo > 0 else []) + [x] + ([block(hi)] if hi > 0 else []), d)
    return x


def _factor(f, op, name):
    f = as_int(f)
    if isinstance(f, bool) or not isinstance(f, int):
        raise TypeError(f"{op}: {name} must be an int, got {type(f).__name__}")
    if f <= 0:
        raise RuntimeError(f"{op} expects a positive {name}, but got {f}")
    return f


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): sub-pixel convolution's rearrangement (ESPCN)."""
    op = "pixel_shuffle"
    _check_tensor(input, op)
    r = _factor(upscale_factor, op, "upscale_factor")
    if input.ndim < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input with {input.ndim} "
                           f"dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"{op} expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return _fresh(x.reshape(*lead, c // (r * r), h * r, w * r), input)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W): pixel_shuffle's inverse."""
    op = "pixel_unshuffle"
    _check_tensor(input, op)
    r = _factor(downscale_factor, op, "downscale_factor")
    if input.ndim < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input with {input.ndim} "
                           f"dimension(s)")
    *lead, c, h, w = input.shape
    for name, size, dim in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"{op} expects {name} to be divisible by downscale_factor, but input.size({dim})="
                               f"{size} is not divisible by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return _fresh(x.reshape(*lead, c * r * r, h // r, w // r), input)


# ---- embedding, one_hot ---------------------------------------------------------------------------------------
# Embedding(sparse=True): PyTorch's gradient is a sparse tensor listing the rows looked up (a row whose gradient
# came out exactly zero included, the padding row not), and SparseAdam steps exactly those rows. The gradient here
# is dense, so each backward records its lookups per leaf weight, {id(weight): _SparseRows}, kept outside the
# tensor (its __dict__ travels with pickle and deepcopy); SparseAdam reads them with sparse_grad_rows.
_SPARSE_ROWS = {}


class _SparseRows:
    """The lookups behind one weight's .grad: `pending` (this backward's, not yet accumulated), `rows` (those in
    .grad: (indices, padding_idx) pairs), and the .grad they are in (weakly) with its version then."""
    __slots__ = ("owner", "rows", "pending", "grad", "version")

    def __init__(self, weight):
        key = id(weight)
        self.owner = weakref.ref(weight, lambda _: _SPARSE_ROWS.pop(key, None))
        self.rows, self.pending, self.grad, self.version = [], [], None, None


def _rows_still_in(rec, grad):
    """Whether rec.rows still describe `grad`: the same tensor, not zeroed since (zero_grad(set_to_none=False)
    empties PyTorch's sparse gradient; an in-place rescale, clipping or unscaling, keeps its rows)."""
    if grad is None or rec.grad is None or rec.grad() is not grad:
        return False
    if grad._version != rec.version:
        with _no_grad():
            if not bool(grad.ne(0).any()):
                return False
        rec.version = grad._version
    return True


def _after_accumulate(weight):
    """Post-accumulate-grad hook of a sparse embedding weight: the backward's lookups are now in .grad."""
    rec = _SPARSE_ROWS.get(id(weight))
    if rec is None or rec.owner() is not weight or weight.grad is None:
        return
    rec.rows += rec.pending
    rec.pending = []
    rec.grad, rec.version = weakref.ref(weight.grad), weight.grad._version


def _record_lookup(weight, indices, padding_idx):
    rec = _SPARSE_ROWS.get(id(weight))
    if rec is None or rec.owner() is not weight:
        rec = _SPARSE_ROWS[id(weight)] = _SparseRows(weight)
        weight.register_post_accumulate_grad_hook(_after_accumulate)
    if not _rows_still_in(rec, weight.grad):  # this backward starts a new gradient (or the old was zeroed)
        rec.rows = []
    rec.pending.append((indices, padding_idx))


def sparse_grad_rows(p):
    """A bool tensor (p.shape[0],): the rows that Embedding(sparse=True) lookups put in p.grad, those PyTorch's
    sparse gradient lists; None when p.grad did not come (only) from such lookups."""
    rec = _SPARSE_ROWS.get(id(p))
    if rec is None or rec.owner() is not p or not _rows_still_in(rec, p.grad):
        return None
    with _no_grad():
        mask = p.new_zeros(p.shape[0], dtype=_bool)
        for indices, padding_idx in rec.rows:
            flat = indices.reshape(-1)
            mask[flat if padding_idx is None else flat[flat != padding_idx]] = True
    return mask


class _Embedding(Function):
    @staticmethod
    def forward(ctx, weight, indices, padding_idx, scale_grad_by_freq=False, sparse=False):
        ctx.meta = (tuple(weight.shape), weight._dtype, weight._device, padding_idx, scale_grad_by_freq)
        # a leaf's lookups are recorded for SparseAdam (above); weakly, as the graph holds the weight already. Not
        # on meta, which has no values to tell the rows by (SparseAdam then steps every row there)
        ctx.sparse_leaf = weakref.ref(weight) if sparse and weight.grad_fn is None and weight._device != "meta" \
            else None
        ctx.save_for_backward(indices)
        return _C.index(weight, 0, indices)

    @staticmethod
    def backward(ctx, g):
        indices, = ctx._unpacked
        shape, dt, dev, padding_idx, by_freq = ctx.meta
        leaf = ctx.sparse_leaf() if ctx.sparse_leaf is not None else None
        if leaf is not None:
            _record_lookup(leaf, indices, padding_idx)
        grad = _C.empty(shape, dt, dev)
        _C.fill_(grad, 0.0)
        _C.index_put_(grad, 0, indices, g, True)
        if by_freq:  # each row's gradient divided by how often the batch used it (PyTorch's scale_grad_by_freq)
            counts = _C.empty((shape[0],), dt, dev)
            _C.fill_(counts, 0.0)
            flat = indices.reshape(-1)
            ones = _C.empty((flat.shape[0],), dt, dev)
            _C.fill_(ones, 1.0)
            _C.index_put_(counts, 0, flat, ones, True)
            _C.binary(DIV, grad, _C.binary(MAXIMUM, counts, 1.0)._unsqueeze(1), grad)
        if padding_idx is not None:
            _C.fill_(grad._select(0, padding_idx), 0.0)  # the padding row is never trained
        return grad, None, None, None, None

    def name(self):
        return "EmbeddingBackward0"


def _embedding_renorm_(weight, indices, max_norm, norm_type):
    """Rescale in place (outside autograd, as PyTorch) the rows that indices reference whose norm exceeds
    max_norm, to norm max_norm (PyTorch's 1e-7 guard included)."""
    with _no_grad():
        rows = _C.index(weight, 0, indices.reshape(-1))
        # half rows as PyTorch's row.norm() and row *= scale: the norm summed in float32 and rounded to the rows'
        # dtype (a square of 300 is inf in float16), the scale rounded to it too
        wide = rows.float() if rows._dtype in (2, 3) else rows
        norms = ((wide.abs() ** norm_type).sum(1) ** (1.0 / norm_type)).to(rows.dtype).to(wide.dtype)
        scale = (norms > max_norm) * (max_norm / (norms + 1e-7) - 1.0) + 1.0
        check_inplace(weight, "embedding")  # (a computed weight's node keeps the output it saved: x ** 2's)
        _C.index_put_(weight, 0, indices.reshape(-1), rows * scale.to(rows.dtype).reshape(-1, 1), False)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of weight (num_embeddings, embedding_dim) picked by the int64 indices input: shape (*input, dim)."""
    op = "embedding"
    _check_tensor(input, op)
    _check_tensor(weight, op, "weight")
    input = long_index(input)
    if input._dtype != _int64.code:
        raise RuntimeError(f"{op}: Expected tensor for argument #1 'indices' to have scalar type Long; but got "
                           f"{input.dtype} instead")
    if weight.ndim != 2:
        raise RuntimeError(f"{op}: 'weight' must be 2-D, got shape {tuple(weight.shape)}")
    # sparse=True: the gradient is dense here (gm.optim.SparseAdam updates the rows it touches, as for a sparse
    # gradient); PyTorch's is a sparse COO tensor
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx % n
    no_negative(input, weight.shape[0], 0, op)
    if max_norm is not None:
        _embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    if _needs_grad(weight):
        return _Embedding.apply(weight, input, padding_idx, bool(scale_grad_by_freq), bool(sparse))
    return _C.index(weight, 0, input)


def one_hot(tensor, num_classes=-1):
    """int64 (*, num_classes) with a 1 at each index of the int64 tensor; num_classes=-1 takes max + 1 (which
    reads the values, so it needs a device with data, not meta)."""
    op = "one_hot"
    _check_tensor(tensor, op, "tensor")
    if tensor._dtype != _int64.code:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    n = tensor.numel()
    has_data = tensor._device != "meta"
    if num_classes == -1:
        if not has_data:
            raise RuntimeError("one_hot: num_classes=-1 reads the values (max + 1): pass num_classes on meta")
        if n == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.amax().item()) + 1
    if has_data and n:
        if int(tensor.amin().item()) < 0:
            raise RuntimeError("Class values must be non-negative.")
        if int(tensor.amax().item()) >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    out = _C.empty(tuple(tensor.shape) + (num_classes,), tensor._dtype, tensor._device)
    _C.fill_(out, 0)
    if n:
        flat = _C.arange(0, n * num_classes, num_classes, tensor._dtype, tensor._device) + tensor.reshape(-1)
        one = _C.empty((), tensor._dtype, tensor._device)
        _C.fill_(one, 1)
        _C.index_put_(out.reshape(-1), 0, flat, one, False)
    return out


# ---- channel dropout of 1-D and 3-D inputs -----------------------------------------------------------------------
def _channel_dropout(input, p, training, inplace, op, ndims, shape_of):
    """dropout2d (one mask entry per channel) on a 4-D / 3-D view of input: the same Philox stream, mask and
    bytes. A view needs input's strides to allow it; in-place on one that does not would miss the input, so
    it raises."""
    _check_tensor(input, op)
    if input.ndim not in ndims:
        raise RuntimeError(f"{op}: Expected {ndims[0]}D or {ndims[1]}D input, but received a {input.ndim}D input")
    view = shape_of(tuple(input.shape))
    if not training or p == 0:
        _dropout2d(input, p, False, inplace)  # checks p; the identity, as PyTorch's (no copy, no draw)
        return input
    if inplace and not input._can_view(view):
        raise RuntimeError(f"{op}: inplace=True needs an input whose strides allow a view of shape {view}")
    return _dropout2d(input.reshape(view), p, training, inplace).reshape(tuple(input.shape))


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input with probability p."""
    return _channel_dropout(input, p, training, inplace, "dropout1d", (2, 3), lambda s: s + (1,))


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability p. Another number of dims is
    PyTorch's deprecated form (its warning; the input read as one unbatched sample: each x[i] dropped whole)."""
    if isinstance(input, _C.TensorBase) and input.ndim not in (4, 5) and input.ndim:
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result "
                      f"in an error in a future release. To retain the behavior and silence this warning, please use "
                      f"dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      f"inputs).", stacklevel=2)
        return _channel_dropout(input, p, training, inplace, "dropout3d", (input.ndim, input.ndim),
                                lambda s: (s[0], math.prod(s[1:]), 1))
    return _channel_dropout(input, p, training, inplace, "dropout3d", (4, 5),
                            lambda s: s[:-3] + (s[-3] * s[-2], s[-1]))


# ---- alpha dropout (SELU networks) ---------------------------------------------------------------------------
_SELU_ALPHA_PRIME = 1.7580993408473766  # -selu's scale * alpha: the value a dropped unit takes


def _alpha_dropout(input, p, training, inplace, feature, op):
    """PyTorch's formula (aten/src/ATen/native/Dropout.cpp): kept units x a, dropped ones -alpha' a, plus
    alpha' a p, so a SELU activation's mean and variance are kept. Composed: a Bernoulli keep mask (per element,
    or per (N, C) channel for feature) from the Philox generator, then x * (a mask) + b, whose gradient is
    a mask; the mask and b are the temporaries, as in PyTorch."""
    _check_tensor(input, op)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    if inplace:
        raise NotImplementedError(f"{op}: inplace=True is not supported; use inplace=False")
    shape = tuple(input.shape)
    if feature:
        if input.ndim < 2:
            raise RuntimeError(f"{op}: Feature dropout requires at least 2 dimensions in the input")
        shape = shape[:2] + (1,) * (input.ndim - 2)
    a = 1.0 / (((_SELU_ALPHA_PRIME ** 2) * p + 1.0) * (1.0 - p)) ** 0.5
    keep = _C.empty(shape, input._dtype, input._device)
    keep.bernoulli_(1.0 - p)
    b = keep * (_SELU_ALPHA_PRIME * a) + (_SELU_ALPHA_PRIME * a * p - _SELU_ALPHA_PRIME * a)
    return input * (keep * a) + b


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of every element (note PyTorch's default training=False for the function)."""
    return _alpha_dropout(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (dim 1)."""
    return _alpha_dropout(input, p, training, inplace, True, "feature_alpha_dropout")
