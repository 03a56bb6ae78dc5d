"""torch.onnx: gpumemnet exports no ONNX graph. Code that only asks whether an export is running (torchvision's
detection models) is told no, and registrations of symbolic functions for the exporter are accepted and unused;
`export` says it is not available."""
import types

TensorProtoDataType = types.SimpleNamespace(FLOAT=1, UINT8=2, INT8=3, INT32=6, INT64=7, BOOL=9, FLOAT16=10,
                                            DOUBLE=11, BFLOAT16=16)


def is_in_onnx_export():
    return False


def register_custom_op_symbolic(symbolic_name, symbolic_fn, opset_version):
    pass


def export(*args, **kwargs):
    raise NotImplementedError("torch.onnx.export: gpumemnet cannot export ONNX graphs; export from PyTorch")
