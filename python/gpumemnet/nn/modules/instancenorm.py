"""InstanceNorm1d/2d/3d: PyTorch's attributes and defaults (affine=False, track_running_stats=False), batched or
unbatched input, and running statistics used in eval only when tracked. Over F.instance_norm
(nn/_functional_norm.py); the parameters and buffers are batch norm's (_NormBase, batchnorm.py)."""
import warnings

from .. import functional as F
from .batchnorm import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    _no_batch_dim = None  # the rank of an unbatched input (C, *spatial)
    _version = 2  # PyTorch's _NormBase version, which its InstanceNorms save too

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """PyTorch's advice for a checkpoint from before 0.4.0 (CycleGAN's and pix2pix's old ones) that holds running
        statistics an InstanceNorm without track_running_stats has no buffers for: its words, the keys dropped."""
        if local_metadata.get("version") is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var") if prefix + n in state_dict]
            if keys:
                klass = type(self).__name__
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {' and '.join(f'{chr(34)}{k}{chr(34)}' for k in keys)} for "
                    f"{klass} with track_running_stats=False. If state_dict is a checkpoint saved before 0.4.0, this "
                    f"may be expected because {klass} does not track running stats by default since 0.4.0. Please "
                    f"remove these keys from state_dict. If the running stats are actually needed, instead set "
                    f"track_running_stats=True in {klass} to enable them. See the documentation of {klass} for "
                    f"details.")
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _apply_instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def _get_no_batch_dim(self):
        return self._no_batch_dim

    def _check_input_dim(self, input):
        nb = self._get_no_batch_dim()
        if input.ndim not in (nb, nb + 1):
            raise ValueError(f"{type(self).__name__}: expected {nb}D or {nb + 1}D input (got {input.ndim}D input "
                             f"of shape {tuple(input.shape)})")

    def forward(self, input):
        self._check_input_dim(input)
        nb = self._get_no_batch_dim()
        feature_dim = input.ndim - nb
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"{type(self).__name__}: expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          f"warning by not passing in num_features, which is not used because affine=False")
        if input.ndim == nb:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Normalize each channel of each sample of (N, C, L) (or unbatched (C, L)) over L."""
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Normalize each channel of each sample of (N, C, H, W) (or unbatched (C, H, W)) over H and W."""
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Normalize each channel of each sample of (N, C, D, H, W) (or unbatched (C, D, H, W)) over D, H and W."""
    _no_batch_dim = 4
