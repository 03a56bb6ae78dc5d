"""An estimate stands for a fresh process: what else the caller holds on meta (a second model built there, the
full-size twin of the one estimated) must not change it. Before the fix, the free tails of the segments holding
such tensors served the estimate's small blocks: story 000's reduced net estimated 19209216 bytes alone and
19471360 beside its full-size twin."""
import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C

MiB = 1 << 20


def _net(width, device="meta"):
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1, device=device), nn.ReLU(),
                         nn.Conv2d(width, width, 3, padding=1, device=device), nn.MaxPool2d(4), nn.Flatten(),
                         nn.Linear(width * 16 * 16, 10, device=device))


def _estimate(model, device):
    # activations of 4 MiB: blocks of the large pool (from 20 MiB segments)
    return gm.memory.estimate(model, (3, 64, 64), F.cross_entropy, optimizer=lambda ps: gm.optim.Adam(ps),
                              batch_size=16, device=device)


def test_estimate_does_not_depend_on_live_meta_tensors():
    for device in ("cpu", "cuda"):
        small = _net(8)
        alone = _estimate(small, device)
        # Another meta model's parameters leave free room in their segments: small ones in a 2 MiB segment,
        # a 2.4 MB weight in a 20 MiB one.
        others = [_net(w) for w in (5, 7, 9)] + [nn.Linear(1000, 600, device="meta")]
        beside = _estimate(small, device)
        assert (beside.peak, beside.peak_reserved, beside.inference_peak) == \
            (alone.peak, alone.peak_reserved, alone.inference_peak), device
        del others
        again = _estimate(small, device)
        assert again.peak == alone.peak


def test_fresh_segments_skips_older_free_room_and_restores():
    gm.memory.empty_cache("meta")
    keep = gm.empty(1000, device="meta")  # 4000 bytes of a new 2 MiB small segment
    r0 = gm.memory.memory_reserved("meta")
    prev = _C._fresh_segments("meta", True)
    try:
        t = gm.empty(1000, device="meta")
        assert gm.memory.memory_reserved("meta") == r0 + 2 * MiB  # a segment of its own
        u = gm.empty(1000, device="meta")
        assert gm.memory.memory_reserved("meta") == r0 + 2 * MiB  # the new segment is reused
        nested = _C._fresh_segments("meta", True)
        assert nested > 0
        assert _C._fresh_segments("meta", nested) > nested  # restoring returns the inner setting
    finally:
        assert _C._fresh_segments("meta", prev) > 0
    del t, u
    gm.memory.empty_cache("meta")
    v = gm.empty(1000, device="meta")
    assert gm.memory.memory_reserved("meta") == r0  # off: the old segment's free room serves again
    del v, keep


def test_fresh_segments_bad_argument():
    import pytest
    with pytest.raises(ValueError, match="serial >= 0"):
        _C._fresh_segments("meta", -1)
    with pytest.raises(TypeError):
        _C._fresh_segments("meta", "yes")
