"""What torchvision's transforms.v2 needs from the library under it, against PyTorch: Tensor.as_subclass (its
tv_tensors are Tensor subclasses), torch.utils._pytree (it flattens each sample), torch.types and
torch.backends.cpu; and a v2 pipeline with images, boxes, masks, CutMix / MixUp run as written under the alias."""
import collections
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.utils._pytree as ours
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
theirs = pytest.importorskip("torch.utils._pytree")

Point = collections.namedtuple("Point", "x y")
TREES = [None, 3, [1, (2, 3), {"a": 4, "b": None}], {"b": 1, "a": 2}, Point(1, [2, 3]), (), [[]],
         collections.OrderedDict([("z", 1), ("y", (2,))]), ("s", {"k": [1.5, "t"]})]


@pytest.mark.parametrize("tree", TREES, ids=[str(i) for i in range(len(TREES))])
def test_pytree_flattens_as_pytorchs(tree):
    leaves, spec = ours.tree_flatten(tree)
    want, tspec = theirs.tree_flatten(tree)
    assert leaves == want and spec.num_leaves == tspec.num_leaves
    rebuilt = ours.tree_unflatten([("new", v) for v in leaves], spec)
    assert rebuilt == theirs.tree_unflatten([("new", v) for v in want], tspec)
    assert ours.tree_map(lambda v: ("m", v), tree) == theirs.tree_map(lambda v: ("m", v), tree)


def test_pytree_refuses_the_wrong_number_of_leaves():
    for lib in (ours, theirs):
        _, spec = lib.tree_flatten([1, [2]])
        with pytest.raises(ValueError, match="has length 1 but the spec refers to a pytree that holds 2 items"):
            lib.tree_unflatten([1], spec)


def test_as_subclass_shares_data_and_graph(device):
    for lib in (gm, torch):
        class Image(lib.Tensor):
            pass
        x = lib.ones(2, 3, requires_grad=True, device=device if lib is gm else "cpu")
        y = (x * 2).as_subclass(Image)
        assert type(y) is Image and isinstance(y, lib.Tensor) and y.grad_fn is not None
        y.tag = "kept"  # a subclass instance has a __dict__ (BoundingBoxes.format)
        assert y.tag == "kept"
        (y * 3).sum().backward()
        np.testing.assert_array_equal(to_np(x.grad) if lib is gm else x.grad.numpy(), np.full((2, 3), 6.0))
        z = lib.zeros(3, device=device if lib is gm else "cpu")
        v = z.as_subclass(Image)
        with lib.no_grad():
            v[0] = 5.0
        assert float(z[0]) == 5.0


def test_backends_cpu_and_types():
    assert gm.backends.cpu.get_cpu_capability() == "DEFAULT"  # no native uint8 resize: torchvision uses float32
    import gpumemnet.types as t
    assert t._device is gm.device and t._dtype is gm.dtype


def test_v2_pipeline_runs_under_the_alias():
    pytest.importorskip("torchvision")
    pytest.importorskip("PIL")
    code = '''
import numpy as np
import gpumemnet as gm; gm.as_torch()
import torch
from PIL import Image
import torchvision.transforms.v2 as T2
from torchvision import tv_tensors
img = Image.fromarray((np.random.RandomState(0).rand(48, 40, 3) * 255).astype(np.uint8))
boxes = tv_tensors.BoundingBoxes([[2, 3, 20, 30], [10, 10, 30, 40]], format="XYXY", canvas_size=(48, 40))
mask = tv_tensors.Mask(torch.zeros(48, 40, dtype=torch.uint8))
tf = T2.Compose([T2.ToImage(), T2.RandomResizedCrop(32, antialias=True), T2.RandomHorizontalFlip(p=1.0),
                 T2.ColorJitter(0.3, 0.3, 0.3), T2.ToDtype(torch.float32, scale=True), T2.Normalize((0.5,) * 3, (0.2,) * 3)])
out = tf({"image": img, "boxes": boxes, "mask": mask, "label": 3})
print(sorted((k, type(v).__name__, tuple(getattr(v, "shape", ()))) for k, v in out.items()))
tf2 = T2.Compose([T2.ToImage(), T2.Resize((24, 24)), T2.RandomRotation(15), T2.RandomAffine(10, translate=(0.1, 0.1)),
                  T2.GaussianBlur(3), T2.RandomErasing(p=1.0), T2.ToDtype(torch.float32, scale=True)])
print(type(tf2(img)).__name__)
imgs, labels = torch.rand(8, 3, 32, 32), torch.randint(0, 10, (8,))
a, b = T2.RandomChoice([T2.CutMix(num_classes=10), T2.MixUp(num_classes=10)])(imgs, labels)
print(tuple(a.shape), tuple(b.shape), round(float(b.sum()), 4))
print(T2.TrivialAugmentWide()(tv_tensors.Image(torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8))).dtype)
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines == ["[('boxes', 'BoundingBoxes', (2, 4)), ('image', 'Image', (3, 32, 32)), ('label', 'int', ()), "
                     "('mask', 'Mask', (32, 32))]", "Image", "(8, 3, 32, 32) (8, 10) 8.0", "torch.uint8"]
