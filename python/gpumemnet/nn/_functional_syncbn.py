"""sync_batch_norm: batch norm over the batches of every rank together (SyncBatchNorm's forward when a process
group has more than one rank), so N ranks of batch B/N normalise exactly as one process of batch B.

Composed of differentiable ops around one differentiable all-reduce, instead of a fused kernel: each rank sums x
and x*x per channel, one all-reduce adds the sums and the sample counts of every rank, and the normalisation is
ordinary ops on the global mean and variance. The all-reduce's backward all-reduces the incoming gradient (the
loss being the sum of every rank's losses, d loss / d local sums is the sum over ranks), which is what PyTorch's
SyncBatchNorm backward does with its all-reduce of sum(dy) and sum(dy * (x - mean)). The price is memory: the
composition saves a few input-sized tensors for backward where the fused batch_norm saves the input only; the
estimator runs this same code, so its figures include them. The variance is E[x^2] - mean^2 (one all-reduce; the
fused kernel's two-pass variance is more accurate when |mean| >> std)."""
from .._core.autograd import Function, no_grad
from .._core.creation import cat, tensor

__all__ = ["sync_batch_norm"]


class _AllReduceSum(Function):
    """The sum over ranks of t, every rank getting it; differentiable (the gradient is all-reduced too)."""

    @staticmethod
    def forward(ctx, t, comm):
        if ctx.needs_input_grad:  # a recorded node (not recording: ctx is a shared stand-in that keeps nothing)
            ctx.comm = comm
        out = t.detach().clone()
        comm.all_reduce_sum(out)
        return out

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        ctx.comm.all_reduce_sum(g)
        return g, None


def sync_batch_norm(x, running_mean, running_var, weight, bias, momentum, eps, comm):
    """Training-mode batch norm of x (N, C, *) with the statistics of every rank's batch (comm: a group of
    gpumemnet.distributed._comm). running_mean/var (may be None) are updated as batch_norm updates them."""
    C = x.shape[1]
    dims = [0] + list(range(2, x.ndim))
    count = x.numel() // C
    local = cat([x.sum(dims), (x * x).sum(dims)])
    sums = _AllReduceSum.apply(local, comm)
    if x._device == "meta":  # no data to count with: every rank's batch is taken to be this one's
        n = count * comm.size
    else:
        counts = tensor([float(count)])
        comm.all_reduce_sum(counts)
        n = int(counts.item())
    if n <= 1:
        raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel over all ranks when training, "
                         f"got input of shape {tuple(x.shape)} and {n} value(s) per channel")
    mean = sums[:C] / n
    var = sums[C:] / n - mean * mean
    shape = (1, C) + (1,) * (x.ndim - 2)
    y = (x - mean.view(shape)) * (var + eps).rsqrt().view(shape)
    if weight is not None:
        y = y * weight.view(shape)
    if bias is not None:
        y = y + bias.view(shape)
    if running_mean is not None and momentum:
        with no_grad():
            running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
            running_var.mul_(1 - momentum).add_(var.detach() * (momentum * n / (n - 1)))
    return y
