"""Error cases of the PyTorch names that code around a model reaches (storages, the default device): B(...) is run
against PyTorch too (error_inputs.py explains it). EXEMPT: public callables with no bad input, with the reason
(test_error_coverage.py)."""
from error_inputs import B
from error_inputs_api import E

CASES = [
    B("set_default_device of an unknown device", lambda d, l: l.L.set_default_device("tpu"), RuntimeError,
      r"device type at start of device string: tpu|Expected one of cpu|unknown device 'tpu'"),
    B("UntypedStorage.from_file of a missing file",
      lambda d, l: l.L.UntypedStorage.from_file("/nonexistent/gm-missing", shared=False, nbytes=4), RuntimeError,
      r"unable to open file </nonexistent/gm-missing> in read-only mode"),
    B("UntypedStorage of a string", lambda d, l: l.L.UntypedStorage("x"), RuntimeError, r"torch.UntypedStorage\(\)"),
    B("TypedStorage of a string", lambda d, l: l.L.TypedStorage("x"), TypeError, r"new\(\): invalid data type 'str'"),
    # exchanging memory with other libraries (gpumemnet/_interop.py)
    B("frombuffer of a length that is not a multiple of the element size",
      lambda d, l: l.L.frombuffer(b"abc", dtype=l.L.float32), ValueError, r"must be a multiple of element size"),
    B("frombuffer of an object without the buffer protocol", lambda d, l: l.L.frombuffer(3, dtype=l.L.float32),
      ValueError, r"buffer protocol|bytes-like object"),
    B("from_dlpack of a number", lambda d, l: l.L.from_dlpack(3), RuntimeError,
      r"from_dlpack received an invalid capsule"),
    B("nn.Buffer of a string", lambda d, l: l.L.nn.Buffer("x"), AttributeError,
      r"'str' object has no attribute 'detach'"),
    E("PyTorchFileReader (a name only: torch.load reads checkpoints)", lambda d, l: l.L.PyTorchFileReader("f"),
      NotImplementedError, r"use torch.load"),
]
_NO_ARGS = "takes no arguments: there is no bad input to give"
_NAME = "a class that only names PyTorch's (no gpumemnet value is one); it takes and checks nothing"
_COPY = "returns the tensor (or a copy): a real tensor is its own conjugate"
EXEMPT = {"Tensor.storage": _NO_ARGS, "Tensor.untyped_storage": _NO_ARGS, "Tensor.is_conj": _NO_ARGS,
          "Tensor.is_neg": _NO_ARGS, "gm.SymInt": _NAME, "gm.SymFloat": _NAME, "gm.SymBool": _NAME,
          "gm.ScriptModule": _NAME, "Tensor.conj": _COPY, "Tensor.resolve_conj": _COPY, "Tensor.resolve_neg": _COPY,
          "Tensor.conj_physical": _COPY}
