"""torchvision's detection families beyond the Faster R-CNN the repo-scripts suite compares with PyTorch
(scripts/detection.py): Mask R-CNN (roi_align for masks, paste_masks_in_image), FCOS (empty top-k per level) and
SSDlite (full_like with fill_value) build, train one step and predict under the torch alias. Their losses come
from random sampling that the two libraries' generators draw differently, so this checks that they run: finite
losses, a gradient for every trainable parameter a loss reaches, and predictions of the documented form."""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import math
    import gpumemnet as gm
    gm.as_torch()
    import torch
    from torchvision.models import detection as D
    torch.manual_seed(0)
    images = [torch.rand(3, 96, 128), torch.rand(3, 80, 96)]
    def target(i):
        mask = torch.zeros(1, *images[i].shape[1:], dtype=torch.uint8)
        mask[0, 10:60, 10:50] = 1
        return {"boxes": torch.tensor([[10.0, 10.0, 50.0, 60.0]]), "labels": torch.tensor([1 + i]), "masks": mask}
    small = dict(weights=None, weights_backbone=None, num_classes=3)
    for name, model, keys in [
            ("maskrcnn", D.maskrcnn_resnet50_fpn(min_size=80, max_size=128, **small),
             {"boxes", "labels", "scores", "masks"}),
            ("fcos", D.fcos_resnet50_fpn(min_size=80, max_size=128, **small), {"boxes", "labels", "scores"}),
            ("ssdlite", D.ssdlite320_mobilenet_v3_large(**small), {"boxes", "labels", "scores"})]:
        model.train()
        losses = model(images, [target(0), target(1)])
        assert all(math.isfinite(v.item()) and v.item() >= 0 for v in losses.values()), (name, losses)
        sum(losses.values()).backward()
        heads = [p for n, p in model.named_parameters() if p.requires_grad and "backbone" not in n]
        assert heads and all(p.grad is not None for p in heads), name
        model.eval()
        with torch.no_grad():
            out = model(images)
        assert len(out) == 2 and all(set(o) == keys for o in out), (name, [set(o) for o in out])
        assert all(o["boxes"].shape[-1] == 4 and o["scores"].shape[0] == o["boxes"].shape[0] for o in out)
        print(name, "ok")
""")


def test_detection_families_train_and_predict_under_the_alias():
    pytest.importorskip("torchvision")
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.split() == ["maskrcnn", "ok", "fcos", "ok", "ssdlite", "ok"]
