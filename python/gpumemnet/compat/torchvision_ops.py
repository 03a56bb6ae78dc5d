"""torch.ops.torchvision under gpumemnet: the C++ operators torchvision's detection models call, so that Faster /
Mask / Keypoint R-CNN, RetinaNet, FCOS and SSD build, train and predict under the torch alias.

- nms: the greedy suppression of torchvision's CPU kernel (boxes by decreasing score; a box is dropped when its IoU
  with a kept one exceeds the threshold), on the host: its loop is sequential by nature, and the boxes are few.
- roi_align and _roi_align_backward: kernels of gpumemnet's own with torchvision's sampling (csrc/ops_roi.c,
  kernels/roi_align.h): a sample more than a pixel outside the feature map counts as 0, as in torchvision's C++
  kernel (its pure-PyTorch _roi_align clamps it to the border instead). float16 / bfloat16 run in float32 and come
  back in their dtype, as torchvision's autocast wrapper does.
- deform_conv2d and roi_pool: of gpumemnet's ops (torchvision_deform.py), their gradients autograd's.
- _cuda_version: -1, as a torchvision built without CUDA answers.

The other operators (ps_roi_align, ps_roi_pool, the quantized and rotated ones) are not
here: they exist (torchvision registers meta kernels for each at import), and calling one raises
NotImplementedError naming it."""
import numpy as np

from .. import _C
from .._core.autograd import Function, needs_grad
from .._core.creation import tensor as _tensor
from .._core.dtype import float32
from .torchvision_deform import deform_conv2d, roi_pool


def nms(boxes, scores, iou_threshold):
    if boxes.ndim != 2 or boxes.shape[-1] != 4:
        raise RuntimeError(f"boxes should be a 2d tensor of shape [N, 4], got {tuple(boxes.shape)}")
    if scores.ndim != 1 or scores.shape[0] != boxes.shape[0]:
        raise RuntimeError(f"scores should be a 1d tensor of the boxes' length {boxes.shape[0]}, got "
                           f"{tuple(scores.shape)}")
    if boxes.dtype != scores.dtype:
        raise RuntimeError(f"boxes and scores should have the same type, got {boxes.dtype} and {scores.dtype}")
    b = boxes.detach().cpu().double().numpy()
    order = np.argsort(-scores.detach().cpu().double().numpy(), kind="stable")
    x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    area = (x2 - x1) * (y2 - y1)
    suppressed = np.zeros(len(b), bool)
    keep = []
    for i in order:
        if suppressed[i]:
            continue
        keep.append(i)
        w = np.clip(np.minimum(x2[i], x2) - np.maximum(x1[i], x1), 0, None)
        h = np.clip(np.minimum(y2[i], y2) - np.maximum(y1[i], y1), 0, None)
        inter = w * h
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / (area[i] + area - inter)
        suppressed |= iou > iou_threshold
    return _tensor(np.asarray(keep, np.int64), device=boxes.device)


class _RoiAlign(Function):
    @staticmethod
    def forward(ctx, input, rois, *args):
        ctx.args = args + (tuple(input.shape),)
        ctx.save_for_backward(rois)
        return _C.roi_align(input, rois, *args)

    @staticmethod
    def backward(ctx, g):
        rois, = ctx._unpacked
        return (_C.roi_align_backward(g, rois, *ctx.args),) + (None,) * 6

    def name(self):
        return "RoiAlignBackward"


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    args = (float(spatial_scale), int(pooled_height), int(pooled_width), int(sampling_ratio), bool(aligned))
    dtype = input.dtype
    if dtype.itemsize < 4:
        input, rois = input.to(float32), rois.to(float32)
    out = _RoiAlign.apply(input, rois, *args) if needs_grad(input) else _C.roi_align(input, rois, *args)
    return out.to(dtype) if out.dtype != dtype else out


def _roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width, batch_size, channels, height, width,
                        sampling_ratio, aligned):
    return _C.roi_align_backward(grad, rois, float(spatial_scale), int(pooled_height), int(pooled_width),
                                 int(sampling_ratio), bool(aligned), (batch_size, channels, height, width))


def _cuda_version():
    return -1


IMPLEMENTED = {"nms": nms, "roi_align": roi_align, "_roi_align_backward": _roi_align_backward,
               "deform_conv2d": deform_conv2d, "roi_pool": roi_pool, "_cuda_version": _cuda_version}
# every operator torchvision's library defines (torchvision/csrc/ops): the names torchvision looks up
NAMES = set(IMPLEMENTED) | {"ps_roi_align", "_ps_roi_align_backward", "_roi_pool_backward", "ps_roi_pool",
                            "_ps_roi_pool_backward", "qroi_align", "qnms", "_deform_conv2d_backward",
                            "box_iou_rotated"}
