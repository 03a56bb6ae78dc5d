"""torch.fft, and torch.stft: discrete Fourier transforms of real and complex tensors (_core/complex.py).

The transforms run in NumPy's pocketfft on the host (a CUDA tensor goes there and back; on meta only the shape is
computed); autograd records them with their adjoints, which are transforms too (PyTorch's formulas: the adjoint of
a transform normalised by `norm` is the inverse transform under the dual normalisation; irfft's adjoint doubles
the bins that stand for two). Gradients follow PyTorch's convention for complex values (the gradient of the real
and imaginary parts)."""
import sys

import numpy as np

from . import _C
from ._core import creation as _c
from ._core import hooks
from ._core.autograd import Function, register_graph_backward
from ._core.complex import ComplexTensor, _make, view_as_complex, view_as_real
from ._core.dtype import get_default_dtype
from ._core.graph_backward import _Scratch, linear_op

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
           "stft", "istft"]

_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(norm):
    if norm is None:
        return "backward"
    if norm not in _DUAL:
        raise ValueError(f'Invalid normalization mode: "{norm}"; expected "backward", "forward" or "ortho"')
    return norm


def _host(t):
    return t.detach().cpu().numpy()


def _back(a, like):
    """A NumPy result as a tensor of like's real dtype on like's device."""
    return _c.tensor(np.asarray(a, order="C"), dtype=like.dtype, device=like.device)


def _pairs(a):
    """NumPy complex -> (..., 2) real."""
    return np.stack([a.real, a.imag], -1)


def _complex(p):
    """(..., 2) real NumPy -> complex."""
    return p[..., 0] + 1j * p[..., 1]


def _remember(ctx, **kw):
    """What backward needs, kept on a recording node (the ctx of an unrecorded call takes nothing)."""
    if ctx.needs_input_grad:
        vars(ctx).update(kw)


def _meta(like, shape):
    return _C.empty(tuple(shape), like._dtype, "meta")


class _C2C(Function):
    """A complex transform over `axes` of a (..., 2) tensor; inverse: the inverse transform."""

    @staticmethod
    def forward(ctx, p, axes, norm, inverse):
        _remember(ctx, axes=axes, norm=norm, inverse=inverse)
        if p._device == "meta":
            return _meta(p, p.shape)
        f = np.fft.ifftn if inverse else np.fft.fftn
        return _back(_pairs(f(_complex(_host(p)), axes=axes, norm=norm)), p)

    @staticmethod
    def backward(ctx, g):
        return _C2C.apply(g, ctx.axes, _DUAL[ctx.norm], not ctx.inverse), None, None, None


class _R2C(Function):
    """rfft of a real tensor along `axis` (the half spectrum, n // 2 + 1 bins), as (..., 2)."""

    @staticmethod
    def forward(ctx, x, axis, norm):
        _remember(ctx, axis=axis, norm=norm, n=x.shape[axis])
        if x._device == "meta":
            shape = list(x.shape)
            shape[axis] = shape[axis] // 2 + 1
            return _meta(x, shape + [2])
        return _back(_pairs(np.fft.rfft(_host(x), axis=axis, norm=norm)), x)

    @staticmethod
    def backward(ctx, g):
        # the adjoint: the half spectrum padded with zeros to n bins, inverse-transformed, real part
        if g._device == "meta":
            shape = list(g.shape[:-1])
            shape[ctx.axis] = ctx.n
            return _meta(g, shape), None, None
        full = _complex(_host(g))
        pad = [(0, 0)] * full.ndim
        pad[ctx.axis] = (0, ctx.n - full.shape[ctx.axis])
        out = np.fft.ifft(np.pad(full, pad), axis=ctx.axis, norm=_DUAL[ctx.norm]).real
        return _back(out, g), None, None


class _C2R(Function):
    """irfft of a (..., 2) half spectrum along `axis` to n real points."""

    @staticmethod
    def forward(ctx, p, axis, n, norm):
        _remember(ctx, axis=axis, n=n, norm=norm, bins=p.shape[axis])
        if p._device == "meta":
            shape = list(p.shape[:-1])
            shape[axis] = n
            return _meta(p, shape)
        return _back(np.fft.irfft(_complex(_host(p)), n=n, axis=axis, norm=norm), p)

    @staticmethod
    def backward(ctx, g):
        if g._device == "meta":
            shape = list(g.shape) + [2]
            shape[ctx.axis] = ctx.bins
            return _meta(g, shape), None, None, None
        gi = np.fft.rfft(_host(g), axis=ctx.axis, norm=_DUAL[ctx.norm])
        twice = [slice(None)] * gi.ndim
        twice[ctx.axis] = slice(1, ctx.n - gi.shape[ctx.axis] + 1)
        gi[tuple(twice)] *= 2  # bins 1 .. n - (n // 2 + 1) stand for themselves and their mirror images
        size = gi.shape[ctx.axis]
        if size != ctx.bins:  # the input had more bins than irfft read (the rest got no gradient), or fewer
            if size > ctx.bins:
                gi = np.take(gi, range(ctx.bins), axis=ctx.axis)
            else:
                pad = [(0, 0)] * gi.ndim
                pad[ctx.axis] = (0, ctx.bins - size)
                gi = np.pad(gi, pad)
        return _back(_pairs(gi), g), None, None, None


# both are linear: under create_graph their backward is one node whose own backward is the transform itself
register_graph_backward(_R2C, linear_op(lambda ctx, g: lambda h: _R2C.forward(_Scratch(), h, ctx.axis, ctx.norm)))
register_graph_backward(_C2R, linear_op(lambda ctx, g: lambda h: _C2R.forward(_Scratch(), h, ctx.axis, ctx.n,
                                                                              ctx.norm)))


# ---- shapes: dims, lengths, cropping and zero padding --------------------------------------------------------
def _check(input, op):
    if isinstance(input, ComplexTensor):
        return input
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        input = input.to(get_default_dtype())
    return input


def _float(x):
    """A real input in a dtype pocketfft computes (float16 and bfloat16 as float32)."""
    return x if x.dtype.name in ("float32", "float64") else x.float()


def _axes(op, ndim, dim, s, default_all=True):
    """The (non-negative) axes and lengths of an n-dimensional transform."""
    if dim is None:
        dim = list(range(ndim))[-len(s):] if s is not None else (list(range(ndim)) if default_all else [-1])
    dim = [dim] if isinstance(dim, int) else list(dim)
    axes = []
    for d in dim:
        if not -ndim <= d < ndim:
            raise IndexError(f"{op}: dim {d} out of range for a tensor of {ndim} dimensions")
        axes.append(d % ndim)
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{op}: dims must be unique, got {dim}")
    if s is not None and len(s) != len(axes):
        raise RuntimeError(f"{op}: When given, dim and shape arguments must have the same length (s={s}, "
                           f"dim={dim})")
    return axes, (list(s) if s is not None else [None] * len(axes))


def _resize(t, axis, n):
    """t cropped or zero-padded to n along axis (the signal length argument `n` / `s`)."""
    size = t.shape[axis]
    if n is None or n == size:
        return t
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    if n < size:
        return t.narrow(axis, 0, n)
    shape = list(t.shape)
    shape[axis] = n - size
    return _c.cat([t, _c.zeros(*shape, dtype=t.dtype, device=t.device)], axis)


def _as_pairs(x):
    return view_as_real(x) if isinstance(x, ComplexTensor) else _make(_float(x), 0.0)._r


def _c2c(op, input, s, dim, norm, inverse, default_all=True):
    x = _check(input, op)
    axes, lengths = _axes(op, x.ndim, dim, s, default_all)
    p = _as_pairs(x)
    for a, n in zip(axes, lengths):
        p = _resize(p, a, n)
    return ComplexTensor(_C2C.apply(p, tuple(axes), _norm(norm), inverse))


def _r2c(op, input, s, dim, norm, default_all=True):
    x = _check(input, op)
    if isinstance(x, ComplexTensor):
        raise RuntimeError(f"{op} expects a real input tensor, but got {x.dtype}")
    axes, lengths = _axes(op, x.ndim, dim, s, default_all)
    x = _float(x)
    for a, n in zip(axes, lengths):
        x = _resize(x, a, n)
    out = ComplexTensor(_R2C.apply(x, axes[-1], _norm(norm)))
    return _c2c(op, out, None, axes[:-1], norm, False) if len(axes) > 1 else out


def _c2r(op, input, s, dim, norm, default_all=True):
    x = _check(input, op)
    axes, lengths = _axes(op, x.ndim, dim, s, default_all)
    if len(axes) > 1:
        x = _c2c(op, x, lengths[:-1], axes[:-1], norm, True)
    p = _as_pairs(x)
    n = lengths[-1] if lengths[-1] is not None else 2 * (p.shape[axes[-1]] - 1)
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return _C2R.apply(p, axes[-1], n, _norm(norm))


# ---- torch.fft's functions ------------------------------------------------------------------------------------
def fft(input, n=None, dim=-1, norm=None):
    return _c2c("fft_fft", input, None if n is None else [n], [dim], norm, False)


def ifft(input, n=None, dim=-1, norm=None):
    return _c2c("fft_ifft", input, None if n is None else [n], [dim], norm, True)


def rfft(input, n=None, dim=-1, norm=None):
    return _r2c("fft_rfft", input, None if n is None else [n], [dim], norm)


def irfft(input, n=None, dim=-1, norm=None):
    return _c2r("fft_irfft", input, None if n is None else [n], [dim], norm)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    return _c2c("fft_fft2", input, s, dim, norm, False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    return _c2c("fft_ifft2", input, s, dim, norm, True)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    return _r2c("fft_rfft2", input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    return _c2r("fft_irfft2", input, s, dim, norm)


def fftn(input, s=None, dim=None, norm=None):
    return _c2c("fft_fftn", input, s, dim, norm, False)


def ifftn(input, s=None, dim=None, norm=None):
    return _c2c("fft_ifftn", input, s, dim, norm, True)


def rfftn(input, s=None, dim=None, norm=None):
    return _r2c("fft_rfftn", input, s, dim, norm)


def irfftn(input, s=None, dim=None, norm=None):
    return _c2r("fft_irfftn", input, s, dim, norm)


# the Hermitian transforms: hfft is irfft of the conjugate with the dual normalisation, ihfft the conjugate of rfft
def _conj(x):
    return x.conj() if isinstance(x, ComplexTensor) else x


def hfft(input, n=None, dim=-1, norm=None):
    return irfft(_conj(input), n, dim, _DUAL[_norm(norm)])


def ihfft(input, n=None, dim=-1, norm=None):
    return rfft(input, n, dim, _DUAL[_norm(norm)]).conj()


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    return irfftn(_conj(input), s, dim, _DUAL[_norm(norm)])


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    return rfftn(input, s, dim, _DUAL[_norm(norm)]).conj()


def hfftn(input, s=None, dim=None, norm=None):
    return irfftn(_conj(input), s, dim, _DUAL[_norm(norm)])


def ihfftn(input, s=None, dim=None, norm=None):
    return rfftn(input, s, dim, _DUAL[_norm(norm)]).conj()


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point transform: [0, 1, ..., n//2 - 1 (or (n-1)//2), -(n//2), ..., -1] / (d n)."""
    return _c.tensor(np.fft.fftfreq(n, d), dtype=dtype or get_default_dtype(), device=device,
                     requires_grad=requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    return _c.tensor(np.fft.rfftfreq(n, d), dtype=dtype or get_default_dtype(), device=device,
                     requires_grad=requires_grad)


def _shift(input, dim, sign):
    dims = list(range(input.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    shifts = [sign * (input.shape[d] // 2) for d in dims]
    if isinstance(input, ComplexTensor):
        return ComplexTensor(view_as_real(input).roll(shifts, [d % input.ndim for d in dims]))
    return input.roll(shifts, dims)


def fftshift(input, dim=None):
    """Moves the zero frequency to the middle: a roll by n // 2 along each dim."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    return _shift(input, dim, -1)


def _frame_args(op, n_fft, hop_length, win_length):
    """(hop, window length) with PyTorch's defaults (n_fft // 4, n_fft), checked."""
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if not 0 < win <= n_fft or hop <= 0:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft and hop_length > 0, but got n_fft={n_fft}, "
                           f"win_length={win}, hop_length={hop}")
    return hop, win


def _padded_window(op, window, win, n_fft, dtype, device):
    """The window of win samples centred in n_fft with zeros around it (PyTorch's rule); a missing one is ones of
    win samples, or None where that changes nothing (win == n_fft). A given window of n_fft samples as it is."""
    if window is not None and tuple(window.shape) != (win,):
        raise RuntimeError(f"{op}: expected a 1D window tensor of size equal to win_length={win}, but got window "
                           f"with size {list(window.shape)}")
    if win == n_fft:
        return window
    if window is None:
        window = _c.ones(win, dtype=dtype, device=device)
    left = (n_fft - win) // 2
    return _c.cat([_c.zeros(left, dtype=dtype, device=device), window.to(dtype),
                   _c.zeros(n_fft - win - left, dtype=dtype, device=device)])


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """torch.stft: the Fourier transforms of windowed frames, (B?, n_fft // 2 + 1, frames) (onesided, the default
    for real input), complex (return_complex=True; False gives the (..., 2) real form PyTorch deprecates)."""
    if return_complex is None:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future PyTorch release.")
    x = _check(input, "stft")
    if x.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, got {getattr(x, 'dtype', '')} of shape "
                           f"{tuple(x.shape)}")
    cx = isinstance(x, ComplexTensor)  # an analytic or I/Q signal: its two-sided spectrum
    if cx and onesided:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    onesided = not cx if onesided is None else onesided
    hop, win = _frame_args("stft", n_fft, hop_length, win_length)
    batched = x.ndim == 2
    x = x if batched else x.unsqueeze(0)
    x = x if cx else _float(x)
    if center:
        from .nn import functional as F
        x = F.pad(x.unsqueeze(1), (n_fft // 2, n_fft // 2), mode=pad_mode).squeeze(1)
    if x.shape[-1] < n_fft:
        raise RuntimeError(f"stft: input of length {x.shape[-1]} (after padding) is shorter than n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop)  # (B, frames, n_fft)
    w = _padded_window("stft", window, win, n_fft, x.real.dtype if cx else x.dtype, x.device)
    if w is not None:
        frames = frames * w
    norm = "ortho" if normalized else None
    spec = rfft(frames, dim=-1, norm=norm) if onesided else fft(frames, dim=-1, norm=norm)
    spec = spec.transpose(-1, -2)
    if not batched:
        spec = spec.squeeze(0)
    return spec if return_complex else view_as_real(spec)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """torch.istft: the inverse of stft by overlap-add of the frames' inverse transforms, divided by the
    overlap-added squared window (PyTorch's algorithm and its check that the window covers every sample)."""
    if not isinstance(input, ComplexTensor):
        raise TypeError(f"istft requires a complex-valued input tensor matching the output from stft with "
                        f"return_complex=True, got {getattr(input, 'dtype', type(input).__name__)}")
    spec = input if input.ndim == 3 else input.unsqueeze(0)
    if spec.ndim != 3:
        raise RuntimeError(f"istft: expected a tensor of 2 or 3 dimensions (B?, freq, frames), got shape "
                           f"{tuple(input.shape)}")
    hop, win = _frame_args("istft", n_fft, hop_length, win_length)
    freqs, frames = spec.shape[-2], spec.shape[-1]
    onesided = freqs != n_fft if onesided is None else onesided
    if freqs != (n_fft // 2 + 1 if onesided else n_fft):
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input to be "
                           f"{n_fft // 2 + 1 if onesided else n_fft} for n_fft={n_fft}, but got {freqs}")
    if return_complex and onesided:
        raise RuntimeError("istft: Cannot have onesided output if window or input is complex")
    rdt = spec._r.dtype
    w = _padded_window("istft", window, win, n_fft, rdt, spec.device)
    w = _c.ones(n_fft, dtype=rdt, device=spec.device) if w is None else w.to(rdt)
    norm = "ortho" if normalized else None
    total = n_fft + hop * (frames - 1)
    from .nn import functional as F
    fold = dict(output_size=(1, total), kernel_size=(1, n_fft), stride=(1, hop))
    envelope = F.fold((w * w).reshape(1, n_fft, 1).expand(1, n_fft, frames), **fold).reshape(total)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    envelope = envelope[start:min(end, total)]
    if bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min is below 1e-11: the window (with this hop_length) "
                           "leaves samples uncovered, so they cannot be recovered")

    def overlap_add(y):  # (B, frames, n_fft) windowed frames -> (B, samples), the envelope divided out
        y = F.fold((y * w).transpose(1, 2), **fold).reshape(y.shape[0], total)[:, start:min(end, total)] / envelope
        if end > total:
            y = _c.cat([y, _c.zeros(y.shape[0], end - total, dtype=y.dtype, device=y.device)], 1)
        return y if input.ndim == 3 else y.squeeze(0)
    spec = spec.transpose(-1, -2)  # (B, frames, freq)
    if return_complex:  # a two-sided spectrum's complex signal: the real and imaginary parts added up apart
        y = ifft(spec, n=n_fft, dim=-1, norm=norm)
        return view_as_complex(_c.stack([overlap_add(y.real), overlap_add(y.imag)], -1))
    # a two-sided spectrum gives its first half to irfft, as PyTorch does for a real result
    return overlap_add(irfft(spec[..., :n_fft // 2 + 1], n=n_fft, dim=-1, norm=norm))


hooks.register("fft", sys.modules[__name__])  # Tensor.stft / Tensor.istft (_core/tensor_misc_extra.py)
