"""F.ctc_loss (connectionist temporal classification: speech and OCR models over an LSTM or a CNN's columns), with
PyTorch's arguments, checks and reductions.

The forward algorithm of Graves et al. in log space, vectorised over the batch and the extended label sequence
(the targets with a blank before, between and after their labels), one time step at a time, with recorded ops:
its gradient is autograd's plus exp(log_probs), PyTorch's closed form (see ctc_loss). Impossible alignments (a
target longer than its input allows) sit at a large finite negative log-probability instead of -inf; their loss
is reported as inf with a NaN gradient, or 0 with a zero one with zero_infinity, as PyTorch's."""
from .._core.autograd import Function
from .._core.creation import cat, full, stack, tensor, where
from .._core.dtype import float32, int64
from .._core.functions import is_tensor

__all__ = ["ctc_loss"]

_NEG = -1e30  # log of "impossible": finite in float32 and float64, far below any real log-probability
_REDUCTIONS = ("none", "mean", "sum")


class _NanGradientWhere(Function):
    """The identity, whose gradient is NaN where `bad` (an impossible alignment's, as PyTorch's without
    zero_infinity)."""

    @staticmethod
    def forward(ctx, x, bad):
        ctx.bad = bad
        return x.detach().clone()

    @staticmethod
    def backward(ctx, g):
        return where(ctx.bad, float("nan"), g), None


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
    # the extended sequences: blank, l1, blank, l2, ..., blank; and where a step may skip the blank before
    width = 2 * max(tg_lens, default=0) + 1
    ext, skip, valid = [], [], []
    for row in labels:
        e = [blank]
        for c in row:
            e += [c, blank]
        ext.append(e + [blank] * (width - len(e)))
        skip.append([s >= 2 and e[s] != blank and e[s] != e[s - 2] if s < len(e) else False for s in range(width)])
        valid.append([s < len(e) for s in range(width)])
    dev = lp.device
    ext_t = tensor(ext, dtype=int64, device=dev)
    skip_t = tensor(skip, device=dev)
    valid_t = tensor(valid, device=dev)
    emit = lp.gather(2, ext_t.unsqueeze(0).expand(steps, batch, width))  # (T, N, S'): log p of each step's label
    neg1 = full((batch, 1), _NEG, dtype=lp.dtype, device=dev)
    first_two = tensor([[s < 2 for s in range(width)]] * batch, device=dev)
    alpha = where(first_two & valid_t, emit[0], _NEG)
    running = tensor([[n > 0] for n in in_lens], device=dev)
    alpha = where(running, alpha, _NEG)
    for t in range(1, steps):
        prev1 = cat([neg1, alpha[:, :-1]], 1)
        prev2 = where(skip_t, cat([neg1, neg1, alpha[:, :-2]], 1) if width > 2 else neg1.expand(batch, width), _NEG)
        nxt = where(valid_t, stack([alpha, prev1, prev2], 0).logsumexp(0) + emit[t], _NEG)
        alpha = where(tensor([[t < n] for n in in_lens], device=dev), nxt, alpha)
    last = tensor([[2 * n, max(2 * n - 1, 0)] for n in tg_lens], dtype=int64, device=dev)
    ends = alpha.gather(1, last)
    ends = where(tensor([[True, n > 0] for n in tg_lens], device=dev), ends, _NEG)
    nll = -ends.logsumexp(1)
    feasible = nll < -_NEG / 2
    if lp.requires_grad:
        # PyTorch's gradient with respect to log_probs is its closed form exp(log_probs) - posterior over each input's
        # steps: the true gradient (-posterior) plus exp(log_probs), which log_softmax's backward cancels (a model
        # ending in log_softmax trains alike) and which shows where the gradient is taken at log_probs itself (or
        # at scores that missed their log_softmax). A term of value 0 adds it; an impossible alignment's gradient
        # is NaN there, unless zero_infinity.
        on = tensor([[[t < n] for n in in_lens] for t in range(steps)], device=dev)
        e = where(on, lp.exp(), 0.0).sum((0, 2))
        nll = nll + (e - e.detach())
        if not zero_infinity:
            nll = _NanGradientWhere.apply(nll, ~feasible)
    nll = where(feasible, nll, 0.0 if zero_infinity else float("inf"))
    if reduction == "mean":
        scale = tensor([1.0 / max(n, 1) for n in tg_lens], dtype=lp.dtype, device=dev)
        out = (nll * scale).mean()
    elif reduction == "sum":
        out = nll.sum()
    else:
        out = nll.squeeze(0) if unbatched else nll
    return out.to(log_probs.dtype) if out.dtype != log_probs.dtype else out
