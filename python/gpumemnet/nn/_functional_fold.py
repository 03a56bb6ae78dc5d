"""unfold (im2col) and fold (col2im), as PyTorch's: unfold is a padded input's sliding windows taken as views
(Tensor.unfold along height and width; dilation by striding inside a window), then laid out (N, C*kh*kw, L) in one
copy; fold sums the columns back into their places with one index_add. Both differentiable, on every device."""
import numpy as np

from .. import _C
from .._core.activation import _check_tensor
from ._args import _pair
from ._functional_layers import pad


def _geometry(op, kernel_size, dilation, padding, stride):
    k, d, p, s = (_pair(v, name, op) for v, name in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                                      (padding, "padding"), (stride, "stride")))
    if min(k + d + s) <= 0 or min(p) < 0:
        raise RuntimeError(f"{op}: kernel_size, dilation and stride must be positive and padding non-negative, got "
                           f"kernel_size={k}, dilation={d}, padding={p}, stride={s}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C, H, W) (or (C, H, W)) -> (N, C * kh * kw, L): every sliding block's values as a column."""
    op = "unfold"
    _check_tensor(input, op)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(op, kernel_size, dilation, padding, stride)
    x = input.unsqueeze(0) if input.ndim == 3 else input
    n, c, h, w = x.shape
    oh, ow = _blocks(h, kh, dh, ph, sh), _blocks(w, kw, dw, pw, sw)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"unfold: the sliding blocks do not fit: input {h}x{w}, kernel_size ({kh}, {kw}), "
                           f"dilation ({dh}, {dw}), padding ({ph}, {pw}), stride ({sh}, {sw}) give {oh}x{ow} blocks")
    if ph or pw:
        x = pad(x, (pw, pw, ph, ph))
    x = x.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)  # (n, c, oh, ow, kh', kw')
    x = x[..., ::dh, ::dw]  # (n, c, oh, ow, kh, kw): every dilation-th tap of each window
    out = x.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    return out.squeeze(0) if input.ndim == 3 else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C * kh * kw, L) -> (N, C, H, W): each column added back into its block (overlaps sum)."""
    op = "fold"
    _check_tensor(input, op)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got "
                           f"{input.ndim}D)")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(op, kernel_size, dilation, padding, stride)
    h, w = _pair(output_size, "output_size", op)
    x = input.unsqueeze(0) if input.ndim == 2 else input
    n, ckk, length = x.shape
    if ckk % (kh * kw):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={ckk} and kernel_size=({kh}, {kw})")
    oh, ow = _blocks(h, kh, dh, ph, sh), _blocks(w, kw, dw, pw, sw)
    if oh * ow != length:
        raise RuntimeError(f"Given output_size=({h}, {w}), kernel_size=({kh}, {kw}), dilation=({dh}, {dw}), "
                           f"padding=({ph}, {pw}), stride=({sh}, {sw}), expected size of input's dimension 2 to match "
                           f"the calculated number of sliding blocks {oh} * {ow} = {oh * ow}, but got "
                           f"input.size(2)={length}.")
    c = ckk // (kh * kw)
    hp, wp = h + 2 * ph, w + 2 * pw
    # the padded output position of column element (ki, kj, l): rows ki*dh + bi*sh, cols kj*dw + bj*sw
    ki, kj, bi, bj = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(oh), np.arange(ow), indexing="ij")
    pos = ((ki * dh + bi * sh) * wp + kj * dw + bj * sw).reshape(-1).astype(np.int64)
    index = _C.from_numpy(np.asarray(pos, order="C"), 4, x._device)
    out = _C.empty((n, c, hp * wp), x._dtype, x._device)
    _C.fill_(out, 0)
    out = out.index_add(2, index, x.reshape(n, c, kh * kw * length))
    out = out.reshape(n, c, hp, wp)[:, :, ph:ph + h, pw:pw + w]
    out = out.contiguous()
    return out.squeeze(0) if input.ndim == 2 else out
