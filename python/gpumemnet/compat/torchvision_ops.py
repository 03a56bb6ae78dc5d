"""torch.ops.torchvision under gpumemnet: the C++ operators torchvision's detection models call, so that Faster /
Mask / Keypoint R-CNN, RetinaNet, FCOS and SSD build, train and predict under the torch alias.

- nms: the greedy suppression of torchvision's CPU kernel (boxes by decreasing score; a box is dropped when its IoU
  with a kept one exceeds the threshold), on the host: its loop is sequential by nature, and the boxes are few.
- roi_align: torchvision's own pure-PyTorch roi_align (torchvision.ops.roi_align._roi_align, "a pure Python
  implementation of roi_align that looks just like its CUDA kernel"), run on gpumemnet's ops: its gradient is
  that of the recorded ops (no separate backward kernel).
- _cuda_version: -1, as a torchvision built without CUDA answers.

The other operators (roi_pool, ps_roi_align, ps_roi_pool, deform_conv2d, the quantized and rotated ones) are not
here: they exist (torchvision registers meta kernels for each at import), and calling one raises
NotImplementedError naming it."""
import numpy as np

from .._core.creation import tensor as _tensor


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


_ROI_CHUNK = 64


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """torchvision's pure-PyTorch roi_align, over at most _ROI_CHUNK boxes at a time: its temporaries hold every
    box's sample points for all channels at once (a Mask R-CNN training step on two 128x96 images peaked at
    6.8 GiB, 367 MiB in one request), and each box's result depends on that box alone."""
    from torchvision.ops.roi_align import _roi_align  # torchvision's, imported under the alias as the caller is
    if rois.shape[0] <= _ROI_CHUNK:
        return _roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned)
    from .._core.creation import cat  # noqa: E402
    return cat([_roi_align(input, rois[i:i + _ROI_CHUNK], spatial_scale, pooled_height, pooled_width,
                           sampling_ratio, aligned) for i in range(0, rois.shape[0], _ROI_CHUNK)])


def _cuda_version():
    return -1


IMPLEMENTED = {"nms": nms, "roi_align": roi_align, "_cuda_version": _cuda_version}
# every operator torchvision's library defines (torchvision/csrc/ops): the names torchvision looks up
NAMES = set(IMPLEMENTED) | {"_roi_align_backward", "ps_roi_align", "_ps_roi_align_backward", "roi_pool",
                            "_roi_pool_backward", "ps_roi_pool", "_ps_roi_pool_backward", "qroi_align", "qnms",
                            "deform_conv2d", "_deform_conv2d_backward", "box_iou_rotated"}
