"""gm.testing (python/gpumemnet/testing.py) against torch.testing: assert_close passes and fails on the same
inputs, raising the same exception type with the same facts in its message (PyTorch's message with 'torch.'
read as 'gpumemnet.'); make_tensor's shapes, dtypes, value ranges, layouts and refusals; assert_allclose."""
import dataclasses
import math
import re
import warnings

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")


def T(lib, values, dtype=None, dev="cpu", **kw):
    return lib.tensor(values, dtype=None if dtype is None else getattr(lib, dtype), device=dev, **kw)


@dataclasses.dataclass
class Point:
    x: object
    y: object


NAN, INF = math.nan, math.inf
# name -> (lib, dev) -> (actual, expected, kwargs)
CASES = {
    "equal floats": lambda l, d: (T(l, [1.0, 2.0], dev=d), T(l, [1.0, 2.0], dev=d), {}),
    "within float32 tolerance": lambda l, d: (T(l, [1.0, 2.0], dev=d), T(l, [1.0, 2.000002], dev=d), {}),
    "outside float32 tolerance": lambda l, d: (T(l, [1.0, 2.0, 3.0], dev=d), T(l, [1.0, 3.0, 3.0], dev=d), {}),
    "float64 default tolerance": lambda l, d: (T(l, [1.0, 2.0], "float64", d), T(l, [1.0, 2.0 + 1e-6], "float64", d),
                                               {}),
    "float16 within": lambda l, d: (T(l, [1.0, 2.0], "float16", d), T(l, [1.001, 2.0], "float16", d), {}),
    "float16 outside": lambda l, d: (T(l, [1.0, 2.0], "float16", d), T(l, [1.01, 2.0], "float16", d), {}),
    "bfloat16 within": lambda l, d: (T(l, [1.0, 2.0], "bfloat16", d), T(l, [1.0078125, 2.0], "bfloat16", d), {}),
    "bfloat16 outside": lambda l, d: (T(l, [1.0, 2.0], "bfloat16", d), T(l, [1.0, 2.5], "bfloat16", d), {}),
    "2-D mismatch index": lambda l, d: (T(l, [[1.0, 2.0], [3.0, 4.0]], dev=d), T(l, [[1.0, 2.0], [3.0, 5.0]], dev=d),
                                        {}),
    "3-D several mismatches": lambda l, d: (T(l, np.arange(24.0).reshape(2, 3, 4).tolist(), dev=d),
                                            T(l, (np.arange(24.0).reshape(2, 3, 4) * [1, 1, 1.5, 1]).tolist(),
                                              dev=d), {}),
    "int64 exact": lambda l, d: (T(l, [1, 2, 3], dev=d), T(l, [1, 4, 3], dev=d), {}),
    "int64 equal": lambda l, d: (T(l, [1, 2, 3], dev=d), T(l, [1, 2, 3], dev=d), {}),
    "uint8 no wrap in the message": lambda l, d: (T(l, [1, 2, 3], "uint8", d), T(l, [3, 2, 1], "uint8", d), {}),
    "int32 mismatch": lambda l, d: (T(l, [5, -2], "int32", d), T(l, [5, 7], "int32", d), {}),
    "int with tolerances": lambda l, d: (T(l, [1, 2], dev=d), T(l, [1, 3], dev=d), {"rtol": 0.5, "atol": 0}),
    "bool mismatch": lambda l, d: (T(l, [True, False], dev=d), T(l, [True, True], dev=d), {}),
    "bool with atol": lambda l, d: (T(l, [True, False], dev=d), T(l, [True, True], dev=d), {"rtol": 0, "atol": 1}),
    "0-d tensors": lambda l, d: (T(l, 1.0, dev=d), T(l, 2.0, dev=d), {}),
    "0-d expected zero": lambda l, d: (T(l, 1.0, dev=d), T(l, 0.0, dev=d), {}),
    "expected zero: inf relative": lambda l, d: (T(l, [0.0, 1.0], dev=d), T(l, [1.0, 0.0], dev=d), {}),
    "shape mismatch": lambda l, d: (T(l, [1.0], dev=d), T(l, [1.0, 2.0], dev=d), {}),
    "dtype mismatch": lambda l, d: (T(l, [1.0], dev=d), T(l, [1.0], "float64", d), {}),
    "dtype promoted": lambda l, d: (T(l, [1.0], dev=d), T(l, [1.0 + 1e-6], "float64", d), {"check_dtype": False}),
    "int vs float promoted": lambda l, d: (T(l, [1, 2], dev=d), T(l, [1.0, 2.0], dev=d), {"check_dtype": False}),
    "stride checked": lambda l, d: (l.zeros(2, 3, device=d), l.zeros(3, 2, device=d).t(), {"check_stride": True}),
    "stride ignored": lambda l, d: (l.zeros(2, 3, device=d), l.zeros(3, 2, device=d).t(), {}),
    "nan not equal": lambda l, d: (T(l, [1.0, NAN], dev=d), T(l, [1.0, NAN], dev=d), {}),
    "nan equal_nan": lambda l, d: (T(l, [1.0, NAN], dev=d), T(l, [1.0, NAN], dev=d), {"equal_nan": True}),
    "nan vs number": lambda l, d: (T(l, [1.0, NAN], dev=d), T(l, [1.0, 2.0], dev=d), {}),
    "inf equal": lambda l, d: (T(l, [INF, -INF], dev=d), T(l, [INF, -INF], dev=d), {}),
    "inf vs -inf": lambda l, d: (T(l, [INF], dev=d), T(l, [-INF], dev=d), {}),
    "empty": lambda l, d: (l.empty(0, device=d), l.empty(0, device=d), {}),
    "empty shapes differ": lambda l, d: (l.empty(0, 3, device=d), l.empty(3, 0, device=d), {}),
    "requires_grad": lambda l, d: (T(l, [1.0, 2.0], dev=d, requires_grad=True), T(l, [1.0, 2.0], dev=d), {}),
    "rtol alone": lambda l, d: (T(l, [1.0], dev=d), T(l, [1.0], dev=d), {"rtol": 1e-3}),
    "atol alone": lambda l, d: (T(l, [1.0], dev=d), T(l, [1.0], dev=d), {"atol": 1e-3}),
    "explicit tolerances pass": lambda l, d: (T(l, [1.0], dev=d), T(l, [1.05], dev=d), {"rtol": 0.1, "atol": 0}),
    "explicit tolerances fail": lambda l, d: (T(l, [1.0, 3.0], dev=d), T(l, [1.05, 2.0], dev=d),
                                              {"rtol": 0.01, "atol": 0.01}),
    "msg str": lambda l, d: (T(l, [1.0], dev=d), T(l, [2.0], dev=d), {"msg": "custom message"}),
    "msg callable": lambda l, d: (T(l, [1.0], dev=d), T(l, [2.0], dev=d), {"msg": lambda m: f"Header\n{m}\nFooter"}),
    "msg not applied to a type error": lambda l, d: ("a", "a", {"msg": "never shown"}),
    "meta values ignored": lambda l, d: (l.zeros(2, device="meta"), l.ones(2, device="meta"), {}),
    "meta vs cpu device": lambda l, d: (l.zeros(2, device="meta"), l.ones(2), {}),
    "meta vs cpu unchecked": lambda l, d: (l.zeros(2), l.ones(2, device="meta"), {"check_device": False}),
    "meta shape still checked": lambda l, d: (l.zeros(2, device="meta"), l.zeros(3, device="meta"), {}),
    # containers
    "list of tensors": lambda l, d: ([T(l, [1.0], dev=d), T(l, [2.0], dev=d)], [T(l, [1.0], dev=d),
                                     T(l, [2.5], dev=d)], {}),
    "tuple vs list": lambda l, d: ((1, 2.0), [1, 2.0], {}),
    "sequence lengths": lambda l, d: ([1, 2], [1, 2, 3], {}),
    "nested numbers": lambda l, d: ([[1.0, 2.0]], [[1.0, 2.5]], {}),
    "mapping keys": lambda l, d: ({"a": 1, "c": 2}, {"b": 1, "c": 2}, {}),
    "mapping values": lambda l, d: ({"a": T(l, [1.0, 2.0], dev=d)}, {"a": T(l, [1.0, 3.0], dev=d)}, {}),
    "mapping in sequence, callable msg": lambda l, d: ([{"w": T(l, [1.0], dev=d)}], [{"w": T(l, [1.5], dev=d)}],
                                                       {"msg": lambda m: "X" + m}),
    "dataclass of numbers": lambda l, d: (Point(1, 2), Point(1, 3), {}),
    "dataclass of tensors": lambda l, d: (Point(T(l, [1.0, 2.0], dev=d), 1.0), Point(T(l, [1.0, 4.0], dev=d), 1.0),
                                          {}),
    "size vs tuple": lambda l, d: (l.zeros(2, 3).shape, (2, 3), {}),
    # scalars and other types
    "python floats close": lambda l, d: (1.0, 1.0 + 1e-8, {}),
    "python floats far": lambda l, d: (1.0, 1.1, {}),
    "float expected zero": lambda l, d: (1.0, 0.0, {}),
    "int vs float": lambda l, d: (1, 1.0, {}),
    "int vs float unchecked": lambda l, d: (1, 1.0, {"check_dtype": False}),
    "ints differ": lambda l, d: (3, 5, {}),
    "nan scalars": lambda l, d: (NAN, NAN, {}),
    "nan scalars equal_nan": lambda l, d: (NAN, NAN, {"equal_nan": True}),
    "complex numbers": lambda l, d: (1 + 2j, 1 + 2j, {}),
    "complex numbers differ": lambda l, d: (1 + 2j, 1 + 3j, {}),
    "numpy scalar vs float": lambda l, d: (np.float32(1.0), 1.0, {}),
    "numpy int vs int": lambda l, d: (np.int64(3), 3, {}),
    "numpy float64 vs int": lambda l, d: (np.float64(1.0), 1, {}),
    "bools": lambda l, d: (True, False, {}),
    "numpy bool vs bool": lambda l, d: (np.bool_(True), True, {}),
    "bool vs int": lambda l, d: (True, 1, {}),
    "none vs none with rtol": lambda l, d: (None, None, {"rtol": 1}),
    "none vs int": lambda l, d: (None, 1, {}),
    "numbers with rtol alone": lambda l, d: (1, 1, {"rtol": 1}),
    "strings": lambda l, d: ("a", "a", {}),
    "objects": lambda l, d: (object(), object(), {}),
    "tensor vs float": lambda l, d: (T(l, [1.0], dev=d), 1.0, {}),
    "int vs tensor": lambda l, d: (2, T(l, 2, dev=d), {}),
    "tensor vs list": lambda l, d: (T(l, [1.0, 2.0], dev=d), [1.0, 2.0], {}),
    "numpy arrays close": lambda l, d: (np.array([1.0, 2.0]), np.array([1.0, 2.0]), {}),
    "numpy arrays far": lambda l, d: (np.array([1.0, 2.0]), np.array([1.0, 2.5]), {}),
    "numpy float32 arrays": lambda l, d: (np.array([1.0, 2.0], np.float32), np.array([1.0, 2.01], np.float32), {}),
    "numpy vs tensor": lambda l, d: (np.array([1.0, 2.0]), T(l, [1.0, 2.0], dev=d), {}),
    "numpy arrays, allow_subclasses off": lambda l, d: (np.array([1, 2]), np.array([1, 2]),
                                                        {"allow_subclasses": False}),
}


def _run(lib, name, dev):
    actual, expected, kw = CASES[name](lib, dev)
    try:
        lib.testing.assert_close(actual, expected, **kw)
    except Exception as e:  # noqa: BLE001 - compared below
        return type(e), str(e)
    return None, None


def _facts(text):
    """The message with the library's name taken out: what must agree."""
    return text.replace("torch.", "LIB.").replace("gpumemnet.", "LIB.")


@pytest.mark.parametrize("name", list(CASES))
def test_assert_close_agrees_with_torch(name):
    theirs_t, theirs = _run(torch, name, "cpu")
    ours_t, ours = _run(gm, name, "cpu")
    assert ours_t is theirs_t, f"{name}: PyTorch {theirs_t} {theirs!r}, gpumemnet {ours_t} {ours!r}"
    if theirs_t in (AssertionError, ValueError):
        assert _facts(ours) == _facts(theirs), f"{name}:\nPyTorch:\n{theirs}\ngpumemnet:\n{ours}"
    elif theirs_t is TypeError:  # the types' reprs are each library's: the wording and the builtin types agree
        assert ours.startswith("No comparison pair was able to handle inputs of type")
        for builtin in re.findall(r"<class '(?:builtins\.)?(\w+)'>", theirs):
            if builtin in ("str", "int", "float", "object", "list"):
                assert f"<class '{builtin}'>" in ours, ours


@pytest.mark.parametrize("name", ["outside float32 tolerance", "int64 exact", "2-D mismatch index", "nan vs number",
                                  "equal floats", "bool mismatch", "0-d tensors", "dtype promoted", "stride checked"])
def test_assert_close_on_device(name, device):
    """The same verdict and message with the tensors on the test's device."""
    cpu_t, cpu_msg = _run(gm, name, "cpu")
    dev_t, dev_msg = _run(gm, name, device)
    assert (dev_t, dev_msg) == (cpu_t, cpu_msg)


def test_assert_close_device_mismatch_and_move(device):
    if device == "cpu":
        a, b = gm.zeros(2), gm.zeros(2, device="meta")
    else:
        a, b = gm.zeros(2, device=device), gm.ones(2)
    with pytest.raises(AssertionError, match=r"attribute 'device' do not match"):
        gm.testing.assert_close(a, b)
    if device != "cpu":  # moved to the CPU to compare the values
        with pytest.raises(AssertionError, match=r"Mismatched elements: 2 / 2"):
            gm.testing.assert_close(a, b, check_device=False)


def test_bool_vs_int_is_a_runtime_error_as_in_torch():
    for lib in (torch, gm):
        with pytest.raises(RuntimeError):
            lib.testing.assert_close(True, 1)


def test_default_tolerances_are_the_boundary():
    """Just inside and just outside atol + rtol * |expected| per dtype, judged as PyTorch judges."""
    for dtype, (rtol, atol) in {"float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}.items():
        for factor in (0.9, 1.1):
            e = 100.0
            a = e + factor * (atol + rtol * e)
            verdicts = []
            for lib in (torch, gm):
                try:
                    lib.testing.assert_close(T(lib, [a], dtype), T(lib, [e], dtype))
                    verdicts.append(True)
                except AssertionError:
                    verdicts.append(False)
            assert verdicts[0] == verdicts[1] == (factor < 1), (dtype, factor, verdicts)


def test_assert_close_signature_matches_torch():
    import inspect
    ours = inspect.signature(gm.testing.assert_close)
    theirs = inspect.signature(torch.testing.assert_close)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
           [(p.name, p.kind, p.default) for p in theirs.parameters.values()]
    ours = inspect.signature(gm.testing.make_tensor)
    theirs = inspect.signature(torch.testing.make_tensor)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
           [(p.name, p.kind, p.default) for p in theirs.parameters.values()]


# ---- assert_allclose --------------------------------------------------------------------------------------------
ALLCLOSE = {
    "lists close": ([1.0, 2.0], [1.0, 2.00001], {}),
    "lists far": ([1.0, 2.0], [1.0, 2.01], {}),
    "nan equal by default": ([1.0, NAN], [1.0, NAN], {}),
    "nan unequal when asked": ([1.0, NAN], [1.0, NAN], {"equal_nan": False}),
    "int tensor vs float list": ("int", [1.0, 2.5], {}),
    "explicit tolerances": ([1.0], [1.5], {"rtol": 0.0, "atol": 0.6}),
    "msg": ([1.0], [3.0], {"msg": "own"}),
}


@pytest.mark.parametrize("name", list(ALLCLOSE))
def test_assert_allclose_agrees_with_torch(name):
    results = []
    for lib in (torch, gm):
        a, e, kw = ALLCLOSE[name]
        if a == "int":
            a = lib.tensor([1, 2])
        with pytest.warns(FutureWarning):
            try:
                lib.testing.assert_allclose(a, e, **kw)
                results.append((None, None))
            except Exception as err:  # noqa: BLE001
                results.append((type(err), _facts(str(err))))
    assert results[0] == results[1], name


# ---- make_tensor ------------------------------------------------------------------------------------------------
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
DEFAULT_RANGE = {"bool": (0, 1), "uint8": (0, 9), "float16": (-9, 9), "bfloat16": (-9, 9), "float32": (-9, 9),
                 "float64": (-9, 9)}


@pytest.mark.parametrize("dtype", DTYPES)
def test_make_tensor_default_ranges(dtype, device):
    t = gm.testing.make_tensor(400, dtype=getattr(gm, dtype), device=device)
    ref = torch.testing.make_tensor(400, dtype=getattr(torch, dtype), device="cpu")
    assert t.dtype == getattr(gm, dtype) and t.device.type == device and tuple(t.shape) == (400,)
    lo, hi = DEFAULT_RANGE.get(dtype, (-9, 9))
    v = t.cpu().float().numpy() if dtype != "bool" else t.cpu().numpy().astype(float)
    r = ref.float().numpy()
    for vals in (v, r):  # the same range as PyTorch's, and the range is used (not all one value)
        assert vals.min() >= lo and vals.max() <= hi, (dtype, vals.min(), vals.max())
        assert len(np.unique(vals)) > 1
    if dtype not in ("bool", "uint8") and not dtype.startswith("float") and dtype != "bfloat16":
        assert v.min() < 0 < v.max()  # signed integers: -9..9


@pytest.mark.parametrize("dtype", ["int64", "int8", "float32", "float64", "bfloat16"])
def test_make_tensor_low_high(dtype, device):
    t = gm.testing.make_tensor((3, 50), dtype=getattr(gm, dtype), device=device, low=-2.5, high=3.5)
    v = t.cpu().float().numpy()
    if dtype.startswith("int"):  # low rounded up, high exclusive after rounding up: [-2, 4)
        assert v.min() >= -2 and v.max() <= 3
        ref = torch.testing.make_tensor((3, 50), dtype=getattr(torch, dtype), device="cpu", low=-2.5, high=3.5)
        assert ref.min() >= -2 and ref.max() <= 3
    else:
        assert v.min() >= -2.5 and v.max() <= 3.5


def test_make_tensor_clamps_to_the_dtype():
    t = gm.testing.make_tensor(100, dtype=gm.uint8, device="cpu", low=-100, high=1000)
    assert t.long().min().item() >= 0 and t.long().max().item() > 100
    t = gm.testing.make_tensor(100, dtype=gm.float16, device="cpu", low=-1e6, high=1e6)
    assert np.isfinite(t.float().numpy()).all() and t.float().abs().max().item() > 1000
    t = gm.testing.make_tensor(100, dtype=gm.float32, device="cpu", low=-math.inf, high=math.inf)
    assert np.isfinite(t.numpy()).all()


@pytest.mark.parametrize("shape", [(3, 4), ((3, 4),), (gm.Size([2, 5]),), ([2, 5],), (), (0, 3), (5,)])
def test_make_tensor_shapes(shape, device):
    t = gm.testing.make_tensor(*shape, dtype=gm.float32, device=device)
    tshape = tuple(torch.Size(s) if isinstance(s, gm.Size) else s for s in shape)
    ref = torch.testing.make_tensor(*tshape, dtype=torch.float32, device="cpu")
    assert tuple(t.shape) == tuple(ref.shape)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (1,), (6,)])
def test_make_tensor_noncontiguous(shape, device):
    t = gm.testing.make_tensor(*shape, dtype=gm.float32, device=device, noncontiguous=True)
    ref = torch.testing.make_tensor(*shape, dtype=torch.float32, device="cpu", noncontiguous=True)
    assert tuple(t.shape) == tuple(ref.shape)
    assert t.is_contiguous() == ref.is_contiguous()
    assert tuple(t.stride()) == tuple(ref.stride())


def test_make_tensor_memory_format(device):
    """Accepted as PyTorch accepts it; gpumemnet keeps NCHW for every format (gm.channels_last's policy), so the
    tensor is contiguous and of the asked shape, where PyTorch's has channels-last strides."""
    for fmt in ("channels_last", "contiguous_format", "preserve_format"):
        t = gm.testing.make_tensor(2, 3, 4, 5, dtype=gm.float32, device=device, memory_format=getattr(gm, fmt))
        ref = torch.testing.make_tensor(2, 3, 4, 5, dtype=torch.float32, device="cpu",
                                        memory_format=getattr(torch, fmt))
        assert tuple(t.shape) == tuple(ref.shape) and t.is_contiguous()
    with pytest.raises(Exception):  # noqa: B017 - a non-format is refused by both
        torch.testing.make_tensor(2, 3, dtype=torch.float32, device="cpu", memory_format="nchw")
    with pytest.raises(TypeError):
        gm.testing.make_tensor(2, 3, dtype=gm.float32, device=device, memory_format="nchw")


@pytest.mark.parametrize("dtype", ["bool", "int64", "uint8", "float32", "float16"])
def test_make_tensor_exclude_zero(dtype, device):
    lo, hi = (0, 2) if dtype in ("bool", "int64", "uint8") else (-1e-3, 1e-3)
    for noncontiguous in (False, True):
        t = gm.testing.make_tensor(500, 2, dtype=getattr(gm, dtype), device=device, low=lo, high=hi,
                                   exclude_zero=True, noncontiguous=noncontiguous)
        v = t.cpu().float().numpy()
        assert (v != 0).all()
        if dtype == "float16":
            tiny = torch.finfo(torch.float16).tiny
            ref = torch.testing.make_tensor(1, dtype=torch.float16, device="cpu", low=0, high=1e-9,
                                            exclude_zero=True)
            assert ref.item() == tiny
            got = gm.testing.make_tensor(1, dtype=gm.float16, device=device, low=0, high=1e-9, exclude_zero=True)
            assert got.cpu().float().item() == tiny


def test_make_tensor_requires_grad(device):
    t = gm.testing.make_tensor(3, dtype=gm.float64, device=device, requires_grad=True)
    assert t.requires_grad and t.is_leaf
    (t * 2).sum().backward()
    assert np.allclose(t.grad.cpu().numpy(), 2.0)
    assert not gm.testing.make_tensor(3, dtype=gm.float64, device=device).requires_grad


MAKE_ERRORS = {
    "requires_grad of int64": (dict(dtype="int64", requires_grad=True), ValueError, r"requires_grad=True"),
    "requires_grad of bool": (dict(dtype="bool", requires_grad=True), ValueError, r"boolean and integral"),
    "low >= high": (dict(dtype="float32", low=3, high=2), ValueError, r"`low` must be less than `high`.*3 >= 2"),
    "int low >= high": (dict(dtype="int64", low=5, high=5), ValueError, r"5 >= 5"),
    "nan low": (dict(dtype="float32", low=math.nan), ValueError, r"cannot be NaN"),
    "nan high": (dict(dtype="int64", high=math.nan), ValueError, r"cannot be NaN"),
    "interval outside uint8": (dict(dtype="uint8", low=-10, high=-5), ValueError, r"only supports \[0, 256\)"),
    "interval outside bool": (dict(dtype="bool", low=2, high=5), ValueError, r"only supports \[0, 2\)"),
    "noncontiguous with memory_format": (dict(dtype="float32", noncontiguous=True, memory_format="channels_last"),
                                         ValueError, r"mutually exclusive"),
    "a string dtype": (dict(dtype="float32", dtype_as_str=True), TypeError, r"not supported"),
}


@pytest.mark.parametrize("name", list(MAKE_ERRORS))
def test_make_tensor_errors(name):
    kw, exc, pattern = MAKE_ERRORS[name]
    for lib in (torch, gm):
        args = dict(kw)
        as_str = args.pop("dtype_as_str", False)
        args["dtype"] = args["dtype"] if as_str else getattr(lib, args["dtype"])
        if "memory_format" in args:
            args["memory_format"] = getattr(lib, args["memory_format"])
        with pytest.raises(exc) as info:
            lib.testing.make_tensor(2, 3, device="cpu", **args)
        if lib is gm:
            assert re.search(pattern, str(info.value)), str(info.value)


def test_make_tensor_low_equals_high_warns_for_floats():
    for lib in (torch, gm):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = lib.testing.make_tensor(4, dtype=lib.float32, device="cpu", low=2.0, high=2.0)
        assert any(issubclass(x.category, FutureWarning) for x in w)
        assert (t.numpy() == 2.0).all()


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "uint8", "bfloat16"])
def test_make_tensor_on_meta(dtype):
    """Shapes and strides only (meta has no values): exclude_zero and noncontiguous work there too."""
    t = gm.testing.make_tensor(3, 4, dtype=getattr(gm, dtype), device="meta", exclude_zero=True, noncontiguous=True)
    ref = torch.testing.make_tensor(3, 4, dtype=getattr(torch, dtype), device="meta", exclude_zero=True,
                                    noncontiguous=True)
    assert t.device.type == "meta" and tuple(t.shape) == tuple(ref.shape) and tuple(t.stride()) == ref.stride()
