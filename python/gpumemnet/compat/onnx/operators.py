"""torch.onnx.operators: shape helpers for ONNX export, which torchvision's detection transforms import and call
only while an export runs (never here: torch.onnx.is_in_onnx_export() is False)."""
from ..._core import unsupported

shape_as_tensor = unsupported.function("torch.onnx.operators.shape_as_tensor")
reshape_from_tensor_shape = unsupported.function("torch.onnx.operators.reshape_from_tensor_shape")
