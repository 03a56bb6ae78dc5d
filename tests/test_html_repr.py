"""Notebook friendliness (issue 12 §5): Estimate, summary(...), memory_summary() and the timeline render as HTML
in Jupyter (_repr_html_; the timeline as inline SVG) while their text in a terminal stays as it was; summary()
prints its table from a script and only returns it where the returned value is shown (IPython, the REPL)."""
import gc
import html
import sys
import types
from html.parser import HTMLParser
from xml.etree import ElementTree

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet.memory import timeline as _timeline


def _model():
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


class _Cells(HTMLParser):
    """The text of every table cell and header, row by row; fails on unbalanced tags."""

    def __init__(self):
        super().__init__()
        self.rows, self.stack, self.cell = [], [], None

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        assert self.stack.pop() == tag, f"unbalanced </{tag}>"
        if tag in ("td", "th"):
            self.rows[-1].append(html.unescape(self.cell).replace("\xa0", " ").strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def _cells(text):
    p = _Cells()
    p.feed(text)
    p.close()
    assert not p.stack
    return p.rows


def test_estimate_renders_as_a_table_and_keeps_its_repr():
    est = gm.memory.estimate(_model(), (1, 8, 8), batch_size=16)
    fmt = gm.memory.format_bytes
    assert repr(est).startswith(f"Estimate(training peak {fmt(est.total)} in '{est.peak_scope}'")
    rows = dict(_cells(est._repr_html_()))
    # Adam's state makes the steps from the second on peak higher: the row says so, with the first step's peak
    assert est.peak_step == 2 and est.first_step_total < est.total
    assert rows["training peak"] == (f"{fmt(est.total)} (reached in {est.peak_scope} from step 2 on (step 1: "
                                     f"{fmt(est.first_step_total)}))")
    assert repr(est).startswith(f"Estimate(training peak {fmt(est.total)} in '{est.peak_scope}' from step 2 on "
                                f"(step 1: {fmt(est.first_step_total)}), ")
    assert rows["inference peak"] == fmt(est.inference_total)
    for c, b in est.breakdown():
        assert rows[f"{c} at the peak"] == fmt(b)
    assert sum(b for _, b in est.breakdown()) == est.total


def test_summary_is_text_in_a_terminal_and_a_table_in_a_notebook(capsys):
    text = gm.summary(_model(), (1, 8, 8), batch_size=16)
    printed = capsys.readouterr().out
    assert printed.strip() == str(text).strip()  # from a script: printed, as torchsummary does
    assert isinstance(text, str) and repr(text) == str(text)  # shown as the table, not as a quoted string
    rows = _cells(text._repr_html_())
    assert rows[0] == ["Layer (type)", "Output Shape", "Param #", "Kept"]
    assert [r[0] for r in rows[1:]] == ["Conv2d-1", "ReLU-2", "Flatten-3", "Linear-4"]
    assert rows[4][1:3] == ["[16, 10]", "5,130"]
    assert "Training step peak: " in text._repr_html_() and text.estimate.params == 5210


@pytest.mark.parametrize("where", ["repl", "ipython"])
def test_summary_is_shown_once_where_values_are_shown(capsys, monkeypatch, where):
    if where == "repl":
        monkeypatch.setattr(sys, "ps1", ">>> ", raising=False)
    else:
        fake = types.ModuleType("IPython")
        fake.get_ipython = lambda: object()  # a running shell
        monkeypatch.setitem(sys.modules, "IPython", fake)
    text = gm.summary(_model(), (1, 8, 8), batch_size=16)
    assert capsys.readouterr().out == "" and "Total params: 5,210" in text


def test_summary_prints_when_ipython_is_imported_but_not_running(capsys, monkeypatch):
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: None  # imported by some library, no shell: a script
    monkeypatch.setitem(sys.modules, "IPython", fake)
    monkeypatch.delattr(sys, "ps1", raising=False)
    gm.summary(_model(), (1, 8, 8), batch_size=16)
    assert "Total params: 5,210" in capsys.readouterr().out


def test_memory_summary_text_and_html():
    gm.memory.reset_peak_memory_stats("meta")
    t = gm.empty(1000, device="meta")
    report = gm.memory.memory_summary("meta")
    assert isinstance(report, str) and report.startswith("=" * 76)  # print(gm.cuda.memory_summary()) as before
    rows = _cells(report._repr_html_())
    assert rows[0] == ["category", "current", "at the peak"]
    assert [r[0] for r in rows[1:]] == list(gm.memory.CATEGORIES) + ["total allocated"]
    s = gm.memory.memory_stats("meta")
    assert rows[-1] == ["total allocated", gm.memory.format_bytes(s["allocated"]["current"]),
                        gm.memory.format_bytes(s["allocated"]["peak"])]
    del t
    gc.collect()


def test_timeline_inline_svg():
    gm.memory.record_history(True, device="meta")
    try:
        a = gm.empty(4096, device="meta")
        b = gm.empty(1024, device="meta")
        del a, b
        tl = gm.memory.plot_timeline(device="meta")
    finally:
        gm.memory.record_history(False, device="meta")
    assert isinstance(tl, _timeline.Timeline) and tl._repr_html_() == tl._repr_svg_() == tl.svg
    root = ElementTree.fromstring(tl.svg)  # well-formed, self-contained SVG
    assert root.tag.endswith("svg") and "<script" not in tl.svg
    assert repr(tl).startswith("<memory timeline of meta: peak ") and "\n" not in repr(tl)


def test_ipython_picks_the_html(capsys):
    formatters = pytest.importorskip("IPython.core.formatters")
    est = gm.memory.estimate(_model(), (1, 8, 8), batch_size=16)
    fmt = formatters.HTMLFormatter()
    assert fmt(est) == est._repr_html_()
    assert fmt(gm.memory.memory_summary("meta")).startswith("<table")
    capsys.readouterr()
