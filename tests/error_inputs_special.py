"""Error cases of tensor_special.py: B(...) is run against PyTorch too, E(...) names something PyTorch has not
(error_inputs.py explains both). EXEMPT: public callables with no bad input, each with its reason
(test_error_coverage.py)."""
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401

BROADCAST = r"\(2, 3\).*\(4,\)|\(4,\).*\(2, 3\)|size of tensor a \(3\) must match"
CAST = r"can't be cast to the desired output type"
COMPARISONS = ["eq", "ne", "gt", "ge", "lt", "le", "greater", "greater_equal", "less", "less_equal", "not_equal"]
UNARY = ["acosh", "asinh", "atanh", "deg2rad", "rad2deg", "signbit", "sinc",
         "isposinf", "isneginf", "isreal", "positive", "lgamma", "digamma", "erfinv", "i0", "bitwise_not"]
FLOAT_IN_PLACE = ["acosh_", "asinh_", "atanh_", "sinc_", "lgamma_", "digamma_", "erfinv_", "i0_", "deg2rad_",
                  "rad2deg_"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"]


def i64(d, l, *values):
    return ix(d, l, list(values))


CASES = (
    [B(f"{op} shapes do not broadcast", lambda d, l, op=op: getattr(l.L, op)(z(d, l, 2, 3), z(d, l, 4)),
       ValueError, BROADCAST) for op in COMPARISONS]
    + [B(f"Tensor.{op} shapes do not broadcast", lambda d, l, op=op: getattr(z(d, l, 2, 3), op)(z(d, l, 4)),
         ValueError, BROADCAST) for op in COMPARISONS[6:]]
    + [B(f"Tensor.{op}_ result larger than self", lambda d, l, op=op: getattr(z(d, l, 3), op + "_")(z(d, l, 2, 3)),
         RuntimeError, r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]") for op in COMPARISONS]
    + [B(f"{op} of a list", lambda d, l, op=op: getattr(l.L, op)([0.5, 0.25]), TypeError,
         rf"{op}\(\): argument 'input' must be Tensor, not list") for op in UNARY]
    + [B(f"Tensor.{op} of an int64 tensor", lambda d, l, op=op: getattr(i64(d, l, 1, 2), op)(), RuntimeError,
         rf"{op}: result type Float {CAST} Long") for op in FLOAT_IN_PLACE]
    + [B("positive of a bool tensor", lambda d, l: l.L.positive(z(d, l, 2, dtype="bool")), NotImplementedError,
         r"`\+` operator, on a bool tensor is not supported"),
       B("Tensor.positive of a bool tensor", lambda d, l: z(d, l, 2, dtype="bool").positive(), NotImplementedError,
         r"`\+` operator, on a bool tensor is not supported"),
       # polygamma's order
       B("polygamma negative n", lambda d, l: l.L.polygamma(-1, z(d, l, 3)), RuntimeError,
         r"polygamma\(n, x\) does not support negative n \(got n=-1\)"),
       B("polygamma float n", lambda d, l: l.L.polygamma(1.5, z(d, l, 3)), TypeError,
         r"argument 'n' must be int, not float"),
       B("Tensor.polygamma negative n", lambda d, l: z(d, l, 3).polygamma(-2), RuntimeError,
         r"does not support negative n \(got n=-2\)"),
       B("Tensor.polygamma_ of an int64 tensor", lambda d, l: i64(d, l, 1, 2).polygamma_(1), RuntimeError,
         rf"polygamma_: result type Float {CAST} Long"),
       # binary float functions
       B("copysign shapes do not broadcast", lambda d, l: l.L.copysign(z(d, l, 2, 3), z(d, l, 4)), ValueError,
         BROADCAST),
       B("Tensor.copysign of a string", lambda d, l: z(d, l, 3).copysign("a"), TypeError,
         r"copysign\(\): argument 'other' must be Tensor or a number, not str"),
       B("Tensor.copysign_ of an int64 tensor", lambda d, l: i64(d, l, 1, 2).copysign_(-1), RuntimeError,
         rf"copysign_: result type Float {CAST} Long"),
       B("ldexp of a number", lambda d, l: l.L.ldexp(z(d, l, 3), 2), TypeError,
         r"ldexp\(\): argument 'other' must be Tensor, not int"),
       B("Tensor.ldexp shapes do not broadcast", lambda d, l: z(d, l, 2, 3).ldexp(z(d, l, 4)), ValueError,
         BROADCAST),
       B("Tensor.ldexp_ of an int64 tensor", lambda d, l: i64(d, l, 1, 2).ldexp_(i64(d, l, 1, 1)), RuntimeError,
         rf"ldexp_: result type Float {CAST} Long|ldexp can't be cast"),
       B("logaddexp2 of int64 tensors", lambda d, l: l.L.logaddexp2(i64(d, l, 1), i64(d, l, 2)),
         NotImplementedError, r"logaddexp2: not implemented for 'Long'"),
       B("Tensor.logaddexp2 of a number", lambda d, l: z(d, l, 3).logaddexp2(2.0), TypeError,
         r"logaddexp2\(\): argument 'other' must be Tensor, not float"),
       B("fmax of a number", lambda d, l: l.L.fmax(z(d, l, 3), 1.0), TypeError,
         r"fmax\(\): argument 'other' must be Tensor, not float"),
       B("fmin shapes do not broadcast", lambda d, l: l.L.fmin(z(d, l, 2, 3), z(d, l, 4)), ValueError, BROADCAST),
       B("Tensor.fmax shapes do not broadcast", lambda d, l: z(d, l, 2, 3).fmax(z(d, l, 4)), ValueError,
         BROADCAST),
       B("Tensor.fmin of a number", lambda d, l: z(d, l, 3).fmin(0), TypeError,
         r"fmin\(\): argument 'other' must be Tensor, not int"),
       B("heaviside dtypes differ", lambda d, l: l.L.heaviside(z(d, l, 3), z(d, l, 1, dtype="float64")),
         RuntimeError, r"heaviside is not yet implemented for tensors with different dtypes \(input is .*float32, "
                       r"values is .*float64\)"),
       B("Tensor.heaviside of a number", lambda d, l: z(d, l, 3).heaviside(0.5), TypeError,
         r"heaviside\(\): argument 'values' must be Tensor, not float"),
       B("Tensor.heaviside_ result larger than self", lambda d, l: z(d, l, 3).heaviside_(z(d, l, 2, 3)),
         RuntimeError, r"heaviside_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"),
       # integer ops
       B("bitwise_not of a float tensor", lambda d, l: l.L.bitwise_not(z(d, l, 3)), NotImplementedError,
         r"\"bitwise_not\" not implemented for 'Float'"),
       B("Tensor.bitwise_not of a float tensor", lambda d, l: z(d, l, 3).bitwise_not(), NotImplementedError,
         r"not implemented for 'Float'"),
       B("Tensor.bitwise_not_ of a float tensor", lambda d, l: z(d, l, 3).bitwise_not_(), NotImplementedError,
         r"not implemented for 'Float'"),
       B("bitwise_left_shift of bool tensors", lambda d, l: l.L.bitwise_left_shift(z(d, l, 2, dtype="bool"),
         z(d, l, 2, dtype="bool")), NotImplementedError, r"\"bitwise_left_shift\" not implemented for 'Bool'"),
       B("gcd of a number", lambda d, l: l.L.gcd(i64(d, l, 4), 2), TypeError,
         r"gcd\(\): argument 'other' must be Tensor, not int"),
       B("lcm of a number first", lambda d, l: l.L.lcm(2, i64(d, l, 4)), TypeError,
         r"lcm\(\): argument 'input' must be Tensor, not int"),
       B("bitwise_and shapes do not broadcast", lambda d, l: l.L.bitwise_and(z(d, l, 2, 3, dtype="int64"),
         z(d, l, 4, dtype="int64")), ValueError, BROADCAST)]
    + [B(f"{op} of float tensors", lambda d, l, op=op: getattr(l.L, op)(z(d, l, 2), z(d, l, 2)),
         NotImplementedError, rf"\"{op}\" not implemented for 'Float'") for op in BITWISE]
    + [B(f"Tensor.{op} of a float", lambda d, l, op=op: getattr(i64(d, l, 1, 2), op)(z(d, l, 2)),
         NotImplementedError, r"not implemented for 'Float'") for op in BITWISE]
    + [B(f"Tensor.{op}_ of an int64 into bool", lambda d, l, op=op: getattr(z(d, l, 2, dtype="bool"), op + "_")(
         i64(d, l, 1, 2)), RuntimeError, rf"{op}_: result type Long {CAST} Bool|not implemented for 'Bool'")
       for op in BITWISE]
)

NO_BAD_INPUT = "takes only the tensor and accepts every dtype and shape (integers and bool give float32, as in " \
               "PyTorch): there is no bad input to give"
EXEMPT = {f"Tensor.{op}": NO_BAD_INPUT for op in ("acosh", "asinh", "atanh", "arccosh", "arcsinh", "arctanh",
                                                   "sinc", "lgamma", "digamma", "erfinv", "i0", "deg2rad",
                                                   "rad2deg", "signbit", "isposinf", "isneginf", "isreal")}
