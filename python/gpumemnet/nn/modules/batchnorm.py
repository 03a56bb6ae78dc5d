"""BatchNorm1d/2d/3d: PyTorch's attributes (weight, bias, running_mean, running_var, num_batches_tracked),
defaults and running-statistics rule (momentum=None: cumulative average over the batches seen).

The running statistics are model state, not activations: they are allocated under the "parameter" category, so
memory reports count them with the model's weights."""
from ... import _C
from ..._core.arg_forms import as_int
from ..._core.creation import tensor as _tensor
from ... import distributed as _dist
from ...distributed import _comm
from .. import functional as F
from .._functional_syncbn import sync_batch_norm
from .. import init
from ..parameter import Parameter
from ._donation import granted
from ._utils import new_tensor
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


class _NormBase(Module):
    """The parameters and running-statistic buffers that batch and instance norm share (PyTorch's _NormBase)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        num_features = as_int(num_features)
        # (0 is allowed, as in PyTorch: fastai's TabularModel has BatchNorm1d(n_cont) with no continuous column)
        if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 0:
            raise ValueError(f"{type(self).__name__}: num_features must be a non-negative int, got {num_features!r}")
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(new_tensor((num_features,), device, dtype))
            if bias:
                self.bias = Parameter(new_tensor((num_features,), device, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", new_tensor((num_features,), device, dtype))
            self.register_buffer("running_var", new_tensor((num_features,), device, dtype))
            self.register_buffer("num_batches_tracked", new_tensor((), device, "int64", floating=False))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _expected_dims = ()

    def _check_input_dim(self, input):
        """PyTorch's hook (subclasses in the wild override it): the ranks this module accepts."""
        if input.ndim not in self._expected_dims:
            want = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"{type(self).__name__}: expected {want} input (got {input.ndim}D input "
                             f"of shape {tuple(input.shape)})")

    _version = 2  # PyTorch's: num_batches_tracked joined the state in version 2

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """A state from before num_batches_tracked (no version, or version 1: old checkpoints, hand-made dicts)
        loads with the count it lacks kept (0 for a new module), as PyTorch's does."""
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            nbt = self.num_batches_tracked
            state_dict[key] = nbt if nbt is not None and nbt._device != "meta" else _tensor(0, dtype="int64")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        # A checkpointed segment's recomputation replays this forward and, as in PyTorch, counts the batch again
        # and moves the running statistics a second time (both of PyTorch's checkpoint forms do).
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            nbt = self.num_batches_tracked
            nbt.add_(1)
            if self.momentum is None:
                # cumulative moving average; on meta there is no count to read and no statistic to update
                factor = 1.0 / float(nbt.item()) if nbt._device != "meta" else 0.0
        # In eval mode, the running statistics are used when they exist (batch statistics otherwise).
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        if not use_batch_stats and granted(input):  # eval, and a Sequential hands the input over (no grad)
            return _C.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, False, factor,
                                 self.eps, inplace=True)[0]
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)


# The C op takes (N, C, *) of any rank as (N, C, HW) without a copy: the three modules differ only in the ranks
# they accept, as PyTorch's do.
class BatchNorm1d(_BatchNorm):
    """Normalise each channel of (N, C) or (N, C, L) by the batch's mean and variance (training) or the running
    ones (eval), then scale by weight and shift by bias."""
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Normalise each channel of (N, C, H, W) by the batch's mean and variance (training) or the running ones
    (eval), then scale by weight and shift by bias."""
    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Normalise each channel of (N, C, D, H, W) by the batch's mean and variance (training) or the running ones
    (eval), then scale by weight and shift by bias."""
    _expected_dims = (5,)


class SyncBatchNorm(_BatchNorm):
    """Batch norm over the batches of every rank of the process group (gm.distributed), in training: N ranks of
    batch B/N normalise as one process of batch B (nn/_functional_syncbn.py). With no process group initialized,
    one rank, or in eval mode, it is the batch norm of this process's batch, any rank >= 2 (so that scripts that
    convert their model, SyncBatchNorm.convert_sync_batchnorm, torchvision's reference scripts with --sync-bn,
    run unchanged in one process)."""

    def forward(self, input):
        comm = self._group() if self.training else None
        if comm is None:
            return super().forward(input)
        self._check_input_dim(input)
        momentum = self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:  # again when recomputed, as in PyTorch
            self.num_batches_tracked.add_(1)
            if momentum is None and input._device != "meta":
                momentum = 1.0 / float(self.num_batches_tracked.item())
        return sync_batch_norm(input, self.running_mean if self.track_running_stats else None,
                               self.running_var if self.track_running_stats else None, self.weight, self.bias,
                               momentum or 0.0, self.eps, comm)

    def _group(self):
        """The group to synchronise over, or None: process_group when given, else the default one when
        gm.distributed is initialized with more than one rank."""
        if self.process_group is not None:
            return _comm.world(self.process_group)
        if _dist.is_initialized() and _dist.get_world_size() > 1:
            return _comm.world()
        return None

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D input)")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d replaced by a SyncBatchNorm sharing its parameters and buffers (a new
        module if module itself is one), as PyTorch's."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group, bias=module.bias is not None)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
