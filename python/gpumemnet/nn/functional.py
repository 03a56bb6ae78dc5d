"""gpumemnet.nn.functional: the differentiable CNN ops, with PyTorch's names and signatures.

Each op family lives in its own module (autograd Function + argument checks + the C call):
  _functional_conv.py   conv2d, conv_transpose2d, linear
  _functional_conv1d.py conv1d, conv_transpose1d (2-D convolutions over a height of 1)
  _functional_fold.py   unfold (im2col), fold (col2im)
  _functional_pool.py   max_pool2d, avg_pool2d, adaptive_avg_pool2d, global_avg_pool2d, global_max_pool2d,
                        interpolate (also 5-D)
  _functional_nn.py     relu, relu_, leaky_relu, leaky_relu_, sigmoid, tanh, gelu, silu, hardswish,
                        hardsigmoid, mish, hardtanh, hardtanh_, relu6, elu, elu_, softplus, prelu, dropout, dropout2d,
                        batch_norm, softmax, log_softmax, cross_entropy, nll_loss, mse_loss, l1_loss,
                        binary_cross_entropy_with_logits, smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div
  _functional_norm.py   group_norm, layer_norm, instance_norm
  _functional_layers.py pad, pixel_shuffle, pixel_unshuffle, embedding, one_hot, dropout1d, dropout3d,
                        alpha_dropout, feature_alpha_dropout
  _functional_pool1d.py max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d, adaptive_max_pool2d
  _functional_distance.py normalize, cosine_similarity
  _functional_more.py   scaled_dot_product_attention, selu, celu, glu, logsigmoid, softsign, softshrink, hardshrink,
                        tanhshrink, threshold, softmin, pairwise_distance, channel_shuffle, and the margin, embedding,
                        multi-label soft margin, triplet, Gaussian and Poisson NLL losses
  _functional_extra.py  multi_head_attention_forward, rms_norm, local_response_norm, bilinear, rrelu, gumbel_softmax,
                        pdist, the in-place activations (celu_, selu_, threshold_, rrelu_)
  _functional_extra2.py lp_pool, max_unpool, max_pool*_with_indices, upsample*, the margin losses, embedding_bag
  _functional_volumetric.py conv3d, conv_transpose3d, max_pool3d, avg_pool3d, adaptive_avg/max_pool3d (on the
                        2-D kernels)
  _functional_grid.py   affine_grid, grid_sample
"""
import sys
import types

from ._functional_conv import conv2d, conv_transpose2d, linear  # noqa: F401
from ._functional_conv1d import conv1d, conv_transpose1d  # noqa: F401
from ._functional_fold import unfold, fold  # noqa: F401
from ._functional_pool import (  # noqa: F401
    max_pool2d, avg_pool2d, adaptive_avg_pool2d, global_avg_pool2d, global_max_pool2d, interpolate)
from ._functional_nn import (  # noqa: F401
    relu, relu_, leaky_relu, leaky_relu_, sigmoid, tanh, gelu, silu, hardswish, hardsigmoid, mish, hardtanh,
    hardtanh_, relu6, elu, elu_, softplus, prelu, dropout, dropout2d, batch_norm, softmax, log_softmax,
    cross_entropy, nll_loss, mse_loss, l1_loss, binary_cross_entropy_with_logits, smooth_l1_loss, huber_loss,
    binary_cross_entropy, kl_div)
from ._functional_norm import group_norm, layer_norm, instance_norm  # noqa: F401
from ._functional_layers import (  # noqa: F401
    pad, pixel_shuffle, pixel_unshuffle, embedding, one_hot, dropout1d, dropout3d, alpha_dropout,
    feature_alpha_dropout)
from ._functional_pool1d import (  # noqa: F401
    max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d, adaptive_max_pool2d)
from ._functional_distance import normalize, cosine_similarity  # noqa: F401
from ._functional_more import (  # noqa: F401
    scaled_dot_product_attention, selu, celu, glu, logsigmoid, softsign, softshrink, hardshrink, tanhshrink, threshold,
    softmin, pairwise_distance, channel_shuffle, margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
    multilabel_soft_margin_loss, cosine_embedding_loss, triplet_margin_loss, gaussian_nll_loss, poisson_nll_loss)
from ._functional_extra import *  # noqa: F401,F403
from ._functional_volumetric import *  # noqa: F401,F403
from ._functional_grid import *  # noqa: F401,F403
from ._functional_ctc import ctc_loss  # noqa: F401

_threshold = threshold  # (the name torch.nn.functional keeps for it)


class _Watched(types.ModuleType):
    """This module, noticing while code has replaced one of its functions (F.silu = recorder, mock.patch.object(F,
    ...): activation recorders, calibration observers, FLOP counters). Meanwhile a Sequential under no_grad grants
    no overwrite (modules/_donation.py): its layers call these functions as PyTorch's do, with inplace=False and
    the whole batch, so a replacement sees and keeps what it would under PyTorch."""
    replaced = {}  # name -> the original function, while a replacement stands

    def __setattr__(self, name, value):
        replaced = type(self).replaced
        original = replaced.get(name, self.__dict__.get(name))
        if callable(original):
            if value is original:  # put back (monkeypatch's undo)
                replaced.pop(name, None)
            else:
                replaced.setdefault(name, original)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Watched
