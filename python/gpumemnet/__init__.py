"""gpumemnet: train CNNs on CPU and NVIDIA GPUs, memory first. (This file is the package's face, the top layer:
it imports every layer below and re-exports the public names; see _core/__init__.py and tests/test_layers_python.py.)

    import gpumemnet as gm
    x = gm.randn(8, 3, requires_grad=True)
    (x @ x.T).sum().backward()
    gm.memory.memory_stats("cpu")
"""
from ._loader import passive_openmp_waits, preload_openblas

preload_openblas()
passive_openmp_waits()

from . import _C  # noqa: E402
from ._core.dtype import (dtype, device, float32, float64, float16, bfloat16, int64, bool_, uint8, int8, int16,  # noqa: E402,F401,E501
                          int32, iinfo, finfo, get_default_dtype, set_default_dtype, memory_format,
                          contiguous_format, preserve_format, channels_last, channels_last_3d,
                          set_default_device, get_default_device, complex32, complex64, complex128, uint16, uint32,
                          uint64, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu,
                          float4_e2m1fn_x2, qint8, quint8, qint32, quint4x2, quint2x4)
from ._core.storage import TypedStorage, UntypedStorage  # noqa: E402,F401
from ._core.tensor import Tensor  # noqa: E402
from ._core.tensor_misc import bernoulli  # noqa: E402,F401  (issue 12, helper "nnlayers")
from ._core.creation import (  # noqa: E402,F401
    tensor, from_numpy, empty, full, zeros, ones, arange, rand, randn, zeros_like, ones_like, empty_like,
    rand_like, randn_like, full_like, cat, stack, where, matmul, exp, log, sqrt, abs, clamp, clip, sum, mean,
    max, min, amax, amin, argmax, argmin, var, std, maximum, minimum, pow, reshape, flatten, transpose, permute,
    squeeze, unsqueeze,
    as_tensor, scalar_tensor, is_tensor, is_floating_point, numel, eye, linspace, logspace, randint, randperm,
    split, chunk, narrow, gather, flip, roll, argsort, sort, topk, msort, take_along_dim, diff, concat, concatenate,
    hstack, vstack,
    div, divide, true_divide, round, floor, ceil, trunc, fix, square, rsqrt, mm, bmm, unbind,
    tensor_split, isnan, isinf, isfinite, isclose, allclose, equal, all, any, prod, norm, masked_fill,
    index_select, sign, logical_and, logical_or, logical_xor, logical_not, swapaxes, swapdims,
    movedim, select, neg, negative, mul, multiply, add, sub, subtract, clamp_min, clamp_max,
    sin, cos, tan, asin, acos, atan, arcsin, arccos, arctan, sinh, cosh, erf, erfc, log1p, expm1, log2, log10, exp2,
    reciprocal, lerp, addcmul, addcdiv, fmod, remainder, floor_divide, atan2, arctan2,
    cumsum, cumprod, logsumexp, tril, triu, diagonal, diag, outer, ger, dot, tile, nan_to_num, scatter, scatter_add,
    index_add, index_copy, index_fill, masked_select, nonzero, argwhere, count_nonzero, unique, unique_consecutive,
    bincount, meshgrid, median, quantile, nanmean, nansum, aminmax, kthvalue, cummax, cummin, logcumsumexp, trace,
    dist, rot90, fliplr, flipud, logaddexp, hypot, xlogy, logit, frac, float_power, absolute, sgn, clone, t, take,
    unflatten, moveaxis, repeat_interleave, clamp_)
from ._core.creation_more import (  # noqa: E402,F401
    broadcast_shapes, broadcast_to, broadcast_tensors, atleast_1d, atleast_2d, std_mean, var_mean, cdist, normal,
    randint_like, multinomial, searchsorted, bucketize, histc, tril_indices, triu_indices, is_nonzero, is_complex)
from ._core.size import Size  # noqa: E402
from ._core.complex import (  # noqa: E402,F401,A004  (complex tensors: _core/complex.py)
    view_as_complex, view_as_real, polar, complex, real, imag, angle, conj)
from ._core.tensor_str import set_printoptions  # noqa: E402,F401
from ._core.legacy_types import *  # noqa: E402,F401,F403  (torch.FloatTensor...)
from ._core.legacy_types import set_default_tensor_type  # noqa: E402,F401
from ._core.einsum import einsum  # noqa: E402
from ._core.activation import (  # noqa: E402,F401  (torch.relu, torch.sigmoid_, torch.softmax...)
    relu, relu_, sigmoid, sigmoid_, tanh, tanh_, torch_softmax as softmax, torch_log_softmax as log_softmax, prelu)
# register create_graph's formulas
from ._core import graph_backward, graph_backward_linalg, graph_backward_ops  # noqa: E402,F401
from ._core import custom_function  # noqa: E402,F401  (registers users' Function semantics)
from . import autograd, memory, cuda, accelerator, backends, random, amp, nn, optim, utils, distributed, futures  # noqa: E402,E501
from . import linalg, func, special, distributions, testing, profiler, foreach, cpu, fft, xpu, mps, signal  # noqa: E402,F401,E501
from .fft import stft, istft  # noqa: E402
from .linalg import svd_lowrank, pca_lowrank  # noqa: E402
from . import sparse  # noqa: E402
from .func import vmap  # noqa: E402,F401  (torch.vmap)
from .sparse import sparse_coo_tensor, sparse_coo, mm as spmm  # noqa: E402,F401
from .sparse import sparse_csr, sparse_csc, sparse_bsr, sparse_bsc  # noqa: E402,F401  (layout objects)
from ._core.nextafter import nextafter  # noqa: E402,F401
from .futures import Future  # noqa: E402,F401  (torch.Future: isinstance checks of what collectives return)
from ._device_modules import Stream, get_device_module  # noqa: E402,F401
from . import __config__, _tensor_str, overrides, return_types  # noqa: E402,F401  (torch.__config__.show(), torch._tensor_str)
from .serialization import save, load  # noqa: E402
from .memory import summary  # noqa: E402
from .amp import autocast  # noqa: E402
from .autograd import no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled  # noqa: E402
from .autograd import is_inference_mode_enabled  # noqa: E402,F401
from .autograd import is_anomaly_enabled, is_anomaly_check_nan_enabled  # noqa: E402,F401  (torch.is_anomaly_...)
from .random import (manual_seed, get_rng_state, set_rng_state, initial_seed, seed, Generator,  # noqa: E402,F401
                     default_generator)
from .dropin import as_torch  # noqa: E402
from ._core.tensor_special import *  # noqa: E402,F401,F403
from ._core.tensor_products import *  # noqa: E402,F401,F403
from ._core.tensor_misc import *  # noqa: E402,F401,F403
from ._core.tensor_decomp import *  # noqa: E402,F401,F403
from ._aliases import *  # noqa: E402,F401,F403
from ._interop import *  # noqa: E402,F401,F403
from .backends import (set_float32_matmul_precision, get_float32_matmul_precision,  # noqa: E402,F401
                       use_deterministic_algorithms, are_deterministic_algorithms_enabled,
                       is_deterministic_algorithms_warn_only_enabled)
globals().update(foreach.PRIVATE)  # torch._foreach_add_ and the rest
from ._core.out_arg import install as _install_out  # noqa: E402  (out= on the functions above)

_install_out(globals())
del _install_out
conj_physical = resolve_conj = resolve_neg = conj
dsmm = spmm  # torch.dsmm(sparse, dense) -> dense: sparse.mm

OutOfMemoryError = _C.OutOfMemoryError
ArgumentError = _C.ArgumentError  # ValueError + RuntimeError: caught by `except` of either (docs/C_API.md, Errors)
ArgumentTypeError = _C.ArgumentTypeError  # TypeError + RuntimeError
float = float32  # noqa: A001  (PyTorch's aliases)
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
char = int8
bool = bool_  # noqa: A001
chalf, cfloat, cdouble = complex32, complex64, complex128

__version__ = "0.1.0"


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """torch.compile's signature; gpumemnet runs eagerly (also as a decorator, @gm.compile or
    @gm.compile(mode=...)). A function comes back unchanged; a module comes back in PyTorch's wrapper,
    OptimizedModule, which runs it as it is: its state_dict keys carry PyTorch's `_orig_mod.` prefix (checkpoints
    of compiled models move between the two libraries), `_orig_mod` is the module (nanoGPT and HF code unwrap
    with it) and other attributes are the module's."""
    if model is None:
        return lambda m: compile(m)
    if isinstance(model, nn.Module) and not disable:
        from .nn.modules.compiled import OptimizedModule
        return OptimizedModule(model)
    return model


def set_num_threads(n):
    """Threads for gpumemnet's own CPU kernels (OpenMP) and for OpenBLAS."""
    _C.set_num_threads(n)


def get_num_threads():
    return _C.get_num_threads()


# PyTorch's argument parser takes NumPy's axis= / keepdims= (and NumPy integer dims) on these torch.* functions
# too; the Tensor methods, and the functions made of them, take those already (_core/arg_forms.py). Wrapped here
# by name, not where defined: nn.functional's softmax (the same function) is Python in PyTorch and refuses axis=.
from ._core.arg_forms import numpy_forms as _numpy_forms  # noqa: E402
for _name in ("softmax", "log_softmax", "mode", "nanmedian", "nanquantile", "std_mean", "var_mean", "cross",
              "index_reduce", "renorm", "repeat_interleave", "scatter_reduce", "select_scatter", "slice_scatter",
              "split_with_sizes", "narrow_copy", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
              "trapezoid", "cumulative_trapezoid", "trapz", "gradient", "nuclear_norm", "cosine_similarity",
              "pairwise_distance"):
    globals()[_name] = _numpy_forms(globals()[_name])
del _name

from .compat.jit import ScriptModule  # noqa: E402,F401  (torch.ScriptModule: Lightning's isinstance checks)
from .compat._torch_c import DeviceObjType, PyTorchFileReader, TensorType  # noqa: E402,F401  (in annotations)

from ._core.creation import snapshot_methods as _snapshot  # noqa: E402
_snapshot(Tensor)  # torch.<name>(t) calls Tensor's methods as defined here, not as patched later (as PyTorch's)
del _snapshot

from ._pickle_names import publish as _publish  # noqa: E402
_publish()  # every public function pickles by its public name (torch.abs, F.gelu)

# torch.torch is torch itself in PyTorch (a package importing its own name); kornia writes torch.torch.Tensor
torch = __import__("sys").modules[__name__]
