"""Allocation history (csrc/allocator.c ring + python/gpumemnet/memory/timeline.py): the event stream is a faithful
ledger of the allocator (its running sum is the allocated figure), the ring keeps the newest events, and the
JSON dump, the HTML/SVG timeline and memory_summary report what memory_stats says."""
import gc
import json
import re
import sys
from xml.etree import ElementTree

import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.memory import timeline as H

CATS = ("parameter", "gradient", "optimizer", "activation", "activation_grad", "workspace", "input",
        "communication", "other")


@pytest.fixture(params=["cpu", "meta"])
def device(request):
    gc.collect()
    yield request.param
    H.record_history(False, device=request.param)
    gc.collect()


def train_step(device):
    """A small training step: parameters, forward, loss, backward, then drop everything but the model."""
    with gm.memory.category("parameter"):
        model = gm.nn.Linear(8, 4, device=device)
    x = gm.randn(16, 8, device=device)
    y = gm.randn(16, 4, device=device)
    with gm.memory.scope("fc forward"):
        loss = gm.nn.functional.mse_loss(model(x), y)
    with gm.memory.scope("backward"):
        loss.backward()
    return model


def recorded_step(device, max_entries=100000):
    base = gm.memory.memory_allocated(device)
    H.record_history(True, max_entries, device=device)
    model = train_step(device)
    gc.collect()
    return base, model, H.history(device)


def test_running_sum_is_the_allocated_figure(device):
    base, model, events = recorded_step(device)
    assert len(events) > 6
    kinds = {e["kind"] for e in events}
    assert {"alloc", "free"} <= kinds
    # alloc/free deltas sum to the allocated figure; retags move bytes between categories in +/- pairs
    total = base
    for i, e in enumerate(events):
        if e["kind"] != "retag":
            total += e["delta"]
        elif e["delta"] < 0:
            assert events[i + 1]["kind"] == "retag" and events[i + 1]["delta"] == -e["delta"]
        assert total == e["allocated"], f"event {i}: {e}"
        assert e["delta"] != 0 and e["delta"] % 512 == 0
        assert e["category"] in CATS
    assert total == gm.memory.memory_allocated(device)
    times = [e["t_ns"] for e in events]
    assert times == sorted(times) and times[0] >= 0
    scopes = {e["scope"] for e in events}
    assert "fc forward" in scopes and "backward" in scopes
    # the weight and bias were tagged parameter when allocated; the gradients as they arrived
    assert any(e["category"] == "parameter" and e["delta"] > 0 for e in events)
    assert any(e["category"] == "gradient" and e["delta"] > 0 for e in events)


def test_retag_is_recorded_as_a_pair(device):
    with gm.memory.category("other"), gm.memory.scope("made here"):
        t = gm.empty(300, device=device)  # 1200 B -> a 1536 B block
    H.record_history(True, 10, device=device)
    before = gm.memory.memory_allocated(device)
    t._category = "activation"  # what autograd does to a tensor it saves
    t._category = "activation"  # no change, no event
    events = H.history(device)
    assert [(e["kind"], e["delta"], e["category"], e["scope"], e["allocated"]) for e in events] == [
        ("retag", -1536, "other", "made here", before), ("retag", 1536, "activation", "made here", before)]
    del t
    assert H.history(device)[-1]["category"] == "activation" and H.history(device)[-1]["kind"] == "free"


def test_category_curves_rebuilt_backwards_match_stats(device):
    base, model, events = recorded_step(device)
    series = H._category_series(events, gm.memory.memory_stats(device))
    # per event, the categories add up to the allocated figure, and none goes negative
    for i, e in enumerate(events):
        mid_retag = e["kind"] == "retag" and e["delta"] < 0
        assert sum(series[c][i] for c in CATS) == e["allocated"] - (-e["delta"] if mid_retag else 0), i
        assert all(series[c][i] >= 0 for c in CATS), i
    w, b = model.weight, model.bias
    assert series["parameter"][-1] >= (w.numel() * 4 + 511) // 512 * 512


def test_ring_keeps_the_newest_entries(device):
    _, _, full = recorded_step(device)
    H.record_history(False, device=device)
    _, _, kept = recorded_step(device, max_entries=5)
    assert len(full) > 5 and len(kept) == 5
    strip = lambda evs: [(e["delta"], e["category"], e["scope"], e["kind"]) for e in evs]
    assert strip(kept) == strip(full[-5:])


def test_disabling_stops_and_drops(device):
    H.record_history(True, device=device)
    assert _C.history_enabled(device)
    t = gm.empty(10, device=device)
    assert len(H.history(device)) == 1
    H.record_history(False, device=device)
    assert not _C.history_enabled(device)
    assert H.history(device) == []
    del t
    u = gm.empty(10, device=device)
    assert H.history(device) == []
    del u


def test_record_history_argument_errors():
    with pytest.raises(ValueError, match="max_entries must be in"):
        H.record_history(True, 0)
    with pytest.raises(TypeError, match="max_entries must be an int"):
        H.record_history(True, 1.5)
    with pytest.raises(ValueError):
        H.record_history(True, device="gpu")
    assert not _C.history_enabled("cpu")


def test_dump_history_writes_json(device, tmp_path):
    recorded_step(device)
    doc = H.dump_history(tmp_path / "h.json", device=device)
    back = json.loads((tmp_path / "h.json").read_text())
    assert back == doc
    assert back["device"] == device
    assert len(back["events"]) > 6
    assert set(back["events"][0]) == {"t_ns", "delta", "category", "scope", "allocated", "kind", "location"}
    assert {e["location"] for e in back["events"]} == {"device"}  # no fallback set
    stats = gm.memory.memory_stats(device)
    assert back["at_peak"] == stats["at_peak"]
    assert set(back["at_peak"]["by_category"]) == set(CATS)
    assert back["allocated"] == back["events"][-1]["allocated"] == stats["allocated"]["current"]


def test_plot_timeline_html(device, tmp_path):
    _, _, events = recorded_step(device)
    path = H.plot_timeline(tmp_path / "t.html", device=device)
    page = open(path, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</svg>" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in page and "<link" not in page
    svg = page[page.index("<svg"):page.index("</svg>") + 6]
    ElementTree.fromstring(svg)  # well-formed: browsers render it standalone too
    drawn = re.findall(r'<path class="layer" data-category="(\w+)"', page)
    series = H._category_series(events, gm.memory.memory_stats(device))
    assert drawn == [c for c in CATS if any(series[c])]
    assert len(re.findall(r"<path\b", page)) == len(drawn)
    peak = max(range(len(events)), key=lambda i: events[i]["allocated"])
    label = f"peak {H.format_bytes(events[peak]['allocated'])} at event {peak}: {events[peak]['scope']}"
    assert 'class="peak-label"' in page and label in page
    for c in drawn:  # legend
        assert f">{c}</text>" in page


def test_plot_timeline_many_events_is_bounded(tmp_path):
    H.record_history(True, device="meta")
    try:
        for _ in range(1500):
            t = gm.empty(100, device="meta")
            del t
        H.plot_timeline(tmp_path / "t.html", device="meta")
        page = (tmp_path / "t.html").read_text()
        d = re.search(r'data-category="other"[^>]*d="([^"]*)"', page).group(1)
        assert d.count(",") <= 2 * H.MAX_COLUMNS
    finally:
        H.record_history(False, device="meta")


def test_plot_timeline_errors(tmp_path, monkeypatch):
    H.record_history(False, device="meta")
    with pytest.raises(RuntimeError, match="no history recorded on meta"):
        H.plot_timeline(tmp_path / "t.html", device="meta")
    H.record_history(True, device="meta")
    try:
        t = gm.empty(10, device="meta")
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        with pytest.raises(ImportError, match="needs matplotlib"):
            H.plot_timeline(tmp_path / "t.png", device="meta")
        del t
    finally:
        H.record_history(False, device="meta")


def test_plot_timeline_png_when_matplotlib_is_there(tmp_path):
    H.record_history(True, device="meta")
    try:
        t = gm.empty(10, device="meta")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            with pytest.raises(ImportError, match="needs matplotlib"):
                H.plot_timeline(tmp_path / "t.png", device="meta")
        else:
            H.plot_timeline(tmp_path / "t.png", device="meta")
            assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        del t
    finally:
        H.record_history(False, device="meta")


@pytest.mark.parametrize("n, text", [(0, "0 B"), (512, "512 B"), (1536, "1.50 KiB"), (3 * 2**20, "3.00 MiB"),
                                     (5 * 2**30 + 2**29, "5.50 GiB"), (-1024, "-1.00 KiB")])
def test_format_bytes(n, text):
    assert H.format_bytes(n) == text


def test_memory_summary(device):
    model = train_step(device)
    text = H.memory_summary(device)
    s = gm.memory.memory_stats(device)
    fb = H.format_bytes
    for c in CATS:
        row = next(line for line in text.splitlines() if line.split()[:1] == [c])
        cur, atp = s["by_category"][c]["current"], s["at_peak"]["by_category"][c]
        assert row.split() == [c] + fb(cur).split() + fb(atp).split()
    # the breakdown is the one at the moment of the peak: it adds up to the peak, which the total row shows
    assert sum(s["at_peak"]["by_category"].values()) == s["allocated"]["peak"]
    total = next(line for line in text.splitlines() if line.startswith(" total allocated"))
    assert total.split()[2:] == fb(s["allocated"]["current"]).split() + fb(s["allocated"]["peak"]).split()
    for key in ("num_allocs", "num_frees", "num_retries", "num_ooms"):
        word = key[4:]
        assert re.search(rf"\b{word} {s[key]}\b", text), key
    assert f"reserved {fb(s['reserved']['current'])}" in text
    assert f"cached but free {fb(s['cached_free'])}" in text
    assert f"largest free block {fb(s['largest_free_block'])}" in text
    assert f"segments {s['num_segment_allocs'] - s['num_segment_frees']}" in text
    assert fb(s["allocated"]["peak"]) in text
    del model
