"""gpumemnet.Size (the type of Tensor.shape and Tensor.size()) against torch.Size, and Tensor.is_inference() against
PyTorch's. The one intended difference: the repr names gpumemnet, as its dtypes do (gpumemnet.float32), except
under the drop-in alias, where both print as PyTorch's (torch.Size, torch.float32)."""
import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _r(s):
    """A Size's repr with its library's name taken off: 'Size([2, 3])'."""
    return repr(s).split(".", 1)[1]


def _both(fn):
    """fn(lib) for gpumemnet and PyTorch: (value or exception type, message) each."""
    out = []
    for lib in (gm, torch):
        try:
            out.append(("ok", fn(lib)))
        except Exception as e:  # noqa: BLE001 - the exception is the result compared
            out.append((type(e), str(e)))
    return out


def test_shape_and_size_are_sizes():
    x, t = gm.zeros(2, 3), torch.zeros(2, 3)
    for s in (x.shape, x.size()):
        assert type(s) is gm.Size and isinstance(s, tuple)
        assert s == t.shape and s == (2, 3) and s != [2, 3]
    assert x.size(1) == 3 and type(x.size(1)) is int and x.size(-1) == t.size(-1)
    assert type(gm.zeros(()).shape) is gm.Size and gm.zeros(()).shape == ()
    assert type(x.t().shape) is gm.Size and x[0].shape == (3,)
    assert repr(x.shape) == "gpumemnet.Size([2, 3])" == str(x.shape)
    assert _r(x.shape) == _r(t.shape) and _r(gm.zeros(()).shape) == _r(torch.zeros(()).shape)
    assert isinstance(x.shape[0], int) and type(x.shape[0]) is type(t.shape[0])


@pytest.mark.parametrize("dims", [(), (0,), (5,), (2, 3, 4), (1, 1, 7)])
def test_numel_equality_and_hash(dims):
    s, t = gm.Size(dims), torch.Size(dims)
    assert s.numel() == t.numel() == gm.zeros(*dims).numel()
    assert s == t and s == dims and hash(s) == hash(t) == hash(dims)
    assert {s: 1}[dims] == 1 and len(s) == len(t) and list(s) == list(t)
    assert (s < (99,)) == (t < (99,)) and s.count(1) == t.count(1)


def test_slicing_and_arithmetic_give_sizes():
    s, t = gm.Size([2, 3, 4]), torch.Size([2, 3, 4])
    cases = [lambda a: a[1:], lambda a: a[::-1], lambda a: a[:0], lambda a: a[-2:], lambda a: a + (5,),
             lambda a: (5,) + a, lambda a: a + a, lambda a: a + (), lambda a: () + a, lambda a: a * 2,
             lambda a: 2 * a, lambda a: a * 0, lambda a: a * True, lambda a: a * np.int64(2), lambda a: a + (True,)]
    for f in cases:
        got, want = f(s), f(t)
        assert type(got) is gm.Size and type(want) is torch.Size and _r(got) == _r(want)
    assert s[0] == 2 and s[-1] == 4
    a = s
    a += (1,)
    assert type(a) is gm.Size and a == (2, 3, 4, 1)


def test_arithmetic_errors_as_pytorch():
    class R:
        def __radd__(self, other):
            return "radd"

        def __rmul__(self, other):
            return "rmul"

    cases = {
        "list": lambda L: L.Size([2]) + [1], "int": lambda L: L.Size([2]) + 1, "None": lambda L: L.Size([2]) + None,
        "list first": lambda L: [1] + L.Size([2]), "int first": lambda L: 1 + L.Size([2]),
        "float item": lambda L: L.Size([2]) + (1.5,), "float times": lambda L: L.Size([2]) * 1.5,
        "index": lambda L: L.Size([2])[5], "str index": lambda L: L.Size([2])["a"],
        "radd": lambda L: L.Size([2]) + R(), "rmul": lambda L: L.Size([2]) * R(),
    }
    for name, f in cases.items():
        (ka, ma), (kb, mb) = _both(f)
        assert ka == kb or (isinstance(ka, type) and isinstance(kb, type) and issubclass(ka, kb)), (name, ka, kb)
        norm = [m.replace("gpumemnet.Size", "Size").replace("torch.Size", "Size") for m in (ma, mb)]
        assert norm[0] == norm[1], (name, ma, mb)


def test_construction_as_pytorch():
    cases = [lambda: [2, 3], lambda: (), lambda: [True, False], lambda: [np.int64(3)], lambda: range(3),
             lambda: iter([1, 2]), lambda: b"ab", lambda: [-1], lambda: [2 ** 63 - 1], lambda: [-(2 ** 63)],
             lambda: np.array([2, 3])]
    for c in cases:
        got, want = gm.Size(c()), torch.Size(c())
        assert type(got) is gm.Size and got == want and all(type(v) is int for v in got)
    assert gm.Size(gm.tensor([2, 3])) == torch.Size(torch.tensor([2, 3])) == (2, 3)
    assert gm.Size([gm.tensor(4)]) == torch.Size([torch.tensor(4)]) == (4,)
    assert gm.Size([gm.tensor([4])]) == torch.Size([torch.tensor([4])]) == (4,)
    assert gm.Size() == torch.Size() == ()
    assert gm.Size(gm.Size([1, 2])) == (1, 2)


@pytest.mark.parametrize("arg", [["a"], [1.5], [1, 2.0], [None], 3, None, "ab", [np.float64(2.0)]])
def test_construction_errors_as_pytorch(arg):
    (ka, ma), (kb, mb) = _both(lambda L: L.Size(arg))
    assert ka is kb and ma == mb


@pytest.mark.parametrize("v", [2 ** 63, -(2 ** 63) - 1, 2 ** 70])
def test_sizes_beyond_int64(v):
    """PyTorch keeps such an int and raises when the Size is printed; gpumemnet raises the same error at once."""
    with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
        gm.Size([v])
    with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
        gm.Size([2]) + (v,)
    with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
        repr(torch.Size([v]))


def test_construction_errors_of_tensors_and_arguments():
    for bad in (lambda L: [L.tensor(1.5)], lambda L: [L.zeros(2)], lambda L: L.zeros(2, 2)):
        (ka, ma), (kb, mb) = _both(lambda L: L.Size(bad(L)))
        assert ka is kb is TypeError and ma == mb == "torch.Size() takes an iterable of 'int' (item 0 is 'Tensor')"
    for f in (lambda L: L.Size([2], [3]), lambda L: L.Size(x=[1]), lambda L: L.Size([2], sizes=[3])):
        (ka, ma), (kb, mb) = _both(f)
        assert ka is kb is TypeError and ma == mb
    with pytest.raises(TypeError, match="numel"):
        gm.Size([2]).numel(1)


def test_not_subclassable_as_pytorch():
    with pytest.raises(TypeError, match="not an acceptable base type"):
        type("Mine", (gm.Size,), {})
    with pytest.raises(TypeError, match="not an acceptable base type"):
        type("Mine", (torch.Size,), {})


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_and_copy(protocol):
    s = gm.zeros(2, 3).shape
    back = pickle.loads(pickle.dumps(s, protocol=protocol))
    assert type(back) is gm.Size and back == s
    assert s.__reduce__() == (gm.Size, ((2, 3),)) and torch.Size([2, 3]).__reduce__()[1] == ((2, 3),)
    for c in (copy.copy(s), copy.deepcopy(s)):
        assert type(c) is gm.Size and c == s


def test_size_method_and_shape_of_views():
    x = gm.zeros(4, 6)
    assert type(x.view(2, 12).shape) is gm.Size and x.view(2, 12).size() == (2, 12)
    assert type(x.unsqueeze(0).shape) is gm.Size and x.unsqueeze(0).shape[:2] == (1, 4)
    y = gm.zeros(2, 3)
    y.unsqueeze_(0)
    assert type(y.shape) is gm.Size and y.shape == (1, 2, 3)
    # legacy constructor: a Size is sizes, a tuple data, as in PyTorch
    assert tuple(x.new(x.shape).shape) == (4, 6) and tuple(x.new((4, 6)).shape) == (2,)
    assert gm.zeros(x.shape).shape == x.shape and gm.tensor(x.shape).tolist() == [4, 6]


def test_under_the_alias():
    code = ("import gpumemnet as gm; gm.as_torch(); import torch; x = torch.zeros(2, 3); "
            "assert isinstance(x.shape, torch.Size) and isinstance(x.size(), torch.Size); "
            "assert x.shape.numel() == 6 and torch.Size([2, 3]) == x.shape; print(x.shape)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "torch.Size([2, 3])"  # under the alias: as the script's PyTorch prints it


# ---- Tensor.is_inference ---------------------------------------------------------------------------------------
def _inference_flags(lib):
    x = lib.ones(2, 3)
    with lib.inference_mode():
        made, result, of_normal, detached = lib.ones(2), x * 2, x[0], x.detach()
        x.add_(1)  # an in-place write keeps x a normal tensor
        with lib.inference_mode(False):
            inner = lib.ones(2)
        view_of_made, from_data = made[:1], lib.tensor([1.0])
    with lib.no_grad():
        under_no_grad = lib.ones(2)
    after = made + 1  # outside inference mode: a normal tensor, even from an inference one

    @lib.inference_mode()
    def decorated():
        return lib.zeros(1)

    return [x.is_inference(), made.is_inference(), result.is_inference(), of_normal.is_inference(),
            detached.is_inference(), inner.is_inference(), view_of_made.is_inference(), from_data.is_inference(),
            under_no_grad.is_inference(), after.is_inference(), made.view(1, 2).is_inference(),
            made.clone().is_inference(), decorated().is_inference()]


def test_is_inference_as_pytorch():
    assert _inference_flags(gm) == _inference_flags(torch)


def test_is_inference_per_thread():
    import threading
    out = []
    with gm.inference_mode():
        t = threading.Thread(target=lambda: out.append(gm.ones(1).is_inference()))
        t.start()
        t.join()
        assert gm.ones(1).is_inference()
    assert out == [False]  # inference mode is the thread's, as in PyTorch
