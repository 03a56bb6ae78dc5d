"""Error cases of the PyTorch names that code around a model reaches (storages, the default device): B(...) is run
against PyTorch too (error_inputs.py explains it). EXEMPT: public callables with no bad input, with the reason
(test_error_coverage.py)."""
from error_inputs import B

CASES = [
    B("set_default_device of an unknown device", lambda d, l: l.L.set_default_device("tpu"), RuntimeError,
      r"device type at start of device string: tpu|Expected one of cpu|unknown device 'tpu'"),
    B("UntypedStorage.from_file of a missing file",
      lambda d, l: l.L.UntypedStorage.from_file("/nonexistent/gm-missing", shared=False, nbytes=4), RuntimeError,
      r"unable to open file </nonexistent/gm-missing> in read-only mode"),
    B("UntypedStorage of a string", lambda d, l: l.L.UntypedStorage("x"), RuntimeError, r"torch.UntypedStorage\(\)"),
    B("TypedStorage of a string", lambda d, l: l.L.TypedStorage("x"), TypeError, r"new\(\): invalid data type 'str'"),
]
EXEMPT = {"Tensor.storage": "takes no arguments: there is no bad input to give",
          "Tensor.untyped_storage": "takes no arguments: there is no bad input to give"}
