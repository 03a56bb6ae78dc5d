"""Error cases of nn.utils (parametrize, parametrizations, fusion, stateless / gm.func, clip_grads_with_norm_,
skip_init, memory formats), optim (LBFGS, Rprop, ASGD, Adafactor) and utils.data.StackDataset: B(...) is run against
PyTorch too, E(...) names something PyTorch has not (error_inputs.py explains both). EXEMPT: public callables with
no bad input, each with its reason (test_error_coverage.py)."""
import gpumemnet.func  # noqa: F401  (gm.func, as torch.func, for the functional_call cases)
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401


def _p(d, l):
    return [l.nn.Parameter(z(d, l, 2))]


def _lin(d, l):
    return l.nn.Linear(2, 2, device=d)


OPTIM = [
    B("LBFGS negative lr", lambda d, l: l.L.optim.LBFGS(_p(d, l), lr=-1.0), ValueError,
      r"Invalid learning rate: -1.0"),
    B("LBFGS two parameter groups", lambda d, l: l.L.optim.LBFGS([{"params": _p(d, l)}, {"params": _p(d, l)}]),
      ValueError, r"LBFGS doesn't support per-parameter options \(parameter groups\)"),
    B("LBFGS a line search other than strong_wolfe", lambda d, l: (lambda p: l.L.optim.LBFGS(
      p, line_search_fn="armijo").step(lambda: (p[0] - 1).square().sum().backward() or (p[0] - 1).square().sum()))(
      _p(d, l)), RuntimeError, r"only 'strong_wolfe' is supported", devices=HOST),
    B("LBFGS step without a closure", lambda d, l: l.L.optim.LBFGS(_p(d, l)).step(), TypeError, r"closure"),
    B("Rprop eta values out of order", lambda d, l: l.L.optim.Rprop(_p(d, l), etas=(1.2, 0.5)), ValueError,
      r"Invalid eta values: 1.2, 0.5"),
    B("Rprop negative lr", lambda d, l: l.L.optim.Rprop(_p(d, l), lr=-0.1), ValueError,
      r"Invalid learning rate: -0.1"),
    B("ASGD negative lambd", lambda d, l: l.L.optim.ASGD(_p(d, l), lambd=-1e-4), ValueError,
      r"Invalid lambd value: -0.0001"),
    B("ASGD negative alpha", lambda d, l: l.L.optim.ASGD(_p(d, l), alpha=-0.5), ValueError,
      r"Invalid alpha value: -0.5"),
    B("ASGD negative weight_decay", lambda d, l: l.L.optim.ASGD(_p(d, l), weight_decay=-1), ValueError,
      r"Invalid weight_decay value: -1"),
    B("Adafactor positive beta2_decay", lambda d, l: l.L.optim.Adafactor(_p(d, l), beta2_decay=0.8), ValueError,
      r"beta2_decay should be <= 0 but is: 0.8"),
    B("Adafactor clipping threshold below 1", lambda d, l: l.L.optim.Adafactor(_p(d, l), d=0.5), ValueError,
      r"Clipping threshold d should be >= 1 but is: 0.5"),
    B("Muon of a vector parameter", lambda d, l: l.L.optim.Muon(_p(d, l)), ValueError,
      r"Muon only supports 2D parameters"),
    B("Muon negative momentum", lambda d, l: l.L.optim.Muon([l.nn.Parameter(z(d, l, 2, 2))], momentum=-1.0),
      ValueError, r"momentum should be >= 0 but is: -1.0"),
    B("Adafactor negative epsilon2", lambda d, l: l.L.optim.Adafactor(_p(d, l), eps=(None, -1e-3)), ValueError,
      r"epsilon2 should be >= 0 but is: -0.001"),
]

DATA = [
    B("StackDataset sizes differ", lambda d, l: l.L.utils.data.StackDataset(z(d, l, 3), z(d, l, 4)), ValueError,
      r"Size mismatch between datasets"),
    B("StackDataset dict form sizes differ", lambda d, l: l.L.utils.data.StackDataset(a=z(d, l, 3), b=z(d, l, 2)),
      ValueError, r"Size mismatch between datasets"),
    B("StackDataset of nothing (empty)", lambda d, l: l.L.utils.data.StackDataset(), ValueError,
      r"At least one dataset should be passed"),
    B("StackDataset tuple and dict forms at once", lambda d, l: l.L.utils.data.StackDataset(z(d, l, 2),
      b=z(d, l, 2)), ValueError, r"but both types are given"),
]

NN_UTILS = [
    B("register_parametrization of a missing tensor", lambda d, l: l.nn.utils.parametrize.register_parametrization(
      _lin(d, l), "nope", l.nn.Identity()), ValueError, r"does not have a parameter, a buffer, or a parametrized "
      r"element with name 'nope'"),
    B("register_parametrization changing the shape", lambda d, l: l.nn.utils.parametrize.register_parametrization(
      _lin(d, l), "weight", l.nn.Flatten(0)), ValueError, r"may not change the shape"),
    B("remove_parametrizations of an unparametrized tensor", lambda d, l: l.nn.utils.parametrize
      .remove_parametrizations(_lin(d, l), "weight"), ValueError, r"does not have a parametrization on weight"),
    B("parametrizations.spectral_norm dim out of range", lambda d, l: l.nn.utils.parametrizations.spectral_norm(
      _lin(d, l), dim=3), IndexError, r"Dimension out of range \(expected to be in range of \[-2, 1\] but got 3\)"),
    B("parametrizations.spectral_norm of a missing name", lambda d, l: l.nn.utils.parametrizations.spectral_norm(
      _lin(d, l), name="w"), ValueError, r"has no parameter or buffer with name 'w'"),
    B("parametrizations.orthogonal of a 1-D bias", lambda d, l: l.nn.utils.parametrizations.orthogonal(
      _lin(d, l), "bias"), ValueError, r"Expected a matrix or batch of matrices. Got a tensor of 1 dimensions"),
    B("parametrizations.orthogonal unknown map", lambda d, l: l.nn.utils.parametrizations.orthogonal(
      _lin(d, l), orthogonal_map="qr"), ValueError, r'orthogonal_map has to be one of "matrix_exp", "cayley", '
      r'"householder". Got: qr'),
    B("fuse_conv_bn_eval in training mode", lambda d, l: l.nn.utils.fuse_conv_bn_eval(
      l.nn.Conv2d(2, 3, 1, device=d), l.nn.BatchNorm2d(3, device=d)), AssertionError, r"Fusion only for eval!"),
    B("fuse_linear_bn_eval features differ", lambda d, l: l.nn.utils.fuse_linear_bn_eval(
      _lin(d, l).eval(), l.nn.BatchNorm1d(3, device=d).eval()), AssertionError,
      r"linear.out_features=2 and bn.num_features=3"),
    B("func.functional_call strict with a missing key", lambda d, l: l.L.func.functional_call(
      _lin(d, l), {"weight": z(d, l, 2, 2)}, z(d, l, 1, 2), strict=True), RuntimeError,
      r"Missing key\(s\): 'bias'"),
    B("func.functional_call one key in two dicts", lambda d, l: l.L.func.functional_call(
      _lin(d, l), ({"bias": z(d, l, 2)}, {"bias": z(d, l, 2)}), z(d, l, 1, 2)), ValueError,
      r"\['bias'\] appeared in multiple dictionaries"),
    B("func.functional_call tied keys given two values", lambda d, l: (lambda m: l.L.func.functional_call(
      m, {"0.weight": z(d, l, 2, 2), "1.weight": z(d, l, 2, 2)}, z(d, l, 1, 2)))(_tied(d, l)), ValueError,
      r"which are tied"),
    B("clip_grads_with_norm_ with a float total_norm", lambda d, l: l.nn.utils.clip_grads_with_norm_(
      [_with_grad(d, l)], 1.0, 2.0), TypeError, r"total_norm|Tensor"),
    B("skip_init of a non-module", lambda d, l: l.nn.utils.skip_init(dict), RuntimeError, r"Expected a Module"),
    B("convert_conv2d_weight_memory_format with a string", lambda d, l: l.nn.utils
      .convert_conv2d_weight_memory_format(l.nn.Conv2d(1, 1, 1, device=d), "channels_last"), TypeError,
      r"memory_format"),
]


def _tied(d, l):
    m = l.nn.Sequential(_lin(d, l), _lin(d, l))
    m[1].weight = m[0].weight
    return m


def _with_grad(d, l):
    p = l.nn.Parameter(z(d, l, 2))
    p.grad = z(d, l, 2)
    return p


CASES = OPTIM + DATA + NN_UTILS
EXEMPT = {}
