"""torch.ops.image: the operators of torchvision's image extension (torchvision.io's read_image, decode_image,
decode_png / decode_jpeg, encode_png / encode_jpeg, read_file / write_file), which gpumemnet cannot load (it is a
PyTorch C++ library), done with Pillow, a dependency of torchvision, so that code reading its dataset with
read_image (the official "Datasets & DataLoaders" tutorial) runs.

Decoding gives PyTorch's tensors: uint8, (C, H, W), C by torchvision's ImageReadMode (0 unchanged, 1 gray, 2 gray
+ alpha, 3 RGB, 4 RGB + alpha). Pixels are libpng's / libjpeg's, which Pillow also uses; a PNG of
colour read as gray is weighted as torchvision's libpng weighs it; a JPEG read as gray is
decoded to its luma as libjpeg does; a palette PNG unchanged gives its indices (1 channel, as torchvision: a
segmentation mask's classes). 16-bit PNGs (uint16 tensors), GIF and WebP decoding and CUDA decoding are
refused by name. Encoded bytes come from Pillow's encoders: a PNG decodes to the same pixels as torchvision's; a
JPEG of the same quality may differ in its bytes."""
import io

import numpy as np

from .._core.creation import from_numpy
from .._core.tensor import Tensor

_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def read_file(path):
    """The file's bytes as a 1-D uint8 tensor."""
    return from_numpy(np.fromfile(str(path), dtype=np.uint8))


def write_file(path, data):
    raw = _bytes_of(data, "write_file")
    with open(str(path), "wb") as f:
        f.write(raw)


def _bytes_of(data, op):
    if not isinstance(data, Tensor) or data.dtype.name != "uint8" or data.ndim != 1:
        what = getattr(data, "dtype", type(data).__name__)
        raise RuntimeError(f"{op}: expected a 1-D uint8 tensor of the encoded bytes, got {what} of shape "
                           f"{tuple(getattr(data, 'shape', ()))}")
    return data.numpy().tobytes()


def _gray_libpng(rgb):
    """libpng's png_set_rgb_to_gray as torchvision's build weighs it (0.299, 0.587, 0.114 as 9798, 19235, 3735 of
    32768), truncated."""
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((9798 * r + 19235 * g + 3735 * b) >> 15).astype(np.uint8)


def _decode(data, mode, apply_exif_orientation, op):
    from PIL import Image, ImageOps
    img = Image.open(io.BytesIO(_bytes_of(data, op)))
    if img.format not in ("PNG", "JPEG"):
        raise RuntimeError(f"{op}: {img.format} images are not decoded by gpumemnet (PNG and JPEG are)")
    if mode not in (0, 1, 2, 3, 4):
        raise RuntimeError(f"{op}: unsupported mode {mode}")
    if img.format == "JPEG" and mode in (2, 4):
        raise RuntimeError(f"{op}: The provided mode is not supported for JPEG files")
    if img.format == "JPEG" and mode == 1 and img.mode != "L":
        img.draft("L", img.size)  # libjpeg's own grayscale output (the luma), as torchvision asks for
    if apply_exif_orientation:
        img = ImageOps.exif_transpose(img)
    if img.mode in ("I;16", "I;16B", "I", "F"):
        raise RuntimeError(f"{op}: 16-bit images (uint16 tensors) are not decoded by gpumemnet")
    if img.mode == "P" and mode == 0:  # the palette indices, as torchvision gives them (segmentation masks)
        return from_numpy(np.ascontiguousarray(np.asarray(img)[None]))
    if img.mode in ("P", "1"):
        img = img.convert("RGBA" if "transparency" in img.info else ("RGB" if img.mode == "P" else "L"))
    if img.mode == "CMYK":
        img = img.convert("RGB")
    want = _MODES.get(mode, img.mode)
    if want in ("L", "LA") and img.mode in ("RGB", "RGBA"):  # libpng's weights, alpha kept for LA
        arr = np.asarray(img)
        gray = _gray_libpng(arr)
        arr = gray[..., None] if want == "L" else np.stack(
            [gray, arr[..., 3] if img.mode == "RGBA" else np.full_like(gray, 255)], -1)
    else:
        arr = np.asarray(img.convert(want) if img.mode != want else img)
    if arr.ndim == 2:
        arr = arr[..., None]
    return from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def decode_image(data, mode=0, apply_exif_orientation=False):
    return _decode(data, mode, apply_exif_orientation, "decode_image")


def decode_png(data, mode=0, apply_exif_orientation=False):
    return _decode(data, mode, apply_exif_orientation, "decode_png")


def decode_jpeg(data, mode=0, apply_exif_orientation=False):
    return _decode(data, mode, apply_exif_orientation, "decode_jpeg")


def _image_of(t, op):
    if not isinstance(t, Tensor) or t.dtype.name != "uint8" or t.ndim != 3 or t.shape[0] not in (1, 3):
        raise RuntimeError(f"{op}: expected a uint8 image tensor of shape (1 or 3, H, W), got "
                           f"{getattr(t, 'dtype', type(t).__name__)} of shape {tuple(getattr(t, 'shape', ()))}")
    from PIL import Image
    arr = t.numpy().transpose(1, 2, 0)
    return Image.fromarray(arr[..., 0] if arr.shape[2] == 1 else np.ascontiguousarray(arr))


def _encoded(img, fmt, **options):
    buf = io.BytesIO()
    img.save(buf, format=fmt, **options)
    return from_numpy(np.frombuffer(buf.getvalue(), dtype=np.uint8).copy())


def encode_png(image, compression_level=6):
    if not 0 <= compression_level <= 9:
        raise RuntimeError("encode_png: compression level must be between 0 and 9")
    return _encoded(_image_of(image, "encode_png"), "PNG", compress_level=compression_level)


def encode_jpeg(image, quality=75):
    return _encoded(_image_of(image, "encode_jpeg"), "JPEG", quality=quality)


IMPLEMENTED = {"read_file": read_file, "write_file": write_file, "decode_image": decode_image,
               "decode_png": decode_png, "decode_jpeg": decode_jpeg, "encode_png": encode_png,
               "encode_jpeg": encode_jpeg}
NAMES = set(IMPLEMENTED) | {"decode_gif", "decode_webp", "decode_jpegs_cuda", "encode_jpegs_cuda"}
