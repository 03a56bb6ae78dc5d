"""torch.ao.quantization under gpumemnet: the stubs a float model carries (QuantStub, DeQuantStub are identities
until a model is prepared for quantization, in PyTorch too), so quantization-ready model definitions
(torchvision's quantizable MobileNet, ResNet, ...) build and train in floating point. Preparing, converting and
fusing for int8 are not available here and say so."""
from ...._core import unsupported
from ....nn.modules.linear import Identity

__all__ = ["QuantStub", "DeQuantStub", "FakeQuantizeBase", "ObserverBase", "fuse_modules", "fuse_modules_qat", "prepare", "prepare_qat", "convert",
           "get_default_qconfig", "get_default_qat_qconfig", "quantize_dynamic", "quantize", "quantize_qat"]


class QuantStub(Identity):
    """Marks where a quantized model quantizes its input; the identity in a float model."""

    def __init__(self, qconfig=None):
        super().__init__()
        self.qconfig = qconfig


class DeQuantStub(Identity):
    """Marks where a quantized model dequantizes its output; the identity in a float model."""

    def __init__(self, qconfig=None):
        super().__init__()
        self.qconfig = qconfig


class FakeQuantizeBase(Identity):
    """The base class of PyTorch's fake-quantization modules (fvcore's checkpointer tests for it); none is made
    here."""


class ObserverBase(Identity):
    """The base class of PyTorch's quantization observers; none is made here."""


fuse_modules = unsupported.function("torch.ao.quantization.fuse_modules")
fuse_modules_qat = unsupported.function("torch.ao.quantization.fuse_modules_qat")
prepare = unsupported.function("torch.ao.quantization.prepare")
prepare_qat = unsupported.function("torch.ao.quantization.prepare_qat")
convert = unsupported.function("torch.ao.quantization.convert")
get_default_qconfig = unsupported.function("torch.ao.quantization.get_default_qconfig")
get_default_qat_qconfig = unsupported.function("torch.ao.quantization.get_default_qat_qconfig")
quantize_dynamic = unsupported.function("torch.ao.quantization.quantize_dynamic")
quantize = unsupported.function("torch.ao.quantization.quantize")
quantize_qat = unsupported.function("torch.ao.quantization.quantize_qat")
