"""The rest of the error table: the public callables error_inputs.py's hand-written groups do not reach
(test_error_coverage.py lists them mechanically), written as families, one bad input applied to every op it fits:
shapes that do not broadcast, dims out of range, negative sizes, in-place writes through overlapping views,
mixed devices, wrong argument types, each module's and optimizer's and scheduler's own range checks, save/load of
objects that contain themselves. Each case is also run against PyTorch (B: both libraries) unless it names
something PyTorch has not (E: gpumemnet only). error_inputs.py adds API_CASES to its CASES."""
import os
import tempfile

from error_inputs import GM, HOST, B, ErrorInput, ix, z


def E(name, call, exc, pattern, devices=None):
    """A case for gpumemnet alone, written as call(dev, lib) like the others."""
    return ErrorInput(name, lambda d: call(d, GM), exc, pattern, devices=devices)


def other(dev):
    """A device other than dev: the second operand of a mixed-device call."""
    return "cpu" if dev == "meta" else "meta"


BROADCAST = r"\(2, 3\).*\(4,\)|\(4,\).*\(2, 3\)|size of tensor a \(3\) must match"
BINARY_GM = ["add", "sub", "mul", "div", "divide", "true_divide", "maximum", "minimum", "pow", "logical_and",
             "logical_or", "logical_xor", "subtract", "multiply"]
BINARY_TENSOR = BINARY_GM[:12] + ["eq", "ne", "lt", "le", "gt", "ge", "sub_", "div_"]
SHAPES = ([B(f"{op} shapes do not broadcast", lambda d, l, op=op: getattr(l.L, op)(z(d, l, 2, 3), z(d, l, 4)),
             ValueError, BROADCAST) for op in BINARY_GM]
          + [B(f"Tensor.{op} shapes do not broadcast", lambda d, l, op=op: getattr(z(d, l, 2, 3), op)(z(d, l, 4)),
               ValueError, BROADCAST) for op in BINARY_TENSOR]
          + [B("isclose shapes do not broadcast", lambda d, l: l.L.isclose(z(d, l, 2, 3), z(d, l, 4)), ValueError,
               BROADCAST),
             B("Tensor.isclose shapes do not broadcast", lambda d, l: z(d, l, 2, 3).isclose(z(d, l, 4)), ValueError,
               BROADCAST),
             B("Tensor.allclose shapes do not broadcast", lambda d, l: z(d, l, 2, 3).allclose(z(d, l, 4)),
               ValueError, BROADCAST, devices=HOST),
             B("where shapes do not broadcast", lambda d, l: l.L.where(z(d, l, 2, 3, dtype="bool"), z(d, l, 4),
               z(d, l, 2, 3)), ValueError, BROADCAST),
             B("Tensor.where shapes do not broadcast", lambda d, l: z(d, l, 2, 3).where(z(d, l, 4, dtype="bool"),
               0.0), ValueError, BROADCAST),
             B("Tensor.masked_fill mask does not broadcast", lambda d, l: z(d, l, 2, 3).masked_fill(
               z(d, l, 4, dtype="bool"), 1.0), ValueError, BROADCAST),
             B("Tensor.masked_fill_ mask does not broadcast", lambda d, l: z(d, l, 2, 3).masked_fill_(
               z(d, l, 4, dtype="bool"), 1.0), ValueError, BROADCAST),
             B("Tensor.copy_ source does not broadcast", lambda d, l: z(d, l, 2, 3).copy_(z(d, l, 4)), ValueError,
               BROADCAST),
             B("Tensor.expand_as a smaller tensor", lambda d, l: z(d, l, 2, 3).expand_as(z(d, l, 2, 2)), ValueError,
               r"expand.*\(2, 3\).*\(2, 2\)"),
             B("Tensor.reshape_as a different element count", lambda d, l: z(d, l, 2, 3).reshape_as(z(d, l, 4)),
               ValueError, r"\(2, 3\).*\(4,\)|shape '\[4\]' is invalid"),
             B("Tensor.view_as a different element count", lambda d, l: z(d, l, 2, 3).view_as(z(d, l, 4)),
               ValueError, r"\(2, 3\).*\(4,\)|shape '\[4\]' is invalid"),
             B("Tensor.take_along_dim index of another rank", lambda d, l: z(d, l, 2, 3).take_along_dim(
               z(d, l, 2, dtype="int64"), dim=1), RuntimeError, r"take_along_dim"),
             B("Tensor.repeat with fewer sizes than dims", lambda d, l: z(d, l, 2, 3).repeat(2), RuntimeError,
               r"repeat"),
             B("Tensor.mm inner sizes differ", lambda d, l: z(d, l, 2, 3).mm(z(d, l, 4, 5)), ValueError,
               r"\(2, 3\).*\(4, 5\)"),
             B("Tensor.matmul inner sizes differ", lambda d, l: z(d, l, 2, 3).matmul(z(d, l, 4, 5)), ValueError,
               r"\(2, 3\).*\(4, 5\)"),
             B("matmul inner sizes differ (function)", lambda d, l: l.L.matmul(z(d, l, 2, 3), z(d, l, 4, 5)),
               ValueError, r"\(2, 3\).*\(4, 5\)"),
             B("Tensor.t of a 3-D tensor", lambda d, l: z(d, l, 2, 3, 4).t(), ValueError,
               r"t\(\) expects a tensor with <= 2 dimensions"),
             B("Tensor.bmm of 2-D tensors", lambda d, l: z(d, l, 2, 3).bmm(z(d, l, 3, 4)), RuntimeError, r"3-D|3D"),
             B("Tensor.prelu weight of the wrong size", lambda d, l: z(d, l, 1, 3, 2, 2).prelu(z(d, l, 2)),
               ValueError, r"parameter numbers = 2 and channel size = 3"),
             B("hstack of nothing", lambda d, l: l.L.hstack([]), ValueError, r"non-empty"),
             B("vstack of nothing", lambda d, l: l.L.vstack([]), ValueError, r"non-empty"),
             B("Tensor.fill_ with a 1-element 1-D tensor", lambda d, l: z(d, l, 3).fill_(z(d, l, 2)), ValueError,
               r"0-dim|0-d")]
          )

DIM = r"out of range"
DIM_TENSOR = ["all", "any", "amax", "amin", "argmin", "argsort", "max", "min", "prod", "softmax",
              "log_softmax", "sort", "std", "var", "squeeze", "unsqueeze", "unbind", "size"]
DIM_GM = ["amax", "amin", "argmax", "argmin", "max", "min", "mean", "sum", "std", "var", "log_softmax", "squeeze",
          "unsqueeze"]
DIMS = ([B(f"Tensor.{op} dim out of range", lambda d, l, op=op: getattr(z(d, l, 2, 3), op)(5), IndexError, DIM)
         for op in DIM_TENSOR]
        + [B(f"{op} dim out of range", lambda d, l, op=op: getattr(l.L, op)(z(d, l, 2, 3), 5), IndexError, DIM)
           for op in DIM_GM]
        + [B("Tensor.select index out of range", lambda d, l: z(d, l, 2, 3).select(1, 3), IndexError,
             r"index 3 is out of bounds for dimension 1 with size 3"),
           B("Tensor.movedim dim out of range", lambda d, l: z(d, l, 2, 3).movedim(0, 5), IndexError, DIM),
           B("Tensor.swapaxes dim out of range", lambda d, l: z(d, l, 2, 3).swapaxes(0, 5), IndexError, DIM),
           B("Tensor.swapdims dim out of range", lambda d, l: z(d, l, 2, 3).swapdims(0, 5), IndexError, DIM),
           B("Tensor.split dim out of range", lambda d, l: z(d, l, 2, 3).split(1, 5), IndexError, DIM),
           B("Tensor.tensor_split dim out of range", lambda d, l: z(d, l, 2, 3).tensor_split(2, 5), IndexError, DIM),
           B("Tensor.index_select index out of range", lambda d, l: z(d, l, 2, 3).index_select(1, ix(d, l, [3])),
             RuntimeError, r"out of", devices=("cpu",)),
           B("Tensor.index_select dim out of range", lambda d, l: z(d, l, 2, 3).index_select(5, ix(d, l, [0])),
             IndexError, DIM),
           B("Tensor.topk k above the size", lambda d, l: z(d, l, 2, 3).topk(4), RuntimeError, r"k .*out of range|k"),
           B("Tensor.msort with an extra argument", lambda d, l: z(d, l, 2).msort(0), TypeError, r"argument|takes"),
           B("Tensor.norm dim out of range", lambda d, l: z(d, l, 2, 3).norm(dim=5), IndexError, DIM),
           B("Tensor.diff dim out of range", lambda d, l: z(d, l, 2, 3).diff(dim=5), IndexError, DIM),
           B("transpose dim out of range (function)", lambda d, l: l.L.transpose(z(d, l, 2, 3), 0, 5), IndexError,
             DIM),
           B("flatten dim out of range (function)", lambda d, l: l.L.flatten(z(d, l, 2, 3), 5), IndexError, DIM),
           B("narrow past the end (function)", lambda d, l: l.L.narrow(z(d, l, 4), 0, 2, 3), RuntimeError,
             r"start \(2\) \+ length \(3\) exceeds dimension size \(4\)"),
           B("permute with too few dims (function)", lambda d, l: l.L.permute(z(d, l, 2, 3), (0,)), ValueError,
             r"permute"),
           B("reshape with two -1 (function)", lambda d, l: l.L.reshape(z(d, l, 2, 3), (-1, -1)), ValueError,
             r"only one dimension can be -1"),
           B("chunk into zero (function)", lambda d, l: l.L.chunk(z(d, l, 4), 0), RuntimeError, r"chunk"),
           B("split dim out of range (function)", lambda d, l: l.L.split(z(d, l, 2, 3), 1, 5), IndexError, DIM)]
        )

NEG = r"non-negative|negative"
CREATION = ([B(f"{op} with a negative size", lambda d, l, op=op: getattr(l.L, op)(2, -1, device=d), ValueError,
               r"sizes must be non-negative, got -1 in dimension 1|negative dimension")
             for op in ("empty", "zeros", "ones", "rand", "randn")]
            + [B(f"Tensor.{op} with a negative size", lambda d, l, op=op: getattr(z(d, l, 2), op)((2, -1)),
                 ValueError, r"sizes must be non-negative, got -1 in dimension 1|negative dimension")
               for op in ("new_empty", "new_zeros", "new_ones")]
            + [B(f"{op} of a list", lambda d, l, op=op: getattr(l.L, op)([1.0, 2.0]), TypeError, r"Tensor")
               for op in ("empty_like", "zeros_like", "ones_like", "rand_like", "randn_like")]
            + [B("Tensor.new_full with a negative size", lambda d, l: z(d, l, 2).new_full((2, -1), 1.0), ValueError,
                 r"sizes must be non-negative|negative dimension"),
               B("Tensor.new_tensor of a ragged list", lambda d, l: z(d, l, 2).new_tensor([[1.0], [2.0, 3.0]]),
                 ValueError, r"(rectangular|inhomogeneous|expected sequence of length)"),
               B("as_tensor of a ragged list", lambda d, l: l.L.as_tensor([[1.0], [2.0, 3.0]], device=d), ValueError,
                 r"(rectangular|inhomogeneous|expected sequence of length)"),
               B("full_like of a list", lambda d, l: l.L.full_like([1.0], 2.0), TypeError, r"Tensor"),
               B("eye with a negative size", lambda d, l: l.L.eye(-1, device=d), RuntimeError, r"n must be .*-1|-1"),
               B("randperm of a negative count", lambda d, l: l.L.randperm(-1, device=d), RuntimeError,
                 r"n must be .*-1"),
               B("linspace of negative steps", lambda d, l: l.L.linspace(0, 1, -1, device=d), RuntimeError,
                 r"number of steps must be non-negative"),
               B("logspace of negative steps", lambda d, l: l.L.logspace(0, 1, -1, device=d), RuntimeError,
                 r"number of steps must be non-negative"),
               B("scalar_tensor of a string", lambda d, l: l.L.scalar_tensor("a", device=d), TypeError, r"Number|str"),
               B("from_numpy of a list", lambda d, l: l.L.from_numpy([1.0]), TypeError,
                 r"expected a numpy.ndarray, got list"),
               B("numel of a list", lambda d, l: l.L.numel([1.0]), TypeError, r"Tensor"),
               B("is_floating_point of a list", lambda d, l: l.L.is_floating_point([1.0]), TypeError, r"Tensor"),
               B("set_default_dtype int64", lambda d, l: l.L.set_default_dtype(l.L.int64), TypeError,
                 r"only floating-point types are supported as the default type"),
               B("set_num_threads zero", lambda d, l: l.L.set_num_threads(0), ValueError,
                 r"(expected a positive number of threads|must be positive), got 0"),
               B("manual_seed of a string", lambda d, l: l.L.manual_seed("a"), TypeError, r"int|str"),
               B("set_rng_state of a float tensor", lambda d, l: l.L.set_rng_state(l.L.zeros(3)), TypeError,
                 r"a uint8 tensor of 16 bytes|ByteTensor"),
               B("Generator on an unknown device", lambda d, l: l.L.Generator("tpu"), ValueError,
                 r"unknown device 'tpu'|Expected one of"),
               B("device of an unknown type", lambda d, l: l.L.device("tpu"), ValueError,
                 r"unknown device 'tpu'|Expected one of"),
               B("finfo of an integer dtype", lambda d, l: l.L.finfo(l.L.int64), TypeError, r"floating|float"),
               B("iinfo of a floating dtype", lambda d, l: l.L.iinfo(l.L.float32), TypeError, r"integer|int"),
               B("autocast on an unknown device", lambda d, l: l.L.autocast("tpu"), ValueError, r"tpu")]
            )

# Writes through overlapping views: an expanded tensor has several elements at one address, so an in-place result
# would depend on the order of the writes. PyTorch refuses; so does gpumemnet, before any write.
OVERLAP = r"\(shape \(3,\)\) is a broadcast view in which several elements share one memory location"
OVERLAP_OPS = {"add_": (1.0,), "sub_": (1.0,), "mul_": (2.0,), "div_": (2.0,), "clamp_": (0.0, 1.0),
               "relu_": (), "sigmoid_": (), "tanh_": (), "uniform_": (),
               "normal_": (), "bernoulli_": (0.5,), "copy_": None,
               # pointwise math (_core/tensor_math.py)
               **{op + "_": () for op in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "erf", "erfc",
                                         "log1p", "expm1", "log2", "log10", "exp2", "reciprocal", "exp", "log",
                                         "sqrt", "rsqrt", "abs", "neg", "negative", "floor", "ceil")},
               "pow_": (2.0,), "fmod_": (2.0,), "remainder_": (2.0,), "floor_divide_": (2.0,)}
# Not here: fill_ and zero_ (every element gets the same value, so PyTorch allows them) and masked_fill_ (allowed
# by PyTorch; gpumemnet refuses it as it refuses every other write through an expanded view).
INPLACE = ([B(f"Tensor.{op} through an expanded view", lambda d, l, op=op, a=a: getattr(z(d, l, 1).expand(3), op)(*a),
              RuntimeError, OVERLAP) for op, a in OVERLAP_OPS.items() if a is not None]
           + [B("Tensor.copy_ through an expanded view", lambda d, l: z(d, l, 1).expand(3).copy_(z(d, l, 3)),
                RuntimeError, OVERLAP),
              B("relu_ through an expanded view (function)", lambda d, l: l.L.relu_(z(d, l, 1).expand(3)),
                RuntimeError, OVERLAP),
              B("sigmoid_ through an expanded view (function)", lambda d, l: l.L.sigmoid_(z(d, l, 1).expand(3)),
                RuntimeError, OVERLAP),
              B("tanh_ through an expanded view (function)", lambda d, l: l.L.tanh_(z(d, l, 1).expand(3)),
                RuntimeError, OVERLAP),
              B("F.relu_ through an expanded view", lambda d, l: l.F.relu_(z(d, l, 1).expand(3)), RuntimeError,
                OVERLAP),
              B("F.elu_ through an expanded view", lambda d, l: l.F.elu_(z(d, l, 1).expand(3)), RuntimeError,
                OVERLAP),
              B("F.leaky_relu_ through an expanded view", lambda d, l: l.F.leaky_relu_(z(d, l, 1).expand(3)),
                RuntimeError, OVERLAP),
              B("F.hardtanh_ through an expanded view", lambda d, l: l.F.hardtanh_(z(d, l, 1).expand(3)),
                RuntimeError, OVERLAP)]
           )

# Unary ops given something that is not a tensor: the argument is named, with the type it got.
UNARY_GM = ["abs", "exp", "log", "sqrt", "round", "sigmoid", "tanh", "relu", "clamp", "clip"]
UNARY_TENSOR = ["abs", "exp", "log", "sqrt", "rsqrt", "ceil", "floor", "round", "trunc", "fix", "sign", "neg",
                "square", "sigmoid", "tanh", "relu", "isfinite", "isinf", "isnan", "logical_not",
                "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh", "erf",
                "erfc", "log1p", "expm1", "log2", "log10", "exp2", "reciprocal"]
UNARY_F = ["relu", "relu6", "silu", "mish", "gelu", "elu", "softplus", "hardsigmoid",
           "hardswish"]
UNARY = ([B(f"{op} of a string", lambda d, l, op=op: getattr(l.L, op)("x"), TypeError, r"Tensor|str")
          for op in UNARY_GM]
         + [B(f"Tensor.{op} with an extra argument", lambda d, l, op=op: getattr(z(d, l, 2), op)(z(d, l, 2)),
              TypeError, r"argument|takes|decimals must be an int")
            for op in UNARY_TENSOR]
         + [B(f"F.{op} of a string", lambda d, l, op=op: getattr(l.F, op)("x"), TypeError, r"Tensor|str")
            for op in UNARY_F]
         + [E(f"F.{op} of a string", lambda d, l, op=op: getattr(l.F, op)("x"), TypeError, r"input must be a Tensor")
            for op in ("sigmoid", "tanh")]  # PyTorch's deprecated F.sigmoid calls input.sigmoid(): AttributeError
         + [B("Tensor.clamp with neither min nor max", lambda d, l: z(d, l, 2).clamp(), ValueError,
              r"(?i)at least one of 'min' or 'max' must not be None"),
            B("Tensor.clip with neither min nor max", lambda d, l: z(d, l, 2).clip(), ValueError,
              r"(?i)at least one of 'min' or 'max' must not be None"),
            B("Tensor.clamp_ with neither min nor max", lambda d, l: z(d, l, 2).clamp_(), ValueError,
              r"(?i)at least one of 'min' or 'max' must not be None"),
            B("Tensor.clamp_min of a string", lambda d, l: z(d, l, 2).clamp_min("a"), TypeError, r"str|Number"),
            B("Tensor.clamp_max of a string", lambda d, l: z(d, l, 2).clamp_max("a"), TypeError, r"str|Number"),
            B("Tensor.equal of a list", lambda d, l: z(d, l, 2).equal([0.0, 0.0]), TypeError, r"Tensor"),
            B("Tensor.type_as of a list", lambda d, l: z(d, l, 2).type_as([0.0]), TypeError, r"Tensor|dtype"),
            B("Tensor.masked_fill with a float mask", lambda d, l: z(d, l, 3).masked_fill(z(d, l, 3), 1.0),
              TypeError, r"bool"),
            B("Tensor.where with a float condition", lambda d, l: z(d, l, 3).where(z(d, l, 3), 1.0), TypeError,
              r"bool"),
            B("Tensor.pow of int64 to a negative int", lambda d, l: z(d, l, 3, dtype="int64").pow(-1), RuntimeError,
              r"Integers to negative integer powers are not allowed"),
            B("pow of int64 to a negative int (function)", lambda d, l: l.L.pow(z(d, l, 3, dtype="int64"), -1),
              RuntimeError, r"Integers to negative integer powers are not allowed"),
            B("Tensor.retain_grad of a tensor that needs no grad", lambda d, l: z(d, l, 2).retain_grad(),
              RuntimeError, r"can't retain_grad on Tensor that has requires_grad=False"),
            B("Tensor.size dim out of range", lambda d, l: z(d, l, 2, 3).size(5), IndexError, DIM),
            B("Tensor.uniform_ with from above to", lambda d, l: z(d, l, 3).uniform_(2.0, 1.0), ValueError,
              r"from.*to|2.*1"),
            B("Tensor.normal_ with a negative std", lambda d, l: z(d, l, 3).normal_(0.0, -1.0), ValueError,
              r"std"),
            B("Tensor.bernoulli with p above 1", lambda d, l: z(d, l, 3).bernoulli(p=2.0), RuntimeError,
              r"p.*\[0, 1\]|0 <= p <= 1"),
            B("bernoulli of probabilities above 1", lambda d, l: l.L.bernoulli(l.L.full((3,), 2.0, device=d)),
              RuntimeError, r"\[0, 1\]|0 <= p <= 1", devices=HOST),
            B("Tensor.index_select with float indices", lambda d, l: z(d, l, 3).index_select(0, z(d, l, 2)),
              IndexError, r"must be long, int, byte or bool tensors, got float32"),
            B("Tensor.mul of a mixed-device tensor", lambda d, l: z(d, l, 3).mul(l.L.zeros(3, device=other(d))),
              RuntimeError, r"same device|device"),
            B("add of a mixed-device tensor (function)", lambda d, l: l.L.add(z(d, l, 3),
              l.L.zeros(3, device=other(d))), RuntimeError, r"same device|device"),
            B("Tensor.add of a mixed-device tensor", lambda d, l: z(d, l, 3).add(l.L.zeros(3, device=other(d))),
              RuntimeError, r"same device|device"),
            E("mm of a mixed-device tensor", lambda d, l: l.L.mm(z(d, l, 2, 3), l.L.zeros(3, 2, device=other(d))),
              RuntimeError, r"same device|device"),
            E("F.linear with a mixed-device weight", lambda d, l: l.F.linear(z(d, l, 2, 3),
              l.L.zeros(4, 3, device=other(d))), RuntimeError, r"same device|device"),
            E("F.conv2d with a mixed-device weight", lambda d, l: l.F.conv2d(z(d, l, 1, 1, 4, 4),
              l.L.zeros(1, 1, 3, 3, device=other(d))), RuntimeError, r"same device|device")]
         )

# Modules: each one's constructor check, or its forward given an input of the wrong rank or type.
RANK = r"expected.*(input|D)|dimension|rank|got (shape|input)"
PADS = ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
        "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
        "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]
ACTIVATIONS = ["ReLU", "ELU", "GELU", "Hardsigmoid", "Hardswish", "Mish", "ReLU6", "SiLU", "Sigmoid", "Tanh",
               "Softplus",
               "LeakyReLU"]
LOSSES = ["BCELoss", "BCEWithLogitsLoss", "HuberLoss", "L1Loss", "MSELoss", "SmoothL1Loss", "KLDivLoss"]


def _pad(l, name, dev):
    const = name.startswith("Constant")
    return getattr(l.nn, name)(1, 0.0) if const else getattr(l.nn, name)(1)


MODULES = ([B(f"nn.{m} on a 0-d input", lambda d, l, m=m: _pad(l, m, d)(z(d, l)), RuntimeError if m[:8] not in (
              "Circular") else ValueError, r"expected \dD or \dD input \(got 0D input|Padding length should be less "
              r"than or equal to two times the input dimension|not supported for 0D input") for m in PADS]
           + [B(f"nn.{m} of a string", lambda d, l, m=m: getattr(l.nn, m)()("x"), TypeError, r"Tensor|str")
              for m in ACTIVATIONS]
           + [B(f"nn.{m} shapes differ", lambda d, l, m=m: getattr(l.nn, m)()(z(d, l, 2, 3), z(d, l, 3, 2)),
                ValueError, r"\(3, 2\).*\(2, 3\)|\(2, 3\).*\(3, 2\)|size of tensor a") for m in LOSSES]
           + [B("nn.Hardtanh min above max", lambda d, l: l.nn.Hardtanh(2.0, 1.0), AssertionError,
                r"max_val \(1.0\) must be greater than min_val \(2.0\)"),
              B("nn.Softmax dim out of range", lambda d, l: l.nn.Softmax(dim=5)(z(d, l, 2, 3)), IndexError, DIM),
              B("nn.LogSoftmax dim out of range", lambda d, l: l.nn.LogSoftmax(dim=5)(z(d, l, 2, 3)), IndexError,
                DIM),
              B("nn.Softmax2d on a 2-D input", lambda d, l: l.nn.Softmax2d()(z(d, l, 2, 3)), ValueError,
                r"3D or 4D|3-D or 4-D"),
              B("nn.AdaptiveAvgPool1d negative size", lambda d, l: l.nn.AdaptiveAvgPool1d(-1)(z(d, l, 1, 2, 4)),
                ValueError, NEG),
              B("nn.AdaptiveMaxPool1d negative size", lambda d, l: l.nn.AdaptiveMaxPool1d(-1)(z(d, l, 1, 2, 4)),
                ValueError, NEG),
              B("nn.AdaptiveAvgPool2d negative size", lambda d, l: l.nn.AdaptiveAvgPool2d(-1)(z(d, l, 1, 2, 4, 4)),
                ValueError, NEG),
              B("nn.AdaptiveMaxPool2d negative size", lambda d, l: l.nn.AdaptiveMaxPool2d(-1)(z(d, l, 1, 2, 4, 4)),
                ValueError, NEG),
              B("nn.MaxPool1d zero kernel", lambda d, l: l.nn.MaxPool1d(0)(z(d, l, 1, 2, 4)), ValueError,
                r"kernel_size must be (positive|greater than zero)"),
              B("nn.MaxPool2d zero kernel", lambda d, l: l.nn.MaxPool2d(0)(z(d, l, 1, 2, 4, 4)), ValueError,
                r"kernel_size must be (positive|greater than zero)"),
              B("nn.AvgPool1d zero kernel", lambda d, l: l.nn.AvgPool1d(0)(z(d, l, 1, 2, 4)), ValueError,
                r"kernel_size must be (positive|greater than zero)"),
              B("nn.AvgPool2d zero kernel", lambda d, l: l.nn.AvgPool2d(0)(z(d, l, 1, 2, 4, 4)), ValueError,
                r"kernel_size must be (positive|greater than zero)"),
              E("nn.GlobalAvgPool2d on a 2-D input", lambda d, l: l.nn.GlobalAvgPool2d()(z(d, l, 2, 3)), ValueError,
                RANK),
              E("nn.GlobalMaxPool2d on a 2-D input", lambda d, l: l.nn.GlobalMaxPool2d()(z(d, l, 2, 3)), ValueError,
                RANK),
              E("F.global_avg_pool2d on a 2-D input", lambda d, l: l.F.global_avg_pool2d(z(d, l, 2, 3)), ValueError,
                RANK),
              E("F.global_max_pool2d on a 2-D input", lambda d, l: l.F.global_max_pool2d(z(d, l, 2, 3)), ValueError,
                RANK),
              B("nn.BatchNorm1d on a 4-D input", lambda d, l: l.nn.BatchNorm1d(3)(z(d, l, 2, 3, 2, 2)), ValueError,
                r"expected 2D or 3D input \(got 4D input"),
              B("nn.BatchNorm3d on a 2-D input", lambda d, l: l.nn.BatchNorm3d(3)(z(d, l, 2, 3)), ValueError,
                r"expected 5D input \(got 2D input"),
              B("nn.SyncBatchNorm on a 1-D input", lambda d, l: l.nn.SyncBatchNorm(3)(z(d, l, 3)), ValueError,
                r"expected at least 2D input \(got 1D input"),
              B("nn.InstanceNorm1d on a 4-D input", lambda d, l: l.nn.InstanceNorm1d(3)(z(d, l, 2, 3, 2, 2)),
                ValueError, r"expected 2D or 3D input \(got 4D input"),
              B("nn.InstanceNorm2d on a 2-D input", lambda d, l: l.nn.InstanceNorm2d(3)(z(d, l, 2, 3)), ValueError,
                r"expected 3D or 4D input \(got 2D input"),
              B("nn.InstanceNorm3d on a 2-D input", lambda d, l: l.nn.InstanceNorm3d(3)(z(d, l, 2, 3)), ValueError,
                r"expected 4D or 5D input \(got 2D input"),
              B("nn.GroupNorm groups do not divide channels", lambda d, l: l.nn.GroupNorm(4, 6), ValueError,
                r"num_channels \(6\) must be divisible by num_groups \(4\)"),
              B("nn.LayerNorm shape does not end the input", lambda d, l: l.nn.LayerNorm(5, device=d)(z(d, l, 2, 3)),
                RuntimeError, r"normalized_shape=\[5\], expected input with shape \[\*, 5\]"),
              B("nn.ConvTranspose2d in_channels not divisible by groups", lambda d, l: l.nn.ConvTranspose2d(
                3, 4, 3, groups=2), ValueError, r"in_channels.* must be divisible by groups"),
              B("nn.Embedding negative size", lambda d, l: l.nn.Embedding(-1, 3), ValueError, NEG),
              B("nn.PReLU weight of the wrong size", lambda d, l: l.nn.PReLU(2, device=d)(z(d, l, 1, 3, 2, 2)),
                ValueError, r"parameter numbers = 2 and channel size = 3"),
              B("nn.Flatten start after end", lambda d, l: l.nn.Flatten(2, 1)(z(d, l, 2, 3, 4)), ValueError,
                r"start_dim 2 comes after end_dim 1|start_dim cannot come after end_dim"),
              B("nn.PixelShuffle channels not divisible", lambda d, l: l.nn.PixelShuffle(2)(z(d, l, 1, 3, 2, 2)),
                RuntimeError, r"divisible by the square of upscale_factor"),
              B("nn.PixelUnshuffle size not divisible", lambda d, l: l.nn.PixelUnshuffle(2)(z(d, l, 1, 1, 3, 3)),
                RuntimeError, r"divisible by downscale_factor"),
              B("F.pixel_unshuffle size not divisible", lambda d, l: l.F.pixel_unshuffle(z(d, l, 1, 1, 3, 3), 2),
                RuntimeError, r"divisible by downscale_factor"),
              B("nn.Upsample without size or scale", lambda d, l: l.nn.Upsample()(z(d, l, 1, 1, 4, 4)), ValueError,
                r"either size or scale_factor should be defined"),
              B("nn.UpsamplingNearest2d without size or scale", lambda d, l: l.nn.UpsamplingNearest2d()(
                z(d, l, 1, 1, 4, 4)), ValueError, r"either size or scale_factor should be defined"),
              B("nn.UpsamplingBilinear2d without size or scale", lambda d, l: l.nn.UpsamplingBilinear2d()(
                z(d, l, 1, 1, 4, 4)), ValueError, r"either size or scale_factor should be defined"),
              E("nn.Parameter of a list", lambda d, l: l.nn.Parameter([1.0]), TypeError, r"Tensor|list"),
              B("nn.ModuleList of a non-module", lambda d, l: l.nn.ModuleList([3]), TypeError,
                r"int is not a Module subclass"),
              B("nn.ModuleDict of a non-module", lambda d, l: l.nn.ModuleDict({"a": 3}), TypeError,
                r"int is not a Module subclass"),
              E("nn.DataParallel of a non-module", lambda d, l: l.nn.DataParallel(3), TypeError, r"Module|int"),
              B("nn.CrossEntropyLoss float target of the wrong shape", lambda d, l: l.nn.CrossEntropyLoss()(
                z(d, l, 2, 3), z(d, l, 2, 4)), TypeError, r"target must be an int64 tensor of class indices"),
              B("nn.NLLLoss float class indices", lambda d, l: l.nn.NLLLoss()(z(d, l, 2, 3), z(d, l, 2)), TypeError,
                r"int64|Long")]
           + [B(f"nn.{m} probability above 1", lambda d, l, m=m: getattr(l.nn, m)(1.5), ValueError,
                r"dropout probability has to be between 0 and 1, but got 1.5")
              for m in ("AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout")]
           + [B(f"F.{f} probability above 1", lambda d, l, f=f, r=r: getattr(l.F, f)(z(d, l, *(2,) * r), 1.5),
                ValueError, r"dropout probability has to be between 0 and 1, but got 1.5")
              for f, r in (("alpha_dropout", 2), ("dropout1d", 3), ("dropout2d", 4), ("dropout3d", 5),
                           ("feature_alpha_dropout", 4))]
           + [B("F.adaptive_avg_pool1d negative size", lambda d, l: l.F.adaptive_avg_pool1d(z(d, l, 1, 2, 4), -1),
                ValueError, NEG),
              B("F.adaptive_max_pool1d negative size", lambda d, l: l.F.adaptive_max_pool1d(z(d, l, 1, 2, 4), -1),
                ValueError, NEG),
              B("F.binary_cross_entropy_with_logits shapes differ", lambda d, l:
                l.F.binary_cross_entropy_with_logits(z(d, l, 2, 3), z(d, l, 3, 2)), ValueError, r"\(3, 2\)"),
              B("F.kl_div shapes differ", lambda d, l: l.F.kl_div(z(d, l, 2, 3), z(d, l, 3, 2)), ValueError,
                r"\(3, 2\)|size of tensor a"),
              B("F.log_softmax dim out of range", lambda d, l: l.F.log_softmax(z(d, l, 2, 3), dim=5), IndexError,
                DIM),
              B("F.gelu unknown approximation", lambda d, l: l.F.gelu(z(d, l, 3), approximate="fast"), ValueError,
                r"approximate.*fast|fast")]
           )

OPTIM = [B(f"{opt} beta above 1", lambda d, l, opt=opt: getattr(l.L.optim, opt)([l.nn.Parameter(z(d, l, 2))],
                                                                               betas=(1.5, 0.9)),
           ValueError, r"Invalid beta parameter at index 0") for opt in ("Adamax", "NAdam", "RAdam")] + [
         B("AdamW negative weight_decay", lambda d, l: l.L.optim.AdamW([l.nn.Parameter(z(d, l, 2))],
           weight_decay=-0.1), ValueError, r"weight_decay"),
         B("Adagrad negative lr", lambda d, l: l.L.optim.Adagrad([l.nn.Parameter(z(d, l, 2))], lr=-0.1), ValueError,
           r"lr"),
         B("Adadelta rho above 1", lambda d, l: l.L.optim.Adadelta([l.nn.Parameter(z(d, l, 2))], rho=1.5),
           ValueError, r"rho"),
         B("RMSprop negative alpha", lambda d, l: l.L.optim.RMSprop([l.nn.Parameter(z(d, l, 2))], alpha=-0.1),
           ValueError, r"alpha")]

SCHEDULERS = {"ConstantLR": (), "CosineAnnealingLR": (10,), "CosineAnnealingWarmRestarts": (10,),
              "CyclicLR": (0.1, 1.0), "ExponentialLR": (0.9,), "LambdaLR": (lambda e: 1.0,), "LinearLR": (),
              "MultiStepLR": ([1, 2],), "MultiplicativeLR": (lambda e: 1.0,), "OneCycleLR": (1.0, 10),
              "PolynomialLR": (), "ReduceLROnPlateau": (), "SequentialLR": None, "ChainedScheduler": None}
# PyTorch checks the optimizer's type in most schedulers; LambdaLR and MultiplicativeLR reach for
# optimizer.param_groups (AttributeError): there gpumemnet's check is its own (E).
OPTIM += [(E if s in ("LambdaLR", "MultiplicativeLR") else B)(
    f"{s} of a non-optimizer", lambda d, l, s=s, a=a: getattr(l.L.optim.lr_scheduler, s)(3, *a), TypeError,
    r"int is not an Optimizer") for s, a in SCHEDULERS.items() if a is not None]


def _sgd(d, l):
    return l.L.optim.SGD([l.nn.Parameter(z(d, l, 2))], lr=0.1)


OPTIM += [B("SequentialLR with milestones not one fewer than schedulers", lambda d, l: (
            lambda o: l.L.optim.lr_scheduler.SequentialLR(o, [l.L.optim.lr_scheduler.ConstantLR(o)], [1, 2]))(
            _sgd(d, l)), ValueError, r"one more than the number of milestone points"),
          B("ChainedScheduler of schedulers of two optimizers", lambda d, l: l.L.optim.lr_scheduler.ChainedScheduler(
            [l.L.optim.lr_scheduler.ConstantLR(_sgd(d, l)), l.L.optim.lr_scheduler.ConstantLR(_sgd(d, l))]),
            ValueError, r"same optimizer|optimizer")]


def _ds(l, n=6):
    return l.L.utils.data.TensorDataset(l.L.arange(n))


DATA = [B("BatchSampler of batch_size 0", lambda d, l: l.L.utils.data.BatchSampler(range(4), 0, False), ValueError,
          r"batch_size"),
        B("ConcatDataset of nothing", lambda d, l: l.L.utils.data.ConcatDataset([]), AssertionError,
          r"datasets should not be an empty iterable"),
        B("ChainDataset of a map-style dataset", lambda d, l: l.L.utils.data.ChainDataset([_ds(l)]).__len__(),
          AssertionError, r"ChainDataset only supports IterableDataset"),
        B("DataLoader of batch_size 0", lambda d, l: l.L.utils.data.DataLoader(_ds(l), batch_size=0), ValueError,
          r"batch_size"),
        B("DistributedSampler rank beyond the replicas", lambda d, l: l.L.utils.data.DistributedSampler(
          _ds(l), num_replicas=2, rank=5), ValueError, r"Invalid rank 5"),
        B("RandomSampler of num_samples 0", lambda d, l: l.L.utils.data.RandomSampler(_ds(l), num_samples=0),
          ValueError, r"num_samples should be a positive integer value, but got num_samples=0"),
        B("SequentialSampler of an unsized source", lambda d, l: l.L.utils.data.SequentialSampler(3).__len__(),
          TypeError, r"len"),
        B("SubsetRandomSampler of an unsized source", lambda d, l: l.L.utils.data.SubsetRandomSampler(
          3).__len__(), TypeError, r"len"),
        B("Subset index beyond the dataset", lambda d, l: l.L.utils.data.Subset(_ds(l), [9]).__getitem__(0),
          IndexError, r"index 9|out of"),
        B("TensorDataset sizes differ", lambda d, l: l.L.utils.data.TensorDataset(z(d, l, 2), z(d, l, 3)),
          AssertionError, r"Size mismatch between tensors",
          devices=HOST),  # a dataset of meta tensors is refused first: they have no data to load
        B("WeightedRandomSampler of num_samples 0", lambda d, l: l.L.utils.data.WeightedRandomSampler(
          [1.0], num_samples=0), ValueError, r"num_samples should be a positive integer value"),
        B("default_collate of objects", lambda d, l: l.L.utils.data.default_collate([object(), object()]),
          TypeError, r"default_collate: .*object"),
        B("random_split lengths do not add up", lambda d, l: l.L.utils.data.random_split(_ds(l), [3, 4]),
          ValueError, r"Sum of input lengths does not equal the length of the input dataset")]

_TMP = tempfile.gettempdir()


def _self_ref():
    d = {}
    d["self"] = d
    return d


def _deep_file():
    path = os.path.join(_TMP, f"gm-error-inputs-deep-{os.getpid()}.safetensors")
    import struct
    header = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    return path


SAVE_LOAD = [E("save of a dict that contains itself", lambda d, l: l.L.save(_self_ref(), os.path.join(
               _TMP, "gm-error-inputs-self.safetensors")), ValueError, r"contains itself"),
             E("load of a file nested 100,000 levels deep", lambda d, l: l.L.load(_deep_file()), ValueError,
               r"nests too deeply|not a valid"),
             B("load of a missing file", lambda d, l: l.L.load(os.path.join(_TMP, "gm-no-such-dir", "x.pt")),
               FileNotFoundError, r"No such file")]

STARTUP = [B("F.normalize dim out of range", lambda d, l: l.F.normalize(z(d, l, 2, 3), dim=5), IndexError, DIM),
           B("F.cosine_similarity dim out of range", lambda d, l: l.F.cosine_similarity(z(d, l, 2, 3), z(d, l, 2, 3),
             dim=5), IndexError, DIM),
           B("Tensor.flip a dim twice", lambda d, l: z(d, l, 2, 3).flip(1, -1), RuntimeError,
             r"appears multiple times"),
           B("Tensor.roll shifts and dims of different lengths", lambda d, l: z(d, l, 2, 3).roll((1, 2), (0,)),
             RuntimeError, r"shifts and dimensions must align"),
           B("Tensor.gather index of another rank", lambda d, l: z(d, l, 2, 3).gather(1, z(d, l, 2, dtype="int64")),
             RuntimeError, r"same number of dimensions"),
           B("Tensor.gather index out of bounds", lambda d, l: z(d, l, 2, 3).gather(1, ix(d, l, [[0], [5]])),
             RuntimeError, r"index 5 is out of bounds for dimension 1 with size 3", devices=HOST),
           B("set_float32_matmul_precision of a number", lambda d, l: l.L.set_float32_matmul_precision(1),
             RuntimeError, r"expects a str, but got int"),
           B("use_deterministic_algorithms of a string", lambda d, l: l.L.use_deterministic_algorithms("yes"),
             TypeError, r"bool|incompatible")]

# Binary pointwise math given a string, and the in-place forms that take tensors, through an expanded view
MATH = ([B(f"Tensor.{op} of a string", lambda d, l, op=op: getattr(z(d, l, 2), op)("x"), TypeError, r"str|operand")
         for op in ("fmod", "remainder", "floor_divide", "atan2", "arctan2")]
        + [B(f"Tensor.{op} through an expanded view", lambda d, l, op=op: getattr(z(d, l, 1).expand(3), op)(
             *([z(d, l, 3), 0.5] if op == "lerp_" else [z(d, l, 3)] if op == "atan2_" else [z(d, l, 3), z(d, l, 3)])),
             RuntimeError, OVERLAP) for op in ("lerp_", "addcmul_", "addcdiv_", "atan2_")]
        + [B(f"Tensor.{op} of mismatched shapes", lambda d, l, op=op: getattr(z(d, l, 2), op)(
             *([z(d, l, 3), 0.5] if op == "lerp" else [z(d, l, 3), z(d, l, 2)])), RuntimeError,
             r"(?i)broadcast|size of tensor|must match") for op in ("lerp", "addcmul", "addcdiv")])

# Scans, triangles, diagonals, scatters and the value-sized results (_core/tensor_compose.py, tensor_select.py)
META_SIZED = r"(?i)meta"  # PyTorch: no meta kernel; gpumemnet: the size depends on values a meta tensor lacks
COMPOSE = ([B(f"Tensor.{op} dim out of range", lambda d, l, op=op: getattr(z(d, l, 2, 3), op)(5), IndexError, DIM)
            for op in ("cumsum", "cumprod", "cumsum_", "logsumexp", "count_nonzero", "stride")]
           + [B(f"Tensor.{op} of a 1-d tensor", lambda d, l, op=op: getattr(z(d, l, 3), op)(), RuntimeError,
                r"input tensor must have at least 2 dimensions") for op in ("tril", "triu", "tril_", "triu_")]
           + [B(f"Tensor.{op} with an argument", lambda d, l, op=op: getattr(z(d, l, 3), op)(1), TypeError,
                r"takes") for op in ("data_ptr", "storage_offset", "ndimension")]
           + [B(f"Tensor.{op} of a matrix", lambda d, l, op=op: getattr(z(d, l, 2, 2), op)(z(d, l, 2)), RuntimeError,
                r"outer: [Ee]xpected 1-D") for op in ("outer", "ger")]
           + [B(f"Tensor.{op} with a float index", lambda d, l, op=op: getattr(z(d, l, 3), op)(0, z(d, l, 1), 1.0),
                RuntimeError, r"Expected dtype int(32/int)?64 for index") for op in ("scatter", "scatter_")]
           + [B(f"Tensor.{op} with a float index", lambda d, l, op=op: getattr(z(d, l, 3), op)(0, z(d, l, 1),
                z(d, l, 1)), RuntimeError, r"Expected dtype int(32/int)?64 for index")
              for op in ("scatter_add", "scatter_add_", "index_add", "index_add_")]
           + [B(f"Tensor.{op} with a float index", lambda d, l, op=op: getattr(z(d, l, 3), op)(0, z(d, l, 1),
                z(d, l, 1)), RuntimeError, r"(?i)expected (dtype int64|a long tensor) for index")
              for op in ("index_copy", "index_copy_")]
           + [B(f"Tensor.{op} with a float index", lambda d, l, op=op: getattr(z(d, l, 3), op)(0, z(d, l, 1), 1.0),
                IndexError, r"Expected dtype int64 for index") for op in ("index_fill", "index_fill_")]
           + [B(f"Tensor.{op} of a meta tensor", lambda d, l, op=op: getattr(z(d, l, 3).to("meta"), op)(),
                NotImplementedError, META_SIZED) for op in ("nonzero", "argwhere", "unique", "unique_consecutive")]
           + [B(f"Tensor.{op} of a string", lambda d, l, op=op: getattr(z(d, l, 3), op)("a"), TypeError,
                r"must be (float|tuple of ints)") for op in ("nan_to_num", "nan_to_num_", "tile")]
           + [B("Tensor.scatter index out of bounds", lambda d, l: z(d, l, 3).scatter(0, ix(d, l, [5]), 1.0),
                RuntimeError, r"index 5 is out of bounds for dimension 0 with size 3", devices=HOST),
              B("Tensor.bincount of a float tensor", lambda d, l: z(d, l, 3).bincount(), NotImplementedError,
                r"(?i)not implemented for '?(gpumemnet\.)?float"),
              B("Tensor.bincount of a matrix", lambda d, l: z(d, l, 2, 2, dtype="int64").bincount(), RuntimeError,
                r"bincount only supports 1-d non-negative integral inputs"),
              B("Tensor.diag of a 3-d tensor", lambda d, l: z(d, l, 2, 2, 2).diag(), RuntimeError,
                r"diag\(\): Supports 1D or 2D tensors. Got 3D"),
              B("Tensor.diagonal of one dim twice", lambda d, l: z(d, l, 2, 2).diagonal(0, 1, 1), RuntimeError,
                r"diagonal dimensions cannot be identical 1, 1"),
              B("Tensor.dot of matrices", lambda d, l: z(d, l, 2, 2).dot(z(d, l, 2, 2)), RuntimeError,
                r"1D tensors expected, but got 2D and 2D tensors"),
              B("Tensor.fill_diagonal_ of a vector", lambda d, l: z(d, l, 3).fill_diagonal_(1.0), RuntimeError,
                r"dimensions must larger than 1"),
              B("Tensor.masked_select with a float mask", lambda d, l: z(d, l, 3).masked_select(z(d, l, 3)),
                RuntimeError, r"masked_select: expected BoolTensor for mask"),
              B("Size of strings", lambda d, l: l.L.Size(["a"]), TypeError,
                r"torch.Size\(\) takes an iterable of 'int' \(item 0 is 'str'\)"),
              B("Tensor.record_stream of a CPU tensor", lambda d, l: z("cpu", l, 2).record_stream(None), RuntimeError,
                r"CUDA tensor|unknown parameter type"),
              B("einsum with too few operands", lambda d, l: l.L.einsum("ij,jk->ik", z(d, l, 2, 3)), RuntimeError,
                r"einsum\(\): (fewer operands|2 operand subscript)"),
              B("einsum of mismatched sizes", lambda d, l: l.L.einsum("ij,jk->ik", z(d, l, 2, 3), z(d, l, 4, 5)),
                RuntimeError, r"einsum\(\): .*subscript j has size"),
              B("einsum of a string operand", lambda d, l: l.L.einsum("ij", "x"), TypeError, r"Tensor"),
              B("meshgrid of a matrix", lambda d, l: l.L.meshgrid(z(d, l, 2, 2), z(d, l, 2), indexing="ij"),
                RuntimeError, r"Expected 0D or 1D tensor in the tensor list")])

# _core/tensor_more.py and _core/creation_more.py
MORE = ([B(f"Tensor.{op} through an expanded view", lambda d, l, op=op, a=a: getattr(z(d, l, 1).expand(3), op)(*a),
           RuntimeError, OVERLAP) for op, a in (("absolute_", ()), ("clamp_max_", (1.0,)), ("clamp_min_", (0.0,)),
                                                 ("clip_", (0.0, 1.0)), ("frac_", ()), ("logical_not_", ()),
                                                 ("round_", ()), ("sign_", ()), ("square_", ()), ("trunc_", ()),
                                                 ("true_divide_", (2.0,)))]
        + [B(f"Tensor.{op} with an argument", lambda d, l, op=op: getattr(z(d, l, 2), op)(1), TypeError, r"takes")
           for op in ("absolute", "sgn", "frac", "nelement")]
        + [B(f"Tensor.{op} dim out of range", lambda d, l, op=op, a=a: getattr(z(d, l, 2, 3), op)(*a), IndexError, DIM)
           for op, a in (("squeeze_", (5,)), ("unsqueeze_", (5,)), ("transpose_", (0, 5)), ("cummax", (5,)),
                         ("cummin", (5,)), ("logcumsumexp", (5,)), ("median", (5,)), ("nansum", (5,)))]
        + [B(f"Tensor.{op} of a string", lambda d, l, op=op: getattr(z(d, l, 3), op)("x"), TypeError, r"str")
           for op in ("dist", "hypot", "logaddexp", "xlogy", "float_power", "logit")]
        + [B(f"{op} of a string", lambda d, l, op=op: getattr(l.L, op)("x"), TypeError, r"str|Tensor")
           for op in ("atleast_1d", "atleast_2d", "std_mean", "var_mean", "is_complex")]
        + [B(f"{op} of a string", lambda d, l, op=op: getattr(l.L, op)("x", 2), TypeError, r"str|Tensor")
           for op in ("randint_like", "repeat_interleave", "searchsorted")]
        + [B(f"{op} of a string size", lambda d, l, op=op: getattr(l.L, op)("a", 3), TypeError, r"must be int")
           for op in ("tril_indices", "triu_indices")]
        + [B("Tensor.aminmax dim out of range", lambda d, l: z(d, l, 2, 3).aminmax(dim=5), IndexError, DIM),
           B("Tensor.t_ of a 3-d tensor", lambda d, l: z(d, l, 2, 2, 2).t_(), RuntimeError,
             r"expects a tensor with <= 2 dimensions"),
           B("Tensor.kthvalue k out of range", lambda d, l: z(d, l, 2, 3).kthvalue(7, 1), RuntimeError,
             r"kthvalue\(\): selected number k out of range for dimension 1"),
           B("Tensor.nanmean of integers", lambda d, l: z(d, l, 3, dtype="int64").nanmean(), NotImplementedError,
             r"nanmean\(\): expected input to have floating point"),
           B("Tensor.quantile q out of range", lambda d, l: z(d, l, 5).quantile(1.5), RuntimeError,
             r"quantile\(\) q (values )?must be in the range \[0, 1\]"),
           B("Tensor.fliplr of a vector", lambda d, l: z(d, l, 3).fliplr(), RuntimeError, r"Input must be >= 2-d"),
           B("Tensor.flipud of a scalar", lambda d, l: l.L.tensor(1.0, device=d).flipud(), RuntimeError,
             r"Input must be >= 1-d"),
           B("Tensor.rot90 of a vector", lambda d, l: z(d, l, 3).rot90(), RuntimeError, r"expected total dims >= 2"),
           B("Tensor.trace of a vector", lambda d, l: z(d, l, 3).trace(), RuntimeError, r"trace: expected a matrix"),
           B("Tensor.index_put_ with a float index", lambda d, l: z(d, l, 3).index_put_((z(d, l, 1),), z(d, l, 1)),
             IndexError, r"tensors used as indices must be"),
           B("Tensor.index_put with a float index", lambda d, l: z(d, l, 3).index_put((z(d, l, 1),), z(d, l, 1)),
             IndexError, r"tensors used as indices must be"),
           B("Tensor.repeat_interleave negative", lambda d, l: z(d, l, 3).repeat_interleave(-1), RuntimeError,
             r"(?i)repeats (can not be negative|must be non-negative)"),
           B("Tensor.sum_to_size not expandable", lambda d, l: z(d, l, 2, 3).sum_to_size(4), RuntimeError,
             r"is not expandable to size"),
           B("Tensor.take with a float index", lambda d, l: z(d, l, 3).take(z(d, l, 1)), RuntimeError,
             r"take\(\): Expected a long tensor for index"),
           B("Tensor.type of an unknown name", lambda d, l: z(d, l, 3).type("torch.NoTensor"), ValueError,
             r"invalid type: 'torch.NoTensor'"),
           B("Tensor.unflatten sizes that do not multiply up", lambda d, l: z(d, l, 6).unflatten(0, (4, -1)),
             RuntimeError, r"don't multiply up to the size of dim 0"),
           B("Tensor.unfold window too large", lambda d, l: z(d, l, 3).unfold(0, 5, 1), RuntimeError,
             r"maximum size for tensor at dimension 0 is 3 but size is 5"),
           B("broadcast_shapes mismatch", lambda d, l: l.L.broadcast_shapes((2,), (3,)), RuntimeError,
             r"(?i)broadcast"),
           B("broadcast_tensors mismatch", lambda d, l: l.L.broadcast_tensors(z(d, l, 2), z(d, l, 3)), RuntimeError,
             r"(?i)broadcast|must match"),
           B("broadcast_to a shape it does not fit", lambda d, l: l.L.broadcast_to(z(d, l, 2), (3,)), RuntimeError,
             r"(?i)expand"),
           B("bucketize on 2-d boundaries", lambda d, l: l.L.bucketize(z(d, l, 3), z(d, l, 2, 2)), RuntimeError,
             r"boundaries tensor must be 1 dimension"),
           B("cdist of different widths", lambda d, l: l.L.cdist(z(d, l, 2, 3), z(d, l, 2, 4)), RuntimeError,
             r"X1 and X2 must have the same number of columns"),
           B("histc with negative bins", lambda d, l: l.L.histc(z(d, l, 3), bins=-1), RuntimeError,
             r"bins must be > 0"),
           B("is_nonzero of several values", lambda d, l: l.L.is_nonzero(z(d, l, 3)), RuntimeError,
             r"Boolean value of Tensor with more than one value is ambiguous"),
           B("multinomial of a 3-d tensor", lambda d, l: l.L.multinomial(z(d, l, 2, 2, 2), 1), RuntimeError,
             r"prob_dist must be 1 or 2 dim"),
           B("normal with a negative std", lambda d, l: l.L.normal(z(d, l, 3), -1.0), RuntimeError,
             r"normal expects (all elements of )?std >= 0.0", devices=HOST)])

# nn/_functional_more.py, nn/_functional_conv1d.py, nn/modules/more.py (PyTorch's own Python functions among these
# fail on a string with AttributeError, so those cases are gpumemnet's alone: E)
_PT_CHECKS_STR = ("celu", "selu", "softshrink", "hardshrink", "logsigmoid", "threshold")
_PT_ATTRIBUTE_ERROR = ("glu", "softmin", "softsign", "tanhshrink")
NN_MORE2 = ([B(f"F.{op} of a string", lambda d, l, op=op: getattr(l.F, op)("x", *((0.1, 0.0) if op == "threshold"
                                                                                   else ())), TypeError, r"Tensor")
             for op in _PT_CHECKS_STR]
            + [E(f"F.{op} of a string", lambda d, l, op=op: getattr(l.F, op)("x"), TypeError, r"input must be a Tensor")
               for op in _PT_ATTRIBUTE_ERROR]
            + [B(f"F.{op} of a string", lambda d, l, op=op: getattr(l.F, op)("x", z(d, l, 2), z(d, l, 2)), TypeError,
                 r"Tensor") for op in ("cosine_embedding_loss", "triplet_margin_loss")]
            + [E("F.margin_ranking_loss of a string", lambda d, l: l.F.margin_ranking_loss("x", z(d, l, 2), z(d, l, 2)),
                 TypeError, r"input1 must be a Tensor")]
            + [B(f"F.{op} of a string", lambda d, l, op=op: getattr(l.F, op)("x", z(d, l, 2)), TypeError, r"Tensor")
               for op in ("hinge_embedding_loss", "multilabel_soft_margin_loss", "soft_margin_loss",
                          "poisson_nll_loss", "pairwise_distance")]
            + [B(f"nn.{m} of a string", lambda d, l, m=m, a=a, n=n: getattr(l.nn, m)(*a)("x", *[z(d, l, 2)] * (n - 1)),
                 TypeError, r"Tensor") for m, a, n in (
                ("CELU", (), 1), ("SELU", (), 1), ("Softshrink", (), 1), ("Hardshrink", (), 1), ("LogSigmoid", (), 1),
                ("Threshold", (0.1, 0.0), 1), ("PairwiseDistance", (), 2), ("CosineSimilarity", (), 2),
                ("CosineEmbeddingLoss", (), 3), ("TripletMarginLoss", (), 3), ("HingeEmbeddingLoss", (), 2),
                ("MultiLabelSoftMarginLoss", (), 2), ("SoftMarginLoss", (), 2), ("PoissonNLLLoss", (), 2))]
            + [E(f"nn.{m} of a string", lambda d, l, m=m, a=a, n=n: getattr(l.nn, m)(*a)("x", *[z(d, l, 2)] * (n - 1)),
                 TypeError, r"must be a Tensor") for m, a, n in (
                ("GLU", (), 1), ("Softmin", (1,), 1), ("Softsign", (), 1), ("Tanhshrink", (), 1),
                ("MarginRankingLoss", (), 3), ("GaussianNLLLoss", (), 3))]
            + [B("F.gaussian_nll_loss with a negative variance", lambda d, l: l.F.gaussian_nll_loss(
                   z(d, l, 2), z(d, l, 2), -l.L.ones(2, device=d)), ValueError, r"var has negative entry",
                 devices=HOST),
               B("F.glu of an odd dimension", lambda d, l: l.F.glu(z(d, l, 2, 3)), RuntimeError,
                 r"Halving dimension must be even, but dimension 1 is size 3"),
               B("F.softshrink with a negative lambda", lambda d, l: l.F.softshrink(z(d, l, 3), -1.0), RuntimeError,
                 r"lambda must be"),
               B("F.scaled_dot_product_attention of mismatched heads", lambda d, l: l.F.scaled_dot_product_attention(
                   z(d, l, 2, 3, 4), z(d, l, 2, 5, 3), z(d, l, 2, 5, 4)), RuntimeError, r"(?i)dim|size"),
               B("F.channel_shuffle of a matrix", lambda d, l: l.F.channel_shuffle(z(d, l, 2, 4), 2), RuntimeError,
                 r"channel_shuffle expects input"),
               B("nn.ChannelShuffle of a matrix", lambda d, l: l.nn.ChannelShuffle(2)(z(d, l, 2, 4)), RuntimeError,
                 r"channel_shuffle expects input"),
               B("F.conv1d of a 4-d input", lambda d, l: l.F.conv1d(z(d, l, 1, 2, 3, 4), z(d, l, 2, 2, 3)),
                 RuntimeError, r"(?i)2-?D .*3-?D|2D \(unbatched\)"),
               B("F.conv_transpose1d of a 4-d input", lambda d, l: l.F.conv_transpose1d(z(d, l, 1, 2, 3, 4),
                                                                                         z(d, l, 2, 2, 3)),
                 RuntimeError, r"(?i)2-?D .*3-?D|2D \(unbatched\)"),
               B("F.conv1d of the wrong channels, in 1-D shapes", lambda d, l: l.F.conv1d(z(d, l, 2, 10, 32),
                                                                                       z(d, l, 32, 18, 1)),
                 RuntimeError, r"32, 18, 1.*2, 10, 32.*10 channels"),
               B("F.conv_transpose1d of the wrong channels, in 1-D shapes", lambda d, l: l.F.conv_transpose1d(
                   z(d, l, 2, 10, 5), z(d, l, 8, 4, 3)), RuntimeError, r"8, 4, 3.*2, 10, 5.*10 channels"),
               B("nn.Conv1d of a 4-d input", lambda d, l: l.nn.Conv1d(2, 3, 3).to(d)(z(d, l, 1, 2, 3, 4)),
                 RuntimeError, r"(?i)2-?D .*3-?D|2D \(unbatched\)"),
               B("nn.ConvTranspose1d of a 4-d input", lambda d, l: l.nn.ConvTranspose1d(2, 3, 3).to(d)(
                   z(d, l, 1, 2, 3, 4)), RuntimeError, r"(?i)2-?D .*3-?D|2D \(unbatched\)"),
               B("F.unfold of a 5-d input", lambda d, l: l.F.unfold(z(d, l, 1, 1, 1, 3, 3), 2), RuntimeError,
                 r"Only 3D or 4D input Tensors are supported"),
               B("nn.Unfold of a 5-d input", lambda d, l: l.nn.Unfold(2)(z(d, l, 1, 1, 1, 3, 3)), RuntimeError,
                 r"Only 3D or 4D input Tensors are supported"),
               B("F.fold of the wrong number of blocks", lambda d, l: l.F.fold(z(d, l, 1, 4, 5), (4, 5), 2),
                 RuntimeError, r"expected size of input's dimension 2 to match the calculated number of sliding"),
               B("nn.Fold of the wrong number of blocks", lambda d, l: l.nn.Fold((4, 5), 2)(z(d, l, 1, 4, 5)),
                 RuntimeError, r"expected size of input's dimension 2 to match the calculated number of sliding"),
               B("nn.ParameterList index out of range", lambda d, l: l.nn.ParameterList()[3], IndexError,
                 r"index 3 is out of range"),
               E("nn.ParameterDict of a missing key", lambda d, l: l.nn.ParameterDict()["x"], KeyError, r"x"),
               B("nn.Unflatten to sizes that do not multiply up", lambda d, l: l.nn.Unflatten(1, (4, -1))(
                   z(d, l, 2, 6)), RuntimeError, r"don't multiply up to the size of dim 1")])

API_CASES = (SHAPES + DIMS + CREATION + INPLACE + UNARY + MODULES + OPTIM + DATA + SAVE_LOAD + STARTUP + MATH + COMPOSE
             + MORE + NN_MORE2)


# Inputs that are not errors: NaN and Inf give the IEEE result (never a crash, never an exception), and an empty
# batch gives an empty result (or the NaN of a mean over nothing), on every device, as in PyTorch. A case is
# (name, call(dev, lib)); test_error_inputs.py compares the CPU's values with PyTorch's (NaN equal to NaN) and
# every device's shape and dtype with the CPU's.
def t(dev, lib, values):
    return lib.L.tensor(values, device=dev)


INF, NAN = float("inf"), float("nan")
EDGE = [
    ("log of 0 and -1", lambda d, l: l.L.log(t(d, l, [0.0, -1.0, 1.0]))),
    ("sqrt of -1", lambda d, l: l.L.sqrt(t(d, l, [-1.0, 4.0]))),
    ("division by zero", lambda d, l: t(d, l, [1.0, -1.0, 0.0]) / t(d, l, [0.0, 0.0, 0.0])),
    ("exp overflows to inf", lambda d, l: l.L.exp(t(d, l, [1000.0, -1000.0]))),
    ("softmax of a row with inf", lambda d, l: l.F.softmax(t(d, l, [[INF, 1.0], [-INF, 1.0]]), dim=1)),
    ("log_softmax of a row of -inf", lambda d, l: l.F.log_softmax(t(d, l, [[-INF, -INF], [0.0, 0.0]]), dim=1)),
    ("relu of NaN", lambda d, l: l.F.relu(t(d, l, [NAN, -1.0, 2.0]))),
    ("sigmoid and tanh of inf", lambda d, l: l.L.stack([l.L.sigmoid(t(d, l, [INF, -INF])),
                                                         l.L.tanh(t(d, l, [INF, -INF]))])),
    ("amax with NaN", lambda d, l: t(d, l, [[1.0, NAN], [2.0, 3.0]]).amax(dim=1)),
    ("sum with inf and -inf", lambda d, l: t(d, l, [INF, -INF, 1.0]).sum()),
    ("matmul with inf", lambda d, l: t(d, l, [[INF, 1.0]]) @ t(d, l, [[0.0], [1.0]])),
    ("mse_loss with NaN", lambda d, l: l.F.mse_loss(t(d, l, [NAN, 1.0]), t(d, l, [0.0, 1.0]))),
    ("cross_entropy with inf logits", lambda d, l: l.F.cross_entropy(t(d, l, [[INF, 0.0], [0.0, 1.0]]),
                                                                    t(d, l, [0, 1]))),
    ("batch_norm of NaN in eval", lambda d, l: l.F.batch_norm(t(d, l, [[NAN, 1.0], [2.0, 3.0]]), z(d, l, 2),
                                                              l.L.ones(2, device=d), training=False)),
    ("conv2d with inf", lambda d, l: l.F.conv2d(l.L.full((1, 1, 3, 3), INF, device=d), z(d, l, 1, 1, 2, 2))),
    ("max_pool2d with NaN", lambda d, l: l.F.max_pool2d(t(d, l, [[[[NAN, 1.0], [2.0, 3.0]]]]), 2)),
    ("mean of an empty tensor", lambda d, l: z(d, l, 0, 3).mean()),
    ("sum of an empty tensor", lambda d, l: z(d, l, 0, 3).sum(dim=0)),
    ("cross_entropy of an empty batch", lambda d, l: l.F.cross_entropy(z(d, l, 0, 3), z(d, l, 0, dtype="int64"))),
    ("mse_loss of an empty batch, summed", lambda d, l: l.F.mse_loss(z(d, l, 0, 3), z(d, l, 0, 3), reduction="sum")),
    ("linear of an empty batch", lambda d, l: l.F.linear(z(d, l, 0, 3), z(d, l, 4, 3))),
    ("conv2d of an empty batch", lambda d, l: l.F.conv2d(z(d, l, 0, 1, 4, 4), z(d, l, 2, 1, 3, 3))),
    ("max_pool2d of an empty batch", lambda d, l: l.F.max_pool2d(z(d, l, 0, 1, 4, 4), 2)),
    ("batch_norm of an empty batch in eval", lambda d, l: l.F.batch_norm(z(d, l, 0, 2, 3, 3), z(d, l, 2),
                                                                          l.L.ones(2, device=d), training=False)),
    ("relu of an empty batch", lambda d, l: l.F.relu(z(d, l, 0, 5))),
    ("softmax of an empty batch", lambda d, l: l.F.softmax(z(d, l, 0, 5), dim=1)),
]
