"""Error cases of the PyTorch names added for libraries built on PyTorch (torch.nextafter, torch.Future, torch.Stream,
torch.get_device_module, UninitializedParameter.materialize): B(...) is run against PyTorch too, E(...) names
something PyTorch has not (error_inputs.py explains both). EXEMPT: public callables with no bad input."""
from error_inputs import HOST, B, ix, z
from error_inputs_api import E


def _completed_future(l):
    f = l.L.futures.Future()
    f.set_result(1)
    return f


CASES = [
    B("nextafter of int64 tensors", lambda d, l: l.L.nextafter(ix(d, l, [1, 2]), ix(d, l, [3, 4])),
      NotImplementedError, r"not implemented for 'Long'", devices=HOST),
    B("nextafter of a number", lambda d, l: l.L.nextafter(z(d, l, 2), 2.0), TypeError,
      r"argument 'other' \(position 2\) must be Tensor, not float"),
    B("Tensor.nextafter of int64 tensors", lambda d, l: ix(d, l, [1, 2]).nextafter(ix(d, l, [3, 4])),
      NotImplementedError, r"not implemented for 'Long'", devices=HOST),
    B("Tensor.nextafter_ of int64 tensors", lambda d, l: ix(d, l, [1, 2]).nextafter_(ix(d, l, [3, 4])),
      NotImplementedError, r"not implemented for 'Long'", devices=HOST),
    B("Future.set_result of a completed future", lambda d, l: _completed_future(l).set_result(2), RuntimeError,
      r"can only be marked completed once"),
    B("Stream of an unknown device", lambda d, l: l.L.Stream("tpu"), RuntimeError,
      r"device type at start of device string: tpu|unknown device 'tpu'"),
    B("get_device_module of an int", lambda d, l: l.L.get_device_module(3), RuntimeError,
      r"Invalid value of device '3', expect torch.device, str, or None"),
    B("get_device_module of the meta device", lambda d, l: l.L.get_device_module("meta"), RuntimeError,
      r"Device 'meta' does not have a corresponding module registered as 'torch.meta'"),
    E("Tensor.materialize of a tensor that is not an uninitialized parameter",
      lambda d, l: z(d, l, 2).materialize((3,)), RuntimeError, r"not an uninitialized parameter or buffer"),
]
EXEMPT = {}
