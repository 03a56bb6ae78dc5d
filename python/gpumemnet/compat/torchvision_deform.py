"""torch.ops.torchvision.deform_conv2d (torchvision.ops.deform_conv2d and DeformConv2d: the DCN v1 / v2 layers of
detection and segmentation code) and roi_pool (Fast R-CNN's box pooling) under gpumemnet, built of gpumemnet's
differentiable ops, so that autograd gives every gradient (deform_conv2d's input, offsets, mask, weight and bias).

torchvision's kernel, restated: output position (oh, ow) and kernel tap (i, j) sample the input at
    y = oh * stride_h - pad_h + i * dil_h + dy,   x = ow * stride_w - pad_w + j * dil_w + dx
where (dy, dx) are the offsets of tap k = i * kw + j of the channel's offset group (offset channels 2k and 2k + 1 of
the group's 2 * kh * kw); bilinearly, with the corners outside the map read as 0 and a sample at or beyond a pixel
outside (y <= -1, y >= H, ...) as 0; times the mask's tap k (DCN v2). The samples are the columns of a grouped
convolution by weight. The columns (N, C * kh * kw, out_h * out_w) are materialised, as the kernel's are."""
import math

from .._core.creation import arange

__all__ = ["deform_conv2d", "roi_pool"]


def _check(input, weight, offset, mask, n_weight_grps, n_offset_grps, use_mask):
    N, C, H, W = input.shape
    kh, kw = weight.shape[2], weight.shape[3]
    if n_weight_grps < 1 or C % n_weight_grps or weight.shape[1] * n_weight_grps != C:
        raise RuntimeError(f"deform_conv2d: input has {C} channels, weight {tuple(weight.shape)} with "
                           f"{n_weight_grps} groups expects {weight.shape[1] * n_weight_grps}")
    if weight.shape[0] % n_weight_grps:
        raise RuntimeError(f"deform_conv2d: weight's {weight.shape[0]} output channels cannot be divided into "
                           f"{n_weight_grps} groups")
    if n_offset_grps < 1 or C % n_offset_grps or offset.shape[1] != 2 * n_offset_grps * kh * kw:
        raise RuntimeError(f"deform_conv2d: offset of shape {tuple(offset.shape)} does not hold 2 * {n_offset_grps} "
                           f"offset groups * {kh} * {kw} channels for {C} input channels")
    if offset.shape[0] != N:
        raise RuntimeError(f"deform_conv2d: invalid batch size of offset: {offset.shape[0]} for input batch {N}")
    if use_mask and (tuple(mask.shape[:2]) != (N, n_offset_grps * kh * kw) or
                     tuple(mask.shape[2:]) != tuple(offset.shape[2:])):
        raise RuntimeError(f"deform_conv2d: mask of shape {tuple(mask.shape)} does not match the offsets' "
                           f"{(N, n_offset_grps * kh * kw) + tuple(offset.shape[2:])}")


def deform_conv2d(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, n_weight_grps,
                  n_offset_grps, use_mask):
    _check(input, weight, offset, mask, n_weight_grps, n_offset_grps, use_mask)
    N, C, H, W = input.shape
    Cout, kh, kw = weight.shape[0], weight.shape[2], weight.shape[3]
    K, G, (OH, OW) = kh * kw, n_offset_grps, offset.shape[2:]
    L = OH * OW
    dev, dt = input.device, input.dtype
    off = offset.reshape(N, G, K, 2, OH, OW)
    tap_y = (arange(kh, device=dev, dtype=dt) * dil_h).repeat_interleave(kw).reshape(1, 1, K, 1, 1)
    tap_x = (arange(kw, device=dev, dtype=dt) * dil_w).repeat(kh).reshape(1, 1, K, 1, 1)
    y = off[:, :, :, 0] + tap_y + (arange(OH, device=dev, dtype=dt) * stride_h - pad_h).reshape(1, 1, 1, OH, 1)
    x = off[:, :, :, 1] + tap_x + (arange(OW, device=dev, dtype=dt) * stride_w - pad_w).reshape(1, 1, 1, 1, OW)
    y, x = y.reshape(N, G, 1, K * L), x.reshape(N, G, 1, K * L)  # each sample's position
    inside = (y > -1) & (y < H) & (x > -1) & (x < W)
    y0, x0 = y.detach().floor(), x.detach().floor()
    ly, lx = y - y0, x - x0
    planes = input.reshape(N, G, C // G, H * W)

    def corner(cy, cx):
        ok = inside & (cy >= 0) & (cy <= H - 1) & (cx >= 0) & (cx <= W - 1)
        at = (cy.clamp(0, H - 1) * W + cx.clamp(0, W - 1)).long().expand(N, G, C // G, K * L)
        return planes.gather(3, at) * ok.to(dt)

    cols = (corner(y0, x0) * ((1 - ly) * (1 - lx)) + corner(y0, x0 + 1) * ((1 - ly) * lx) +
            corner(y0 + 1, x0) * (ly * (1 - lx)) + corner(y0 + 1, x0 + 1) * (ly * lx))
    if use_mask:
        cols = cols * mask.reshape(N, G, 1, K * L)
    Gw = n_weight_grps
    cols = cols.reshape(N, Gw, (C // Gw) * K, L)  # channel-major, then tap: the weight's (C / Gw, kh, kw) order
    out = weight.reshape(Gw, Cout // Gw, (C // Gw) * K).matmul(cols)  # (N, Gw, Cout / Gw, L)
    out = out.reshape(N, Cout, OH, OW)
    return out + bias.reshape(1, Cout, 1, 1)


def roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    """torch.ops.torchvision.roi_pool -> (output (K, C, PH, PW), argmax): each box (batch index, x1, y1, x2, y2),
    scaled and rounded to whole pixels (both ends included), cut into PH x PW bins from floor(i * size / PH) to
    ceil((i + 1) * size / PH), each bin's maximum within the map (0 for a bin wholly outside it) and its position
    h * W + w (-1 there). The bins are those of adaptive_max_pool2d over the box: it runs per box over the box's
    crop, padded with -inf where the box leaves the map, and gives the gradient too."""
    from ..nn import functional as F
    from .._core.creation import cat, full, zeros
    from .._core.dtype import int32
    if input.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
        raise RuntimeError(f"roi_pool: expected input (N, C, H, W) and rois (K, 5), got {tuple(input.shape)} and "
                           f"{tuple(rois.shape)}")
    N, C, H, W = input.shape
    PH, PW = int(pooled_height), int(pooled_width)
    outs, idxs = [], []
    for b, x1, y1, x2, y2 in rois.detach().cpu().double().tolist():
        n = int(b)
        if not 0 <= n < N:
            raise RuntimeError(f"roi_pool: a box's batch index {b} is outside [0, {N})")
        sw, sh, ew, eh = (int(_round_half_away(v * spatial_scale)) for v in (x1, y1, x2, y2))
        h, w = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        top, left = max(sh, 0), max(sw, 0)
        bottom, right = min(sh + h, H), min(sw + w, W)
        if bottom <= top or right <= left:  # wholly outside the map
            outs.append(zeros(1, C, PH, PW, dtype=input.dtype, device=input.device))
            idxs.append(full((1, C, PH, PW), -1, device=input.device))
            continue
        crop = input[n:n + 1, :, top:bottom, left:right]
        pads = (left - sw, sw + w - right, top - sh, sh + h - bottom)
        if any(pads):
            crop = F.pad(crop, pads, value=float("-inf"))
        out, at = F.adaptive_max_pool2d(crop, (PH, PW), return_indices=True)
        empty = out == float("-inf")
        outs.append(out.masked_fill(empty, 0.0))
        # the crop's positions as the map's (the maximum of a bin that is not empty lies inside the map)
        idxs.append(((at // w + sh) * W + at % w + sw).masked_fill(empty, -1))
    if not outs:
        return zeros(0, C, PH, PW, dtype=input.dtype, device=input.device), full((0, C, PH, PW), -1,
                                                                                    dtype=int32, device=input.device)
    return cat(outs), cat(idxs).to(int32)  # torchvision's argmax is int32


def _round_half_away(v):
    """C's round(): halves away from zero (Python's round() takes them to even)."""
    return math.floor(v + 0.5) if v >= 0 else math.ceil(v - 0.5)
