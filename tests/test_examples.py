"""The examples run, at tiny sizes, and say what they should: story 000's table, its mistake caught, the GAP fix
far smaller; story 002's loop learns and every memory technique lowers the peak of an optimizer step."""
import gc
import os
import sys

import pytest

import gpumemnet as gm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import seed000_regression  # noqa: E402
import seed002_unet  # noqa: E402
from story000 import STORY_000_TABLE  # noqa: E402


GiB = 1 << 30


@pytest.fixture
def meta():
    yield "meta"
    gc.collect()
    gm.memory.empty_cache("meta")


def test_seed000_small_run_catches_the_mistake_and_the_fix_is_smaller():
    lines = []
    r = seed000_regression.main(["--height", "64", "--width", "32", "--channel-div", "16", "--outputs", "512",
                                 "--batch-size", "4", "--steps", "4"], log=lines.append)
    text = "\n".join(lines)
    assert "Layer (type)" in text and "Output Shape" in text and "Param #" in text
    assert "Linear-16" in text and "[-1, 512]" in text
    fc, gap = r["heads"]["fc"], r["heads"]["gap"]
    assert fc["params"] == 4 * 9 * 2 + 4 + 8 * 9 * 4 + 8 + 16 * 9 * 8 + 16 + 16 * 9 * 16 + 16 + \
        32 * 9 * 16 + 32 + 3 * (32 * 9 * 32 + 32) + (32 * 2 * 1 * 512 + 512) + (512 * 512 + 512)
    assert gap["params"] * 5 < fc["params"]
    assert gap["peak"] < fc["peak"]
    # Adam's state: two buffers per parameter, created in the first step
    assert fc["by_category"]["optimizer"] >= 2 * 4 * fc["params"]
    for head in (fc, gap):
        # equal at this size: the first convolution's input and output make both peaks (with grad, the ReLU
        # outputs that only max pooling reads are not kept: README "Choices")
        assert head["validation"]["no_grad"] <= head["validation"]["with grad"]
        assert len(head["losses"]) == 4
    m = r["mistake"]
    assert "does not require grad and has no grad_fn" in m["backward_error"]
    assert "not learning" in m["warning"] and m["changed"] is False
    assert "NoGradientWarning" in text


def test_seed000_full_is_the_story_network_on_meta_only(meta):
    cpu_before = gm.memory.memory_allocated("cpu")
    lines = []
    r = seed000_regression.main(["--full"], log=lines.append)
    assert r["device"] == "meta"
    assert "\n".join(r["summary"][3:19]) == STORY_000_TABLE
    assert "Total params: 953,937,904" in r["summary"]
    fc, gap = r["heads"]["fc"], r["heads"]["gap"]
    assert fc["params"] == 953_937_904 and gap["params"] == 18_966_904
    # 953.9M x 16 B (weights, gradients, Adam's two moments) = 14.2 GiB: it fits the story's 15.92 GiB card with
    # an in-place Adam; the GAP head needs a fiftieth of it
    assert 953_937_904 * 16 <= fc["peak"] < 15.92 * GiB
    assert gap["peak"] < fc["peak"] / 40
    assert gm.memory.memory_allocated("cpu") - cpu_before < 64 << 20  # not a byte of the 3.8 GB on the CPU
    assert any("fits" in line for line in lines)


def test_seed002_small_run_learns_and_every_technique_lowers_the_peak():
    lines = []
    r = seed002_unet.main(["--size", "16", "--width", "4", "--depth", "2", "--train-images", "32", "--epochs", "3",
                           "--batch-size", "2", "--accumulation-steps", "4", "--lr", "1e-2"], log=lines.append)
    assert r["last_loss"] < r["first_loss"]
    assert 0.0 <= r["accuracy"] <= 1.0
    t = r["techniques"]
    assert list(t) == ["fp32", "checkpoint", "autocast", "accumulation x4", "all combined"]

    def step(name):
        return t[name]["peak"] - t[name]["resident"]
    for name in ("checkpoint", "autocast", "accumulation x4", "all combined"):
        assert step(name) < step("fp32"), name
        assert t[name]["by_category"]["activation"] < t["fp32"]["by_category"]["activation"], name
    assert step("all combined") < min(step(n) for n in ("checkpoint", "autocast", "accumulation x4"))
    # accumulation keeps a quarter of the feature maps; BatchNorm's per-channel statistics (a 512-byte block
    # each, whatever the batch) do not shrink
    assert t["accumulation x4"]["by_category"]["activation"] < t["fp32"]["by_category"]["activation"] / 3
    # parameters and Adam's state are the same whatever the technique
    assert len({r_["by_category"]["parameter"] for r_ in t.values()}) == 1
    assert len({r_["by_category"]["optimizer"] for r_ in t.values()}) == 1
    text = "\n".join(lines)
    assert "vs fp32" in text and "all combined" in text


def test_seed002_rejects_a_size_the_poolings_cannot_halve(capsys):
    with pytest.raises(SystemExit):
        seed002_unet.main(["--size", "12", "--depth", "3"])
    assert "must be a multiple of 2**depth = 8" in capsys.readouterr().err


def test_seed000_rejects_a_size_the_poolings_cannot_halve(capsys):
    with pytest.raises(SystemExit):
        seed000_regression.main(["--height", "48"])
    assert "multiples of 32" in capsys.readouterr().err
