"""Tensors print as PyTorch's do, character for character, under every torch.set_printoptions setting: the
format choice (integral, fixed, scientific), padding, summarisation, line wrapping and where suffixes go. Both
libraries run with float64 as the default dtype, so that no dtype suffix (whose name differs) moves a line
break."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
ARRAYS = {
    "normal 3x5": R.standard_normal((3, 5)), "arange 2000": np.arange(2000.0), "arange 20": np.arange(20.0),
    "tiny and one": np.array([1e-8, 1.0]), "zero and one": np.array([0.0, 1.0]),
    "non-finite": np.array([np.inf, -np.inf, np.nan, 1.5]), "huge": np.array([1e9, 1.0]),
    "3-D wide range": R.standard_normal((4, 5, 6)) * 1000, "scalar": np.array(3.5), "ints": np.array([[1, -20], [3, 4]]),
    "bools": np.array([True, False]), "empty 0x3": np.zeros((0, 3)), "empty": np.zeros(0),
    "empty ints": np.zeros(0, dtype=np.int64), "empty bools 2x0": np.zeros((2, 0), dtype=bool),
    "int 5x6": np.arange(30).reshape(5, 6), "small": R.standard_normal(12) * 1e-5,
    "large and half": np.array([123456.789, 0.5]), "40x40": R.standard_normal((40, 40)),
    "negative zero": np.array([-0.0, 2.0]), "ratio 1000": np.array([1.0, 2.0, 1e3]),
    "ratio over 1000": np.array([1.0, 1001.0]), "nan": np.array([np.nan]), "int scalar": np.array(7),
}
SETTINGS = [{}, {"precision": 2}, {"sci_mode": True}, {"threshold": 5, "edgeitems": 1}, {"linewidth": 30},
            {"profile": "short"}, {"profile": "full"}, {"sci_mode": False}, {"edgeitems": 0, "threshold": 3}]


@pytest.fixture
def printing():
    torch_dtype, gm_dtype = torch.get_default_dtype(), gm.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    gm.set_default_dtype(gm.float64)
    yield
    torch.set_default_dtype(torch_dtype)
    gm.set_default_dtype(gm_dtype)
    torch.set_printoptions(profile="default", sci_mode=None)
    gm.set_printoptions(profile="default", sci_mode=None)


@pytest.mark.parametrize("setting", SETTINGS, ids=[str(s) or "default" for s in SETTINGS])
def test_repr_is_pytorchs(setting, printing):
    setting = {"profile": "default", **setting}
    torch.set_printoptions(**setting)
    gm.set_printoptions(**setting)
    for name, a in ARRAYS.items():
        got, want = repr(gm.tensor(a)), repr(torch.from_numpy(a))
        if "dtype=" in want:  # an empty tensor names its dtype, whose longer module name may move a line break
            got, want = "".join(got.split()), "".join(want.replace("dtype=torch.", "dtype=gpumemnet.").split())
        assert got == want, name


def test_suffixes_wrap_at_linewidth(printing):
    for width in (80, 40):
        torch.set_printoptions(linewidth=width)
        gm.set_printoptions(linewidth=width)
        a = R.standard_normal((2, 6))
        assert repr(gm.tensor(a, requires_grad=True)) == repr(torch.tensor(a, requires_grad=True))


def test_precision_stays_until_reset(printing):
    """Each call changes only what it names; a profile resets the four numbers."""
    for lib in (gm, torch):
        lib.set_printoptions(precision=2)
        lib.set_printoptions(linewidth=100)
        assert repr(lib.tensor([0.123456])) == "tensor([0.12])"
        lib.set_printoptions(profile="default")
        assert repr(lib.tensor([0.123456])) == "tensor([0.1235])"


def test_an_unknown_profile_is_refused():
    """PyTorch ignores an unknown profile silently; gpumemnet names it (a typo would otherwise go unseen)."""
    with pytest.raises(ValueError, match="profile must be one of"):
        gm.set_printoptions(profile="Full")
