"""affine_grid and grid_sample (spatial transformers); nn.functional imports __all__.

affine_grid is one matmul of the fixed base grid (x, y[, z], 1) by theta^T, differentiable in theta.
grid_sample is composed from the index ops: the grid is turned into source coordinates (unnormalised, then
clipped or reflected by padding_mode with PyTorch's gradient rules), and each output point reads its 2^dims
corners (bilinear / trilinear) or its nearest point with one gather each from the (N, C, D*H*W) view of the
input, weighted and masked where a corner falls outside. Gradients come by composition: the input's through the
gather (a scatter-add), the grid's through the weights. Memory: a few (N, C, out points) tensors per corner, never
anything of input size times output size."""
import itertools
import math
import warnings

from .._core.activation import _check_tensor
from .._core.autocast import float32_op
from .._core.creation import linspace as _linspace
from .._core.creation import stack as _stack
from .._core.creation import where as _where

__all__ = ["grid_sample", "affine_grid"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


# ---- affine_grid -------------------------------------------------------------------------------------------------
def _base_axis(steps, align_corners, dtype, device):
    """PyTorch's points along one axis of the output: -1..1 (align_corners) or the pixel centres; 0 for one step."""
    if steps <= 1:
        return _linspace(0.0, 0.0, steps, dtype=dtype, device=device)
    axis = _linspace(-1.0, 1.0, steps, dtype=dtype, device=device)
    return axis if align_corners else axis * ((steps - 1) / steps)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid (N, H, W, 2) of the 2-D affine maps theta (N, 2, 3) for an output of size (N, C, H, W),
    or (N, D, H, W, 3) of the 3-D maps theta (N, 3, 4) for size (N, C, D, H, W); each point is theta @ (x, y[, z],
    1) with x, y, z the output's normalised coordinates in [-1, 1] (the last coordinate is x, along W)."""
    _check_tensor(theta, "affine_grid")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(s) for s in size]
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    dims = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (dims, dims + 1):
        raise ValueError(f"Expected a batch of {dims}D affine matrices of shape Nx{dims}x{dims + 1} for size {size}. "
                         f"Got {tuple(theta.shape)}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"affine_grid: theta holds {theta.shape[0]} matrices but size {size} asks for a batch of "
                           f"{size[0]}")
    # base (points, dims + 1): x varies fastest (along W), then y, then z; the last column is 1
    axes = [_base_axis(s, align_corners, theta.dtype, theta.device) for s in reversed(spatial)]  # x, y[, z]
    points = math.prod(spatial)
    cols = []
    for k, axis in enumerate(axes):
        shape = [1] * dims
        shape[dims - 1 - k] = spatial[dims - 1 - k]
        cols.append(axis.reshape(shape).expand(*spatial).reshape(points))
    cols.append(axes[0].new_ones((points,)))
    base = _stack(cols, 1)
    grid = base.matmul(theta.transpose(1, 2))  # (N, points, dims)
    return grid.reshape([size[0]] + spatial + [dims])


# ---- grid_sample -------------------------------------------------------------------------------------------------
def _unnormalize(c, size, align_corners):
    if align_corners:
        return ((c + 1) / 2) * (size - 1)
    return ((c + 1) * size - 1) / 2


def _clip(c, size):
    """c clamped into [0, size - 1], with PyTorch's gradient: 1 strictly inside, 0 at or beyond either end."""
    inside = (c > 0) & (c < size - 1)
    return _where(inside, c, c.detach().clamp(0, size - 1))


def _reflect(c, twice_low, twice_high):
    """c reflected off the bounds twice_low / 2 and twice_high / 2 until inside, as PyTorch's reflect_coordinates
    (the gradient's sign flips with each reflection)."""
    if twice_low == twice_high:
        return c * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    t = c - low
    t = _where(t < 0, -t, t)
    flips = (t.detach() / span).floor()
    extra = t.fmod(span)
    return _where(flips.fmod(2) == 0, extra + low, span - extra + low)


def _source(c, size, padding_mode, align_corners):
    c = _unnormalize(c, size, align_corners)
    if padding_mode == "zeros":
        return c
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
    c = _clip(c, size)
    # a NaN position (a diverged grid; reflection makes one of an infinite one) reads the first pixel, as
    # PyTorch's CPU kernel clips it
    return _where(c.isnan(), 0.0, c)  # (no test first: it would wait for the device)


def _check_grid_args(input, grid, mode, padding_mode):
    _check_tensor(input, "grid_sample")
    _check_tensor(grid, "grid_sample")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected a 4-D or 5-D input, got input of shape {tuple(input.shape)}")
    dims = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != dims:
        raise RuntimeError(f"grid_sampler(): expected grid of {input.ndim} dims with size {dims} in the last "
                           f"dimension (input of shape {tuple(input.shape)}), but got grid of shape "
                           f"{tuple(grid.shape)}")
    if grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input of "
                           f"shape {tuple(input.shape)} and grid of shape {tuple(grid.shape)}")
    if grid.device != input.device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on the same device, but input is on "
                           f"{input.device} and grid is on {grid.device}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"grid_sampler(): input must be floating point, got {input.dtype}")
    if grid.dtype != input.dtype:
        raise RuntimeError(f"grid_sampler(): expected grid of the input's dtype {input.dtype}, got {grid.dtype}")
    for i in range(dims):
        if input.shape[2 + i] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input of "
                               f"shape {tuple(input.shape)} has dimension {2 + i} empty")
    if mode == "bicubic" and dims != 2:
        raise NotImplementedError("grid_sampler(): bicubic interpolation only supports 4D input (N, C, H, W), got "
                                  f"input of shape {tuple(input.shape)}")


@float32_op  # on PyTorch's CPU autocast float32 list (a bfloat16 feature map sampled at a float32 grid)
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) at the points grid (N, oH, oW, 2) gives, or input (N, C, D, H, W) at grid
    (N, oD, oH, oW, 3): each point (x, y[, z]) in [-1, 1] is a position in the input (x along W). mode: 'bilinear'
    (trilinear on 5-D inputs), 'nearest' (half-way points round to even) or 'bicubic' (4-D only);
    padding_mode: 'zeros' (points outside read 0), 'border' (clamped to the edge) or 'reflection'.
    align_corners=True puts -1 and 1 at the centres of the corner pixels, False (the default) at their outer edges."""
    _check_grid_args(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=3)  # (float32_op wraps it)
        align_corners = False
    dims = input.ndim - 2
    n, ch = input.shape[0], input.shape[1]
    sizes = tuple(input.shape[2:])[::-1]  # (W, H[, D]): the order of the grid's coordinates
    out_spatial = tuple(grid.shape[1:-1])
    points = math.prod(out_spatial)
    flat = input.reshape(n, ch, math.prod(sizes))
    g = grid.reshape(n, points, dims)
    strides = [math.prod(sizes[:k]) for k in range(dims)]  # x steps 1, y steps W, z steps W*H
    if mode == "bicubic":
        out = _bicubic(flat, g, sizes, strides, padding_mode, align_corners)
    else:
        coords = [_source(g[:, :, k], sizes[k], padding_mode, align_corners) for k in range(dims)]
        if mode == "nearest":
            # weight 1 through round (gradient 0): the grid's gradient is zeros, as PyTorch's
            out = _sample(flat, [[(c.round(), c.round() * 0 + 1)] for c in coords], sizes, strides)
        else:
            corners = []
            for c in coords:
                lo = c.detach().floor()
                w_hi = c - lo
                corners.append([(lo, 1 - w_hi), (lo + 1, w_hi)])
            out = _sample(flat, corners, sizes, strides)
    if mode == "bicubic" or mode == "bilinear" and padding_mode == "zeros":
        # a point with a NaN or infinite coordinate reads NaN there, as PyTorch's (a diverged grid shows in the
        # loss; nearest reads 0 outside, and bilinear's border and reflection read the clipped pixel)
        out = _where(g.isfinite().all(-1).unsqueeze(1), out, math.nan)
    return out.reshape((n, ch) + out_spatial)


def _sample(flat, taps, sizes, strides):
    """The sum over every combination of one tap per dim (taps[k]: (position, weight)) of the input at that point
    times the product of the weights; points outside the input count 0. Positions are whole numbers (as floats)."""
    n, ch, _ = flat.shape
    out = None
    for combo in itertools.product(*taps):
        valid = None
        for k, (pos, _) in enumerate(combo):
            ok = (pos >= 0) & (pos <= sizes[k] - 1)
            valid = ok if valid is None else valid & ok
        index, weight = None, None
        for k, (pos, w) in enumerate(combo):
            term = _where(valid, pos, 0).long() * strides[k]  # int64: exact past float32's 2**24
            index = term if index is None else index + term
            weight = w if weight is None else weight * w
        val = flat.gather(2, index.unsqueeze(1).expand(n, ch, index.shape[1]))
        term = val * _where(valid, weight, 0).unsqueeze(1)
        out = term if out is None else out + term
    return out


_A = -0.75  # the cubic convolution constant PyTorch uses


def _cubic_weights(t):
    """The 4 weights of taps -1, 0, 1, 2 at fraction t (Keys' cubic convolution with A = -0.75)."""
    def near(x):  # |x| <= 1
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bicubic(flat, g, sizes, strides, padding_mode, align_corners):
    """Bicubic: 4x4 taps around the unnormalised (unclipped) point, each tap's position then clipped or reflected
    by padding_mode (as PyTorch's get_value_bounded), weights from the fractional offsets."""
    taps = []
    for k in range(2):
        c = _unnormalize(g[:, :, k], sizes[k], align_corners)
        lo = c.detach().floor()
        weights = _cubic_weights(c - lo)
        row = []
        for j in range(4):
            pos = lo + (j - 1)
            if padding_mode != "zeros":
                pos = _bound(pos, sizes[k], padding_mode, align_corners).detach()
            row.append((pos, weights[j]))
        taps.append(row)
    return _sample(flat, taps, sizes, strides)


def _bound(pos, size, padding_mode, align_corners):
    if padding_mode == "reflection":
        pos = _reflect(pos, 0, 2 * (size - 1)) if align_corners else _reflect(pos, -1, 2 * size - 1)
    return _clip(pos, size)
