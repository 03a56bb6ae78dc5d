"""PyTorch's legacy tensor types (torch.FloatTensor, torch.cuda.LongTensor...) against PyTorch's: construction
from sizes, data and tensors, isinstance by dtype and device, Tensor.type(LegacyType), and torchvision's
transforms.ToTensor (which tests isinstance(pic, torch.ByteTensor)) under the drop-in alias."""
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import to_np

torch = pytest.importorskip("torch")

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", NAMES)
def test_construction_and_isinstance(name):
    ours, theirs = getattr(gm, name), getattr(torch, name)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert ours.is_cuda is False and getattr(gm.cuda, name).is_cuda is True
    assert repr(ours) == repr(theirs) and repr(getattr(gm.cuda, name)) == repr(getattr(torch.cuda, name))
    for args in ((), (2, 3), (gm.Size([4]),)):
        t = ours(*args)
        want = theirs(*(torch.Size(a) if isinstance(a, gm.Size) else a for a in args))
        assert tuple(t.shape) == tuple(want.shape) and isinstance(t, ours)
    data = [[1, 0], [3, 2]]
    np.testing.assert_array_equal(to_np(ours(data).float()), theirs(data).float().numpy())
    np.testing.assert_array_equal(to_np(ours(np.array([1, 2])).float()), theirs(np.array([1, 2])).float().numpy())
    for lib, cls in ((gm, ours), (torch, theirs)):
        same = cls(2)
        assert isinstance(same, cls) and not isinstance(same, lib.cuda.__dict__[name])
        shared = cls(same)
        assert shared.data_ptr() == same.data_ptr() if lib is torch else shared._data_ptr == same._data_ptr
        other = lib.zeros(2, dtype=lib.float64 if name != "DoubleTensor" else lib.float32)
        assert not isinstance(other, cls)
        with pytest.raises(TypeError):
            cls(other)
        with pytest.raises(TypeError, match="invalid data type 'str'"):
            cls("a")
        assert not issubclass(cls, lib.Tensor)


def test_type_converts_by_legacy_type():
    x = gm.tensor([1.7, -2.2])
    assert x.type(gm.LongTensor).dtype == gm.int64 and x.type(gm.DoubleTensor).dtype == gm.float64
    assert x.type() == torch.tensor([1.7, -2.2]).type() == "torch.FloatTensor"
    assert isinstance(x.type(gm.IntTensor), gm.IntTensor)


def test_torchvision_to_tensor_pipeline():
    """Compose([RandomResizedCrop, RandomHorizontalFlip, ColorJitter, ToTensor, Normalize]) on a PIL image, the
    most common training transform, and the automatic augmentations, run as written under the alias."""
    pytest.importorskip("torchvision")
    pytest.importorskip("PIL")
    code = ("import numpy as np\n"
            "import gpumemnet as gm; gm.as_torch()\n"
            "import torch\n"
            "from PIL import Image\n"
            "import torchvision.transforms as T\n"
            "img = Image.fromarray((np.random.RandomState(0).rand(40, 40, 3) * 255).astype(np.uint8))\n"
            "tf = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4),\n"
            "                T.ToTensor(), T.Normalize((0.5,) * 3, (0.2,) * 3)])\n"
            "x = tf(img)\n"
            "aug = T.Compose([T.RandAugment(), T.TrivialAugmentWide(), T.AutoAugment(), T.ToTensor(),\n"
            "                 T.RandomErasing(p=1.0)])\n"  # int32 arithmetic inside (magnitude bins)
            "assert tuple(aug(img).shape) == (3, 40, 40)\n"
            "plain = T.ToTensor()(img)\n"
            "assert np.allclose(plain.numpy(), np.asarray(img).transpose(2, 0, 1) / 255.0, atol=1e-7)\n"
            "print(type(x) is __import__('gpumemnet').Tensor, type(x).__module__, tuple(x.shape), x.dtype)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "torch", "(3,", "32,", "32)", "torch.float32"]
