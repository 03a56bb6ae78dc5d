"""PyTorch semantics that scripts written for PyTorch rely on (stop 41: known gaps of the fifth hunt, and the sixth
hunt through the official tutorials, torch.func, GPT training code and the CIFAR model zoo), each checked against
PyTorch itself: the same function run under both libraries and the results compared."""
import importlib
import operator
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) under PyTorch and under gpumemnet."""
    return fn(torch), fn(gm)


# ---- operators with operands of a type of their own ---------------------------------------------------------
_OPERATORS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "pow": operator.pow,
              "matmul": operator.matmul, "mod": operator.mod, "floordiv": operator.floordiv, "and": operator.and_,
              "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift}
_REFLECTED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


class _Symbol:
    """A sympy-like operand: its reflected operators name themselves (pykan's symbolic formulas)."""

    def __getattr__(self, name):
        if name.startswith("__r") or name in ("__lt__", "__le__", "__gt__", "__ge__"):
            return lambda other: name
        raise AttributeError(name)


for _n in ("lt", "le", "gt", "ge"):
    setattr(_Symbol, f"__{_n}__", lambda self, other, _n=_n: f"__{_n}__")
for _n in ("pow", "matmul", "mod", "floordiv", "and", "or", "xor", "lshift", "rshift"):
    setattr(_Symbol, f"__r{_n}__", lambda self, other, _n=_n: f"__r{_n}__")


@pytest.mark.parametrize("name", sorted(_OPERATORS))
def test_operators_defer_to_a_foreign_operand_and_refuse_lists_as_pytorch(name):
    op = _OPERATORS[name]

    def run(L):
        t = L.tensor([1, 2])
        out = [op(t, _Symbol())]
        for bad in ([1, 2], None, "a"):
            try:
                op(t, bad)
                out.append("no error")
            except TypeError as e:
                out.append(str(e))
        return out
    ref, got = _both(run)
    assert got == ref
    assert ref[0] == (f"__{_REFLECTED[name]}__" if name in _REFLECTED else f"__r{name}__")
    with pytest.raises(TypeError, match="list"):  # the methods keep refusing, naming the operand's type
        getattr(gm.tensor([1, 2]), {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
                                     "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
                                     "mod": "remainder", "floordiv": "floor_divide"}.get(name, name))([1, 2])


def _name(dtype):
    return str(dtype).split(".")[-1]


# ---- autocast for a device the machine does not have ---------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available() or gm.cuda.is_available(), reason="checks a machine without CUDA")
def test_cuda_autocast_without_cuda_warns_and_runs_in_full_precision():
    def run(L):
        lin = L.nn.Linear(4, 3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with L.autocast("cuda"):
                out = [L.is_autocast_enabled(), L.is_autocast_enabled("cuda"), _name(lin(L.ones(2, 4)).dtype)]
            with L.autocast(device_type="cuda", dtype=L.bfloat16):
                out.append(_name((L.ones(2, 2) @ L.ones(2, 2)).dtype))
        return out + sorted({str(w.message) for w in caught if w.category is UserWarning})
    ref, got = _both(run)
    assert got == ref == [False, False, "float32", "float32",
                          "CUDA is not available or torch_xla is imported. Disabling autocast."]


# ---- norms of half tensors, warnings that point at the user's line ----------------------------------------
def test_half_norms_accumulate_in_float32():
    """300 squared is inf in float16: PyTorch sums the powers in float32 and rounds the norm once."""
    def run(L):
        x = L.tensor([300.0, 4.0], dtype=L.float16)
        b = L.tensor([0.37 * i - 5.0 for i in range(40)]).bfloat16()
        p = L.nn.Parameter(L.zeros(2, dtype=L.float16))
        p.grad = x.clone()
        total = L.nn.utils.clip_grad_norm_([p], 1.0)
        return [x.norm().item(), L.linalg.vector_norm(x).item(), x.norm(3).item(), b.norm().item(),
                b.norm(1).item(), L.tensor([50.0, 1.0], dtype=L.float16).norm(3).item(), total.item(),
                p.grad.tolist(), _name(x.norm().dtype)]
    ref, got = _both(run)
    assert got == ref
    assert ref[0] == 300.0


def test_copy_constructing_a_tensor_warns_at_the_callers_line():
    def run(L):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            L.tensor(L.ones(2))
            L.tensor([L.ones(()), L.ones(())])  # a list of 0-d tensors: no warning
            L.as_tensor(L.ones(2))
        return [(str(w.message), w.filename) for w in caught]
    ref, got = _both(run)
    assert got == ref and len(ref) == 1 and ref[0][1] == __file__


def test_grid_sample_default_align_corners_warning_points_at_the_caller():
    def run(L):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grid = L.nn.functional.affine_grid(L.tensor([[[1.0, 0, 0], [0, 1, 0]]]), (1, 1, 2, 2))
            L.nn.functional.grid_sample(L.ones(1, 1, 2, 2), grid)
        return [(str(w.message)[:40], w.filename) for w in caught]
    ref, got = _both(run)
    assert got == ref and [f for _, f in ref] == [__file__] * 2


# ---- activation checkpointing: PyTorch's default form and options -----------------------------------------------
def _ckpt(L):
    return importlib.import_module(L.__name__ + ".utils.checkpoint")


def test_checkpoint_left_without_use_reentrant_is_the_reentrant_form_with_the_warning():
    """PyTorch 2.15 still defaults to the reentrant form: a segment whose inputs need no grad gives an output that
    needs none, and its parameters get no gradient (two warnings say so)."""
    def run(L):
        ck = _ckpt(L)
        L.manual_seed(0)
        lin = L.nn.Linear(3, 2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = ck.checkpoint(lin, L.ones(2, 3))
            seq = ck.checkpoint_sequential(L.nn.Sequential(L.nn.Linear(3, 3), L.nn.Linear(3, 2)), 2, L.ones(1, 3))
        messages = [str(w.message).split(": ", 1)[-1][:60] for w in caught]
        with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
            ck.checkpoint(lambda x, scale: x * scale, L.ones(2, requires_grad=True), scale=2.0)
        with pytest.raises(ValueError, match="determinism_check"):
            ck.checkpoint(lin, L.ones(1, 3), use_reentrant=False, determinism_check="always")
        return [out.requires_grad, seq.requires_grad] + messages
    ref, got = _both(run)
    assert got == ref
    assert ref[0] is False and ref[1] is True


def test_checkpoint_options_and_context_fn():
    def run(L):
        ck = _ckpt(L)
        L.manual_seed(0)
        lin = L.nn.Linear(3, 2)
        x = L.ones(2, 3)
        entered = []

        class Ctx:
            def __init__(self, name):
                self.name = name

            def __enter__(self):
                entered.append(self.name)

            def __exit__(self, *exc):
                return False

        out = ck.checkpoint(lin, x, use_reentrant=False, determinism_check="none", debug=False, early_stop=True,
                            context_fn=lambda: (Ctx("forward"), Ctx("recompute")))
        out.sum().backward()
        out2 = ck.checkpoint(lin, x, use_reentrant=False, context_fn=ck.noop_context_fn)
        out2.sum().backward()
        with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
            ck.checkpoint(lin, x.requires_grad_(), use_reentrant=True, context_fn=lambda: (Ctx("a"), Ctx("b")))
        return [entered, lin.weight.grad.tolist(), [p.name for p in ck.CheckpointPolicy]]
    ref, got = _both(run)
    assert got == ref
    assert ref[0] == ["forward", "recompute"]


# ---- half-precision normalisations: PyTorch's float32 arithmetic and rounding --------------------------------
def _rows(L, dtype, scale=3.0, seed=0):
    return L.from_numpy(np.random.RandomState(seed).randn(16, 32).astype(np.float32) * scale).to(dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_rms_norm_renorm_and_embedding_max_norm(dtype):
    def run(L):
        dt = getattr(L, dtype)
        F = L.nn.functional
        big = L.tensor([[300.0, 4.0, 10.0, -200.0], [1.0, 2.0, 3.0, 4.0]], dtype=dt)
        x, small = _rows(L, dt), _rows(L, dt, 0.05, 1)
        w = _rows(L, L.float32, 1.0, 2)[0]
        out = [F.rms_norm(big, (4,)).tolist(), F.rms_norm(x, (32,), w.to(dt)).tolist(),
               F.rms_norm(small, (32,)).tolist(), L.nn.RMSNorm(32, dtype=dt)(small).tolist(),
               L.renorm(big, 2, 0, 100.0).tolist(), L.renorm(x, 3, 1, 2.0).tolist(), x.renorm(1, 0, 30.0).tolist()]
        for rows in (big.clone(), x.clone()):
            F.embedding(L.tensor([[0, 1], [1, 1]]), rows, max_norm=4.0)
            out.append(rows.tolist())
        return out
    ref, got = _both(run)
    assert got == ref
