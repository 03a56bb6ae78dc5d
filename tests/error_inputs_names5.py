"""Error cases of the PyTorch names added for ultralytics, fastai, open_clip and thop (torch.TensorType,
nn.FractionalMaxPool2d/3d, the layout= of Tensor.new_*): B(...) is run against PyTorch too, E(...) names something
gpumemnet refuses where PyTorch has it (error_inputs.py explains both). EXEMPT: public callables with no bad
input."""
from error_inputs import B, z
from error_inputs_api import E


def _batched_bad(d, l):
    """grad(y, x, g, is_grads_batched=True) with g of y's own shape: no batch dim in front."""
    x = z(d, l, 2).requires_grad_()
    return l.L.autograd.grad(x * 2, x, z(d, l, 2), is_grads_batched=True)


CASES = [
    B("TensorType has no constructor", lambda d, l: l.L.TensorType(), TypeError, r"No constructor defined",
      devices=("cpu",)),
    B("DeviceObjType has no constructor", lambda d, l: l.L.DeviceObjType(), TypeError, r"No constructor defined",
      devices=("cpu",)),
    B("mse_loss weight of another shape than input",
      lambda d, l: l.F.mse_loss(z(d, l, 3), z(d, l, 3), weight=z(d, l, 2)), ValueError,
      r"Weights and input must have the same size"),
    B("cosine_similarity of two int64 tensors", lambda d, l: l.F.cosine_similarity(z(d, l, 1, 2, dtype="int64"),
                                                                                 z(d, l, 1, 2, dtype="int64")),
      RuntimeError, r"expected common dtype to be floating point"),
    B("grad is_grads_batched with a grad_output without the batch dim", _batched_bad, RuntimeError,
      r"is_grads_batched=True", devices=("cpu",)),
    E("FractionalMaxPool2d is not in gpumemnet yet", lambda d, l: l.nn.FractionalMaxPool2d(2, output_size=3),
      NotImplementedError, r"torch.nn.FractionalMaxPool2d is a PyTorch name gpumemnet does not have yet"),
    E("FractionalMaxPool3d is not in gpumemnet yet", lambda d, l: l.nn.FractionalMaxPool3d(2, output_ratio=0.5),
      NotImplementedError, r"torch.nn.FractionalMaxPool3d is a PyTorch name gpumemnet does not have yet"),
    B("Tensor.new_zeros with a layout that is not a layout", lambda d, l: z(d, l, 2).new_zeros(2, layout="strided"),
      TypeError, r"argument 'layout' must be torch.layout, not str"),
    B("Tensor.new_full with a layout that is not a layout",
      lambda d, l: z(d, l, 2).new_full((2,), 1.0, layout="strided"), TypeError,
      r"argument 'layout' must be torch.layout, not str"),
    # the autocast state functions (PyTorch's autocast.__enter__ calls them; scripts call them by hand)
    B("set_autocast_enabled of an unknown device type", lambda d, l: l.L.set_autocast_enabled("foo", True),
      RuntimeError, r"device type at start of device string: foo", devices=("cpu",)),
    B("set_autocast_enabled with a str flag", lambda d, l: l.L.set_autocast_enabled("cpu", "x"), TypeError,
      r"argument 'enabled' .*must be bool, not str", devices=("cpu",)),
    B("set_autocast_cpu_enabled with a str flag", lambda d, l: l.L.set_autocast_cpu_enabled("x"), TypeError,
      r"enabled must be a bool \(got str\)", devices=("cpu",)),
    B("set_autocast_cache_enabled with None", lambda d, l: l.L.set_autocast_cache_enabled(None), TypeError,
      r"enabled must be a bool \(got NoneType\)", devices=("cpu",)),
    B("set_autocast_dtype with a str dtype", lambda d, l: l.L.set_autocast_dtype("cpu", "x"), TypeError,
      r"set_autocast_dtype\(\): argument 'dtype' .*must be torch.dtype, not str", devices=("cpu",)),
    B("set_autocast_cpu_dtype with a str dtype", lambda d, l: l.L.set_autocast_cpu_dtype("x"), TypeError,
      r"dtype", devices=("cpu",)),
    B("set_autocast_gpu_dtype with an int dtype", lambda d, l: l.L.set_autocast_gpu_dtype(3), TypeError,
      r"dtype", devices=("cpu",)),
]
_NO_ARGS = "takes no arguments: there is no bad input to give"
EXEMPT = {"gm.autocast_decrement_nesting": _NO_ARGS, "gm.autocast_increment_nesting": _NO_ARGS,
          "gm.clear_autocast_cache": _NO_ARGS, "gm.is_autocast_cache_enabled": _NO_ARGS}
