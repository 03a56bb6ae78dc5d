"""Error cases of gm.special (python/gpumemnet/special/): B(...) is run against PyTorch too, E(...) names something
PyTorch has not (error_inputs.py explains both). EXEMPT: public callables with no bad input, each with its reason.
(test_error_coverage.py enumerates gm.*, not gm.special.*: these cases are for the refusals themselves.)"""
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401

UNARY = ["expit", "erf", "erfc", "erfcx", "erfinv", "exp2", "expm1", "log1p", "gammaln", "digamma", "psi", "i0",
         "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "sinc", "entr", "logit", "round", "bessel_j0", "bessel_j1",
         "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
         "modified_bessel_k1"]
UNARY_X = ["scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"]  # arg `x`
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
NUMBER_OR_TENSOR = ["xlogy", "xlog1py", "zeta"]


def _on(op, call):
    """A case calling special.<op>: call(f, dev, lib) with f = lib.special.<op> (op is bound in this closure, not as
    a lambda's default, which test_error_coverage.py would read as the name of a Tensor method)."""
    return lambda d, l: call(getattr(l.L.special, op), d, l)


BROADCAST = r"shapes of (input|x) \(2, 3\) and (other|n) \(4,\) cannot be broadcast"

CASES = (
    [B(f"special.{op} of a list", _on(op, lambda f, d, l: f([0.5, 0.25])), TypeError,
       rf"special\.{op}\(\): argument 'input' \(position 1\) must be Tensor, not list") for op in UNARY]
    + [B(f"special.{op} of a list", _on(op, lambda f, d, l: f([0.5, 0.25])), TypeError,
         rf"special\.{op}\(\): argument 'x' \(position 1\) must be Tensor, not list") for op in UNARY_X]
    + [B(f"special.{op} out of an integer dtype", _on(op, lambda f, d, l: f(
        z(d, l, 2), out=z(d, l, 2, dtype="int64"))), RuntimeError,
        rf"special\.{op}\(\): result type Float can't be cast to the desired output type Long")
       for op in ["expit", "erfcx", "i1e", "log_ndtr", "airy_ai", "bessel_j0"]]
    + [B(f"special.{op} out= while the input requires grad", _on(op, lambda f, d, l: f(
        l.L.ones(2, device=d, requires_grad=True), out=z(d, l, 2))), RuntimeError,
        r"functions with out=\.\.\. arguments don't support automatic differentiation")
       for op in ["expit", "ndtri", "i0e", "entr", "modified_bessel_k1"]]
    + [B("special.erfcx out not a tensor", lambda d, l: l.L.special.erfcx(z(d, l, 2), out=[0.0, 0.0]), TypeError,
         r"special\.erfcx\(\): argument 'out' must be Tensor, not list"),
       B("special.logit eps a string", lambda d, l: l.L.special.logit(z(d, l, 2), eps="a"), TypeError,
         r"special\.logit\(\): argument 'eps' must be float or None, not str"),
       B("special.round of an int64 tensor", lambda d, l: l.L.special.round(z(d, l, 2, dtype="int64")),
         NotImplementedError, r"special\.round\(\): \"round\" not implemented for 'Long'"),
       B("special.round of a bool tensor", lambda d, l: l.L.special.round(z(d, l, 2, dtype="bool")),
         NotImplementedError, r"not implemented for 'Bool'"),
       B("special.polygamma negative n", lambda d, l: l.L.special.polygamma(-1, z(d, l, 2)), RuntimeError,
         r"polygamma\(n, x\) does not support negative n \(got n=-1\)"),
       B("special.polygamma float n", lambda d, l: l.L.special.polygamma(1.5, z(d, l, 2)), TypeError,
         r"argument 'n' must be int, not float"),
       B("special.polygamma input a list", lambda d, l: l.L.special.polygamma(1, [1.0]), TypeError,
         r"special\.polygamma\(\): argument 'input' \(position 2\) must be Tensor, not list"),
       B("special.multigammaln p = 0", lambda d, l: l.L.special.multigammaln(z(d, l, 2), 0), RuntimeError,
         r"p has to be greater than or equal to 1 \(got p=0\)"),
       B("mvlgamma p = 0", lambda d, l: l.L.mvlgamma(z(d, l, 2), 0), RuntimeError,
         r"p has to be greater than or equal to 1"),
       B("Tensor.mvlgamma p = 0", lambda d, l: z(d, l, 2).mvlgamma(0), RuntimeError,
         r"p has to be greater than or equal to 1"),
       B("special.multigammaln float p", lambda d, l: l.L.special.multigammaln(z(d, l, 2), 1.5), TypeError,
         r"argument 'p' \(position 2\) must be int, not float"),
       B("special.multigammaln input a list", lambda d, l: l.L.special.multigammaln([3.0], 2), TypeError,
         r"special\.multigammaln\(\): argument 'input' \(position 1\) must be Tensor, not list"),
       B("special.softmax without dim", lambda d, l: l.L.special.softmax(z(d, l, 2)), TypeError,
         r"missing 1 required positional argument: 'dim'"),
       B("special.log_softmax without dim", lambda d, l: l.L.special.log_softmax(z(d, l, 2)), TypeError,
         r"missing 1 required positional argument: 'dim'"),
       B("special.logsumexp without dim", lambda d, l: l.L.special.logsumexp(z(d, l, 2)), TypeError,
         r"missing 1 required positional argument: 'dim'"),
       B("special.softmax of an int64 tensor", lambda d, l: l.L.special.softmax(z(d, l, 2, dtype="int64"), 0),
         NotImplementedError, r"special\.softmax\(\): \"softmax\" not implemented for 'Long'"),
       B("special.log_softmax of a bool tensor", lambda d, l: l.L.special.log_softmax(z(d, l, 2, dtype="bool"), 0),
         NotImplementedError, r"\"log_softmax\" not implemented for 'Bool'"),
       B("special.softmax dim out of range", lambda d, l: l.L.special.softmax(z(d, l, 2), 3), IndexError,
         r"dimension 3 is out of range"),
       B("special.log_softmax input a list", lambda d, l: l.L.special.log_softmax([1.0], 0), TypeError,
         r"special\.log_softmax\(\): argument 'input' \(position 1\) must be Tensor, not list"),
       B("special.logsumexp dim out of range", lambda d, l: l.L.special.logsumexp(z(d, l, 2), 3), IndexError,
         r"dimension 3 is out of range"),
       B("special.gammainc of int64 tensors", lambda d, l: l.L.special.gammainc(
           z(d, l, 2, dtype="int64"), z(d, l, 2, dtype="int64")), NotImplementedError,
         r"special\.gammainc\(\): not implemented for 'Long'"),
       B("special.gammaincc of bool tensors", lambda d, l: l.L.special.gammaincc(
           z(d, l, 2, dtype="bool"), z(d, l, 2, dtype="bool")), NotImplementedError,
         r"special\.gammaincc\(\): not implemented for 'Bool'"),
       B("special.gammainc other a number", lambda d, l: l.L.special.gammainc(z(d, l, 2), 2.0), TypeError,
         r"special\.gammainc\(\): argument 'other' \(position 2\) must be Tensor, not float"),
       B("special.gammaincc input a number", lambda d, l: l.L.special.gammaincc(2.0, z(d, l, 2)), TypeError,
         r"special\.gammaincc\(\): argument 'input' \(position 1\) must be Tensor, not float"),
       B("special.gammainc shapes do not broadcast", lambda d, l: l.L.special.gammainc(z(d, l, 2, 3), z(d, l, 4)),
         ValueError, BROADCAST)]
    + [B(f"special.{op} of two numbers", _on(op, lambda f, d, l: f(2.0, 3.0)), TypeError,
         rf"special\.{op}\(\): expected at least one Tensor, got input=2\.0 and other=3\.0")
       for op in NUMBER_OR_TENSOR]
    + [B(f"special.{op} other a string", _on(op, lambda f, d, l: f(z(d, l, 2), "a")), TypeError,
         rf"special\.{op}\(\): argument 'other' must be Tensor or a number, not str") for op in NUMBER_OR_TENSOR]
    + [B(f"special.{op} shapes do not broadcast", _on(op, lambda f, d, l: f(
        z(d, l, 2, 3), z(d, l, 4))), ValueError, BROADCAST) for op in NUMBER_OR_TENSOR]
    + [B(f"special.{op} n a string", _on(op, lambda f, d, l: f(z(d, l, 2), "a")), TypeError,
         rf"special\.{op}\(\): argument 'n' must be Tensor or a number, not str") for op in POLYNOMIALS]
    + [B(f"special.{op} x a list", _on(op, lambda f, d, l: f([0.5], 2)), TypeError,
         rf"special\.{op}\(\): argument 'x' must be Tensor or a number, not list") for op in POLYNOMIALS[:4]]
    + [B(f"special.{op} of two numbers", _on(op, lambda f, d, l: f(0.5, 2)), TypeError,
         rf"special\.{op}\(\): expected at least one Tensor, got x=0\.5 and n=2") for op in POLYNOMIALS[4:8]]
    + [B(f"special.{op} shapes do not broadcast", _on(op, lambda f, d, l: f(
        z(d, l, 2, 3), z(d, l, 4))), ValueError, BROADCAST) for op in POLYNOMIALS[8:]]
)
EXEMPT = {}
