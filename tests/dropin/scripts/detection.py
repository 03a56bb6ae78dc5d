"""Object detection as torchvision's detection fine-tuning tutorial trains it: Faster R-CNN with a MobileNetV3-Large
FPN backbone (torchvision.models.detection), images and targets as lists of tensors and dicts, the model's own loss
dict summed, SGD with momentum and weight decay, then predictions in eval mode; plus torchvision.ops' roi_align
(values and gradient), nms and batched_nms called directly. Synthetic images with boxes instead of PennFudan.

Deterministic on both sides: the RPN's and the box head's samplers are given more slots than there are anchors and
proposals, so that they keep every one whatever their random permutation draws (the two libraries' generators
differ). --init/--out/--double are the conformance suite's knobs."""
import argparse

import numpy as np
import torch
import torchvision
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn


def data(dtype):
    rng = np.random.default_rng(0)
    images = [torch.from_numpy(rng.uniform(0, 1, (3, 96, 128)).astype(dtype)),
              torch.from_numpy(rng.uniform(0, 1, (3, 112, 96)).astype(dtype))]
    targets = [{"boxes": torch.tensor([[10.0, 12.0, 60.0, 70.0], [70.0, 20.0, 120.0, 90.0]], dtype=images[0].dtype),
                "labels": torch.tensor([1, 2])},
               {"boxes": torch.tensor([[5.0, 8.0, 40.0, 50.0]], dtype=images[0].dtype), "labels": torch.tensor([2])}]
    return images, targets


def ops_checks(dtype):
    """torchvision.ops called directly: roi_align's values and input gradient, nms and batched_nms's kept indices."""
    rng = np.random.default_rng(1)
    out = {}
    feats = torch.from_numpy(rng.standard_normal((2, 4, 16, 20)).astype(dtype)).requires_grad_()
    boxes = [torch.tensor([[1.0, 2.0, 20.0, 18.0], [0.5, 0.5, 7.0, 30.0]], dtype=feats.dtype),
             torch.tensor([[10.0, 4.0, 36.0, 30.0]], dtype=feats.dtype)]
    for name, kw in (("aligned", dict(output_size=(3, 4), spatial_scale=0.5, sampling_ratio=2, aligned=True)),
                     ("adaptive", dict(output_size=5, spatial_scale=0.5, sampling_ratio=-1, aligned=False))):
        r = torchvision.ops.roi_align(feats, boxes, **kw)
        w = torch.from_numpy(rng.standard_normal(tuple(r.shape)).astype(dtype))
        (r * w).sum().backward()
        out[f"roi_align/{name}"] = r.detach().double().numpy()
        out[f"roi_align/{name}/grad"] = feats.grad.double().numpy()
        feats.grad = None
    xy = rng.uniform(0, 50, (40, 2))
    wh = rng.uniform(5, 30, (40, 2))
    b = torch.from_numpy(np.concatenate([xy, xy + wh], 1).astype(dtype))
    s = torch.from_numpy(rng.permutation(40).astype(dtype) / 40)  # distinct scores: one order on both sides
    out["nms"] = torchvision.ops.nms(b, s, 0.3).double().numpy()
    idx = torch.from_numpy(rng.integers(0, 3, 40))
    out["batched_nms"] = torchvision.ops.batched_nms(b, s, idx, 0.5).double().numpy()
    return out


def main():
    parser = argparse.ArgumentParser(description="torchvision detection fine-tuning (synthetic data)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()
    dtype = np.float64 if opt.double else np.float32

    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=3, min_size=96,
                                                  max_size=128, rpn_batch_size_per_image=100000,
                                                  box_batch_size_per_image=100000)
    try:
        with np.load(opt.init) as z:
            model.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files})
    except FileNotFoundError:
        np.savez(opt.init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    if opt.double:
        model.double()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.005, momentum=0.9, weight_decay=0.0005)

    images, targets = data(dtype)
    result = {}
    model.train()
    for step in range(opt.steps):
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())
        optimizer.zero_grad()
        losses.backward()
        if step == 0:  # for the test's float64 diagnosis: step 1's loss and gradients, before any step
            result["step0/loss"] = np.array(losses.item())
            result.update({f"grad/{k}": p.grad.detach().double().numpy()
                           for k, p in model.named_parameters() if p.grad is not None})
        optimizer.step()
        for k, v in loss_dict.items():
            result[f"loss/{step}/{k}"] = np.array(v.item())
        print(f"step {step}: " + ", ".join(f"{k} {v.item():.4f}" for k, v in loss_dict.items()))
    model.eval()
    with torch.no_grad():
        predictions = model(images)
    # how many boxes survive the score threshold and nms after two steps is a discrete outcome of float32 rounding:
    # the predictions are checked for form, not compared
    assert len(predictions) == 2 and all(set(p) == {"boxes", "labels", "scores"} for p in predictions)
    print("predictions:", [tuple(p["boxes"].shape) for p in predictions])
    result.update(ops_checks(dtype))
    result.update({f"state/{k}": v.detach().double().numpy() for k, v in model.state_dict().items()})
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
