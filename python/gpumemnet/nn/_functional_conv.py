"""Convolution and linear layers, with PyTorch's names and signatures: conv2d, conv_transpose2d, linear.

Each op is an autograd Function over the C ops in csrc/ops_conv.c, called through `apply` only when a gradient
is needed. C validates shapes, dtypes and devices (the same checks on every device, meta included); here
arguments are normalised the way PyTorch does (an int means the same value for both spatial dims) and a 3-D
(C, H, W) input is treated as a batch of one. Each backward keeps only what its gradients need: the weight for
the input's gradient, the input for the weight's gradient, nothing for the bias's; shapes are plain attributes.
"""

from .. import _C
from .._core import autocast as _amp
from .._core.tensor_products import expands_to
from .._core.functions import cast as _cast
from .._core import functions as _fn
from .._core.autograd import needs_grad as _needs_grad
from .._core.autograd import Function, _NO_CTX
from .._core.activation import keep_relu_mask
from ._args import _is_int, _pair, in_float64, integer_input

__all__ = ["conv2d", "conv_transpose2d", "linear"]


# ---- argument normalisation -------------------------------------------------------------------------------------
def _groups(groups, op):
    if not _is_int(groups):
        raise TypeError(f"{op}: groups must be an int, got {groups!r}")
    return int(groups)


def _check_tensors(op, input, weight, bias):
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if bias is not None and not isinstance(bias, _C.TensorBase):
        raise TypeError(f"{op}: bias must be a Tensor or None, got {type(bias).__name__}")


def _check_image(op, input):
    if input.ndim not in (3, 4):
        raise ValueError(f"{op}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {tuple(input.shape)}")


_HALF = (2, 3)  # float16, bfloat16


def _half_of(*tensors):
    """The half dtype among operands the CPU kernels must widen (CPU, or meta standing for the CPU), or None. CUDA
    takes halves as they are, and so does meta standing for CUDA (gm.memory.estimate(device="cuda"),
    csrc/meta_target.h): an estimate for CUDA must not count the CPU's float32 copies."""
    for a in tensors:
        if isinstance(a, _C.TensorBase) and a._dtype in _HALF and not a._device.startswith("cuda") and \
                (a._device != "meta" or _C._get_meta_target()[0] == "cpu"):
            return a._dtype
    return None


def _call(cfn, *args):
    """cfn(*args), with float16/bfloat16 operands on the CPU (and on meta, which simulates it) widened to float32
    scratch copies and the results rounded back: half-precision storage, float32 arithmetic (the CPU kernels
    compute in float32 or float64 only). Under autocast this is what keeps saved activations at half size."""
    half = _half_of(*args)
    if half is None:
        return cfn(*args)
    prev = _C.set_category("workspace")
    try:
        wide = [_cast(a, 0) if isinstance(a, _C.TensorBase) and a._dtype in _HALF else a for a in args]
    finally:
        _C.set_category(prev)
    out = cfn(*wide)
    del wide
    if isinstance(out, tuple):
        return tuple(None if o is None else _cast(o, half) for o in out)
    return _cast(out, half)


def _backward(cfn, g, x, w, args, mask, in_shape, w_shape, wf32=False):
    """A convolution backward (conv2d's or conv_transpose2d's). Half operands of one dtype on the CPU (or meta) go
    to C as they are: its kernels widen tiles (depthwise: planes) as they read them, sum in float32 and round each
    gradient once, so no float32 copy of an activation or of a gradient exists. Mixed dtypes run one batch item
    at a time on float32 copies of that item only — the float32 scratch is 1/N of the
    operands — accumulating the weight and bias gradients in float32 and rounding each once at the end. wf32:
    conv2d's float32 weight under bfloat16 activations (_keeps_f32_weight), which C reads as it is."""
    half = _half_of(g, x, w)
    n = in_shape[0]
    if half is None or all(t is None or t._dtype == half for t in (g, x, w)) or wf32:
        return cfn(g, x, w, *args, mask, in_shape, w_shape)
    if n <= 1:
        return _call(cfn, g, x, w, *args, mask, in_shape, w_shape)
    dx = _C.empty(in_shape, half, g._device) if mask[0] else None
    prev = _C.set_category("workspace")
    try:
        w32 = None if w is None else _cast(w, 0)
        dw = db = None
        item_shape = (1,) + tuple(in_shape[1:])
        for i in range(n):
            gi = _cast(g._slice(0, i, i + 1, 1), 0)
            xi = None if x is None else _cast(x._slice(0, i, i + 1, 1), 0)
            dxi, dwi, dbi = cfn(gi, xi, w32, *args, mask, item_shape, w_shape)
            del gi, xi
            if dxi is not None:
                _C.copy_(dx._slice(0, i, i + 1, 1), dxi)  # rounds into the half gradient
            if dwi is not None:
                dw = dwi if dw is None else _C.binary(0, dw, dwi, dw)
            if dbi is not None:
                db = dbi if db is None else _C.binary(0, db, dbi, db)
            del dxi, dwi, dbi
    finally:
        _C.set_category(prev)
    return dx, None if dw is None else _cast(dw, half), None if db is None else _cast(db, half)


def _reads_half(x, w, b):
    """Whether the C op takes these operands as they are: all float16 or all bfloat16 (the CPU kernels widen tile
    by tile, or depthwise plane by plane, so no float32 copy of the input or output exists; meta plans the same).
    Otherwise _call widens them."""
    dt = x._dtype
    return dt in _HALF and w._dtype == dt and (b is None or b._dtype == dt)


def _autocast(op, input, weight, bias):
    """The operands as the op computes on them: lowered under autocast, and then of one dtype. A float32 input
    with a float16 weight outside autocast is refused as in PyTorch (the C op would otherwise get them widened
    together by _call and return the half type silently)."""
    if _amp._state.enabled:
        input, weight, bias = _amp.lower(input, weight, bias)
    for name, t in (("weight", weight), ("bias", bias)):  # (a non-float input: the C op says so first)
        if t is not None and t._dtype != input._dtype and input.dtype.is_floating_point:
            # ArgumentTypeError: a TypeError and a RuntimeError, which is what PyTorch raises (`except RuntimeError`)
            raise _C.ArgumentTypeError(f"{op}: input has dtype {input.dtype.name} but {name} has dtype "
                                       f"{t.dtype.name}; cast one of them (or run the op under autocast)")
    return input, weight, bias


def _keeps_f32_weight(input, weight, bias, groups):
    """Under CPU bfloat16 autocast, whether conv2d passes its float32 weight and bias to C as they are, with only
    the input lowered: on a CPU whose bfloat16 passes widen the weight to float32 anyway (no bfloat16 products:
    _C._conv_reads_f32_weight) C rounds it to bfloat16 as it widens it (kernels/cpu/conv_half.c load_weight), the
    same operand bit for bit as the widened cast, with no bfloat16 copy made in the forward nor again in the
    backward: two passes over every weight per use instead of four, and no half copy in memory. One group only
    (depthwise reads the weight as stored); not on CUDA, nor on meta standing for it (cuDNN takes one dtype)."""
    s = _amp._state
    if not (s.enabled and s.dtype.code == 3 and groups == 1 and weight._dtype == 0 and input._dtype in (0, 2, 3)
            and (bias is None or bias._dtype == 0) and _amp._applies(input) and _amp._applies(weight)):
        return False
    d = input._device
    return (d == "cpu" or (d == "meta" and _C._get_meta_target()[0] == "cpu")) and weight._device == d and \
        _C._conv_reads_f32_weight()


def _mixed(x, w):
    """conv2d's operands in _keeps_f32_weight's form (a bfloat16 input, a float32 weight)."""
    return x._dtype == 3 and w is not None and w._dtype == 0


def _mask(ctx):
    need = ctx.needs_input_grad
    return (bool(need[0]), bool(need[1]), bool(need[2]))


def _recast(w, dtype):
    """The half copy of parameter w that autocast made in the forward, made again (the same bits: the same cast of
    the same values, which the saved tensor's version check guarantees), as scratch of this backward."""
    prev = _C.set_category("workspace")
    try:
        return _cast(w, dtype)
    finally:
        _C.set_category(prev)


class _Conv(Function):
    """What conv2d and conv_transpose2d share: the saved operands and a backward through `backward_op`."""
    backward_op = None

    @staticmethod
    def _save(ctx, x, w, args, unbatched):
        need = ctx.needs_input_grad
        if need:
            src = _amp.cast_source(w) if need[0] else None
            if src is not None:  # autocast's half copy of a parameter: backward casts the parameter again
                ctx.w_dtype, w = w._dtype, src
            ctx.save_for_backward(x if need[1] else None, w if need[0] else None)
            ctx.shapes = (x.shape, w.shape)
            ctx.args = args
            ctx.unbatched = unbatched

    @classmethod
    def backward(cls, ctx, g):
        x, w = ctx._unpacked
        if ctx.unbatched:
            g = g._unsqueeze(0)
        mask = _mask(ctx)
        w_dtype = ctx.__dict__.get("w_dtype")
        if w is not None and w._dtype == 0 and ctx.__dict__.get("wf32") and \
                (g._dtype != 3 or not _C._conv_reads_f32_weight()):
            w_dtype = 3  # the forward read the float32 weight as it is; this backward cannot: cast it as before
        if w_dtype is not None and w is not None:
            w = _recast(w, w_dtype)
        wf32 = w is not None and w._dtype == 0 and g._dtype == 3 and bool(ctx.__dict__.get("wf32"))
        if x is not None and mask[0] and ctx.release_saved(0):
            # The input's last reader is the weight's gradient: computed first, the input dropped, then the
            # input's gradient allocated. A relu's output that only its relu keeps besides is freed in between:
            # the relu keeps a bit mask from here on (keep_relu_mask).
            _, dw, db = _backward(cls.backward_op, g, x, w, ctx.args, (False,) + mask[1:], *ctx.shapes, wf32)
            edge = ctx._edges[0]
            if edge is not None and not ctx.unbatched:
                keep_relu_mask(x, edge[0])
            del x
            dx = _backward(cls.backward_op, g, None, w, ctx.args, (True, False, False), *ctx.shapes, wf32)[0]
        else:
            dx, dw, db = _backward(cls.backward_op, g, x, w, ctx.args, mask, *ctx.shapes, wf32)
        if ctx.unbatched and dx is not None:
            dx = dx._squeeze(0)
        if ctx.__dict__.get("wf32"):
            # bfloat16 gradients of the float32 weight and bias: widened as AccumulateGrad adds them into .grad (as
            # autocast's cast would hand them on, functions.ToDtype), else widened here
            if dw is not None and dw._dtype == 3 and not _fn._widened_by_leaf(ctx, 1):
                dw = _cast(dw, 0)
            if db is not None and db._dtype == 3 and not _fn._widened_by_leaf(ctx, 2):
                db = _cast(db, 0)
        return (dx, dw, db) + (None,) * len(ctx.args)


# ---- conv2d ----------------------------------------------------------------------------------------------------
class _Conv2d(_Conv):
    backward_op = staticmethod(_C.conv2d_backward)

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups):
        unbatched = x.ndim == 3
        if unbatched:
            x = x._unsqueeze(0)
        args = (x, w, b, stride, padding, dilation, groups)
        mixed = _mixed(x, w)
        out = _C.conv2d(*args) if mixed or _reads_half(x, w, b) else _call(_C.conv2d, *args)
        _Conv._save(ctx, x, w, (stride, padding, dilation, groups), unbatched)
        if mixed and ctx.needs_input_grad:
            ctx.wf32 = True
        return out._squeeze(0) if unbatched else out


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of an (N, C, H, W) or (C, H, W) input with an
    (out_channels, C/groups, kH, kW) weight. padding: an int, a pair, 'valid' (none) or 'same' (output as large as
    the input; stride 1 only; an odd total goes to the bottom/right, as in PyTorch). On the CPU the im2col columns
    use at most get_conv_workspace_limit() bytes at a time; float32 depthwise and 1x1 convolutions need none."""
    op = "conv2d"
    _check_tensors(op, input, weight, bias)
    if integer_input(input, weight, bias):
        return in_float64(lambda x, w, b: conv2d(x, w, b, stride, padding, dilation, groups), input, weight, bias)
    _check_image(op, input)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise _C.ArgumentError(f"{op}: invalid padding string {padding!r}; expected 'same' or 'valid'")
    else:
        padding = _pair(padding, "padding", op)
    args = (_pair(stride, "stride", op), padding, _pair(dilation, "dilation", op), _groups(groups, op))
    if _amp._state.enabled and _keeps_f32_weight(input, weight, bias, args[3]):
        input = _amp.lower(input)[0]
    else:
        input, weight, bias = _autocast(op, input, weight, bias)
    if _needs_grad(input, weight, bias):
        return _Conv2d.apply(input, weight, bias, *args)
    return _Conv2d.forward(_NO_CTX, input, weight, bias, *args)


# ---- conv_transpose2d ------------------------------------------------------------------------------------------
class _ConvTranspose2d(_Conv):
    backward_op = staticmethod(_C.conv_transpose2d_backward)

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, output_padding, groups, dilation):
        unbatched = x.ndim == 3
        if unbatched:
            x = x._unsqueeze(0)
        args = (x, w, b, stride, padding, output_padding, groups, dilation)
        out = _C.conv_transpose2d(*args) if _reads_half(x, w, b) else _call(_C.conv_transpose2d, *args)
        _Conv._save(ctx, x, w, (stride, padding, output_padding, groups, dilation), unbatched)
        return out._squeeze(0) if unbatched else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed convolution (the gradient of conv2d with respect to its input) of an (N, C_in, H, W) or
    (C_in, H, W) input with an (C_in, out_channels/groups, kH, kW) weight. The output has
    (H - 1)*stride - 2*padding + dilation*(kH - 1) + output_padding + 1 rows (likewise columns);
    output_padding must be smaller than stride or dilation."""
    op = "conv_transpose2d"
    _check_tensors(op, input, weight, bias)
    _check_image(op, input)
    if isinstance(padding, str):
        raise TypeError(f"{op}: padding must be an int or a tuple of 2 ints, got {padding!r}")
    args = (_pair(stride, "stride", op), _pair(padding, "padding", op), _pair(output_padding, "output_padding", op),
            _groups(groups, op), _pair(dilation, "dilation", op))
    input, weight, bias = _autocast(op, input, weight, bias)
    if _needs_grad(input, weight, bias):
        return _ConvTranspose2d.apply(input, weight, bias, *args)
    return _ConvTranspose2d.forward(_NO_CTX, input, weight, bias, *args)


# ---- linear ------------------------------------------------------------------------------------------------------
def _linear_call(cfn, *args):
    """bfloat16 operands go to C as they are (kernels/cpu/linear.c multiplies them on gemm_bf16 with float32 sums
    and rounds each result once: no float32 copies, on the CPU or on meta); float16 is still widened by _call."""
    if _half_of(*args) == 3:
        return cfn(*args)
    return _call(cfn, *args)


class _Linear(Function):
    @staticmethod
    def forward(ctx, x, w, b):
        need = ctx.needs_input_grad
        if need:
            ctx.save_for_backward(x if need[1] else None, w if need[0] else None)
            ctx.shapes = (x.shape, w.shape)
        return _linear_call(_C.linear, x, w, b)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx._unpacked
        return _linear_call(_C.linear_backward, g, x, w, _mask(ctx), *ctx.shapes)


def linear(input, weight, bias=None):
    """input (..., in_features) @ weight (out_features, in_features)^T + bias (out_features): one gemm, the bias
    written into the output first so that no output-sized temporary exists."""
    _check_tensors("linear", input, weight, bias)
    if weight.ndim == 1:  # PyTorch's: a vector of in_features weights gives one output per row, no feature dim
        if bias is not None:
            raise RuntimeError(f"linear: a 1-D weight (shape {tuple(weight.shape)}) takes no bias (PyTorch's addmm: "
                               f"mat2 must be a matrix, got 1-D tensor)")
        return input.matmul(weight)
    if bias is not None and weight.ndim == 2 and tuple(bias.shape) != (weight.shape[0],) and \
            expands_to(tuple(bias.shape), tuple(input.shape[:-1]) + (weight.shape[0],)):  # PyTorch broadcasts one
        return linear(input, weight) + bias  # (captum's README ToyModel: nn.Parameter(torch.zeros(1, 3)))
    input, weight, bias = _autocast("linear", input, weight, bias)
    if _needs_grad(input, weight, bias):
        return _Linear.apply(input, weight, bias)
    return _Linear.forward(_NO_CTX, input, weight, bias)
