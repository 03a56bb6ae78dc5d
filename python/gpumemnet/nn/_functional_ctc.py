"""F.ctc_loss (connectionist temporal classification: speech and OCR models over an LSTM or a CNN's columns), with
PyTorch's arguments, checks and reductions.

The loss and its gradient are a kernel's (csrc/ops_ctc.c; kernels/cpu/ctc.c, kernels/cuda/ctc.cu): the forward
algorithm of Graves et al. in log space keeps log_alpha (N, T, 2L + 1) in the input's dtype for the backward, as
PyTorch's does, and the backward runs the beta recursion into PyTorch's closed-form gradient, exp(log_probs) -
posterior: not the true gradient with respect to log_probs, but the one that log_softmax's backward turns into
the scores' (a model ending in log_softmax trains alike). An impossible alignment (a target longer than its input
allows) has loss inf and a NaN gradient, or 0 and a zero one with zero_infinity, as PyTorch's."""
from .. import _C
from .._core.autograd import Function, as_activation, needs_grad
from .._core.creation import tensor, where
from .._core.dtype import float32, int64
from .._core.functions import is_tensor

__all__ = ["ctc_loss"]

_REDUCTIONS = ("none", "mean", "sum")


class _CtcLoss(Function):
    """The per-sample negative log-likelihoods from the kernel; backward is its closed-form gradient."""

    @staticmethod
    def forward(ctx, lp, targets, in_lens, tg_lens, blank, zero_infinity):
        nll, log_alpha = _C.ctc_loss(lp, targets, in_lens, tg_lens, blank)
        ctx.args = (blank, zero_infinity)
        ctx.save_for_backward(lp, targets, in_lens, tg_lens, as_activation(log_alpha), nll)
        return nll

    @staticmethod
    def backward(ctx, g):
        lp, targets, in_lens, tg_lens, log_alpha, nll = ctx._unpacked
        grad = _C.ctc_loss_backward(g.contiguous(), lp, targets, in_lens, tg_lens, log_alpha, nll, *ctx.args)
        return grad, None, None, None, None, None

    def name(self):
        return "CtcLossBackward0"


def _kernel_nll(lp, labels, in_lens, tg_lens, blank, zero_infinity):
    """Per-sample losses by the kernel: targets padded to the longest (N, L), lengths as int64 tensors."""
    dev = lp.device
    width = max(tg_lens, default=0)
    padded = tensor([row + [blank] * (width - len(row)) for row in labels], dtype=int64, device=dev)
    if width == 0:
        padded = padded.reshape(len(labels), 0)
    args = (lp.contiguous(), padded, tensor(in_lens, dtype=int64, device=dev), tensor(tg_lens, dtype=int64, device=dev))
    if needs_grad(lp):
        return _CtcLoss.apply(*args, blank, zero_infinity)
    return _C.ctc_loss(*args, blank)[0]


def _int_list(v):
    if is_tensor(v):
        return [int(x) for x in v.reshape(-1).tolist()]
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


def _per_sample_targets(targets, lengths, blank):
    """Each sample's label list: rows of a padded (N, S) tensor, or consecutive runs of a concatenated 1-D one. On
    meta, which holds no labels, a label that is not the blank stands for each: the same shapes, so the same
    allocations, as the real run (an estimate)."""
    if targets.device.type == "meta":
        label = 1 if blank != 1 else 0
        flat = [[label] * targets.shape[1]] * targets.shape[0] if targets.ndim == 2 else [label] * sum(lengths)
    else:
        flat = targets.tolist()
    if targets.ndim == 2:
        width = targets.shape[1]
        longest = max(lengths) if lengths else 0
        if width < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size {width} "
                               f"for argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)")
        return [row[:n] for row, n in zip(flat, lengths)]
    out, start = [], 0
    for n in lengths:
        out.append(flat[start:start + n])
        start += n
    if start > len(flat):
        raise RuntimeError(f"ctc_loss: target_lengths sum to {start}, but the concatenated targets hold {len(flat)}")
    return out


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The negative log-likelihood of each target under all alignments of log_probs (T, N, C) (or (T, C)), log-
    softmax outputs; targets (N, S) padded or the N targets concatenated; reduction 'mean' divides each loss by its
    target length, then averages over the batch."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise RuntimeError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got shape {tuple(log_probs.shape)}")
    if not lp.is_floating_point():
        raise RuntimeError(f"ctc_loss: log_probs must be floating point, got {lp.dtype}")
    if lp.dtype.itemsize < 4:  # the recursion's sums need float32's range
        lp = lp.to(float32)
    steps, batch, classes = lp.shape
    in_lens = _int_list(input_lengths)
    tg_lens = _int_list(target_lengths)
    if len(in_lens) != batch:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tg_lens) != batch:
        raise RuntimeError("target_lengths must be of size batch_size")
    for n in in_lens:
        if n > steps:
            raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got value {n} (while "
                               f"checking arguments for ctc_loss_allocate_outputs)")
    if not 0 <= blank < classes:
        raise RuntimeError(f"blank must be in label range, got blank={blank} for {classes} classes")
    labels = _per_sample_targets(targets.unsqueeze(0) if unbatched and targets.ndim == 1 else targets, tg_lens, blank)
    for row in labels:
        for c in row:
            if not 0 <= c < classes:
                raise RuntimeError(f"ctc_loss: target label {c} is out of range for {classes} classes")
    dev = lp.device
    nll = _kernel_nll(lp, labels, in_lens, tg_lens, blank, zero_infinity)
    if zero_infinity:
        nll = where(nll == float("inf"), 0.0, nll)
    if reduction == "mean":
        scale = tensor([1.0 / max(n, 1) for n in tg_lens], dtype=lp.dtype, device=dev)
        out = (nll * scale).mean()
    elif reduction == "sum":
        out = nll.sum()
    else:
        out = nll.squeeze(0) if unbatched else nll
    return out.to(log_probs.dtype) if out.dtype != log_probs.dtype else out
