"""More semantics PyTorch code relies on, checked against PyTorch itself (stop 38: the hunt through libraries built
on PyTorch: einops and lucidrains' models, model summaries and metrics, Hugging Face, Lightning and timm)."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


def _name(dtype):
    return str(dtype).split(".")[-1]


def test_cat_promotes_as_pytorch():
    for a, b in itertools.product(_DTYPES, _DTYPES):
        ref, got = _both(lambda L: _name(L.cat([L.zeros(1, dtype=getattr(L, a)),
                                                L.zeros(2, dtype=getattr(L, b))]).dtype))
        assert got == ref, (a, b)


def test_xlogy_computes_in_the_result_dtype():
    """float64 x with float32 y: the log of y widened (PyTorch), not float32's log widened afterwards."""
    def run(L):
        x = L.tensor([1.1, 0.0, 2.0], dtype=L.float64)
        y = L.tensor([1.3, 0.0, 7.7], dtype=L.float32)
        ints = L.xlogy(L.tensor([1, 0, 2]), L.tensor([2, 0, 3]))
        return _name(L.xlogy(x, y).dtype), L.xlogy(x, y).tolist(), ints.tolist()
    ref, got = _both(run)
    assert got[0] == ref[0] and got[2] == pytest.approx(ref[2], rel=1e-6)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-15)


def test_compiler_switches_and_distributed_names_import():
    """einx sets up its backend with torch.compiler.allow_in_graph; vector-quantize-pytorch imports
    torch.distributed.nn; accelerate imports torch.distributed.algorithms.join."""
    from gpumemnet.distributed.algorithms.join import Join, JoinHook, Joinable  # noqa: F401
    from gpumemnet.distributed import nn as dist_nn
    import gpumemnet.compat.compiler as compiler
    f = lambda x: x  # noqa: E731
    for name in ("allow_in_graph", "assume_constant_result", "nonstrict_trace"):
        assert getattr(compiler, name)(f)(3) == getattr(torch.compiler, name)(f)(3) == 3
    with compiler.set_stance("force_eager"):
        pass
    assert dist_nn.all_reduce is dist_nn.functional.all_reduce
    x = gm.tensor([1.0, 2.0])
    assert gm.logaddexp(x, x).tolist() == pytest.approx(torch.logaddexp(torch.tensor([1.0, 2.0]),
                                                                        torch.tensor([1.0, 2.0])).tolist())


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "uint8", "bool", "int64", "float16"])
def test_scatter_and_index_fill_of_a_number_into_any_dtype(dtype):
    """torchmetrics' top-k one-hot: zeros_like(p, dtype=int32).scatter_(-1, idx, 1); a float number truncates."""
    def run(L):
        dt, idx = getattr(L, dtype), L.tensor([[2], [0]])
        out = [L.zeros(2, 3, dtype=dt).scatter_(1, idx, 1), L.zeros(2, 3, dtype=dt).scatter(1, idx, 2.9),
               L.zeros(3, dtype=dt).index_fill_(0, L.tensor([1]), 5), L.zeros(3, dtype=dt).index_fill(0, L.tensor([2]),
                                                                                                     L.tensor(1))]
        if dtype != "bool":
            out.append(L.zeros(3, dtype=dt).index_put_((L.tensor([0, 0, 2]),), L.tensor([5, 5, 1], dtype=dt),
                                                       accumulate=True))
        return [t.tolist() for t in out]
    ref, got = _both(run)
    assert got == ref


def test_activation_modules_call_nn_functional_by_name():
    """ptflops counts by replacing F.relu, F.silu ...: the modules must call what PyTorch's call."""
    import gpumemnet.nn.functional as F
    calls = []
    saved = {n: getattr(F, n) for n in ("relu", "silu", "hardswish", "hardsigmoid", "mish", "linear", "softmax")}
    try:
        for n, f in saved.items():
            setattr(F, n, (lambda n, f: lambda *a, **k: calls.append(n) or f(*a, **k))(n, f))
        x = gm.randn(2, 4)
        for m in (gm.nn.ReLU(), gm.nn.ReLU(inplace=True), gm.nn.SiLU(), gm.nn.Hardswish(), gm.nn.Hardsigmoid(),
                  gm.nn.Mish(inplace=True)):
            m(x.clone())
        q = x[None]
        gm.nn.MultiheadAttention(4, 2)(q, q, q)  # self-attention: one packed in-projection
    finally:
        for n, f in saved.items():
            setattr(F, n, f)
    assert calls == ["relu", "relu", "silu", "hardswish", "hardsigmoid", "mish", "linear", "softmax", "linear"]
